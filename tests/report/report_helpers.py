"""Helpers of the report tests: real model runs, a long-run stretcher, and a DOM reader."""

from __future__ import annotations

import json
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from pytest_elr.backends.model import ModelBackend
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
#: one that loses records in some profiles, one that loses them in the kafka profile, one with acks=1/0
PICKED = ("kip966_last_replica_standing.elr.yaml", "design_balanced_unclean_recovery.elr.yaml",
          "kip966_acks_comparison.elr.yaml")


def events_of(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text(encoding="utf-8").splitlines() if line]


def run_all(root: Path, files: tuple[str, ...] = PICKED) -> list[Path]:
    """Each scenario under each of its profiles, judged by the inline checker (its verdict saved beside the history)."""
    dirs = []
    for name in files:
        scenario = load_scenario(SCENARIOS / name)
        for profile in scenario.profiles:
            result = run_scenario(scenario, ModelBackend(), profile, root)
            assert result.history_dir is not None
            dirs.append(result.history_dir)
    return dirs


def stretch(src: Path, dst: Path, seconds_per_event: float = 0.08) -> Path:
    """A copy of a model run spread over wall time, as a real cluster's run would be (~10-100 s)."""
    lines = (src / "events.jsonl").read_text(encoding="utf-8").splitlines()
    dst.mkdir(parents=True)
    events = [dict(json.loads(line), t=round(n * seconds_per_event, 3)) for n, line in enumerate(lines)]
    (dst / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    meta = json.loads((src / "meta.json").read_text(encoding="utf-8"))
    (dst / "meta.json").write_text(json.dumps({**meta, "run_id": dst.name, "backend": "kafka"}), encoding="utf-8")
    return dst


class ReportDom(HTMLParser):
    """What the tests check in a report (or in Chromium's DOM of it): per run section, its data
    attributes, the SVG elements it holds and its facts; per verdict table row, its cells."""

    def __init__(self, html: str):
        super().__init__()
        self.sections: dict[str, dict[str, Any]] = {}
        self.rows: dict[str, dict[str, str]] = {}
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self._section: dict[str, Any] | None = None
        self._row: dict[str, str] | None = None
        self._capture: tuple[dict[str, str], str] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        classes = a.get("class", "").split()
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("href", "").startswith("#"):
            self.hrefs.append(a["href"][1:])
        if tag == "section" and "run" in classes:
            self._section = {"attrs": a, "tags": Counter(), "classes": Counter(), "facts": {}}
            self.sections[a["data-run-id"]] = self._section
        elif tag == "tr" and "data-run" in a:
            self._row = self.rows[a["data-run"]] = {}
        if self._section is not None:
            self._section["tags"][tag] += 1
            self._section["classes"].update(f"{tag}.{c}" for c in classes)
            if tag == "dd" and classes:
                self._capture = (self._section["facts"], classes[0])
        if self._row is not None and tag == "td" and classes:
            self._capture = (self._row, next(c for c in classes if c != "num"))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self._section = None
        elif tag == "tr":
            self._row = None
        elif tag in ("dd", "td"):
            self._capture = None

    def handle_data(self, data: str) -> None:
        if self._capture is not None:
            where, key = self._capture
            where[key] = where.get(key, "") + data.strip()
