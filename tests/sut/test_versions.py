"""Each Kafka release the images are built for starts a cluster with ELR on, and shows it.

Which releases: ``$PYTEST_ELR_CHECK_VERSIONS`` (a version, a comma list or a set; default ``ci``,
the newest and 4.0.2: a cluster start each). ``PYTEST_ELR_CHECK_VERSIONS=all-4x`` checks all twelve
(their images first: ``elr images build --kafka-version all-4x``). On 4.0.x ELR is off unless the
storage is formatted with ``eligible.leader.replicas.version=1``, which the node's format does.
"""

from __future__ import annotations

import os

import pytest

from pytest_elr.sut import ClusterClient, KafkaCluster, images
from pytest_elr.sut.client import random_topic

VERSIONS = images.resolve_versions(os.environ.get("PYTEST_ELR_CHECK_VERSIONS", "ci"))


@pytest.mark.docker
@pytest.mark.parametrize("version", VERSIONS)
def test_a_cluster_of_this_release_keeps_a_cleanly_stopped_replica_eligible(version: str) -> None:
    # Broker 2 holds no replica: it answers the metadata reads while 1 is down.
    with KafkaCluster(brokers=[0, 1, 2], controllers=1, elr=True, kafka_version=version) as c:
        client = ClusterClient(c)
        topic = random_topic()
        client.create_topic(topic, {0: [0, 1]}, min_insync_replicas=2)
        before = client.await_partition(topic, lambda p: p.isr == (0, 1), via=2)
        assert before.elr == () and before.last_known_elr == (), before  # None would mean ELR off
        c.node(1).ctl("stop")  # controlled shutdown: the ISR falls below min ISR, 1 stays eligible
        client.await_partition(topic, lambda p: p.leader == 0 and p.isr == (0,) and p.elr == (1,), via=2)
