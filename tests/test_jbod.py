"""Brokers with several log dirs (JBOD) and a replica's live move between them (``move_log_dir``):
the model's rules for it, the mutant they kill, the Python API, the cluster's configuration.
The real cluster is held to the same scenario in tests/sut/test_jbod_cluster.py and by the suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_elr.actions import Action, Cut, Flush, Heal, HoldDirAssignments, MoveLogDir, PowerOff, Produce
from pytest_elr.core.nodes import CONTROLLER, isolation_links
from pytest_elr.model.cluster import ModelCluster, ModelError
from pytest_elr.model.mutants import MUTANTS
from pytest_elr.model.profiles import get_profile
from pytest_elr.scenario.loader import load_scenario
from pytest_elr.schedule.mutants import check_mutant
from pytest_elr.sut.config import DATA_DIR, Topology

BROKERS = (0, 1, 2)
JBOD_SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "kafka_20716_jbod_move_then_lossy_leader.elr.yaml"


def _under_min_isr(profile: str) -> ModelCluster:
    """ISR [0] under min ISR 2, ELR [2], broker 1 out of sync: the scenario's two-out."""
    m = ModelCluster(BROKERS, list(BROKERS), 2, get_profile(profile))
    m.apply(Produce(count=5))
    m.apply(Cut(links=isolation_links(1, "brokers", BROKERS)))
    m.apply(Produce(count=5))
    m.apply(Cut(links=isolation_links(2, "brokers", BROKERS)))
    assert (m.part.leader, m.part.isr, m.part.elr) == (0, [0], [2])
    return m


def test_a_moved_replica_is_unsynced_even_after_a_flush() -> None:
    """Kafka fsyncs neither the copy nor the swap's files (LogManager.replaceCurrentWithFutureLog),
    so a power cut after a move takes the whole log -- measured on 4.0.2 (docs/model.md)."""
    assert _power_cut_of_1_after(Flush(broker=1), MoveLogDir(broker=1)) == (5, 0)


def test_a_flush_after_the_move_makes_it_durable_again() -> None:
    assert _power_cut_of_1_after(MoveLogDir(broker=1), Flush(broker=1)) == (5, 5)


def _power_cut_of_1_after(*actions: Action) -> tuple[int, int]:
    """Broker 1's log end before and after a power cut that follows 5 records and ``actions``."""
    m = ModelCluster(BROKERS, list(BROKERS), 2, get_profile("kafka"))
    m.apply(Produce(count=5))
    for action in actions:
        m.apply(action)
    (loss,) = m.apply(PowerOff(brokers=(1,)))
    return loss.leo_before, loss.leo_after


def test_the_move_is_a_partition_change_that_keeps_the_elr_under_kafka() -> None:
    m = _under_min_isr("kafka")
    epochs = (m.part.leader_epoch, m.part.partition_epoch)
    m.apply(MoveLogDir(broker=1))
    assert (m.part.leader, m.part.isr, m.part.elr) == (0, [0], [2])
    assert (m.part.leader_epoch, m.part.partition_epoch) == (epochs[0], epochs[1] + 1)


def test_the_kip_has_no_directories_so_the_move_changes_no_record() -> None:
    m = _under_min_isr("kip966")
    before = (m.part.leader_epoch, m.part.partition_epoch, list(m.part.elr))
    m.apply(MoveLogDir(broker=1))
    assert (m.part.leader_epoch, m.part.partition_epoch, m.part.elr) == before


@pytest.mark.parametrize("cut_off", [HoldDirAssignments(broker=2), Cut(links=((2, CONTROLLER),))])
def test_a_move_whose_assignment_cannot_reach_the_controller_is_refused(cut_off: Action) -> None:
    """Kafka promotes the moved copy only once the controller accepted the broker's
    AssignReplicasToDirs (ReplicaAlterLogDirsThread.maybePromoteFutureReplica); on 4.4.0 a move with
    the assignment held was still unpromoted 36 s later (``elr explore``). The model does not hold a
    move waiting for its heal: it refuses it, naming why, rather than predict a move that has not
    happened (which it did before: the held move landing at the heal)."""
    m = _under_min_isr("kafka")
    m.apply(cut_off)
    before = m.fork()
    with pytest.raises(ModelError, match="cannot reach the controller.*not modelled"):
        m.apply(MoveLogDir(broker=2))
    assert (m.logs[2].flushed, m.dir_pending) == (before.logs[2].flushed, before.dir_pending)
    m.apply(Heal(links=None))
    m.apply(MoveLogDir(broker=2))  # healed: the move runs
    assert 2 in m.dir_pending or m.part.partition_epoch > before.part.partition_epoch


def test_the_jbod_scenario_alone_kills_the_mutant_that_empties_the_elr() -> None:
    """PR #20716's builder (4.0-4.2) as a mutant of the oracle: the scenario's expectation of the
    ELR at the move is the check that kills it."""
    result = check_mutant("dir-assignment-empties-elr", MUTANTS["dir-assignment-empties-elr"],
                          [load_scenario(JBOD_SCENARIO)], examples=0)
    assert result.check == "expectation elr", result
    assert "step disk-rebalance" in (result.killed_by or ""), result


def test_a_jbod_broker_has_sibling_log_dirs_under_the_fuse_mount() -> None:
    topology = Topology.build([0, 1], [1000], broker_log_dirs=2)
    broker, controller = topology.node(0), topology.node(1000)
    assert broker.log_dirs == (f"{DATA_DIR}/d0", f"{DATA_DIR}/d1")
    assert f"log.dirs={DATA_DIR}/d0,{DATA_DIR}/d1\n" in topology.render(broker, 9092)
    assert f"log.dirs={DATA_DIR}\n" in topology.render(controller, None)  # controllers keep one
    assert f"log.dirs={DATA_DIR}\n" in Topology.build([0], [1000]).render(Topology.build([0], [1000]).node(0), 9092)
    with pytest.raises(ValueError, match="1-4 log dirs"):
        Topology.build([0], [1000], broker_log_dirs=5)


API_TEST = '''
import pytest

def test_move(elr_cluster):
    c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2{extra})
    c.produce(5)
    c.isolate(broker=1, from_="brokers")
    c.produce(5)
    c.isolate(broker=2, from_="brokers")
    c.move_log_dir(1)
    c.expect(leader=0, isr=[0], elr=[2])
    c.power_off([0])
    c.expect(leader=2, isr=[2])
'''


@pytest.mark.parametrize("profile", ["kip966", "kafka"])
def test_the_python_api_moves_a_replica_as_yaml_does(pytester: pytest.Pytester, profile: str) -> None:
    pytester.makepyfile(test_move=API_TEST.format(extra=", log_dirs=2"))
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly",
                                f"--elr-profile={profile}")
    result.assert_outcomes(passed=1)


def test_the_python_api_refuses_a_move_without_log_dirs_at_the_callers_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_move=API_TEST.format(extra=""))
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_move.py:9: move_log_dir: the brokers have 1 log dir each; give the cluster 2*"])


def test_a_written_schedule_with_a_move_gets_the_log_dirs_it_needs(tmp_path: Path) -> None:
    """A schedule written back as YAML (the search's counterexamples, ``elr compare``) asks for the
    log dirs its moves need, so it loads and runs as written."""
    from pytest_elr.core.specs import ClusterSpec, TopicSpec
    from pytest_elr.scenario.export import scenario_yaml

    path = tmp_path / "moved.elr.yaml"
    path.write_text(scenario_yaml("moved", "a move", ClusterSpec(brokers=BROKERS), TopicSpec("t", BROKERS, 2),
                                  [Produce(count=5), MoveLogDir(broker=1)], {}))
    scenario = load_scenario(path)
    assert scenario.cluster.log_dirs == 2
    assert [a.kind for s in scenario.steps for a in s.actions] == ["produce", "move_log_dir"]


def test_a_move_reassigns_the_moved_partition_alone_and_a_new_disk_every_partition() -> None:
    """On a topic of three partitions (every broker holds a replica of each), ``move_log_dir: 2``
    moves partition 0's replica: its assignment lands as a change of partition 0 alone; partitions
    1 and 2 stay in the old directory, their epochs unchanged -- as Kafka 4.4.0 did under
    ``elr explore --partitions 3`` (the model moved all three: a finding of its own mistake). A new
    disk (``replace_disk``) puts every replica in the new directory: every partition changes."""
    from pytest_elr.actions import ReplaceDisk

    more = ([1, 2, 0], [2, 0, 1])
    m = ModelCluster(BROKERS, list(BROKERS), 2, get_profile("kafka"), more_partitions=more)
    m.apply(Produce(count=6))
    epochs = [p.part.partition_epoch for p in m.partitions.values()]
    m.apply(MoveLogDir(broker=2))
    assert [p.part.partition_epoch - e for p, e in zip(m.partitions.values(), epochs, strict=True)] == [1, 0, 0]
    assert not m.dir_pending and not m.dir_moves
    epochs = [p.part.partition_epoch for p in m.partitions.values()]
    m.apply(ReplaceDisk(broker=1))
    assert not m.dir_pending and not m.dir_moves
    assert all(p.part.partition_epoch > e for p, e in zip(m.partitions.values(), epochs, strict=True)), \
        [(p.part.partition_epoch, e) for p, e in zip(m.partitions.values(), epochs, strict=True)]
