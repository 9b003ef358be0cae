"""Kafka's controller election meters, read on demand from the controller's JVM (``sut/meters.py``),
on Kafka 4.4.0 (4.0.2 has no ELR meter: docs/model.md, "Metrics")."""

from __future__ import annotations

import pytest
from kafka_under_test import Kafka

from pytest_elr.sut import KafkaCluster
from pytest_elr.sut.client import random_topic
from pytest_elr.sut.polling import await_value

pytestmark = pytest.mark.docker


def test_an_election_from_the_elr_marks_the_controllers_elr_meter_once() -> None:
    with KafkaCluster(brokers=[0, 1, 2], controllers=1, elr=True, kafka_version="4.4.0") as cluster:
        kafka = Kafka.on(cluster)
        topic = random_topic()
        kafka.client.create_topic(topic, {0: [0, 1, 2]}, min_insync_replicas=2)
        before = cluster.election_counts()
        assert set(before) == {"elr_elections", "unclean_elections"}
        # Clean shutdowns keep each stopped replica eligible: the ISR empties into the ELR.
        kafka.faults.process.shutdown(0)
        p = kafka.client.await_partition(topic, lambda p: p.leader in (1, 2) and 0 not in p.isr)
        first = p.leader
        assert first is not None
        kafka.faults.process.shutdown(first)
        last = ({1, 2} - {first}).pop()
        kafka.client.await_partition(topic, lambda p: p.isr == (last,), via=last)
        kafka.faults.process.shutdown(last)
        assert cluster.election_counts() == before  # leaderless, no election yet
        kafka.faults.process.restart(first)  # cleanly stopped, in the ELR: elected from it
        p = kafka.client.await_partition(topic, lambda p: p.leader == first, timeout_s=60, via=first)
        assert p.isr == (first,) and last in p.elr
        after = await_value(cluster.election_counts, lambda c: c != before, timeout_s=10, what="the meters")
        assert after == {"elr_elections": before["elr_elections"] + 1,
                         "unclean_elections": before["unclean_elections"]}
