"""Kafka keeps the replicas a shrink removed in the ELR: the model's three rules that follow from it,
each measured on Kafka 4.4.0 (docs/model.md, "Reassignment and a stale ELR"), and the loss they make."""

from __future__ import annotations

from pytest_elr.actions import Action, Crash, Cut, Heal, Produce, Reassign, Restart
from pytest_elr.core.nodes import isolation_links
from pytest_elr.core.observation import Refusal
from pytest_elr.model import invariants
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.profiles import get_profile
from pytest_elr.schedule.search import SearchConfig, machine_for, violations_on

BROKERS = (0, 1, 2)
SHRINK_AND_COMMIT: list[Action] = [Reassign(replicas=(0,)), Produce(count=3, acks="all")]


def _model(profile: str, actions: list[Action]) -> ModelCluster:
    m = ModelCluster(BROKERS, list(BROKERS), 2, get_profile(profile))
    for action in actions:
        m.apply(action)
    return m


def _fence(broker: int) -> Cut:
    return Cut(links=isolation_links(broker, "controller", BROKERS))


def test_kafka_commits_at_one_replica_with_the_removed_replicas_in_the_elr() -> None:
    m = _model("kafka", SHRINK_AND_COMMIT)
    assert (m.part.replicas, m.part.isr, m.part.elr, m.hwm()) == ([0], [0], [1, 2], 3)
    broken = invariants.check(m, 0)
    assert {v.invariant for v in broken} == {"candidates_hold_hwm"}, broken
    kip = _model("kip966", SHRINK_AND_COMMIT)  # the move waits for min ISR: nothing to break
    assert (kip.part.replicas, kip.part.elr, invariants.check(kip, 0)) == ([0, 1, 2], [], [])


def test_growing_back_builds_the_change_with_the_min_isr_before_the_move() -> None:
    # Measured: [0] -> [0, 1, 2] with the ISR [0] and ELR [1, 2] cleared the ELR: the builder's min
    # ISR is min(2, one replica) = 1, which the ISR [0] meets. With the new replica set's (2) it stayed.
    m = _model("kafka", [*SHRINK_AND_COMMIT, _fence(1), _fence(2), Reassign(replicas=(0, 1, 2))])
    assert (m.part.replicas, m.part.adding, m.part.isr, m.part.elr) == ([0, 1, 2], [1, 2], [0], [])


def test_growing_back_a_leaderless_partition_over_an_active_stale_member_is_refused() -> None:
    # Measured: UNKNOWN_SERVER_ERROR ("Replica 1 is not assigned to this partition"), nothing changes.
    m = _model("kafka", [*SHRINK_AND_COMMIT, Crash(broker=0), Restart(broker=0)])
    assert (m.part.leader, m.part.isr, m.part.elr) == (None, [], [1, 2])
    before = m.fingerprint()
    assert m.apply(Reassign(replicas=(0, 1, 2))) == Refusal("reassign", "UNKNOWN_SERVER_ERROR")
    assert m.fingerprint() == before


def test_a_refused_reassignment_is_a_no_op_step_of_the_search() -> None:
    # the machine skips a refused request (it changed nothing) as it skips a ModelError
    machine = machine_for(SearchConfig(profile=get_profile("kafka")))()
    for action in [*SHRINK_AND_COMMIT, Crash(broker=0), Restart(broker=0), Reassign(replicas=(0, 1, 2))]:
        machine._do(action)
    assert [a.kind for a in machine.actions] == ["reassign", "produce", "crash", "restart"]


def test_growing_back_over_fenced_stale_members_elects_one_when_it_returns_and_loses_the_records() -> None:
    # scenarios/kafka_stale_elr_elected_after_regrow.elr.yaml, step for step on Kafka 4.4.0 and 4.0.2
    actions = [*SHRINK_AND_COMMIT, _fence(1), _fence(2), Crash(broker=0), Reassign(replicas=(0, 1, 2))]
    m = _model("kafka", actions)
    assert (m.part.leader, m.part.isr, m.part.elr, m.part.adding) == (None, [], [0, 1, 2], [1, 2])
    m.apply(Heal(links=None))
    assert (m.part.leader, m.part.isr, m.hwm()) == (1, [1, 2], 0)
    assert "no_acked_loss" in {v.invariant for v in invariants.check(m, 3)}
    assert violations_on(get_profile("kip966"), [*actions, Heal(links=None)]) == []
