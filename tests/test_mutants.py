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
    "tolerance-counts-crashes": "rule check design notes 5.1.2 / KIP-966 Motivation",
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


def test_a_break_kafka_shows_by_itself_kills_no_mutant(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search under ``kafka`` can find Kafka's own loss within the tolerance (the lossy last
    leader elected, tests/test_property_search.py): that is no sign of a broken rule. A break the
    unmutated profile does not show on the same schedule still kills."""
    from pytest_elr.actions import Action, Cut, Produce, ReplaceDisk, SetMinIsr
    from pytest_elr.core.nodes import isolation_links
    from pytest_elr.model.profiles import Rules
    from pytest_elr.schedule import mutants

    brokers = (0, 1, 2)
    lossy_last_leader = [Produce(count=1, acks="all"), Cut(links=isolation_links(0, "all", brokers)),
                         Cut(links=isolation_links(1, "all", brokers)), SetMinIsr(value=3), ReplaceDisk(broker=2)]
    found: list[Action] = lossy_last_leader

    def search(profile: str, max_examples: int, rules: Rules) -> tuple[list[Action], list[str]] | None:
        return (found, ["invariant no_acked_loss broken"]) if profile == "kafka" else None

    monkeypatch.setattr(mutants, "search", search)
    assert check_mutant("none", Rules(), [], examples=1).killed_by is None
    found = [Produce(count=1, acks="all")]  # breaks nothing on the unmutated model
    assert check_mutant("none", Rules(), [], examples=1).killed_by == \
        "property search [kafka]: invariant no_acked_loss broken"
