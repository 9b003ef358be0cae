"""Safety invariants checked after every step (after those of the TLA+ spec of KIP-966).

Each returns a list of violations naming the invariant and the state that broke it. The
data invariants only promise something while at most ``min ISR - 1`` replicas the protocol
relied on (leader, ISR, ELR) shut down uncleanly: that is the tolerance KIP-966 claims.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.partition import ModelPartition
from pytest_elr.model.profiles import LastKnown

#: the invariants about data: bounded by the loss ledger (checked only ``within_tolerance``), so a
#: negative control -- a run that must lose acknowledged records -- breaks them by design. On the
#: observed state, ``hwm_monotonic`` and ``leader_log_covers_hwm`` are their counterparts.
DATA_INVARIANTS = frozenset({
    "leader_completeness", "candidates_hold_hwm", "log_matching", "hwm_monotonic", "no_acked_loss",
    "last_known_elr_quorum", "leader_log_covers_hwm",
})
#: every invariant the model (``check``) or the observed state (the executor's
#: ``observed_invariants``) can report: what a scenario's ``known_failures[].fails`` may name
INVARIANT_NAMES = tuple(sorted(DATA_INVARIANTS | {
    "elr_disjoint_from_isr", "elr_empty_at_min_isr", "no_elr_without_feature", "isr_plus_elr_at_min_isr",
    "leader_unfenced", "no_stale_epoch_in_isr", "unclean_exclusion",
}))


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str
    #: the partition whose state breaks it (None: a topic of one partition, which needs no name)
    partition: int | None = None

    def __str__(self) -> str:
        return f"invariant {self.invariant} broken: {self.detail}"


#: every invariant ``check`` knows, in the order it checks them (tests/test_invariants_fire.py
#: plants a violation of each and fails on a name it has no test for)
INVARIANTS: tuple[str, ...] = (
    "elr_disjoint_from_isr", "elr_empty_at_min_isr", "no_elr_without_feature", "isr_plus_elr_at_min_isr",
    "leader_unfenced", "no_stale_epoch_in_isr", "elr_from_isr", "unclean_election_recovers",
    "unclean_exclusion", "isr_unfenced", "leader_in_isr", "registering_broker_out_of_isr", "isr_joins_hold_hwm",
    "hwm_only_at_min_isr", "acked_on_min_isr", "leader_completeness", "candidates_hold_hwm", "log_matching",
    "hwm_monotonic", "no_acked_loss", "last_known_elr_quorum",
)

_silenced: set[str] = set()


@contextmanager
def silenced(*names: str) -> Iterator[None]:
    """Switch the named invariants off for the block: how the mutation check proves which
    invariant kills a mutant (``schedule/mutants.py``)."""
    unknown = set(names) - set(INVARIANTS)
    if unknown:
        raise KeyError(f"unknown invariants {sorted(unknown)}")
    added = set(names) - _silenced
    _silenced.update(added)
    try:
        yield
    finally:
        _silenced.difference_update(added)


def within_tolerance(m: ModelCluster) -> bool:
    return m.within_tolerance()


def check(m: ModelCluster, last_hwm: int | None = None) -> list[Violation]:
    """Every invariant in every partition. ``last_hwm`` is partition 0's HWM as last seen (what the
    one-partition callers pass: its committed length); another partition's HWM is held to its own
    committed length."""
    found: list[Violation] = []
    for p in m.partitions.values():
        found += _check_partition(m, p, last_hwm if p.id == 0 else len(p.committed))
    return found


def _check_partition(m: ModelCluster, p: ModelPartition, last_hwm: int | None) -> list[Violation]:
    found: list[Violation] = []
    part = p.part
    state = (
        (f"partition={p.id} " if len(m.partitions) > 1 else "")
        + f"leader={part.leader} isr={part.isr} elr={part.elr} "
        f"last_known_elr={part.last_known_elr} fenced={sorted(m.fenced)} "
        f"leo={ {r: p.logs[r].leo for r in p.replicas} } hwm={p.hwm()} "
        f"committed={len(p.committed)}"
    )

    def fail(name: str, why: str) -> None:
        if name in _silenced:
            return
        found.append(Violation(name, f"{why} (state: {state})", p.id if len(m.partitions) > 1 else None))

    # Structural rules of the ELR, whatever was lost.
    overlap = set(part.elr) & set(part.isr)
    if overlap:
        fail("elr_disjoint_from_isr", f"{sorted(overlap)} in both ISR and ELR")
    # The replicas a reassignment removed that Kafka keeps in the ELR are the kafka profile's
    # declared departure (``keep_elr_within_replicas``): only there are they left out of the count;
    # under the KIP the ELR holds none (KIP-966 "Other behaviors" 4).
    counted = set(part.elr) & set(part.replicas) if m.profile.reassignment_by_target_isr else set(part.elr)
    if m.profile.elr and len(part.isr) >= m.eff_min_isr_of(p) and counted:
        fail("elr_empty_at_min_isr", f"ISR has {len(part.isr)} >= min ISR {m.eff_min_isr_of(p)}")
    if not m.profile.elr and part.elr:
        fail("no_elr_without_feature", "ELR is not empty with the feature off")
    # KIP-966 "Eligible Leader Replicas": "ELR + ISR size will not be dropped below the min ISR
    # unless the controller discovers an ELR member has an unclean shutdown." (Or, on Kafka, a min
    # ISR change cleared the ELR: ``quorum_shrunk_by``.)
    quorum = set(part.isr) | set(part.elr)
    if m.profile.elr and p.quorum_shrunk_by is None and not part.recovering and len(quorum) < p.frozen_min_isr:
        fail("isr_plus_elr_at_min_isr", f"ISR + ELR = {sorted(quorum)} < min ISR {p.frozen_min_isr}")
    # KIP-966 "Controller behaviors" 3 / "Unclean recovery" 3b: only an unfenced replica leads.
    if part.leader is not None and part.leader in m.fenced:
        fail("leader_unfenced", f"leader {part.leader} is fenced")
    # KIP-903 "Proposed Design": "A replica with a stale broker epoch is not eligible to join the ISR".
    if p.stale_in_isr:
        fail("no_stale_epoch_in_isr", f"{sorted(p.stale_in_isr)} joined the ISR with a stale broker epoch")
    for (before, after), admitted in zip(p.changes, p.admitted, strict=True):
        # KIP-966 ELR update rule 2: "b. add (the current ISR - the proposed ISR) to ELR" -- the
        # ELR's only source; rule 1 empties it at min ISR.
        joined = set(after.elr) - set(before.elr) - set(before.isr)
        if joined:
            fail("elr_from_isr", f"{sorted(joined)} joined the ELR {list(after.elr)} from outside the ISR "
                                 f"{list(before.isr)}")
        # Design notes 5.3.1: "the controller must report all unclean recoveries as potential data
        # loss events" -- the RECOVERING state (KIP-966 "Unclean recovery" elects from ISR, then
        # ELR, cleanly; anything else is unclean). Its contrapositive is "a clean election picks
        # from ISR + ELR only" -- the ISR as the change proposes it: a member the leader's
        # AlterPartition adds, caught up, may be elected in the same change (a reassignment that
        # completes and moves the leader away: Kafka's PartitionChangeBuilder elects from targetIsr).
        elected = after.leader is not None and after.leader_epoch != before.leader_epoch
        if elected and after.leader not in set(before.isr) | set(before.elr) | admitted and not after.recovering:
            fail("unclean_election_recovers",
                 f"leader {after.leader} elected from outside ISR {list(before.isr)} + ELR "
                 f"{list(before.elr)} without RECOVERING")
    # Design notes 5.1.2, Unclean Exclusion: "A replica that has restarted after an unclean shutdown
    # must be excluded from leadership, the ISR and ELR until it has provably caught-up to the
    # leader." (Pre-ELR Kafka does not have the property: it re-elects its last ISR member.)
    if m.profile.elr:
        suspect = p.unclean_restarted & (quorum | ({part.leader} if part.leader is not None else set()))
        if suspect:
            fail("unclean_exclusion", f"{sorted(suspect)} restarted uncleanly and is leader, ISR or ELR "
                                      "without having caught up")

    # KIP-966 "ISR invariants": "The proposal maintains the behavior of removing a replica out of
    # ISR if it is lagging from the ISR or it is fenced by the controller." (Pre-ELR Kafka keeps its
    # last ISR member however fenced: ``keep_last_isr_member``.)
    if m.profile.elr and set(part.isr) & m.fenced:
        fail("isr_unfenced", f"ISR members {sorted(set(part.isr) & m.fenced)} are fenced")
    # KIP-966 "ISR invariants": "the controller ensures data safety by selecting any broker within
    # the ISR as the leader"; "Controller behaviors" 3: "elected as leader, added to ISR".
    if part.leader is not None and part.leader not in part.isr:
        fail("leader_in_isr", f"leader {part.leader} is not in the ISR")
    # KIP-966 "Controller behaviors" 4: "During the broker registration, if the broker had an
    # unclean shutdown, the controller will remove the broker from ISR and ELR before persisting the
    # registration record." A broker not registered yet was fenced when it went away (cleanly:
    # controlled shutdown; or not: its session expired), so it already left leadership and the ISR.
    registering = {b for b, broker in m.brokers.items() if not broker.registered}
    if m.profile.elr and registering & (set(part.isr) | {part.leader}):
        fail("registering_broker_out_of_isr",
             f"{sorted(registering & (set(part.isr) | {part.leader}))} lead or sit in the ISR before registering")
    # KIP-966 "Additional High Watermark advancement requirement": "If maximal ISR > ISR, the message
    # should be replicated to the maximal ISR before covering the message under HWM" -- so a replica
    # the controller adds to the ISR already holds everything below the leader's HWM.
    for broker, held, hwm in p.isr_joins:
        if held < hwm:
            fail("isr_joins_hold_hwm", f"broker {broker} joined the ISR holding {held} of the {hwm} records "
                                       "below the HWM")
    # KIP-966 "Additional High Watermark advancement requirement": "High Watermark can only advance
    # if the ISR size is larger or equal to min.insync.replicas" (the ISR persisted by the controller).
    for start, end, isr_size, min_isr in p.hwm_moves:
        if isr_size < min_isr:
            fail("hwm_only_at_min_isr", f"HWM moved {start} -> {end} with an ISR of {isr_size} < min ISR {min_isr}")
    # KIP-966 "Additional High Watermark advancement requirement": "the server will reject the ack=all
    # requests due to not enough replicas to meet the min ISR"; "ISR invariants": "the leader will
    # commit to the request only when the message has been replicated to the entire ISR".
    for value, holders, min_isr in p.acks:
        if holders < min_isr:
            fail("acked_on_min_isr", f"acks=all record {value} acknowledged with {holders} < min ISR {min_isr} copies")

    # The partition's own tolerance (an unclean election the operator chose, counted for the
    # cluster, voids every partition's).
    if not (p.ledger.within(p.frozen_min_isr) and not m.ctx.chosen_unclean_elections):
        return found

    committed = p.committed
    n = len(committed)
    leader = p.leader_replica()
    if leader is not None and part.leader not in m.fenced and leader.log[:n] != committed:
        fail("leader_completeness", f"leader {part.leader} lacks committed records below {n}")
    # A candidate that lost data is fenced until it re-registers (and is then dropped), so only
    # electable members must be complete.
    for b in sorted((set(part.isr) | set(part.elr)) - m.fenced):
        if p.logs[b].log[:n] != committed:
            group = "ISR" if b in part.isr else "ELR"
            fail("candidates_hold_hwm", f"{group} member {b} lacks committed records below {n}")
    for r in p.replicas:
        log = p.logs[r]
        if log.log[: min(log.hwm, n)] != committed[: min(log.hwm, n)]:
            fail("log_matching", f"replica {r} disagrees with the committed log below its HWM")
    hwm = p.hwm()
    if last_hwm is not None and hwm is not None and part.leader not in m.fenced and hwm < last_hwm:
        fail("hwm_monotonic", f"HWM went back from {last_hwm} to {hwm}")
    if leader is not None and part.leader not in m.fenced:
        present = {r.value for r in leader.log}
        missing = [r.value for r in p.acked if r.value not in present]
        if missing:
            fail("no_acked_loss", f"acknowledged acks=all records gone: {missing[:5]}")
    if (
        m.profile.last_known is LastKnown.ELR_SET
        and not part.isr
        and not part.elr
        and len(part.last_known_elr) < p.frozen_min_isr
    ):
        fail("last_known_elr_quorum", f"|LastKnownELR| < min ISR {p.frozen_min_isr}")
    return found
