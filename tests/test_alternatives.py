"""The oracle allows every order in which lagging followers may leave the ISR
(``controller.lagging_leave``, ``model/alternatives.py``): a system that removes them one at a time
agrees with it, the oracle without the alternatives (the mutant) reports a difference, and a state
no order gives is still a difference, against the canonical state."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from fake_backend import Fake, OneAtATime

from pytest_elr.actions import Action, Crash, Cut, Heal, Pause, Produce, Shutdown, Slow
from pytest_elr.core.nodes import isolation_links
from pytest_elr.core.observation import Observation, Result
from pytest_elr.model.alternatives import MAX_HISTORIES, MAX_STATES, Alternatives, outcomes
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.controller import MAX_CONCURRENT_LEAVES, lagging_leave
from pytest_elr.model.mutants import MUTANTS
from pytest_elr.model.profiles import Rules, get_profile
from pytest_elr.model.timing import Timing
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario

BROKERS = (0, 1, 2)
LEADER_SLOW = Slow(links=isolation_links(0, "brokers", BROKERS))

SCENARIO = """
name: lagging-followers
profiles: [kafka]
cluster: {brokers: 3}
topic: {name: t, replicas: [0, 1, 2], min_insync_replicas: 2}
steps:
  - at: setup
    do: [{produce: {count: 3, acks: all}}]
  - at: leader-slow
    do: [{slow: 0}]
  - at: leader-crash
    do: [{crash: 0}]
  - at: more
    do: [{produce: {count: 2, acks: all}}]
verdict: {acked_loss: none}
"""


def model(profile: str = "kafka", brokers: tuple[int, ...] = BROKERS, min_isr: int = 2) -> ModelCluster:
    m = ModelCluster(brokers, list(brokers), min_isr, get_profile(profile))
    m.apply(Produce(count=3))
    return m


def test_two_lagging_followers_give_three_histories_the_canonical_first() -> None:
    found = outcomes(model(), LEADER_SLOW)
    left = [state for state, _ in found if not state.partition.late_in_sync]
    assert [tuple(state.part.elr) for state in left] == [(1, 2), (2,), (1,)]
    assert all(tuple(state.part.isr) == (0,) for state in left)
    # the others have followers back at the frozen HWM (their late fetches), out of the ELR
    for state, _ in found:
        late = state.partition.late_in_sync
        assert set(state.part.isr) == {0} | late and not set(state.part.elr) & late
    # and the crash of the leader then elects from each ELR
    states = Alternatives(left)
    states.apply(Crash(broker=0))
    assert [s.part.leader for s in states.states] == [1, 2, 1]


def test_the_canonical_state_is_the_deterministic_model() -> None:
    plain = model()
    plain.apply(LEADER_SLOW)
    (first, _), *_ = outcomes(model(), LEADER_SLOW)
    assert first.fingerprint() == plain.fingerprint() and plain.timing is None


@pytest.mark.parametrize(("lagging", "choices"), [(2, 3), (3, 7), (4, 15), (5, 1)])
def test_the_choices_are_bounded(lagging: int, choices: int) -> None:
    options = lagging_leave(list(range(1, lagging + 1)), Rules())
    assert len(options) == choices and options[0] == frozenset(range(1, lagging + 1))
    assert lagging_leave([1, 2], Rules(lagging_leave_in_any_order=False)) == [frozenset({1, 2})]


def test_four_lagging_followers_stay_within_the_bound() -> None:
    brokers = (0, 1, 2, 3, 4)
    found = outcomes(model(brokers=brokers, min_isr=3), Slow(links=isolation_links(0, "brokers", brokers)))
    assert MAX_CONCURRENT_LEAVES == 4 and 1 < len(found) <= MAX_HISTORIES
    assert len({s.fingerprint() for s, _ in found}) == len(found)
    # min ISR 3 of 5: the first two to leave keep the ISR at min ISR; the later ones join the ELR
    assert {len(s.part.elr) for s, _ in found if not s.partition.late_in_sync} == {2, 3, 4}
    # slow followers back at the frozen HWM: none, each alone or all four (past MAX_LATE_SUBSETS)
    assert {0, 1, 4} <= {len(s.partition.late_in_sync) for s, _ in found}
    states = Alternatives([model(brokers=brokers, min_isr=3)])
    states.apply(Slow(links=isolation_links(0, "brokers", brokers)))
    assert len(states.states) == MAX_STATES and states.states[0].fingerprint() == found[0][0].fingerprint()


def test_a_system_that_removes_them_one_at_a_time_agrees(tmp_path: Path) -> None:
    path = tmp_path / "s.elr.yaml"
    path.write_text(SCENARIO)
    scenario = load_scenario(path)
    result = run_scenario(scenario, OneAtATime(), "kafka", tmp_path)
    assert result.passed, result.message
    events = (Path(result.history_dir) / "events.jsonl").read_text()
    assert '"type":"alternatives"' in events and '"kept":1' in events
    # the same system against an oracle without the alternatives: the ELR differs
    mutant = replace(get_profile("kafka"), rules=MUTANTS["lagging-followers-leave-together"])
    result = run_scenario(scenario, OneAtATime(), "kafka", tmp_path, oracle=mutant)
    assert not result.passed
    assert "elr: model [1, 2], observed [2]" in result.message, result.message
    # and the canonical system agrees with both
    assert run_scenario(scenario, Fake(), "kafka", tmp_path).passed
    assert run_scenario(scenario, Fake(), "kafka", tmp_path, oracle=mutant).passed


class EveryoneOutOfElr(Fake):
    """After the leader's links slow, reports an ELR no order of removals gives."""

    def observe(self) -> Observation:
        obs = super().observe()
        return replace(obs, elr=()) if obs.isr == (0,) and obs.elr else obs


def test_a_state_no_order_gives_differs_from_the_canonical_state(tmp_path: Path) -> None:
    path = tmp_path / "s.elr.yaml"
    path.write_text(SCENARIO)
    result = run_scenario(load_scenario(path), EveryoneOutOfElr(), "kafka", tmp_path)
    assert not result.passed
    assert result.disagreements[0]["field"] == "elr" and result.disagreements[0]["model"] == [1, 2]


def test_a_written_scenario_expects_only_what_every_order_agrees_on() -> None:
    from pytest_elr.core.specs import ClusterSpec, TopicSpec
    from pytest_elr.schedule.explore import model_trace

    trace = model_trace([Produce(count=2), LEADER_SLOW, Crash(broker=0)], ClusterSpec(brokers=BROKERS),
                        TopicSpec(name="t", replicas=BROKERS, min_insync_replicas=2), get_profile("kafka"))
    assert trace is not None
    assert trace[0]["elr"] == [] and "elr" not in trace[1]
    assert "isr" not in trace[1]  # [0], or followers back at the frozen HWM by their late fetches
    assert "leader" not in trace[2] and trace[2]["isr"] == [1, 2] and trace[2]["fenced"] == [0]


def test_elr_members_unfenced_in_one_round_may_be_elected_in_either_order() -> None:
    """KIP-966 "Controller behaviors" 3: the ELR member unfenced first is elected. Found by elr explore
    on Kafka 4.4.0: ISR [] and ELR [1, 2], every link healed at once, broker 2 elected where the model
    only allowed 1."""
    states = Alternatives([model()])
    for action in (Crash(broker=0), Cut(links=isolation_links(2, "all", BROKERS)), Produce(count=4),
                   Cut(links=isolation_links(1, "controller", BROKERS))):
        states.apply(action)
    assert [(s.part.leader, tuple(s.part.elr)) for s in states.states] == [(None, (1, 2))]
    states.apply(Heal(links=None))
    assert [s.part.leader for s in states.states] == [1, 2]  # the canonical (ids' order) first
    # broker 0, crashed and out of ISR and ELR, is no candidate in any order
    assert all(s.part.isr == [1, 2] for s in states.states)


def test_with_a_leader_the_order_of_unfencing_gives_no_alternative() -> None:
    m = model()
    m.apply(Cut(links=isolation_links(1, "controller", BROKERS)))
    m.apply(Cut(links=isolation_links(2, "controller", BROKERS)))
    assert m.part.leader == 0 and m.fenced == {1, 2}
    assert len(outcomes(m, Heal(links=None))) == 1


def test_a_paused_broker_shut_down_may_heartbeat_first_or_not() -> None:
    """SIGCONT then SIGTERM: the resumed JVM's overdue heartbeat races its controlled shutdown.
    Heartbeat first (elr explore on 4.4.0): the ELR member is unfenced, elected, then leaves and is
    the LastKnownElr. Shutdown first (CI on 4.4.0): nothing changes. Both are allowed, no third."""
    states = Alternatives([model()])
    for broker in BROKERS:
        states.apply(Pause(broker=broker))
    [before] = states.states
    assert (before.part.isr, before.part.elr, before.part.last_known_elr) == ([], [1, 2], [2])
    epochs = (before.part.leader_epoch, before.part.partition_epoch)
    states.apply(Shutdown(broker=1))
    heartbeat_first, shutdown_first = states.states
    assert heartbeat_first.part.last_known_elr == [1]
    assert heartbeat_first.part.leader_epoch > epochs[0]
    assert shutdown_first.part.last_known_elr == [2]
    assert (shutdown_first.part.leader_epoch, shutdown_first.part.partition_epoch) == epochs
    for state in states.states:
        assert (state.part.leader, state.part.isr, state.part.elr, state.fenced) == (None, [], [1, 2], {0, 1, 2})


def test_a_running_broker_shut_down_gives_no_alternative() -> None:
    assert len(outcomes(model(), Shutdown(broker=1))) == 1


SLOW_2, SLOW_1 = (Slow(links=isolation_links(b, "brokers", BROKERS)) for b in (2, 1))

REJOIN_SCENARIO = """
name: slow-rejoins
profiles: [legacy]
cluster: {brokers: 3}
topic: {name: t, replicas: [0, 1, 2], min_insync_replicas: 2}
steps:
  - at: setup
    do: [{produce: {count: 3, acks: all}}]
  - at: slow-2
    do: [{slow: 2}, {produce: {count: 3, acks: all}}]
  - at: slow-1
    do: [{slow: 1}]
  - at: leader-crash
    do: [{crash: 0}]
verdict: {acked_loss: none}
"""


def test_a_slow_follower_under_min_isr_may_be_back_in_the_isr() -> None:
    """Kafka's leader takes a follower back on a fetch at its HWM (isFollowerInSync); a slow one's
    late fetches reach the frozen HWM under min ISR, so it is in and out in turn (measured on 4.4.0
    and 4.0.2). Out is canonical; in is allowed; the leader's crash then elects it (legacy: no ELR)."""
    states = Alternatives([model("legacy")])
    states.apply(SLOW_2)
    states.apply(Produce(count=3))
    [one] = states.states
    assert one.part.isr == [0, 1] and 2 in one.partition.outrun
    states.apply(SLOW_1)
    out, back = states.states
    assert (out.part.isr, back.part.isr) == ([0], [0, 1]) and back.partition.late_in_sync == {1}
    assert back.part.partition_epoch == out.part.partition_epoch + 1  # it left, then came back
    states.apply(Crash(broker=0))
    assert sorted((s.part.leader or -1, tuple(s.part.isr)) for s in states.states) == [(-1, (0,)), (1, (1,))]


def test_a_slow_follower_the_hwm_passed_never_comes_back() -> None:
    """2 left while the ISR met min ISR: the HWM moved past it (in Kafka by the executor's acks=1
    ticks too), so no fetch of its reaches the HWM again, under min ISR or not."""
    states = Alternatives([model("legacy")])
    for action in (SLOW_2, SLOW_1, Crash(broker=0)):
        states.apply(action)
    assert all(2 not in s.part.isr for s in states.states)


def test_a_slow_follower_at_min_isr_gives_no_alternative() -> None:
    assert len(outcomes(model(), SLOW_2)) == 1


class SlowFollowerRejoins(Fake):
    """A slow follower back in the ISR at the frozen HWM whenever it may be (Kafka's leader)."""

    def start(self, *args: Any, **kwargs: Any) -> None:
        super().start(*args, **kwargs)
        assert self.model is not None
        self.model.timing = Timing(script=(1,) * 100)


class PassedFollowerRejoins(SlowFollowerRejoins):
    """Also reports broker 2 back, which the HWM had passed: no history gives that."""

    def observe(self) -> Observation:
        obs = super().observe()
        return replace(obs, isr=(0, 1, 2)) if obs.isr == (0, 1) and obs.leader == 0 and self.slowed_1 else obs

    def apply(self, action: Action) -> Result:
        self.slowed_1 = getattr(self, "slowed_1", False) or action == SLOW_1
        return super().apply(action)


def test_a_system_whose_slow_follower_rejoins_agrees_and_a_third_state_differs(tmp_path: Path) -> None:
    path = tmp_path / "s.elr.yaml"
    path.write_text(REJOIN_SCENARIO)
    scenario = load_scenario(path)
    result = run_scenario(scenario, SlowFollowerRejoins(), "legacy", tmp_path)
    assert result.passed, result.message
    events = (Path(result.history_dir) / "events.jsonl").read_text()
    assert '"type":"alternatives","step":"slow-1"' in events and '"kept":1' in events
    assert run_scenario(scenario, Fake(), "legacy", tmp_path).passed  # the canonical system too
    result = run_scenario(scenario, PassedFollowerRejoins(), "legacy", tmp_path)
    assert not result.passed
    assert result.disagreements[0]["field"] == "isr" and result.disagreements[0]["model"] == [0], result.message


OSCILLATION_SCENARIO = """
name: epoch-oscillates
profiles: [kafka]
cluster: {brokers: 3}
topic: {name: t, replicas: [0, 1, 2], min_insync_replicas: 2}
steps:
  - at: setup
    do: [{produce: {count: 3, acks: all}}]
  - at: out
    do: [{FAULT: 2}, {produce: {count: 3, acks: all}}]
  - at: under-min-isr
    do: [{FAULT: 1}]
  - at: again
    do: [{FAULT: 1}]
verdict: {acked_loss: none}
"""


class EpochMovesAfterUnderMinIsr(Fake):
    """From the step that takes the ISR under min ISR on, every observation shows two more ISR
    changes (a follower taken back and dropped), as a Kafka leader writes them for a slow one."""

    def apply(self, action: Action) -> Result:
        self.moving = getattr(self, "moving", False) or (1, 0) in (getattr(action, "links", None) or ())
        return super().apply(action)

    def observe(self) -> Observation:
        obs = super().observe()
        if getattr(self, "moving", False) and obs.partition_epoch is not None:
            self.bumps = getattr(self, "bumps", 0) + 2
            return replace(obs, partition_epoch=obs.partition_epoch + self.bumps)
        return obs


@pytest.mark.parametrize("fault", ["slow", "isolate"])
def test_an_epoch_moved_by_a_slow_follower_at_the_frozen_hwm_is_timing_elsewhere_a_difference(
        fault: str, tmp_path: Path) -> None:
    """Step `again` changes nothing in the model; the system's partition epoch still moves. With
    follower 1 slow at the frozen HWM that is its rejoin-and-drop (measured on 4.4.0: the
    walkthrough's T2 moved 2 -> 7 in CI), declared as timing; with 1 isolated, no fetch of its
    arrives, and the same move is a difference."""
    path = tmp_path / "s.elr.yaml"
    path.write_text(OSCILLATION_SCENARIO.replace("{FAULT: 2}", "{slow: 2}").replace(
        "FAULT", "slow" if fault == "slow" else "isolate"))
    result = run_scenario(load_scenario(path), EpochMovesAfterUnderMinIsr(), "kafka", tmp_path)
    if fault == "slow":
        assert result.passed, result.message
        events = (Path(result.history_dir) / "events.jsonl").read_text()
        assert "whether one falls within the step is timing" in events
    else:
        assert not result.passed
        assert [(d["step"], d["field"]) for d in result.disagreements] == [("again", "partition_epoch")], \
            result.message


class SlowFollowerSeenBackFirst(Fake):
    """The canonical system, but the first look after `slow: 1` catches follower 1 back in the ISR
    for a moment (its late fetch at the frozen HWM), as a real cluster may; then it is out."""

    settles_instantly: ClassVar[bool] = False

    def apply(self, action: Action) -> Result:
        if action == SLOW_1:
            self.moment = True
        return super().apply(action)

    def observe(self) -> Observation:
        obs = super().observe()
        if getattr(self, "moment", False):
            self.moment = False
            epoch = obs.partition_epoch + 1 if obs.partition_epoch is not None else None
            return replace(obs, isr=(0, 1), partition_epoch=epoch)
        return obs


def test_a_settle_keeps_the_resting_state_over_a_moment_of_a_slow_followers_return(tmp_path: Path) -> None:
    """Kept, the moment would make the leader's crash elect 1 (as in the state where it is back);
    the resting state, awaited first, has no leader after the crash, as this system shows (found on
    4.0.2: the walkthrough's T1 settled on ISR [1, 2, 3, 4] and its expectation failed)."""
    path = tmp_path / "s.elr.yaml"
    path.write_text(REJOIN_SCENARIO)
    result = run_scenario(load_scenario(path), SlowFollowerSeenBackFirst(), "legacy", tmp_path)
    assert result.passed, result.message
