"""One self-contained HTML report per session: a verdict table and a timeline per run.

``build_report(run_dirs, out)`` reads history directories (docs/history.md) and writes one
offline HTML file (inline CSS and SVG, no script); ``elr report`` is its CLI.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_elr.report.load import checker_for, find_runs, load_run
from pytest_elr.report.page import page
from pytest_elr.report.timeline import AxisMode

__all__ = ["build_report", "find_runs"]


def build_report(run_dirs: Sequence[Path], out: Path, verdicts: Mapping[str, Any] | None = None,
                 axis: AxisMode = "auto") -> Path:
    """Write the report for ``run_dirs`` (runs, or directories holding runs) to ``out``.

    ``verdicts``: optional Spark checker verdicts (``pytest_elr.analysis.verdict.Verdict`` or its
    ``to_dict()``), keyed by run id or run directory, shown beside the built-in acks=all check.
    """
    runs = []
    for path in find_runs(run_dirs):
        run = load_run(path)
        run.checker = checker_for(path, run.meta, verdicts)
        runs.append(run)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page(runs, axis), encoding="utf-8")
    return out
