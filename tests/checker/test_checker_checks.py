"""Each anomaly kind in a hand-built history, found exactly and nothing else.

All histories are checked in one Spark pass (module fixture): that is also how the CLI
checks many runs, and it keeps the tests fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_elr.checker import CHECKERS, Verdict
from pytest_elr.checker.checks import CHECKS
from pytest_elr.checker.job import Findings, check_runs
from pytest_elr.checker.synth import SyntheticHistory, clean_history, meta, write_history
from pytest_elr.core.history import History


def _sends(h: SyntheticHistory, n: int = 5) -> SyntheticHistory:
    for i in range(n):
        h.send(i, i)
    return h


def _reads(h: SyntheticHistory, offsets: list[int], reader: str = "drain") -> SyntheticHistory:
    for o in offsets:
        h.read(o, f"v{o}", reader=reader)
    return h


def _cases() -> dict[str, SyntheticHistory]:
    cases: dict[str, SyntheticHistory] = {"clean": clean_history()}
    cases["lost"] = _reads(_sends(SyntheticHistory()), [0, 1, 3, 4])
    cases["unseen"] = _reads(_sends(SyntheticHistory()), [0, 1, 2])
    cases["duplicate"] = _reads(_sends(SyntheticHistory()), [0, 1, 2, 3, 4]).read(5, "v1")
    h = _reads(_sends(SyntheticHistory()), [0, 1, 2, 3, 4], reader="a")
    cases["inconsistent_reads"] = h.read(2, "x", reader="b")
    h = _sends(SyntheticHistory()).send(9, None, op="info", value="x")
    h.read(0, "v0").read(1, "v1").read(2, "x").read(3, "v3").read(4, "v4").read(5, "v2")
    cases["inconsistent_ack"] = h
    h = _reads(_sends(SyntheticHistory()), [0, 1, 2, 1], reader="tail")
    cases["reorder"] = _reads(h, [0, 1, 2, 3, 4])
    cases["hwm_observe"] = clean_history().observe(1, [1, 2, 3], 5).observe(1, [1, 2, 3], 3)
    h = clean_history().add("hwm_read", partition=0, hwm=4, reader="c")
    cases["hwm_read"] = h.add("hwm_read", partition=0, hwm=2, reader="c")
    h = _sends(SyntheticHistory(), 3).send(3, 3, acks="1").send(4, None, acks="0")
    cases["acks1"] = _reads(h, [0, 1, 2])
    # definite failures and indeterminate sends never read are no anomaly
    h = _sends(SyntheticHistory(), 3).send(3, None, op="fail").send(4, None, op="info")
    cases["failed_sends"] = _reads(h, [0, 1, 2])
    return cases


# case -> expected counts (kinds not named: 0)
EXPECTED: dict[str, dict[str, int]] = {
    "clean": {},
    "lost": {"lost": 1},
    "unseen": {"unseen": 2},
    "duplicate": {"duplicate": 1},
    "inconsistent_reads": {"inconsistent_offset": 1},
    "inconsistent_ack": {"inconsistent_offset": 1},
    "reorder": {"reorder": 1},
    "hwm_observe": {"hwm_regression": 1},
    "hwm_read": {"hwm_regression": 1},
    "acks1": {"acks1_uncommitted": 2},
    "failed_sends": {},
}


@pytest.fixture(scope="module")
def findings(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Findings]:
    root = tmp_path_factory.mktemp("histories")
    names = list(_cases())
    paths = [
        write_history(root / name, meta(run_id=name, scenario=name), h.events)
        for name, h in _cases().items()
    ]
    return dict(zip(names, check_runs(paths, spark=spark), strict=True))


@pytest.mark.parametrize("case", list(EXPECTED))
def test_finds_exactly_the_anomaly(findings: dict[str, Findings], case: str) -> None:
    v = findings[case]
    counts = {k: a.count for k, a in v.anomalies.items()}
    assert counts == {k: EXPECTED[case].get(k, 0) for k in CHECKS}
    assert v.run_id == case and v.scenario == case and v.malformed == []
    invalid = set(EXPECTED[case]) - {"acks1_uncommitted"}
    assert v.valid is (not invalid)
    for a in v.anomalies.values():
        assert len(a.examples) == a.count


def test_clean_findings(findings: dict[str, Findings]) -> None:
    v = findings["clean"]
    assert (v.acked, v.read, v.lost_count, v.valid) == (5, 5, 0, True)
    d = v.to_dict()
    assert set(d) >= {"run_id", "scenario", "profile", "backend", "acked", "read", "anomalies",
                      "lost_count", "valid", "malformed"}
    assert d["anomalies"]["lost"] == {"count": 0, "examples": []}


def test_lost_example(findings: dict[str, Findings]) -> None:
    v = findings["lost"]
    (ex,) = v.anomalies["lost"].examples
    assert (ex["value"], ex["offset"], ex["id"], ex["max_read"]) == ("v2", 2, 2, 4)
    assert v.lost_count == 1 and v.read == 4


def test_unseen_examples(findings: dict[str, Findings]) -> None:
    ex = findings["unseen"].anomalies["unseen"].examples
    assert [(e["value"], e["offset"]) for e in ex] == [("v3", 3), ("v4", 4)]
    assert findings["unseen"].lost_count == 2


def test_duplicate_example(findings: dict[str, Findings]) -> None:
    (ex,) = findings["duplicate"].anomalies["duplicate"].examples
    assert ex["value"] == "v1" and ex["id"] == 1
    assert ex["places"] == [{"partition": 0, "offset": 1}, {"partition": 0, "offset": 5}]
    assert ex["reads"] == 2


def test_inconsistent_examples(findings: dict[str, Findings]) -> None:
    (ex,) = findings["inconsistent_reads"].anomalies["inconsistent_offset"].examples
    assert (ex["offset"], ex["values"], ex["acked_values"]) == (2, ["v2", "x"], ["v2"])
    (ex,) = findings["inconsistent_ack"].anomalies["inconsistent_offset"].examples
    assert (ex["offset"], ex["values"], ex["ids"]) == (2, ["v2", "x"], [2])


def test_reorder_example(findings: dict[str, Findings]) -> None:
    (ex,) = findings["reorder"].anomalies["reorder"].examples
    assert (ex["reader"], ex["offset"], ex["prev_offset"]) == ("tail", 1, 2)
    assert ex["line"] == 10 + 4  # 10 produce lines, then the tail's 4th read


def test_hwm_examples(findings: dict[str, Findings]) -> None:
    (ex,) = findings["hwm_observe"].anomalies["hwm_regression"].examples
    assert (ex["source"], ex["prev_hwm"], ex["hwm"]) == ("observe", 5, 3)
    (ex,) = findings["hwm_read"].anomalies["hwm_regression"].examples
    assert (ex["source"], ex["prev_hwm"], ex["hwm"], ex["partition"]) == ("reader c", 4, 2, 0)


def test_acks1_is_accounted_not_invalid(findings: dict[str, Findings]) -> None:
    v = findings["acks1"]
    assert (v.acked, v.acked_weak, v.valid) == (3, 2, True)
    assert [e["value"] for e in v.anomalies["acks1_uncommitted"].examples] == ["v3", "v4"]


def test_check_run_single(spark: Any, tmp_path: Path) -> None:
    from pytest_elr.checker.job import check_run

    path = write_history(tmp_path / "r", meta(), _reads(_sends(SyntheticHistory()), [0, 1, 3, 4]).events)
    v = check_run(path, spark=spark, examples=0)
    assert v.anomalies["lost"].count == 1 and v.anomalies["lost"].examples == []


def test_findings_give_the_verdict(findings: dict[str, Findings]) -> None:
    v = findings["unseen"].verdict()
    assert (v.checker, v.acked, v.read, v.lost_count, v.lost) == ("spark", 5, 3, 2, [("v3", 3), ("v4", 4)])
    assert v.anomalies == {k: EXPECTED["unseen"].get(k, 0) for k in CHECKS}
    assert v.fatal == {"unseen": 2}


def test_a_checker_saves_its_verdict_beside_the_history(spark: Any, tmp_path: Path) -> None:
    history = History.create(tmp_path, scenario="saved", profile="kafka")
    for e in _reads(_sends(SyntheticHistory()), [0, 1, 3, 4]).events:
        assert isinstance(e, dict)
        history.record(e["type"], **{k: v for k, v in e.items() if k not in ("t", "type", "step")})
    history.end_events()
    assert history.directory is not None and Verdict.load(history.directory) is None
    for name, checker in CHECKERS.items():
        verdict = checker(history)
        assert verdict.checker == name and verdict.lost_count == 1 and verdict.lost == [("v2", 2)]
        assert Verdict.load(history.directory) == verdict


@pytest.mark.parametrize("case", list(_cases()))
def test_the_inline_checker_gives_the_spark_verdict(findings: dict[str, Findings], case: str) -> None:
    """The twin the session's confirmation relies on: on every history of these cases the inline checker
    (Python) and the Spark job give the same verdict -- counts of every kind, records named, in order."""
    from pytest_elr.checker import check_history
    from pytest_elr.checker.confirm import differences

    events = [e for e in _cases()[case].events if isinstance(e, dict)]
    inline, spark = check_history(events), findings[case].verdict()
    assert differences(inline, spark) == []
    assert (inline.acked, inline.read, inline.lost_count, inline.lost, inline.anomalies) == (
        spark.acked, spark.read, spark.lost_count, spark.lost, spark.anomalies)
