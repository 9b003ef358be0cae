"""Every named mutant of the oracle is killed, by the check aimed at it; a kill attributed to an
invariant goes once that invariant is silenced (so the attribution is proven, not assumed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_elr.model.mutants import MUTANTS
from pytest_elr.scenario.suite import load_suite
from pytest_elr.schedule.mutants import check_mutant

SUITE = load_suite(Path(__file__).resolve().parents[1] / "scenarios")

#: the mutant, the check that must kill it (an invariant, a scenario's expectation of a field, a
#: negative control or a rule check), and the start of where: the scenario and profile whose
#: expectation or invariant fails first, the negative control whose invariant goes silent, the rule
#: check, or the property search
KILLED_BY = {
    "elr-not-cleared-at-min-isr": ("expectation elr", "scenario kip966-acks-0-1-comparison [kip966]: step heal"),
    "elr-kept-after-election": ("expectation elr", "scenario min-isr-change-leaderless [kip966]: step broker-2-back"),
    "hwm-advances-under-min-isr": (
        "expectation hwm", "scenario design-5.2.2-clean-elr-recovery [kip966]: step shrink-3"),
    "unclean-broker-kept-in-elr":
        ("expectation leader", "scenario design-5.3.3-balanced-unclean-recovery [kip966]: step broker-2-back"),
    "fenced-elr-member-elected":
        ("expectation leader", "scenario design-balanced-recovery-inspects-last-known-elr [kip966]: step outage"),
    "fenced-last-known-leader-elected":
        ("expectation leader", "scenario kafka-19522-last-known-leader [kafka]: step registered-fenced"),
    "balanced-inspects-every-replica":
        ("expectation leader", "scenario design-balanced-recovery-inspects-last-known-elr [kip966]: step quorum-back"),
    "stale-broker-epoch-accepted": ("expectation rejected", "scenario kip903-stale-broker-epoch [kip966]: step T3"),
    "min-isr-not-capped-at-rf": (
        "expectation produce", "scenario kip966-effective-min-isr [kip966]: step both-replicas"),
    "tolerance-counts-crashes": (
        "negative control crashes-then-last-replica-loses",
        "negative control crashes-then-last-replica-loses [legacy]: no_acked_loss did not fire"),
    "tolerance-never-resets": (
        "negative control caught-up-then-last-replica-loses",
        "negative control caught-up-then-last-replica-loses [legacy]: no_acked_loss did not fire"),
    "lagging-followers-leave-together": (
        "rule check design notes 5.2.1 Case F: lagging followers leave on their own",
        "rule check design notes 5.2.1 Case F"),
    "hwm-ignores-maximal-isr": (
        "rule check KIP-966 HWM waits for the maximal ISR",
        "rule check KIP-966 HWM waits for the maximal ISR"),
    "fenced-follower-kept-in-isr": ("invariant isr_unfenced", "property search [kip966]"),
    "elr-takes-every-outsider":
        ("expectation elr", "scenario design-balanced-recovery-inspects-last-known-elr [kip966]: step outage"),
    "elr-leader-not-in-isr": (
        "expectation isr", "scenario design-5.2.2-clean-elr-recovery [kip966]: step leader-power-off"),
    "unclean-election-not-recovering": (
        "invariant unclean_election_recovers",
        "scenario design-5.3.3-balanced-unclean-recovery [kip966]: step broker-3-back"),
    "acks-all-taken-under-min-isr": (
        "expectation produce", "scenario kip966-acks-0-1-comparison [kip966]: step acks-all"),
}

EXAMPLES = 100


def test_every_mutant_names_its_killer() -> None:
    assert set(KILLED_BY) == set(MUTANTS)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_is_killed_by_the_check_aimed_at_it(name: str) -> None:
    result = check_mutant(name, MUTANTS[name], SUITE, examples=EXAMPLES)
    assert result.killed_by is not None, f"mutant {name} survived the suite"
    check, where = KILLED_BY[name]
    assert (result.check, result.killed_by[: len(where)]) == (check, where), result.killed_by


@pytest.mark.parametrize("name", sorted(n for n, (check, _) in KILLED_BY.items() if check.startswith("invariant ")))
def test_a_kill_attributed_to_an_invariant_goes_when_it_is_silenced(name: str) -> None:
    invariant = KILLED_BY[name][0].removeprefix("invariant ")
    result = check_mutant(name, MUTANTS[name], SUITE, examples=EXAMPLES, silenced=[invariant])
    assert result.check != f"invariant {invariant}", result.killed_by


def test_unmutated_model_passes_the_suite() -> None:
    from pytest_elr.model.profiles import Rules

    assert check_mutant("none", Rules(), SUITE, examples=0).killed_by is None
