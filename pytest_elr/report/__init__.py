"""One self-contained HTML report per session: a verdict table and a timeline per run.

``build_report(run_dirs, out, verdicts)`` reads history directories (docs/history.md) and writes one
offline HTML file (inline CSS and SVG, no script); ``elr report`` is its CLI. The
report shows the verdicts a checker gave; it judges nothing itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_elr.checker.verdict import Verdict
from pytest_elr.core.history import Run
from pytest_elr.report.load import find_runs, verdicts_of
from pytest_elr.report.page import page
from pytest_elr.report.timeline import AxisMode

__all__ = ["build_report", "find_runs"]


def build_report(run_dirs: Sequence[Path], out: Path, verdicts: Mapping[Path, Verdict] | None = None,
                 axis: AxisMode = "auto") -> Path:
    """Write the report for ``run_dirs`` (runs, or directories holding runs) to ``out``.

    ``verdicts``: the checker's verdict per run directory (the plugin gives its session's). A run not
    among them shows the verdict a checker saved in its directory (``verdict.json``), or "not judged".
    """
    runs = [Run.read(path) for path in find_runs(run_dirs)]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page(runs, verdicts_of(runs, verdicts), axis), encoding="utf-8")
    return out
