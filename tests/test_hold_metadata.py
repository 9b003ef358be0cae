"""``hold_metadata``: a broker whose metadata fetches are held keeps every controlled shutdown from
finishing, and a broker in controlled shutdown is no leader candidate (the rule in
``ModelCluster._metadata_hold_bites``; the scenario ``held_metadata_shutting_down_not_elected``,
which stages docs/campaigns/4.4.0-rcm/probe_1494.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_backend import Fake, MetadataHoldIgnored, ShuttingDownBrokerElected

from pytest_elr.actions import BeginShutdown, Crash, Heal, HoldMetadata, Produce, ReplaceDisk, Restart, Shutdown
from pytest_elr.core.nodes import CONTROLLER, isolation_links
from pytest_elr.model.cluster import ModelCluster, ModelError
from pytest_elr.model.profiles import get_profile
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "held_metadata_shutting_down_not_elected.elr.yaml"
BROKERS = (0, 1, 2, 3)


def cluster(profile: str = "kafka") -> ModelCluster:
    """Partition [0, 1, 2] at min ISR 2; broker 3 holds no replica."""
    m = ModelCluster(BROKERS, [0, 1, 2], 2, get_profile(profile))
    m.apply(Produce(count=3))
    return m


def last_member_shutting_down(profile: str = "kafka") -> ModelCluster:
    """The probe's second shape: 2 and 1 gone, 3's metadata held, leader 0 shut down cleanly."""
    m = cluster(profile)
    m.apply(Shutdown(broker=2))
    m.apply(Shutdown(broker=1))
    m.apply(HoldMetadata(broker=3))
    m.apply(BeginShutdown(broker=0))
    return m


def test_a_leader_shutting_down_hands_over_and_stays_unfenced() -> None:
    m = cluster()
    m.apply(HoldMetadata(broker=3))
    m.apply(BeginShutdown(broker=0))
    assert (m.part.leader, m.part.isr, m.fenced, m.shutting_down) == (1, [1, 2], set(), {0})


@pytest.mark.parametrize("full_settle", [False, True], ids=["dirty-settle", "full-settle"])
@pytest.mark.parametrize("heal", [Heal(links=None), Heal(links=((3, CONTROLLER),))], ids=["all", "its-link"])
def test_the_heal_lets_the_shutdown_finish(heal: Heal, full_settle: bool) -> None:
    m = ModelCluster(BROKERS, [0, 1, 2], 2, get_profile("kafka"))
    m.full_settle = full_settle
    m.apply(Produce(count=3))
    for action in (Shutdown(broker=2), Shutdown(broker=1), HoldMetadata(broker=3), BeginShutdown(broker=0)):
        m.apply(action)
    assert (m.part.leader, m.part.isr, m.part.elr, m.fenced) == (None, [], [0, 1], {1, 2})
    m.apply(Restart(broker=1))
    assert (m.part.leader, m.part.isr, m.part.elr, m.fenced) == (1, [1], [0], {2}), "0 is shutting down: not elected"
    m.apply(heal)
    assert (m.part.leader, m.part.isr, m.part.elr, m.fenced, m.shutting_down) == (1, [1], [0], {0, 2}, set())


def test_another_brokers_heal_keeps_the_hold() -> None:
    m = last_member_shutting_down()
    m.apply(Heal(links=tuple(isolation_links(2, "all", BROKERS))))
    assert (m.fenced, m.shutting_down) == ({1, 2}, {0})


def test_the_held_broker_fenced_ends_the_hold() -> None:
    """Its session expires: no longer active, its stale offset no longer the lowest active one."""
    m = last_member_shutting_down()
    m.apply(Crash(broker=3))
    assert (m.fenced, m.shutting_down) == ({0, 1, 2, 3}, set())


def test_a_broker_leading_nothing_shuts_down_at_once() -> None:
    """calculateNextBrokerState: no leadership, SHUTDOWN_NOW (no controlled shutdown to hold)."""
    m = cluster()
    m.apply(HoldMetadata(broker=3))
    m.apply(BeginShutdown(broker=2))
    assert (m.part.isr, m.fenced, m.shutting_down) == ([0, 1], {2}, set())


def test_without_a_hold_the_shutdown_fences_at_once() -> None:
    m = cluster()
    m.apply(BeginShutdown(broker=0))
    assert (m.part.leader, m.fenced, m.shutting_down) == (1, {0}, set())


@pytest.mark.parametrize(("plant", "refused"), [
    (lambda m: m.apply(HoldMetadata(broker=1)), "holds a replica of the topic"),
    (lambda m: (m.apply(HoldMetadata(broker=3)), m.apply(Shutdown(broker=0))), "use begin_shutdown"),
    (lambda m: (m.apply(HoldMetadata(broker=3)), m.apply(BeginShutdown(broker=0)), m.apply(Restart(broker=0))),
     "heal first"),
    (lambda m: (m.apply(HoldMetadata(broker=3)), m.apply(Shutdown(broker=3)), m.apply(Restart(broker=3))),
     "its metadata is held"),
    (lambda m: (m.apply(HoldMetadata(broker=3)), m.apply(BeginShutdown(broker=0)), m.apply(ReplaceDisk(broker=0))),
     "heal first"),
], ids=["replica-holder", "blocking-shutdown", "restart-shutting-down", "restart-held", "new-disk-shutting-down"])
def test_what_the_model_does_not_hold_is_refused(plant, refused: str) -> None:  # type: ignore[no-untyped-def]
    m = cluster()
    with pytest.raises(ModelError, match=refused):
        plant(m)
    assert m.partition.logs[0].leo == 3, "a refused action changes nothing (the new disk's log is still there)"


def test_the_scenario_passes_on_a_system_that_holds() -> None:
    for profile in ("kafka", "kip966"):
        result = run_scenario(load_scenario(SCENARIO), Fake(), profile)
        assert result.passed and not result.disagreements, result.message


def test_a_system_ignoring_the_hold_fails_the_shutdown_step() -> None:
    """The hold not put on: broker 0's shutdown finishes at once, fenced -- caught by the step's
    ``fenced`` expectation before the model comparison."""
    result = run_scenario(load_scenario(SCENARIO), MetadataHoldIgnored(), "kafka")
    assert not result.passed
    assert "step leader-shutting-down" in result.message and "fenced: expected [1, 2], observed [0, 1, 2]" \
        in result.message, result.message


def test_a_system_electing_the_shutting_down_broker_fails_the_restart_step() -> None:
    """Mutant 1494's behaviour, measured by the probe: 0 elected from the ELR while shutting down."""
    result = run_scenario(load_scenario(SCENARIO), ShuttingDownBrokerElected(), "kafka")
    assert not result.passed
    assert "step follower-back" in result.message and "leader: expected 1, observed 0" in result.message, \
        result.message


def test_a_step_the_model_refuses_fails_cleanly_and_the_finale_restarts_nothing_that_ran(tmp_path: Path) -> None:
    """A blocking shutdown during a hold is refused by the model backend; the executor once counted
    the broker stopped anyway, and its finale's restart of the running broker raised a raw
    ModelError (found by the search's refusal check, stop 44)."""
    from pytest_elr.backends.model import ModelBackend

    path = tmp_path / "s.elr.yaml"
    path.write_text("name: s\ncluster: {brokers: 4}\ntopic: {name: t, replicas: [0, 1, 2], min_insync_replicas: 2}\n"
                    "steps:\n  - at: a\n    do: [{produce: 3}, {hold_metadata: 3}, {shutdown: 0}]\n"
                    "verdict: {acked_loss: none}\n")
    result = run_scenario(load_scenario(path), ModelBackend(), "kafka", tmp_path)
    assert not result.passed
    assert "step a" in result.message and "shutdown: the model cannot do it here" in result.message, result.message
