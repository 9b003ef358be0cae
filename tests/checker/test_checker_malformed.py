"""Broken history files: each bad line is reported with file and line, the rest analysed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_elr.checker import load
from pytest_elr.checker.job import check_run, check_runs
from pytest_elr.checker.load import HistoryError
from pytest_elr.checker.synth import SyntheticHistory, every_event_type, meta, write_history
from pytest_elr.core.history import EVENT_TYPES


@pytest.fixture(params=["whole", "lines"])
def reading(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a history's text is read: as one string per file, split by Spark (small local
    histories), or line by line with line numbers rebuilt from the file's splits (large ones, URIs)."""
    if request.param == "lines":
        monkeypatch.setattr(load, "WHOLE_MAX", 0)
    return str(request.param)


def _broken() -> SyntheticHistory:
    h = SyntheticHistory().add("step", step="T0", phase="begin")  # line 1
    for i in range(5):  # lines 2-11
        h.send(i, i)
    h.raw("this is not json\n")  # 12
    h.raw('{"t": "soon", "type": "consume", "partition": 0, "offset": 0, "value": "v0", '
          '"reader": "drain"}\n')  # 13
    h.raw('{"t": 9.0, "type": "teleport"}\n')  # 14
    h.raw('{"t": 9.1, "type": "consume", "partition": 0, "value": "v0", "reader": "drain"}\n')
    h.raw("\n")  # 16: blank, ignored
    for o in (0, 1, 3, 4):  # 17-20; v2 is lost
        h.read(o, f"v{o}")
    h.raw('{"t": 9.9, "type": "consume", "partition": 0, "off')  # 21, cut short
    return h


def test_bad_lines_named_and_rest_analysed(spark: Any, tmp_path: Path, reading: str) -> None:
    path = write_history(tmp_path / "broken", meta(run_id="broken"), _broken().events)
    v = check_run(path, spark=spark)
    events = str(tmp_path / "broken" / "events.jsonl")
    assert [(m["file"], m["line"]) for m in v.malformed] == [
        (events, n) for n in (12, 13, 14, 15, 21)
    ]
    errors = [m["error"] for m in v.malformed]
    assert errors[0].startswith("invalid JSON")
    assert errors[1] == "field 't' should be number, got \"soon\""
    assert errors[2] == "unknown event type teleport"
    assert errors[3] == "consume event without field 'offset'"
    assert errors[4].startswith("invalid JSON") and errors[4].endswith("(truncated last line?)")
    assert v.malformed[4]["text"].startswith('{"t": 9.9')
    assert v.malformed_count == 5
    # the good lines are analysed as usual
    assert {k: a.count for k, a in v.anomalies.items() if a.count} == {"lost": 1}
    assert (v.acked, v.read) == (5, 4)


def test_malformed_limit_still_counts_all(spark: Any, tmp_path: Path, reading: str) -> None:
    from pytest_elr.checker.job import findings_from
    from pytest_elr.checker.load import load_runs

    h = SyntheticHistory()
    for i in range(7):
        h.raw(f"garbage {i}\n")
    path = write_history(tmp_path / "r", meta(), h.events)
    with load_runs(spark, [path], malformed_limit=3) as loaded:
        (v,) = findings_from(loaded)
    assert [m["line"] for m in v.malformed] == [1, 2, 3] and v.malformed_count == 7
    assert v.valid  # nothing analysable, nothing wrong: --strict is there to fail this


def test_broken_and_missing_meta(spark: Any, tmp_path: Path) -> None:
    events = SyntheticHistory().send(0, 0).read(0, "v0").events
    broken = write_history(tmp_path / "broken", meta(), events)
    (tmp_path / "broken" / "meta.json").write_text('{\n  "schema": "pytest-elr/history/1",\n  "run')
    missing = write_history(tmp_path / "missing", meta(), events)
    (tmp_path / "missing" / "meta.json").unlink()
    other = write_history(tmp_path / "other", meta(schema="something/else"), events)
    vb, vm, vo = check_runs([broken, missing, other], spark=spark)
    assert [(m["file"].rsplit("/", 2)[-2:], m["line"]) for m in vb.malformed] == [
        (["broken", "meta.json"], 3)
    ]
    assert vb.malformed[0]["error"].startswith("invalid JSON")
    assert vm.malformed == [{"file": str(tmp_path / "missing" / "meta.json"), "line": None,
                             "error": "missing meta.json"}]
    assert "expected 'pytest-elr/history/1'" in vo.malformed[0]["error"]
    for v in (vb, vm):  # no metadata, but the events are still checked
        assert v.run_id is None and v.valid and (v.acked, v.read) == (1, 1)


def test_no_events_file_is_an_error(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "meta.json").write_text(json.dumps(meta()))
    with pytest.raises(HistoryError, match="events.jsonl: no such file"):
        check_run(str(tmp_path / "empty"), spark=spark)


def test_line_numbers_across_file_splits(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Line numbers stay exact when Spark reads one file in many splits (line by line)."""
    monkeypatch.setattr(load, "WHOLE_MAX", 0)
    h = SyntheticHistory()
    for i in range(40):
        h.send(i, i)
    h.raw("oops\n")  # line 81
    for o in [*range(20), 15, *range(20, 40)]:  # a regression at the 17th read: line 81 + 17
        h.read(o, f"v{o}")
    path = write_history(tmp_path / "split", meta(), h.events)
    assert (tmp_path / "split" / "events.jsonl").stat().st_size > 8 * 512
    spark.conf.set("spark.sql.files.maxPartitionBytes", "512")
    try:
        v = check_run(path, spark=spark)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert [m["line"] for m in v.malformed] == [81]
    (ex,) = v.anomalies["reorder"].examples
    assert (ex["offset"], ex["prev_offset"], ex["line"]) == (15, 19, 81 + 21)
    assert {k: a.count for k, a in v.anomalies.items() if a.count} == {"reorder": 1}


def test_every_event_type_is_valid(spark: Any, tmp_path: Path) -> None:
    """What a history holds (core EVENT_TYPES) is what the checker reads: none of it is malformed."""
    h = every_event_type()
    assert {e["type"] for e in h.events if isinstance(e, dict)} == set(EVENT_TYPES)
    v = check_run(write_history(tmp_path / "all", meta(), h.events), spark=spark)
    assert (v.malformed, v.malformed_count) == ([], 0)
    assert v.valid and (v.acked, v.read) == (1, 1)


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_line_endings_count_as_spark_text_counts_them(spark: Any, tmp_path: Path, eol: str) -> None:
    """LF, CR LF and a lone CR end a line in both readings (Hadoop's rule); a blank line counts, the
    text after the last end of line is a line only if there is some."""
    h = SyntheticHistory()
    for i in range(3):
        h.send(i, i)  # lines 1-6
    h.raw("\n").raw("garbage\n")  # 7 blank, 8 malformed
    for o in (0, 2):  # 9-10; v1 is lost
        h.read(o, f"v{o}")
    path = write_history(tmp_path / "eol", meta(), h.events)
    events = Path(path) / "events.jsonl"
    events.write_bytes(events.read_bytes().replace(b"\n", eol.encode()) + b"garbage too")  # 11, no end of line
    found = {}
    for whole_max in (load.WHOLE_MAX, 0):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(load, "WHOLE_MAX", whole_max)
            v = check_run(path, spark=spark)
        found[whole_max] = ([m["line"] for m in v.malformed], v.count("lost"),
                            v.anomalies["lost"].examples[0]["line"], (v.acked, v.read))
    assert found[load.WHOLE_MAX] == found[0] == ([8, 11], 1, 4, (3, 2))
