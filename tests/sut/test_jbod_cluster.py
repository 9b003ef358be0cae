"""Real cluster with two log dirs per broker (JBOD), both on the FUSE layer: a replica moves live
between them, and what a power cut then leaves is measured -- the ground of the model's rule that
a moved replica is unsynced (``ModelCluster`` on ``MoveLogDir``)."""

from __future__ import annotations

import pytest
from kafka_under_test import Kafka

from pytest_elr.sut.admin import ReplicaDir, describe_replica_dirs
from pytest_elr.sut.client import HOST
from pytest_elr.sut.config import DATA_DIR

pytestmark = pytest.mark.docker


def test_a_synced_replica_moved_to_the_other_dir_loses_everything_to_a_power_cut(jbod_cluster: Kafka) -> None:
    jbod = jbod_cluster
    topic = "moved"
    jbod.client.create_topic(topic, {0: [0, 1, 2]}, min_insync_replicas=2)
    jbod.client.produce(topic, [b"r"] * 5)
    d0, d1 = f"{DATA_DIR}/d0", f"{DATA_DIR}/d1"
    port = jbod.cluster.client_port(1)
    where = describe_replica_dirs(HOST, port, topic, 0)
    assert len(where) == 1 and not where[0].future
    first = where[0].log_dir
    jbod.faults.process.flush(1)
    assert jbod.faults.process.evidence.leo_on_disk(1, (topic, 0)) == 5  # durable where it is

    moved_to = jbod.client.move_to_next_log_dir(1, topic)
    assert moved_to == (d1 if first == d0 else d0)
    assert describe_replica_dirs(HOST, port, topic, 0) == [ReplicaDir(moved_to, future=False)]
    assert jbod.cluster.node(1).partition_dir(topic, 0) == f"{moved_to}/{topic}-0"

    record = jbod.faults.process.power_off(1, topics=[topic])
    assert record.leo_on_disk[(topic, 0)] == 0  # the copy was never fsynced
    record = jbod.faults.process.power_on(1)
    assert record is not None and record.leo_after[(topic, 0)] is not None
