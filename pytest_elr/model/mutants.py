"""Mutation check of the oracle: does the suite notice when a rule of the model is wrong?

    python -m pytest_elr.model.mutants [--scenarios scenarios/] [--examples 200]

Each mutant switches one rule off. It is *killed* when a scenario of the suite fails on it, or
the property search finds a broken invariant under a profile that must not break any.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from pytest_elr.backends.model import ModelBackend
from pytest_elr.model.profiles import Rules
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario
from pytest_elr.scenario.schema import Scenario
from pytest_elr.schedule.search import search

MUTANTS: dict[str, Rules] = {
    "elr-not-cleared-at-min-isr": Rules(clear_elr_at_min_isr=False),
    "hwm-advances-under-min-isr": Rules(hwm_requires_min_isr=False),
    "unclean-broker-kept-in-elr": Rules(drop_unclean_from_elr=False),
    "fenced-elr-member-elected": Rules(elect_only_unfenced=False),
    "stale-broker-epoch-accepted": Rules(check_broker_epoch=False),
    "min-isr-not-capped-at-rf": Rules(cap_min_isr_at_rf=False),
}


@dataclass
class MutantResult:
    name: str
    killed_by: str | None


def check_mutant(name: str, rules: Rules, scenarios: list[Scenario], examples: int) -> MutantResult:
    for scenario in scenarios:
        for profile in scenario.profiles:
            result = run_scenario(scenario, ModelBackend(rules=rules), profile)
            if not result.passed:
                return MutantResult(name, f"scenario {scenario.name} [{profile}]")
    if examples:
        for profile in ("kip966", "kafka"):
            if search(profile, max_examples=examples, rules=rules) is not None:
                return MutantResult(name, f"property search [{profile}]")
    return MutantResult(name, None)


def load_suite(directory: Path) -> list[Scenario]:
    files = sorted(p for p in directory.rglob("*.elr.y*ml"))
    return [load_scenario(p) for p in files]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_elr.model.mutants")
    parser.add_argument("--scenarios", type=Path, default=Path("scenarios"))
    parser.add_argument("--examples", type=int, default=200,
                        help="schedules per profile for mutants the scenarios do not kill")
    args = parser.parse_args(argv)
    suite = load_suite(args.scenarios)
    results = [check_mutant(n, r, suite, args.examples) for n, r in MUTANTS.items()]
    for r in results:
        print(f"{r.name:<32} {'killed by ' + r.killed_by if r.killed_by else 'SURVIVED'}")
    killed = sum(r.killed_by is not None for r in results)
    print(f"killed {killed} / {len(results)}")
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
