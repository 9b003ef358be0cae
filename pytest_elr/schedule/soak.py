"""``elr soak``: repeat runs on real Kafka and count what varies.

    elr soak --runs 10 [--scenario scenarios/kip966_last_replica_standing.elr.yaml]
    elr soak --suite --runs 5 [scenarios/]
    elr soak --suite --runs 1 --parallel 1,auto [scenarios/]   (also: elr bench concurrency)

The first form runs the scenario under ``kafka`` (ELR on) and ``legacy`` (ELR off, same binary)
alternately and prints how often the fault bit, how often loss was found, the disagreements with
the model and the declared differences of each run, and every run that did not give the verdict
the scenario expects. The second runs the whole suite under pytest N times in a row (a fresh
process each time) and prints, per run, the wall time, the outcomes, the disagreements with the
model and the declared differences, and the Docker objects left behind; then every scenario whose
outcome or verdict varied (flaky) and the per-scenario times. With ``--parallel 1,auto`` each
round runs the suite at each concurrency in turn and the summary puts every level's wall time beside
the first's (``elr bench concurrency`` is that, one round): verdicts must agree across levels too.
Exit code 1 when anything was unexpected, flaky or left behind.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pytest_elr.backends.kafka import KafkaBackend
from pytest_elr.checker import CHECKERS
from pytest_elr.core.commandline import command_parser
from pytest_elr.core.concurrency import run_to_its_end, sigterm_interrupts
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario
from pytest_elr.scenario.suite import SHIPPED, NoScenariosError, scenario_files

DEFAULT = SHIPPED / "kip966_last_replica_standing.elr.yaml"


def _leftovers() -> dict[str, int]:
    """Docker objects of this project still present, and FUSE mounts on the host."""
    from pytest_elr.sut.resources import LABEL, docker_client

    client = docker_client()
    label = {"label": LABEL}
    mounts = sum(" fuse" in line and "pytest_elr" in line for line in Path("/proc/mounts").read_text().splitlines())
    return {"containers": len(client.api.containers(all=True, filters=label)),
            "networks": len(client.api.networks(filters=label)),
            "volumes": len((client.api.volumes(filters=label) or {}).get("Volumes") or []),
            "fuse mounts": mounts}


def _junit(path: Path) -> dict[str, tuple[str, str, float, int, int]]:
    """test id -> (outcome, verdict, seconds, disagreements, declared differences) from pytest's JUnit
    XML: the run's properties are in its test case (xunit1) or the suite's, named after it (xunit2)."""
    root = ET.parse(path).getroot()
    suite_props = {p.get("name", ""): p.get("value", "") for p in root.iter("property")}
    out = {}
    for case in root.iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
        props = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        for key, value in suite_props.items():  # xunit2: "<path>::<test>::<key>"
            node, _, prop = key.rpartition("::")
            where, _, test = node.rpartition("::")
            if test == case.get("name") and where.replace("/", ".") == case.get("classname"):
                props[prop] = value
        out[name] = (outcome, props.get("verdict", ""), float(case.get("time", 0)),
                     int(props.get("disagreements") or 0), int(props.get("declared_differences") or 0))
    return out


def soak_suite(runs: int, paths: list[Path], out_dir: Path, levels: Sequence[str] = ("auto",)) -> int:
    """The suite ``runs`` times at each concurrency of ``levels`` (``--elr-parallel``), the levels
    alternating within each round so that a drift of the machine hits them alike; every verdict must
    agree across all runs of all levels."""
    out_dir.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, tuple[str, str, float, int, int]]] = []
    walls: dict[str, list[float]] = {level: [] for level in levels}
    left: list[dict[str, int]] = []
    for i in range(1, runs + 1):
        for level in levels:
            tag = f"run-{i}" if levels == ("auto",) else f"run-{i}-parallel-{level}"
            xml = out_dir / f"{tag}.xml"
            t0 = time.monotonic()
            with sigterm_interrupts():
                proc = run_to_its_end([sys.executable, "-m", "pytest", *paths, "-q", "-p", "no:randomly",
                                       "-p", "no:cacheprovider", f"--junitxml={xml}", f"--elr-parallel={level}",
                                       f"--elr-history-dir={out_dir / tag}"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            walls[level].append(time.monotonic() - t0)
            results.append(_junit(xml) if xml.exists() else {})
            left.append(_leftovers())
            counts = Counter(outcome for outcome, *_ in results[-1].values())
            disagreements = sum(r[3] for r in results[-1].values())
            declared = sum(r[4] for r in results[-1].values())
            print(f"run {i} (--elr-parallel {level}): {walls[level][-1]:.0f} s, exit {proc.returncode}, "
                  + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
                  + f"; disagreements with the model {disagreements}, declared differences {declared}"
                  + f"; left behind: {sum(left[-1].values())} ({', '.join(f'{n} {k}' for k, n in left[-1].items())})",
                  flush=True)
            if proc.returncode not in (0, 1) or not xml.exists():
                print("  " + "\n  ".join((proc.stdout + proc.stderr).strip().splitlines()[-15:]), flush=True)
    ids = sorted({k for r in results for k in r})
    flaky = [k for k in ids if len({r.get(k, ("missing", "", 0, 0, 0))[:2] for r in results}) > 1]
    failed = [k for k in ids if any(r.get(k, ("missing",))[0] in ("failed", "error", "missing") for r in results)]
    print(f"\n{len(results)} runs of {len(ids)} tests: flaky {len(flaky)}, failed in some run {len(failed)}, "
          f"left behind {sum(sum(x.values()) for x in left)}")
    base = statistics.median(walls[levels[0]])
    for level in levels:
        w = walls[level]
        print(f"  --elr-parallel {level}: wall time per run min {min(w):.0f} s, median {statistics.median(w):.0f} s, "
              f"max {max(w):.0f} s" + (f"; {base / statistics.median(w):.2f}x the speed of --elr-parallel "
                                        f"{levels[0]}" if level != levels[0] else ""))
    for k in flaky:
        print(f"  flaky: {k}: " + " | ".join("/".join(r.get(k, ('missing', ''))[:2]) for r in results))
    print("per scenario run (median s over the runs):")
    for k in ids:
        times = [r[k][2] for r in results if k in r]
        outcome, verdict, *_ = results[-1].get(k, ("missing", "", 0.0, 0, 0))
        differing = sum(r[k][3] for r in results if k in r)
        declared = sum(r[k][4] for r in results if k in r)
        print(f"  {statistics.median(times):7.1f}  {k}  [{verdict or outcome}]"
              + (f" disagreements {differing}" if differing else "")
              + (f" declared differences {declared}" if declared else ""))
    return 1 if flaky or failed or any(sum(x.values()) for x in left) else 0


def parse_levels(text: str) -> tuple[str, ...]:
    """``1,auto`` -> ("1", "auto"): each ``auto`` or a positive number, at least one."""
    levels = tuple(part.strip() for part in text.split(",") if part.strip())
    bad = [p for p in levels if p != "auto" and not (p.isdigit() and int(p) >= 1)]
    if not levels or bad:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of auto or numbers >= 1, got {text!r}")
    return levels


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("soak", __doc__)
    parser.add_argument("--suite", action="store_true", help="repeat the whole suite under pytest")
    parser.add_argument("paths", nargs="*", type=Path, default=[SHIPPED],
                        help="with --suite: what pytest runs (default: the KIP suite this package ships)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--parallel", type=parse_levels, default=("auto",), metavar="LEVELS",
                        help="with --suite: --elr-parallel of each run; several (1,auto) alternate within each "
                             "round and are timed against the first (default: auto)")
    parser.add_argument("--scenario", type=Path, default=DEFAULT)
    parser.add_argument("--profiles", default="kafka,legacy")
    parser.add_argument("--checker", choices=sorted(CHECKERS), default="spark")
    parser.add_argument("--history-dir", type=Path, default=Path(".elr-history/soak"))
    args = parser.parse_args(argv)
    try:  # nothing to soak is said before any cluster starts
        for path in args.paths if args.suite else [args.scenario]:
            scenario_files(path)
    except NoScenariosError as exc:
        print(f"elr soak: {exc}", file=sys.stderr)
        return 2
    if args.suite:
        return soak_suite(args.runs, args.paths, args.history_dir, args.parallel)
    scenario = load_scenario(args.scenario)
    profiles = args.profiles.split(",")
    counts: dict[str, Counter[str]] = {p: Counter() for p in profiles}
    started = time.monotonic()
    pool = KafkaBackend.new_session()
    try:
        for i in range(args.runs):
            for profile in profiles:
                c = counts[profile]
                c["runs"] += 1
                try:
                    r = run_scenario(scenario, KafkaBackend(session=pool), profile, args.history_dir,
                                     CHECKERS[args.checker])
                except Exception as exc:  # a harness error: counted, and the next run gets new clusters
                    c["harness errors"] += 1
                    print(f"run {i + 1:>3} {profile:<7} HARNESS ERROR {type(exc).__name__}: {exc}", flush=True)
                    pool.close()
                    continue
                c["fault bit"] += r.fault_bit == "yes"
                c["loss found"] += bool(r.verdict and r.verdict.lost_count)
                c["as expected"] += r.passed
                c["disagreements"] += len(r.disagreements)
                c["declared differences"] += len(r.declared)
                status = "ok" if r.passed else "UNEXPECTED"
                lost = r.verdict.lost_count if r.verdict else "?"
                print(f"run {i + 1:>3} {profile:<7} bit={r.fault_bit!s:<5} lost={lost!s:<4} "
                      f"disagreements={len(r.disagreements)} declared={len(r.declared)} {status}"
                      + ("" if r.passed else f"\n    {r.message.splitlines()[0]}"), flush=True)
    finally:
        pool.close()
    print(f"\n{scenario.name}: {time.monotonic() - started:.0f} s")
    for profile, c in counts.items():
        print(f"  {profile:<7} runs {c['runs']}, fault bit {c['fault bit']}/{c['runs']}, "
              f"loss found {c['loss found']}/{c['runs']}, verdict as expected {c['as expected']}/{c['runs']}, "
              f"disagreements {c['disagreements']}, declared differences {c['declared differences']}, "
              f"harness errors {c['harness errors']}")
    return 0 if all(c["as expected"] == c["runs"] for c in counts.values()) else 1


def bench_main(argv: list[str] | None = None) -> int:
    """``elr bench concurrency``: the suite one cluster at a time beside concurrent runs, same session."""
    parser = command_parser("bench concurrency", "The suite on real Kafka at each --elr-parallel level in turn "
                            "(the first is the baseline), with the verdicts compared across levels.")
    parser.add_argument("paths", nargs="*", type=Path, default=[SHIPPED],
                        help="what pytest runs (default: the KIP suite this package ships)")
    parser.add_argument("--runs", type=int, default=1, help="rounds (each runs every level once)")
    parser.add_argument("--parallel", type=parse_levels, default=("1", "auto"), metavar="LEVELS",
                        help="comma-separated --elr-parallel levels, the first is the baseline (default: 1,auto)")
    parser.add_argument("--history-dir", type=Path, default=Path(".elr-history/bench-concurrency"))
    args = parser.parse_args(argv)
    try:
        for path in args.paths:
            scenario_files(path)
    except NoScenariosError as exc:
        print(f"elr bench concurrency: {exc}", file=sys.stderr)
        return 2
    return soak_suite(args.runs, args.paths, args.history_dir, args.parallel)


if __name__ == "__main__":
    sys.exit(main())
