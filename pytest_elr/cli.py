"""``elr``: every tool of pytest-elr behind one command (also ``python -m pytest_elr``).

    elr <command> [arguments]       elr <command> --help       elr --version

Each command is a ``main(argv) -> exit code`` in the package it measures or drives, imported only
when that command runs: listing the commands needs neither PySpark nor Docker.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import NamedTuple

from pytest_elr.core.reader import did_you_mean


class Command(NamedTuple):
    target: str  # "module:function"; the function takes argv (list[str] | None) and returns an exit code
    summary: str


# Commands of two words ("bench model") share their first word as a group: ``elr bench`` lists them.
COMMANDS: dict[str, Command] = {
    "images": Command("pytest_elr.sut.images:main", "build the container images (or print their tag)"),
    "search": Command("pytest_elr.schedule.__main__:main", "property search: random fault schedules on the model"),
    "mutants": Command("pytest_elr.schedule.mutants:main", "mutation check: does the suite kill each broken rule?"),
    "compare": Command("pytest_elr.schedule.compare:main", "the suite and generated schedules on the model and Kafka"),
    "explore": Command("pytest_elr.schedule.explore:main",
                       "random schedules on Kafka, the model at every step; findings confirmed and shrunk"),
    "soak": Command("pytest_elr.schedule.soak:main", "repeat the negative-control pair or the suite on Kafka"),
    "kafka-coverage": Command("pytest_elr.schedule.kafka_coverage:main",
                              "JaCoCo coverage of Kafka's own ELR code by the scenarios, on a real cluster"),
    "kafka-mutants list": Command("pytest_elr.schedule.kafka_mutants:list_main",
                                  "mutants of Kafka's ELR code on lines the suite covers"),
    "kafka-mutants run": Command("pytest_elr.schedule.kafka_mutants:run_main",
                                 "plant each in a real cluster, run the scenarios covering it: killed or survived"),
    "kafka-mutants report": Command("pytest_elr.schedule.kafka_mutants:report_main",
                                    "one table and HTML page of a campaign's results (shards merged)"),
    "kafka-mutants unit": Command("pytest_elr.schedule.kafka_unit_tests:unit_main",
                                  "the same mutants graded by Kafka's own unit tests (a release that publishes them)"),
    "kafka-mutants side-by-side": Command("pytest_elr.schedule.kafka_unit_tests:side_by_side_main",
                                          "per method: killed by Kafka's unit tests, the suite, both, neither"),
    "check": Command("pytest_elr.checker.__main__:main", "the Spark checker's verdicts on run directories"),
    "spark serve": Command("pytest_elr.checker.serve:main",
                           "a warm Spark Connect server for pytest sessions (foreground; Ctrl-C stops it)"),
    "report": Command("pytest_elr.report.__main__:main", "the HTML report of some runs"),
    "bench model": Command("pytest_elr.model.bench:main", "model steps per second"),
    "bench suite": Command("pytest_elr.schedule.bench:suite_main", "wall time of the scenario suite on the model"),
    "bench search": Command("pytest_elr.schedule.bench:search_main", "property-search schedules per minute"),
    "bench checker": Command("pytest_elr.checker.bench:main", "the Spark checker against DuckDB, synthetic runs"),
    "bench rollup": Command("pytest_elr.checker.bench_rollup:main", "the rollup across 10,000 synthetic runs"),
    "bench concurrency": Command("pytest_elr.schedule.soak:bench_main",
                                 "the suite on real Kafka one cluster at a time beside --elr-parallel auto"),
    "bench cluster": Command("pytest_elr.faults.bench:main", "a real cluster: start, cut, ISR shrink, fencing, memory"),
    "bench power-off": Command("pytest_elr.faults.bench_power_off:main",
                               "Kafka on the FUSE layer vs a plain dir; power off"),
    "bench kafka-agents": Command("pytest_elr.schedule.bench_kafka_agents:main",
                                  "cluster start with JaCoCo or a planted mutant vs plain"),
    "bench reads": Command("pytest_elr.workload.bench:main",
                           "a topic of many partitions: one DescribeTopicPartitions; one consumer vs one each"),
    "bench lazyfs": Command("pytest_elr.lazyfs.bench:main", "fsync'd appends: the FUSE layer vs a plain directory"),
}

HELP = ("-h", "--help")
VERSION = ("-V", "--version")
#: a module an optional part needs -> the extra that installs it (pyproject.toml)
EXTRAS = {"pyspark": "spark", "pyarrow": "spark", "rich": "spark", "pyfuse3": "lazyfs", "trio": "lazyfs",
          "duckdb": "bench"}


def package_version() -> str:
    try:
        return version("pytest-elr")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def usage(group: str = "") -> str:
    """The commands (those of ``group`` only, when given), one line each."""
    names = [n for n in COMMANDS if n.startswith(group + " ")] if group else list(COMMANDS)
    width = max(map(len, names))
    prefix = f"elr {group} " if group else "elr "
    lines = [f"usage: {prefix}<command> [arguments]   ({prefix}<command> --help: its own options)", "", "commands:"]
    lines += [f"  {n:<{width}}  {COMMANDS[n].summary}" for n in names]
    return "\n".join(lines)


def run(command: Command, argv: list[str], name: str = "") -> int:
    module, function = command.target.split(":")
    try:
        entry = getattr(importlib.import_module(module), function)
    except ModuleNotFoundError as exc:  # an optional part not installed: say which, not a traceback
        missing = (exc.name or "").split(".")[0]
        if missing not in EXTRAS:
            raise
        print(f"elr {name}: needs {missing}, which is not installed.\n"
              f"fix: pip install 'pytest-elr[{EXTRAS[missing]}]'", file=sys.stderr)
        return 2
    return entry(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] and args[0] in VERSION:
        print(f"elr (pytest-elr) {package_version()}")
        return 0
    for name, command in COMMANDS.items():
        words = name.split()
        if args[:len(words)] == words:
            return run(command, args[len(words):], name)
    groups = {n.split()[0] for n in COMMANDS if " " in n}
    group = args[0] if args and args[0] in groups else ""
    rest = args[1:] if group else args
    if rest[:1] and rest[0] in HELP:
        print(usage(group))
        return 0
    if rest:
        words = sorted({n.split()[-1] if group else n.split()[0] for n in COMMANDS if not group or n.startswith(group)})
        print(f"elr: unknown command: {' '.join(args)}{did_you_mean(rest[0], words)}", file=sys.stderr)
    print(usage(group), file=sys.stderr)
    return 2
