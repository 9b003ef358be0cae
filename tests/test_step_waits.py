"""How long a step waits. A step that a known failure of the release declares stops waiting once the
system rests in the declared wrong state (``Executor._poll``, ``Backend.rest_s``), and only then: a
difference the release does not declare, a state still moving, or a release the entry does not cover
is waited out to the settle timeout as before. A run that stops at its first failure (a mutant
campaign) does not wait for the expectations of a step that already failed. Time here is a virtual
clock: the waits are counted, not timed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from fake_backend import Clock, Fake

from pytest_elr.actions import Action, Crash, Restart
from pytest_elr.core.observation import Observation, Result
from pytest_elr.scenario import executor
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario

SETTLE_S = 30.0
REST_S = 2.0

SCENARIO = """
name: known-failure-rest
profiles: [kafka]
known_failures:
  - versions: "<4.3.0"
    because: "planted: the leader's crash elects nobody until it is back"
    step: leader-crashes
    fails: DECLARED
cluster: {brokers: 3}
topic: {name: t, replicas: [0, 1, 2], min_insync_replicas: 2}
steps:
  - at: committed
    do: [{produce: 5}]
    expect: {leader: 0}
  - at: leader-crashes
    do: [{crash: 0}]
    expect: {leader: 1}
  - at: leader-back
    do: [{restart: 0}]
    expect: {leader: 1}
verdict: {acked_loss: none}
"""



class NoElectionWhileLeaderDown(Fake):
    """A known bug planted: while broker 0 is down the partition shows no leader and an empty ISR
    (the model elects broker 1). ``flicker``: the wrong state also changes at every look (its ELR
    between empty and [2]), so it never rests."""

    settles_instantly: ClassVar[bool] = False

    def __init__(self, version: str, flicker: bool = False) -> None:
        super().__init__()
        self.kafka_version = version
        self.flicker = flicker
        self.down = False
        self.looks = 0

    def settle_timeout_s(self) -> float:
        return SETTLE_S

    def rest_s(self) -> float:
        return REST_S

    def apply(self, action: Action) -> Result:
        if isinstance(action, Crash) and action.broker == 0:
            self.down = True
        if isinstance(action, Restart) and action.broker == 0:
            self.down = False
        return super().apply(action)

    def observe(self) -> Observation:
        obs = super().observe()
        if not self.down:
            return obs
        self.looks += 1
        wrong = replace(obs, leader=None, isr=())
        return replace(wrong, isr=(2,)) if self.flicker and self.looks % 2 else wrong


def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, declared: str, version: str,
        flicker: bool = False, stop: bool = False) -> tuple[Any, float, str]:
    clock = Clock()
    monkeypatch.setattr(executor, "time", clock)
    path = tmp_path / "s.elr.yaml"
    path.write_text(SCENARIO.replace("DECLARED", declared))
    backend = NoElectionWhileLeaderDown(version, flicker)
    result = run_scenario(load_scenario(path), backend, "kafka", tmp_path / "h", stop_at_first_failure=stop)
    events = (Path(result.history_dir) / "events.jsonl").read_text()
    return result, clock.now, events


def test_a_declared_failure_is_taken_once_the_system_rests_in_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result, waited, events = run(tmp_path, monkeypatch, "[leader, isr, caught_up]", "4.0.2")
    assert not result.passed and result.known_failure, result.message
    assert "known_failure_rested" in events
    # the settle after the crash and the expectation: each about REST_S, not the timeouts
    assert waited < 4 * REST_S + 2, waited


def test_a_release_the_entry_does_not_cover_waits_out_the_settle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result, waited, events = run(tmp_path, monkeypatch, "[leader, isr, caught_up]", "4.4.0")
    assert not result.passed and not result.known_failure
    assert "known_failure_rested" not in events
    assert waited >= SETTLE_S + executor.DEFAULT_STEP_TIMEOUT_S


def test_a_difference_the_release_does_not_declare_is_waited_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry declares the leader only; the empty ISR is another failure: no early end, and the
    run is not the known failure."""
    result, waited, events = run(tmp_path, monkeypatch, "[leader, caught_up]", "4.0.2")
    assert "known_failure_rested" not in events
    assert waited >= SETTLE_S
    assert not result.passed
    assert ("leader-crashes", "isr") in {(f.step, f.what) for f in result.failures}


def test_a_declared_state_that_keeps_moving_is_waited_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result, waited, events = run(tmp_path, monkeypatch, "[leader, isr, caught_up]", "4.0.2", flicker=True)
    assert "known_failure_rested" not in events
    assert waited >= SETTLE_S + executor.DEFAULT_STEP_TIMEOUT_S
    assert not result.passed


def test_a_run_that_stops_at_its_first_failure_does_not_wait_for_a_failed_steps_expectations(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """4.4.0 declares nothing: the settle after the crash waits its timeout (a difference must
    persist to count), then the expectation is looked at once and the run ends there."""
    result, waited, _ = run(tmp_path, monkeypatch, "[leader, isr, caught_up]", "4.4.0", stop=True)
    assert not result.passed and "stopped at its first failure" in result.message
    assert SETTLE_S <= waited < SETTLE_S + 2
    assert ("leader-crashes", "leader") in {(f.step, f.what) for f in result.failures}


def test_a_stopping_run_still_waits_where_the_failure_is_its_releases_known_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On 4.0.2 the differences are declared: the run goes on past them (to the steps after), so
    its expectations are awaited (here: until the declared state rests)."""
    result, waited, events = run(tmp_path, monkeypatch, "[leader, isr, caught_up]", "4.0.2", stop=True)
    assert result.known_failure and "stopped at its first failure" not in result.message
    assert "known_failure_rested" in events and '"step":"leader-back"' in events
