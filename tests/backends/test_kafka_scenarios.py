"""KIP scenarios on real Kafka: the same YAML, the kafka backend, the verdict.

Real cluster: without Docker or the images these fail with the error naming the fix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_elr.backends.kafka import KafkaBackend, close_pool
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario
from pytest_elr.scenario.verdict import spark_checker

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

# Every scenario except the two that hold a leader's AlterPartition on its way to the controller
# (KIP-903's race, the HWM-waits-for-committed-ISR example): a latency long enough to hold it
# also fences the broker with the tuned session timeout, so they run on the model only for now.
ON_KAFKA = [
    ("kip966_last_replica_standing.elr.yaml", "kafka"),
    ("kip966_last_replica_standing.elr.yaml", "legacy"),  # the negative control: loss found
    ("kip966_t0_t7_walkthrough.elr.yaml", "kafka"),
    ("design_clean_elr_recovery.elr.yaml", "kafka"),
    ("design_clean_elr_recovery.elr.yaml", "legacy"),
    ("design_balanced_unclean_recovery.elr.yaml", "kafka"),  # Kafka elects the lossy last leader
    ("kip966_acks_comparison.elr.yaml", "kafka"),
    ("kip966_acks_comparison.elr.yaml", "legacy"),
    ("kip966_effective_min_isr.elr.yaml", "kafka"),
]


@pytest.fixture(scope="module", autouse=True)
def _clusters():
    yield
    close_pool()


@pytest.mark.elr_real_cluster
@pytest.mark.parametrize(("file", "profile"), ON_KAFKA, ids=[f"{f.split('.')[0]}-{p}" for f, p in ON_KAFKA])
def test_scenario_on_real_kafka(file: str, profile: str, tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / file)
    result = run_scenario(scenario, KafkaBackend(), profile, tmp_path, spark_checker)
    assert result.passed, result.message
    assert result.verdict is not None and result.verdict.checker == "spark"
    events = (next(tmp_path.iterdir()) / "events.jsonl").read_text()
    assert '"type":"observe"' in events
