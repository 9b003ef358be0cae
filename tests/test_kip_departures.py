"""A run that passes by one of the ``kafka`` profile's documented differences from KIP-966 says so:
in its result, its history, the verdict table and the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_elr.backends.model import ModelBackend
from pytest_elr.model.controller import ControllerContext, change_cluster_min_isr, change_min_isr
from pytest_elr.model.profiles import get_profile
from pytest_elr.model.state import PartitionRecord
from pytest_elr.report import build_report
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _ctx(profile: str, isr_size_ok: bool) -> tuple[PartitionRecord, ControllerContext]:
    part = PartitionRecord(replicas=[0, 1, 2], leader=0, isr=[0, 1] if isr_size_ok else [0], elr=[2])
    ctx = ControllerContext(profile=get_profile(profile), min_isr=2, is_unfenced=lambda b: True,
                            broker_epoch=lambda b: 1, log_info=lambda part, b: (0, 0))
    return part, ctx


@pytest.mark.parametrize(("profile", "isr_meets_new_min", "departs"), [
    ("kafka", False, True),   # Kafka clears the ELR although the ISR is under the new min ISR
    ("kafka", True, False),   # the KIP clears it too ("if the new min ISR <= current ISR")
    ("kip966", False, False),
])
def test_a_min_isr_change_departs_only_where_the_kip_keeps_the_elr(profile: str, isr_meets_new_min: bool,
                                                                  departs: bool) -> None:
    part, ctx = _ctx(profile, isr_meets_new_min)
    change_min_isr(part, 2 if isr_meets_new_min else 3, ctx)
    assert ("change_min_isr" in ctx.departures) is departs
    assert not part.elr or not departs


@pytest.mark.parametrize(("profile", "departs"), [("kafka", True), ("kip966", False), ("legacy", False)])
def test_a_cluster_min_isr_update_departs_on_kafka_only(profile: str, departs: bool) -> None:
    """The topic's own min ISR overrides the cluster-wide one: the KIP keeps the ELR."""
    part, ctx = _ctx(profile, isr_size_ok=False)
    change_cluster_min_isr(part, 2, ctx)
    assert ("change_cluster_min_isr" in ctx.departures) is departs
    assert part.elr == ([] if departs else [2])


def test_the_cluster_level_scenario_says_kafka_departs_on_kafka_only() -> None:
    scenario = load_scenario(SCENARIOS / "min_isr_change_cluster_level.elr.yaml")
    kafka = run_scenario(scenario, ModelBackend(), "kafka")
    assert kafka.passed, kafka.message
    assert "change_cluster_min_isr" in [d["rule"] for d in kafka.departures]
    kip = run_scenario(scenario, ModelBackend(), "kip966")
    assert kip.passed, kip.message
    assert "change_cluster_min_isr" not in [d["rule"] for d in kip.departures]


def test_a_departure_is_named_in_the_result_history_and_report(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "min_isr_change_same_value.elr.yaml")
    result = run_scenario(scenario, ModelBackend(), "kafka", tmp_path)
    assert result.passed, result.message
    rules = [d["rule"] for d in result.departures]
    assert "change_min_isr" in rules and len(rules) == len(set(rules))
    assert result.history_dir is not None
    assert '"type":"kip_departure"' in (result.history_dir / "events.jsonl").read_text()
    page = build_report([result.history_dir], tmp_path / "r.html").read_text()
    assert "Kafka departs from the KIP: min ISR change clears ELR" in page
    # The full KIP's profile relies on no difference from the KIP.
    assert not run_scenario(scenario, ModelBackend(), "kip966").departures


def test_the_verdict_table_says_kafka_departs(pytester: pytest.Pytester) -> None:
    pytester.makefile(".elr.yaml", s=(SCENARIOS / "min_isr_change_same_value.elr.yaml").read_text())
    result = pytester.runpytest_subprocess("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly")
    result.stdout.fnmatch_lines(["*min-isr-change-same-value*kafka*PASS · Kafka departs: *min ISR change clears ELR*"])
