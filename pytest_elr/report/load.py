"""Read run directories (docs/history.md) into what the report shows.

Lenient on purpose: a report is most wanted for the run that crashed mid-write, so a bad line is
counted and skipped and a missing ``meta.json`` leaves the metadata empty instead of failing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_elr.core.history import EVENTS_FILE, META_FILE
from pytest_elr.scenario.verdict import Verdict, check_history

#: fields without which check_history (and the timeline) cannot use an event
_REQUIRED = {"produce": ("op", "value"), "consume": ("value",)}


@dataclass
class Run:
    path: Path
    meta: dict[str, Any]
    events: list[dict[str, Any]]
    malformed: int
    verdict: Verdict
    checker: dict[str, Any] | None = None  # the Spark checker's verdict (to_dict form), if given
    lost_values: set[str] = field(default_factory=set)

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.path.name)

    def get(self, key: str) -> str:
        value = self.meta.get(key)
        return "?" if value is None else str(value)

    @property
    def outcome(self) -> str:
        """passed | failed | error, or unfinished: no outcome written (still running, or crashed)."""
        return str(self.meta.get("outcome") or "unfinished")

    @property
    def fault_bit(self) -> str:
        """As the terminal summary says it: yes (a fault took records), NO (a lossy fault took none), - (none)."""
        losses = [e for e in self.events if e["type"] == "loss_evidence" and not e.get("proof")]
        if any((e.get("records_lost") or 0) > 0 for e in losses):
            return "yes"
        return "NO" if losses else "-"

    @property
    def duration_s(self) -> float:
        return float(self.events[-1].get("t") or 0.0) if self.events else 0.0


def find_runs(paths: Iterable[Path]) -> list[Path]:
    """Run directories among ``paths``: a run itself, or every run below a directory (oldest first)."""
    found: list[Path] = []
    for path in map(Path, paths):
        if (path / EVENTS_FILE).is_file():
            found.append(path)
        elif path.is_dir():
            below = [p.parent for p in path.rglob(EVENTS_FILE)]
            found += sorted(below, key=lambda p: (_meta(p).get("started_at") or "", p.name))
        else:
            raise FileNotFoundError(f"{path}: not a run directory nor a directory holding runs")
    return list(dict.fromkeys(found))  # a run named twice is shown once


def load_run(path: Path, checker: Mapping[str, Any] | None = None) -> Run:
    events, malformed = _events(path / EVENTS_FILE)
    verdict = check_history(events)
    return Run(path=path, meta=_meta(path), events=events, malformed=malformed, verdict=verdict,
               checker=dict(checker) if checker is not None else None,
               lost_values={value for value, _ in verdict.lost})  # check_history lists every one


def checker_for(run_dir: Path, meta: Mapping[str, Any], verdicts: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The caller's verdict for a run, keyed by run id or path; Verdict objects or their dicts."""
    if not verdicts:
        return None
    for key in (meta.get("run_id"), str(run_dir), str(run_dir.resolve()), run_dir.name):
        if key is not None and key in verdicts:
            found = verdicts[key]
            return found.to_dict() if hasattr(found, "to_dict") else dict(found)
    return None


def _meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _events(file: Path) -> tuple[list[dict[str, Any]], int]:
    events: list[dict[str, Any]] = []
    malformed = 0
    with file.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                malformed += 1
                continue
            if not isinstance(event, dict) or not isinstance(event.get("type"), str) or any(
                    event.get(key) is None for key in _REQUIRED.get(event["type"], ())):
                malformed += 1
                continue
            if not isinstance(event.get("t"), (int, float)):
                event["t"] = events[-1]["t"] if events else 0.0  # keep order; the axis needs a number
            events.append(event)
    return events, malformed
