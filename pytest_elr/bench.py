"""``python -m pytest_elr.bench``: speed of the model, the suite and the property search.

Prints each figure beside its target and, as a same-run baseline, the cost of the cheapest
thing of the same kind (a ``wait`` step: one settle of an unchanged model).
"""

from __future__ import annotations

import time
from pathlib import Path

from pytest_elr.actions import Cut, Heal, Produce, Wait
from pytest_elr.backends.model import ModelBackend
from pytest_elr.core.nodes import isolation_links
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.mutants import load_suite
from pytest_elr.model.profiles import get_profile
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.schedule.search import search


def suite_seconds(directory: Path) -> tuple[float, int]:
    started = time.perf_counter()
    suite = load_suite(directory)
    runs = 0
    for scenario in suite:
        for profile in scenario.profiles:
            assert run_scenario(scenario, ModelBackend(), profile).passed
            runs += 1
    return time.perf_counter() - started, runs


def steps_per_second(n: int = 20_000) -> tuple[float, float]:
    brokers = (0, 1, 2)
    m = ModelCluster(brokers, list(brokers), 2, get_profile("kip966"))
    actions = [Produce(count=1), Cut(links=isolation_links(1, "brokers", brokers)), Produce(count=1),
               Heal(links=None)]
    started = time.perf_counter()
    for i in range(n):
        m.apply(actions[i % len(actions)])
    faults = n / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in range(n):
        m.apply(Wait(seconds=0))
    idle = n / (time.perf_counter() - started)
    return faults, idle


def schedules_per_minute(examples: int = 600) -> float:
    started = time.perf_counter()
    search("kip966", max_examples=examples)
    return examples / (time.perf_counter() - started) * 60


def main() -> None:
    seconds, runs = suite_seconds(Path("scenarios"))
    print(f"scenario suite on the model: {runs} runs in {seconds:.3f} s (target < 1 s)")
    faults, idle = steps_per_second()
    print(f"model steps per second: {faults:,.0f} with faults (target >= 20,000); "
          f"idle settle {idle:,.0f}/s; ratio {faults / idle:.2f}")
    rate = schedules_per_minute()
    print(f"property search: {rate:,.0f} schedules per minute under kip966 (target >= 3,000)")


if __name__ == "__main__":
    main()
