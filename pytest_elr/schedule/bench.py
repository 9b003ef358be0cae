"""``elr bench suite`` and ``elr bench search``: speed of the suite on the model and of the
property search, each printed beside its target.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pytest_elr.backends.model import ModelBackend
from pytest_elr.core.commandline import command_parser
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.suite import SHIPPED, NoScenariosError, load_suite
from pytest_elr.schedule.search import search


def suite_seconds(directory: Path) -> tuple[float, int]:
    """Seconds to load and run every scenario under ``directory`` that runs on the model, and the
    runs made (a scenario for real clusters only, ``backends: {only: [kafka]}``, is left out)."""
    started = time.perf_counter()
    suite = load_suite(directory)
    runs = 0
    for scenario in (s for s in suite if s.runs_on("model")):
        for profile in scenario.profiles:
            assert run_scenario(scenario, ModelBackend(), profile).passed
            runs += 1
    return time.perf_counter() - started, runs


def schedules_per_minute(examples: int = 600) -> float:
    started = time.perf_counter()
    search("kip966", max_examples=examples)
    return examples / (time.perf_counter() - started) * 60


def suite_main(argv: list[str] | None = None) -> int:
    parser = command_parser("bench suite",
                            description="Wall time of the scenario suite on the model (load + run).")
    parser.add_argument("--scenarios", type=Path, default=SHIPPED,
                        help="default: the KIP suite this package ships")
    args = parser.parse_args(argv)
    try:
        seconds, runs = suite_seconds(args.scenarios)
    except NoScenariosError as exc:
        print(f"elr bench suite: {exc}", file=sys.stderr)
        return 2
    print(f"scenario suite on the model: {runs} runs in {seconds:.3f} s (target < 1 s)")
    return 0


def search_main(argv: list[str] | None = None) -> int:
    parser = command_parser("bench search",
                            description="Property-search schedules per minute under kip966.")
    parser.add_argument("--examples", type=int, default=600, help="schedules to time")
    args = parser.parse_args(argv)
    rate = schedules_per_minute(args.examples)
    print(f"property search: {rate:,.0f} schedules per minute under kip966 (target >= 3,000)")
    return 0
