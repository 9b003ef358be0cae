"""The controller's rules on small, hand-checked cases (KIP-966 and KIP-903)."""

from __future__ import annotations

import pytest

from pytest_elr.actions import (
    Crash,
    Cut,
    Heal,
    HoldDirAssignments,
    HoldHeartbeats,
    PowerOff,
    Produce,
    ReplaceDisk,
    Restart,
    SetClusterMinIsr,
    SetMinIsr,
    Shutdown,
    UncleanElection,
)
from pytest_elr.core.nodes import CONTROLLER, isolation_links
from pytest_elr.model import invariants
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.controller import ElectionCounts, count_elections
from pytest_elr.model.profiles import get_profile
from pytest_elr.model.state import PartitionRecord

BROKERS = (0, 1, 2)


def cluster(profile: str = "kip966", min_isr: int = 2, replicas: tuple[int, ...] = BROKERS) -> ModelCluster:
    return ModelCluster(BROKERS, list(replicas), min_isr, get_profile(profile))


def isolate(m: ModelCluster, b: int, scope: str = "all") -> None:
    m.apply(Cut(links=isolation_links(b, scope, BROKERS)))  # type: ignore[arg-type]


def test_isr_at_min_isr_clears_elr() -> None:
    m = cluster()
    isolate(m, 1)
    isolate(m, 2)
    assert (m.part.isr, m.part.elr) == ([0], [2])
    m.apply(Heal(links=None))
    assert (m.part.isr, m.part.elr) == ([0, 1, 2], [])


def test_fenced_elr_member_is_not_elected_until_unfenced() -> None:
    m = cluster()
    isolate(m, 1)
    isolate(m, 2)
    m.apply(Crash(broker=0))
    assert m.part.leader is None and m.part.elr == [0, 2]
    m.apply(Heal(links=isolation_links(2, "all", BROKERS)))
    assert m.part.leader == 2 and m.part.isr == [2] and m.part.elr == [0]


def test_unclean_registration_moves_elr_member_to_last_known_elr() -> None:
    m = cluster("kip966")
    isolate(m, 1)
    isolate(m, 2)
    m.apply(PowerOff(brokers=(0,)))
    m.apply(Restart(broker=0))
    assert m.part.elr == [2] and m.part.last_known_elr == [0]
    k = cluster("kafka")
    isolate(k, 1)
    isolate(k, 2)
    k.apply(PowerOff(brokers=(0,)))
    assert k.part.last_known_elr == [0]  # Kafka keeps the last leader only
    k.apply(Restart(broker=0))
    assert k.part.elr == [2] and k.part.last_known_elr == [0]


def test_clean_shutdown_keeps_the_broker_in_the_elr() -> None:
    m = cluster()
    isolate(m, 1)
    isolate(m, 2)
    m.apply(Shutdown(broker=0))
    m.apply(Restart(broker=0))
    assert m.part.leader == 0 and m.part.isr == [0]


def test_legacy_never_empties_the_isr() -> None:
    m = cluster("legacy")
    isolate(m, 1)
    isolate(m, 2)
    m.apply(Crash(broker=0))
    assert m.part.isr == [0] and m.part.leader is None and m.part.elr == []


def test_acks_all_rejected_under_min_isr_and_hwm_frozen_for_acks_1() -> None:
    m = cluster()
    m.apply(Produce(count=3))
    isolate(m, 1)
    isolate(m, 2)
    rejected = m.apply(Produce(count=2))
    assert rejected is not None and rejected.failed == {"NOT_ENOUGH_REPLICAS": 2}  # type: ignore[union-attr]
    acked = m.apply(Produce(count=4, acks="1"))
    assert acked.acked == 4  # type: ignore[union-attr]
    assert m.hwm() == 3


def test_min_isr_change_clears_elr_when_isr_is_large_enough() -> None:
    m = cluster()
    isolate(m, 1)
    isolate(m, 2)
    assert m.part.elr == [2]
    m.apply(SetMinIsr(value=1))
    assert m.part.elr == []


def test_invariants_hold_on_a_healthy_run() -> None:
    m = cluster()
    m.apply(Produce(count=5))
    isolate(m, 0)
    m.apply(Produce(count=5))
    assert invariants.check(m, len(m.committed)) == []
    assert len(m.committed) == 10 and m.part.leader == 1


def test_kafka_clears_the_elr_on_a_change_of_min_isr_not_on_the_same_value() -> None:
    """Measured on Kafka 4.3.1 (scenarios/min_isr_change_same_value.elr.yaml)."""
    for profile, after_raise in (("kafka", []), ("kip966", [2])):
        m = cluster(profile)
        isolate(m, 1)
        isolate(m, 2)
        m.apply(SetMinIsr(value=2))
        assert m.part.elr == [2], profile
        m.apply(SetMinIsr(value=3))
        assert m.part.elr == after_raise, profile


def test_cluster_min_isr_update_clears_every_elr_only_on_kafka() -> None:
    """The topic's own min ISR overrides the cluster-wide one: under the KIP nothing happens; Kafka
    4.0.2 and 4.4.0 clear ELR and LastKnownElr at every update, the same value too
    (scenarios/min_isr_change_cluster_level.elr.yaml)."""
    for profile, after in (("kafka", []), ("kip966", [2])):
        m = cluster(profile)
        isolate(m, 1)
        isolate(m, 2, "brokers")
        assert (m.part.isr, m.part.elr) == ([0], [2]), profile
        epoch = m.part.partition_epoch
        m.apply(SetClusterMinIsr(value=1))  # the value the cluster has: Kafka clears all the same
        assert m.part.elr == after, profile
        assert m.eff_min_isr == 2 and m.part.isr == [0], profile  # the topic's min ISR is untouched
        assert (m.part.partition_epoch > epoch) is (profile == "kafka"), profile


def test_cluster_min_isr_update_empties_last_known_elr_of_a_leaderless_partition_on_kafka() -> None:
    m = cluster("kafka")
    m.apply(Crash(broker=0))
    m.apply(Crash(broker=1))
    m.apply(Cut(links=((2, CONTROLLER),)))
    assert (m.part.leader, m.part.elr, m.part.last_known_elr) == (None, [1, 2], [2])
    m.apply(SetClusterMinIsr(value=3))
    assert (m.part.elr, m.part.last_known_elr) == ([], [])
    m.apply(Heal(links=None))
    assert m.part.leader is None  # broker 2 is back, unfenced, but no longer eligible


def test_cluster_min_isr_update_changes_nothing_on_legacy() -> None:
    m = cluster("legacy")
    isolate(m, 1)
    isolate(m, 2)
    before = (m.part.leader, list(m.part.isr), m.part.partition_epoch)
    m.apply(SetClusterMinIsr(value=3))
    assert (m.part.leader, m.part.isr, m.part.partition_epoch) == before


def test_held_heartbeats_keep_a_restarted_last_leader_registered_and_fenced() -> None:
    """KIP-966 "Delivery plan": the LastKnownLeader is elected "once it is unfenced" (KAFKA-19522)."""
    for heal in (Heal(links=None), Heal(links=((0, CONTROLLER),))):
        m = cluster("kafka", min_isr=1)
        isolate(m, 1, "brokers")
        isolate(m, 2, "brokers")
        m.apply(Crash(broker=0))
        m.apply(Heal(links=tuple(isolation_links(1, "all", BROKERS) + isolation_links(2, "all", BROKERS))))
        assert (m.part.leader, m.part.elr, m.fenced) == (None, [0], {0})
        m.apply(HoldHeartbeats(broker=0))
        m.apply(Restart(broker=0))
        assert m.brokers[0].registered, "the registration is not held"
        assert (m.part.leader, m.part.elr, m.part.last_known_elr, m.fenced) == (None, [], [0], {0})
        m.apply(heal)
        assert (m.part.leader, m.part.elr, m.part.last_known_elr, m.fenced) == (0, [], [], set())


def test_held_heartbeats_fence_a_running_broker() -> None:
    m = cluster()
    m.apply(HoldHeartbeats(broker=1))
    assert 1 in m.fenced and m.part.isr == [0, 2]
    m.apply(Heal(links=isolation_links(2, "all", BROKERS)))  # another broker's links: still held
    assert 1 in m.fenced
    m.apply(Heal(links=isolation_links(1, "all", BROKERS)))
    assert 1 not in m.fenced


def _isr_member_without_its_directory(profile: str = "kafka") -> ModelCluster:
    """Broker 1 back on a new disk with its directory assignment held: it rejoins the ISR."""
    m = cluster(profile)
    m.apply(HoldDirAssignments(broker=1))
    m.apply(ReplaceDisk(broker=1))
    assert (m.part.leader, m.part.isr, m.fenced) == (0, [0, 1, 2], set())
    m.apply(Crash(broker=2))
    assert (m.part.isr, m.part.elr) == ([0, 1], [])
    return m


def test_a_replica_whose_directory_is_not_online_is_not_elected() -> None:
    """KIP-858 directory ids (``directory_online``): the ISR member stays, unelected."""
    m = _isr_member_without_its_directory()
    assert 1 in m.dir_pending
    m.apply(Crash(broker=0))
    assert (m.part.leader, m.part.isr, m.part.elr) == (None, [1], [0])
    epoch = m.part.partition_epoch
    m.apply(Restart(broker=0))  # unclean: out of the ELR; 1 still not electable
    assert (m.part.leader, m.part.isr, m.part.elr) == (None, [1], [])
    m.apply(Heal(links=((1, CONTROLLER),)))  # the assignment lands: a partition change, no election
    assert m.part.partition_epoch == epoch + 2 and m.part.leader is None and not m.dir_pending
    m.apply(Restart(broker=2))  # the next event elects broker 1
    assert (m.part.leader, m.part.last_known_elr) == (1, [])


def test_last_known_elr_records_the_leader_that_goes_while_the_isr_stays() -> None:
    """KIP-966 "Other behaviors" 7b, Kafka's rule since 4.1.1 (PR #20629): the leader that goes
    without a successor is recorded, even though the ISR is not empty."""
    m = _isr_member_without_its_directory()
    m.apply(Crash(broker=0))
    assert m.part.last_known_elr == [0]
    m.apply(Restart(broker=0))
    assert m.part.last_known_elr == [0]


def test_last_known_elr_keeps_the_first_leader_recorded() -> None:
    """Recorded only while LastKnownElr is empty; an election empties it."""
    m = cluster("kafka")
    isolate(m, 1)
    isolate(m, 2)
    m.apply(Crash(broker=0))
    assert (m.part.leader, m.part.last_known_elr) == (None, [0])
    m.apply(Heal(links=isolation_links(2, "all", BROKERS)))
    assert (m.part.leader, m.part.last_known_elr) == (2, [])


def test_held_directory_assignments_change_nothing_without_a_new_disk() -> None:
    for profile in ("kafka", "kip966", "legacy"):
        m = cluster(profile)
        m.apply(HoldDirAssignments(broker=1))
        m.apply(Crash(broker=0))
        assert m.part.leader == 1, profile
    k = _isr_member_without_its_directory("kip966")  # no directory ids: nothing is pending
    assert not k.dir_pending
    k.apply(Crash(broker=0))
    assert k.part.leader == 1


def test_a_preferred_election_hands_the_leadership_back_to_the_first_replica() -> None:
    from pytest_elr.actions import ElectLeaders

    m = cluster()
    m.apply(Crash(broker=0))
    m.apply(Restart(broker=0))
    assert (m.part.leader, m.part.isr) == (1, [0, 1, 2])
    epochs = (m.part.leader_epoch, m.part.partition_epoch)
    m.apply(ElectLeaders(election="preferred"))
    assert (m.part.leader, m.part.isr) == (0, [0, 1, 2])
    assert (m.part.leader_epoch, m.part.partition_epoch) == (epochs[0] + 1, epochs[1] + 1)
    m.apply(ElectLeaders(election="preferred"))  # ELECTION_NOT_NEEDED: no change, no epoch
    assert (m.part.leader, m.part.leader_epoch, m.part.partition_epoch) == (0, epochs[0] + 1, epochs[1] + 1)


def test_a_preferred_replica_in_the_elr_beside_an_isr_is_not_elected() -> None:
    """Kafka's ``isValidNewLeader``: "in either ISR or in ELR when ISR is empty"."""
    from pytest_elr.actions import ElectLeaders

    m = cluster(min_isr=3)
    m.apply(Crash(broker=0))  # fenced, then out of the ISR and (under min ISR) into the ELR
    assert (m.part.leader, m.part.isr, m.part.elr) == (1, [1, 2], [0])
    m.apply(Restart(broker=0))  # unclean registration: out of the ELR, back as a follower
    isolate(m, 0, "brokers")
    assert (m.part.leader, m.part.isr, m.part.elr) == (1, [1, 2], [0])
    before = (m.part.leader_epoch, m.part.partition_epoch)
    m.apply(ElectLeaders(election="preferred"))
    assert (m.part.leader, m.part.isr, m.part.elr) == (1, [1, 2], [0])
    assert (m.part.leader_epoch, m.part.partition_epoch) == before


# --- the counts of Kafka's controller meters (docs/model.md, "Metrics") ------------------------


def test_an_election_from_the_elr_is_counted_once_and_a_leaderless_change_not() -> None:
    m = cluster()
    isolate(m, 1)
    isolate(m, 2)
    m.apply(Crash(broker=0))
    assert m.part.leader is None and m.ctx.elections.as_dict() == {"elr_elections": 0, "unclean_elections": 0}
    m.apply(Heal(links=isolation_links(2, "all", BROKERS)))
    assert m.part.leader == 2 and m.ctx.elections.as_dict() == {"elr_elections": 1, "unclean_elections": 0}
    m.apply(Heal(links=None))  # the ISR grows back under leader 2: no election
    assert m.ctx.elections.elr_elections == 1


def test_an_election_from_the_isr_counts_nothing() -> None:
    m = cluster()
    m.apply(Crash(broker=0))
    assert m.part.leader == 1 and m.ctx.elections.as_dict() == {"elr_elections": 0, "unclean_elections": 0}


def test_an_unclean_election_is_counted_as_unclean_not_as_from_the_elr() -> None:
    """scenarios/runbook_unclean_election: broker 2, out of the ISR and the ELR, elected uncleanly."""
    m = cluster("kafka")
    m.apply(Cut(links=isolation_links(2, "brokers", BROKERS)))  # type: ignore[arg-type]
    m.apply(Crash(broker=0))
    m.apply(Crash(broker=1))
    assert m.part.leader is None and m.part.elr == [0, 1]
    m.apply(UncleanElection(enabled=True))
    assert m.part.leader == 2 and m.part.recovering
    assert m.ctx.elections.as_dict() == {"elr_elections": 0, "unclean_elections": 1}
    m.apply(UncleanElection(enabled=True))  # ELECTION_NOT_NEEDED: nothing written, nothing counted
    assert m.ctx.elections.unclean_elections == 1


def _view(leader: int | None, isr: list[int], elr: list[int], recovering: bool = False) -> PartitionRecord:
    return PartitionRecord(replicas=[0, 1, 2], leader=leader, isr=isr, elr=elr, recovering=recovering)


@pytest.mark.parametrize(("before", "after", "counted"), [
    (_view(None, [], [1, 2]), _view(2, [2], [1]), {"elr_elections": 1, "unclean_elections": 0}),
    (_view(0, [0, 1], []), _view(1, [1], []), {"elr_elections": 0, "unclean_elections": 0}),
    # a record that keeps its leader sets no leader (NO_LEADER_CHANGE): never an ELR election
    (_view(2, [2], [1]), _view(2, [2, 1], []), {"elr_elections": 0, "unclean_elections": 0}),
    (_view(None, [], []), _view(1, [1], [], recovering=True), {"elr_elections": 0, "unclean_elections": 1}),
    # Kafka writes RECOVERING only "if (partition.leaderRecoveryState != LeaderRecoveryState.RECOVERING)"
    (_view(None, [], [], recovering=True), _view(1, [1], [], recovering=True),
     {"elr_elections": 0, "unclean_elections": 0}),
], ids=["from-elr", "from-isr", "leader-kept", "unclean", "unclean-while-recovering"])
def test_one_change_record_is_counted_as_topic_delta_counts_it(before: PartitionRecord, after: PartitionRecord,
                                                               counted: dict[str, int]) -> None:
    counts = ElectionCounts()
    count_elections(before.view(), after, counts)
    assert counts.as_dict() == counted
