"""Brokers unfenced in one controller round: whichever heartbeats first is elected (a timing
choice, ``ModelCluster._next_to_heartbeat``). Kafka's controller unfences a broker on its own
heartbeat (``ReplicationControlManager.replay``/``processBrokerHeartbeat`` -> ``handleBrokerUnfenced``),
and each builds a partition change for every leaderless partition (``generateLeaderAndIsrUpdates``
over ``partitionsWithNoLeader``), so the second broker is unfenced against the partition the first
left. Measured 2026-11-26 on the stale-ELR shape (ELR [0, 1, 2] fenced, leaderless, 1 and 2 healed
at once): 4.4.0 elected 1, 4.0.2 elected 2, one run each."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_backend import FencedBrokerReportedLeader, LastToHeartbeatFirst

from pytest_elr.actions import Action, Crash, Cut, Heal, Produce, Reassign
from pytest_elr.core.nodes import isolation_links
from pytest_elr.model.alternatives import MAX_STATES, Alternatives, outcomes
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.profiles import get_profile
from pytest_elr.model.timing import Timing
from pytest_elr.scenario.executor import RunResult, run_scenario
from pytest_elr.scenario.loader import load_scenario

BROKERS = (0, 1, 2)
#: the shape of scenarios/kafka_stale_elr_elected_after_regrow.elr.yaml before 1 was brought back alone
STALE_ELR: list[Action] = [
    Reassign(replicas=(0,)), Produce(count=3, acks="all"),
    Cut(links=isolation_links(1, "controller", BROKERS) + isolation_links(2, "controller", BROKERS)),
    Crash(broker=0), Reassign(replicas=(0, 1, 2)),
]

#: the same steps as a scenario with no written expectation at the heal: only the model judges it
STALE_ELR_SCENARIO = """
name: stale-elr-both-back
profiles: [kafka]
cluster: {brokers: 3}
topic: {name: t, replicas: [0, 1, 2], min_insync_replicas: 2}
steps:
  - at: shrink
    do: [{reassign: [0]}]
  - at: produce-rf1
    do: [{produce: 3}]
  - at: fence-stale
    do: [{isolate: {broker: 1, from: controller}}, {isolate: {broker: 2, from: controller}}]
  - at: crash-leader
    do: [{crash: 0}]
  - at: grow
    do: [{reassign: [0, 1, 2]}]
  - at: heal
    do: [{heal: all}]
verdict: {acked_loss: found}
"""


def _stale_elr() -> Alternatives:
    states = Alternatives([ModelCluster(BROKERS, list(BROKERS), 2, get_profile("kafka"))])
    for action in STALE_ELR:
        states.apply(action)
    [leaderless] = states.states
    assert (leaderless.part.leader, leaderless.part.isr, leaderless.part.elr) == (None, [], [0, 1, 2])
    assert leaderless.fenced == {0, 1, 2}
    return states


def test_both_stale_elr_members_healed_at_once_may_be_elected() -> None:
    states = _stale_elr()
    states.apply(Heal(links=None))
    # the canonical order (ids) first: what the model predicted before the choice, and 4.4.0's run
    assert [f"leader {s.part.leader}" for s in states.states] == ["leader 1", "leader 2"]
    # the second is unfenced against the partition the first left: it joins the ISR, not the lead
    for state in states.states:
        assert (state.part.isr, state.part.elr, state.fenced) == ([1, 2], [], {0})
    assert len(states.states) <= MAX_STATES


def test_one_broker_unfenced_gives_one_state() -> None:
    states = _stale_elr()
    states.apply(Heal(links=isolation_links(2, "controller", BROKERS)))
    assert [(s.part.leader, s.part.isr, s.part.elr) for s in states.states] == [(2, [2], [0, 1])]
    states.apply(Heal(links=None))  # then 1, with a leader: no election, no choice
    assert [(s.part.leader, s.part.isr) for s in states.states] == [(2, [1, 2])]


def test_without_the_choice_the_model_allows_only_the_ids_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The choice is what allows leader 2: with the controller hearing from the brokers in id order
    (the model before the choice) only leader 1 is allowed."""
    monkeypatch.setattr(ModelCluster, "_next_to_heartbeat", lambda self, pending: pending[0])
    states = _stale_elr()
    assert [s.part.leader for s, _ in outcomes(states.canonical, Heal(links=None))] == [1]


def _run(backend: object, tmp_path: Path) -> RunResult:
    path = tmp_path / "s.elr.yaml"
    path.write_text(STALE_ELR_SCENARIO)
    return run_scenario(load_scenario(path), backend, "kafka", tmp_path)  # type: ignore[arg-type]


def _leader_disagreements(result: RunResult) -> list[dict[str, object]]:
    return [d for d in result.disagreements if d["field"] == "leader"]


def test_a_system_electing_the_member_that_heartbeats_second_agrees(tmp_path: Path) -> None:
    result = _run(LastToHeartbeatFirst(), tmp_path)
    assert result.disagreements == [], result.disagreements
    events = (Path(result.history_dir) / "events.jsonl").read_text()
    assert '"type":"alternatives"' in events


def test_a_system_reporting_a_fenced_leader_differs(tmp_path: Path) -> None:
    result = _run(FencedBrokerReportedLeader(), tmp_path)
    assert not result.passed
    diff = _leader_disagreements(result)[0]
    assert (diff["step"], diff["model"], diff["observed"]) == ("heal", 1, 0), diff  # against the canonical state


def test_leader_2_differs_from_an_oracle_without_the_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test above fails without the choice: an oracle whose controller hears from the brokers in
    id order (the model before the choice) allows only leader 1. The fake keeps its own order."""
    with_choice = ModelCluster._next_to_heartbeat

    def ids_order_for_the_oracle(self: ModelCluster, pending: list[int]) -> int:
        return pending[0] if type(self.timing) is Timing else with_choice(self, pending)

    monkeypatch.setattr(ModelCluster, "_next_to_heartbeat", ids_order_for_the_oracle)
    result = _run(LastToHeartbeatFirst(), tmp_path)
    diff = _leader_disagreements(result)[0]
    assert (diff["step"], diff["model"], diff["observed"]) == ("heal", 1, 2), diff
