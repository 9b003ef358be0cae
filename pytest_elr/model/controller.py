"""The partition rules of KIP-966 and KIP-903, one function per rule, each beside the seed sentence
it implements. Read top to bottom, the module follows the order in which the model applies them.

1. The threshold every rule compares against: ``effective_min_isr``.
2. The events, in the order ``ModelCluster._controller_round`` handles them in a settle round:
   ``fence`` -> ``register_unclean`` -> ``reassign_directory`` -> ``unfence`` -> ``alter_partition``
   (a held directory assignment lands as ``reassign_directory`` too, once healed)
   (``reject_alter_partition`` first); then ``change_min_isr`` and ``change_cluster_min_isr``,
   which their actions call directly (as a clean shutdown calls ``fence``).
3. The partition change an ISR change builds, step by step like Kafka's
   ``PartitionChangeBuilder.build()``: ``propose_isr`` -> ``keep_last_isr_member`` (legacy) or
   ``clear_elr_at_min_isr`` / ``extend_elr_under_min_isr`` -> ``bump`` -> ``maybe_elect`` ->
   ``choose_leader`` (``electable``, ``directory_online``, ``last_known_leader``,
   ``unclean_recovery``) -> ``record_last_known_leader`` (kafka, when no one is elected) -> ``bump``.
4. The rules the leader applies against the controller's ISR (``ModelCluster._produce`` and
   ``_leader_round``): ``produce_rejection`` -> ``hwm_may_advance`` -> ``advance_hwm`` ->
   ``lagging_leave`` (which lagging followers its next AlterPartition removes: where timing
   decides, every choice, which ``model/alternatives.py`` follows).

Each docstring gives the rule in our words, the seed sentence (a short quote with its section),
and the ``Rules`` field that switches it off for the mutation check. docs/model.md tabulates them
with the scenario that exercises each.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, TypeVar

from pytest_elr.model.profiles import LastKnown, Profile, Rules, UncleanRecovery
from pytest_elr.model.state import AlterPartition, PartitionRecord, PartitionView

R = TypeVar("R")


@dataclass
class ControllerContext:
    """What the controller knows besides the partition records: one for the cluster, whatever
    the number of partitions (each rule takes the partition it builds for)."""

    profile: Profile
    min_isr: int  # as configured
    is_unfenced: Callable[[int], bool]
    broker_epoch: Callable[[int], int]
    #: (last leader epoch in the log, log end offset) of a live replica of the partition, for
    #: unclean recovery
    log_info: Callable[[PartitionRecord, int], tuple[int, int]]
    #: whether the controller has the broker's replica in a directory that is online (KIP-858:
    #: Kafka elects no replica in a directory it does not know online; ``directory_online``)
    has_online_dir: Callable[[int], bool] = lambda broker: True
    #: the topic's unclean.leader.election.enable
    unclean_election: bool = False
    #: unclean elections made because unclean.leader.election.enable was on (the operator chose
    #: availability over durability: the data invariants promise nothing after one)
    chosen_unclean_elections: int = 0
    #: what Kafka's controller meters count (``ElectionCounts``): elections of an ELR member, and
    #: changes that made the partition RECOVERING (``count_elections``)
    elections: ElectionCounts = field(default_factory=lambda: ElectionCounts())
    #: the profile's differences from the KIP (``Profile.kip_differences``) a rule has relied on so
    #: far: a run that passes by one of them says so (``RunResult.departures``)
    departures: set[str] = field(default_factory=set)

    def depart(self, rule: str) -> None:
        """The profile's rule did what the KIP would not, here (counted only where declared)."""
        if any(d.field == rule for d in self.profile.kip_differences):
            self.departures.add(rule)

    #: the effective min ISR of the change being built, fixed before it moves any replica
    #: (``propose_isr``): Kafka's ``PartitionChangeBuilder`` takes its ``minISR`` once, from the
    #: replica set stored before the change
    building_with: int | None = None

    def eff(self, part: PartitionRecord) -> int:
        """The effective min ISR of the partition (of the change being built, while one is)."""
        if self.building_with is not None:
            return self.building_with
        return effective_min_isr(self.min_isr, len(part.replicas), self.profile)


# --- 1. the threshold ------------------------------------------------------------------------


def effective_min_isr(min_isr: int, replication_factor: int, profile: Profile) -> int:
    """The min ISR every rule uses: the configured value capped at the replication factor, so a
    topic configured with more min.insync.replicas than replicas can still commit.

    KIP-966, "Additional High Watermark advancement requirement": "For backward compatibility,
    the effective min.insync.replicas will be min(min.insync.replicas, replication factor)."

    Mutation switch: ``Rules.cap_min_isr_at_rf``.
    """
    # ``min()`` without the call (asked for every partition in every round: issue 27, speed)
    if profile.rules.cap_min_isr_at_rf and 0 < replication_factor < min_isr:
        return replication_factor
    return min_isr


def bump(part: PartitionRecord, leader_change: bool) -> None:
    """Every partition change moves the partition epoch; only a new leader moves the leader
    epoch, so an ISR or ELR change alone does not. Several steps of one change may bump: the
    event that made the change counts it once (``one_partition_change``).

    KIP-966, "Other behaviors" 1: "Change of the ELR does not require a leader epoch bump."
    Kafka's ``PartitionChangeBuilder.build()`` bumps the leader epoch only when the record sets
    a leader (an election, or ``triggerLeaderEpochBumpForReplicaReassignmentIfNeeded``: a
    replica removed); ``triggerLeaderEpochBumpForIsrShrinkIfNeeded`` bumps it for an ISR shrink
    only before metadata version 3.6 (KAFKA-15021), never on Kafka 4.x.

    Mutation switch: none (``one_partition_change`` has one).
    """
    part.partition_epoch += 1
    if leader_change:
        part.leader_epoch += 1


def one_partition_change(event: Callable[..., R]) -> Callable[..., R]:
    """An event of the controller writes at most one change record for the partition: its
    partition epoch moves by one, and its leader epoch by one when the record sets a leader,
    however many steps of the change bumped them. ``event`` takes the partition first and the
    ``ControllerContext`` last.

    Kafka's ``PartitionRegistration.merge``: every PartitionChangeRecord gives ``partitionEpoch
    + 1``, and ``leaderEpoch + 1`` when its leader field is not NO_LEADER_CHANGE (a
    ClearElrRecord merges one such record into each partition whose ELR or LastKnownElr is not
    empty). KIP-966, "Other behaviors" 1: "the only case of the ELR changes alone is when an ELR
    broker registers after an unclean shutdown. In this case, no need to bump the leader epoch."

    Mutation switch: ``Rules.elr_change_keeps_leader_epoch`` (off: a change that moves the ELR or
    LastKnownELR bumps the leader epoch too).
    """
    @functools.wraps(event)
    def change(part: PartitionRecord, *args: Any, **kwargs: Any) -> R:
        ctx = args[-1]
        leader_epoch, partition_epoch = part.leader_epoch, part.partition_epoch
        keeps_epoch = ctx.profile.rules.elr_change_keeps_leader_epoch
        elr = None if keeps_epoch else (tuple(part.elr), tuple(part.last_known_elr))  # read only when off
        before = part.view()
        result = event(part, *args, **kwargs)
        count_elections(before, part, ctx.elections)
        if part.partition_epoch > partition_epoch:
            part.partition_epoch = partition_epoch + 1
            part.leader_epoch = min(part.leader_epoch, leader_epoch + 1)
            if not keeps_epoch and elr != (tuple(part.elr), tuple(part.last_known_elr)):
                part.leader_epoch = leader_epoch + 1
        return result
    return change


@dataclass
class ElectionCounts:
    """The elections Kafka's controller meters count, since the start: ``elr_elections``
    (``kafka.controller:type=ControllerStats,name=ElectionFromEligibleLeaderReplicasPerSec``) and
    ``unclean_elections`` (``...,name=UncleanLeaderElectionsPerSec``). KIP-966 asks for another
    one that Kafka does not ship (docs/model.md, "Metrics")."""

    elr_elections: int = 0
    unclean_elections: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"elr_elections": self.elr_elections, "unclean_elections": self.unclean_elections}


def count_elections(before: PartitionView, part: PartitionRecord, counts: ElectionCounts) -> None:
    """Count one change record (one ``one_partition_change`` event) as Kafka's controller meters do.

    KIP-966, "Other behaviors" 3 asks for "a new metric of Electable leaders ... the count of
    (ISR + ELR)"; Kafka ships none (4.0.2, 4.3.1, 4.4.0). What it ships instead, in
    ``TopicDelta.updateElectionStats`` (4.3.1 source; the same in 4.4.0's bytecode), per
    PartitionChangeRecord against the partition before it:
    "if (Replicas.contains(prevPartition.elr, newLeader)) partitionToElrElectionCount ... + 1"
    -- a record that sets a leader who was in the ELR before the change (``newLeader`` is
    NO_LEADER_CHANGE when the record keeps the leader, so a kept leader never counts);
    "if (PartitionRegistration.electionWasUnclean(newLeaderRecoveryState)) ... + 1" -- a record
    that sets LeaderRecoveryState RECOVERING, which ``PartitionChangeBuilder`` writes only for an
    unclean election and only "if (partition.leaderRecoveryState != LeaderRecoveryState.RECOVERING)".
    Kafka 4.0.2 has no ELR meter and counts an unclean election differently (docs/model.md).

    Mutation switch: none (a count, read only where a step names it).
    """
    if part.leader is not None and part.leader != before.leader and part.leader in before.elr:
        counts.elr_elections += 1
    if part.recovering and not before.recovering:
        counts.unclean_elections += 1


# --- 2. events, in the order of the controller's round ---------------------------------------


@one_partition_change
def fence(part: PartitionRecord, broker: int, ctx: ControllerContext) -> None:
    """A broker's session expired (or it shut down cleanly): it leaves the ISR through the ELR
    update, and a leader that left is replaced. The caller has already marked the broker fenced,
    so the election passes it over.

    KIP-966, "Controller behaviors" 2: "The replica gets fenced. When it happens, the controller
    will trigger the ELR update with the new updated ISR." "ISR invariants": "The proposal maintains
    the behavior of removing a replica out of ISR if it is lagging from the ISR or it is fenced by
    the controller."

    Mutation switch: ``Rules.fenced_leave_isr`` (off: a fenced follower stays in the ISR).
    """
    if broker in part.isr and (ctx.profile.rules.fenced_leave_isr or part.leader == broker):
        propose_isr(part, [b for b in part.isr if b != broker], ctx)
    elif part.leader == broker:
        maybe_elect(part, ctx)


@one_partition_change
def register_unclean(part: PartitionRecord, broker: int, ctx: ControllerContext) -> None:
    """A broker registered without a valid clean-shutdown epoch, so it may have lost data: it
    leaves the ISR and the ELR; under the full KIP an ELR member moves into LastKnownELR.
    (Whether a registration is clean -- the epoch written at shutdown equals the registered one --
    is decided in ``ModelCluster._controller_round``.)

    KIP-966, "Controller behaviors" 4: "During the broker registration, if the broker had an
    unclean shutdown, the controller will remove the broker from ISR and ELR before persisting
    the registration record." "Other behaviors" 6a: "when an ELR member has an unclear shutdown,
    it will be removed from ELR and added to the LastKnownELR."

    Profiles: ``kafka`` adds nothing to LastKnownElr, which holds only the last leader in Kafka 4.x;
    ``legacy`` changes nothing, since Kafka gates this on the ELR feature.

    Mutation switch: ``Rules.drop_unclean_from_elr`` (the ELR part).
    """
    if not ctx.profile.elr:
        return
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
        bump(part, leader_change=False)
        maybe_elect(part, ctx)


@one_partition_change
def reassign_directory(part: PartitionRecord, ctx: ControllerContext) -> None:
    """A replica's AssignReplicasToDirs landed (it registered on a new disk, or moved live between
    two log dirs): the partition moves to that directory, a partition change of its own (no leader
    change, the ELR kept: Kafka 4.3.0+, where apache/kafka PR #20716 built it with the ELR rules).
    A late AlterPartition then fails the partition-epoch check before KIP-903's broker-epoch check
    is reached.

    Seed: none for the move (KIP-858 directory ids, outside the seeds). Profiles ``kafka`` and
    ``legacy`` (``Profile.directory_ids``) follow Kafka 4.3.1 as measured: "Rejecting
    AlterPartition ... because the current partition epoch is 2, not 1" (docs/model.md, "Profiles
    and Kafka"). The ELR it keeps: KIP-966 changes the ELR only on the events its "ELR update
    rules" name, and a directory is none of them.

    Mutation switch: ``Rules.dir_assignment_keeps_elr`` (off: the change is built as if ELR were
    off and empties ELR and LastKnownElr, as 4.0.x to 4.2.x do).
    """
    ctx.depart("reassign_directory")
    if not ctx.profile.rules.dir_assignment_keeps_elr:
        part.elr, part.last_known_elr = [], []
    bump(part, leader_change=False)


@one_partition_change
def assignment_resent(part: PartitionRecord, ctx: ControllerContext) -> None:
    """A resent copy of a directory assignment that already landed: its partition change finds
    the replica's directory online, so a leaderless partition elects it (an ISR member, or an ELR
    member while the ISR is empty) -- what Kafka's assignment handler does from 4.3.0, its change
    built with the ELR rules. 4.0.x to 4.2.x build it without them (apache/kafka PR #20716): the
    election then leaves LastKnownElr as it was, e.g. [0] under the new leader.

    Seed: none (KIP-858 directory ids). Measured on Kafka 4.1.0: a hold of about 200 s, healed,
    elected the ISR member without another event (scenarios/kafka_20629_last_known_elr_isr_left).

    Mutation switch: none.
    """
    maybe_elect(part, ctx)


@one_partition_change
def unfence(part: PartitionRecord, ctx: ControllerContext) -> None:
    """A registered broker caught up with the metadata and may be elected again: a leaderless
    partition gets its leader, e.g. an ELR member while the ISR is empty.

    KIP-966, "Controller behaviors" 3: "The replica gets unfenced. If the replica is an ELR member
    and ISR is empty, this replica will be elected as leader, added to ISR, and removed from ELR."

    Mutation switch: none (``electable`` has one).
    """
    maybe_elect(part, ctx)


@one_partition_change
def alter_partition(part: PartitionRecord, req: AlterPartition, ctx: ControllerContext) -> str | None:
    """An AlterPartition: refused with an error code (``reject_alter_partition``), or applied as a
    proposed ISR with the LeaderRecoveryState it asks for (a Kafka leader asks RECOVERED, so the
    first follower it lets in ends the RECOVERING state of an unclean election). A request that
    changes nothing writes no record.

    KIP-966, "Controller behaviors" 1: "When the controller receives the new ISR, it will trigger
    an ELR update." Kafka's ``PartitionChangeBuilder.build()``: "if (targetLeaderRecoveryState !=
    partition.leaderRecoveryState) record.setLeaderRecoveryState(...)"; "if
    (changeRecordIsNoOp(record)) return Optional.empty()".

    Mutation switch: none (``reject_alter_partition`` has two).
    """
    error = reject_alter_partition(part, req, ctx)
    if error is not None:
        return error
    if sorted(req.isr) == sorted(part.isr) and req.recovering == part.recovering and not part.reassigning:
        return None
    part.recovering = req.recovering
    propose_isr(part, req.isr, ctx)
    return None


def answer_alter_partition(part: PartitionRecord, req: AlterPartition, ctx: ControllerContext) -> str | None:
    """The controller's answer to an AlterPartition: its refusal, else NEW_LEADER_ELECTED when the
    change it applied moved the leader off the sender (a reassignment the ISR completed), else None.

    Kafka's ``ReplicationControlManager.alterPartition`` (4.4.0): "if (change.leader() !=
    request.brokerId() && change.leader() != NO_LEADER_CHANGE)" answers NEW_LEADER_ELECTED, the
    record written all the same.

    Mutation switch: none.
    """
    leader = part.leader
    error = alter_partition(part, req, ctx)
    if error is None and part.leader != leader:
        return "NEW_LEADER_ELECTED"
    return error


def reject_alter_partition(part: PartitionRecord, req: AlterPartition, ctx: ControllerContext) -> str | None:
    """Why the controller refuses an AlterPartition, or None: its checks in the order of Kafka's
    ``ReplicationControlManager.alterPartition`` and ``validateAlterPartitionData`` (4.4.0), the
    first that refuses answers.

    Mutation switches: ``Rules.elect_only_unfenced`` and ``Rules.check_broker_epoch``
    (``ineligible_member``).
    """
    return (stale_sender(req, ctx) or epochs_refused(part, req) or isr_shape_refused(part, req)
            or recovery_state_refused(part, req) or ineligible_member(req, ctx))


def stale_sender(req: AlterPartition, ctx: ControllerContext) -> str | None:
    """STALE_BROKER_EPOCH, for the whole request, when the sender's broker epoch is not its
    registration's (``ClusterControlManager.checkBrokerEpoch``, called first by
    ``ReplicationControlManager.alterPartition``): a leader from an ended incarnation. Kafka's check,
    not the seeds': KIP-903 asks the controller for the ISR members' epochs only; the request's own
    ``BrokerEpoch`` is "The epoch of the requesting broker" in its schema.

    Mutation switch: none.
    """
    if req.broker_epoch is not None and req.broker_epoch != ctx.broker_epoch(req.leader):
        return "STALE_BROKER_EPOCH"
    return None


def epochs_refused(part: PartitionRecord, req: AlterPartition) -> str | None:
    """Epochs ahead of the controller's: NOT_CONTROLLER (this controller may be behind); a leader
    epoch behind: FENCED_LEADER_EPOCH; a sender that is not the leader: INVALID_REQUEST; a partition
    epoch behind: INVALID_UPDATE_VERSION (a request overtaken by another change). Kafka's checks,
    outside the seeds (``validateAlterPartitionData``).

    Mutation switch: none.
    """
    if req.leader_epoch > part.leader_epoch or req.partition_epoch > part.partition_epoch:
        return "NOT_CONTROLLER"
    if req.leader_epoch < part.leader_epoch:
        return "FENCED_LEADER_EPOCH"
    if req.leader != part.leader:
        return "INVALID_REQUEST"
    if req.partition_epoch < part.partition_epoch:
        return "INVALID_UPDATE_VERSION"
    return None


def isr_shape_refused(part: PartitionRecord, req: AlterPartition) -> str | None:
    """INVALID_REQUEST for an ISR with a replica not assigned or listed twice
    (``Replicas.validateIsr``), or without the leader: "The ISR must always include the current
    leader" (``validateAlterPartitionData``).

    Mutation switch: none.
    """
    isr = req.isr
    if len(set(isr)) != len(isr) or not set(isr) <= set(part.replicas) or req.leader not in isr:
        return "INVALID_REQUEST"
    return None


def recovery_state_refused(part: PartitionRecord, req: AlterPartition) -> str | None:
    """INVALID_REQUEST for RECOVERING with more than one replica in the ISR, or for a RECOVERED
    partition asked to become RECOVERING: only an unclean election makes a partition RECOVERING, and
    only its leader, alone, recovers it.

    Kafka's checks (KIP-704, not among the seeds), ``validateAlterPartitionData``'s refusals read
    "the ISR ... had more than one replica while the leader was still recovering from an unclean
    leader election" and "the leader recovery state cannot change from RECOVERED to RECOVERING".

    Mutation switch: none.
    """
    if req.recovering and (len(req.isr) > 1 or not part.recovering):
        return "INVALID_REQUEST"
    return None


def ineligible_member(req: AlterPartition, ctx: ControllerContext) -> str | None:
    """INELIGIBLE_REPLICA for a member that may not join: a follower may join the ISR only while
    unfenced and not shutting down, and only with the broker epoch of its latest registration as the
    leader saw it in the follower's fetches. (The leader's own entry is not asked: under ELR a leader
    fenced or shutting down has already been replaced.)

    KIP-903, "Proposed Design" > Controller: "The controller will make sure all the broker epochs in
    the ISR match with the latest broker epochs before persisting this change. If not, it will
    reject the request with the error code INELIGIBLE_REPLICA."

    Mutation switches: ``Rules.elect_only_unfenced`` (the fenced check), ``Rules.check_broker_epoch``
    (the epoch check).
    """
    for broker, epoch in req.new_isr:
        if broker == req.leader:
            continue
        if ctx.profile.rules.elect_only_unfenced and not ctx.is_unfenced(broker):
            return "INELIGIBLE_REPLICA"
        if ctx.profile.rules.check_broker_epoch and epoch != ctx.broker_epoch(broker):
            return "INELIGIBLE_REPLICA"
    return None


@one_partition_change
def change_min_isr(part: PartitionRecord, new_min_isr: int, ctx: ControllerContext) -> None:
    """min.insync.replicas changed: when the ISR already meets the new value, nobody outside it is
    needed any more, so the ELR and LastKnownELR are emptied.

    KIP-966, "Other behaviors" 2: "When updating the config min.insync.replicas, if the new min ISR
    <= current ISR, the ELR will be removed."

    Profiles: ``kafka`` clears them whenever the value changes, whatever the ISR -- measured on Kafka
    4.3.1, which writes a ClearElrRecord (``Profile.kip_differences``; scenarios
    ``min_isr_change_same_value``: raised over the ISR, ``min_isr_change_leaderless``: a leaderless
    partition then has no eligible replica left and only an unclean election brings it back); an
    update to the value it already has changes nothing there, as under the KIP. ``legacy`` has no
    ELR.

    Mutation switch: none.
    """
    changed = new_min_isr != ctx.min_isr
    ctx.min_isr = new_min_isr
    if not ctx.profile.elr:
        return
    kip_clears = len(part.isr) >= ctx.eff(part)
    clears = (ctx.profile.last_known is LastKnown.LAST_LEADER and changed) or kip_clears
    if clears and (part.elr or part.last_known_elr):
        if not kip_clears:
            ctx.depart("change_min_isr")
        part.elr = []
        part.last_known_elr = []
        bump(part, leader_change=False)


@one_partition_change
def change_cluster_min_isr(part: PartitionRecord, new_min_isr: int, ctx: ControllerContext) -> None:
    """The cluster-wide default min.insync.replicas changed. The topic's own value overrides it, so
    its effective min ISR is what it was: under the KIP nothing happens (the ELR is already empty
    whenever the ISR meets that min ISR).

    KIP-966, "Other behaviors" 2: "When updating the config min.insync.replicas, if the new min ISR
    <= current ISR, the ELR will be removed."

    Profiles: ``kafka`` clears ELR and LastKnownElr of every partition of every topic at every update
    of the cluster-wide value, even to the value it already has, the topic's own value
    notwithstanding: each update writes a ConfigRecord and a ClearElrRecord with no topic name --
    measured on Kafka 4.0.2 and 4.4.0 (``Profile.kip_differences``; scenario
    ``min_isr_change_cluster_level``): a leaderless partition loses its eligible replicas and only
    an unclean election brings it back. ``legacy`` has no ELR.

    Mutation switch: none.
    """
    if ctx.profile.last_known is not LastKnown.LAST_LEADER:
        return  # kip966: the topic's min ISR did not change; legacy: no ELR
    if part.elr or part.last_known_elr:
        ctx.depart("change_cluster_min_isr")
        part.elr = []
        part.last_known_elr = []
        bump(part, leader_change=False)


@one_partition_change
def set_unclean_election(part: PartitionRecord, enabled: bool, elect: bool, ctx: ControllerContext) -> None:
    """The topic's ``unclean.leader.election.enable`` changed; with ``elect`` the controller then
    tries an election at once (on Kafka: the ElectLeaders request with election type UNCLEAN that
    the runbook sends). The config alone elects nobody: Kafka's own check of leaderless partitions
    (``QuorumController.maybeScheduleNextElectUncleanLeaders``) runs on a timer the harness sets
    beyond any run (``unclean.leader.election.interval.ms``, pytest_elr/sut/config.py), and the model
    has no clock; later events elect with the config (``maybe_elect``). Under the full KIP the
    setting maps onto ``unclean.recovery.strategy``: on is Aggressive, off the strategy the topic had.

    KIP-966, "Unclean recovery": "unclean.leader.election.enable=true, the controller will randomly
    elect a leader if the last ISR member gets fenced." "Other" 3: "unclean.leader.election.enable.true
    -> unclean.recovery.strategy.Aggressive".

    Mutation switch: none (``unclean_leader_election`` decides who).
    """
    ctx.unclean_election = enabled
    if elect:
        maybe_elect(part, ctx)



@one_partition_change
def reconsider_after_unregistration(part: PartitionRecord, ctx: ControllerContext) -> None:
    """An unregistered broker was in the partition's ELR: Kafka builds a change for the partition
    with the broker removed (``ReplicationControlManager.handleBrokerUnregistered``'s second
    ``generateLeaderAndIsrUpdates``), which moves nothing in the ELR (measured on 4.4.0,
    docs/probes/unregister_broker.py) but elects where the leader is gone, with the topic's
    election: under ``unclean.leader.election.enable`` any unfenced replica (``PartitionChangeBuilder
    .electAnyLeader``). The release elects there at once; without this pass the partition waits for
    the controller's timer (Kafka mutant 1455, docs/kafka-mutants.md).

    KIP-966, "Unclean recovery": "unclean.leader.election.enable=true, the controller will randomly
    elect a leader if the last ISR member gets fenced." The KIP does not speak of unregistration.

    Mutation switch: none.
    """
    maybe_elect(part, ctx)


@one_partition_change
def elect_preferred_leader(part: PartitionRecord, ctx: ControllerContext) -> None:
    """An operator's preferred leader election (Admin ``electLeaders`` with type PREFERRED, what
    ``kafka-leader-election.sh --election-type PREFERRED`` sends). Nothing happens when the first
    replica of the assignment already leads; otherwise it is elected only if it is a valid leader
    -- in the ISR, or in the ELR while the ISR is empty, and electable -- and the partition keeps
    its leader when it is not. An election from the ELR makes the ISR the leader alone, as every
    election from the ELR does.

    KIP-966, "Controller behaviors" 3: a replica elected from the ELR is "added to ISR, and removed
    from ELR"; the KIP names no other rule for preferred elections. Follows Kafka's
    ``ReplicationControlManager.electLeader`` (ELECTION_NOT_NEEDED when ``hasPreferredLeader``) and
    ``PartitionChangeBuilder.electPreferredLeader`` (``isValidNewLeader``: "in either ISR or in ELR
    when ISR is empty"; the current leader kept when it is still valid).

    Mutation switch: ``Rules.preferred_must_be_valid`` (off: an ELR member is elected beside a
    non-empty ISR -- a replica that may lack committed records the ISR has).
    """
    preferred = part.replicas[0]
    if part.leader == preferred:
        return  # ELECTION_NOT_NEEDED
    isr_empty = not part.isr or not ctx.profile.rules.preferred_must_be_valid
    valid = preferred in part.isr or (isr_empty and ctx.profile.elr and preferred in part.elr)
    if not (valid and electable(preferred, ctx)):
        maybe_elect(part, ctx)  # PREFERRED_LEADER_NOT_AVAILABLE unless the leader itself is gone
        return
    seat_leader(part, preferred, False, ctx)

def reassignment_refused(part: PartitionRecord, target: list[int], ctx: ControllerContext) -> int | None:
    """The replica over which Kafka's controller fails to build a reassignment's change, if any:
    the change elects when the partition has no leader, and its election asks each candidate's
    log directory from the partition record stored *before* the move -- which throws for a
    replica the move adds back (``IllegalArgumentException: Replica N is not assigned to this
    partition``, answered UNKNOWN_SERVER_ERROR; nothing changes).

    A candidate is a target replica, in order, in the ELR while the ISR is empty
    (``PartitionChangeBuilder.isValidNewLeader``), tested only when active (``LeaderAcceptor``
    asks ``isActive`` first); the first valid one ends the search (``findFirst``). Only an ELR
    that holds non-replicas can name one: Kafka keeps removed replicas in the ELR
    (``keep_elr_within_replicas``), which the KIP's "Other behaviors" 4 forbids.

    Measured on Kafka 4.4.0 (2026-11-26): [0, 1, 2] -> [0] at min ISR 2 (ELR [1, 2]), the leader
    crashed and came back (ELR [1, 2], no leader), then [0] -> [0, 1, 2]: UNKNOWN_SERVER_ERROR,
    the controller's log "Replica 1 is not assigned to this partition". Read in
    ``ReplicationControlManager.changePartitionReassignment`` and ``LeaderAcceptor.test``.

    Mutation switch: none (a refusal, not a safety rule).
    """
    if part.isr or part.leader is not None:
        return None
    stored = set(part.replicas)
    order = [*target, *(b for b in part.replicas if b not in target)]
    for b in order:
        if b in part.elr and ctx.is_unfenced(b):
            return None if b in stored else b
    return None


@one_partition_change
def start_reassignment(part: PartitionRecord, target: list[int], ctx: ControllerContext) -> None:
    """An operator reassigns the partition (AlterPartitionReassignments): the replicas in
    ``target`` and not assigned yet are added beside the current ones, those not in ``target``
    are to be removed; the replica list becomes the target followed by the replicas being removed
    (Kafka's ``PartitionReassignmentReplicas``: both sets in ascending order). The change completes
    at once if the ISR already allows it (``complete_reassignment``). A reassignment under way is
    replaced, the current replica list (both sets) counting as the assignment -- and a set the new
    move leaves empty is not written, so the stored one stays: Kafka's
    ``changePartitionReassignment`` sets the builder's removing and adding only when non-empty, and
    the builder starts from the stored partition. Moving [0, 1, 2] -> [0, 1, 2, 3] back to [0, 1, 2]
    before 3 joins thus leaves adding (3) *and* removing (3), and 3 goes when it joins the ISR. A
    move that changes nothing writes no change (``changeRecordIsNoOp``).

    KIP-966, "Other behaviors" 4: "The *AlterPartitionReassignments*. The leader updates the ISR
    implicitly with *AlterPartition* requests." Measured on Kafka 4.4.0: [0, 1, 2] -> [1, 2, 3]
    lists replicas (1, 2, 3, 0), adding (3), removing (0).

    Mutation switch: none (``complete_reassignment`` has one).
    """
    current = list(part.replicas)
    removing = sorted(set(current) - set(target))
    replicas = [*target, *removing]
    removing = removing or list(part.removing)
    adding = sorted(set(target) - set(current)) or list(part.adding)
    if (replicas, removing, adding) == (current, list(part.removing), list(part.adding)):
        return  # nothing to move: Kafka writes no change
    # The change is built with the min ISR of the replica set before the move: Kafka's
    # changePartitionReassignment gives the builder getTopicEffectiveMinIsr, min(min ISR, the
    # replica count stored before the change). Measured on 4.4.0: [0] -> [0, 1, 2] with the ISR [0]
    # and ELR [1, 2] at min ISR 2 cleared the ELR (1 >= min(2, 1)).
    eff = ctx.eff(part)
    part.replicas, part.removing, part.adding = replicas, removing, adding
    bump(part, leader_change=False)
    propose_isr(part, list(part.isr), ctx, eff=eff)


def complete_reassignment(part: PartitionRecord, proposed: list[int], min_isr: int,
                          ctx: ControllerContext) -> list[int] | None:
    """The final replica set if the proposed ISR completes the reassignment under way, else None:
    every replica it adds is in the ISR, some replica it keeps is too, and -- under the KIP -- the
    ISR left once the removed replicas go meets min ISR: the effective min ISR of the replica set
    as the controller builds the change, before the move shrinks it.

    KIP-966, "Other behaviors" 4a: "The current behavior, when completing the reassignment, all the
    adding replicas should be in ISR. This behavior can result in 1 replica in ISR. ... So we
    propose to enforce that the reassignment can only be completed if the ISR size is larger or
    equal to min ISR."

    Profiles: ``kafka`` and ``legacy`` complete whatever min ISR (``Profile.reassignment_by_target_isr``):
    measured on Kafka 4.4.0, [0, 1, 2] -> [1, 2, 3] with the ISR [0] (1, 2 fenced) completed as soon
    as 3 joined, with the ISR [3]; [0, 1, 2] -> [0, 1, 3] completed with 1 unfenced but out of the ISR.

    Kafka 4.3.1 and 4.4.0 (``PartitionReassignmentReplicas.maybeCompleteReassignment``, their
    bytecode): the ISR less the removed replicas must hold every added one and, when the move
    removes more replicas than it adds, every final one too. (4.0.2 asks the latter always: every
    final replica in the ISR.) A replica both added and removed -- a move sent back to where it
    started before it finished (``start_reassignment``) -- is never in that ISR: the move never
    completes.

    Mutation switch: ``Rules.reassignment_waits_for_min_isr`` (off: completes under min ISR).
    """
    if not part.reassigning:
        return None
    isr = [b for b in proposed if b not in part.removing]
    final = [b for b in part.replicas if b not in part.removing]
    if not isr or not set(part.adding) <= set(isr):
        return None
    if len(part.adding) < len(part.removing) and not set(final) <= set(isr):
        return None
    if len(isr) < min_isr:
        if not ctx.profile.reassignment_by_target_isr and ctx.profile.rules.reassignment_waits_for_min_isr:
            return None
        ctx.depart("complete_reassignment")
    return final


@one_partition_change
def cancel_reassignment(part: PartitionRecord, ctx: ControllerContext) -> str | None:
    """An operator cancels the reassignment under way: the replicas it was adding leave the
    assignment and the ISR, those it was removing stay (Kafka's ``PartitionReassignmentRevert``).
    Refused when no reassignment is under way (NO_REASSIGNMENT_IN_PROGRESS), when the ISR would be
    empty (INVALID_REPLICA_ASSIGNMENT: Kafka's revert would be an unclean election, refused without
    unclean.leader.election.enable), and -- under the KIP -- while the ISR left would be under min
    ISR: the reassignment then carries on.

    KIP-966, "Other behaviors" 4b: "This min ISR requirement is also enforced when the reassignment
    is canceled."

    Profiles: ``kafka`` and ``legacy`` cancel whatever the ISR left (``Profile.reassignment_by_target_isr``).

    Mutation switch: ``Rules.cancellation_waits_for_min_isr`` (off: cancelled under min ISR).
    """
    if not part.reassigning:
        return "NO_REASSIGNMENT_IN_PROGRESS"
    original = [b for b in part.replicas if b not in part.adding]
    isr = [b for b in part.isr if b not in part.adding]
    if not isr:
        return "INVALID_REPLICA_ASSIGNMENT"
    if len(isr) < ctx.eff(part):
        if not ctx.profile.reassignment_by_target_isr and ctx.profile.rules.cancellation_waits_for_min_isr:
            return "under min ISR"
        ctx.depart("cancel_reassignment")
    propose_isr(part, isr, ctx, final=original)
    return None


def keep_elr_within_replicas(part: PartitionRecord, ctx: ControllerContext) -> None:
    """A completed or cancelled reassignment leaves no replica outside the final replica set in the
    ELR. Under the KIP the move completes only at min ISR, where ELR update rule 1 has emptied the
    ELR already, so this holds by construction there (no switch: its mutant would be equivalent).

    KIP-966, "Other behaviors" 4: "The controller will make sure than upon completion, the ELR only
    contains replicas in the final replica set."

    Profiles: ``kafka`` and ``legacy`` keep the ELR the change built from the replica set before
    the move (``Profile.reassignment_by_target_isr``): measured on Kafka 4.4.0, [0, 1, 2] -> [0]
    at min ISR 2 left ELR [1, 2], two replicas no longer assigned.

    Mutation switch: none.
    """
    outside = [b for b in part.elr if b not in part.replicas]
    if not outside:
        return
    if ctx.profile.reassignment_by_target_isr:
        ctx.depart("keep_elr_within_replicas")
        return
    part.elr = [b for b in part.elr if b in part.replicas]


# --- 3. the partition change -----------------------------------------------------------------


def propose_isr(part: PartitionRecord, proposed: list[int], ctx: ControllerContext,
                final: list[int] | None = None, eff: int | None = None) -> None:
    """One partition change from a proposed ISR, in the steps of Kafka's
    ``PartitionChangeBuilder.build()``: complete a reassignment the ISR allows (or the one
    ``final`` names: a cancellation's), update ISR and ELR (one of the two ELR update rules) with
    the min ISR of the replica set before the change, remember the last leader (kafka), bump the
    partition epoch -- and the leader epoch when replicas leave -- then elect if the leader is gone.

    KIP-966, "Controller behaviors": "ELR update will take a proposed ISR and the controller does
    the following:"

    ``eff``: the effective min ISR the change is built with when the caller moved replicas
    already (``start_reassignment``); by default the replica set as it stands. Every rule of the
    change, the election's included, uses it (``ControllerContext.building_with``).

    Mutation switch: none (the steps have theirs).
    """
    # Kafka builds the change with the replication factor before the move
    eff = ctx.eff(part) if eff is None else eff
    outer, ctx.building_with = ctx.building_with, eff
    try:
        _build_change(part, part.ordered(proposed), ctx, final, eff)
    finally:
        ctx.building_with = outer


def _build_change(part: PartitionRecord, proposed: list[int], ctx: ControllerContext,
                  final: list[int] | None, eff: int) -> None:
    if final is None:
        final = complete_reassignment(part, proposed, eff, ctx)
    if final is not None:
        proposed = [b for b in proposed if b in final]
    if not ctx.profile.elr:
        keep_last_isr_member(part, proposed)
    else:
        if len(proposed) >= eff:
            clear_elr_at_min_isr(part, ctx)
        else:
            extend_elr_under_min_isr(part, proposed, ctx)
        part.isr = proposed
    replicas_leave = False
    if final is not None:
        # Kafka's triggerLeaderEpochBumpForReplicaReassignmentIfNeeded: a replica that leaves
        # the assignment bumps the leader epoch (measured on 4.4.0: [0, 1, 2] -> [0], 0 -> 1)
        replicas_leave = not set(final) >= set(part.replicas)
        part.replicas, part.adding, part.removing = list(final), [], []
        part.isr = part.ordered(part.isr)
        keep_elr_within_replicas(part, ctx)
    bump(part, leader_change=replicas_leave)
    maybe_elect(part, ctx)


def keep_last_isr_member(part: PartitionRecord, proposed: list[int]) -> None:
    """Pre-ELR ISR update (``legacy``): the ISR never becomes empty; its last member stays even
    while fenced, and is re-elected when it comes back, whatever it lost.

    KIP-966, "Motivation": "The current kafka behavior will prevent ISR drops to empty which keeps
    the last replica broker 2." Follows Kafka with ``eligible.leader.replicas.version=0``.

    Mutation switch: none.
    """
    part.isr = proposed if proposed else part.isr[:]


def clear_elr_at_min_isr(part: PartitionRecord, ctx: ControllerContext) -> None:
    """ELR update rule 1: a proposed ISR at min ISR lets the HWM move, so no replica outside it is
    known to be complete any more: the ELR and LastKnownELR are emptied.

    KIP-966, "Controller behaviors" > ELR update rule 1: "When the proposed ISR is larger or equal
    to min ISR, the controller will update the ISR and empty the ELR." "Other behaviors" 6a: "The
    LastKnownELR will be cleaned when ISR reaches the min ISR."

    Profiles: ``kafka`` clears its LastKnownElr (the last leader) the same way.

    Mutation switch: ``Rules.clear_elr_at_min_isr``.
    """
    if not ctx.profile.rules.clear_elr_at_min_isr:
        return
    part.elr = []
    part.last_known_elr = []


def extend_elr_under_min_isr(part: PartitionRecord, proposed: list[int], ctx: ControllerContext) -> None:
    """ELR update rule 2: under min ISR the HWM is frozen, so whoever leaves the ISR still holds
    everything below it and joins the ELR; ISR members are never in the ELR. Under the full KIP a
    LastKnownELR member that is back in the ISR or ELR leaves LastKnownELR.

    KIP-966, "Controller behaviors" > ELR update rule 2: "When the proposed ISR is smaller than
    min ISR, the controller will a. retain the current members of the ELR. b. add (the current ISR
    - the proposed ISR) to ELR. c. remove the duplicate member in both ISR and ELR from ELR."

    Mutation switch: ``Rules.elr_only_from_isr`` (off: every replica outside the proposed ISR
    joins, also one that left the ISR while it met min ISR and is not complete, Case F).
    """
    leaving = set(part.isr) if ctx.profile.rules.elr_only_from_isr else set(part.replicas)
    elr = set(part.elr) | (leaving - set(proposed))
    part.elr = part.ordered(elr - set(proposed))
    if ctx.profile.last_known is LastKnown.ELR_SET:
        part.last_known_elr = part.ordered(set(part.last_known_elr) - set(proposed) - elr)


def record_last_known_leader(part: PartitionRecord, gone: int, ctx: ControllerContext) -> None:
    """``kafka`` only: when a change takes the leader away and elects no one, LastKnownElr records
    that leader, unless it already holds one (Kafka 4.x keeps it in LastKnownElr, docs/model.md
    "Profiles and Kafka"). Kafka's rule since 4.1.1 (apache/kafka PR #20629, #20655 on 4.1);
    4.0.x and 4.1.0 recorded the leader when a change emptied the ISR instead, which differs when
    the leader goes while an ISR member is left that cannot be elected (its directory not online):
    they record nothing there (scenarios/kafka_20629_last_known_elr_isr_left.elr.yaml).

    KIP-966, "Other behaviors" 7b: "The controller will record the last ISR member (the leader)
    when it is fenced."

    Mutation switch: none.
    """
    if ctx.profile.last_known is LastKnown.LAST_LEADER and not part.last_known_elr:
        part.last_known_elr = [gone]
        ctx.depart("record_last_known_leader")


def maybe_elect(part: PartitionRecord, ctx: ControllerContext) -> None:
    """Elect when the leader is gone (out of the ISR, or fenced). Elected cleanly from the ELR,
    the leader becomes the ISR on its own; elected uncleanly, its log becomes the truth: ISR is the
    leader alone, ELR and LastKnownELR are emptied, and the partition is RECOVERING until a
    follower joins. Without a candidate the partition is leaderless.

    KIP-966, "Controller behaviors" 3: "this replica will be elected as leader, added to ISR, and
    removed from ELR." Design notes 5.3.2 (unclean): "If there exists one LastKnownELR member that
    is complete then it is guaranteed to be selected as leader and moved to the ISR."

    Profiles: ``kafka`` empties LastKnownElr once there is a leader, as Kafka 4.x does; KIP-966,
    "Other behaviors" 7c: "It will be cleaned when a new leader is elected."

    Mutation switches: ``Rules.unclean_election_recovers`` (off: an unclean election leaves the
    partition as if clean -- design notes 5.3.1: "the controller must report all unclean recoveries
    as potential data loss events"), ``Rules.elr_leader_becomes_isr`` (off: a leader elected from
    the ELR is not added to the ISR). ``choose_leader`` and ``electable`` decide who.
    """
    current = part.leader
    if current is not None and current in part.isr and ctx.is_unfenced(current):
        return
    leader, unclean = choose_leader(part, ctx)
    if leader is None:
        if current is not None:
            record_last_known_leader(part, current, ctx)
            part.leader = None
            bump(part, leader_change=True)
        return
    seat_leader(part, leader, unclean, ctx)


def seat_leader(part: PartitionRecord, leader: int, unclean: bool, ctx: ControllerContext) -> None:
    """What an election does to the record, whoever asked for it (the rules and switches are
    those of ``maybe_elect``)."""
    if unclean:
        part.isr = [leader]
        part.elr = []
        part.last_known_elr = []
        part.recovering = ctx.profile.rules.unclean_election_recovers
        if ctx.unclean_election:
            ctx.chosen_unclean_elections += 1
    elif leader in part.elr:
        part.isr = [leader] if ctx.profile.rules.elr_leader_becomes_isr else part.isr
        part.elr = [b for b in part.elr if b != leader]
        clear_elr_after_election(part, ctx)
    if ctx.profile.last_known is LastKnown.LAST_LEADER:
        part.last_known_elr = []
    part.leader = leader
    bump(part, leader_change=True)


def clear_elr_after_election(part: PartitionRecord, ctx: ControllerContext) -> None:
    """An election from the ELR proposes a new ISR (the leader alone): ELR update rule 1 applies
    to it like to any proposed ISR, so when that ISR already meets min ISR (after min ISR was
    lowered while the partition was leaderless) the remaining ELR and LastKnownELR are emptied --
    the HWM can move again, and a stale ELR member would otherwise stay electable.

    KIP-966, "Controller behaviors" > ELR update rule 1: "When the proposed ISR is larger or equal
    to min ISR, the controller will update the ISR and empty the ELR." "Other behaviors" 6a: "The
    LastKnownELR will be cleaned when ISR reaches the min ISR."

    Found by the property search under ``kip966`` (docs/model.md, "Findings of the search").

    Mutation switch: ``Rules.clear_elr_after_election``.
    """
    if ctx.profile.rules.clear_elr_after_election and ctx.profile.elr and len(part.isr) >= ctx.eff(part):
        part.elr = []
        part.last_known_elr = []


def choose_leader(part: PartitionRecord, ctx: ControllerContext) -> tuple[int | None, bool]:
    """The replica to elect, and whether the election is unclean: an ISR member; with the ISR
    empty, an ELR member; with no ELR member electable, the profile's last resort -- ``kafka``'s
    last leader, or the full KIP's unclean recovery. ``legacy`` elects only from the ISR.

    KIP-966, "Unclean recovery": "1. If there are other ISR members, choose an ISR member. 2. If
    there are unfenced ELR members, choose an ELR member."

    Mutation switch: none (``electable`` has one).
    """
    for b in part.isr:
        if electable(b, ctx):
            return b, False
    if ctx.profile.elr and not part.isr:
        for b in (b for b in part.elr if b in part.replicas):  # Kafka elects among the assigned replicas only
            if electable(b, ctx):
                return b, False
        if ctx.profile.last_known is LastKnown.ELR_SET:
            recovered = unclean_recovery(part, ctx)
            return recovered, recovered is not None
        last = last_known_leader(part, ctx)
        if last is not None:
            ctx.depart("record_last_known_leader")  # KIP-966 "Delivery plan": part 2 not shipped
            return last, True
    chosen = unclean_leader_election(part, ctx)
    return chosen, chosen is not None


def electable(broker: int, ctx: ControllerContext) -> bool:
    """Only an unfenced broker may be elected; a fenced candidate is waited for.

    KIP-966, "Unclean recovery" 3b: "Otherwise, we will wait for the fenced ELR members to be
    unfenced."

    Mutation switch: ``Rules.elect_only_unfenced``.
    """
    return (ctx.is_unfenced(broker) or not ctx.profile.rules.elect_only_unfenced) and directory_online(broker, ctx)


def directory_online(broker: int, ctx: ControllerContext) -> bool:
    """``kafka``, ``legacy``: a replica is elected only while the controller has it in a directory
    the broker registered online. A broker back on a new disk has a new directory id; until its
    AssignReplicasToDirs lands, the partition still names the old one, so the replica may sit in
    the ISR (AlterPartition does not look at directories) and still not be elected.

    Seed: none (KIP-858 directory ids, outside the seeds; Kafka's ``LeaderAcceptor`` checks
    ``hasOnlineDir`` for every candidate, the last known leader included since 4.1.0). Measured:
    scenarios/kafka_20629_last_known_elr_isr_left.elr.yaml.

    Mutation switch: none.
    """
    return not ctx.profile.directory_ids or ctx.has_online_dir(broker)


def last_known_leader(part: PartitionRecord, ctx: ControllerContext) -> int | None:
    """``kafka`` only: with ISR and ELR empty, the last leader recorded in LastKnownElr is elected
    (uncleanly, RECOVERING) once it is unfenced -- what Kafka 4.x does (docs/model.md, "Profiles and
    Kafka"). A fenced ELR member is waited for instead.

    KIP-966, "Delivery plan": "unclean.leader.election.enable false, then elect the LastKnownLeader
    once it is unfenced."

    Mutation switch: ``Rules.last_known_leader_unfenced`` (off: KAFKA-19522, Kafka 4.0.x, whose
    ``canElectLastKnownLeader`` logs that the last known leader is not alive and elects it anyway).
    """
    if not part.elr and len(part.last_known_elr) == 1:
        last = part.last_known_elr[0]
        if electable(last, ctx) or not ctx.profile.rules.last_known_leader_unfenced:
            return last
    return None


def unclean_leader_election(part: PartitionRecord, ctx: ControllerContext) -> int | None:
    """``kafka``, ``legacy``: with ``unclean.leader.election.enable`` on and no clean candidate,
    the first unfenced replica in assignment order is elected uncleanly, whatever it lost (Kafka's
    ``electAnyLeader``: ISR, ELR, last known leader, then any acceptable replica).

    KIP-966, "Delivery plan": "If there are fenced ELR members - unclean.leader.election.enable true,
    start an unclean leader election." "The unclean leader election will be randomly choosing an
    unfenced replica as it is today."

    Mutation switch: none.
    """
    if not ctx.unclean_election or ctx.profile.last_known is LastKnown.ELR_SET:
        return None
    for b in part.replicas:
        if ctx.is_unfenced(b) and directory_online(b, ctx):
            return b
    return None


def unclean_recovery(part: PartitionRecord, ctx: ControllerContext) -> int | None:
    """Full KIP only: with no clean candidate, ``unclean.recovery.strategy`` decides
    (``unclean.leader.election.enable`` on means Aggressive). ``none`` waits; ``balanced`` waits
    until ISR and ELR are empty and every LastKnownELR member is unfenced, then inspects the logs
    of the LastKnownELR only -- the recovery quorum; ``aggressive`` goes at once, among every live
    replica. Log inspection picks the highest last leader epoch, then the longest log; ties go by
    assignment order.

    KIP-966, "Unclean recovery" 4b: "If the unclean.recovery.strategy=Balanced, the controller
    will do the unclean recovery when all the LastKnownELR are unfenced." And: "The one with the
    highest leader epoch plus the longest log end offset will be the new leader." Design notes
    5.3.1: "It involves the controller inspecting the logs of the LastKnownELR and choosing the one
    with the highest epoch and offset"; 5.3.3 step 9: "It sends a GetReplicaLogInfo request to each
    replica in the LastKnownELR." (The KIP adds "plus the replicas replied within the timeout": the
    model has no clock, so it takes the design notes' set, the one 5.3.2's guarantee is about.)

    Mutation switch: ``Rules.balanced_inspects_last_known_elr`` (off: every live replica).
    """
    strategy = UncleanRecovery.AGGRESSIVE if ctx.unclean_election else ctx.profile.unclean_recovery
    if strategy is None or strategy is UncleanRecovery.NONE:
        return None
    live = [b for b in part.replicas if ctx.is_unfenced(b)]
    if strategy is UncleanRecovery.BALANCED:
        if part.elr or not part.last_known_elr:
            return None
        if not all(ctx.is_unfenced(b) for b in part.last_known_elr):
            return None
        if ctx.profile.rules.balanced_inspects_last_known_elr:
            live = list(part.last_known_elr)
    if not live:
        return None
    return max(live, key=lambda b: (*ctx.log_info(part, b), -part.replicas.index(b)))


# --- 4. the leader's rules on the controller's ISR -------------------------------------------


def produce_rejection(acks: str, isr: list[int], min_isr: int, rules: Rules) -> str | None:
    """An acks=all request is refused up front while the ISR is under min ISR; acks=0/1 are
    taken whatever the ISR (acks=1 is answered at the leader's append). The check repeated after
    the append (NOT_ENOUGH_REPLICAS_AFTER_APPEND) is in ``ModelCluster._finish_produce``.

    KIP-966, "Additional High Watermark advancement requirement": "the server will reject the
    ack=all requests due to not enough replicas to meet the min ISR, but it accepts the ack=0/1
    requests."

    Mutation switch: ``Rules.acks_all_refused_under_min_isr`` (off: refused only after the append).
    """
    if acks == "all" and len(isr) < min_isr and rules.acks_all_refused_under_min_isr:
        return "NOT_ENOUGH_REPLICAS"
    return None


def hwm_may_advance(committed_isr: list[int], min_isr: int, rules: Rules) -> bool:
    """The HWM moves only while the ISR the controller committed has at least min ISR members
    (a pending addition does not count). Every profile: Kafka ships this since 3.7 whatever the
    ELR feature.

    KIP-966, "Additional High Watermark advancement requirement": "High Watermark can only advance
    if the ISR size is larger or equal to min.insync.replicas", where "The ISR membership refers to
    the latest ISR membership persisted by the controller, not the "maximal ISR"".

    Mutation switch: ``Rules.hwm_requires_min_isr``.
    """
    return len(committed_isr) >= min_isr or not rules.hwm_requires_min_isr


def hwm_reevaluated(event_since_min_isr_change: bool) -> bool:
    """``kafka``, ``legacy``: a min ISR change does not make the leader evaluate its HWM again; the
    next event that does (a record appended, a follower's log end moving, an ISR change) moves it.
    So after lowering min ISR to the ISR's size, records that waited stay above the HWM until then,
    even with a caught-up follower fetching all along. The full KIP says when the HWM *may* move,
    not when it is evaluated: ``kip966`` evaluates it at once.

    Seed: none. Measured on Kafka 4.3.1 (``scenarios/min_isr_change_lower_and_raise.elr.yaml``,
    step ``lower-to-isr``: HWM 5 after min ISR 3 -> 2 with ISR [0, 1] and 4 records waiting).
    ``Profile.hwm_waits_for_an_event``.

    Mutation switch: none.
    """
    return event_since_min_isr_change


def advance_hwm(hwm: int, maximal_isr_ends: list[int]) -> int:
    """The new HWM: what every member of the maximal ISR (the committed ISR plus members the
    leader asked to add) holds, given as their log end offsets as the leader knows them; it never
    goes back.

    KIP-966, "Additional High Watermark advancement requirement": "If maximal ISR > ISR, the
    message should be replicated to the maximal ISR before covering the message under HWM."

    Mutation switch: ``Rules.hwm_waits_for_maximal_isr``, in ``ModelCluster.maximal_isr`` which
    gathers the ends (off: the committed ISR only).
    """
    return max(hwm, min(maximal_isr_ends))


#: at most this many followers leaving the ISR at once are given every order (4 followers: 75
#: histories -- 24 one at a time, the rest in groups); more leave together only (the canonical)
MAX_CONCURRENT_LEAVES = 4


def lagging_leave(lagging: Sequence[int], rules: Rules) -> list[frozenset[int]]:
    """The followers the leader's next AlterPartition may remove when several lag at once, the
    canonical answer first: all of them together. The leader judges each follower's lag on its
    own (Kafka: each replica's last caught-up time against ``replica.lag.time.max.ms``, checked
    periodically), so any non-empty subset may go first and the rest at later checks: every
    order, and every grouping, is a legal history. The order matters: a follower removed while
    the ISR still meets min ISR is not complete and does not join the ELR (Case F); those removed
    once the ISR is under min ISR do (ELR update rule 2). With up to ``MAX_CONCURRENT_LEAVES``
    followers every choice is given; with more, the canonical one only.

    KIP-966, "ISR invariants": "The proposal maintains the behavior of removing a replica out of
    ISR if it is lagging"; design notes 5.2.1, transitions that "focus on a single replica", Case
    F: "Replica R, which is a currently an in-sync follower, goes out-of-sync and is removed from
    the ISR. The new ISR >= Min ISR therefore replica R loses its completeness guarantee and is
    not added to the ELR."

    Mutation switch: ``Rules.lagging_leave_in_any_order`` (off: together only).
    """
    together = frozenset(lagging)
    if not rules.lagging_leave_in_any_order or not 1 < len(lagging) <= MAX_CONCURRENT_LEAVES:
        return [together]
    return [together, *(frozenset(first) for n in range(len(lagging) - 1, 0, -1)
                        for first in combinations(lagging, n))]
