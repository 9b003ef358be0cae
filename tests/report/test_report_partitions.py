"""The report of a topic of several partitions: the grid of partitions x steps, the records at stake
per partition, a timeline per partition on demand; each element shown by planting what it shows in a
real model run's history. A one-partition run's report is as it was."""

from __future__ import annotations

import importlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from report_helpers import SCENARIOS, ReportDom, events_of
from test_report_chromium import browse, chromium  # noqa: F401  (the fixture)

from pytest_elr.backends.model import ModelBackend
from pytest_elr.checker import Verdict, check_history
from pytest_elr.checker.verdict import by_partition
from pytest_elr.core.history import Run
from pytest_elr.report import build_report, find_runs
from pytest_elr.report.partitions import MAX_TIMELINES, partition_numbers, partitions_section
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario

#: the module (``pytest_elr.report.page`` the attribute is the function of the same name)
page_module = importlib.import_module("pytest_elr.report.page")

FIFTY = """\
name: fifty-partitions-crash
description: a topic of 50 partitions over five brokers; two brokers crash and come back.
profiles: [kip966]
cluster: {brokers: 5}
topic: {partitions: 50, replicas: 3, min_insync_replicas: 2}
steps:
  - at: spread
    do: [{produce: 100}]
  - at: crash
    do: [{crash: 1}, {produce: 100}]
  - at: second
    do: [{crash: 2}, {produce: 50}]
  - at: back
    do: [{restart: 1}, {restart: 2}]
verdict: {acked_loss: none}
"""
VOID = {"meta", "br", "img", "input", "link", "col", "hr", "wbr"}


class Grid(HTMLParser):
    """Well-formedness (every element closed in order, SVG's self-closed ones aside), and per run
    section: its grid's cells by (partition, step), its rows' counts, its timelines per partition."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.cells: dict[tuple[int, str], dict[str, Any]] = {}
        self.rows: dict[int, dict[str, str]] = {}
        self.timelines: dict[int, dict[str, Any]] = {}
        self.summary = ""
        self._row: int | None = None
        self._text: dict[str, Any] | None = None
        self._key = ""
        self._timeline: int | None = None
        self._in_summary = False
        self.feed(html)
        self.close()
        assert self.stack == [], f"unclosed: {self.stack}"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        classes = a.get("class", "").split()
        if tag not in VOID:
            self.stack.append(tag)
        if tag == "tr" and "data-partition" in a:
            self._row = int(a["data-partition"])
            self.rows[self._row] = {"id": a["id"]}
        elif tag == "td" and self._row is not None and "c" in classes:
            cell = {"classes": set(classes), "title": a["title"], "text": ""}
            self.cells[(self._row, a["data-step"])] = cell
            self._text, self._key = cell, "text"
        elif tag == "td" and self._row is not None and "num" in classes:
            self._text, self._key = self.rows[self._row], classes[1]
            self.rows[self._row][classes[1] + "_classes"] = " ".join(classes)
        elif tag == "details" and "ptl" in classes:
            self._timeline = int(a["data-partition"])
            self.timelines[self._timeline] = {"id": a["id"], "svg": 0, "ticks": 0}
        elif self._timeline is not None and tag == "svg":
            self.timelines[self._timeline]["svg"] += 1
        elif self._timeline is not None and tag == "rect" and "tick" in classes:
            self.timelines[self._timeline]["ticks"] += 1
        elif tag == "p" and "psummary" in classes:
            self._in_summary = True

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()
        if tag == "tr":
            self._row = None
        elif tag == "td":
            self._text = None
        elif tag == "details":
            self._timeline = None
        elif tag == "p":
            self._in_summary = False

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text[self._key] = self._text.get(self._key, "") + data
        if self._in_summary:
            self.summary += data


def _run(root: Path, path: Path) -> Path:
    scenario = load_scenario(path)
    result = run_scenario(scenario, ModelBackend(), scenario.profiles[0], root)
    assert result.history_dir is not None
    return result.history_dir


@pytest.fixture(scope="module")
def fifty(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fifty")
    (root / "fifty.elr.yaml").write_text(FIFTY, encoding="utf-8")
    return _run(root / "runs", root / "fifty.elr.yaml")


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("three"), SCENARIOS / "many_partitions_leader_crash.elr.yaml")


def _copy(src: Path, dst: Path, events: list[dict[str, Any]]) -> Path:
    """A run directory holding ``events`` (the source's meta, no verdict)."""
    dst.mkdir(parents=True)
    (dst / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    meta = json.loads((src / "meta.json").read_text(encoding="utf-8"))
    (dst / "meta.json").write_text(json.dumps({**meta, "run_id": dst.name}), encoding="utf-8")
    return dst


def _judged(run: Path) -> Verdict:
    """The inline checker's verdict on the run, counted per partition as the plugin's is."""
    events = events_of(run)
    verdict = check_history(events)
    verdict.partitions = by_partition(events)
    return verdict


def _report(tmp_path: Path, run: Path, verdict: Verdict | None = None) -> Grid:
    verdicts = {run: verdict} if verdict is not None else None
    return Grid(build_report([run], tmp_path / f"{run.name}.html", verdicts).read_text(encoding="utf-8"))


def _last_states(events: list[dict[str, Any]]) -> dict[tuple[int, str], dict[str, Any]]:
    """Per (partition, step), the last observed state, read straight from the history."""
    out = {}
    for e in events:
        if e["type"] == "observe":
            step = e["step"] or "start"
            out[(0, step)] = e
            for p, s in (e.get("partitions") or {}).items():
                out[(int(p), step)] = s
    return out


def test_a_cell_per_partition_and_step_with_the_historys_state(fifty: Path, tmp_path: Path) -> None:
    events = events_of(fifty)
    grid = _report(tmp_path, fifty)
    states = _last_states(events)
    assert set(grid.cells) == set(states) and len({p for p, _ in states}) == 50
    for (p, step), s in states.items():
        cell = grid.cells[(p, step)]
        leader = "–" if s["leader"] is None else str(s["leader"])
        sizes = str(len(s["isr"])) + (f"·{len(s['elr'])}" if s["elr"] else "")
        assert cell["text"] == leader + sizes, (p, step)
        assert f"partition {p} · {step}: leader {'none' if s['leader'] is None else s['leader']} " in cell["title"]
        assert f"ISR {s['isr']} · ELR {s['elr']}" in cell["title"]
        colour = ("off" if s["leader"] is None else "elr" if s["elr"] else "under" if len(s["isr"]) < 2
                  else "shrunk" if len(s["isr"]) < len(s["replicas"]) else "whole")
        assert colour in cell["classes"], (p, step, cell)
        assert "bad" not in cell["classes"] and "lostrec" not in cell["classes"]
    # the run's two crashes leave some partitions with an ELR, which the grid shows where the history has it
    assert any("elr" in c["classes"] for c in grid.cells.values())


def test_records_at_stake_per_partition_are_the_checkers(fifty: Path, tmp_path: Path) -> None:
    verdict = Verdict.load(fifty)
    assert verdict is not None and len(verdict.partitions) == 50
    grid = _report(tmp_path, fifty)
    for p, counts in verdict.partitions.items():
        row = grid.rows[p]
        assert (row["acked"], row["read"], row["lost"]) == tuple(str(counts[k]) for k in ("acked", "read", "lost"))
    assert sum(int(r["acked"]) for r in grid.rows.values()) == verdict.acked
    html = (tmp_path / f"{fifty.name}.html").read_text(encoding="utf-8")
    assert ReportDom(html).sections[fifty.name]["facts"]["partitions"] == "50"


def test_a_planted_disagreement_shows_in_exactly_its_cell(three: Path, tmp_path: Path) -> None:
    events = events_of(three)
    at = max(i for i, e in enumerate(events) if e["type"] == "observe" and e["step"] == "leader-of-1-crashes")
    planted = {"t": events[at]["t"], "type": "disagreement", "step": "leader-of-1-crashes", "after": "crash",
               "field": "leader", "differences": ["partition 2: leader: model 2, observed 0"], "observed_value": 0,
               "model_value": 2, "observed": "...", "model": "...", "partition": 2}
    run = _copy(three, tmp_path / "dis", [*events[:at + 1], planted, *events[at + 1:]])
    grid = _report(tmp_path, run, _judged(run))
    bad = {key for key, cell in grid.cells.items() if "bad" in cell["classes"]}
    assert bad == {(2, "leader-of-1-crashes")}
    cell = grid.cells[(2, "leader-of-1-crashes")]
    assert cell["text"].endswith("!") and "disagreement: leader: model 2, observed 0" in cell["title"]
    assert "a finding in 1" in grid.summary
    # its timeline is the partition's: the disagreement is marked there, not in partition 0's
    html = (tmp_path / "dis.html").read_text(encoding="utf-8")
    timelines = re.findall(r'<details class="ptl".*?</details>', html, re.S)
    assert ["disagreement" in t for t in timelines] == [False, False, True]


def test_a_broken_invariant_and_an_unmet_expectation_show_in_their_partitions_cells(three: Path,
                                                                                      tmp_path: Path) -> None:
    events = events_of(three)
    end = next(i for i, e in enumerate(events) if e["type"] == "step" and e.get("phase") == "end"
               and e["step"] == "spread")
    events[end] = {**events[end], "mismatches": ["partition 1: leader: expected 1, observed 2"]}
    violation = {"t": events[end]["t"], "type": "violation", "step": "back",
                 "message": "partition 2: invariant elr_disjoint_from_isr broken: [1] in both", "invariant": "x"}
    back = max(i for i, e in enumerate(events) if e.get("step") == "back")
    run = _copy(three, tmp_path / "inv", [*events[:back + 1], violation, *events[back + 1:]])
    grid = _report(tmp_path, run, _judged(run))
    bad = {key: cell["title"] for key, cell in grid.cells.items() if "bad" in cell["classes"]}
    assert set(bad) == {(1, "spread"), (2, "back")}
    assert "expected, not met: leader: expected 1, observed 2" in bad[(1, "spread")]
    assert "invariant broken: invariant elr_disjoint_from_isr broken" in bad[(2, "back")]


def test_a_loss_in_one_partition_shows_in_its_row(three: Path, tmp_path: Path) -> None:
    events = events_of(three)
    victim = next(e for e in events if e["type"] == "produce" and e["op"] == "ok" and e["partition"] == 1
                  and e["step"] == "leader-of-1-crashes")
    kept = [e for e in events if not (e["type"] == "consume" and e["value"] == victim["value"])]
    run = _copy(three, tmp_path / "loss", kept)
    verdict = _judged(run)  # the checker, not the test, finds the loss
    assert verdict.lost_count == 1 and verdict.partitions[1]["lost"] == 1
    grid = _report(tmp_path, run, verdict)
    assert [p for p, row in grid.rows.items() if row["lost"] != "0"] == [1]
    assert "some" in grid.rows[1]["lost_classes"].split() and "some" not in grid.rows[0]["lost_classes"].split()
    assert {key for key, c in grid.cells.items() if "lostrec" in c["classes"]} == {(1, "leader-of-1-crashes")}
    assert "1 acks=all record acknowledged here, lost" in grid.cells[(1, "leader-of-1-crashes")]["title"]
    assert "acks=all records lost in 1" in grid.summary


def test_a_leaderless_partition_is_dark_in_its_cell(three: Path, tmp_path: Path) -> None:
    events = events_of(three)
    for e in events:
        if e["type"] == "observe" and e["step"] == "back":
            e["partitions"]["2"] = {**e["partitions"]["2"], "leader": None}
    run = _copy(three, tmp_path / "off", events)
    grid = _report(tmp_path, run, _judged(run))
    assert {key for key, c in grid.cells.items() if "off" in c["classes"]} == {(2, "back")}
    assert grid.cells[(2, "back")]["text"].startswith("–") and "leader none" in grid.cells[(2, "back")]["title"]


def test_an_observation_naming_its_partition_is_that_partitions(three: Path, tmp_path: Path) -> None:
    """An observe event with ``partition`` (docs/history.md: optional) holds that partition's fields."""
    events = events_of(three)
    back = max(i for i, e in enumerate(events) if e["type"] == "observe" and e["step"] == "back")
    alone = {**events[back]["partitions"]["1"], "t": events[back]["t"], "type": "observe", "step": "back",
             "partition": 1, "leader": None}
    run = _copy(three, tmp_path / "own", [*events[:back + 1], alone, *events[back + 1:]])
    grid = _report(tmp_path, run, _judged(run))
    assert {key for key, c in grid.cells.items() if "off" in c["classes"]} == {(1, "back")}
    assert grid.cells[(0, "back")]["text"] == "03"  # partition 0's own: leader 0, ISR of three, not the event's


def test_timelines_per_partition_on_demand(three: Path, tmp_path: Path) -> None:
    events = events_of(three)
    grid = _report(tmp_path, three)
    assert sorted(grid.timelines) == [0, 1, 2] and all(t["svg"] == 1 for t in grid.timelines.values())
    for p, t in grid.timelines.items():  # each one's records only (a tick per send answered and per read)
        mine = [e for e in events if e["type"] in ("produce", "consume") and e.get("partition") == p
                and e.get("op") != "invoke"]
        assert t["ticks"] == len(mine) > 0
        assert grid.rows[p]["id"] and f'href="#{t["id"]}"' in (tmp_path / f"{three.name}.html").read_text()
    html = (tmp_path / f"{three.name}.html").read_text(encoding="utf-8")
    assert "<script" not in html


def test_hostile_names_are_escaped(three: Path, tmp_path: Path) -> None:
    evil = '<script>alert(1)</script>"\'&'
    events = events_of(three)
    for e in events:
        if e.get("step") == "spread":
            e["step"] = evil
        if e["type"] == "observe" and e.get("partitions"):
            e["partitions"]['7"><img src=x>'] = dict(e["partitions"]["1"])  # not a partition number: ignored
    events.append({"t": events[-1]["t"], "type": "disagreement", "step": evil, "field": "leader",
                   "differences": [f"partition 1: leader: {evil}"], "partition": 1})
    run = _copy(three, tmp_path / "evil", events)
    html = build_report([run], tmp_path / "evil.html", {run: _judged(run)}).read_text(encoding="utf-8")
    assert "<script>" not in html and "<img" not in html
    grid = Grid(html)
    assert sorted(grid.rows) == [0, 1, 2]
    assert evil in grid.cells[(1, evil)]["title"] and "bad" in grid.cells[(1, evil)]["classes"]


def _many(tmp_path: Path, partitions: int, steps: int = 6) -> Path:
    """A history of ``partitions`` partitions (one record each), a finding planted in the last one."""
    def state(p: int, step: int) -> dict[str, Any]:
        replicas = [p % 5, (p + 1) % 5, (p + 2) % 5]
        return {"leader": replicas[0], "leader_epoch": step + 1, "isr": replicas[: 3 - step % 2], "elr": [],
                "last_known_elr": [], "fenced": [], "hwm": 1, "leo": {str(b): 1 for b in replicas},
                "replicas": replicas}
    events: list[dict[str, Any]] = []
    for step in range(steps):
        label = f"s{step}"
        events.append({"t": step, "type": "step", "step": label, "phase": "begin"})
        if step == 0:
            for p in range(partitions):
                events += [{"t": 0, "type": "produce", "step": label, "op": op, "id": p, "value": f"v{p}",
                            "acks": "all", "partition": p, "offset": None if op == "invoke" else 0}
                           for op in ("invoke", "ok")]
        events.append({"t": step, "type": "observe", "step": label, **state(0, step),
                       "partitions": {str(p): state(p, step) for p in range(1, partitions)}})
        events.append({"t": step, "type": "step", "step": label, "phase": "end", "expected": {}, "mismatches": []})
    events.append({"t": steps, "type": "disagreement", "step": "s3", "field": "isr", "partition": partitions - 1,
                   "differences": [f"partition {partitions - 1}: isr: model [1], observed [2]"]})
    events += [{"t": steps, "type": "consume", "step": "final", "partition": p, "offset": 0, "value": f"v{p}",
                "reader": "drain"} for p in range(partitions)]
    run = tmp_path / f"p{partitions}"
    run.mkdir()
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    (run / "meta.json").write_text(json.dumps({"run_id": run.name, "scenario": "many", "outcome": "failed",
                                               "backend": "model", "min_insync_replicas": 2}), encoding="utf-8")
    return run


def test_a_thousand_partitions_stay_bounded(tmp_path: Path) -> None:
    """1000 partitions (the language's maximum): a row each, a timeline for at most MAX_TIMELINES of
    them, the one with a finding among them; the page bounded by what it draws."""
    run = _many(tmp_path, 1000)
    verdict = _judged(run)
    html = build_report([run], tmp_path / "r.html", {run: verdict}).read_text(encoding="utf-8")
    grid = Grid(html)
    assert len(grid.rows) == 1000 and len(grid.cells) == 1000 * 6
    assert len(grid.timelines) == MAX_TIMELINES and 999 in grid.timelines
    assert {key for key, c in grid.cells.items() if "bad" in c["classes"]} == {(999, "s3")}
    assert f"timelines of {MAX_TIMELINES} of 1000 partitions" in html
    # a partition without a timeline has no link to one (no dangling anchor)
    assert 'href="#run-p1000-tl500"' not in html and 'href="#run-p1000-tl999"' in html
    assert len(html) < 3_000_000


def test_one_partition_runs_are_unchanged(history_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page of one-partition runs is the page without anything of this feature: the same bytes (its
    clock aside) as with the section and its style taken out."""
    runs = find_runs([history_root])
    assert runs and all(partition_numbers(Run.read(r), Verdict.load(r)) == [0] for r in runs)
    assert all(partitions_section(Run.read(r), Verdict.load(r), "a", 0, "auto") == "" for r in runs)
    with_feature = build_report(runs, tmp_path / "with.html").read_text(encoding="utf-8")
    monkeypatch.setattr(page_module, "partitions_section", lambda *a, **k: "")
    monkeypatch.setattr(page_module, "PARTITIONS_CSS", "")
    monkeypatch.setattr(page_module, "partition_numbers", lambda *a: [0])
    without = build_report(runs, tmp_path / "without.html")
    clock = re.compile(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC")
    assert clock.sub("", with_feature) == clock.sub("", without.read_text(encoding="utf-8"))
    assert "pgrid" not in with_feature and "ptl" not in with_feature


#: run in the page after layout: the grid's box, its cells' colours, the timelines' open state
GRID_PROBE = """<script>
const box = document.querySelector('.pgrid').getBoundingClientRect();
const colour = q => { const e = document.querySelector(q); return e ? getComputedStyle(e).boxShadow : null; };
const shown = () => [...document.querySelectorAll('details.ptl svg')].filter(s => s.checkVisibility()).length;
const closed = shown();
const last = document.querySelector('details.ptl[data-partition="999"]');
last.open = true;
const opened = last.querySelector('svg').getBoundingClientRect().height;
const pre = document.createElement('pre');
pre.id = 'probe';
pre.textContent = JSON.stringify({height: box.height, viewport: innerHeight, rows: document.querySelectorAll(
  '.pgrid-t tbody tr').length, bad: colour('td.c.bad'), fine: colour('td.c:not(.bad)'), closed: closed,
  shown: shown(), opened: opened, details: document.querySelectorAll('details.ptl').length});
document.body.appendChild(pre);
</script>"""


def test_a_thousand_partitions_in_a_browser(chromium: str, tmp_path: Path) -> None:  # noqa: F811
    """In Chromium the 1000-row grid scrolls in a box under the window's height, the planted finding's
    cell is outlined in red, and the timelines stay hidden until one is opened."""
    run = _many(tmp_path, 1000)
    html = build_report([run], tmp_path / "r.html", {run: _judged(run)}).read_text(encoding="utf-8")
    probe = tmp_path / "probe.html"
    probe.write_text(html.replace("</body>", GRID_PROBE + "</body>"), encoding="utf-8")
    dom = browse(chromium, tmp_path, "--window-size=1280,1000", "--dump-dom", probe.as_uri()).stdout
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    m = json.loads(found.group(1).replace("&quot;", '"'))
    assert m["rows"] == 1000 and 100 < m["height"] <= 0.7 * m["viewport"] + 1, m
    assert "rgb(215, 25, 28)" in m["bad"] and m["fine"] == "none", m
    assert m["details"] == MAX_TIMELINES and m["closed"] == 0 and m["shown"] == 1 and m["opened"] > 100, m
