"""An executable model of a cluster and its partitions: brokers, links, controllers, and one
``ModelPartition`` (record, logs, leader state) per partition (``model/partition.py``).

Time is abstract. Every action is followed by ``settle()``, which delivers messages and lets
the controller and the leader react until nothing changes -- the state a real cluster reaches
once its timeouts have fired. Deterministic: the same actions always give the same states.
A settle runs only the partitions that may still move (``_settle``: those a produce appended to,
every one after any other action or a broker event, then those the round before changed), with the
states of a settle of every partition in every round (``full_settle``; tests/test_settle_dirty.py).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable
from dataclasses import InitVar, dataclass, field, replace
from functools import singledispatchmethod

from pytest_elr.actions import (
    ACTIVE_CONTROLLER,
    ALL_CONTROLLERS,
    Action,
    BeginShutdown,
    CancelReassignment,
    ControllerAction,
    Crash,
    CrashController,
    Cut,
    ElectLeaders,
    Flush,
    ForgedAlterPartition,
    Heal,
    HoldDirAssignments,
    HoldHeartbeats,
    HoldMetadata,
    IsolateController,
    MoveLogDir,
    Pause,
    PowerOff,
    PowerOffController,
    Produce,
    Reassign,
    ReplaceDisk,
    Restart,
    RestartController,
    Resume,
    SetClusterMinIsr,
    SetMinIsr,
    Shutdown,
    ShutdownController,
    Slow,
    StopController,
    UncleanElection,
    Unregister,
    Wait,
)
from pytest_elr.core.nodes import CONTROLLER, Link, Node, controller_of, is_controller, one_controller
from pytest_elr.core.observation import ConsumedRecord, LossEvidence, Observation, ProduceOutcome, Refusal, Result
from pytest_elr.model import controller
from pytest_elr.model.controller import ControllerContext, effective_min_isr
from pytest_elr.model.partition import ModelPartition, ProduceRequest, Send
from pytest_elr.model.profiles import Profile
from pytest_elr.model.state import AlterPartition, Broker, PartitionRecord, Record, Replica
from pytest_elr.model.timing import Timing

MAX_SETTLE_ROUNDS = 200


class ModelError(Exception):
    """An action the model cannot apply in the current state (e.g. restarting a live broker)."""


@dataclass
class ModelCluster:
    brokers_ids: tuple[int, ...]
    #: partition 0's replicas (the topic's assignment; ``more_partitions`` adds partitions)
    replicas: InitVar[list[int]]
    min_isr: int
    profile: Profile
    brokers: dict[int, Broker] = field(default_factory=dict)
    #: the topic's partitions by number, each under the controller's rules on its own
    #: (``model/partition.py``); one, partition 0, unless ``more_partitions`` lists others
    partitions: dict[int, ModelPartition] = field(default_factory=dict)
    fenced: set[int] = field(default_factory=set)
    cut: set[Link] = field(default_factory=set)
    slow: set[Link] = field(default_factory=set)
    #: brokers whose heartbeats the controller does not get: registered, never unfenced
    heartbeats_held: set[int] = field(default_factory=set)
    #: brokers whose AssignReplicasToDirs requests the controller does not get
    assignments_held: set[int] = field(default_factory=set)
    #: brokers whose metadata fetches (the KRaft Fetch) the controller does not get: unfenced, with
    #: a stale metadata offset (``hold_metadata``)
    metadata_held: set[int] = field(default_factory=set)
    #: brokers in a controlled shutdown the controller cannot let finish while a broker of
    #: ``metadata_held`` is active: out of every ISR and leadership, unfenced, not electable
    shutting_down: set[int] = field(default_factory=set)
    #: brokers whose registration the operator removed (``unregister``): out of the fenced set a
    #: client sees (DescribeCluster lists registered brokers only), never active until they restart
    #: and register anew; kept in ``fenced`` for the controller's rules
    unregistered: set[int] = field(default_factory=set)
    #: brokers whose replicas' AssignReplicasToDirs has not landed: the controller still has them in
    #: the old directory -- offline after a new disk, online after a live move between log dirs.
    #: Per broker: after a new disk a landing moves every partition the broker holds a replica of
    #: (all of them are in the new directory); after live moves, only the moved ones (``dir_moves``).
    dir_pending: set[int] = field(default_factory=set)
    #: of ``dir_pending``, the brokers whose assignment is for live moves alone, with the partitions
    #: moved: the broker assigns the replica it moved, not the others, which stay where they were
    #: (found by ``elr explore --partitions 3`` on Kafka 4.4.0: a move of partition 0's replica left
    #: partitions 1 and 2's epochs unchanged; ReplicaManager.alterReplicaLogDirs moves the partitions
    #: it is asked for, and the broker's AssignmentsManager sends an assignment per moved partition)
    dir_moves: dict[int, set[int]] = field(default_factory=dict)
    #: of ``dir_pending``, the brokers whose old directory is gone (a new disk): not electable
    dir_offline: set[int] = field(default_factory=set)
    #: of ``dir_pending``, the brokers whose assignment timing left for the next action, and those
    #: it left there at the action before this one: due now (``_assignment_lands_now``)
    dir_late: set[int] = field(default_factory=set)
    dir_due: set[int] = field(default_factory=set)
    protocol_errors: list[str] = field(default_factory=list)
    #: order in which brokers became unreachable: the controller fences them in that order
    down_order: list[int] = field(default_factory=list)
    #: where timing decides (``controller.lagging_leave``): None takes the canonical choice, a
    #: Timing replays and records choices (``model/alternatives.py``)
    timing: Timing | None = None
    #: KRaft controllers (the voters of the metadata quorum), numbered 0 .. controllers - 1
    controllers: int = 1
    #: the controllers whose process is stopped
    controllers_down: set[int] = field(default_factory=set)
    #: the quorum's leader, which alone writes the metadata log (None: no majority, no leader). Which
    #: of the live voters wins an election is timing: the model takes the lowest; only whether
    #: there is one is held to a real cluster.
    active_controller: int | None = 0
    #: controllers cut both ways from every broker (``isolate_controller``), and from the other
    #: controllers; a controller's process and its isolation are independent (a restart keeps it)
    controllers_cut_from_brokers: set[int] = field(default_factory=set)
    controllers_cut_from_controllers: set[int] = field(default_factory=set)
    #: the replicas of partitions 1, 2, ... in order (the scenario language names one partition:
    #: only a model built in Python has more, until the language slice of issue 27)
    more_partitions: InitVar[tuple[list[int], ...]] = ()
    #: every record sent, in the order sent, with its partition
    send_log: list[tuple[int, Send]] = field(default_factory=list)
    _next_value: int = 0
    _next_epoch: int = 1

    def __post_init__(self, replicas: list[int], more_partitions: tuple[list[int], ...]) -> None:
        for i, assignment in enumerate([replicas, *more_partitions]):
            unknown = set(assignment) - set(self.brokers_ids)
            if unknown:
                raise ModelError(f"replicas {sorted(unknown)} are not brokers of the cluster")
            if not assignment:
                raise ModelError(f"partition {i} has no replica")
        for b in self.brokers_ids:
            self.brokers[b] = Broker(id=b, epoch=self._new_epoch())
        for i, assignment in enumerate([replicas, *more_partitions]):
            p = self.partitions[i] = ModelPartition(i, list(assignment))
            for b in self.brokers:
                p.heard[b] = (p.part.leader, 1)
        self.ctx = ControllerContext(
            profile=self.profile,
            min_isr=self.min_isr,
            is_unfenced=self._is_unfenced,
            broker_epoch=self._broker_epoch,
            log_info=self._log_info,
            has_online_dir=self._has_online_dir,
        )
        for p in self.partitions.values():
            p.frozen_min_isr = self.eff_min_isr_of(p)
        #: ``_round_trip``'s answers (and ``_reaches``', as allow_slow None) since the last action that
        #: could change a link or a broker's state (``apply``), else None: not known to hold
        self._trips: dict[tuple[Node, Node, bool | None], bool] | None = None
        #: the partitions whose next round may change something (``_settle``); None: every one
        self._dirty: set[int] | None = None
        self._produced_to: list[int] = []  # the partitions the last produce sent records to
        self._touched: set[int] = set()  # ``_controller_round``'s
        self.settle()

    # Bound methods, not closures: ``fork`` copies the context with the cluster it asks.
    def _is_unfenced(self, broker: int) -> bool:
        # Kafka's leader and ISR acceptors ask ClusterControlManager.isActive: "Active means not
        # fenced nor in controlled shutdown" (its javadoc); a broker in controlled shutdown is
        # unfenced but neither electable nor eligible for an ISR (``shutting_down``).
        return broker not in self.fenced and broker not in self.shutting_down

    def _broker_epoch(self, broker: int) -> int:
        return self.brokers[broker].epoch

    def _has_online_dir(self, broker: int) -> bool:
        return broker not in self.dir_offline

    def _log_info(self, part: PartitionRecord, broker: int) -> tuple[int, int]:
        log = self.partitions[part.id].logs.get(broker)
        if log is None:  # a replica the change being built assigns (a reassignment's target): no log yet
            return -1, 0
        return log.last_epoch(), log.leo

    def fork(self) -> ModelCluster:
        """An independent copy (the profile shared: it is immutable), as ``copy.deepcopy`` makes
        it (``deep_fork``) but sharing the immutable objects -- records, requests, views, finished
        sends -- and copying only the containers: the timing alternatives fork a 50-partition model
        tens of times after a fault (``model/alternatives.py``). tests/test_fork.py holds it to
        ``deep_fork`` (equal, and no mutable object shared with the original)."""
        new = object.__new__(ModelCluster)
        d = new.__dict__
        d.update(self.__dict__)
        shared: dict[int, object] = {}
        d["partitions"] = {i: p.fork(shared) for i, p in self.partitions.items()}
        d["send_log"] = [(i, shared.get(id(s), s)) for i, s in self.send_log] if shared else list(self.send_log)  # type: ignore[misc]
        brokers = {}
        for b, broker in self.brokers.items():
            twin = brokers[b] = object.__new__(Broker)
            twin.__dict__.update(broker.__dict__)  # every field immutable
        d["brokers"] = brokers
        for name in ("fenced", "cut", "slow", "heartbeats_held", "assignments_held", "metadata_held", "shutting_down",
                     "unregistered", "dir_pending", "dir_offline",
                     "dir_late", "dir_due", "controllers_down", "controllers_cut_from_brokers",
                     "controllers_cut_from_controllers", "_touched"):
            d[name] = set(d[name])
        d["dir_moves"] = {b: set(moved) for b, moved in self.dir_moves.items()}
        d["protocol_errors"], d["down_order"] = list(self.protocol_errors), list(self.down_order)
        d["_produced_to"] = list(self._produced_to)
        if self._dirty is not None:
            d["_dirty"] = set(self._dirty)
        if self._trips is not None:
            d["_trips"] = self._trips.copy()
        if self.timing is not None:
            d["timing"] = copy.deepcopy(self.timing)
        ctx = object.__new__(ControllerContext)
        ctx.__dict__.update(self.ctx.__dict__)
        for name, value in self.ctx.__dict__.items():  # the cluster's bound methods: the fork's own
            if getattr(value, "__self__", None) is self:
                setattr(ctx, name, getattr(new, value.__name__))
        ctx.elections = replace(self.ctx.elections)
        ctx.departures = set(self.ctx.departures)
        d["ctx"] = ctx
        return new

    def deep_fork(self) -> ModelCluster:
        """``fork`` by ``copy.deepcopy``: the reference ``fork`` is tested against."""
        return copy.deepcopy(self, {id(self.profile): self.profile})

    # --- the one-partition surface -----------------------------------------------------------
    # The scenario language, the executor, the backends and the search speak of one partition
    # (the topic's partition 0) until the language slice of issue 27 names partitions. These
    # read-only properties keep their ~200 readers of ``m.part`` / ``m.logs`` (most in tests)
    # as they were; what only a few callers read, they read as ``m.partition.X``.

    @property
    def partition(self) -> ModelPartition:
        """Partition 0: the partition the one-partition surface (scenarios, observations) means."""
        return self.partitions[0]

    @property
    def part(self) -> PartitionRecord:
        return self.partitions[0].part

    @property
    def logs(self) -> dict[int, Replica]:
        return self.partitions[0].logs

    @property
    def committed(self) -> list[Record]:
        return self.partitions[0].committed

    @property
    def sends(self) -> list[Send]:
        return self.partitions[0].sends

    # --- reading -----------------------------------------------------------------------------

    def eff_min_isr_of(self, p: ModelPartition) -> int:
        return effective_min_isr(self.min_isr, len(p.replicas), self.profile)

    @property
    def eff_min_isr(self) -> int:
        return self.eff_min_isr_of(self.partitions[0])

    def seed_min_isr(self, p: ModelPartition) -> int:
        """The effective min ISR as the seeds define it, whatever the rule switches: KIP-966 "the
        effective min.insync.replicas will be min(min.insync.replicas, replication factor)"."""
        return min(self.min_isr, len(p.replicas))

    def leader_replica(self) -> Replica | None:
        return self.partitions[0].leader_replica()

    def hwm(self) -> int | None:
        return self.partitions[0].hwm()

    def _leads(self, p: ModelPartition) -> int | None:
        """``p``'s leader if it is live (unfenced, running), else None."""
        leader = p.part.leader
        if leader is None or leader in self.fenced or not self.brokers[leader].running:
            return None
        return leader

    def hwm_may_advance_now(self, p: ModelPartition | None = None) -> bool:
        """Whether the leader may advance its HWM in this state: a live leader, re-evaluating its
        HWM (``controller.hwm_reevaluated``), with a committed ISR at min ISR
        (``controller.hwm_may_advance``)."""
        p = self.partitions[0] if p is None else p
        leader = p.part.leader  # ``_leads``, inline: this is called in every leader round
        if leader is None or leader in self.fenced or not self.brokers[leader].running:
            return False
        return controller.hwm_reevaluated(p.hwm_waits_since is None) and \
            controller.hwm_may_advance(p.part.isr, self.eff_min_isr_of(p), self.profile.rules)

    def mark_hwm(self, only: set[int] | None = None) -> None:
        """The executor held the system's HWM to this state now: windows count from here, and
        this state's own moment counts as one if it lets the HWM advance. ``only``: the partitions
        whose HWM the system told (None: every one)."""
        for p in self.partitions.values():
            if only is not None and p.id not in only:
                continue
            p.hwm_window_open = self.hwm_may_advance_now(p)
            p.hwm_at_mark = p.hwm()

    def hwm_frozen_since_mark(self, partition: int = 0) -> bool:
        """The HWM cannot have moved since ``mark_hwm``: no state on the way (nor the marked one,
        nor this one) let it advance, and this state's own HWM did not go back (a loss: an unclean
        election, a truncated leader) -- KIP-966 "Additional High Watermark advancement
        requirement": "High Watermark can only advance if the ISR size is larger or equal to
        min.insync.replicas". Of one partition (partition 0 by default)."""
        p = self.partitions[partition]
        return not p.hwm_window_open and not self.hwm_may_advance_now(p) and p.hwm() == p.hwm_at_mark

    def absorb_hwm_window(self, twin: ModelCluster) -> None:
        """This state stands for ``twin`` too (the same fingerprint, another history): what let
        either one's HWM move counts, so a freeze is never required where one history allowed it."""
        for i, p in self.partitions.items():
            other = twin.partitions[i]
            if other.hwm_window_open or other.hwm_at_mark != p.hwm_at_mark:
                p.hwm_window_open = True

    def caught_up_followers(self) -> set[int]:
        """Followers that fetch from partition 0's leader over healthy links and hold its whole log."""
        p = self.partitions[0]
        leader = self._leads(p)
        if leader is None:
            return set()
        end = p.logs[leader].leo
        return {f for f in p.replicas if f != leader and self.brokers[f].running
                and self.brokers[f].registered and p.heard[f][0] == leader
                and self._round_trip(f, leader) and p.logs[f].leo == end}

    def maximal_isr(self, p: ModelPartition | None = None) -> list[int]:
        """The committed ISR plus members the leader has asked to add (KIP-966; the HWM waits for
        them: ``controller.advance_hwm``, mutation switch ``Rules.hwm_waits_for_maximal_isr``)."""
        p = self.partitions[0] if p is None else p
        isr = list(p.part.isr)
        if p.pending_alter is not None and self.profile.rules.hwm_waits_for_maximal_isr:
            isr += [b for b in p.pending_alter.isr if b not in isr]
        return isr

    def observe(self) -> Observation:
        """Every partition's state: partition 0's, the others' in ``partitions`` (none for one)."""
        first = self.observe_partition(self.partitions[0])
        if len(self.partitions) == 1:
            return first
        return replace(first, partitions={i: self.observe_partition(p) for i, p in self.partitions.items() if i})

    def observe_partition(self, p: ModelPartition) -> Observation:
        part = p.part
        return Observation(
            leader=part.leader,
            leader_epoch=part.leader_epoch,
            isr=tuple(part.isr),
            elr=tuple(part.elr),
            last_known_elr=tuple(part.last_known_elr),
            fenced=tuple(sorted(self.fenced - self.unregistered)),
            hwm=p.hwm(),
            leo={r: p.logs[r].leo for r in p.replicas},
            recovering=part.recovering,
            held=self.held_alter(p),
            partition_epoch=part.partition_epoch,
            replicas=tuple(part.replicas),
            adding=tuple(sorted(part.adding)),
            removing=tuple(sorted(part.removing)),
            active_controller=self.active_controller,
        )

    def held_alter(self, p: ModelPartition) -> tuple[int, ...]:
        """The leader, when its AlterPartition waits on a slow (held) link to the controller."""
        req = p.pending_alter
        if req is None or not self._alter_held(req.leader):
            return ()
        return (req.leader,) if self._reachable(req.leader, CONTROLLER) else ()

    def _alter_held(self, broker: int) -> bool:
        """``broker``'s AlterPartition is held on its slow link: to ``controller``, or to the one
        controller that is active now -- the broker sends it to the active controller alone
        (AlterPartitionManager through the controller channel, as its heartbeats:
        ``_reachable``), so a slow link to another controller holds nothing. Mutation switch
        ``Rules.alter_partition_to_active_controller``: off, a slow link to any controller holds it."""
        slow = self.slow
        if not slow:
            return False
        if (broker, CONTROLLER) in slow:
            return True
        if self.active_controller is not None and (broker, one_controller(self.active_controller)) in slow:
            return True
        return not self.profile.rules.alter_partition_to_active_controller \
            and any((broker, one_controller(c)) in slow for c in range(self.controllers))

    def has_quorum(self) -> bool:
        """A majority of the voters runs. KIP-595 (KRaft, the Raft of the metadata log): a
        candidate "becomes leader" once it "receives votes from a majority of the voters", and a
        record is committed once a majority has it; so without a majority no metadata record is
        written. Measured on Kafka 4.4.0 with 3 controllers (tests/sut/test_controller_faults.py):
        one crashed, another is active within seconds. With links between controllers cut, the
        quorum has a leader (``_elect_controller_over_cut_links``). Mutation switch
        ``Rules.quorum_needs_a_majority``: off, one running voter in touch is enough."""
        if self._controller_links_cut():
            return self.active_controller is not None
        in_touch = self._voters_in_touch()
        return 2 * len(in_touch) > self.controllers or (not self.profile.rules.quorum_needs_a_majority
                                                          and bool(in_touch))

    def _voters_in_touch(self) -> set[int]:
        """The running controllers that can reach each other: an isolated one (``isolate_controller``
        from the controllers) is a group of one, the rest one group -- KIP-595's majority must be
        among them. Mutation switch ``Rules.isolated_voter_leaves_the_quorum``: off, one cut off stays
        in touch."""
        cut_off = self.controllers_cut_from_controllers
        if cut_off and not self.profile.rules.isolated_voter_leaves_the_quorum:
            cut_off = set()
        return set(range(self.controllers)) - self.controllers_down - cut_off

    def _voter_link(self, a: int, b: int) -> bool:
        """Controller ``a``'s data reaches controller ``b`` in time: neither is cut from the other
        controllers (``isolate_controller``) nor is the directed link ``a -> b`` cut or slowed. A
        slowed one delivers 5 s late, past ``controller.quorum.fetch.timeout.ms`` (2 s) and the
        leader's check-quorum (1.5 x that): to the quorum's timers it is a cut (measured on Kafka
        4.4.0, docs/probes/slow_between_controllers.py: a leader that keeps a round trip with a
        majority stays, one that keeps none loses its leadership 4.9-7.0 s later, as over cuts).
        Mutation switch ``Rules.slowed_voter_link_is_cut``: off, a slowed link is in time."""
        isolated = self.controllers_cut_from_controllers
        link = (one_controller(a), one_controller(b))
        return a not in isolated and b not in isolated and link not in self.cut \
            and (link not in self.slow or not self.profile.rules.slowed_voter_link_is_cut)

    def _hearing(self, leader: int) -> set[int]:
        """The running voters that fetch from ``leader`` and hear its answers (a round trip), itself
        included: the voters it keeps as long as they are a majority. Mutation switch
        ``Rules.leading_needs_round_trips``: off, every running voter hears it."""
        live = set(range(self.controllers)) - self.controllers_down
        if not self.profile.rules.leading_needs_round_trips:
            return live
        return {v for v in live if v == leader or (self._voter_link(v, leader) and self._voter_link(leader, v))}

    def _controller_links_cut(self) -> bool:
        """Some link between two controllers is cut or slowed (``_voter_link``). With the mutation switch
        ``Rules.slowed_voter_link_is_cut`` off a slowed one still leads here, where ``_voter_link``
        holds it in time: every voter keeps its round trips, so the leader stays, or any live voter
        may win, as over healthy links."""
        return any(controller_of(a) is not None and controller_of(b) is not None
                   for links in (self.cut, self.slow) for a, b in links)

    def _elect_controller(self) -> None:
        """The quorum's leader after a change of the live voters: kept while it runs and a majority
        does; else one of the live voters once a majority runs (the lowest, a canonical choice).
        A leader cut from the other voters loses its leadership: KIP-595 as KAFKA-15489 (Kafka 3.7)
        implements it, "if the leader did not receive Fetch requests from a majority of the quorum
        for that amount of time [controller.quorum.fetch.timeout.ms], it would begin a new
        election" (measured on 4.4.0: ``kip966_active_controller_isolated``, step T2)."""
        if self._controller_links_cut():
            self._elect_controller_over_cut_links()
            return
        in_touch = self._voters_in_touch()
        if not self.has_quorum():
            self.active_controller = None
        elif self.active_controller not in in_touch:
            self.active_controller = min(in_touch)
            cut_from_a_broker = {controller_of(n) for link in self.cut for n in link} & in_touch
            if self.timing is not None and cut_from_a_broker:
                # Which voter wins is timing, and one cut from a broker fences it (``_reachable``):
                # every live voter may be the new active controller.
                self.active_controller = self.timing.choose(sorted(in_touch))
            if not self.profile.rules.failover_replays_elr:
                # Mutation switch: a new active controller that rebuilds the partition without its ELR
                # and LastKnownELR, against KIP-966: both are "stored in the metadata log" (its
                # "Public Interfaces": PartitionRecord, PartitionChangeRecord), which it replays.
                for p in self.partitions.values():
                    p.part.elr, p.part.last_known_elr = [], []

    def _elect_controller_over_cut_links(self) -> None:
        """The quorum's leader with some directed links between controllers cut (``cut: {from:
        {controller: 0}, to: {controller: 1}}``). Kafka 4.x KRaft (KafkaRaftClient, KIP-996
        pre-vote): a voter whose fetches get no answer for ``controller.quorum.fetch.timeout.ms``
        becomes a prospective candidate and asks the others for pre-votes; a voter that has fetched
        from the leader in its epoch refuses any vote (FollowerState.canGrantVote), and a prospective
        refused by a majority goes back to following the same leader (ProspectiveState). The leader
        resigns only when no majority's fetches reached it within 1.5 x the fetch timeout
        (LeaderState.timeUntilCheckQuorumExpires, pollLeader). So a leader that keeps a round trip
        with a majority of the voters, itself counted, stays the leader however the others' links
        are cut (measured on Kafka 4.4.0: ``kip966_controller_link_cut_one_way``). Without a leader
        (it stopped), a candidate needs the answers of a majority to its vote requests: one of the
        voters with a round trip to a majority wins (which one is timing), none if there is none.
        A running leader that lost its round trip with a majority is not covered. Measured on Kafka
        4.4.0 (docs/probes/controller_leader_loses_its_majority.py, four failovers; docs/model.md):
        one of the other two leads 4.5-5.3 s after the cut, as pre-vote would have it, but the
        brokers find it late, and it fences some or all of them for 0.2-0.6 s -- ISRs shrink to one
        member, a leader may move (0 to 1 once), epochs climb -- before they are back. Which brokers,
        in which order, is timing the model does not cover."""
        active = self.active_controller
        if active is not None and active not in self.controllers_down:
            if 2 * len(self._hearing(active)) > self.controllers:
                return
            raise ModelError(f"the active controller {active} keeps no round trip with a majority of the voters over "
                             "the links between controllers (cut or slowed): another voter leads a few seconds later, "
                             "and it briefly fences brokers that find it late -- which ones, and what their partitions "
                             "do meanwhile, is timing the model does not cover (measured: docs/model.md)")
        electable = sorted(c for c in set(range(self.controllers)) - self.controllers_down
                           if 2 * len(self._hearing(c)) > self.controllers)
        if not electable:
            self.active_controller = None
            return
        self.active_controller = self.timing.choose(electable) if self.timing is not None else electable[0]
        if not self.profile.rules.failover_replays_elr:  # the mutation switch of ``_elect_controller``
            for p in self.partitions.values():
                p.part.elr, p.part.last_known_elr = [], []

    def _controller_unreachable(self) -> bool:
        """The brokers cannot reach an active controller: it is cut from them. Others redirect a
        broker to it (KIP-595: a voter answers with the current leader), so no broker heartbeats
        while it leads (KIP-631: a broker that cannot heartbeat to the active controller is fenced
        once its session times out). Mutation switch ``Rules.controller_cut_from_brokers_fences_them``:
        off, they reach it anyway."""
        return self.active_controller is not None and self.active_controller in self.controllers_cut_from_brokers \
            and self.profile.rules.controller_cut_from_brokers_fences_them

    def _controller_index(self, action: ControllerAction) -> int:
        target = action.controller
        if target == ACTIVE_CONTROLLER:
            if self.active_controller is None:
                raise ModelError("no controller is active (no majority of the controllers runs)")
            return self.active_controller
        if not isinstance(target, int) or not 0 <= target < self.controllers:
            raise ModelError(f"controller {target} is not in the cluster ({self.controllers} controllers)")
        return target

    def within_tolerance(self) -> bool:
        """At most min ISR - 1 lossy shutdowns of relied-on replicas that have not caught up (in
        every partition), and no unclean election chosen by the operator
        (``unclean.leader.election.enable``)."""
        return all(p.ledger.within(p.frozen_min_isr) for p in self.partitions.values()) \
            and not self.ctx.chosen_unclean_elections

    def hwm_covers_committed(self, partition: int = 0) -> bool:
        """A partition's (0 by default) leader's HWM still covers every record that was ever below a HWM: the
        model lost nothing committed (Kafka's rules can lose it within the tolerance: the ``kafka``
        profile's election of a lossy last leader)."""
        p = self.partitions[partition]
        leader, n = p.leader_replica(), len(p.committed)
        return leader is not None and leader.hwm >= n and leader.log[:n] == p.committed

    def ledger_allows(self, broker: int) -> bool:
        """Whether a lossy shutdown of ``broker`` now keeps the run within the tolerance (of every
        partition)."""
        return all(p.ledger.within(p.frozen_min_isr, {broker} & p.trusted()) for p in self.partitions.values())

    def drain(self, partition: int = 0) -> list[ConsumedRecord]:
        p = self.partitions[partition]
        leader = p.leader_replica()
        if leader is None or p.part.leader in self.fenced:
            return []
        return [ConsumedRecord(i, r.value) for i, r in enumerate(leader.log[: leader.hwm])]

    # --- links -------------------------------------------------------------------------------

    def _reachable(self, src: Node, dst: Node) -> bool:
        if CONTROLLER in (src, dst):
            if self._controller_unreachable():
                return False
            # A broker's link to ``controller`` is its link to the active controller: apache/kafka
            # 4.4.0 BrokerLifecycleManager sends its heartbeats through the controller channel
            # (NodeToControllerChannelManager), whose node is "the current active controller"
            # (RaftControllerNodeProvider: the KRaft leader), and the broker fetches the metadata
            # log as an observer from the quorum leader (KafkaRaftClient). So a link cut to the
            # active controller alone stops its heartbeats and its metadata, and the active
            # controller fences it once its session expires (BrokerHeartbeatManager); one to a
            # controller that is not active changes nothing, and once another controller is active
            # the broker reaches it (crash_controller: active) and is unfenced. Measured on Kafka
            # 4.4.0: scenarios/broker_cut_from_active_controller.elr.yaml.
            if self.cut:  # nothing cut (the usual case): no link to look up
                active = one_controller(self.active_controller)
                if (active if src == CONTROLLER else src, active if dst == CONTROLLER else dst) in self.cut \
                        and self.profile.rules.broker_link_is_to_active_controller:
                    return False
        for node in (src, dst):
            if node != CONTROLLER:
                b = self.brokers[int(node)]
                if not b.running or b.paused:
                    return False
        return (src, dst) not in self.cut

    def _reaches(self, src: Node, dst: Node) -> bool:
        """``_reachable``, answered once while the links hold (``_trips``)."""
        trips = self._trips
        if trips is None:
            return self._reachable(src, dst)
        known = trips.get((src, dst, None))
        if known is None:
            known = trips[(src, dst, None)] = self._reachable(src, dst)
        return known

    def _round_trip(self, a: Node, b: Node, allow_slow: bool = False) -> bool:
        trips = self._trips
        if trips is not None:
            known = trips.get((a, b, allow_slow))
            if known is not None:
                return known
        ok = self._reachable(a, b) and self._reachable(b, a)
        if ok and not allow_slow:
            ok = (a, b) not in self.slow and (b, a) not in self.slow
        if trips is not None:
            trips[(a, b, allow_slow)] = ok
        return ok

    def _fetches_late(self, p: ModelPartition, follower: int, leader: int) -> bool:
        """``follower`` fetches from ``leader`` over a slow link, not a cut: its fetch requests
        arrive (late), the answers come after its fetch timeout (``slow``'s 5 s against
        ``replica.socket.timeout.ms`` 3 s, sut/config.py), so it gets no records but the leader
        learns its fetch offset."""
        b = self.brokers[follower]
        return p.heard[follower][0] == leader and b.registered and follower not in self.fenced \
            and self._round_trip(follower, leader, allow_slow=True) and not self._round_trip(follower, leader)

    def late_fetchers(self, index: int = 0) -> set[int]:
        """The followers of partition ``index`` that fetch from its live leader over a slow link
        (``_fetches_late``): each is out of the ISR while the HWM passes its end and comes back
        only at the frozen HWM (``_may_be_late_in_sync``), never by lagging on its own."""
        p = self.partitions[index]
        leader = self._leads(p)
        if leader is None:
            return set()
        return {f for f in p.part.replicas if f != leader and self._fetches_late(p, f, leader)}

    def _may_be_late_in_sync(self, p: ModelPartition, follower: int, leader: int) -> bool:
        """Whether the leader may count ``follower``'s late fetches as in sync now.

        Kafka's leader adds a follower to the ISR on a fetch at or past its HWM and its epoch's
        start offset (``Partition.maybeExpandIsr`` / ``isFollowerInSync``: "followerEndOffset >=
        leaderLog.highWatermark && leaderEpochStartOffsetOpt.exists(followerEndOffset >= _)"), with
        no lag test, and removes it only once it is behind the leader's log end for longer than
        ``replica.lag.time.max.ms`` (``ReplicaState.isCaughtUp``). A slow follower's fetches arrive
        late and it gets no records: once out, it comes back only while the HWM has not passed its
        log end (``outrun``) -- KIP-966 "High Watermark can only advance if the ISR size is larger
        or equal to min.insync.replicas": so when it left under min ISR -- then lags out again.
        Measured on Kafka 4.4.0 (docs/model.md, "Timing: a slow follower at the frozen HWM"): ISR
        [1] and [1, 2] in turn every ~5 s while 2 was slow, 3 (passed by the HWM) never back."""
        if follower == leader or follower not in p.part.replicas or not self.brokers[follower].running \
                or not self._fetches_late(p, follower, leader):
            return False
        lead, log = p.logs[leader], p.logs[follower]
        if _common_prefix(log.log, lead.log) < log.leo:
            return False  # diverged: the leader's answer (truncate) never reaches it
        epoch_start = next((i for i, r in enumerate(lead.log) if r.epoch >= p.part.leader_epoch), lead.leo)
        if log.leo < lead.hwm or log.leo < epoch_start:
            return False
        if follower in p.late_in_sync:
            return True  # in the ISR by its late fetches: it may still be within the lag time
        return follower not in p.part.isr and follower not in p.outrun

    def asked_to_drop(self) -> dict[int, set[int]]:
        """Per partition, the followers its leader has asked the controller to drop from the ISR,
        the request not answered yet (held on a slow link, or the controller unreachable). A Kafka
        leader asks that only of a follower *behind* it (``Replica.isCaughtUp``: a follower at the
        leader's end stays in sync however long it is silent), which takes records it lacks: the
        executor's ``Backend.nudge``."""
        asked = {}
        for i, p in self.partitions.items():
            if p.pending_alter is not None and (dropped := set(p.part.isr) - set(p.pending_alter.isr)):
                asked[i] = dropped
        return asked

    def late_in_sync_candidates(self, p: ModelPartition | None = None) -> list[int]:
        """The slow followers the leader may count as in sync now (``_may_be_late_in_sync``): each
        is taken back and dropped in turn on a real cluster, an ISR change each time."""
        p = self.partitions[0] if p is None else p
        leader = self._leads(p)
        if leader is None:
            return []
        return [f for f in sorted(p.late_in_sync | (set(p.part.replicas) - set(p.part.isr)))
                if self._may_be_late_in_sync(p, f, leader)]

    def _choose_late_in_sync(self) -> bool:
        """Timing: which slow followers the leader counts as in sync at the moment the action's
        state is seen -- each may be in or out, as a Kafka leader takes it back at the frozen HWM
        and drops it for lagging in turn (``_may_be_late_in_sync``). Canonical: none (a slow
        follower is out, what the scenarios mean). Returns whether the set changed (in a partition)."""
        changed = False
        for p in self.partitions.values():
            if self.timing is not None:
                chosen = self.timing.choose(late_in_sync_options(self.late_in_sync_candidates(p)))
            elif not p.late_in_sync:
                continue  # the canonical choice, already taken: nothing changes
            else:
                chosen = _NONE_LATE
            for f in chosen:
                p.follower_leo.setdefault(f, p.logs[f].leo)  # its late fetch told the leader
            if chosen != p.late_in_sync:
                changed = True
                self._mark_dirty((p.id,))
            p.late_in_sync = set(chosen)
        return changed

    # --- actions -----------------------------------------------------------------------------

    def apply(self, action: Action) -> Result:
        # The handler straight from the dispatch table (``self._do`` builds a wrapper at each call).
        # An assignment timing left for this action lands in it (``_assignment_lands_now``).
        self.dir_due, self.dir_late = self.dir_late & self.dir_pending, set()
        handler = ModelCluster.__dict__["_do"].dispatcher.dispatch(action.__class__)
        if self.full_settle or not isinstance(action, (Produce, Wait)):
            # A produce or a wait cuts, heals or slows no link, and starts, stops, pauses or resumes
            # no broker: the links answer as in the last settle (``_trips``). Any other action may.
            # ``full_settle`` asks them again: the reference (tests/test_settle_dirty.py).
            self._trips = None
        if isinstance(action, Produce):
            # A produce appends to the partitions it sends to, and changes no partition record
            # (``note_change`` has nothing to see): only they settle, beside those still moving.
            result = handler(self, action)
            self._mark_dirty(self._produced_to)
        elif isinstance(action, Wait):
            result = handler(self, action)  # changes nothing: the partitions still moving settle
        else:
            # Any other action may change the cluster (links, brokers, controllers, configs):
            # every partition settles, as those its handler settles itself (``settle``).
            self._dirty = None
            result = handler(self, action)
            self._dirty = None
            self._trips = None  # a handler that settles on its way (a restart) changes links after it
            for p in self.partitions.values():
                p.note_change()
        self._settle()
        if self._choose_late_in_sync():
            self._settle()
        if isinstance(result, ProduceOutcome):
            for p in self.partitions.values():
                if p.pending_produce:  # ``_finish_produce`` has nothing to do without
                    self._finish_produce(p)
        return result

    @classmethod
    def handled_actions(cls) -> set[type]:
        return set(cls.__dict__["_do"].dispatcher.registry)

    # One handler per action: what it does to the model's state before the cluster settles.

    @singledispatchmethod
    def _do(self, action: Action) -> Result:
        raise ModelError(f"the model does not know action {action.kind!r}")

    @_do.register
    def _(self, action: Cut) -> Result:
        links = self._resolve(action.links)
        self.cut |= set(links)
        self._note_down(links)
        if self._controller_links_cut():
            self._elect_controller()
        return None

    def _resolve(self, links: tuple[Link, ...]) -> tuple[Link, ...]:
        """The links with ``{controller: active}`` as the number of the controller active now."""
        def node(n: Node) -> Node:
            target = controller_of(n)
            if target is None:
                return n
            if target == ACTIVE_CONTROLLER:
                if self.active_controller is None:
                    raise ModelError("no controller is active (no majority of the controllers runs)")
                return one_controller(self.active_controller)
            if not isinstance(target, int) or not 0 <= target < self.controllers or self.controllers == 1:
                raise ModelError(f"{n}: the cluster has {self.controllers} controllers")
            return n
        return tuple((node(a), node(b)) for a, b in links)

    @_do.register
    def _(self, action: Slow) -> Result:
        links = set(self._resolve(action.links))
        self.slow |= links
        if any(controller_of(a) is not None and controller_of(b) is not None for a, b in links):
            self._elect_controller()
        return None

    @_do.register
    def _(self, action: Heal) -> Result:
        links = set(self._resolve(action.links)) if action.links is not None else self.cut | self.slow
        if action.links is not None:
            # ``controller`` is every controller: healing it heals the links to each one (on Kafka the
            # same toxics); one controller healed while ``controller`` stays cut would reopen a link
            # to it alone, which the model does not hold (the symbolic cut has no parts).
            links |= {(one_controller(n) if a == CONTROLLER else a, one_controller(n) if b == CONTROLLER else b)
                      for a, b in links if CONTROLLER in (a, b) for n in range(self.controllers)}
            for a, b in links:
                whole = tuple(CONTROLLER if controller_of(n) is not None else n for n in (a, b))
                if whole != (a, b) and whole in self.cut and whole not in links:
                    one = next(controller_of(n) for n in (a, b) if controller_of(n) is not None)
                    raise ModelError(f"heal of a link to controller {one}: it is part of a cut from every controller "
                                     "(controller), which the model heals only whole: heal the link to controller")
        self.cut -= links
        self.slow -= links
        if action.links is None:
            self.heartbeats_held.clear()
            self.assignments_held.clear()
            self.metadata_held.clear()
            self.controllers_cut_from_brokers.clear()
            self.controllers_cut_from_controllers.clear()
            self._elect_controller()
        else:
            broker_links = [link for link in links if not all(controller_of(n) is not None for n in link)]
            if any(CONTROLLER in link or controller_of(n) in self.controllers_cut_from_brokers
                   for link in broker_links for n in link) and self.controllers_cut_from_brokers:
                # On Kafka a broker's links to ``controller`` are its links to every controller,
                # the isolated one's too: healing them would end part of the isolation.
                raise ModelError("a controller is isolated from the brokers: heal: all ends its isolation")
            to_controller = {int(src) for src, dst in links if dst == CONTROLLER and src != CONTROLLER}
            self.heartbeats_held -= to_controller
            self.assignments_held -= to_controller
            self.metadata_held -= to_controller
            if any(controller_of(a) is not None and controller_of(b) is not None for a, b in links):
                self._elect_controller()
        return None

    @_do.register
    def _(self, action: HoldDirAssignments) -> Result:
        self.assignments_held.add(action.broker)
        return None

    @_do.register
    def _(self, action: HoldMetadata) -> Result:
        if any(action.broker in p.part.replicas or action.broker in p.logs for p in self.partitions.values()):
            # Its replica would follow a leadership it no longer learns of: not modelled.
            raise ModelError(f"hold_metadata {action.broker}: it holds a replica of the topic, whose fetching would "
                             "follow stale metadata (not modelled): hold a broker that holds no replica")
        self.metadata_held.add(action.broker)
        return None

    @_do.register
    def _(self, action: HoldHeartbeats) -> Result:
        self.heartbeats_held.add(action.broker)
        self._note_down_broker(action.broker)
        return None

    @_do.register(BeginShutdown)  # the same state; only a real cluster has a process still exiting
    @_do.register
    def _(self, action: Shutdown) -> Result:
        if action.broker in self.unregistered:
            # Its controlled shutdown is asked of a controller that no longer knows it: not
            # measured, so not modelled (kill it: ``crash``).
            raise ModelError(f"shutdown {action.broker}: the broker is unregistered, and how its clean shutdown ends "
                             "with no registration is not modelled: use crash")
        if not isinstance(action, BeginShutdown) and self._shutdown_held(action.broker):
            raise ModelError(f"shutdown {action.broker}: a broker's metadata is held (hold_metadata), so its "
                             "controlled shutdown cannot finish and the process waits out Kafka's 5 minutes: "
                             "use begin_shutdown")
        if self._running(action.broker).paused:
            # A stopped JVM cannot handle SIGTERM: it is resumed first (SIGCONT, then SIGTERM), and
            # its overdue heartbeat races the controlled shutdown. Heartbeat first (found by elr
            # explore on Kafka 4.4.0, 2 of 2 local runs): a fenced ELR member is unfenced and
            # elected, then leaves cleanly. Shutdown first (CI on 4.4.0, 2026-11-26): the heartbeat
            # already asks to shut down, the controller never unfences it, nothing changes.
            self.brokers[action.broker].paused = False
            if self.timing is None or self.timing.choose((True, False)):
                self.settle()
        self._stop(action.broker, clean=True)
        return None

    @_do.register
    def _(self, action: Crash) -> Result:
        self._stop(action.broker, clean=False)
        return None

    @_do.register
    def _(self, action: PowerOff) -> Result:
        return [loss for b in action.brokers for loss in self._power_off(b)]

    @_do.register
    def _(self, action: Restart) -> Result:
        self._start(action.broker)
        return None

    @_do.register
    def _(self, action: ReplaceDisk) -> Result:
        return self._replace_disk(action.broker)

    @_do.register
    def _(self, action: Unregister) -> Result:
        """ReplicationControlManager.unregisterBroker: BROKER_ID_NOT_REGISTERED for a broker with no
        registration; else handleBrokerUnregistered -- generateLeaderAndIsrUpdates with the broker as
        ``brokerToRemove`` over the partitions whose ISR holds it (out of the ISR and leadership, as a
        fencing), then over those whose ELR holds it, where the target ISR is unchanged and nothing
        moves: it stays in the ELR (measured on 4.4.0, docs/probes/unregister_broker.py, though the
        method's comment says "remove this broker from any ISR or ELR") -- but that pass elects,
        with the topic's unclean config, where the partition has no leader
        (``controller.reconsider_after_unregistration``). The ELR rules of the change are a
        fencing's (KIP-966: a replica leaving the ISR below min ISR goes to the ELR)."""
        b = action.broker
        if b in self.unregistered:
            # A broker restarted but not registered again still has its old registration: only an
            # unregistered one has none.
            return Refusal(action.kind, "BROKER_ID_NOT_REGISTERED")
        if b in self.shutting_down or b in self.metadata_held:
            raise ModelError(f"unregister {b}: the broker is in a controlled shutdown or its metadata is held, and "
                             "how unregistering ends either is not measured (not modelled): heal first")
        # The ELR pass reads the partitions as they were before the event (its records are replayed
        # after both passes).
        in_elr = [p.part for p in self.partitions.values() if b in p.part.elr]
        self.unregistered.add(b)
        if b not in self.fenced:
            self._fence(b)
        for part in in_elr:
            controller.reconsider_after_unregistration(part, self.ctx)
        return None

    @_do.register
    def _(self, action: Pause) -> Result:
        self._running(action.broker).paused = True
        self._note_down_broker(action.broker)
        return None

    @_do.register
    def _(self, action: Resume) -> Result:
        self.brokers[action.broker].paused = False
        return None

    @_do.register
    def _(self, action: Flush) -> Result:
        for p in self.partitions.values():
            log = p.logs.get(action.broker)
            if log is not None:
                log.flushed = log.leo
        return None

    @_do.register
    def _(self, action: MoveLogDir) -> Result:
        self._running(action.broker)
        p = self.partitions[action.partition]
        log = p.logs.get(action.broker)
        if log is None:
            raise ModelError(f"broker {action.broker} holds no replica of partition {p.id} to move")
        if self.profile.directory_ids and (action.broker in self.assignments_held
                                           or not self._round_trip(action.broker, CONTROLLER, allow_slow=True)):
            # With directory ids the broker promotes the moved copy only once the controller accepted
            # its AssignReplicasToDirs (ReplicaAlterLogDirsThread.maybePromoteFutureReplica: "don't
            # promote the future replica yet until the controller has accepted the request"): held,
            # the move waits for the heal, a state this model does not hold (measured on 4.4.0 by
            # ``elr explore``: 2 schedules, the future copy still unpromoted 36 s later).
            raise ModelError(f"move_log_dir {action.broker}: its directory assignment cannot reach the controller, and "
                             "the broker promotes the moved copy only once the controller accepted it: a move "
                             "waiting on a held assignment is not modelled (heal first)")
        # The copy is written to the new dir as a follower's appends and renamed into place;
        # nothing fsyncs it (Kafka's LogManager.replaceCurrentWithFutureLog, read in the source;
        # measured on 4.0.2: 5 records synced in d0, moved to d1, 0 left there after a power cut).
        log.flushed = 0
        # The broker tells the controller with AssignReplicasToDirs, as after a new disk: held by
        # ``hold_dir_assignments`` and by a cut from the controller like any of its requests.
        if self.profile.directory_ids:
            if action.broker not in self.dir_pending:
                self.dir_moves[action.broker] = set()
            if action.broker in self.dir_moves:  # not when a new disk's assignment is pending: it moves all
                self.dir_moves[action.broker].add(p.id)
            self.dir_pending.add(action.broker)
        return None

    @_do.register(CrashController)
    @_do.register(ShutdownController)
    @_do.register(PowerOffController)
    def _(self, action: StopController) -> Result:
        index = self._controller_index(action)
        if index in self.controllers_down:
            raise ModelError(f"controller {index} is not running")
        # The partition's state is the metadata log's (KIP-966: "LastKnownELR is stored in the
        # metadata log", as the ELR, in PartitionRecord and PartitionChangeRecord, its "Public
        # Interfaces"): a new active controller replays it, so a failover changes nothing of it.
        # A power cut changes nothing of it either: only committed records are replayed, and a
        # record is committed once a majority of the voters holds it on disk. KIP-595: the leader
        # advances the high watermark to "the largest offset which is replicated to a majority"
        # (LeaderState.maybeUpdateHighWatermark), and a voter flushes what it fetched before it
        # fetches again, the request that tells the leader its offset (KafkaRaftClient
        # .appendAsFollower: "the leader only requires that voters have flushed their log before
        # sending a Fetch request"; the leader counts its own end offset even before its flush,
        # flushLeaderLog). So with one lossy controller out of three a committed record is on the
        # disk of a voter that did not lose it, which alone can win the election while the lossy one is down
        # (KIP-595: a voter grants its vote only to a candidate whose log is at least as long);
        # the lossy one then truncates to the new leader's log. Measured on Kafka 4.4.0:
        # kip966_controller_power_off_mid_timeline.
        self.controllers_down.add(index)
        self._elect_controller()
        return None

    @_do.register
    def _(self, action: IsolateController) -> Result:
        index = self._controller_index(action)
        unfenced = sorted(set(self.brokers_ids) - self.fenced)
        if action.scope != "brokers" and self.controllers > 1 and unfenced:
            # An active controller cut off resigns, but the brokers learn the new leader only from the
            # voters' answers (KAFKA-13621) and keep addressing the isolated one meanwhile (measured
            # on Kafka 4.4.0: ~35 s): the new controller fences whichever it has not heard from
            # within the session timeout (measured: the leader moved 0 -> 2, partition epoch 0 -> 4,
            # broker 2 never fenced). Which ones, and in which order, is timing the model does not
            # cover yet; and which controller is active on a real cluster is timing too, so a
            # controller named by its number may be the active one.
            raise ModelError(f"isolating a controller from the other controllers while brokers {unfenced} are "
                             "unfenced: if it is the active one, which of them the new controller fences is timing "
                             "the model does not cover (cut it from the brokers first: isolate_controller "
                             "{from: brokers})")
        unreachable_before = self._controller_unreachable()
        if action.scope in ("brokers", "all"):
            self.controllers_cut_from_brokers.add(index)
        if action.scope in ("controllers", "all") and self.controllers > 1:
            self.controllers_cut_from_controllers.add(index)
        self._elect_controller()
        if self._controller_unreachable() and not unreachable_before:
            # Every broker lost the controller at once; whose session expires first is timing.
            losing = [b for b in self.brokers_ids if b not in self.down_order]
            orders = list(itertools.permutations(losing))
            for b in self.timing.choose(orders) if self.timing is not None else losing:
                self._note_down_broker(b)
        return None

    @_do.register
    def _(self, action: RestartController) -> Result:
        if action.controller == ALL_CONTROLLERS:
            self.controllers_down.clear()
        else:
            index = self._controller_index(action)
            if index not in self.controllers_down:
                raise ModelError(f"controller {index} is already running")
            self.controllers_down.discard(index)
        self._elect_controller()
        return None

    @_do.register
    def _(self, action: Produce) -> Result:
        return self._produce(action)

    @_do.register
    def _(self, action: SetMinIsr) -> Result:
        # The topic's config changes once; each of its partitions builds its change against the
        # value the topic had (``change_min_isr`` compares and then stores it in the context).
        was, self.min_isr = self.min_isr, action.value
        for p in self.partitions.values():
            self.ctx.min_isr = was
            had = set(p.part.elr)
            controller.change_min_isr(p.part, action.value, self.ctx)
            if self.profile.hwm_waits_for_an_event:
                p.hwm_waits_since = p.part.partition_epoch
            if had - set(p.part.elr):
                p.quorum_shrunk_by = f"min ISR set to {action.value} cleared the ELR"
        return None

    @_do.register
    def _(self, action: SetClusterMinIsr) -> Result:
        for p in self.partitions.values():
            had = set(p.part.elr)
            controller.change_cluster_min_isr(p.part, action.value, self.ctx)
            if had - set(p.part.elr):
                p.quorum_shrunk_by = f"cluster-wide min ISR set to {action.value} cleared the ELR"
        return None

    @_do.register
    def _(self, action: UncleanElection) -> Result:
        for p in self.partitions.values():  # the topic's config: every partition of it
            controller.set_unclean_election(p.part, action.enabled, action.elect, self.ctx)
        return None

    @_do.register
    def _(self, action: ElectLeaders) -> Result:
        controller.elect_preferred_leader(self.partitions[action.partition].part, self.ctx)
        return None

    @_do.register
    def _(self, action: Reassign) -> Result:
        # Kafka answers UNKNOWN_SERVER_ERROR: its election asks the directory of a replica in the
        # ELR but not assigned (docs/model.md, "Reassignment and a stale ELR"); nothing changes.
        p = self.partitions[action.partition]
        if controller.reassignment_refused(p.part, list(action.replicas), self.ctx) is not None:
            return Refusal(action.kind, "UNKNOWN_SERVER_ERROR")
        controller.start_reassignment(p.part, list(action.replicas), self.ctx)
        self._follow_assignment(p)
        return None

    @_do.register
    def _(self, action: CancelReassignment) -> Result:
        p = self.partitions[action.partition]
        error = controller.cancel_reassignment(p.part, self.ctx)
        if error == "NO_REASSIGNMENT_IN_PROGRESS":
            raise ModelError("cancel_reassignment: no reassignment is under way (NO_REASSIGNMENT_IN_PROGRESS)")
        if error == "INVALID_REPLICA_ASSIGNMENT":  # Kafka's revert would be an unclean election
            return Refusal(action.kind, error)
        self._follow_assignment(p)
        return None

    @_do.register
    def _(self, action: ForgedAlterPartition) -> Result:
        # As the leader would send it: the controller's epochs now, each member at its registration's
        # epoch; the sender's one below its own when ``stale_broker_epoch`` (any other epoch is stale).
        p = self.partitions[action.partition]
        part = p.part
        if part.leader is None:
            raise ModelError(f"alter_partition: partition {action.partition} has no leader to send it as")
        epoch = self.brokers[part.leader].epoch
        req = AlterPartition(
            leader=part.leader, leader_epoch=part.leader_epoch, partition_epoch=part.partition_epoch,
            new_isr=tuple((b, self.brokers[b].epoch) for b in (part.isr if action.isr is None else action.isr)),
            broker_epoch=epoch - 1 if action.stale_broker_epoch else epoch, recovering=action.recovering)
        was_recovering = part.recovering
        answer = controller.answer_alter_partition(part, req, self.ctx)
        if was_recovering and not part.recovering and len(set(part.isr) | set(part.elr)) < p.frozen_min_isr:
            # No leader ends RECOVERING before a follower joins: the protocol's exemption of an unclean
            # election from ISR + ELR >= min ISR is ended by the harness's request alone.
            p.quorum_shrunk_by = "a forged AlterPartition ended RECOVERING with ISR + ELR under min ISR"
        return None if answer is None else Refusal(action.kind, answer)

    @_do.register
    def _(self, action: Wait) -> Result:
        return None  # the model has no clock: its timeouts fire in every settle

    def _follow_assignment(self, p: ModelPartition) -> None:
        """The brokers hold the replicas the controller assigns: a broker newly assigned starts an
        empty log (a removed replica's log is deleted, so one added again starts over too)."""
        for b in p.part.replicas:
            if b not in p.replicas:
                p.logs[b] = Replica(broker=b)
        p.replicas = list(p.part.replicas)

    def _running(self, broker: int) -> Broker:
        b = self.brokers[broker]
        if not b.running:
            raise ModelError(f"broker {broker} is not running")
        return b

    def _note_down(self, links: tuple[Link, ...]) -> None:
        active = one_controller(self.active_controller)
        for src, dst in links:
            for node in (src, dst):
                if not is_controller(node) and (CONTROLLER in (src, dst) or active in (src, dst)):
                    self._note_down_broker(int(node))

    def _note_down_broker(self, broker: int) -> None:
        if broker not in self.down_order:
            self.down_order.append(broker)

    def _stop(self, broker: int, clean: bool, lossy: bool = False) -> None:
        b = self._running(broker)
        for p in self.partitions.values():
            if not clean:
                p.ledger.shutdown(broker, lossy, p.trusted(), self.profile.tolerance_counts_crashes,
                                  self.profile.rules.crash_is_lossless)
            log = p.logs.get(broker)
            if clean and log is not None:
                log.flushed = log.leo
        if clean:
            b.clean_marker = b.epoch
            # Controlled shutdown: the controller moves leadership and ISR away first, in every
            # partition the broker touches.
            if self._reachable(broker, CONTROLLER) and broker not in self.fenced and self.has_quorum():
                if self._shutdown_held(broker):
                    # Kafka's handleBrokerInControlledShutdown: "we remove this broker from any ISR
                    # and elect new leaders for partitions led by this broker" (its javadoc), with
                    # the registration marked IN_CONTROLLED_SHUTDOWN -- the same partition change
                    # as a fencing (handleBrokerFenced: generateLeaderAndIsrUpdates with the broker
                    # removed, the ISR partitions alone) -- but not the fencing itself: that waits
                    # (``_shutdown_held``). ``_is_unfenced`` now answers no for it, as isActive does.
                    self.shutting_down.add(broker)
                    partitions = list(self.partitions.values())
                    for p in partitions if self.profile.rules.broker_event_changes_every_partition else partitions[:1]:
                        controller.fence(p.part, broker, self.ctx)
                else:
                    self._fence(broker)
        else:
            b.clean_marker = None
        b.running, b.paused = False, False
        self._note_down_broker(broker)

    def _power_off(self, broker: int) -> list[LossEvidence]:
        """Every partition's replica on ``broker`` loses what it had not flushed: the evidence of
        each partition it holds (partition 0's alone, zero, when it holds none)."""
        self._stop(broker, clean=False, lossy=True)
        evidence = []
        for p in self.partitions.values():
            log = p.logs.get(broker)
            if log is None:
                continue
            before = log.leo
            del log.log[log.flushed :]
            log.hwm = min(log.hwm, log.leo)
            evidence.append(LossEvidence(broker, before, log.leo, partition=p.id))
        return evidence or [LossEvidence(broker, 0, 0)]

    def _replace_disk(self, broker: int) -> list[LossEvidence]:
        self._refuse_held_start(broker)  # before the disk is gone: a refused action changes nothing
        b = self.brokers[broker]
        if b.running:
            self._stop(broker, clean=False, lossy=True)
        else:
            for p in self.partitions.values():
                p.ledger.shutdown(broker, True, p.trusted())
        b.clean_marker = None
        b.new_disk = True
        evidence = []
        for p in self.partitions.values():
            log = p.logs.get(broker)
            if log is not None:
                evidence.append(LossEvidence(broker, log.leo, 0, partition=p.id))
                log.log.clear()
                log.flushed = log.hwm = 0
        self.settle()  # the controller notices the broker went away before it comes back
        self._start(broker)
        return evidence or [LossEvidence(broker, 0, 0)]

    def _start(self, broker: int) -> None:
        b = self.brokers[broker]
        if b.running:
            raise ModelError(f"broker {broker} is already running")
        self._refuse_held_start(broker)
        b.running, b.paused, b.registered = True, False, False

    def _refuse_held_start(self, broker: int) -> None:
        if broker in self.shutting_down:
            raise ModelError(f"broker {broker} cannot start again: its controlled shutdown waits on a held broker's "
                             "metadata (hold_metadata), so its process has not exited: heal first")
        if broker in self.metadata_held:
            raise ModelError(f"broker {broker} cannot start again: its metadata is held (hold_metadata), and a broker "
                             "is unfenced only once caught up with its registration (not modelled): heal first")

    def _new_epoch(self) -> int:
        epoch = self._next_epoch
        self._next_epoch += 1
        return epoch

    # --- produce -----------------------------------------------------------------------------

    def _produce(self, action: Produce) -> ProduceOutcome:
        """The records go round-robin over the partitions by their number: ``v<k>`` to partition
        k mod N (all to partition 0 for one), each partition's share one request to its leader."""
        outcome = ProduceOutcome(acks=action.acks, sent=action.count)
        first = self._next_value
        self._next_value += action.count
        n = len(self.partitions)
        self._produced_to = []
        for i, p in self.partitions.items():
            values = [f"v{k}" for k in range(first + (i - first) % n, first + action.count, n)]
            if values:
                self._produce_to(p, values, action.acks, outcome)
                self._produced_to.append(i)
        return outcome

    def _produce_to(self, p: ModelPartition, values: list[str], acks: str, outcome: ProduceOutcome) -> None:
        sends = [Send(v, acks) for v in values]
        p.sends += sends
        self.send_log += [(p.id, send) for send in sends]
        leader = p.part.leader
        error: str | None
        if leader is None or not self.brokers[leader].running or leader in self.fenced:
            error = "NOT_LEADER_OR_FOLLOWER"
        else:
            error = controller.produce_rejection(acks, p.part.isr, self.eff_min_isr_of(p), self.profile.rules)
        if error is not None:
            outcome.failed[error] = outcome.failed.get(error, 0) + len(values)
            for send in sends:
                send.status, send.error = "fail", error
            return
        assert leader is not None
        log = p.logs[leader]
        records = [Record(v, p.part.leader_epoch, acks) for v in values]
        first = log.leo
        log.log.extend(records)
        p.hwm_waits_since = None  # an append: the leader evaluates its HWM again
        for i, send in enumerate(sends):
            send.offset = first + i
        if acks == "all":
            p.pending_produce.append(ProduceRequest(first, records, outcome, sends))
            outcome.pending += len(values)
        else:
            # acks=1 is acknowledged at the leader's append; acks=0 is never answered.
            outcome.acked += len(values) if acks == "1" else 0
            for send in sends:
                send.status = "ok" if acks == "1" else "sent"

    def _finish_produce(self, p: ModelPartition) -> None:
        """Complete acks=all requests the way Kafka's delayed produce does."""
        if not p.pending_produce:
            return
        leader = p.leader_replica()
        still: list[ProduceRequest] = []
        for req in p.pending_produce:
            end = req.first_offset + len(req.records)
            kept = leader is not None and leader.log[req.first_offset : end] == req.records
            if not kept:
                self._complete(req, "NOT_LEADER_OR_FOLLOWER")
            elif leader is not None and leader.hwm >= end:
                if len(p.part.isr) < self.eff_min_isr_of(p):
                    self._complete(req, "NOT_ENOUGH_REPLICAS_AFTER_APPEND")
                else:
                    self._complete(req, None)
                    p.acked.extend(req.records)
                    holders = sum(p.logs[r].log[req.first_offset : end] == req.records for r in p.replicas)
                    p.acks.append((req.records[0].value, holders, self.seed_min_isr(p)))
            else:
                still.append(req)
        p.pending_produce = still

    @staticmethod
    def _complete(req: ProduceRequest, error: str | None) -> None:
        out, n = req.outcome, len(req.sends)  # an outcome spans one request per partition
        if error is None:
            out.acked += n
        else:
            out.failed[error] = out.failed.get(error, 0) + n
        out.pending -= n
        for send in req.sends:
            send.status, send.error = ("ok", None) if error is None else ("fail", error)

    # --- settling ----------------------------------------------------------------------------

    #: every partition, and the controller's broker steps, in every round of every settle, as before
    #: the dirty sets (issue 27): the differential test's reference (tests/test_settle_dirty.py); a
    #: Timing settles so as well
    full_settle = False

    def settle(self) -> None:
        """Deliver messages and let the controller and the leaders react until nothing changes,
        in every partition (what a caller that changed the state itself needs)."""
        self._dirty, self._trips = None, None
        self._settle()

    def _mark_dirty(self, ids: Iterable[int]) -> None:
        if self._dirty is not None:
            self._dirty.update(ids)

    def _settle(self) -> None:
        """``settle`` over the partitions that may still move: those the action changed
        (``_dirty``: every one after an action that is not a produce) and, round after round,
        those whose leader round (or a produce request completed) changed them in the round before,
        unless a broker event (fencing, a registration, an unfencing, a directory assignment
        landing) changed the cluster in the controller round: then every one from there on.

        Why a partition left out changes nothing: the rounds are deterministic without a Timing (with
        one, whose choices are counted, every partition runs every round), and the controller's part
        of a round (``_controller_round``: answer the AlterPartition, follow the assignment, tell the
        brokers) does nothing on a state it just made. So a partition whose leader round left it as
        it found it -- the replication round before it in the same round changes only what that
        leader round then read (``_replication_round``), and ``outrun`` is set to the same again
        (``_leader_round``) -- would run its next round on that state again, and make it again. The
        rounds say so by their change flags (``_MOVES_ON``), of values, not of fields written. The
        settle ends, as ever, at the first round that leaves the fingerprint as it was
        (``_partition_key``, compared only for the partitions the controller touched or the rounds
        changed: ``_KEY_MOVED``) -- or at one after which no partition and nothing of the cluster
        can move, where the next round would be that one."""
        # No round cuts, heals or slows a link, nor starts, stops, pauses or resumes a broker (only
        # the actions' handlers do): every link answers the same for the whole settle, once -- and
        # after it, until an action that may change them (``apply``).
        trips = self._trips
        if trips is None:
            trips = self._trips = {}
        # a majority of the controllers runs: links and controllers, as above (kept with the links' answers)
        quorum = trips.get(_QUORUM)
        if quorum is None:
            quorum = trips[_QUORUM] = self.has_quorum()
        fetching = self._fetching_metadata()  # links, as above
        every = list(self.partitions.values())
        full = self.full_settle or self.timing is not None
        quiet = False
        work = every if full or self._dirty is None else [p for p in every if p.id in self._dirty]
        key = self._partition_key
        for p in work:  # a partition outside ``work`` is as its key says: nothing touched it since
            p._key = key(p)
        for p in every:
            if p._key is None:
                p._key = key(p)
        before = self._cluster_fingerprint()  # a round's end state is the next one's start
        for _ in range(MAX_SETTLE_ROUNDS):
            event = self._controller_round(work, quiet, quorum, fetching)
            if event:
                work = every
            # Without a Timing the broker steps of the controller's part (``_broker_events``) read
            # only what they alone change: after a round where they changed nothing, the next
            # one's would change nothing either. ``full_settle`` runs them anyway: the reference.
            quiet = not event and not full
            # Only the controller's part of a round changes a partition record, and without a broker
            # event only in the partitions it touched (``_touched``): no other has a change to note.
            # ``full_settle`` notes every one: the reference.
            touched = self._touched
            every_one = event or full
            for p in work:
                if every_one or p.id in touched:
                    p.note_change()
            replication_round, leader_round, finish_produce = \
                self._replication_round, self._leader_round, self._finish_produce
            moving = []  # the partitions the rest of the round changed so that they run the next round
            # those whose key may have moved in this round: the others, untouched by the controller
            # and left by the rest of the round as it found them, are as their key says
            rekey = []
            for p in work:
                # The rest of the round's change flags: values changed, not fields written
                # (``_KEY_MOVED``, ``_MOVES_ON``; the rounds say why).
                changed = replication_round(p)
                leader = p.part.leader
                if leader is None:
                    changed |= leader_round(p)
                else:
                    lead = p.logs[leader]
                    hwm = lead.hwm
                    changed |= leader_round(p)
                    if p.part.leader == leader and lead.hwm > hwm:
                        p.hwm_moves.append((hwm, lead.hwm, len(p.part.isr), self.seed_min_isr(p)))
                if p.pending_produce:
                    n = len(p.pending_produce)
                    finish_produce(p)
                    if len(p.pending_produce) != n:
                        changed |= _MOVES_ON
                if changed & _MOVES_ON:
                    moving.append(p)
                if changed or every_one or p.id in touched:
                    rekey.append(p)
            # fencing and registration change only in a broker event, the active controller in no round
            after = self._cluster_fingerprint() if event else before
            cluster_moved = moved = after != before
            for p in rekey:
                k = key(p)
                if not moved and k != p._key:
                    moved = True  # the fingerprint moved
                p._key = k
            if not moved or not (full or cluster_moved or moving):
                # Those whose round changed what the fingerprint leaves out run again first
                # in the next settle (as the next round of a full settle would run them).
                self._dirty = {p.id for p in moving}
                return
            before = after
            work = every if full else moving
        raise ModelError("the model did not settle (livelock in the rules)")

    def _cluster_fingerprint(self) -> tuple[object, ...]:
        return tuple(sorted(self.fenced)), tuple([b.registered for b in self.brokers.values()]), self.active_controller

    @staticmethod
    def _partition_key(p: ModelPartition) -> tuple[object, ...]:
        """What ``_settle`` compares of a partition: equal exactly when ``_partition_fingerprint`` is
        (the same fields, sets and dicts compared as such), cheaper to build: the logs' (end, HWM)
        pairs flat in one list built in place (no comprehension, no tuple per log), never written
        after; no sorting (issue 27, speed)."""
        r = p.part
        logs: list[int] = []
        for log in p.logs.values():
            logs.append(len(log.log))
            logs.append(log.hwm)
        return (r.leader, r.leader_epoch, r.partition_epoch, tuple(r.isr), tuple(r.elr), tuple(r.last_known_elr),
                p.pending_alter, logs, tuple(p.heard.values()), p.follower_leo.copy(), len(p.pending_produce),
                frozenset(p.late_in_sync) if p.late_in_sync else _NOBODY,
                frozenset(p.outrun) if p.outrun else _NOBODY)

    def fingerprint(self) -> tuple[object, ...]:
        return (
            tuple(sorted(self.fenced)), tuple([b.registered for b in self.brokers.values()]), self.active_controller,
            tuple(map(self._partition_fingerprint, self.partitions.values())), tuple(sorted(self.shutting_down)),
            tuple(sorted(self.unregistered)),
        )

    @staticmethod
    def _partition_fingerprint(p: ModelPartition) -> tuple[object, ...]:
        r = p.part
        return (
            r.leader, r.leader_epoch, r.partition_epoch, tuple(r.isr), tuple(r.elr),
            tuple(r.last_known_elr), p.pending_alter,
            tuple([(len(log.log), log.hwm) for log in p.logs.values()]),  # len: ``Replica.leo``, without the call
            tuple(p.heard.values()),
            tuple(sorted(p.follower_leo.items())), len(p.pending_produce),
            tuple(sorted(p.late_in_sync)), tuple(sorted(p.outrun)),
        )

    def _unfences_now(self, b: int) -> bool:
        """``b`` heartbeats to the controller this round and is fenced: it is unfenced now."""
        return b in self.fenced and b not in self.heartbeats_held and self._round_trip(b, CONTROLLER, allow_slow=True)

    def _assignment_lands_now(self, b: int) -> bool:
        """Timing: whether broker ``b``'s AssignReplicasToDirs lands in this action's settle or
        only in the next action's. The broker's ``AssignmentsManager`` queues the assignment once
        the replica's log exists and retries a failed send with an exponential backoff of 100 ms
        doubling to 10 s (its ``STANDARD_BACKOFF``, read in the 4.4.0 class): measured in CI on 4.4.0
        (kip903_stale_broker_epoch, loaded runner), a new disk's assignment missed its step's 36 s
        settle and had landed by the next step. Canonical: now. Late at most one action: an
        assignment that never lands is a bug the next step must still see."""
        if b in self.dir_due or self.timing is None:
            return True
        if b in self.dir_late:
            return False  # left for the next action at an earlier round of this settle
        if self.timing.choose((True, False)):
            return True
        self.dir_late.add(b)
        return False

    def _next_to_heartbeat(self, pending: list[int]) -> int:
        """The broker the controller hears from next. KIP-966 "Controller behaviors" 3: "The replica
        gets unfenced. If the replica is an ELR member and ISR is empty, this replica will be elected
        as leader": of several brokers unfenced in one round (a heal of all links) while the
        partition is leaderless, whichever heartbeats first is elected, and that is timing (found by
        elr explore on Kafka 4.4.0: ELR [1, 2] healed at once, 2 elected where the model said 1;
        the stale-ELR shape healed at once: 4.4.0 elected 1, 4.0.2 elected 2). Kafka unfences on
        each broker's own heartbeat (``processBrokerHeartbeat`` -> ``handleBrokerUnfenced``), whose
        change covers only leaderless partitions (``partitionsWithNoLeader``): with a leader, the
        order changes nothing. The canonical order is the brokers' ids."""
        first = pending[0]
        if self.timing is None or all(p.part.leader is not None for p in self.partitions.values()) \
                or not self._unfences_now(first):
            return first
        others = [b for b in pending[1:] if self._unfences_now(b)]
        return self.timing.choose([first, *others]) if others else first

    def _metadata_hold_bites(self) -> bool:
        """Whether an active broker's metadata is held: its metadata offset, stale, is the lowest
        active one, and no controlled shutdown finishes.

        Kafka's BrokerHeartbeatManager.calculateNextBrokerState, in CONTROLLED_SHUTDOWN: SHUTDOWN_NOW
        only once the broker leads nothing and ``broker.controlledShutdownOffset <=
        lowestActiveOffset()``, the lowest metadata offset of the ``active`` brokers (``touch``:
        unfenced and not shutting down), each the offset its last heartbeat reported; the shutdown's
        offset is the end of the batch that entered it (QuorumController, ``processBatchEndOffset``
        -> ``maybeUpdateControlledShutdownOffset``). A broker whose Fetch is held heartbeats on,
        unfenced, with the offset it had when the hold began: behind every later shutdown's.
        Measured (docs/campaigns/4.4.0-rcm/probe_1494.py, Kafka 4.4.0): broker 3's Fetch held, a
        leader's clean shutdown moved leadership and ISR within 0.5 s, then the broker stayed
        unfenced, its JVM running, for the 26 s until the heal, and was fenced 1.3 s after it."""
        return any(self.brokers[h].running and h not in self.fenced and h not in self.shutting_down
                   for h in self.metadata_held)

    def _shutdown_held(self, broker: int) -> bool:
        """Whether a clean shutdown of ``broker`` stops in controlled shutdown: Kafka enters it only
        for a broker that leads a partition (calculateNextBrokerState, UNFENCED: "if
        (hasLeaderships.get())" CONTROLLED_SHUTDOWN, else SHUTDOWN_NOW), and it cannot finish while
        ``_metadata_hold_bites``."""
        return (self._metadata_hold_bites() and broker not in self.metadata_held
                and any(p.part.leader == broker for p in self.partitions.values()))

    def _fence(self, broker: int) -> None:
        """The controller fences ``broker``: one broker event that changes every partition it
        touches, each partition's change built on its own (Kafka's ReplicationControlManager builds
        one PartitionChangeBuilder per partition of the broker and writes their records in one batch)."""
        self.fenced.add(broker)
        partitions = list(self.partitions.values())
        for p in partitions if self.profile.rules.broker_event_changes_every_partition else partitions[:1]:
            controller.fence(p.part, broker, self.ctx)

    def _controller_round(self, work: list[ModelPartition] | None = None, quiet: bool = False,
                          quorum: bool | None = None, fetching: list[int] | None = None) -> bool:
        """One round of the controller. ``work``: the partitions that may move (None: every one); a
        broker event makes it every one. Returns whether one did. ``quiet``: the broker events are
        known to change nothing (``_settle``); ``quorum``: ``has_quorum()``, ``fetching``: the brokers
        that fetch the metadata (step 4), if known."""
        partitions = list(self.partitions.values()) if work is None or not quiet else work
        event = work is None
        #: of ``work``, the partitions whose AlterPartition, assignment or leader as the brokers know
        #: it this round changed (read by ``_settle`` when no broker event came)
        self._touched: set[int] = set()
        if not (self.has_quorum() if quorum is None else quorum) \
                and self.profile.rules.metadata_frozen_without_a_leader:
            # No active controller (KIP-595: a leader needs a majority's votes): no session
            # expires, no broker registers or is unfenced, no AlterPartition is answered and no
            # metadata reaches a broker until a majority runs again. The brokers keep the last
            # metadata they fetched; the leader keeps serving with the ISR it has. (Mutation switch
            # ``Rules.metadata_frozen_without_a_leader``: off, the round runs as with a leader.)
            return False
        if not quiet and self._broker_events(partitions):
            event = True
        if not event:
            partitions = work  # type: ignore[assignment]  # no broker event: only they may move
        touched = self._touched
        for p in partitions:
            if p.pending_alter is not None:
                touched.add(p.id)
                self._answer_alter_partition(p)
            if p.replicas != p.part.replicas:
                touched.add(p.id)
                self._follow_assignment(p)
        # 4. Metadata reaches the brokers that can fetch it: a KRaft broker pulls the metadata log
        # from the controller, so a cut either way stops it (found by elr explore on Kafka 4.0.2 and
        # on 4.1.0: a broker cut towards the controller never learnt the new leader, so never fetched
        # from it). A held AlterPartition (``slow``) or held heartbeats do not: the fetches flow.
        if fetching is None:
            fetching = self._fetching_metadata()
        min_isr, profile = self.min_isr, self.profile
        for p in partitions:
            part = p.part
            heard, told = (part.leader, part.leader_epoch), p.heard
            for b in fetching:
                if told[b] != heard:
                    told[b] = heard
                    touched.add(p.id)
            eff_min_isr = effective_min_isr(min_isr, len(p.replicas), profile)  # ``eff_min_isr_of``: the assignment
            # is followed, fixed for the rest of the round
            if len(part.isr) >= eff_min_isr:
                p.frozen_min_isr = eff_min_isr
                p.quorum_shrunk_by = None
            if part.recovering and part.leader is not None:
                p.unclean_restarted.discard(part.leader)  # elected uncleanly: its log is the truth
            if p.stale_in_isr:
                p.stale_in_isr &= set(part.isr)
            if p.ledger.suspects:
                leader = part.leader
                live = leader is not None and leader not in self.fenced and self.brokers[leader].running
                p.ledger.caught_up(part.isr, eff_min_isr, live, self.profile.rules.ledger_resets_on_catch_up)
        return event

    def _fetching_metadata(self) -> list[int]:
        return [b for b in self.brokers_ids if self._round_trip(b, CONTROLLER, allow_slow=True)]

    def _broker_events(self, partitions: list[ModelPartition]) -> bool:
        """Steps 1 and 2 of a controller round: sessions that expire, registrations, directory
        assignments landing, unfencing; each changes every partition it touches. Returns whether one came."""
        ctx, event = self.ctx, False
        # A broker event changes every partition it touches in one step, each partition's change
        # built on its own (Kafka's ReplicationControlManager builds one PartitionChangeBuilder per
        # partition of the broker, and writes their records in one batch).
        # 1. Sessions that expired, in the order the brokers went away.
        # 0. Controlled shutdowns let go once no active broker's metadata is held (healed, or the
        # held broker fenced): SHUTDOWN_NOW, handleBrokerFenced; the broker exits.
        if self.shutting_down and not self._metadata_hold_bites():
            for b in sorted(self.shutting_down):
                self.shutting_down.discard(b)
                self._fence(b)
            event = True
        order = self.down_order + [b for b in self.brokers_ids if b not in self.down_order]
        for b in order:
            heartbeats = self._round_trip(b, CONTROLLER, allow_slow=True) and b not in self.heartbeats_held
            if b not in self.fenced and b not in self.shutting_down and not heartbeats:
                self._fence(b)
                event = True
        # 2. Registrations of restarted brokers, then unfencing of those that can heartbeat.
        pending = list(self.brokers_ids)
        while pending:
            b = self._next_to_heartbeat(pending)
            pending.remove(b)
            broker = self.brokers[b]
            if not self._round_trip(b, CONTROLLER, allow_slow=True):
                continue
            if not broker.registered:
                # KIP-966: "The controller will verify the broker epoch in the request with its
                # registration record. If it is the same, it is a clean shutdown." An unregistered
                # broker has no record to match: its return is an unclean shutdown's.
                clean = broker.clean_marker is not None and broker.clean_marker == broker.epoch \
                    and b not in self.unregistered
                self.unregistered.discard(b)
                broker.epoch = self._new_epoch()
                broker.registered = True
                broker.clean_marker = None  # removed once the log manager is up
                event = True
                for p in partitions:
                    part = p.part
                    if not clean and (b in part.replicas or b in part.elr):
                        p.unclean_restarted.add(b)
                        if b in part.elr or b in part.isr:
                            p.quorum_shrunk_by = f"broker {b} registered after an unclean shutdown"
                        controller.register_unclean(part, b, ctx)
                if broker.new_disk and self.profile.directory_ids and any(b in p.part.replicas for p in partitions):
                    self.dir_pending.add(b)
                    self.dir_offline.add(b)
                    self.dir_moves.pop(b, None)  # every replica is in the new directory
                broker.new_disk = False
            # The replicas' directory assignment, unless held (it lands once healed). A hold longer
            # than the broker's request timeout (30 s) leaves resent copies that land right after
            # the first: timing decides whether one comes (``controller.assignment_resent``).
            if b in self.dir_pending and b not in self.assignments_held and self._assignment_lands_now(b):
                self.dir_pending.discard(b)
                self.dir_offline.discard(b)
                event = True
                only = self.dir_moves.pop(b, None)
                moved = [p for p in partitions if b in p.logs and (only is None or p.id in only)]
                for p in moved:
                    controller.reassign_directory(p.part, ctx)
                if self.timing is not None and self.timing.choose((False, True)):
                    for p in moved:
                        controller.assignment_resent(p.part, ctx)
            # KIP-966 "Delivery plan": elect the LastKnownLeader "once it is unfenced"; a broker
            # is unfenced on a heartbeat that shows it caught up, so a held heartbeat keeps it out.
            if b in self.fenced and b not in self.heartbeats_held and b not in self.unregistered:
                self.fenced.discard(b)
                event = True
                if b in self.down_order:
                    self.down_order.remove(b)
                for p in partitions:
                    controller.unfence(p.part, ctx)
        return event

    def _answer_alter_partition(self, p: ModelPartition) -> None:
        """3. The leader's AlterPartition, unless its link to the controller holds it back."""
        req, part = p.pending_alter, p.part
        if req is None:
            return
        if part.leader != req.leader or not self.brokers[req.leader].running:
            p.pending_alter = None
        elif self._reaches(req.leader, CONTROLLER) and not self._alter_held(req.leader):
            p.pending_alter = None
            before = set(part.isr)
            error = controller.alter_partition(part, req, self.ctx)
            if error is not None:
                self.protocol_errors.append(error)
                p.rejected_alter, p.rejected_view = req, self._brokers_view()
            else:
                joined = {b for b, _ in req.new_isr if b not in before}
                if not joined:
                    return  # a shrink: nobody joined (what follows adds nothing)
                p._admitted_since_seen |= joined
                p.unclean_restarted -= joined  # caught up: the leader let it in
                lead = p.logs[req.leader]
                p.isr_joins += [(b, _common_prefix(p.logs[b].log, lead.log, lead.hwm), lead.hwm)
                                for b in sorted(joined)]
                p.stale_in_isr |= {b for b, epoch in req.new_isr
                                   if b in joined and epoch != self.brokers[b].epoch}

    def _replication_round(self, p: ModelPartition) -> int:
        """The followers fetch from the leader. Returns ``_KEY_MOVED`` if it changed the partition's
        fingerprint (``_partition_key``: values, not fields written), else 0: ``_settle``'s change
        flag. Nothing it changes makes the partition run the next round: the leader round after it
        in this round reads what it wrote, and with the leader's log and HWM as they were (the
        leader round says when they moved) the next one would write the same.

        Run for each moving partition in every round: lookups hoisted, ``Replica.leo`` as ``len``,
        ``_round_trip``'s cache read in place, a field written only when its value changes (issue 27,
        speed)."""
        part = p.part
        leader = part.leader
        if leader is None or leader in self.fenced:
            return 0
        changed = 0
        if p._view_epoch != part.leader_epoch:
            # A new leader knows nothing of its followers until they fetch from it.
            p._view_epoch = part.leader_epoch
            p.follower_leo.clear()
            p.follower_fetch_epoch.clear()
            changed = _KEY_MOVED
        logs, heard, brokers, trips = p.logs, p.heard, self.brokers, self._trips
        follower_leo, follower_fetch_epoch = p.follower_leo, p.follower_fetch_epoch
        lead = logs[leader]
        lead_log = lead.log
        lead_leo, lead_hwm = len(lead_log), lead.hwm  # the leader's log and HWM do not change in this round
        for f in p.replicas:
            if f == leader:
                continue
            broker = brokers[f]
            if heard[f][0] != leader or not broker.registered:
                continue
            ok = trips.get((f, leader, False)) if trips is not None else None
            if not (self._round_trip(f, leader) if ok is None else ok):
                continue
            follower = logs[f]
            log = follower.log
            end = was = len(log)  # kept as the log changes below (at most the leader's: a prefix of its log)
            limit = end if end < lead_leo else lead_leo
            # ``_common_prefix``'s first test inline: a follower that holds the leader's records shares
            # its last one (the leader's own object)
            common = limit if limit == 0 or log[limit - 1] is lead_log[limit - 1] else _common_prefix(log, lead_log)
            if common < end:
                del log[common:]  # divergent suffix: truncate to the leader's log
                follower.flushed = min(follower.flushed, common)
                end = common
            if end < lead_leo:
                p.hwm_waits_since = None  # a fetch that moves a follower's log end
                log.extend(lead_log[end:])
                end = lead_leo
            if end != was:
                changed = _KEY_MOVED  # the key holds the log's end (a suffix replaced in place leaves it)
            hwm = lead_hwm if lead_hwm < end else end  # min(): the leader's HWM holds in this round
            if follower.hwm != hwm:
                follower.hwm = hwm
                changed = _KEY_MOVED
            if follower_leo.get(f) != end:
                follower_leo[f] = end
                changed = _KEY_MOVED
            follower_fetch_epoch[f] = broker.epoch
        return changed

    def _leader_round(self, p: ModelPartition) -> int:
        """The leader moves its HWM and asks for ISR changes. Returns ``_settle``'s change flags:
        ``_MOVES_ON`` if the partition runs the next round (the HWM moved: the followers fetch it; an
        AlterPartition for the controller; an HWM evaluated again), ``_KEY_MOVED`` if only ``outrun``
        changed (of the fingerprint, ``_partition_key``), else 0. ``outrun`` alone moves nothing on:
        it is read by the one statement that changes it, which sets it to (``outrun`` - ISR) | X, X
        outside the ISR and computed without it, so a second round sets it to the same."""
        part = p.part
        leader = part.leader
        brokers, fenced = self.brokers, self.fenced
        if leader is None or leader in fenced or not brokers[leader].running:
            return 0
        lead = p.logs[leader]
        isr = part.isr
        outrun = p.outrun
        out = len(outrun)
        if out:
            outrun.difference_update(isr)
        changed = _KEY_MOVED if len(outrun) < out else 0
        if p.hwm_waits_since is not None and part.partition_epoch != p.hwm_waits_since:
            p.hwm_waits_since = None  # an ISR change: the leader evaluates its HWM again
            changed |= _MOVES_ON
        follower_leo = p.follower_leo
        # ``hwm_may_advance_now``, inline: the leader is live (above)
        rules = self.profile.rules
        may_advance = controller.hwm_may_advance(isr, effective_min_isr(self.min_isr, len(p.replicas), self.profile),
                                                 rules)
        if may_advance:
            lead_leo = len(lead.log)
            members = isr if p.pending_alter is None else self.maximal_isr(p)  # ``maximal_isr``: the ISR then
            ends = [lead_leo if b == leader else follower_leo.get(b, 0) for b in members]
            if controller.hwm_reevaluated(p.hwm_waits_since is None):
                p.hwm_window_open = True
                # The HWM may pass, by records the model does not see, every follower out of the ISR
                # below the least log end of the members that get no records (late fetchers).
                late_ends = [follower_leo.get(b, 0) for b in isr if b in p.late_in_sync] if p.late_in_sync else None
                out = len(outrun)
                if late_ends:
                    outrun |= {f for f in part.replicas if f not in isr and p.logs[f].leo < min(late_ends)}
                else:
                    # ``outrun`` | (replicas - ISR): ``outrun`` holds no ISR member (above), no set built
                    outrun.update(part.replicas)
                    outrun.difference_update(isr)
                if len(outrun) > out:
                    changed |= _KEY_MOVED
                new_hwm = controller.advance_hwm(lead.hwm, ends)
                if new_hwm > lead.hwm:
                    lead.hwm = new_hwm
                    changed |= _MOVES_ON
                    self._extend_committed(p, lead)
            elif controller.advance_hwm(lead.hwm, ends) > lead.hwm:
                self.ctx.depart("hwm_reevaluated")  # waiting for an event where the KIP would let it move
        # ISR changes: one AlterPartition in flight at a time.
        if p.pending_alter is not None:
            return changed
        heard, trips = p.heard, self._trips
        can_fetch = set()
        for f in part.replicas:
            if f != leader and heard[f][0] == leader and brokers[f].registered:
                ok = trips.get((f, leader, False)) if trips is not None else None
                if self._round_trip(f, leader) if ok is None else ok:
                    can_fetch.add(f)
        if p.late_in_sync:
            late: set[int] | frozenset[int] = \
                {f for f in p.late_in_sync if f in part.replicas and self._fetches_late(p, f, leader)}
            can_fetch |= late
        else:
            late = _NONE_LATE
        shrunk = [b for b in isr if b == leader or b in can_fetch]
        if len(shrunk) < len(isr) - 1:  # which leave first is timing: every choice under a Timing
            lagging = [b for b in isr if b not in shrunk]
            options = controller.lagging_leave(lagging, rules)
            leaving = options[0] if self.timing is None else self.timing.choose(options)
            shrunk = [b for b in isr if b not in leaving]
        # KIP-841: the leader adds only followers its metadata shows unfenced (Kafka's
        # isReplicaIsrEligible); a fenced one that fetches waits outside (measured on 4.0.2 by
        # elr explore: a broker whose heartbeats were held caught up and stayed out).
        if shrunk != isr:
            proposed = shrunk
        else:
            hwm, leo = lead.hwm, len(lead.log)
            caught_up = [
                f for f in sorted(can_fetch)
                if f not in isr and f not in fenced and follower_leo.get(f, 0) >= hwm
                and (follower_leo.get(f, 0) >= leo or f in late)  # late: isFollowerInSync, HWM only
            ]
            if not caught_up:
                return changed
            proposed = isr + caught_up
        if leader not in proposed:
            proposed = [leader, *proposed]
        epochs = p.follower_fetch_epoch
        req = AlterPartition(
            leader=leader,
            leader_epoch=part.leader_epoch,
            partition_epoch=part.partition_epoch,
            new_isr=tuple([(b, epochs.get(b, brokers[b].epoch)) for b in proposed]),
        )
        rejected = p.rejected_alter
        if rejected is not None and req == rejected and self._brokers_view() == p.rejected_view:
            return changed  # the same request was refused; wait until something changes
        p.pending_alter = req  # none was pending (above)
        return changed | _MOVES_ON

    def _brokers_view(self) -> tuple[frozenset[int], tuple[int, ...]]:
        """What the controller checks an AlterPartition's members against: who is fenced, and
        their broker epochs. Kafka's leader retries a refused ISR expansion on later fetches, so
        once this changes (the member unfenced, say) the same request may be accepted."""
        return frozenset(self.fenced), tuple(self.brokers[b].epoch for b in self.brokers_ids)

    @staticmethod
    def _extend_committed(p: ModelPartition, lead: Replica) -> None:
        n = len(p.committed)
        if lead.hwm > n and _common_prefix(p.committed, lead.log) == n:
            p.committed.extend(lead.log[n : lead.hwm])


#: ``_trips``' entry for ``has_quorum()`` (no link: its answer changes with the same actions)
_QUORUM: tuple[Node, Node, None] = (CONTROLLER, CONTROLLER, None)

#: the canonical choice of ``_choose_late_in_sync``: no slow follower counted in sync
_NONE_LATE: frozenset[int] = frozenset()

#: an empty set in a partition's key (``_partition_key``), shared
_NOBODY: frozenset[int] = frozenset()

#: the rounds' change flags (``_settle``): the partition's fingerprint moved (``_partition_key``), and
#: the partition runs the next round (what the flag is set for moves the fingerprint, or may)
_KEY_MOVED, _MOVES_ON = 1, 2

#: up to this many slow followers that may be back, every subset of them is a choice; past it, none,
#: each alone, or all (``late_in_sync_options``)
MAX_LATE_SUBSETS = 2


def late_in_sync_options(candidates: list[int]) -> list[frozenset[int]]:
    """Which of the slow followers that may be back in the ISR are (``_choose_late_in_sync``),
    the canonical choice (none) first: every subset of up to ``MAX_LATE_SUBSETS`` followers (the
    suite's and ``elr explore``'s clusters have two), else none, each alone, or all of them."""
    if len(candidates) <= MAX_LATE_SUBSETS:
        return [frozenset(c for i, c in enumerate(candidates) if mask >> i & 1) for mask in range(2 ** len(candidates))]
    return [frozenset(), *(frozenset({c}) for c in candidates), frozenset(candidates)]


def _common_prefix(a: list[Record], b: list[Record], b_end: int | None = None) -> int:
    """Length of the common prefix of two logs (of ``a`` and ``b[:b_end]``, without copying it).

    Values are unique and a record only reaches a log by replicating the prefix before it, so
    when the last record both could share matches, everything before it does too (Kafka's log
    matching property); only a diverged log needs the scan.
    """
    limit = min(len(a), len(b)) if b_end is None else min(len(a), len(b), b_end)
    if limit == 0:
        return limit
    last, other = a[limit - 1], b[limit - 1]
    if last is other or last == other:  # a replicated record is the leader's own object: no field compare
        return limit
    common = 0
    while common < limit and a[common] == b[common]:
        common += 1
    return common
