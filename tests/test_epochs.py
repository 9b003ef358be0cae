"""The epochs of the partition record: the model counts one bump per partition change (Kafka's
``PartitionRegistration.merge``), a leader epoch only for a new leader (KIP-966, "Other behaviors"
1), and a scenario can expect a step to keep or bump either epoch."""

from __future__ import annotations

import pytest

from pytest_elr.actions import Crash, Restart
from pytest_elr.core.errors import ScenarioError
from pytest_elr.core.observation import Observation
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.profiles import get_profile
from pytest_elr.scenario.executor import StepContext, compare
from pytest_elr.scenario.loader import parse_scenario

STEP = """
name: epochs
profiles: [kafka]
cluster: {brokers: 2}
topic: {name: t, replicas: [0, 1], min_insync_replicas: 2}
steps:
  - at: one
    do: [{produce: 1}]
    expect: {leader_epoch: %s}
"""


def _epochs(m: ModelCluster) -> tuple[int, int]:
    return m.part.leader_epoch, m.part.partition_epoch


def test_a_fenced_leader_is_one_change_with_one_bump_of_each_epoch() -> None:
    """ISR shrink and election in one record: Kafka bumps the partition epoch once, not twice."""
    m = ModelCluster([0, 1, 2], [0, 1, 2], 2, get_profile("kafka"))
    before = _epochs(m)
    m.apply(Crash(broker=0))
    assert m.part.leader != 0
    assert _epochs(m) == (before[0] + 1, before[1] + 1)


def test_an_unclean_registration_of_an_elr_member_keeps_the_leader_epoch() -> None:
    m = ModelCluster([0, 1, 2], [0, 1, 2], 2, get_profile("kafka"))
    for b in (1, 2, 0):
        m.apply(Crash(broker=b))
    assert m.part.leader is None and m.part.elr == [0, 2]
    before = _epochs(m)
    m.apply(Restart(broker=2))  # registers unclean: leaves the ELR, nobody is elected
    assert m.part.elr == [0] and m.part.leader is None
    assert _epochs(m) == (before[0], before[1] + 1)


def _obs(leader_epoch: int) -> Observation:
    return Observation(leader=0, leader_epoch=leader_epoch, isr=(0,), elr=(), last_known_elr=(), fenced=(), hwm=0)


@pytest.mark.parametrize(("want", "now", "fails"), [("unchanged", 3, False), ("unchanged", 4, True),
                                                     ("bumped", 4, False), ("bumped", 3, True)])
def test_an_epoch_expectation_compares_with_the_previous_step_end(want: str, now: int, fails: bool) -> None:
    ctx = StepContext(hwm_before=None, epochs_before={"leader_epoch": 3})
    assert bool(compare({"leader_epoch": want}, _obs(now), ctx)) is fails


def test_an_epoch_expectation_takes_only_its_words() -> None:
    assert parse_scenario(STEP % "unchanged").steps[0].expectations_for("kafka") == {"leader_epoch": "unchanged"}
    with pytest.raises(ScenarioError, match="expected one of unchanged, bumped"):
        parse_scenario(STEP % "same")
