"""Every named mutant of the oracle is killed, by the check aimed at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_elr.model.mutants import MUTANTS
from pytest_elr.scenario.suite import load_suite
from pytest_elr.schedule.mutants import check_mutant

SUITE = load_suite(Path(__file__).resolve().parents[1] / "scenarios")

#: the mutant, and the start of what must kill it: the scenario and profile whose expectation or
#: invariant fails first, the negative control whose invariant goes silent, or the rule check
KILLED_BY = {
    "elr-not-cleared-at-min-isr": "scenario kip966-acks-0-1-comparison [kip966]: step heal",
    "elr-kept-after-election": "scenario min-isr-change-leaderless [kip966]: step broker-2-back",
    "hwm-advances-under-min-isr": "scenario design-5.2.2-clean-elr-recovery [kip966]: step shrink-3",
    # a negative control: its loss explains the invariants about data, not unclean_exclusion
    "unclean-broker-kept-in-elr":
        "scenario design-balanced-recovery-inspects-last-known-elr [kip966]: step quorum-back",
    "fenced-elr-member-elected": "scenario design-balanced-recovery-inspects-last-known-elr [kip966]: step outage",
    "fenced-last-known-leader-elected": "scenario kafka-19522-last-known-leader [kafka]: step registered-fenced",
    "balanced-inspects-every-replica":
        "scenario design-balanced-recovery-inspects-last-known-elr [kip966]: step quorum-back",
    "stale-broker-epoch-accepted": "scenario kip903-stale-broker-epoch [kip966]: step T3",
    "min-isr-not-capped-at-rf": "scenario kip966-effective-min-isr [kip966]: step both-replicas",
    "tolerance-counts-crashes": "negative control crashes-then-last-replica-loses [legacy]: no_acked_loss did not fire",
    "tolerance-never-resets": "negative control caught-up-then-last-replica-loses [legacy]: no_acked_loss did not fire",
    "lagging-followers-leave-together": "rule check design notes 5.2.1 Case F",
}


def test_every_mutant_names_its_killer() -> None:
    assert set(KILLED_BY) == set(MUTANTS)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_is_killed_by_the_check_aimed_at_it(name: str) -> None:
    result = check_mutant(name, MUTANTS[name], SUITE, examples=100)
    assert result.killed_by is not None, f"mutant {name} survived the suite"
    assert result.killed_by.startswith(KILLED_BY[name]), result.killed_by


def test_unmutated_model_passes_the_suite() -> None:
    from pytest_elr.model.profiles import Rules

    assert check_mutant("none", Rules(), SUITE, examples=0).killed_by is None
