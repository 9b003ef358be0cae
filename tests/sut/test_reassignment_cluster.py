"""Real cluster, four brokers: a partition reassignment over the hand-written requests
(AlterPartitionReassignments, ListPartitionReassignments) -- started, listed while it waits for a
replica that cannot catch up, cancelled, and a second cancel refused."""

from __future__ import annotations

import pytest
from kafka_under_test import Kafka

from pytest_elr.sut.admin import Reassignment
from pytest_elr.sut.errors import KafkaProtocolError

pytestmark = pytest.mark.docker

NO_REASSIGNMENT_IN_PROGRESS = 85


def test_a_reassignment_is_listed_while_it_waits_and_cancelled(four_broker_cluster: Kafka) -> None:
    kafka, topic = four_broker_cluster, "reassigned"
    kafka.client.create_topic(topic, {0: [0, 1, 2]}, min_insync_replicas=2)
    kafka.client.produce(topic, [b"r"] * 5)
    assert kafka.client.reassignment(topic) is None
    kafka.faults.network.cut_both(0, 3)  # the added replica cannot fetch from the leader
    try:
        kafka.client.reassign(topic, [0, 1, 3])
        assert kafka.client.reassignment(topic) == Reassignment(replicas=(0, 1, 3, 2), adding=(3,), removing=(2,))
        # The listing comes from the controller; a broker's metadata follows it a moment later.
        kafka.client.await_partition(topic, lambda p: p.replicas == (0, 1, 3, 2), timeout_s=10)
        kafka.client.cancel_reassignment(topic)
        assert kafka.client.reassignment(topic) is None
        kafka.client.await_partition(topic, lambda p: p.replicas == (0, 1, 2), timeout_s=10)
        with pytest.raises(KafkaProtocolError) as refused:
            kafka.client.cancel_reassignment(topic)
        assert refused.value.error_code == NO_REASSIGNMENT_IN_PROGRESS
    finally:
        kafka.faults.heal_everything()
