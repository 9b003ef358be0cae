"""Which runs a report shows, and the verdict it shows for each: never judged again here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pytest_elr.checker.verdict import Verdict
from pytest_elr.core.history import EVENTS_FILE, Run, read_meta


def find_runs(paths: Iterable[Path]) -> list[Path]:
    """Run directories among ``paths``: a run itself, or every run below a directory (oldest first)."""
    found: list[Path] = []
    for path in map(Path, paths):
        if (path / EVENTS_FILE).is_file():
            found.append(path)
        elif path.is_dir():
            below = [p.parent for p in path.rglob(EVENTS_FILE)]
            found += sorted(below, key=lambda p: (read_meta(p).get("started_at") or "", p.name))
        else:
            raise FileNotFoundError(f"{path}: not a run directory nor a directory holding runs")
    return list(dict.fromkeys(found))  # a run named twice is shown once


def verdicts_of(runs: Sequence[Run], given: Mapping[Path, Verdict] | None = None) -> list[Verdict | None]:
    """Each run's verdict: the one ``given`` for its directory, else the one a checker saved there
    (``verdict.json``), else None: not judged."""
    by_dir = {Path(path).resolve(): verdict for path, verdict in (given or {}).items()}
    return [by_dir.get(run.path.resolve()) or Verdict.load(run.path) for run in runs]
