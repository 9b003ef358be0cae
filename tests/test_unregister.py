"""``unregister``: the operator removes a broker's registration (UnregisterBroker). The model rule
(``ModelCluster``'s ``Unregister`` handler, the registration of a broker that was unregistered) was
read off Kafka 4.4.0 by docs/probes/unregister_broker.py; the scenario
``operator_unregisters_brokers`` stages it, and each plant below is caught at the step and field
that exist for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_backend import (
    Fake,
    ReportsRefusalsAsAccepted,
    UnregisteredListedFenced,
    UnregisteredReturnsClean,
    UnregisterSkipsElrPass,
    UnregisterSweepsNothing,
)

from pytest_elr.actions import Produce, Restart, Shutdown, UncleanElection, Unregister
from pytest_elr.core.observation import Refusal
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.profiles import get_profile
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "operator_unregisters_brokers.elr.yaml"


def cluster(profile: str = "kafka", replicas: tuple[int, ...] = (0, 1, 2)) -> ModelCluster:
    m = ModelCluster((0, 1, 2, 3), list(replicas), 2, get_profile(profile))
    m.apply(Produce(count=3))
    return m


@pytest.mark.parametrize("profile", ["kafka", "kip966", "legacy"])
def test_a_running_leader_unregistered_hands_over_and_is_shut_out(profile: str) -> None:
    m = cluster(profile, (1, 0, 2))
    assert m.apply(Unregister(broker=1)) is None
    o = m.observe()
    assert (o.leader, o.isr, o.fenced) == (0, (0, 2), ()), "out of the ISR and leadership, listed nowhere"
    m.apply(Produce(count=2))
    assert m.observe().isr == (0, 2), "a running unregistered broker does not rejoin"


def test_a_gone_elr_member_unregistered_stays_in_the_elr_and_returns_unclean() -> None:
    m = cluster()
    m.apply(Shutdown(broker=2))
    m.apply(Shutdown(broker=1))
    m.apply(Unregister(broker=1))
    o = m.observe()
    assert (o.leader, o.isr, o.elr, o.fenced) == (0, (0,), (1,), (2,))
    assert m.apply(Unregister(broker=1)) == Refusal("unregister", "BROKER_ID_NOT_REGISTERED")
    m.apply(Shutdown(broker=0))
    m.apply(Restart(broker=1))
    o = m.observe()
    assert (o.leader, o.elr) == (None, (0,)), "no record to match its clean-shutdown epoch: out of the ELR"
    assert m.unregistered == set()


def test_legacy_keeps_a_gone_last_member_in_the_isr() -> None:
    """ELR off: the last ISR member is not removed (measured: ISR [0] after 0 was unregistered)."""
    m = cluster("legacy")
    for b in (2, 1, 0):
        m.apply(Shutdown(broker=b))
    m.apply(Unregister(broker=0))
    o = m.observe()
    assert (o.leader, o.isr, o.fenced) == (None, (0,), (1, 2))


def test_the_scenario_passes_on_a_system_that_follows_the_rule() -> None:
    for profile in ("kafka", "kip966"):
        result = run_scenario(load_scenario(SCENARIO), Fake(), profile)
        assert result.passed and not result.disagreements, result.message


@pytest.mark.parametrize(("system", "step", "says"), [
    (UnregisterSweepsNothing, "running-follower-unregistered", "isr: expected [0, 2], observed [0, 1, 2]"),
    (UnregisteredListedFenced, "running-follower-unregistered", "fenced: expected [], observed [1]"),
    (ReportsRefusalsAsAccepted, "unregistered-twice",
     "refused: expected refused with BROKER_ID_NOT_REGISTERED, observed accepted"),
    (UnregisteredReturnsClean, "unregistered-back", "leader: expected none, observed 1"),
], ids=["isr-not-swept (mutant 1453)", "listed-fenced", "twice-accepted", "returns-clean"])
def test_each_plant_is_caught_at_its_step(system: type[Fake], step: str, says: str) -> None:
    result = run_scenario(load_scenario(SCENARIO), system(), "kafka")
    assert not result.passed
    assert f"step {step}" in result.message and says in result.message, result.message


def test_a_clean_shutdown_of_a_running_unregistered_broker_is_refused_not_guessed() -> None:
    from pytest_elr.model.cluster import ModelError

    m = cluster()
    m.apply(Unregister(broker=1))
    with pytest.raises(ModelError, match="unregistered, and how its clean shutdown ends"):
        m.apply(Shutdown(broker=1))


def test_a_restarted_broker_not_registered_again_still_has_its_old_registration() -> None:
    """Cut from the controller, a restarted broker cannot register again; the controller keeps its
    old (fenced) registration, which an unregister removes: not refused."""
    from pytest_elr.actions import Cut

    m = cluster()
    m.apply(Shutdown(broker=1))
    m.apply(Cut(links=((1, "controller"),)))
    m.apply(Restart(broker=1))
    assert not m.brokers[1].registered
    assert m.apply(Unregister(broker=1)) is None
    assert m.unregistered == {1}


def test_what_is_not_measured_is_refused() -> None:
    from pytest_elr.actions import BeginShutdown, HoldMetadata
    from pytest_elr.model.cluster import ModelError

    m = ModelCluster((0, 1, 2, 3), [0, 1, 2], 2, get_profile("kafka"))
    m.apply(HoldMetadata(broker=3))
    with pytest.raises(ModelError, match="metadata is held"):
        m.apply(Unregister(broker=3))
    m.apply(BeginShutdown(broker=0))
    with pytest.raises(ModelError, match="controlled shutdown"):
        m.apply(Unregister(broker=0))


UNCLEAN_ALLOWED = SCENARIO.with_name("operator_unregisters_elr_member_unclean_allowed.elr.yaml")


@pytest.mark.parametrize("profile", ["kafka", "kip966"])
def test_unregistering_an_elr_member_elects_where_the_topic_allows_unclean(profile: str) -> None:
    """The config alone elects nobody; the unregistration's ELR pass elects the replica that is back."""
    m = ModelCluster((0, 1, 2), [0, 1, 2], 2, get_profile(profile))
    m.apply(Produce(count=3))
    for b in (2, 1, 0):
        m.apply(Shutdown(broker=b))
    m.apply(Restart(broker=2))
    m.apply(UncleanElection(enabled=True, elect=False))
    assert (m.observe().leader, m.observe().elr) == (None, (0, 1)), "the config alone elects nobody"
    m.apply(Unregister(broker=0))
    o = m.observe()
    assert (o.leader, o.isr, o.elr) == (2, (2,), ())
    # without the config, nobody: 2 is in neither the ISR nor the ELR
    m = ModelCluster((0, 1, 2), [0, 1, 2], 2, get_profile(profile))
    for b in (2, 1, 0):
        m.apply(Shutdown(broker=b))
    m.apply(Restart(broker=2))
    m.apply(Unregister(broker=0))
    assert m.observe().leader is None


def test_the_elr_pass_removed_is_caught_where_it_elects() -> None:
    """Kafka mutant 1455's behaviour, planted in the system: caught at the unregistration, on the leader."""
    scenario = load_scenario(UNCLEAN_ALLOWED)
    assert run_scenario(scenario, Fake(), "kafka").passed
    result = run_scenario(scenario, UnregisterSkipsElrPass(), "kafka")
    assert not result.passed
    assert "step elr-member-unregistered" in result.message and "leader: expected 2, observed none" in result.message, \
        result.message
