"""The controller's partition rules (KIP-966, KIP-903), in the spirit of Kafka's
``PartitionChangeBuilder``: every change proposes an ISR, the ELR follows from it, then a leader
is elected if the partition needs one. docs/model.md quotes the KIP sentence behind each rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_elr.model.profiles import LastKnown, Profile, UncleanRecovery
from pytest_elr.model.state import AlterPartition, PartitionRecord


@dataclass
class ControllerContext:
    profile: Profile
    min_isr: int  # as configured
    is_unfenced: Callable[[int], bool]
    broker_epoch: Callable[[int], int]
    #: (last leader epoch in the log, log end offset) of a live replica, for unclean recovery
    log_info: Callable[[int], tuple[int, int]]

    def eff(self, part: PartitionRecord) -> int:
        return effective_min_isr(self.min_isr, len(part.replicas), self.profile)


def effective_min_isr(min_isr: int, replication_factor: int, profile: Profile) -> int:
    """KIP-966: the effective min ISR is min(min.insync.replicas, replication factor)."""
    if profile.rules.cap_min_isr_at_rf and replication_factor:
        return min(min_isr, replication_factor)
    return min_isr


def propose_isr(part: PartitionRecord, proposed: list[int], ctx: ControllerContext) -> None:
    """Apply a proposed ISR with the ELR update rules, then elect if needed."""
    profile = ctx.profile
    proposed = part.ordered(proposed)
    if not profile.elr:
        # Pre-ELR: the ISR never becomes empty; the last member stays even when fenced.
        part.isr = proposed if proposed else part.isr[:]
        _bump(part, leader_change=False)
        _maybe_elect(part, ctx)
        return
    min_isr = ctx.eff(part)
    old_isr = part.isr
    if len(proposed) >= min_isr and profile.rules.clear_elr_at_min_isr:
        # Rule 1: an ISR at min ISR lets the HWM move, so nobody outside it is complete any more.
        part.elr = []
        part.last_known_elr = []
    elif len(proposed) < min_isr:
        # Rule 2: keep the ELR, add those leaving the ISR, drop anyone who is in the ISR.
        elr = set(part.elr) | (set(old_isr) - set(proposed))
        part.elr = part.ordered(elr - set(proposed))
        if profile.last_known is LastKnown.ELR_SET:
            part.last_known_elr = part.ordered(set(part.last_known_elr) - set(proposed) - elr)
    if not proposed and old_isr and profile.last_known is LastKnown.LAST_LEADER and part.leader is not None:
        # Kafka records the leader at the moment the partition first becomes leaderless.
        part.last_known_elr = [part.leader]
    part.isr = proposed
    _bump(part, leader_change=False)
    _maybe_elect(part, ctx)


def fence(part: PartitionRecord, broker: int, ctx: ControllerContext) -> None:
    """The broker's session expired (or it shut down): it leaves the ISR and leadership.

    The caller has already marked the broker fenced, so ``_maybe_elect`` replaces it.
    """
    if broker in part.isr:
        propose_isr(part, [b for b in part.isr if b != broker], ctx)
    elif part.leader == broker:
        _maybe_elect(part, ctx)


def unfence(part: PartitionRecord, ctx: ControllerContext) -> None:
    """A registered broker caught up with the metadata: it may now be elected."""
    _maybe_elect(part, ctx)


def register_unclean(part: PartitionRecord, broker: int, ctx: ControllerContext) -> None:
    """A broker registered without a valid clean-shutdown epoch: it may have lost data.

    KIP-966: the controller removes it from the ISR and the ELR before persisting the
    registration; under the full KIP it moves into LastKnownELR.
    """
    if not ctx.profile.elr:
        return  # Kafka gates this on the ELR feature
    changed = False
    if broker in part.isr:
        part.isr = [b for b in part.isr if b != broker]
        changed = True
    if broker in part.elr and ctx.profile.rules.drop_unclean_from_elr:
        part.elr = [b for b in part.elr if b != broker]
        if ctx.profile.last_known is LastKnown.ELR_SET:
            part.last_known_elr = part.ordered(set(part.last_known_elr) | {broker})
        changed = True
    if changed:
        _bump(part, leader_change=False)
        _maybe_elect(part, ctx)


def alter_partition(part: PartitionRecord, req: AlterPartition, ctx: ControllerContext) -> str | None:
    """Handle a leader's AlterPartition. Returns the error code, or None when accepted."""
    if req.leader != part.leader or req.leader_epoch != part.leader_epoch:
        return "FENCED_LEADER_EPOCH"
    if req.partition_epoch != part.partition_epoch:
        return "INVALID_UPDATE_VERSION"
    for broker, epoch in req.new_isr:
        if broker == req.leader:
            continue
        # A fenced broker may never join the ISR.
        if ctx.profile.rules.elect_only_unfenced and not ctx.is_unfenced(broker):
            return "INELIGIBLE_REPLICA"
        # KIP-903: the epoch the leader saw in the follower's fetches must be the current one.
        if ctx.profile.rules.check_broker_epoch and epoch != ctx.broker_epoch(broker):
            return "INELIGIBLE_REPLICA"
    if len(req.isr) > 1:
        part.recovering = False  # a follower caught up with the recovered leader
    propose_isr(part, req.isr, ctx)
    return None


def change_min_isr(part: PartitionRecord, new_min_isr: int, ctx: ControllerContext) -> None:
    """KIP-966: if the new min ISR <= current ISR size, the ELR is removed.

    Kafka as shipped clears the ELR (and LastKnownElr) on any change of the setting.
    """
    if not ctx.profile.elr:
        return
    ctx.min_isr = new_min_isr
    clears = ctx.profile.last_known is LastKnown.LAST_LEADER or len(part.isr) >= ctx.eff(part)
    if clears and (part.elr or part.last_known_elr):
        part.elr = []
        part.last_known_elr = []
        _bump(part, leader_change=False)


# --- elections -------------------------------------------------------------------------------


def _acceptable(broker: int, ctx: ControllerContext) -> bool:
    return ctx.is_unfenced(broker) or not ctx.profile.rules.elect_only_unfenced


def _maybe_elect(part: PartitionRecord, ctx: ControllerContext) -> None:
    current = part.leader
    if current is not None and current in part.isr and ctx.is_unfenced(current):
        return
    leader, unclean = _choose_leader(part, ctx)
    if leader is None:
        if current is not None:
            part.leader = None
            _bump(part, leader_change=True)
        return
    if not unclean and leader in part.elr:
        # Elected from the ELR: it becomes the ISR on its own.
        part.isr = [leader]
        part.elr = [b for b in part.elr if b != leader]
    if unclean:
        # Nobody is known to be complete: the new leader's log becomes the truth.
        part.isr = [leader]
        part.elr = []
        part.last_known_elr = []
        part.recovering = True
    if ctx.profile.last_known is LastKnown.LAST_LEADER:
        part.last_known_elr = []  # Kafka clears it once the partition has a leader again
    part.leader = leader
    _bump(part, leader_change=True)


def _choose_leader(part: PartitionRecord, ctx: ControllerContext) -> tuple[int | None, bool]:
    """Election order of KIP-966 (and of Kafka's delivery plan for the ``kafka`` profile)."""
    profile = ctx.profile
    for b in part.isr:
        if _acceptable(b, ctx):
            return b, False
    if not profile.elr or part.isr:
        return None, False
    for b in part.elr:
        if _acceptable(b, ctx):
            return b, False
    if profile.last_known is LastKnown.LAST_LEADER:
        if not part.elr and len(part.last_known_elr) == 1:
            last = part.last_known_elr[0]
            if _acceptable(last, ctx):
                return last, True
        return None, False
    strategy = profile.unclean_recovery
    if strategy is None or strategy is UncleanRecovery.NONE:
        return None, False
    live = [b for b in part.replicas if ctx.is_unfenced(b)]
    if strategy is UncleanRecovery.BALANCED:
        # Only when a clean election is impossible for good, and every LastKnownELR member can
        # answer GetReplicaLogInfo.
        if part.elr or not part.last_known_elr:
            return None, False
        if not all(ctx.is_unfenced(b) for b in part.last_known_elr):
            return None, False
    if not live:
        return None, False
    # Log inspection: highest leader epoch, then longest log; ties by assignment order.
    best = max(live, key=lambda b: (*ctx.log_info(b), -part.replicas.index(b)))
    return best, True


def reassign_directory(part: PartitionRecord) -> None:
    """Kafka (KIP-858): a replica registered on a new disk moves the partition to that directory,
    a partition change of its own (no leader change)."""
    _bump(part, leader_change=False)


def _bump(part: PartitionRecord, leader_change: bool) -> None:
    part.partition_epoch += 1
    if leader_change:
        part.leader_epoch += 1
