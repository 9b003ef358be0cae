"""``python -m pytest_elr.soak``: the negative-control pair, N times, on real Kafka.

    python -m pytest_elr.soak --runs 10 [--scenario scenarios/kip966_last_replica_standing.elr.yaml]

Runs the scenario under ``kafka`` (ELR on) and ``legacy`` (ELR off, same binary) alternately and
prints how often the fault bit, how often loss was found, and every run that did not give the
verdict the scenario expects. Exit code 1 when any run did not.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from pytest_elr.backends.kafka import KafkaBackend, close_pool
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario
from pytest_elr.scenario.verdict import CHECKERS

DEFAULT = Path("scenarios/kip966_last_replica_standing.elr.yaml")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_elr.soak", description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--scenario", type=Path, default=DEFAULT)
    parser.add_argument("--profiles", default="kafka,legacy")
    parser.add_argument("--checker", choices=sorted(CHECKERS), default="spark")
    parser.add_argument("--history-dir", type=Path, default=Path(".elr-history/soak"))
    args = parser.parse_args(argv)
    scenario = load_scenario(args.scenario)
    profiles = args.profiles.split(",")
    counts: dict[str, Counter[str]] = {p: Counter() for p in profiles}
    started = time.monotonic()
    try:
        for i in range(args.runs):
            for profile in profiles:
                r = run_scenario(scenario, KafkaBackend(), profile, args.history_dir, CHECKERS[args.checker])
                c = counts[profile]
                c["runs"] += 1
                c["fault bit"] += r.fault_bit
                c["loss found"] += bool(r.verdict and r.verdict.lost_count)
                c["as expected"] += r.passed
                status = "ok" if r.passed else "UNEXPECTED"
                lost = r.verdict.lost_count if r.verdict else "?"
                print(f"run {i + 1:>3} {profile:<7} bit={r.fault_bit!s:<5} lost={lost!s:<4} {status}"
                      + ("" if r.passed else f"\n    {r.message.splitlines()[0]}"), flush=True)
    finally:
        close_pool()
    print(f"\n{scenario.name}: {time.monotonic() - started:.0f} s")
    for profile, c in counts.items():
        print(f"  {profile:<7} runs {c['runs']}, fault bit {c['fault bit']}/{c['runs']}, "
              f"loss found {c['loss found']}/{c['runs']}, verdict as expected {c['as expected']}/{c['runs']}")
    return 0 if all(c["as expected"] == c["runs"] for c in counts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
