"""Random fault schedules against the model, with Hypothesis' stateful testing.

The machine draws every action of the language (``wait`` aside: the model has no clock, so a wait
changes nothing) in random order and checks the model's invariants after each; ``DRAWN`` lists
the action kinds its rules build and ``tests/test_property_search.py`` fails when an action of
``pytest_elr.actions`` is missing from it. Under ``kip966`` no invariant may break while the loss
ledger (``model/ledger.py``) stays within min ISR - 1 lossy shutdowns. ``kafka`` ships no unclean
recovery, so within that tolerance it can elect its last known leader after that leader's lossy
shutdown and lose acknowledged records (docs/model.md); under ``legacy`` Hypothesis finds an
acks=all loss sooner. ``elr search --out`` writes the shrunk schedule as a runnable YAML scenario.
The draws depend on the seed alone (``run_machine``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import ClassVar

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from pytest_elr.actions import (
    Action,
    BeginShutdown,
    CancelReassignment,
    Crash,
    CrashController,
    Cut,
    ElectLeaders,
    Flush,
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
    UncleanElection,
    Unregister,
)
from pytest_elr.core.limits import MAX_PARTITIONS
from pytest_elr.core.nodes import CONTROLLER, Node, isolation_links, one_controller
from pytest_elr.core.observation import Refusal
from pytest_elr.core.specs import rotated_assignment
from pytest_elr.model import invariants
from pytest_elr.model.cluster import ModelCluster, ModelError
from pytest_elr.model.profiles import Profile, Rules, get_profile

BROKERS = (0, 1, 2)
MIN_ISR = 2
NODES: tuple[Node, ...] = (*BROKERS, CONTROLLER)
#: faults aimed at the current leader find bugs sooner (Jepsen's targeting)
VICTIMS = st.one_of(st.just("leader"), st.just("leader"), st.sampled_from(BROKERS))
#: kinds of rule a schedule may use; each example enables a random subset ("swarm testing",
#: Groce et al.), which finds bugs that need many faults of a few kinds far sooner
KINDS = ("isolate", "cut", "slow", "hold", "heal", "shutdown", "crash", "lossy", "restart",
         "pause", "flush", "min_isr", "unclean_election", "elect_leaders", "cluster_min_isr", "move",
         "reassign", "unregister")
#: kinds of rule drawn only on a cluster of several controllers (``SearchConfig.controllers``): a
#: controller stopped (crash, clean shutdown, power cut), restarted, isolated. Kept apart from
#: ``KINDS`` so a one-controller search draws what it drew before they existed, seed for seed.
CONTROLLER_KINDS = ("controller",)
#: the controllers of a cluster the controller kinds are drawn on (KIP-595: a majority of 3 survives one)
QUORUM = 3
#: action kinds the machine never draws, with the reason
NOT_DRAWN: dict[str, str] = {
    "wait": "the model has no clock: a wait changes nothing in it",
    "alter_partition": "a request no broker sends (forged, to grade the controller's own checks): no fault "
                       "of the brokers or links; scenarios name it where a check needs it",
}


#: kinds of rule drawn only on a topic of several partitions (``SearchConfig.partitions``): a fault
#: aimed at the leader of another partition than 0 (a broker's fault changes every partition it holds
#: in one step; the partition it leads is where the election is). Apart from ``KINDS`` for the same
#: reason as the controller kinds: a one-partition search draws what it drew before, seed for seed.
PARTITION_KINDS = ("partition_leader",)


def default_kinds(controllers: int, partitions: int = 1) -> tuple[str, ...]:
    """Every kind of rule a cluster of ``controllers`` and a topic of ``partitions`` draw from."""
    return (KINDS + (CONTROLLER_KINDS if controllers > 1 else ())
            + (PARTITION_KINDS if partitions > 1 else ()))


def _enabled(kind: str, needs: str | None = None):  # type: ignore[no-untyped-def]
    """A rule of ``kind``: drawn only in examples whose swarm enabled it, and left out of the machine
    altogether when the search is not given the kind (``machine_for``), or when ``needs`` names a
    property of the ``SearchConfig`` (``several_partitions``, ``spare_broker``) it does not have: a
    search without it draws what it drew before the rule existed, seed for seed."""
    def tag(rule_function):  # type: ignore[no-untyped-def]
        guarded = precondition(lambda self: kind in self.enabled)(rule_function)
        guarded.search_kind = kind
        guarded.search_needs = needs
        return guarded
    return tag


@dataclass
class SearchConfig:
    profile: Profile
    brokers: tuple[int, ...] = BROKERS
    min_isr: int = MIN_ISR
    #: the kinds of rule the swarm chooses from
    kinds: tuple[str, ...] = KINDS
    #: KRaft controllers of the searched cluster; the ``controller`` kind needs more than one
    controllers: int = 1
    #: partitions of the searched topic, their replicas rotated over the brokers (``rotated_assignment``);
    #: the ``partition_leader`` kind needs more than one, and so do the rules that name a partition
    #: other than 0 in an operator's request (reassign, cancel_reassignment, move_log_dir, elect_leaders)
    partitions: int = 1
    #: a broker more in the cluster, holding no replica of the topic (numbered after ``brokers``):
    #: the one broker whose metadata the model lets a schedule hold (``hold_metadata``)
    spare: bool = False

    @property
    def assignment(self) -> tuple[tuple[int, ...], ...]:
        return rotated_assignment(self.brokers, self.partitions)

    @property
    def several_partitions(self) -> bool:
        return self.partitions > 1

    @property
    def spare_broker(self) -> int | None:
        return max(self.brokers) + 1 if self.spare else None

    @property
    def cluster_brokers(self) -> tuple[int, ...]:
        """The cluster's brokers: the topic's, and the spare if any."""
        return self.brokers if self.spare_broker is None else (*self.brokers, self.spare_broker)


class InvariantBroken(AssertionError):
    pass


class ProtocolMachine(RuleBasedStateMachine):
    config: ClassVar[SearchConfig]
    #: actions of the most recent run; after a failure, Hypothesis replays the shrunk example
    #: last, so this holds the minimal counterexample
    last_actions: ClassVar[list[Action]] = []
    last_violations: ClassVar[list[str]] = []
    #: every action kind applied so far in this process (the test that the search reaches all)
    kinds_applied: ClassVar[set[str]] = set()

    def __init__(self) -> None:
        super().__init__()
        cfg = self.config
        self.model = model_for(cfg)
        self.actions: list[Action] = []
        self.enabled: frozenset[str] = frozenset(KINDS)
        type(self).last_actions = self.actions
        type(self).last_violations = []

    def _do(self, action: Action) -> None:
        try:
            result = self.model.apply(action)
        except ModelError:
            return  # not applicable in this state: a no-op step
        if isinstance(result, Refusal):
            return  # the cluster refused the request: it changed nothing, a no-op step too
        self.actions.append(action)
        ProtocolMachine.kinds_applied.add(action.kind)

    def _target(self, victim: int | str) -> int | None:
        """A broker, ``leader`` (partition 0's, when the step is drawn) or ``leader:<p>`` (partition p's)."""
        if isinstance(victim, str) and victim.startswith("leader"):
            _, _, p = victim.partition(":")
            return self.model.partitions[int(p or 0)].part.leader
        return int(victim)

    def _running(self, b: int) -> bool:
        return self.model.brokers[b].running

    def _partition(self, p: int) -> int:
        """Partition ``p`` drawn from 0 .. MAX_PARTITIONS - 1, modulo the topic's partitions: the
        strategy is the same whatever their number."""
        return p % self.config.partitions

    def _stop_cleanly(self, b: int) -> None:
        """A clean shutdown; while a broker's metadata is held (``hold_metadata``) a ``begin_shutdown``,
        as an operator's SIGTERM: the model refuses a blocking ``shutdown`` of a leader then (its
        controlled shutdown cannot finish; the process would wait out Kafka's 5 minutes)."""
        self._do(BeginShutdown(broker=b) if self.model.metadata_held else Shutdown(broker=b))

    # --- rules: one per form of fault ------------------------------------------------------------

    @initialize(data=st.data())
    def choose_fault_kinds(self, data: st.DataObject) -> None:
        kinds = self.config.kinds
        self.enabled = frozenset(data.draw(st.sets(st.sampled_from(kinds), min_size=min(2, len(kinds)))))

    @rule(count=st.integers(1, 5), acks=st.sampled_from(["all", "all", "1", "0"]))
    def produce(self, count: int, acks: str) -> None:
        self._do(Produce(count=count, acks=acks))  # type: ignore[arg-type]

    @_enabled("isolate")
    @rule(victim=VICTIMS, scope=st.sampled_from(["all", "brokers", "controller"]))
    def isolate(self, victim: int | str, scope: str) -> None:
        b = self._target(victim)
        if b is not None:
            self._do(Cut(links=isolation_links(b, scope, self.config.cluster_brokers)))  # type: ignore[arg-type]

    @_enabled("cut")
    @rule(src=st.sampled_from(NODES), dst=st.sampled_from(NODES))
    def cut_one_way(self, src: Node, dst: Node) -> None:
        if src != dst:
            self._do(Cut(links=((src, dst),)))

    @_enabled("slow")
    @rule(b=st.sampled_from(BROKERS))
    def slow(self, b: int) -> None:
        self._do(Slow(links=isolation_links(b, "brokers", self.config.cluster_brokers)))

    @_enabled("hold")
    @rule(b=st.sampled_from(BROKERS))
    def hold_alter_partition(self, b: int) -> None:
        self._do(Slow(links=((b, CONTROLLER),)))

    @_enabled("hold")
    @rule(victim=VICTIMS)
    def hold_heartbeats(self, victim: int | str) -> None:
        b = self._target(victim)
        if b is not None:
            self._do(HoldHeartbeats(broker=b))

    @_enabled("hold", needs="spare_broker")
    @rule(then_shutdown=st.booleans())
    def hold_metadata(self, then_shutdown: bool) -> None:
        """The spare broker's metadata Fetch held (Kafka mutant 1494, docs/kafka-mutants.md): the
        one broker that holds no replica, the only one the model lets a schedule hold. It bites at
        a leader's clean shutdown while held (drawn as ``begin_shutdown``, ``_stop_cleanly``): the
        leader hands its leadership and ISR over and stays unfenced, not electable, until healed.
        Aimed there (``then_shutdown``): partition 0's leader begins its shutdown at once."""
        spare = self.config.spare_broker
        if spare is None or not self._running(spare):
            return
        self._do(HoldMetadata(broker=spare))
        leader = self.model.part.leader
        if then_shutdown and spare in self.model.metadata_held and leader is not None and self._running(leader):
            self._do(BeginShutdown(broker=leader))

    @_enabled("heal", needs="spare_broker")
    @rule()
    def heal_spare(self) -> None:
        """The spare broker's link to the controller healed: a held metadata Fetch is delivered."""
        spare = self.config.spare_broker
        if spare is not None:
            self._do(Heal(links=((spare, CONTROLLER),)))

    @_enabled("heal")
    @rule(b=st.sampled_from(BROKERS))
    def heal_broker(self, b: int) -> None:
        self._do(Heal(links=isolation_links(b, "all", self.config.cluster_brokers)))

    @_enabled("heal")
    @rule()
    def heal_all(self) -> None:
        self._do(Heal(links=None))

    @_enabled("shutdown")
    @rule(b=st.sampled_from(BROKERS))
    def shutdown(self, b: int) -> None:
        if self._running(b):
            self._stop_cleanly(b)

    @_enabled("crash")
    @rule(victim=VICTIMS)
    def crash(self, victim: int | str) -> None:
        """Unclean but lossless (the page cache survives the process): never limited."""
        b = self._target(victim)
        if b is not None and self._running(b):
            self._do(Crash(broker=b))

    @_enabled("lossy")
    @rule(victim=VICTIMS, disk=st.booleans(), hold_assignment=st.booleans())
    def lossy_shutdown(self, victim: int | str, disk: bool, hold_assignment: bool) -> None:
        """A power cut or a new disk, only while the ledger stays within what KIP-966 tolerates
        (beyond it, the invariants about data promise nothing)."""
        b = self._target(victim)
        if b is None or not self.model.ledger_allows(b):
            return
        if disk:
            if hold_assignment and "hold" in self.enabled:
                # Aimed where it bites (seed: none; KIP-858 directory ids, apache/kafka PR #20629):
                # a broker back on a new disk sends AssignReplicasToDirs; held, its replica rejoins
                # the ISR while the controller has it in the old directory, not online.
                self._do(HoldDirAssignments(broker=b))
            self._do(ReplaceDisk(broker=b))
        elif self._running(b):
            self._do(PowerOff(brokers=(b,)))

    @_enabled("move")
    @rule(victim=VICTIMS, hold_assignment=st.booleans())
    def move_log_dir(self, victim: int | str, hold_assignment: bool) -> None:
        """A replica moved to another log dir while it serves (JBOD): its AssignReplicasToDirs is the
        partition change apache/kafka PR #20716 found emptying the ELR before 4.3.0, and the moved
        copy is unsynced until flushed. Held (``hold`` enabled too), the broker would wait for the
        heal to promote the copy, which the model refuses (not modelled): the move is a no-op step."""
        self._move_log_dir(self._target(victim), 0, hold_assignment)

    def _move_log_dir(self, b: int | None, p: int, hold_assignment: bool) -> None:
        if b is not None and self._running(b) and not self.model.brokers[b].paused:
            if hold_assignment and "hold" in self.enabled:
                self._do(HoldDirAssignments(broker=b))
            self._do(MoveLogDir(broker=b, partition=p))

    @_enabled("reassign")
    @rule(order=st.permutations(BROKERS), size=st.integers(1, len(BROKERS)),
          aim=st.sampled_from(["elr", "leader", "elr", "any"]))
    def reassign(self, order: list[int], size: int, aim: str) -> None:
        """A reassignment aimed where KIP-966 "Other behaviors" 4 speaks: most often one that removes an
        ELR member ("upon completion, the ELR only contains replicas in the final replica set") or
        moves the leader away, drawn whatever the ISR, so under min ISR too ("the reassignment can
        only be completed if the ISR size is larger or equal to min ISR")."""
        self._reassign(0, order, size, aim)

    def _reassign(self, p: int, order: list[int], size: int, aim: str) -> None:
        part = self.model.partitions[p].part
        target = list(order[:size])
        aimed_at = part.elr[:1] if aim == "elr" else [part.leader] if aim == "leader" else []
        if aimed_at and aimed_at != [None]:
            target = [b for b in order if b in part.replicas and b not in aimed_at] or target
        self._do(Reassign(replicas=tuple(target), partition=p))

    @_enabled("reassign")
    @rule()
    def cancel_reassignment(self) -> None:
        """Cancelled while under way (KIP-966 "Other behaviors" 4b: "This min ISR requirement is also
        enforced when the reassignment is canceled")."""
        self._cancel_reassignment(0)

    def _cancel_reassignment(self, p: int) -> None:
        if self.model.partitions[p].part.reassigning:
            self._do(CancelReassignment(partition=p))

    @_enabled("restart")
    @rule(b=st.sampled_from(BROKERS))
    def restart(self, b: int) -> None:
        if not self._running(b):
            self._do(Restart(broker=b))

    @_enabled("pause")
    @rule(victim=VICTIMS)
    def pause(self, victim: int | str) -> None:
        b = self._target(victim)
        if b is not None and self._running(b) and not self.model.brokers[b].paused:
            self._do(Pause(broker=b))

    @_enabled("pause")
    @rule(b=st.sampled_from(BROKERS))
    def resume(self, b: int) -> None:
        if self.model.brokers[b].paused:
            self._do(Resume(broker=b))

    @_enabled("flush")
    @rule(b=st.sampled_from(BROKERS))
    def flush(self, b: int) -> None:
        self._do(Flush(broker=b))

    @_enabled("min_isr")
    @rule(value=st.integers(1, len(BROKERS) + 1))
    def set_min_isr(self, value: int) -> None:
        self._do(SetMinIsr(value=value))

    @_enabled("cluster_min_isr")
    @rule(value=st.integers(1, len(BROKERS) + 1))
    def set_cluster_min_isr(self, value: int) -> None:
        """The cluster-wide default, which the topic's own min ISR overrides: nothing under the KIP
        (KIP-966 "Other behaviors" 2 removes the ELR when "updating the config min.insync.replicas",
        and the topic's did not change); under ``kafka`` every update clears every ELR and
        LastKnownElr (``controller.change_cluster_min_isr``)."""
        self._do(SetClusterMinIsr(value=value))

    @_enabled("unclean_election")
    @rule(enabled=st.booleans())
    def unclean_election(self, enabled: bool) -> None:
        """The 2018 runbook; after an election it makes, the data invariants promise nothing."""
        self._do(UncleanElection(enabled=enabled))

    @_enabled("elect_leaders")
    @rule()
    def elect_preferred_leader(self) -> None:
        self._do(ElectLeaders(election="preferred"))

    @_enabled("unregister")
    @rule(victim=VICTIMS)
    def unregister(self, victim: int | str) -> None:
        """The operator's step for a broker gone for good, aimed at the leader most often: a running
        one is shut out of every ISR until it restarts, and its return counts as unclean (KIP-966
        "Detection of an unclean shutdown" 3: no registration record matches its epoch). The model
        refuses what was not measured on Kafka (a broker in controlled shutdown): a no-op step."""
        b = self._target(victim)
        if b is not None:
            self._do(Unregister(broker=b))

    # --- an operator's request naming a partition (``partitions`` > 1 only) ----------------------
    # The rules above name partition 0 (the request's default); these draw the partition, modulo the
    # topic's. Each is of its request's kind, so the swarm enables both together; hidden from a
    # one-partition machine (``needs``), whose seeds draw what they drew before.

    @_enabled("reassign", needs="several_partitions")
    @rule(p=st.integers(0, MAX_PARTITIONS - 1), order=st.permutations(BROKERS), size=st.integers(1, len(BROKERS)),
          aim=st.sampled_from(["elr", "leader", "elr", "any"]))
    def reassign_partition(self, p: int, order: list[int], size: int, aim: str) -> None:
        """``reassign`` of partition p, aimed as partition 0's is (at its ELR or its leader)."""
        self._reassign(self._partition(p), order, size, aim)

    @_enabled("reassign", needs="several_partitions")
    @rule(p=st.integers(0, MAX_PARTITIONS - 1))
    def cancel_partition_reassignment(self, p: int) -> None:
        """The reassignment under way of a partition: the p-th of those that have one (modulo their
        number), so that one is cancelled whenever there is one."""
        moving = [q for q, partition in sorted(self.model.partitions.items()) if partition.part.reassigning]
        if moving:
            self._cancel_reassignment(moving[p % len(moving)])

    @_enabled("move", needs="several_partitions")
    @rule(p=st.integers(0, MAX_PARTITIONS - 1), victim=VICTIMS, hold_assignment=st.booleans())
    def move_partition_log_dir(self, p: int, victim: int | str, hold_assignment: bool) -> None:
        """A replica of partition p moved (``leader``: its leader's), the other partitions' replicas
        on the broker staying where they are."""
        p = self._partition(p)
        self._move_log_dir(self._target(f"leader:{p}" if victim == "leader" else victim), p, hold_assignment)

    @_enabled("elect_leaders", needs="several_partitions")
    @rule(p=st.integers(0, MAX_PARTITIONS - 1))
    def elect_partition_preferred_leader(self, p: int) -> None:
        self._do(ElectLeaders(election="preferred", partition=self._partition(p)))

    # --- the controller quorum (``controllers`` > 1 only) ----------------------------------------

    @_enabled("controller")
    @rule(victim=st.one_of(st.just("active"), st.integers(0, QUORUM - 1)),
          how=st.sampled_from([CrashController, ShutdownController, PowerOffController]))
    def stop_controller(self, victim: int | str, how: type[CrashController]) -> None:
        """The active controller most often (where a failover is), any voter otherwise."""
        self._do(how(controller=victim))

    @_enabled("controller")
    @rule(victim=st.one_of(st.just("all"), st.integers(0, QUORUM - 1)))
    def restart_controller(self, victim: int | str) -> None:
        self._do(RestartController(controller=victim))

    @_enabled("controller")
    @rule(victim=st.one_of(st.just("active"), st.integers(0, QUORUM - 1)),
          scope=st.sampled_from(["brokers", "controllers", "all"]))
    def isolate_controller(self, victim: int | str, scope: str) -> None:
        self._do(IsolateController(controller=victim, scope=scope))  # type: ignore[arg-type]

    @_enabled("controller")
    @rule(b=st.sampled_from(BROKERS), victim=st.one_of(st.just("active"), st.integers(0, QUORUM - 1)),
          both_ways=st.booleans())
    def cut_controller_link(self, b: int, victim: int | str, both_ways: bool) -> None:
        """A broker cut from one controller (the active one most often), not from the others: it
        reaches the quorum only while another controller leads (issue 27: "a broker partitioned
        from the active controller but not from the others")."""
        end = one_controller(victim)
        self._do(Cut(links=((b, end), (end, b)) if both_ways else ((b, end),)))

    @_enabled("controller")
    @rule(a=st.integers(0, QUORUM - 1), step=st.integers(1, QUORUM - 1), slow=st.booleans(),
          both_ways=st.booleans())
    def fault_voter_link(self, a: int, step: int, slow: bool, both_ways: bool) -> None:
        """The link from controller a to another (by number: which one leads is timing on Kafka) cut
        or slowed, one way or both; the model holds a slowed one as a cut to the quorum's timers and
        refuses a leader left without a majority's round trips (a no-op here)."""
        src, dst = one_controller(a), one_controller((a + step) % QUORUM)
        links = ((src, dst), (dst, src)) if both_ways else ((src, dst),)
        self._do(Slow(links=links) if slow else Cut(links=links))

    # --- a topic of several partitions (``partitions`` > 1 only) ----------------------------------

    @_enabled("partition_leader")
    @rule(p=st.integers(0, MAX_PARTITIONS - 1),
          fault=st.sampled_from(["crash", "isolate", "lossy", "shutdown", "pause"]))
    def fault_on_partition_leader(self, p: int, fault: str) -> None:
        """A broker fault aimed at the leader of partition p (drawn modulo the topic's partitions,
        so the strategy is the same whatever their number), on the terms of the rule of its kind."""
        b = self._target(f"leader:{p % self.config.partitions}")
        if b is None or not self._running(b):
            return
        if fault == "isolate":
            self._do(Cut(links=isolation_links(b, "all", self.config.cluster_brokers)))
        elif fault == "lossy" and self.model.ledger_allows(b):
            self._do(PowerOff(brokers=(b,)))
        elif fault == "shutdown":
            self._stop_cleanly(b)
        elif fault == "crash":
            self._do(Crash(broker=b))
        elif fault == "pause" and not self.model.brokers[b].paused:
            self._do(Pause(broker=b))

    @precondition(lambda self: len(self.actions) > 0)
    @invariant()
    def protocol_invariants(self) -> None:
        found = invariants.check(self.model, len(self.model.committed))
        if found:
            type(self).last_violations = [str(v) for v in found]
            raise InvariantBroken("\n".join(str(v) for v in found))


def model_for(cfg: SearchConfig) -> ModelCluster:
    """A fresh model of the searched cluster and topic."""
    first, *more = cfg.assignment
    return ModelCluster(cfg.cluster_brokers, list(first), cfg.min_isr, cfg.profile, controllers=cfg.controllers,
                        more_partitions=tuple(list(r) for r in more))


def violations_on(profile: Profile, actions: list[Action], controllers: int = 1,
                  partitions: int = 1, spare: bool = False) -> list[str]:
    """The invariants ``actions`` break on a fresh model under ``profile`` (the machine's own
    check, after each action): a counterexample replayed on another profile or set of rules."""
    model = model_for(SearchConfig(profile=profile, controllers=controllers, partitions=partitions, spare=spare))
    for action in actions:
        try:
            model.apply(action)
        except ModelError:
            continue  # the machine skips it too
        found = invariants.check(model, len(model.committed))
        if found:
            return [str(v) for v in found]
    return []


def check_config(cfg: SearchConfig) -> None:
    """A ``ValueError`` saying what is wrong with a search's cluster, topic and kinds."""
    if cfg.controllers not in (1, QUORUM):
        raise ValueError(f"controllers={cfg.controllers}: the search runs on 1 or {QUORUM} controllers")
    if cfg.controllers == 1 and set(cfg.kinds) & set(CONTROLLER_KINDS):
        raise ValueError(f"the kinds {CONTROLLER_KINDS} need a cluster of {QUORUM} controllers")
    if not 1 <= cfg.partitions <= MAX_PARTITIONS:
        raise ValueError(f"partitions={cfg.partitions}: 1 to {MAX_PARTITIONS}")
    if cfg.partitions == 1 and set(cfg.kinds) & set(PARTITION_KINDS):
        raise ValueError(f"the kinds {PARTITION_KINDS} need a topic of several partitions")


def machine_for(cfg: SearchConfig) -> type[ProtocolMachine]:
    """The machine of one search. Rules of kinds it is not given are hidden, not merely never
    enabled: Hypothesis chooses among every rule of the class, so a kind added to the language
    would otherwise change what a search restricted to other kinds draws for the same seed."""
    hidden = {name: None for name, member in vars(ProtocolMachine).items()
              if getattr(member, "search_kind", None) not in (None, *cfg.kinds)
              or (getattr(member, "search_needs", None) is not None and not getattr(cfg, member.search_needs))}
    return type(f"ProtocolMachine_{cfg.profile.name}", (ProtocolMachine,), {"config": cfg, **hidden})


@contextmanager
def seed_only_draws() -> Iterator[None]:
    """Within this, Hypothesis draws from its seed alone.

    Hypothesis (6.170 here) mixes "local constants" into its draws: numbers and strings read from the
    source of every module of the project found in ``sys.modules``. The state machine's swarm draws
    each rule's weight as an integer in 0..254, and this package holds 100, 112, 130, 200: one more
    module imported (``pytest_elr.report``) and seed 0 of ``elr explore`` drew other schedules. The
    pool of local constants is empty here; generation and shrinking are otherwise Hypothesis' own.
    """
    from hypothesis.internal.conjecture import providers

    local_constants = getattr(providers, "_get_local_constants", None)
    if local_constants is None:  # a Hypothesis without local constants: nothing to pin
        yield
        return
    providers._get_local_constants = providers.Constants  # an empty pool
    providers.CONSTANTS_CACHE.cache.clear()  # it may hold the pool's members already
    try:
        yield
    finally:
        providers._get_local_constants = local_constants
        providers.CONSTANTS_CACHE.cache.clear()  # nor may the empty pool outlive this


def run_machine(machine: type[ProtocolMachine], max_examples: int, steps: int,
                seed_value: int | None = None, shrink: bool = True) -> None:
    """``max_examples`` schedules of up to ``steps`` actions, the same ones for the same arguments
    whatever else was imported or configured: derandomized, or from ``seed_value``, on Hypothesis'
    own default settings (not a profile a conftest loaded). ``shrink=False``: the first failing
    schedule is raised as drawn, not shrunk."""
    phases = settings.get_profile("default").phases
    run_settings = settings(
        settings.get_profile("default"), max_examples=max_examples, stateful_step_count=steps,
        phases=phases if shrink else [p for p in phases if p not in (Phase.shrink, Phase.explain)],
        deadline=None, database=None, suppress_health_check=list(HealthCheck),
        derandomize=seed_value is None, print_blob=False,
    )
    with seed_only_draws():
        run_state_machine_as_test(machine if seed_value is None else seed(seed_value)(machine),
                                  settings=run_settings)


def search(
    profile: str | Profile,
    max_examples: int = 300,
    steps: int = 25,
    rules: Rules | None = None,
    kinds: tuple[str, ...] | None = None,
    shrink: bool = True,
    controllers: int = 1,
    partitions: int = 1,
    spare: bool = False,
) -> tuple[list[Action], list[str]] | None:
    """Explore random schedules; return the shrunk counterexample (actions, violations), if any
    (``shrink=False``: the first one found, as drawn). ``kinds``: by default every kind a cluster of
    ``controllers`` and a topic of ``partitions`` draw (``default_kinds``). ``spare``: a broker more,
    holding no replica, whose metadata the schedules hold (``hold_metadata``).

    Derandomized: the same arguments explore the same schedules, whatever else is imported
    (``run_machine``), so a result can be reproduced.
    """
    prof = get_profile(profile) if isinstance(profile, str) else profile
    if rules is not None:
        prof = replace(prof, rules=rules)
    cfg = SearchConfig(profile=prof, controllers=controllers, partitions=partitions, spare=spare,
                       kinds=default_kinds(controllers, partitions) if kinds is None else kinds)
    check_config(cfg)
    machine = machine_for(cfg)
    try:
        run_machine(machine, max_examples, steps, shrink=shrink)
    except InvariantBroken:
        return list(machine.last_actions), list(machine.last_violations)
    return None
