"""Real cluster, ELR off (the pre-KIP-966 negative control): brokers [1, 2, 3, 4]."""

from __future__ import annotations

import pytest

from pytest_elr.sut import KafkaCluster

pytestmark = pytest.mark.docker

OBSERVER = 4  # hosts no replica; answers metadata when all replicas are down


def test_caller_given_ids(legacy: KafkaCluster) -> None:
    assert legacy.broker_ids == [1, 2, 3, 4]
    assert {b.broker_id for b in legacy.brokers()} == {1, 2, 3, 4}
    assert all(c not in legacy.broker_ids for c in legacy.controller_ids)


def test_isr_never_empties_without_elr(legacy: KafkaCluster, topic_factory) -> None:
    t = topic_factory(legacy, [1, 2, 3], 2)
    legacy.produce(t, [b"x"])
    legacy.shutdown(1)
    legacy.await_partition(t, lambda p: p.isr == (2, 3), via=OBSERVER)
    legacy.shutdown(2)
    p = legacy.await_partition(t, lambda p: p.isr == (3,), via=OBSERVER)
    assert p.leader == 3 and p.elr == ()  # no ELR without the feature
    legacy.crash(3)
    # The last ISR member stays in the ISR although it is gone; no leader.
    p = legacy.await_partition(t, lambda p: p.leader is None, via=OBSERVER, timeout_s=20)
    assert p.isr == (3,) and p.elr == () and p.last_known_elr == ()
    assert legacy.fenced_brokers() == {1, 2, 3}
    # It is re-elected when it comes back: the pre-ELR behaviour.
    legacy.start_node(3)
    p = legacy.await_partition(t, lambda p: p.leader == 3, via=OBSERVER, timeout_s=60)
    assert p.isr == (3,)
