"""Real cluster, ELR on, 3 controllers: the active controller crashes and another takes over
(KIP-595: a leader needs a majority of the voters, and 2 of 3 are left), while the partition's
state, kept in the metadata log (KIP-966), stays as it was."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from kafka_under_test import Kafka

from pytest_elr.sut import KafkaCluster
from pytest_elr.sut.images import DEFAULT_KAFKA_VERSION
from pytest_elr.sut.polling import await_value

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def quorum_cluster() -> Iterator[Kafka]:
    version = os.environ.get("PYTEST_ELR_KAFKA_VERSION", DEFAULT_KAFKA_VERSION)
    with KafkaCluster(brokers=[0, 1, 2], controllers=3, elr=True, kafka_version=version) as c:
        yield Kafka.on(c)


def test_active_controller_crash_elects_another_and_keeps_the_elr(quorum_cluster: Kafka, topic_factory) -> None:
    kafka = quorum_cluster
    assert len(kafka.cluster.controller_ids) == 3
    t = topic_factory(kafka, [0, 1, 2], 2)
    kafka.faults.network.cut_both(2, 0)
    kafka.faults.network.cut_both(1, 0)
    before = kafka.client.await_partition(t, lambda p: p.isr == (0,), traffic=True)
    assert before.elr  # below min ISR: ELR holds what left the ISR
    active = await_value(kafka.client.active_controller, lambda c: c is not None, timeout_s=30,
                         what="an active controller")
    assert active in kafka.cluster.controller_ids

    kafka.faults.process.crash(active)
    try:
        successor = await_value(kafka.client.active_controller, lambda c: c not in (None, active),
                                timeout_s=30, what="another active controller")
        assert successor in set(kafka.cluster.controller_ids) - {active}
        after = kafka.client.describe_partition(t)
        assert (after.leader, after.isr, after.elr, after.last_known_elr, after.leader_epoch) == (
            before.leader, before.isr, before.elr, before.last_known_elr, before.leader_epoch)
    finally:
        kafka.faults.process.start(active)
        kafka.faults.network.heal_all()
