"""Real cluster, ELR off (the pre-KIP-966 negative control): brokers [1, 2, 3, 4]."""

from __future__ import annotations

import pytest
from kafka_under_test import Kafka

pytestmark = pytest.mark.docker

OBSERVER = 4  # hosts no replica; answers metadata when all replicas are down


def test_caller_given_ids(legacy: Kafka) -> None:
    assert legacy.cluster.broker_ids == [1, 2, 3, 4]
    assert {b.broker_id for b in legacy.client.brokers()} == {1, 2, 3, 4}
    assert all(c not in legacy.cluster.broker_ids for c in legacy.cluster.controller_ids)


def test_isr_never_empties_without_elr(legacy: Kafka, topic_factory) -> None:
    t = topic_factory(legacy, [1, 2, 3], 2)
    legacy.client.produce(t, [b"x"])
    legacy.faults.process.shutdown(1)
    legacy.client.await_partition(t, lambda p: p.isr == (2, 3), via=OBSERVER)
    legacy.faults.process.shutdown(2)
    p = legacy.client.await_partition(t, lambda p: p.isr == (3,), via=OBSERVER)
    assert p.leader == 3 and p.elr == ()  # no ELR without the feature
    legacy.faults.process.crash(3)
    # The last ISR member stays in the ISR although it is gone; no leader.
    p = legacy.client.await_partition(t, lambda p: p.leader is None, via=OBSERVER, timeout_s=20)
    assert p.isr == (3,) and p.elr == () and p.last_known_elr == ()
    assert legacy.client.fenced_brokers() == {1, 2, 3}
    # It is re-elected when it comes back: the pre-ELR behaviour.
    legacy.faults.process.start(3)
    p = legacy.client.await_partition(t, lambda p: p.leader == 3, via=OBSERVER, timeout_s=60)
    assert p.isr == (3,)
