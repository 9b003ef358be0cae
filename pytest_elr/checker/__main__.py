"""Check history directories with Spark.

    elr check RUN_DIR... [--rollup] [--json OUT]
    spark-submit --master URL pytest_elr/checker/__main__.py RUN_DIR...

A directory that is not itself a run is searched for runs. Each run is judged as pytest judged
it: valid (no anomaly), or for a negative control (its scenario expects loss, meta.json
"expected_loss") loss as expected. Exit code 0 when every run is, 1 when any is not (or, with
--strict, has malformed lines), 2 when a run can't be read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, TextIO

# Absolute imports: spark-submit runs this file as a script, outside its package.
from pytest_elr.checker.job import Findings, findings_from
from pytest_elr.checker.load import HistoryError, discover, load_runs
from pytest_elr.checker.rollup import RollupRow, rollup_from
from pytest_elr.checker.session import get_spark
from pytest_elr.core.commandline import command_parser

SHORT = {
    "lost": "lost",
    "unseen": "unseen",
    "duplicate": "dup",
    "inconsistent_offset": "incons",
    "reorder": "reorder",
    "hwm_regression": "hwm↓",
    "acks1_uncommitted": "acks1",
}


class Progress:
    """A one-line status on stderr (phase, elapsed time, running Spark stage) while a TTY
    is watching; silent otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.phase = ""
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._status: Any = None
        self._tracker: Any = None

    def start(self, spark: Any) -> None:
        if not self.enabled:
            return
        try:  # classic Spark only; Spark Connect has no status tracker
            self._tracker = spark.sparkContext.statusTracker()
        except Exception:
            self._tracker = None
        try:
            from rich.console import Console

            self._status = Console(stderr=True).status("")
            self._status.start()
        except ImportError:
            self._status = None
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def set(self, phase: str) -> None:
        self.phase = phase

    def _text(self) -> str:
        text = f"{self.phase} {time.monotonic() - self.t0:5.1f} s"
        if self._tracker is not None:
            try:
                stages = [self._tracker.getStageInfo(s) for s in self._tracker.getActiveStageIds()]
                done = sum(s.numCompletedTasks for s in stages if s)
                total = sum(s.numTasks for s in stages if s)
                if total:
                    text += f"  (Spark tasks {done}/{total})"
            except Exception:  # the tracker may race with stage completion
                pass
        return text

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            if self._status is not None:
                self._status.update(self._text())
            else:
                print("\r" + self._text().ljust(70), end="", file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        if self._status is not None:
            self._status.stop()
        else:
            print("\r" + " " * 70 + "\r", end="", file=sys.stderr, flush=True)


def _table(headers: list[str], rows: list[list[str]], title: str, out: TextIO) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
        print(title, file=out)
        for r in [headers, *rows]:
            print("  ".join(x.rjust(w) for x, w in zip(r, widths, strict=True)), file=out)
        return
    table = Table(title=title, title_justify="left")
    for h in headers:
        table.add_column(h, justify="right" if h not in ("run", "scenario", "verdict") else "left")
    for r in rows:
        table.add_row(*r)
    Console(file=out, width=max(120, os.get_terminal_size(out.fileno()).columns)
            if out.isatty() else 200).print(table)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def print_findings(findings: Sequence[Findings], out: TextIO, examples: int = 3) -> None:
    headers = ["run", "scenario", "profile", "backend", "acked", "read",
               *SHORT.values(), "malformed", "verdict"]  # fmt: skip
    rows = []
    for v in findings:
        name = v.run_id or os.path.basename(v.path.rstrip("/"))
        rows.append(
            [name, str(v.scenario), str(v.profile), str(v.backend), str(v.acked), str(v.read)]
            + [str(v.anomalies[k].count) for k in SHORT]
            + [str(v.malformed_count), v.judged()]
        )
    _table(headers, rows, "pytest-elr history check", out)
    for v in findings:
        found = [(k, a) for k, a in v.anomalies.items() if a.count]
        if not found:
            continue
        print(f"\n{v.run_id or v.path}:", file=out)
        for kind, a in found:
            print(f"  {kind}: {a.count}", file=out)
            for e in a.examples[:examples]:
                print(f"    {json.dumps(e, separators=(', ', ': '))}", file=out)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def print_rollup(rows: Sequence[RollupRow], out: TextIO) -> None:
    headers = ["scenario", "backend", "kafka", "profile", "runs", "passes", "loss rate (95% CI)",
               *SHORT.values(), "malformed", "<minISR s", "no leader: n", "s", "max s", "lossy faults",
               "records at stake", "faults", "elections", "to leader mean s", "max s"]  # fmt: skip
    body = [
        [str(r.scenario), str(r.backend), str(r.kafka_version), str(r.profile), str(r.runs),
         str(r.passes), f"{_pct(r.loss_rate)} ({_pct(r.loss_rate_low)}-{_pct(r.loss_rate_high)})",
         *(str(r.anomalies[k]) for k in SHORT), str(r.malformed),
         _fmt(r.under_min_isr_s), str(r.unavailable_windows), _fmt(r.unavailable_s), _fmt(r.unavailable_max_s),
         str(r.lossy_faults),
         f"{r.records_at_stake} (mean {_fmt(r.records_at_stake_mean)}, max {r.records_at_stake_max or 0})",
         str(r.faults), str(r.leader_changes), _fmt(r.time_to_leader_mean_s), _fmt(r.time_to_leader_max_s)]
        for r in rows
    ]  # fmt: skip
    print(file=out)
    _table(headers, body, "rollup", out)


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("check", __doc__)
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR")
    ap.add_argument("--rollup", action="store_true", help="also roll up across runs")
    ap.add_argument("--json", metavar="OUT", help="write the findings (and rollup) as JSON; - = stdout")
    ap.add_argument("--examples", type=int, default=10, help="examples kept per anomaly kind")
    ap.add_argument("--strict", action="store_true", help="malformed lines fail the check too")
    ap.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                    help="status line on stderr (default: when stderr is a terminal)")
    args = ap.parse_args(argv)

    paths = discover(args.runs)
    if not paths:
        print("no run directories found", file=sys.stderr)
        return 2
    progress = Progress(sys.stderr.isatty() if args.progress is None else args.progress)
    progress.set("starting Spark")
    try:
        spark = get_spark()
        progress.start(spark)
        progress.set(f"reading {len(paths)} run(s)")
        try:
            loaded = load_runs(spark, paths)
        except HistoryError as e:
            progress.stop()
            print(f"error: {e}", file=sys.stderr)
            return 2
        with loaded:
            progress.set("checking")
            findings = findings_from(loaded, examples=args.examples)
            rows = None
            if args.rollup:
                progress.set("rolling up")
                rows = rollup_from(loaded, findings)
    finally:
        progress.stop()

    for v in findings:
        for m in v.malformed:
            where = f"{m['file']}:{m['line']}" if m["line"] is not None else m["file"]
            print(f"malformed: {where}: {m['error']}", file=sys.stderr)
        if v.malformed_count > len(v.malformed):
            print(f"malformed: {v.path}: {v.malformed_count - len(v.malformed)} more",
                  file=sys.stderr)
    doc = {
        "findings": [v.to_dict() for v in findings],
        "rollup": [r.to_dict() for r in rows] if rows is not None else None,
    }
    if args.json == "-":
        json.dump(doc, sys.stdout, indent=2)
        print()
    else:
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=2)
        print_findings(findings, sys.stdout)
        if rows is not None:
            print_rollup(rows, sys.stdout)
    bad = any(not v.as_expected for v in findings)
    if args.strict:
        bad = bad or any(v.malformed_count for v in findings)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
