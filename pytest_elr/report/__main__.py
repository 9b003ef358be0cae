"""``elr report RUN_DIR... --out report.html``: the HTML report of some runs."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from pytest_elr.report import build_report, find_runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="elr report", description=__doc__)
    parser.add_argument("paths", nargs="+", type=Path, metavar="RUN_DIR",
                        help="run directories, or directories searched for runs")
    parser.add_argument("--out", type=Path, default=Path("elr-report.html"), help="the HTML file to write")
    parser.add_argument("--axis", choices=("auto", "time", "events"), default="auto",
                        help="x axis: wall time, event index, or auto (time for runs of a second or more)")
    parser.add_argument("--verdicts", type=Path, metavar="JSON",
                        help="the Spark checker's --json output, shown beside each run")
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
    verdicts = None
    if args.verdicts is not None:
        loaded = json.loads(args.verdicts.read_text(encoding="utf-8"))
        # the checker's --json document ({"verdicts": [...], ...}), or a bare list of verdicts
        listed = (loaded.get("verdicts") or []) if isinstance(loaded, dict) else loaded
        verdicts = {str(v.get("run_id") or v.get("path")): v for v in listed if isinstance(v, dict)}
    out = build_report(runs, args.out, verdicts, args.axis)
    print(f"{out}: {len(runs)} runs in {time.perf_counter() - started:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
