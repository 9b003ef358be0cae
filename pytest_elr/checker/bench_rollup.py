"""Wall time of the rollup across many runs: ``elr bench rollup --runs 10000``.

Writes ``--runs`` small synthetic run directories (a soak's worth: 4 scenarios x 3 profiles x 2
Kafka versions, each run with sends, a lossy fault, a leaderless window and a drain that misses
records in some of the runs), then times :func:`~.rollup.rollup_runs` over all of them -- findings
and rollup in one read -- and checks the loss counts against what was written. Target: 10,000 runs
in <= 60 s on ``local[2]``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time

from pytest_elr.core.commandline import command_parser
from pytest_elr.core.history import EVENTS_FILE, META_FILE

SCENARIOS = ("last-replica-standing", "clean-elr-recovery", "balanced-unclean-recovery", "t0-t7-walkthrough")
PROFILES = ("kip966", "kafka", "legacy")
VERSIONS = ("4.1.1", "4.3.1")
RECORDS = 20


def _run(root: str, i: int, rng: random.Random) -> bool:
    """One synthetic run; True when its drain misses acknowledged records."""
    scenario, profile, version = SCENARIOS[i % 4], PROFILES[i // 4 % 3], VERSIONS[i // 12 % 2]
    lossy = profile == "legacy" and rng.random() < 0.6
    run_id = f"{scenario}-{profile}-{i:06d}"
    events = [{"t": 0.0, "type": "step", "step": "T0", "phase": "begin"},
              {"t": 0.1, "type": "observe", "step": "T0", "leader": 1, "isr": [1, 2, 3], "hwm": 0}]
    t = 0.2
    for n in range(RECORDS):
        events.append({"t": t, "type": "produce", "step": "T1", "op": "ok", "id": n, "value": f"{run_id}-{n}",
                       "acks": "all", "partition": 0, "offset": n})
        t += 0.01
    lost = rng.randint(1, 5) if lossy else 0
    events += [{"t": t + 1, "type": "fault", "step": "T2", "action": "power_off", "args": {"broker": 1}},
               {"t": t + 1.2, "type": "loss_evidence", "step": "T2", "broker": 1, "leo_before": RECORDS,
                "leo_after": RECORDS - lost - 1, "records_lost": lost + 1, "after": "power_off"},
               {"t": t + 1.5, "type": "observe", "step": "T2", "leader": None, "isr": [2], "hwm": RECORDS},
               {"t": t + 1.5 + rng.random() * 5, "type": "observe", "step": "T2", "leader": 2, "isr": [2, 3],
                "hwm": RECORDS - lost}]
    t += 8
    for n in range(lost, RECORDS):  # the drain reads what survived: the first ``lost`` are gone
        events.append({"t": t, "type": "consume", "step": "T3", "partition": 0, "offset": n,
                       "value": f"{run_id}-{n}", "reader": "drain"})
        t += 0.01
    path = os.path.join(root, run_id)
    os.makedirs(path)
    meta = {"schema": "pytest-elr/history/1", "run_id": run_id, "scenario": scenario, "backend": "kafka",
            "profile": profile, "kafka_version": version, "topic": "t", "min_insync_replicas": 2,
            "started_at": "2026-11-23T00:00:00+00:00", "finished_at": "2026-11-23T00:01:00+00:00",
            "outcome": "passed"}
    with open(os.path.join(path, META_FILE), "w", encoding="utf-8") as f:
        json.dump(meta, f)
    with open(os.path.join(path, EVENTS_FILE), "w", encoding="utf-8") as f:
        f.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
    return lost > 0


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("bench rollup", __doc__)
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--dir", help="where to write the runs (default: a temporary directory, removed)")
    args = ap.parse_args(argv)

    from pytest_elr.checker.rollup import rollup_runs
    from pytest_elr.checker.session import SparkSettings, get_spark

    root = args.dir or tempfile.mkdtemp(prefix="pytest-elr-rollup-")
    try:
        t0 = time.monotonic()
        rng = random.Random(966)
        lossy = sum(_run(root, i, rng) for i in range(args.runs))
        write_s = time.monotonic() - t0
        t0 = time.monotonic()
        spark = get_spark(SparkSettings(master=args.master, driver_memory="3g"))
        start_s = time.monotonic() - t0
        paths = sorted(os.path.join(root, name) for name in os.listdir(root))
        t0 = time.monotonic()
        findings, rows = rollup_runs(paths, spark=spark, examples=1)
        rollup_s = time.monotonic() - t0
        found = sum(r.runs_with_loss for r in rows)
        print(f"{args.runs:,} runs written in {write_s:.1f} s; Spark {args.master} started in {start_s:.1f} s; "
              f"findings + rollup of {len(findings):,} runs into {len(rows)} groups: {rollup_s:.1f} s "
              f"(target <= 60 s); runs with loss {found} (written {lossy}); "
              f"load average {os.getloadavg()[0]:.1f}")
        for r in rows[:3]:
            print(f"  {r.scenario} [{r.profile}] {r.kafka_version}: {r.runs_with_loss}/{r.runs} lost, "
                  f"{100 * r.loss_rate_low:.0f}-{100 * r.loss_rate_high:.0f}%, no leader {r.unavailable_windows}x "
                  f"{r.unavailable_s:.0f} s, at stake {r.records_at_stake}")
        return 0 if found == lossy and len(findings) == args.runs else 1
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
