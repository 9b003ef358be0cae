"""``elr report RUN_DIR... --out report.html``: the HTML report of some runs.

Each run shows the verdict the checker that judged it saved in its directory (``verdict.json``); a
run no checker judged is shown as "not judged".
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pytest_elr.core.commandline import command_parser
from pytest_elr.report import build_report, find_runs


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("report", __doc__)
    parser.add_argument("paths", nargs="+", type=Path, metavar="RUN_DIR",
                        help="run directories, or directories searched for runs")
    parser.add_argument("--out", type=Path, default=Path("elr-report.html"), help="the HTML file to write")
    parser.add_argument("--axis", choices=("auto", "time", "events"), default="auto",
                        help="x axis: wall time, event index, or auto (time for runs of a second or more)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        runs = find_runs(args.paths)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not runs:
        print("error: no runs (no events.jsonl) under " + " ".join(map(str, args.paths)), file=sys.stderr)
        return 2
    out = build_report(runs, args.out, axis=args.axis)
    print(f"{out}: {len(runs)} runs in {time.perf_counter() - started:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
