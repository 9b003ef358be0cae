"""Rollup across runs, the command line, and the synthetic generator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_elr.checker.__main__ import main
from pytest_elr.checker.rollup import rollup_runs
from pytest_elr.checker.synth import SyntheticHistory, clean_history, generate, meta, write_history


def _faulty(lose: bool) -> SyntheticHistory:
    """Leader 1 is powered off at t=10; leaderless at 10.5, broker 2 leads from 12 with ISR [2]
    until ISR [2, 3] at 15; the run ends at 20."""
    h = SyntheticHistory().observe(1, [1, 2, 3], 0)  # t=0.1
    for i in range(3):
        h.send(i, i)
    h.at(9.9).fault("power_off", broker=1)  # t=10
    h.add("loss_evidence", broker=1, leo_before=3, leo_after=1, records_lost=2, after="power_off")
    h.add("loss_evidence", broker=1, leo_before=3, leo_after=1, records_lost=2, after="restart")  # the same cut
    h.at(10.4).observe(None, [2, 3], 3)  # 10.5
    h.at(11.9).observe(2, [2], 3)  # 12: new leader 2.0 s after the fault
    h.at(14.9).observe(2, [2, 3], 3)  # 15: ISR back to 2 after 3 s under min ISR 2
    h.at(15.9).fault("pause", broker=3)  # 16: a follower's fault: no leader change
    h.at(16.9).observe(2, [2, 3], 3)  # 17
    h.at(17.9)
    for o in (0, 2) if lose else (0, 1, 2):
        h.read(o, f"v{o}")
    return h.at(19.9).add("step", phase="end")  # 20


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("runs")
    m = {"scenario": "s1", "backend": "model", "profile": "kip966", "kafka_version": None}
    return [
        write_history(root / "a", meta(run_id="a", **m), _faulty(lose=False).events),
        write_history(root / "b", meta(run_id="b", **m), _faulty(lose=True).events),
        write_history(root / "c", meta(run_id="c", **{**m, "backend": "kafka",
                                                      "kafka_version": "4.1.0"}),
                      clean_history().events),
    ]  # fmt: skip


def test_rollup(spark: Any, runs: list[str]) -> None:
    findings, rows = rollup_runs(runs, spark=spark)
    assert [v.valid for v in findings] == [True, False, True]
    kafka, model = rows  # sorted by (scenario, backend, ...)
    assert (model.scenario, model.backend, model.runs, model.passes) == ("s1", "model", 2, 1)
    assert model.anomalies["lost"] == 1 and model.runs_with["lost"] == 1
    assert sum(model.anomalies.values()) == 1
    assert model.under_min_isr_s == pytest.approx(2 * 3.0)
    assert (model.faults, model.leader_changes) == (4, 2)
    assert model.time_to_leader_mean_s == pytest.approx(2.0)
    assert model.time_to_leader_max_s == pytest.approx(2.0)
    assert (kafka.backend, kafka.kafka_version) == ("kafka", "4.1.0")
    assert (kafka.runs, kafka.passes) == (1, 1)
    assert kafka.faults == 0 and kafka.time_to_leader_mean_s is None
    assert kafka.under_min_isr_s == 0.0  # min ISR known, nothing observed under it
    # one run of two lost records: 50 %, with the 95 % Wilson interval of 1 in 2
    assert (model.runs_with_loss, model.loss_rate) == (1, 0.5)
    assert (round(model.loss_rate_low, 4), round(model.loss_rate_high, 4)) == (0.0945, 0.9055)
    assert (kafka.runs_with_loss, kafka.loss_rate_high) == (0, pytest.approx(0.7935, abs=1e-4))
    # leaderless from 10.5 to 12 in each run: one window of 1.5 s per run
    assert (model.unavailable_windows, model.unavailable_s, model.unavailable_max_s) == (2, pytest.approx(3.0),
                                                                                         pytest.approx(1.5))
    # each cut took 2 records (its restart's evidence is the same loss, not counted twice)
    assert (model.lossy_faults, model.records_at_stake, model.records_at_stake_max) == (2, 4, 2)
    assert model.records_at_stake_mean == 2.0 and kafka.lossy_faults == 0


def test_cli(spark: Any, runs: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
             ) -> None:  # fmt: skip
    out = tmp_path / "out.json"
    # the parent directory is searched for runs
    assert main([str(Path(runs[0]).parent), "--rollup", "--json", str(out), "--no-progress"]) == 1
    doc = json.loads(out.read_text())
    assert [v["run_id"] for v in doc["findings"]] == ["a", "b", "c"]
    assert doc["findings"][1]["anomalies"]["lost"]["count"] == 1
    assert len(doc["rollup"]) == 2
    printed = capsys.readouterr().out
    assert "INVALID" in printed and "lost: 1" in printed and "rollup" in printed
    assert main([runs[0], runs[2], "--no-progress"]) == 0
    assert main([str(tmp_path / "nowhere"), "--no-progress"]) == 2


def test_synthetic_history(spark: Any, tmp_path: Path) -> None:
    from pytest_elr.checker.job import check_run

    info = generate(str(tmp_path / "syn"), 2000, lose=5, partitions=2, tasks=2)
    assert info["lost"] == 5
    v = check_run(str(tmp_path / "syn"), spark=spark)
    assert {k: a.count for k, a in v.anomalies.items() if a.count} == {"lost": 5}
    assert (v.acked, v.read, v.malformed_count) == (2000, 1995, 0)
    assert all(e["offset"] < e["max_read"] for e in v.anomalies["lost"].examples)


def test_cli_judges_a_negative_control_as_pytest_does(spark: Any, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A run whose scenario expects loss (legacy loses the last replica's records) passes under
    pytest; ``elr check`` says so too, not INVALID. The same history declared ``none`` is INVALID,
    and a negative control that lost nothing is INVALID for that reason."""
    from pytest_elr.backends.model import ModelBackend
    from pytest_elr.scenario.executor import run_scenario
    from pytest_elr.scenario.loader import load_scenario

    scenario = load_scenario(Path(__file__).parents[2] / "scenarios" / "kip966_last_replica_standing.elr.yaml")
    result = run_scenario(scenario, ModelBackend(), "legacy", history_root=tmp_path / "runs")
    assert result.passed and result.history_dir is not None and result.expected_loss == "found"
    run = str(result.history_dir)
    assert main([run, "--no-progress"]) == 0
    assert "loss as expected" in capsys.readouterr().out

    meta_file = Path(run) / "meta.json"
    declared = json.loads(meta_file.read_text())
    meta_file.write_text(json.dumps({**declared, "expected_loss": "none"}))
    assert main([run, "--no-progress"]) == 1
    assert "INVALID" in capsys.readouterr().out

    kept = run_scenario(scenario, ModelBackend(), "kip966", history_root=tmp_path / "kept")
    assert kept.history_dir is not None
    kept_meta = Path(kept.history_dir) / "meta.json"
    kept_meta.write_text(json.dumps({**json.loads(kept_meta.read_text()), "expected_loss": "found"}))
    assert main([str(kept.history_dir), "--no-progress"]) == 1
    assert "INVALID: no loss" in capsys.readouterr().out
