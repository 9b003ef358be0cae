"""A fake system under test for the executor's own tests: the model, presented as a backend that
is *not* its own oracle, so the executor holds it to a second model exactly as it holds Kafka.
Subclasses plant one way a harness can be blind (see test_harness_mutants.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar, TypeVar
from unittest import mock

from pytest_elr.actions import (
    Action,
    CrashController,
    Cut,
    Flush,
    ForgedAlterPartition,
    Heal,
    HoldMetadata,
    IsolateController,
    PowerOffController,
    Restart,
    RestartController,
    Slow,
    Unregister,
)
from pytest_elr.backends.base import LagChurn
from pytest_elr.backends.model import ModelBackend
from pytest_elr.core.nodes import CONTROLLER, controller_of
from pytest_elr.core.observation import Observation, ProduceOutcome, Read, Refusal, Result
from pytest_elr.model import controller
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.profiles import Rules
from pytest_elr.model.timing import Timing

T = TypeVar("T")

#: no expectation at all: whatever the fake gets wrong, only the model comparison can see it
SILENT = """
name: harness-mutants
profiles: [kafka]
cluster: {brokers: 2}
topic: {name: t, replicas: [0, 1], min_insync_replicas: 2}
steps:
  - at: setup
    do: [{produce: 5}]
  - at: follower-cut
    do: [{isolate: {broker: 1, from: brokers}}, {produce: {count: 3, acks: all}}, {produce: {count: 2, acks: "1"}}]
  - at: both-crash
    do: [{crash: 1}, {crash: 0}]
  - at: follower-back
    do: [{restart: 1}]
  - at: last-leader-back
    do: [{restart: 0}]
  - at: follower-rejoins
    do: [{heal: all}]
verdict: {acked_loss: none}
"""

#: a reassignment that waits for its added replica (down), then completes when it is back
REASSIGNING = """
name: harness-mutants-reassignment
profiles: [kafka]
cluster: {brokers: 3}
topic: {name: t, replicas: [0, 1], min_insync_replicas: 1}
steps:
  - at: setup
    do: [{produce: 5}, {crash: 2}]
  - at: move
    do: [{reassign: [0, 2]}]
  - at: added-back
    do: [{restart: 2}]
verdict: {acked_loss: none}
"""


class Clock:
    """``time`` for the executor: ``sleep`` moves the clock, nothing waits."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:  # the wall clock: the same seconds, from the epoch
        return 1_800_000_000.0 + self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Fake(ModelBackend):
    """The model as the system under test (the executor shadows it with a model of its own)."""

    name: ClassVar[str] = "fake"

    def own_model(self) -> ModelCluster | None:
        return None


class LastKnownElrIgnored(Fake):
    """Reports LastKnownELR empty: the old settle recorded such a difference and went on."""

    def observe(self) -> Observation:
        return replace(super().observe(), last_known_elr=())


class RecoveringNotRead(Fake):
    """Never reads LeaderRecoveryState (what the kafka backend did: always false)."""

    def observe(self) -> Observation:
        return replace(super().observe(), recovering=False)


class ProduceOutcomeOverwritten(Fake):
    """Each produce reports the outcome of the one before it (an outcome kept in one slot)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._previous: ProduceOutcome | None = None

    def apply(self, action: Action) -> Result:
        result = super().apply(action)
        if isinstance(result, ProduceOutcome):
            result, self._previous = self._previous or result, result
        return result


class DrainStopsEarly(Fake):
    """The final read gives up half way to the HWM (a timeout taken for the end of the log)."""

    def drain(self) -> Read:
        read = super().drain()
        half = (read.end_offset or 0) // 2
        return Read([r for r in read.records if r.offset < half], half)


class HwmFromLaggingReplica(Fake):
    """Reads the HWM of a replica that is behind once the partition has a new leader epoch."""

    def observe(self) -> Observation:
        obs = super().observe()
        return replace(obs, hwm=0) if (obs.leader_epoch or 0) > 1 and obs.hwm else obs


class EarlierReadsSeeNothing(Fake):
    """Reads before the end come back empty: a loss could then only be judged by absence."""

    def read_partitions(self, starts: Mapping[int, int]) -> dict[int, Read]:
        return {i: Read([], read.end_offset) for i, read in super().read_partitions(starts).items()}


class OneAtATime(Fake):
    """Removes followers that lag at once one at a time, the later-listed last: what a Kafka
    leader, judging each follower's lag on its own, may do (``controller.lagging_leave``)."""

    def start(self, *args: Any, **kwargs: Any) -> None:
        super().start(*args, **kwargs)
        assert self.model is not None
        self.model.timing = LaggingOneAtATime()


class LaggingOneAtATime(Timing):
    """Option 1 where followers lag at once (all but the last leave first); the canonical option
    at every other choice (a slow follower stays out of the ISR, ...)."""

    def choose(self, options: Sequence[T]) -> T:
        return options[1] if len(options) > 1 and isinstance(options[0], frozenset) and options[0] else options[0]


class HwmAdvancesUnderMinIsr(Fake):
    """Advances the HWM to what the ISR holds even while the committed ISR is under min ISR
    (KIP-966's central rule broken): the model with ``Rules.hwm_requires_min_isr`` off."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, rules=replace(Rules(), hwm_requires_min_isr=False), **kwargs)


class HwmBehindAcknowledged(Fake):
    """Reports a HWM one record short: the last acknowledged acks=all record looks uncommitted."""

    def observe(self) -> Observation:
        obs = super().observe()
        return replace(obs, hwm=obs.hwm - 1) if obs.hwm else obs


class LeaderEpochBumpedOnElrChange(Fake):
    """Bumps the leader epoch on a change that moves the ELR alone (KIP-966, "Other behaviors" 1:
    "Change of the ELR does not require a leader epoch bump")."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, rules=replace(Rules(), elr_change_keeps_leader_epoch=False), **kwargs)


class PartitionEpochNotBumped(Fake):
    """Reports the partition epoch of the partition's creation: a change record that moves no
    leader is missed (what a reader of the leader epoch alone would see)."""

    def observe(self) -> Observation:
        return replace(super().observe(), partition_epoch=0)


class ReassignmentNotRead(Fake):
    """Reports no reassignment under way, ever (what DescribeTopicPartitions alone shows: it has no
    adding or removing replicas)."""

    def observe(self) -> Observation:
        return replace(super().observe(), adding=(), removing=())


class ReplicasOfTheStart(Fake):
    """Reports the replica set the topic was created with (an assignment read once and kept)."""

    def observe(self) -> Observation:
        return replace(super().observe(), replicas=(0, 1))


class ElrElectionsUncounted(Fake):
    """Counts an election from the ELR against the ELR after the change, which no longer holds the
    new leader (``TopicDelta`` reads ``prevPartition.elr``): no ELR election is ever counted."""

    def election_counts(self) -> dict[str, int]:
        return {**super().election_counts(), "elr_elections": 0}
class ElrLostOnFailover(Fake):
    """A new active controller that does not replay the ELR from the metadata log: the ELR and
    LastKnownELR are empty after an active controller's crash (KIP-966 keeps both in the log)."""

    def apply(self, action: Action) -> Result:
        result = super().apply(action)
        if isinstance(action, CrashController) and self.model is not None:
            self.model.part.elr, self.model.part.last_known_elr = [], []
        return result


class ElrLostOnControllerPowerOff(Fake):
    """A power cut of a controller that takes committed metadata with it: the ELR and LastKnownELR
    committed before the cut are gone once it is off (``at="power_off"``), or once the lossy
    controller rejoins and its shorter log wins (``at="rejoin"``). KRaft flushes a voter's log before
    it acknowledges, so neither may happen with one lossy controller out of three."""

    def __init__(self, *args: Any, at: str = "power_off", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._at = at
        self._powered_off = False

    def apply(self, action: Action) -> Result:
        result = super().apply(action)
        self._powered_off |= isinstance(action, PowerOffController)
        loses = (isinstance(action, PowerOffController) if self._at == "power_off"
                 else isinstance(action, RestartController) and self._powered_off)
        if loses and self.model is not None:
            self.model.part.elr, self.model.part.last_known_elr = [], []
        return result


class NoFailover(Fake):
    """Reports no active controller once one has crashed: the survivors never elect a leader."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._crashed = False

    def apply(self, action: Action) -> Result:
        self._crashed |= isinstance(action, CrashController)
        return super().apply(action)

    def observe(self) -> Observation:
        obs = super().observe()
        return replace(obs, active_controller=None) if self._crashed else obs


class IsolatedControllerFencesNobody(Fake):
    """An active controller cut from every broker that never fences them: as if the cut did not
    reach the brokers' heartbeats (KIP-631 fences a broker whose session expired)."""

    def apply(self, action: Action) -> Result:
        if isinstance(action, IsolateController) and action.scope == "brokers":
            return None
        return super().apply(action)


class IsolatedControllerKeepsLeading(Fake):
    """An active controller cut from the other controllers that keeps its leadership (KIP-595: a
    leader that hears from no majority within the fetch timeout resigns)."""

    def apply(self, action: Action) -> Result:
        if isinstance(action, IsolateController) and action.scope == "controllers":
            return None
        return super().apply(action)


class OneControllerCutIgnored(Fake):
    """A cut from one controller that never reaches the network (as a backend that drops link ends it
    cannot name): the broker keeps heartbeating to the active controller."""

    def apply(self, action: Action) -> Result:
        if isinstance(action, Cut) and any(controller_of(n) is not None for link in action.links for n in link):
            return None
        return super().apply(action)


class OneControllerCutCutsThemAll(Fake):
    """A cut from one controller applied to every controller (as the symbolic ``controller`` was):
    the broker stays fenced after a failover, though it reaches the new active controller."""

    def apply(self, action: Action) -> Result:
        if isinstance(action, Cut):
            action = Cut(links=tuple(tuple(CONTROLLER if controller_of(n) is not None else n for n in link)
                                     for link in action.links))  # type: ignore[misc]
        return super().apply(action)


class LastToHeartbeatFirst(Fake):
    """Of brokers unfenced in one controller round, hears from the highest id first: Kafka 4.0.2
    healed with ELR members 1 and 2 fenced elected 2 (``ModelCluster._next_to_heartbeat``)."""

    def start(self, *args: Any, **kwargs: Any) -> None:
        super().start(*args, **kwargs)
        assert self.model is not None
        self.model.timing = HighestIdHeartbeatsFirst()


class HighestIdHeartbeatsFirst(Timing):
    """The last option where the choice is which broker heartbeats next (a list of broker ids); the
    canonical option at every other choice."""

    def choose(self, options: Sequence[T]) -> T:
        return options[-1] if type(options[0]) is int else options[0]


class FencedBrokerReportedLeader(Fake):
    """Reports broker 0 as the leader of a partition that has one while 0 is fenced: no order of
    heartbeats elects a fenced broker (KIP-966 "Unclean recovery" 3b)."""

    def observe(self) -> Observation:
        obs = super().observe()
        return replace(obs, leader=0) if obs.leader is not None and 0 in obs.fenced else obs


class _SeesControllerLinkCuts(Fake):
    """Notes (``_cut``) that a link between two controllers was cut; ``heal: all`` forgets it when
    ``healed_by_all``."""

    healed_by_all = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cut = False

    def apply(self, action: Action) -> Result:
        if isinstance(action, Cut):
            self._cut |= any(all(controller_of(n) is not None for n in link) for link in action.links)
        if self.healed_by_all and isinstance(action, Heal) and action.links is None:
            self._cut = False
        return super().apply(action)


class ControllerLinkCutLosesTheQuorum(_SeesControllerLinkCuts):
    """A cut between two controllers that leaves the quorum without a leader (as Raft without
    KIP-996's pre-vote could: a voter that lost the leader bumps the epoch and deposes it)."""

    def observe(self) -> Observation:
        obs = super().observe()
        return replace(obs, active_controller=None) if self._cut else obs


class SlowToOneControllerSlowsThemAll(Fake):
    """A slow link to one controller applied to every controller (as the symbolic ``controller``):
    the leader's ISR change stays held after a failover, though the new active controller's link
    is not slow."""

    def apply(self, action: Action) -> Result:
        if isinstance(action, Slow):
            action = Slow(links=tuple(tuple(CONTROLLER if controller_of(n) is not None else n for n in link)
                                      for link in action.links), latency_ms=action.latency_ms)  # type: ignore[misc]
        return super().apply(action)


class SlowBetweenControllersIgnored(Fake):
    """A slowed link between two controllers that changes nothing for the quorum (data that arrives,
    late, taken as in time): two voters with only such a link between them still elect a leader."""

    def apply(self, action: Action) -> Result:
        if isinstance(action, Slow):
            links = tuple(link for link in action.links if not all(controller_of(n) is not None for n in link))
            if not links:
                return None
            action = Slow(links=links, latency_ms=action.latency_ms)  # type: ignore[misc]
        return super().apply(action)


class ControllerLinkCutMovesTheLeader(_SeesControllerLinkCuts):
    """A cut between two controllers after which another controller leads (as a disruptive election
    would, without KIP-996's pre-vote): the quorum has a leader, not the same one."""

    healed_by_all = False

    def observe(self) -> Observation:
        obs = super().observe()
        if self._cut and obs.active_controller is not None:
            return replace(obs, active_controller=(obs.active_controller + 1) % 3)
        return obs


class AsksToDropOnlyABehindFollower(Fake):
    """Kafka's leader: it asks the controller to drop a silent follower from the ISR only once the
    follower is behind it (``Replica.isCaughtUp``), so a shrink the model holds on a slow link is
    not held here -- not even sent -- until records come (``Backend.nudge``). It settles as a real
    system does: the executor polls it until its step's state comes."""

    settles_instantly: ClassVar[bool] = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.nudges = 0
        self._behind = False

    def settle_timeout_s(self) -> float:
        return 3.0

    def nudge(self, partitions: Sequence[int] = (0,)) -> None:
        self.nudges += 1
        self._behind = True

    def observe(self) -> Observation:
        obs = super().observe()
        if self.model is None or not self.model.asked_to_drop():
            self._behind = False  # a follower dropped or back: the next one needs records of its own
        return obs if self._behind else replace(obs, held=())


class MetadataHoldIgnored(Fake):
    """Ignores ``hold_metadata`` (as a backend that never put the toxic on): the held broker's
    metadata flows, so a leader's clean shutdown finishes at once and it is fenced as it leaves."""

    def apply(self, action: Action) -> Result:
        return None if isinstance(action, HoldMetadata) else super().apply(action)


class _ControlledShutdownUnmarked(ModelCluster):
    def _is_unfenced(self, broker: int) -> bool:
        return broker not in self.fenced


class ShuttingDownBrokerElected(Fake):
    """Takes a broker in controlled shutdown for an active one, as Kafka 4.4.0 with mutant 1494
    planted (``handleBrokerInControlledShutdown``'s IN_CONTROLLED_SHUTDOWN registration change never
    written): the leader acceptor elects it."""

    def start(self, *args: Any, **kwargs: Any) -> None:
        super().start(*args, **kwargs)
        model = self.model
        assert model is not None
        model.__class__ = _ControlledShutdownUnmarked
        model.ctx.is_unfenced = model._is_unfenced


class FollowersLagOnlyWhenTicked(Fake):
    """Kafka's leader over many partitions on a starved machine: a follower cut from its leader
    leaves the ISR only once it is *behind* (``Replica.isCaughtUp``), so the partition shows its
    old state until records come to it (``Backend.nudge``); and a record to a partition no fault
    touches puts its followers behind too, which one starved for longer than
    ``replica.lag.time.max.ms`` pays with a shrink and a take-back (its partition epoch +2; measured
    in CI, 2026-11-27: a partition of fifty that no fault touched, nudged with all fifty)."""

    settles_instantly: ClassVar[bool] = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.nudged: list[tuple[int, ...]] = []
        self._ticked: set[int] = set()
        self._shown: dict[int, Observation] = {}
        self._churned: dict[int, int] = {}

    def settle_timeout_s(self) -> float:
        return 3.0

    def nudge(self, partitions: Sequence[int] = (0,)) -> None:
        self.nudged.append(tuple(partitions))
        self._ticked |= set(partitions)

    def observe(self) -> Observation:
        obs = super().observe()
        shown = {i: self._one(i, obs.of(i), set(obs.fenced)) for i in (0, *obs.partitions)}
        self._ticked.clear()
        return replace(shown[0], fenced=obs.fenced,
                       partitions={i: o for i, o in shown.items() if i})

    def _one(self, i: int, now: Observation | None, fenced: set[int]) -> Observation:
        assert now is not None
        before = self._shown.get(i)
        lagging = before is not None and set(before.isr) - set(now.isr) - fenced
        if lagging and i not in self._ticked:
            now = before  # the cut follower is at its leader's end: still in sync
        else:
            if i in self._ticked and not lagging:
                self._churned[i] = self._churned.get(i, 0) + 2  # a starved follower out and back in
            self._shown[i] = now
        epoch = now.partition_epoch
        return now if epoch is None else replace(now, partition_epoch=epoch + self._churned.get(i, 0))


class StarvedFollowerChurns(Fake):
    """A Kafka follower starved of CPU on a loaded machine: after the first flush it leaves the
    ISR for lag and comes back (partition 0's epoch +2, nothing else changed; CI, 2026-11-28), and
    the leader's log says so as ``churn`` has it (None: the backend keeps no log)."""

    def __init__(self, churn: LagChurn | None, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.churn = churn
        self.asked: list[tuple[int, int, float]] = []
        self._churned = 0

    def apply(self, action: Action) -> Result:
        result = super().apply(action)
        if isinstance(action, Flush) and not self._churned:
            self._churned = 2
        return result

    def observe(self) -> Observation:
        obs = super().observe()
        epoch = obs.partition_epoch
        return obs if epoch is None else replace(obs, partition_epoch=epoch + self._churned)

    def lag_churn(self, partition: int, leader: int, since: float) -> LagChurn | None:
        self.asked.append((partition, leader, since))
        return self.churn


class UnregisterSweepsNothing(Fake):
    """Kafka 4.4.0 with ``handleBrokerUnregistered``'s ISR pass removed (mutant 1453): the
    registration goes, but the broker stays in every ISR it was in."""

    def apply(self, action: Action) -> Result:
        if not isinstance(action, Unregister):
            return super().apply(action)
        model = self.model
        assert model is not None
        model.unregistered.add(action.broker)
        model.fenced.add(action.broker)  # never active again, as the model has it, but no ISR sweep
        model.settle()
        return None


class UnregisterSkipsElrPass(Fake):
    """Kafka 4.4.0 with ``handleBrokerUnregistered``'s ELR pass removed (mutant 1455): no change is
    built for the partitions whose ELR holds the broker, so a leaderless one whose topic allows
    unclean elections waits for the controller's timer instead of electing at once."""

    def apply(self, action: Action) -> Result:
        if not isinstance(action, Unregister):
            return super().apply(action)
        # Only this apply, on the fake's own model: the executor's oracle applies the step apart.
        with mock.patch.object(controller, "reconsider_after_unregistration", lambda part, ctx: None):
            return super().apply(action)


class UnregisteredListedFenced(Fake):
    """Lists an unregistered broker among the fenced ones (as a client reading a stale broker list)."""

    def observe(self) -> Observation:
        model = self.model
        assert model is not None
        return replace(super().observe(), fenced=tuple(sorted(model.fenced)))


class UnregisteredReturnsClean(Fake):
    """Takes an unregistered broker's return for a clean one (a registration matched against the
    removed record): it stays in the ELR."""

    def apply(self, action: Action) -> Result:
        if isinstance(action, Restart) and self.model is not None:
            self.model.unregistered.discard(action.broker)
        return super().apply(action)


class ReportsRefusalsAsAccepted(Fake):
    """Swallows the controller's refusal (a harness that reads no error code): a reassignment
    refused, an unregister of a broker with no registration answered as done."""

    def apply(self, action: Action) -> Result:
        result = super().apply(action)
        return None if isinstance(result, Refusal) else result


class FollowerChurnsAtStart(Fake):
    """A new topic's follower whose first fetch came later than replica.lag.time.max.ms (Kafka 4.4.0
    under load, the soak of 2026-11-27): the first observations show it out of the ISR, the partition
    epoch +1; then it is back, +2, before any fault."""

    settles_instantly: ClassVar[bool] = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.observed = 0

    def settle_timeout_s(self) -> float:
        return 3.0  # a difference it keeps is told in seconds, not the real cluster's half minute

    def observe(self) -> Observation:
        obs = super().observe()
        self.observed += 1
        epoch = obs.partition_epoch or 0
        if self.observed <= 2:
            return replace(obs, isr=obs.isr[:-1], partition_epoch=epoch + 1)
        return replace(obs, partition_epoch=epoch + 2)


class ForgedAlterPartitionMutant(Fake):
    """Kafka 4.4.0's controller with one of the AlterPartition checks mutated (docs/kafka-mutants.md):
    the system's own answer to a forged ``alter_partition`` as that mutant gives it. ``mutant``:
    ``1083`` (``checkBrokerEpoch`` removed: a stale sender is taken), ``1157`` (a change that writes
    the sender as leader again, its epoch bumped, answered NEW_LEADER_ELECTED), ``1158`` (a change
    that writes no leader answered NEW_LEADER_ELECTED), ``1356`` (RECOVERING refused with an ISR of one too),
    ``1365`` (the RECOVERED -> RECOVERING check inverted)."""

    mutant: ClassVar[str] = ""

    def apply(self, action: Action) -> Result:
        if not isinstance(action, ForgedAlterPartition):
            return super().apply(action)
        original_answer, mutant = controller.answer_alter_partition, self.mutant

        def recovery_state_refused(part: Any, req: Any) -> str | None:
            if not req.recovering:
                return None
            if mutant == "1356":  # ``newIsr.length > 1`` became ``>= 1`` (or negated): one replica refused
                return "INVALID_REQUEST"
            # 1365: ``partition.leaderRecoveryState == RECOVERED`` negated
            return "INVALID_REQUEST" if len(req.isr) > 1 or part.recovering else None

        def answer(part: Any, req: Any, ctx: Any) -> str | None:
            epochs = part.leader_epoch, part.partition_epoch
            said = original_answer(part, req, ctx)
            if said is not None:
                return said
            if mutant == "1158" and part.partition_epoch != epochs[1] and part.leader_epoch == epochs[0]:
                return "NEW_LEADER_ELECTED"  # ``change.leader() != NO_LEADER_CHANGE`` negated
            if mutant == "1157" and part.leader_epoch != epochs[0]:
                return "NEW_LEADER_ELECTED"  # ``change.leader() != request.brokerId()`` negated
            return None

        patch = {"1083": ("stale_sender", lambda req, ctx: None),  # ``checkBrokerEpoch`` removed
                 "1157": ("answer_alter_partition", answer),
                 "1158": ("answer_alter_partition", answer),
                 "1356": ("recovery_state_refused", recovery_state_refused),
                 "1365": ("recovery_state_refused", recovery_state_refused)}[mutant]
        # Only this apply, on the fake's own model: the executor's oracle applies the step apart.
        with mock.patch.object(controller, *patch):
            return super().apply(action)
