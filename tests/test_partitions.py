"""The model's split into a cluster and one model per partition (issue 27): a broker event changes
every partition it touches in one step, each partition's change built on its own."""

from __future__ import annotations

from pytest_elr.actions import Crash, HoldHeartbeats, Restart, SetClusterMinIsr
from pytest_elr.model import invariants
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.profiles import get_profile
from pytest_elr.model.state import PartitionRecord


def three_partitions(profile: str) -> ModelCluster:
    """Partition 0 led by 0 on [0, 1, 2]; partition 1 led by 1 on [1, 0] (its effective min ISR 2
    is its whole assignment); partition 2 led by 1 on [1, 2, 3], no replica on broker 0."""
    m = ModelCluster((0, 1, 2, 3), [0, 1, 2], 2, get_profile(profile), more_partitions=([1, 0], [1, 2, 3]))
    assert [m.partitions[i].part.leader for i in range(3)] == [0, 1, 1]
    assert [m.partitions[i].part.isr for i in range(3)] == [[0, 1, 2], [1, 0], [1, 2, 3]]
    return m


def record(m: ModelCluster, i: int) -> tuple[object, ...]:
    r: PartitionRecord = m.partitions[i].part
    return r.leader, r.leader_epoch, r.partition_epoch, r.isr, r.elr, r.last_known_elr


def test_fencing_a_broker_changes_every_partition_it_holds_in_one_step() -> None:
    """KIP-966 "Controller behaviors" 2: "The replica gets fenced. When it happens, the controller
    will trigger the ELR update with the new updated ISR" -- in every partition of the broker, each
    against its own min ISR: partition 0 keeps 2 of 3 (ELR empty, leader moved away from 0),
    partition 1 falls under its min ISR (0 into its ELR, leader kept); partition 2 has no replica
    on 0 and is untouched."""
    m = three_partitions("kip966")
    before = [record(m, i) for i in range(3)]
    changes = [len(m.partitions[i].changes) for i in range(3)]
    m.apply(HoldHeartbeats(broker=0))  # its session expires: fenced
    assert 0 in m.fenced
    (_, le0, pe0, *_), (_, le1, pe1, *_), _ = before
    # one change record per partition the broker holds (partition epoch + 1), an election in 0 only
    assert record(m, 0) == (1, le0 + 1, pe0 + 1, [1, 2], [], [])
    assert record(m, 1) == (1, le1, pe1 + 1, [1], [0], [])
    assert record(m, 2) == before[2]
    # each partition saw its change in the step (its own history for the invariants), 2 none
    assert [len(m.partitions[i].changes) - changes[i] for i in range(3)] == [1, 1, 0]
    assert invariants.check(m, m.hwm()) == []


def test_a_cluster_wide_min_isr_change_clears_the_elr_of_every_partition() -> None:
    """Kafka 4.x writes a ClearElrRecord for every partition of every topic at an update of the
    cluster-wide min.insync.replicas (the ``kafka`` profile's declared departure,
    ``change_cluster_min_isr``): the ELR partition 1 got from the fencing goes, partition 0 (an
    empty ELR) and partition 2 keep their records as they were."""
    m = three_partitions("kafka")
    m.apply(HoldHeartbeats(broker=0))
    assert m.partitions[1].part.elr == [0]
    before = [record(m, i) for i in (0, 2)]
    m.apply(SetClusterMinIsr(value=2))
    assert m.partitions[1].part.elr == [] and m.partitions[1].part.last_known_elr == []
    assert [record(m, i) for i in (0, 2)] == before


def test_an_unclean_registration_changes_every_partition_the_broker_sits_in() -> None:
    """KIP-966 "Controller behaviors" 4: "During the broker registration, if the broker had an
    unclean shutdown, the controller will remove the broker from ISR and ELR" -- of every partition:
    partition 1's ELR member 0 moves to its LastKnownELR ("Other behaviors" 6a), partition 0 (0 in
    neither) keeps its record, and both count 0 as restarted uncleanly; partition 2 knows nothing of
    it. Its heartbeats held, 0 registers but stays fenced, so no ISR takes it back."""
    m = three_partitions("kip966")
    m.apply(HoldHeartbeats(broker=0))
    m.apply(Crash(broker=0))
    before = [record(m, i) for i in range(3)]
    assert before[1][3:] == ([1], [0], [])
    m.apply(Restart(broker=0))
    (_, le1, pe1, *_) = before[1]
    assert record(m, 1) == (1, le1, pe1 + 1, [1], [], [0])
    assert record(m, 0) == before[0] and record(m, 2) == before[2]
    assert [0 in m.partitions[i].unclean_restarted for i in range(3)] == [True, True, False]
