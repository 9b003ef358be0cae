"""Mutation check of the oracle: does the suite notice when a rule of the model is wrong?

    elr mutants [--scenarios scenarios/] [--examples 200]

Each mutant (:data:`pytest_elr.model.mutants.MUTANTS`) switches one rule off. It is *killed* when
a scenario of the suite fails on it, or the property search finds a broken invariant under a
profile that must not break any.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from pytest_elr.backends.model import ModelBackend
from pytest_elr.model.mutants import MUTANTS
from pytest_elr.model.profiles import Rules
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.schema import Scenario
from pytest_elr.scenario.suite import load_suite
from pytest_elr.schedule.search import search


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="elr mutants", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
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
