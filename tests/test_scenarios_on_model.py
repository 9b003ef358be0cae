"""Every scenario of the suite on the reference model, every profile it declares.

The main job runs the suite on real Kafka; this keeps the oracle's own answer to each scenario
checked in milliseconds (a model change that breaks a KIP timeline fails here first).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_elr.backends.model import ModelBackend
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario

#: the scenarios the model can stage (``backends: {only: [kafka]}`` shows a finding about Kafka)
#: each file parsed once at collection (every process that collects pays it: the xdist controller
#: and each worker)
_LOADED = {p: load_scenario(p) for p in sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.elr.yaml"))}
SCENARIOS = [p for p, scenario in _LOADED.items() if scenario.runs_on("model")]
RUNS = [(path, profile) for path in SCENARIOS for profile in _LOADED[path].profiles]


@pytest.mark.parametrize(("path", "profile"), RUNS, ids=[f"{p.name.split('.')[0]}-{pr}" for p, pr in RUNS])
def test_scenario_passes_on_the_model(path: Path, profile: str) -> None:
    result = run_scenario(load_scenario(path), ModelBackend(), profile)
    assert result.passed, result.message
    if result.expected_loss == "found":
        assert result.verdict is not None and result.verdict.lost_count > 0


def test_every_scenario_declares_profiles_the_model_runs() -> None:
    assert len(RUNS) >= 2 * len(SCENARIOS)
