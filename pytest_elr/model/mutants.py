"""Mutants of the oracle: each switches one rule of the model off.

The suite must notice every one; ``elr mutants`` (:mod:`pytest_elr.schedule.mutants`) checks that.
A mutant that only makes the invariants blind (the loss ledger's) fails no scenario by itself:
``NEGATIVE_CONTROLS`` are schedules on which a named invariant *must* fire (pre-ELR Kafka losing
acknowledged records within KIP-966's tolerance of min ISR - 1 unclean shutdowns), and a mutant
that silences one is killed.
``RULE_CHECKS`` hold one rule to the seeds on one hand-built state, the quickest check; the suite
reaches the same state too (KAFKA-19522's: ``hold_heartbeats`` keeps a registered broker fenced).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_elr.actions import Action, Cut, Heal, PowerOff, Produce, Restart, Slow
from pytest_elr.core.nodes import CONTROLLER, isolation_links
from pytest_elr.model.alternatives import outcomes
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.controller import ControllerContext, maybe_elect
from pytest_elr.model.ledger import LossLedger
from pytest_elr.model.profiles import Rules, get_profile, replace_rules
from pytest_elr.model.state import PartitionRecord

MUTANTS: dict[str, Rules] = {
    "elr-not-cleared-at-min-isr": Rules(clear_elr_at_min_isr=False),
    "elr-kept-after-election": Rules(clear_elr_after_election=False),
    "hwm-advances-under-min-isr": Rules(hwm_requires_min_isr=False),
    "unclean-broker-kept-in-elr": Rules(drop_unclean_from_elr=False),
    "fenced-elr-member-elected": Rules(elect_only_unfenced=False),
    "fenced-last-known-leader-elected": Rules(last_known_leader_unfenced=False),
    "balanced-inspects-every-replica": Rules(balanced_inspects_last_known_elr=False),
    "stale-broker-epoch-accepted": Rules(check_broker_epoch=False),
    "min-isr-not-capped-at-rf": Rules(cap_min_isr_at_rf=False),
    "tolerance-counts-crashes": Rules(crash_is_lossless=False),
    "tolerance-never-resets": Rules(ledger_resets_on_catch_up=False),
    "lagging-followers-leave-together": Rules(lagging_leave_in_any_order=False),
    "hwm-ignores-maximal-isr": Rules(hwm_waits_for_maximal_isr=False),
    "fenced-follower-kept-in-isr": Rules(fenced_leave_isr=False),
    "elr-takes-every-outsider": Rules(elr_only_from_isr=False),
    "elr-leader-not-in-isr": Rules(elr_leader_becomes_isr=False),
    "unclean-election-not-recovering": Rules(unclean_election_recovers=False),
    "acks-all-taken-under-min-isr": Rules(acks_all_refused_under_min_isr=False),
    "preferred-elected-from-elr-beside-isr": Rules(preferred_must_be_valid=False),
    "leader-epoch-bumped-on-elr-change": Rules(elr_change_keeps_leader_epoch=False),
    "dir-assignment-empties-elr": Rules(dir_assignment_keeps_elr=False),
    "reassignment-completes-under-min-isr": Rules(reassignment_waits_for_min_isr=False),
    "reassignment-cancelled-under-min-isr": Rules(cancellation_waits_for_min_isr=False),
    "failover-forgets-elr": Rules(failover_replays_elr=False),
    "fencing-changes-first-partition-only": Rules(broker_event_changes_every_partition=False),
    "broker-reaches-quorum-through-any-controller": Rules(broker_link_is_to_active_controller=False),
    "slowed-voter-link-in-time": Rules(slowed_voter_link_is_cut=False),
    "quorum-leader-without-a-majority": Rules(quorum_needs_a_majority=False),
    "isolated-controller-stays-in-the-quorum": Rules(isolated_voter_leaves_the_quorum=False),
    "metadata-changes-without-a-quorum-leader": Rules(metadata_frozen_without_a_leader=False),
    "controller-cut-from-brokers-fences-nobody": Rules(controller_cut_from_brokers_fences_them=False),
    "alter-partition-held-on-any-controller-link": Rules(alter_partition_to_active_controller=False),
    "voter-leads-without-round-trips": Rules(leading_needs_round_trips=False),
}

BROKERS = (0, 1, 2)


@dataclass(frozen=True)
class NegativeControl:
    """A schedule (brokers 0-2, min ISR 2) on which ``invariant`` must break under ``profile``."""

    name: str
    profile: str
    actions: tuple[Action, ...]
    invariant: str


NEGATIVE_CONTROLS: tuple[NegativeControl, ...] = (
    NegativeControl(
        # One unclean shutdown (the leader's power cut): within KIP-966's min ISR - 1 whether crashes
        # count or not. (With the followers crashed instead of cut off it is three unclean
        # shutdowns, beyond what KIP-966 promises for a release without unclean recovery.)
        "isolated-then-last-replica-loses", "legacy",
        (Produce(count=5), Cut(links=isolation_links(1, "all", BROKERS)), Cut(links=isolation_links(2, "all", BROKERS)),
         PowerOff(brokers=(0,)), Restart(broker=0)),
        "no_acked_loss",
    ),
    NegativeControl(
        "caught-up-then-last-replica-loses", "legacy",
        (Produce(count=5), PowerOff(brokers=(2,)), Restart(broker=2), Produce(count=5),
         Cut(links=isolation_links(1, "all", BROKERS)), Cut(links=isolation_links(2, "all", BROKERS)),
         PowerOff(brokers=(0,)), Restart(broker=0)),
        "no_acked_loss",
    ),
)


def _fenced_last_known_leader(rules: Rules) -> bool:
    """KAFKA-19522: ISR and ELR empty, LastKnownElr = [0] and broker 0 fenced -- the moment of its
    unclean registration. KIP-966 "Delivery plan": "elect the LastKnownLeader once it is
    unfenced", so no leader yet."""
    part = PartitionRecord(replicas=[0, 1, 2], leader=None, last_known_elr=[0])
    ctx = ControllerContext(profile=replace_rules(get_profile("kafka"), rules), min_isr=2,
                            is_unfenced=lambda b: b != 0, broker_epoch=lambda b: 1, log_info=lambda part, b: (0, 0))
    maybe_elect(part, ctx)
    return part.leader is None


def _lagging_followers_leave_on_their_own(rules: Rules) -> bool:
    """The leader's links slowed, both followers lag (min ISR 2). Design notes 5.2.1 judge each
    replica on its own, Case F: a follower removed while the new ISR >= Min ISR "is not added to the
    ELR" -- so the first to leave (either one) stays out of the ELR, the second joins it; both
    leaving in one change puts both in it. Every one of the three must be allowed. (The states
    where a slow follower is back in the ISR at the frozen HWM, another timing choice, are left
    out: ``ModelCluster._may_be_late_in_sync``.)"""
    model = ModelCluster(BROKERS, list(BROKERS), 2, replace_rules(get_profile("kafka"), rules))
    model.apply(Produce(count=3))
    allowed = {tuple(state.part.elr) for state, _ in
               outcomes(model, Slow(links=isolation_links(0, "brokers", BROKERS))) if not state.partition.late_in_sync}
    return allowed == {(1, 2), (1,), (2,)}


def _tolerance_counts_what_the_recovery_allows(rules: Rules) -> bool:
    """Two relied-on replicas crash at min ISR 2 (no byte lost). The design notes count only lossy
    shutdowns (5.1.2: "f replicas have experienced a concurrent lossy unclean shutdown"), which
    holds with balanced recovery (kip966): still within the tolerance. KIP-966 counts unclean ones
    ("when we only have min ISR - 1 unclean shutdowns"), which is all a release without unclean
    recovery can promise (kafka): beyond it."""
    within = {}
    for name in ("kip966", "kafka"):
        ledger = LossLedger()  # the rule alone: which replicas the protocol relied on is not asked here
        for broker in (1, 2):
            ledger.shutdown(broker, lossy=False, relied_on={0, 1, 2},
                            counts_crashes=get_profile(name).tolerance_counts_crashes,
                            crash_is_lossless=rules.crash_is_lossless)
        within[name] = ledger.within(2)
    return within == {"kip966": True, "kafka": False}


def pending_member_cut_off(rules: Rules) -> ModelCluster:
    """KIP-903's T0-T1 (scenarios/kip903_stale_broker_epoch.elr.yaml) on brokers 0, 1 with min ISR 1:
    follower 1 caught up and the leader's AlterPartition adding it is held on its way to the
    controller; 1 is cut off again and 5 more records are appended. The maximal ISR is [0, 1]."""
    pair = (0, 1)
    m = ModelCluster(pair, list(pair), 1, replace_rules(get_profile("kip966"), rules))
    m.apply(Produce(count=5))
    m.apply(Cut(links=isolation_links(1, "brokers", pair)))
    m.apply(Slow(links=((0, CONTROLLER),)))
    m.apply(Heal(links=isolation_links(1, "brokers", pair)))
    m.apply(Cut(links=isolation_links(1, "brokers", pair)))
    m.apply(Produce(count=5, acks="1"))
    return m


def _hwm_waits_for_the_maximal_isr(rules: Rules) -> bool:
    """KIP-966 "Additional High Watermark advancement requirement": "If maximal ISR > ISR, the
    message should be replicated to the maximal ISR before covering the message under HWM." The
    committed ISR [0] meets min ISR 1, but the HWM waits for 1, the pending member, at 5."""
    m = pending_member_cut_off(rules)
    return m.part.isr == [0] and m.partition.pending_alter is not None and m.hwm() == 5


#: rule checks: name -> whether the rules give the seeds' answer
RULE_CHECKS: dict[str, Callable[[Rules], bool]] = {
    "KAFKA-19522 fenced last known leader waited for": _fenced_last_known_leader,
    "design notes 5.2.1 Case F: lagging followers leave on their own": _lagging_followers_leave_on_their_own,
    "design notes 5.1.2 / KIP-966 Motivation: the tolerance counts lossy or unclean shutdowns":
        _tolerance_counts_what_the_recovery_allows,
    "KIP-966 HWM waits for the maximal ISR": _hwm_waits_for_the_maximal_isr,
}
