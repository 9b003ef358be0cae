"""The AlterPartition refusals of each step, the system's beside the model's, are recorded where they
differ (a measurement before a check: ``Executor._record_refusals``)."""

from __future__ import annotations

import json
from pathlib import Path

from fake_backend import SILENT, Fake

from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import parse_scenario


class RefusesOnce(Fake):
    """A controller that refused one AlterPartition the model's leader never sent."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def protocol_errors(self) -> list[str]:
        self.calls += 1
        return ["INELIGIBLE_REPLICA"] if self.calls == 2 else []


def _refusals(root: Path) -> list[dict[str, object]]:
    (path,) = root.rglob("events.jsonl")
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["type"] == "refusals"]


def test_a_refusal_the_model_did_not_make_is_recorded_at_its_step(tmp_path: Path) -> None:
    result = run_scenario(parse_scenario(SILENT, "s.elr.yaml"), RefusesOnce(), "kafka", tmp_path)
    assert result.passed, result.message
    (event,) = _refusals(tmp_path)
    assert (event["step"], event["system"], event["model"]) == ("follower-cut", ["INELIGIBLE_REPLICA"], [])


def test_the_same_refusals_on_both_sides_record_nothing(tmp_path: Path) -> None:
    assert run_scenario(parse_scenario(SILENT, "s.elr.yaml"), Fake(), "kafka", tmp_path).passed
    assert _refusals(tmp_path) == []
