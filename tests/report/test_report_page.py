"""The report's HTML against the histories it was built from (no browser: see test_report_chromium)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from report_helpers import SCENARIOS, ReportDom, events_of, run_all, stretch

from pytest_elr.checker import Verdict, check_history
from pytest_elr.report import build_report, find_runs


def test_numbers_and_timelines_match_the_histories(history_root: Path, tmp_path: Path) -> None:
    dom = ReportDom(build_report([history_root], tmp_path / "r.html").read_text(encoding="utf-8"))
    runs = find_runs([history_root])
    assert len(dom.sections) == len(runs) == len(dom.rows) == 9
    lossy = 0
    for run in runs:
        events = events_of(run)
        verdict = check_history(events)
        run_id = json.loads((run / "meta.json").read_text())["run_id"]
        section, row = dom.sections[run_id], dom.rows[run_id]
        expected = {"acked": str(verdict.acked), "read": str(verdict.read), "lost": str(verdict.lost_count)}
        assert {k: section["attrs"][f"data-{k}"] for k in expected} == expected
        assert {k: section["facts"][k] for k in expected} == expected
        assert {k: row[k] for k in expected} == expected
        # the timeline: a lane band per broker at least, a marker per fault, red ticks exactly when lost
        assert section["tags"]["svg"] == 1 and section["classes"]["svg.timeline"] == 1
        brokers = {b for e in events if e["type"] == "observe" for b in e["isr"]}
        assert section["classes"]["g.band"] >= len(brokers)
        assert section["classes"]["g.fault"] == sum(e["type"] == "fault" for e in events)
        assert (section["classes"]["rect.lost"] > 0) == bool(verdict.lost_count)
        assert section["classes"]["rect.ok"] + section["classes"]["rect.lost"] > 0
        assert section["classes"]["polyline.hwm"] > 0
        lossy += bool(verdict.lost_count)
    assert lossy >= 2  # the negative controls are there, so "lost" is really exercised
    assert set(dom.hrefs) <= dom.ids  # every link from the verdict table lands on a run


def test_self_contained(history_root: Path, tmp_path: Path) -> None:
    html = build_report([history_root], tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert not re.search(r"\bsrc=", html)
    assert set(re.findall(r"https?://[^\s\"')]+", html)) <= {"http://www.w3.org/2000/svg"}
    assert set(re.findall(r"url\(([^)]*)\)", html)) <= {f"#fenced-r{n}" for n in range(9)}


def test_axis_is_event_index_for_model_runs_and_seconds_for_long_runs(history_root: Path, tmp_path: Path) -> None:
    model_run = find_runs([history_root])[0]
    long_run = stretch(model_run, tmp_path / "runs" / "long-run")
    html = build_report([model_run, long_run], tmp_path / "r.html").read_text(encoding="utf-8")
    assert re.findall(r'data-mode="(\w+)"', html) == ["events", "time"]
    assert ">seconds</text>" in html and ">events</text>" in html


def test_cli(history_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli.html"
    done = subprocess.run([sys.executable, "-m", "pytest_elr.report", str(history_root), "--out", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "9 runs" in done.stdout and len(ReportDom(out.read_text(encoding="utf-8")).sections) == 9
    missing = subprocess.run([sys.executable, "-m", "pytest_elr.report", str(tmp_path / "nope")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "nope" in missing.stderr


def test_a_crashed_run_still_reports(history_root: Path, tmp_path: Path) -> None:
    run = tmp_path / "crashed"
    run.mkdir()
    lines = (find_runs([history_root])[0] / "events.jsonl").read_text(encoding="utf-8").splitlines()
    (run / "events.jsonl").write_text("\n".join(lines[:40]) + '\n{"t": 1.0, "type": "prod', encoding="utf-8")
    dom = ReportDom(build_report([run], tmp_path / "r.html").read_text(encoding="utf-8"))
    (section,) = dom.sections.values()
    assert section["facts"]["malformed"] == "1" and section["attrs"]["data-outcome"] == "unfinished"


def test_the_verdicts_given_are_shown(history_root: Path, tmp_path: Path) -> None:
    """The checker's verdict is shown as given: the report does not judge the run again."""
    run = find_runs([history_root])[0]
    run_id = json.loads((run / "meta.json").read_text())["run_id"]
    given = Verdict(acked=7, read=4, lost_count=3, lost=[("x1", 1)], anomalies={"lost": 3, "reorder": 0},
                    checker="spark")
    html = build_report([run], tmp_path / "r.html", {run: given}).read_text(encoding="utf-8")
    row = ReportDom(html).rows[run_id]
    assert {k: row[k] for k in ("acked", "read", "lost")} == {"acked": "7", "read": "4", "lost": "3"}
    assert row["checker"].startswith("spark") and ">lost 3</span>" in html and "reorder" not in html
    assert "x1@1" in html  # the lost records the verdict names


def test_a_run_no_checker_judged_says_so(history_root: Path, tmp_path: Path) -> None:
    saved = find_runs([history_root])[0]
    assert (saved / "verdict.json").is_file()  # the checker that judged it saved its verdict
    run = stretch(saved, tmp_path / "unjudged")  # events and meta only
    dom = ReportDom(build_report([saved, run], tmp_path / "r.html").read_text(encoding="utf-8"))
    assert dom.rows["unjudged"]["checker"] == "not judged" and dom.rows["unjudged"]["lost"] == "–"
    assert dom.sections["unjudged"]["classes"]["rect.lost"] == 0
    (judged,) = set(dom.rows) - {"unjudged"}
    assert dom.rows[judged]["checker"].startswith("inline")


def test_a_session_of_25_runs_builds_one_section_each(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    runs = run_all(root, tuple(sorted(p.name for p in SCENARIOS.glob("*.elr.yaml"))))[:25]
    runs += [stretch(runs[n], root / f"long-{n}") for n in range(25 - len(runs))]
    build_report(runs, tmp_path / "r.html")  # its speed is measured beside a baseline, not asserted here
    assert len(ReportDom((tmp_path / "r.html").read_text(encoding="utf-8")).sections) == 25


def test_a_long_busy_run_is_drawn_in_bounded_size(tmp_path: Path) -> None:
    """A 90 s real run with 20,000 sends: one tick per pixel column, not per send."""
    run = tmp_path / "busy"
    run.mkdir()
    events = [{"t": 0.0, "type": "observe", "step": None, "leader": 1, "isr": [1, 2, 3], "elr": [],
               "last_known_elr": [], "fenced": [], "hwm": 0, "leo": {}}]
    for n in range(20_000):
        t = round(n * 0.0045, 4)
        events.append({"t": t, "type": "produce", "step": "load", "op": "invoke", "id": n, "value": f"v{n}",
                       "acks": "all"})
        events.append({"t": t, "type": "produce", "step": "load", "op": "ok", "id": n, "value": f"v{n}",
                       "acks": "all", "offset": n})
    events += [{"t": 90.0 + n * 1e-5, "type": "consume", "step": "drain", "partition": 0, "offset": n,
                "value": f"v{n}", "reader": "drain"} for n in range(19_990)]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    verdict = check_history(events)
    # Bounded by what it draws (below), not by a wall clock: a loaded CI runner took 9 s once.
    html = build_report([run], tmp_path / "r.html", {run: verdict}).read_text(encoding="utf-8")
    section = ReportDom(html).sections["busy"]
    assert section["facts"]["lost"] == "10" and 0 < section["classes"]["rect.lost"] <= 10
    assert section["classes"]["rect.tick"] < 3_000 and len(html) < 1_500_000
