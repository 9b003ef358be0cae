"""Behaviour profiles and the rule switches the mutation check flips.

The same faults have different correct answers depending on what is implemented:

* ``kip966`` -- the whole KIP: ELR, the HWM rule, LastKnownELR as a set, unclean recovery.
* ``kafka``  -- what Apache Kafka 4.1+ ships: ELR and the HWM rule; LastKnownElr holds only the
  last leader, which is elected (uncleanly) once unfenced when ISR and ELR are both empty;
  no log-inspecting unclean recovery.
* ``legacy`` -- Kafka with ELR off (``eligible.leader.replicas.version=0``): the ISR never
  empties, the last ISR member is re-elected when it comes back, whatever it lost.

KIP-903's broker-epoch check and the HWM rule are shipped since 3.5 / 3.7 and are not gated by
the ELR feature, so every profile has them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum


class UncleanRecovery(str, Enum):
    """KIP-966 ``unclean.recovery.strategy``."""

    NONE = "none"
    BALANCED = "balanced"
    AGGRESSIVE = "aggressive"


class LastKnown(str, Enum):
    """What the controller remembers once ISR and ELR are gone."""

    NOTHING = "nothing"  # pre-ELR
    ELR_SET = "elr_set"  # KIP-966: ELR members that registered unclean
    LAST_LEADER = "last_leader"  # Kafka as shipped: only the last leader


@dataclass(frozen=True)
class Rules:
    """Individual protocol rules. Each one can be switched off to build a mutant of the oracle
    (``model/mutants.py``); each comment names the rule function in ``model/controller.py`` it switches.
    """

    clear_elr_at_min_isr: bool = True  # clear_elr_at_min_isr: ELR update rule 1 empties the ELR
    clear_elr_after_election: bool = True  # clear_elr_after_election: rule 1 again after an ELR election
    hwm_requires_min_isr: bool = True  # hwm_may_advance: the HWM waits for a committed ISR at min ISR
    drop_unclean_from_elr: bool = True  # register_unclean: an unclean registration leaves the ELR
    elect_only_unfenced: bool = True  # electable, reject_alter_partition: a fenced broker is not elected nor added
    check_broker_epoch: bool = True  # reject_alter_partition: KIP-903's stale broker epoch check
    cap_min_isr_at_rf: bool = True  # effective_min_isr: min ISR capped at the replication factor
    last_known_leader_unfenced: bool = True  # last_known_leader: a fenced last leader is waited for
    balanced_inspects_last_known_elr: bool = True  # unclean_recovery: Balanced inspects LastKnownELR only
    crash_is_lossless: bool = True  # ledger.LossLedger.shutdown: a crash does not enter the loss ledger
    ledger_resets_on_catch_up: bool = True  # ledger.LossLedger.caught_up: a replica that caught up leaves it
    lagging_leave_in_any_order: bool = True  # lagging_leave: followers lagging at once may leave in any order
    hwm_waits_for_maximal_isr: bool = True  # advance_hwm (ModelCluster.maximal_isr): pending members count
    fenced_leave_isr: bool = True  # fence: a fenced broker leaves the ISR
    elr_only_from_isr: bool = True  # extend_elr_under_min_isr: only replicas leaving the ISR join the ELR
    elr_leader_becomes_isr: bool = True  # maybe_elect: a leader elected from the ELR is the new ISR
    unclean_election_recovers: bool = True  # maybe_elect: an unclean election marks the partition RECOVERING
    acks_all_refused_under_min_isr: bool = True  # produce_rejection: acks=all refused before the append
    preferred_must_be_valid: bool = True  # elect_preferred_leader: an ELR member only while the ISR is empty
    elr_change_keeps_leader_epoch: bool = True  # one_partition_change: an ELR change alone keeps the leader epoch
    dir_assignment_keeps_elr: bool = True  # reassign_directory: a replica's new directory keeps the ELR
    reassignment_waits_for_min_isr: bool = True  # complete_reassignment: completed only at min ISR
    cancellation_waits_for_min_isr: bool = True  # cancel_reassignment: cancelled only at min ISR
    failover_replays_elr: bool = True  # ModelCluster._elect_controller: a new active controller keeps the ELR
    broker_event_changes_every_partition: bool = True  # ModelCluster._fence: a fencing changes every partition
    broker_link_is_to_active_controller: bool = True  # ModelCluster._reachable: heartbeats go to the active one
    slowed_voter_link_is_cut: bool = True  # ModelCluster._voter_link: a slowed link between voters is a cut
    quorum_needs_a_majority: bool = True  # ModelCluster.has_quorum: a quorum leader needs a majority of the voters
    isolated_voter_leaves_the_quorum: bool = True  # ModelCluster._voters_in_touch: one cut off is a group of one
    metadata_frozen_without_a_leader: bool = True  # ModelCluster._controller_round: no leader, no metadata change
    controller_cut_from_brokers_fences_them: bool = True  # ModelCluster._controller_unreachable: no heartbeat
    alter_partition_to_active_controller: bool = True  # ModelCluster._alter_held: held on the active one's link
    leading_needs_round_trips: bool = True  # ModelCluster._hearing: leading takes round trips with a majority


@dataclass(frozen=True)
class Deviation:
    """A documented difference between the system a profile describes and this model of it, which
    the executor accepts (and reports) instead of failing: the ``field`` of the observation (or
    ``produce``, ``caught_up``) that may differ, why, and the measurement or source that shows it."""

    field: str
    reason: str
    source: str
    #: a few words for the verdict table ("Kafka departs: <summary>")
    summary: str = ""


@dataclass(frozen=True)
class Profile:
    name: str
    elr: bool
    last_known: LastKnown
    unclean_recovery: UncleanRecovery | None
    rules: Rules = field(default_factory=Rules)
    #: KIP-858 directory ids: a broker that registers a new disk gets its partitions' directory
    #: reassigned, which bumps their partition epoch (so a late AlterPartition fails that check
    #: first, with INVALID_UPDATE_VERSION, before KIP-903's broker-epoch check is reached).
    directory_ids: bool = False
    #: after a min ISR change the leader's HWM waits for the next event (an append, a follower's log
    #: end moving, an ISR change) before it moves (controller.hwm_reevaluated; measured on Kafka 4.3.1)
    hwm_waits_for_an_event: bool = False
    #: the tolerance the data invariants promise within counts every unclean shutdown, crashes
    #: too (KIP-966 "Motivation": "when we only have min ISR - 1 unclean shutdowns"), not only
    #: lossy ones (design notes 5.1.2, which rely on balanced unclean recovery inspecting the logs:
    #: only a profile that has it may count lossy shutdowns alone; model/ledger.py)
    tolerance_counts_crashes: bool = False
    #: a reassignment completes once the ISR holds the replicas it adds, and is cancelled, whatever
    #: min ISR; the ELR of that change is built from the replica set before the move, so replicas it
    #: removed may stay in it (measured on Kafka 4.4.0: controller.complete_reassignment)
    reassignment_by_target_isr: bool = False
    description: str = ""
    #: differences from the real system the model does not reproduce (docs/model.md)
    deviations: tuple[Deviation, ...] = ()
    #: where the profile follows the real system against the KIP's text: the rule (``field``),
    #: how the system differs, and the measurement that shows it (docs/model.md)
    kip_differences: tuple[Deviation, ...] = ()

    def with_unclean_recovery(self, strategy: UncleanRecovery | None) -> Profile:
        if self.unclean_recovery is None:
            return self  # the profile has no unclean recovery at all
        return replace(self, unclean_recovery=strategy)


PROFILES: dict[str, Profile] = {
    "kip966": Profile(
        name="kip966",
        elr=True,
        last_known=LastKnown.ELR_SET,
        unclean_recovery=UncleanRecovery.BALANCED,
        description="the whole of KIP-966 (ELR, HWM rule, LastKnownELR, unclean recovery)",
    ),
    "kafka": Profile(
        name="kafka",
        elr=True,
        last_known=LastKnown.LAST_LEADER,
        unclean_recovery=None,
        directory_ids=True,
        hwm_waits_for_an_event=True,
        tolerance_counts_crashes=True,
        reassignment_by_target_isr=True,
        description="Apache Kafka 4.1+ as shipped (ELR on; LastKnownElr = last leader)",
        kip_differences=(
            Deviation(
                "change_min_isr",
                "any change of the topic's min.insync.replicas clears ELR and LastKnownElr (a "
                "ClearElrRecord), whatever the ISR; KIP-966 'Other behaviors' 2 removes the ELR only "
                "when the new min ISR <= ISR size (an update to the same value changes nothing)",
                "measured on Kafka 4.3.1: scenarios/min_isr_change_same_value.elr.yaml, "
                "scenarios/min_isr_change_leaderless.elr.yaml",
                summary="min ISR change clears ELR",
            ),
            Deviation(
                "change_cluster_min_isr",
                "every update of the cluster-wide min.insync.replicas, even to the value it has, clears ELR "
                "and LastKnownElr of every topic (a ConfigRecord and a ClearElrRecord with no topic name), "
                "even of a topic whose own value overrides it; under KIP-966 'Other behaviors' 2 that "
                "topic's min ISR did not change: nothing happens",
                "measured on Kafka 4.0.2 and 4.4.0: scenarios/min_isr_change_cluster_level.elr.yaml",
                summary="cluster-wide min ISR change clears every ELR",
            ),
            Deviation(
                "record_last_known_leader",
                "LastKnownElr holds only the last leader, elected uncleanly once unfenced; no "
                "unclean recovery (no log inspection)",
                "KIP-966 'Delivery plan'; Kafka 4.3.1: scenarios/kip966_t0_t7_walkthrough.elr.yaml",
                summary="LastKnownElr = last leader, elected once unfenced",
            ),
            Deviation(
                "hwm_reevaluated",
                "after a min ISR change the HWM moves only at the next append, follower progress or "
                "ISR change; the KIP says when it may move, not when it is evaluated",
                "measured on Kafka 4.3.1: scenarios/min_isr_change_lower_and_raise.elr.yaml",
                summary="HWM waits for an event after a min ISR change",
            ),
            Deviation(
                "reassign_directory",
                "a replica on a new disk, or moved between log dirs, moves the partition (KIP-858): "
                "a partition change of its own, so a late AlterPartition fails the partition-epoch "
                "check before KIP-903's broker-epoch check",
                "measured on Kafka 4.3.1: scenarios/kip903_stale_broker_epoch.elr.yaml; 4.4.0: "
                "scenarios/kafka_20716_jbod_move_then_lossy_leader.elr.yaml",
                summary="a replica's new directory moves the partition (KIP-858)",
            ),
            Deviation(
                "complete_reassignment",
                "a reassignment completes once the ISR holds the replicas it adds, whatever min ISR: "
                "[0, 1, 2] -> [1, 2, 3] with the ISR [0] completed as soon as 3 joined, leaving the ISR "
                "[3]; KIP-966 'Other behaviors' 4a: 'the reassignment can only be completed if the ISR "
                "size is larger or equal to min ISR'",
                "measured on Kafka 4.4.0 (2026-11-26): scenarios/kip966_reassignment_under_min_isr.elr.yaml",
                summary="reassignment completes under min ISR",
            ),
            Deviation(
                "cancel_reassignment",
                "a reassignment is cancelled whatever the ISR left; KIP-966 'Other behaviors' 4b: 'This min "
                "ISR requirement is also enforced when the reassignment is canceled'",
                "measured on Kafka 4.4.0 (2026-11-26): scenarios/kip966_reassignment_cancelled_under_min_isr.elr.yaml",
                summary="reassignment cancelled under min ISR",
            ),
            Deviation(
                "keep_elr_within_replicas",
                "replicas a completed reassignment removed stay in the ELR (the change builds the ELR from "
                "the replica set before the move); KIP-966 'Other behaviors' 4: 'upon completion, the ELR "
                "only contains replicas in the final replica set'",
                "measured on Kafka 4.4.0 (2026-11-26): [0, 1, 2] -> [0] at min ISR 2 left ELR [1, 2]; "
                "scenarios/kip966_reassignment_removes_elr_member.elr.yaml",
                summary="removed replicas stay in the ELR",
            ),
        ),
    ),
    "legacy": Profile(
        name="legacy",
        elr=False,
        last_known=LastKnown.NOTHING,
        unclean_recovery=None,
        directory_ids=True,
        hwm_waits_for_an_event=True,
        tolerance_counts_crashes=True,
        reassignment_by_target_isr=True,
        description="ELR off: the ISR never empties, the last ISR member is re-elected",
    ),
}

PROFILE_NAMES: tuple[str, ...] = tuple(PROFILES)


def replace_rules(profile: Profile, rules: Rules) -> Profile:
    """The profile with other rule switches (a mutant of it)."""
    return replace(profile, rules=rules)


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"unknown profile {name!r}; expected one of {', '.join(PROFILES)}") from None
