"""The run starts from the first observation that agrees with the model's start (``executor.
_start_mismatches``): a follower churning out of a new topic's ISR and back before any fault is no
difference of the first fault's (found by the five-pass soak, 2026-11-27: outage_2018 [legacy]
failed ``partition_epoch`` on a partition no fault touched, mid-churn at the first observation)."""

from __future__ import annotations

from pathlib import Path

from fake_backend import Fake, FollowerChurnsAtStart

from pytest_elr.scenario import executor
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario

SCENARIO = """name: churn-at-start
cluster: {brokers: 3}
topic: {name: t, replicas: [0, 1, 2], min_insync_replicas: 2}
steps:
  - at: committed
    do: [{produce: 3}]
    expect: {leader: 0, isr: [0, 1, 2], produce: {acked: 3}}
  - at: flushed
    do: [{flush: 1}]
    expect: {leader: 0, isr: [0, 1, 2]}
verdict: {acked_loss: none}
"""


def scenario(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "churn.elr.yaml"
    path.write_text(SCENARIO)
    return load_scenario(path)


def test_a_start_churn_is_waited_out_and_the_epochs_marked_after_it(tmp_path: Path) -> None:
    system = FollowerChurnsAtStart()
    result = run_scenario(scenario(tmp_path), system, "kafka", tmp_path / "h")
    assert result.passed and not result.disagreements, result.message
    assert system.observed > 3  # it was observed until it agreed


def test_marked_at_the_first_observation_the_churn_fails_the_first_fault(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The planted fault: the start taken as it is first seen (the executor before the fix)."""
    monkeypatch.setattr(executor, "_start_mismatches", lambda obs, model: [])
    result = run_scenario(scenario(tmp_path), FollowerChurnsAtStart(), "kafka", tmp_path / "h")
    assert not result.passed
    assert "partition_epoch: model unchanged, observed moved" in result.message, result.message


def test_a_system_that_agrees_at_once_is_observed_once_at_the_start(tmp_path: Path) -> None:
    result = run_scenario(scenario(tmp_path), Fake(), "kafka", tmp_path / "h")
    assert result.passed, result.message
