"""The columnar copy (events.parquet): written only for a history it can hold line for line, read
by the checker only while fresh, and giving exactly the findings the JSON Lines give."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_elr.checker.job import check_run
from pytest_elr.checker.load import load_runs
from pytest_elr.checker.schema import EVENT_SCHEMA
from pytest_elr.checker.synth import SyntheticHistory, clean_history, every_event_type, meta, write_history
from pytest_elr.core import columnar
from pytest_elr.core.history import EVENTS_FILE, History

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _anomalies() -> SyntheticHistory:
    """Every kind of anomaly, on two partitions: lost, unseen, duplicate, inconsistent offset,
    reorder, an HWM regression and an acks=1 record never read."""
    h = SyntheticHistory().add("step", step="T0", phase="begin").observe(1, [1, 2, 3], 0)
    for i in range(6):
        h.send(i, i // 2, partition=i % 2)
    h.send(6, 3, acks="1").send(7, None).observe(1, [1, 2], 3).observe(1, [1], 2)
    h.fault("power_off", brokers=[1]).add("loss_evidence", broker=1, leo_before=4, leo_after=1, records_lost=3)
    h.read(0, "v0").read(2, "v2", partition=0).read(1, "v2").read(1, "v9", partition=1)
    h.read(0, "v1", partition=1).read(0, "v0").read(2, "v4")
    return h


def _run(tmp_path: Path, name: str, history: SyntheticHistory) -> str:
    return write_history(tmp_path / name, meta(run_id=name), history.events)


def _events(path: str | Path) -> str:
    return os.path.join(path, EVENTS_FILE)


def _same(spark: SparkSession, path: str) -> None:
    text = check_run(path, spark=spark)
    assert columnar.write(_events(path), min_bytes=0) and columnar.fresh(_events(path))
    with load_runs(spark, [path], columnar=False) as loaded:
        text_lines = sorted(tuple(r) for r in loaded.events.select("line", "type", "value").collect())
    with load_runs(spark, [path]) as loaded:
        assert loaded.cached == []  # nothing cached, nothing parsed: it came from the copy
        copy_lines = sorted(tuple(r) for r in loaded.events.select("line", "type", "value").collect())
    assert copy_lines == text_lines
    assert check_run(path, spark=spark).to_dict() == text.to_dict()


@pytest.mark.parametrize("history", [clean_history, every_event_type, _anomalies])
def test_the_copy_gives_the_findings_of_the_text(spark: SparkSession, tmp_path: Path, history) -> None:
    _same(spark, _run(tmp_path, "run", history()))


def test_the_anomaly_history_has_every_anomaly(spark: SparkSession, tmp_path: Path) -> None:
    # so that the equality above compares examples of every kind, line numbers included
    v = check_run(_run(tmp_path, "run", _anomalies()), spark=spark)
    assert {k for k, a in v.anomalies.items() if a.count} == set(v.anomalies), v.to_dict()["anomalies"]


@pytest.mark.parametrize(
    "bad_line",
    ["", "   ", '{"t":1.0,"type":"consume"', "[1,2]", '{"t":1.0,"type":"consume","offset":"3"}',
     '{"t":1.0,"type":"observe","isr":["a"]}', '{"t":1.0,"type":"produce","value":7}'],
    ids=["blank", "spaces", "truncated", "array", "offset-as-text", "isr-of-text", "number-as-value"],
)
def test_no_copy_for_a_history_it_cannot_hold_line_for_line(tmp_path: Path, bad_line: str) -> None:
    h = clean_history(3)
    h.events.insert(2, bad_line + "\n")
    path = _run(tmp_path, "run", h)
    (Path(path) / columnar.COLUMNAR_FILE).write_bytes(b"an old copy")
    assert not columnar.write(_events(path), min_bytes=0)
    assert not (Path(path) / columnar.COLUMNAR_FILE).exists()  # nor a stale one left behind


def test_small_histories_get_no_copy(tmp_path: Path) -> None:
    path = _run(tmp_path, "run", clean_history(3))
    assert not columnar.write(_events(path)) and not columnar.fresh(_events(path))


def test_a_copy_older_than_the_events_is_not_read(spark: SparkSession, tmp_path: Path) -> None:
    path = _run(tmp_path, "run", clean_history(3))
    assert columnar.write(_events(path), min_bytes=0)
    later = time.time() + 5
    with open(os.path.join(path, EVENTS_FILE), "a", encoding="utf-8") as f:
        f.write('{"t":9.0,"type":"consume","step":"T9","partition":0,"offset":0,"value":"v0","reader":"again"}\n')
    os.utime(os.path.join(path, EVENTS_FILE), (later, later))
    assert not columnar.fresh(_events(path))
    assert check_run(path, spark=spark).read == 4  # the line appended counts: the text was read


def test_a_row_spark_calls_malformed_is_reported_from_the_text(spark: SparkSession, tmp_path: Path) -> None:
    h = clean_history(3)
    h.events.insert(3, {"t": 0.25, "type": "bogus", "step": "T1"})
    h.events.insert(5, {"t": 0.26, "type": "consume", "step": "T1", "partition": 0, "offset": 1, "value": "v1"})
    path = _run(tmp_path, "run", h)
    assert columnar.write(_events(path), min_bytes=0)  # well-typed: the copy holds it, Spark judges it
    v = check_run(path, spark=spark)
    assert [(m["line"], m["error"]) for m in v.malformed] == [
        (4, "unknown event type bogus"), (6, "consume event without field 'reader'")]
    assert v.malformed[0]["text"].startswith('{"t":0.25,"type":"bogus"')
    assert (v.acked, v.read, v.lost_count) == (3, 3, 0)


def test_the_copy_types_every_field_as_the_spark_schema_does() -> None:
    spark_types = {f.name: f.dataType.simpleString() for f in EVENT_SCHEMA.fields}
    names = {"long": "bigint", "double": "double", "string": "string", "longs": "array<bigint>"}
    assert {n: names[k] for n, k in columnar.FIELDS} == {
        n: t for n, t in spark_types.items() if n not in ("args", "leo", "_corrupt")}


def test_a_large_history_gets_its_copy_when_it_closes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columnar, "MIN_BYTES", 100)
    history = History.create(tmp_path, scenario="s", profile="kafka")
    history.record("step", phase="begin")
    history.close("passed")
    columnar.wait()  # the copy is made in the background (tests/test_history_format.py)
    assert history.directory is not None and not columnar.fresh(_events(history.directory))  # 60 bytes
    history = History.create(tmp_path, scenario="s", profile="kafka")
    for i in range(5):
        history.record("produce", op="ok", id=i, value=f"v{i}", acks="all", partition=0, offset=i)
    history.close("passed")
    columnar.wait()
    assert history.directory is not None and columnar.fresh(_events(history.directory))


def test_reading_runs_waits_for_the_copies_being_made(spark: SparkSession, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's copy is made in the background when its history closes (``columnar.write_later``):
    reading runs in the same process waits for such copies first, so a large run just closed is read
    from its copy (that ``columnar.wait`` waits: tests/test_history_format.py)."""
    path = _run(tmp_path, "run", _anomalies())
    waited: list[bool] = []
    monkeypatch.setattr("pytest_elr.checker.load.wait_for_copies", lambda: waited.append(True))
    with load_runs(spark, [path]) as loaded:
        assert waited == [True] and loaded.lines[0] > 0
