"""Reassignment in the model: the rules of KIP-966 "Other behaviors" 4, the kafka profile's declared
departures from them, and the two invariants the reassignment touches shown still firing for what they
exist for (the exemption each has is exactly the declared one, not wider)."""

from __future__ import annotations

import pytest

from pytest_elr.actions import CancelReassignment, Crash, Produce, Reassign, Restart
from pytest_elr.model import invariants
from pytest_elr.model.cluster import ModelCluster, ModelError
from pytest_elr.model.profiles import get_profile
from pytest_elr.model.state import PartitionView

BROKERS = (0, 1, 2)


def cluster(profile: str) -> ModelCluster:
    m = ModelCluster(BROKERS, list(BROKERS), 2, get_profile(profile))
    m.apply(Produce(count=3))
    return m


def names(m: ModelCluster) -> list[str]:
    return [v.invariant for v in invariants.check(m, len(m.committed))]


@pytest.mark.parametrize("profile", ["kip966", "kafka"])
def test_a_move_under_min_isr_waits_under_the_kip_and_completes_under_kafka(profile: str) -> None:
    m = cluster(profile)
    m.apply(Crash(broker=2))
    m.apply(Crash(broker=1))  # ISR [0], ELR [1, 2] or part of it
    if profile == "kip966":
        m.apply(Reassign(replicas=(0, 1)))  # nothing to add: the ISR [0] is all that is left
        # "the reassignment can only be completed if the ISR size is larger or equal to min ISR"
        assert m.part.reassigning and m.part.removing == [2]
        m.apply(Restart(broker=1))  # 1 catches up: ISR [0, 1] meets min ISR 2
        assert not m.part.reassigning and m.part.replicas == [0, 1]
    else:
        # to a set the ISR [0] already holds whole (with 1 as a final replica out of the ISR, 4.4.0
        # waits whatever the min ISR: the test below)
        m.apply(Reassign(replicas=(0,)))
        assert not m.part.reassigning and m.part.replicas == [0]
        assert "complete_reassignment" in m.ctx.departures
    assert names(m) == []


@pytest.mark.parametrize("profile", ["kip966", "kafka"])
def test_a_move_that_removes_more_than_it_adds_waits_for_every_final_replica(profile: str) -> None:
    """Kafka 4.4.0 (KAFKA-19975's rule; scenarios/kafka_reassignment_shrink_waits_for_final_replicas):
    [0, 1, 2] -> [0, 1] with 1 out of the ISR waits for 1, whatever the min ISR. Planted: the rule
    of 4.4.0 before that check (every added replica in the ISR: none here) completes at once."""
    m = cluster(profile)
    m.apply(Crash(broker=2))
    m.apply(Crash(broker=1))
    m.apply(Reassign(replicas=(0, 1)))
    assert m.part.reassigning and m.part.removing == [2] and m.part.replicas == [0, 1, 2]
    m.apply(Restart(broker=1))
    assert not m.part.reassigning and m.part.replicas == [0, 1]


def test_a_move_sent_back_before_it_finished_keeps_its_added_replica_and_never_completes() -> None:
    """Kafka 4.4.0 (scenarios/kafka_reassignment_sent_back_never_completes): the move back writes
    removing (3) and leaves the stored adding (3); 3 in the ISR does not complete it."""
    m = ModelCluster((0, 1, 2, 3), [0, 1, 2], 2, get_profile("kafka"))
    m.apply(Produce(count=3))
    m.apply(Crash(broker=3))
    m.apply(Reassign(replicas=(0, 1, 2, 3)))
    assert (m.part.replicas, m.part.adding, m.part.removing) == ([0, 1, 2, 3], [3], [])
    epoch = m.part.partition_epoch
    m.apply(Reassign(replicas=(0, 1, 2)))
    assert (m.part.replicas, m.part.adding, m.part.removing) == ([0, 1, 2, 3], [3], [3])
    assert m.part.partition_epoch == epoch + 1
    m.apply(Restart(broker=3))
    assert sorted(m.part.isr) == [0, 1, 2, 3]
    assert (m.part.replicas, m.part.adding, m.part.removing) == ([0, 1, 2, 3], [3], [3])
    epoch = m.part.partition_epoch
    m.apply(Reassign(replicas=(0, 1, 2, 3)))  # the stored list again: Kafka writes no change
    assert m.part.partition_epoch == epoch and m.part.adding == [3] and m.part.removing == [3]


def test_the_replicas_a_move_removes_follow_the_target_in_ascending_order() -> None:
    """Kafka's PartitionReassignmentReplicas lists the removed replicas from a TreeSet."""
    m = ModelCluster((0, 1, 2, 3), [2, 1, 0], 1, get_profile("kafka"))
    m.apply(Produce(count=3))
    m.apply(Crash(broker=3))
    m.apply(Reassign(replicas=(0, 3)))
    assert m.part.replicas == [0, 3, 1, 2] and m.part.removing == [1, 2] and m.part.adding == [3]


@pytest.mark.parametrize("profile", ["kip966", "kafka"])
def test_a_cancel_under_min_isr_is_refused_under_the_kip_only(profile: str) -> None:
    m = ModelCluster((0, 1, 2, 3), [0, 1, 2], 2, get_profile(profile))
    m.apply(Produce(count=3))
    m.apply(Crash(broker=3))  # the replica to add never catches up
    m.apply(Reassign(replicas=(0, 1, 3)))
    m.apply(Crash(broker=2))
    m.apply(Crash(broker=1))  # ISR [0]
    m.apply(CancelReassignment())
    assert m.part.reassigning is (profile == "kip966")
    with_cancel = not m.part.reassigning
    assert with_cancel is ("cancel_reassignment" in m.ctx.departures)


def test_a_cancel_with_nothing_under_way_is_an_error() -> None:
    with pytest.raises(ModelError, match="NO_REASSIGNMENT_IN_PROGRESS"):
        cluster("kip966").apply(CancelReassignment())


def _removed_member_in_elr(profile: str) -> ModelCluster:
    m = cluster(profile)
    m.apply(Reassign(replicas=(0, 1)))  # ISR [0, 1] meets min ISR: completes at once
    assert m.part.replicas == [0, 1] and m.part.isr == [0, 1]
    m.part.elr = [2]  # a removed replica left in the ELR at min ISR
    return m


def test_a_removed_replica_in_the_elr_at_min_isr_fires_under_the_kip() -> None:
    assert "elr_empty_at_min_isr" in names(_removed_member_in_elr("kip966"))


def test_the_kafka_exemption_covers_removed_replicas_only() -> None:
    # Kafka 4.4.0 keeps replicas a completed move removed in the ELR (Deviation keep_elr_within_replicas)
    m = _removed_member_in_elr("kafka")
    assert "elr_empty_at_min_isr" not in names(m)
    m.part.replicas = [0, 1, 2]  # the same ELR member, still assigned: not exempt
    assert "elr_empty_at_min_isr" in names(m)


def _elected_leader_change(m: ModelCluster, admitted: frozenset[int]) -> None:
    """A change that elects broker 1 from outside the ISR [0] and ELR [] the step before saw."""
    before = PartitionView(0, 5, (0,), (), False)
    m.partition.changes.append((before, PartitionView(1, 6, (1,), (), False)))
    m.partition.admitted.append(admitted)


def test_a_member_admitted_by_the_same_change_may_be_elected() -> None:
    # PartitionChangeBuilder elects from the target ISR: the member the leader's AlterPartition added
    m = cluster("kafka")
    _elected_leader_change(m, frozenset({1}))
    assert "unclean_election_recovers" not in names(m)


@pytest.mark.parametrize("admitted", [frozenset(), frozenset({2})])
def test_a_leader_from_outside_isr_elr_and_the_admitted_fires(admitted: frozenset[int]) -> None:
    m = cluster("kafka")
    _elected_leader_change(m, admitted)
    assert "unclean_election_recovers" in names(m)


def test_a_reassignment_to_a_broker_with_no_replica_yet_is_a_candidate_with_an_empty_log() -> None:
    """Found by random schedules (the model crashed with KeyError 3): the election a reassignment's
    change runs (here unclean, every other replica down) weighs the target's new replica too, whose
    log the broker has not started yet: it counts as empty, and it is the only candidate left."""
    from pytest_elr.actions import Crash, Pause, PowerOff, Reassign, UncleanElection
    from pytest_elr.model.cluster import ModelCluster
    from pytest_elr.model.profiles import get_profile

    m = ModelCluster((0, 1, 2, 3), [0, 1, 2], 3, get_profile("kip966"))
    for action in (UncleanElection(enabled=True), PowerOff(brokers=(2,)), Pause(broker=0), Crash(broker=1),
                   Reassign(replicas=(2, 3, 0, 1))):
        m.apply(action)
    assert 3 in m.part.replicas and m.logs[3].leo == 0
    assert m.part.leader == 3 and m.part.recovering  # the only live replica, elected uncleanly
