"""Every named mutant of the oracle is killed by the scenario suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_elr.model.mutants import MUTANTS
from pytest_elr.scenario.suite import load_suite
from pytest_elr.schedule.mutants import check_mutant

SUITE = load_suite(Path(__file__).resolve().parents[1] / "scenarios")


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_is_killed(name: str) -> None:
    result = check_mutant(name, MUTANTS[name], SUITE, examples=100)
    assert result.killed_by is not None, f"mutant {name} survived the suite"


def test_unmutated_model_passes_the_suite() -> None:
    from pytest_elr.model.profiles import Rules

    assert check_mutant("none", Rules(), SUITE, examples=0).killed_by is None
