"""Fixtures for the real-cluster tests of the system under test.

These tests need a Docker engine and the images (``elr images setup-host``
then ``elr images build``); without them they FAIL with
the error that names the fix - they never skip.

One cluster per module (startup ~20-25 s on 2 cores); every test heals all
faults and restarts stopped JVMs on the way out, so the next test starts
from a healthy cluster.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest
from kafka_under_test import Kafka

from pytest_elr.sut import KafkaCluster
from pytest_elr.sut.client import random_topic
from pytest_elr.sut.images import DEFAULT_KAFKA_VERSION

# Which Kafka to test (an image for it must be built).
KAFKA_VERSION = os.environ.get("PYTEST_ELR_KAFKA_VERSION", DEFAULT_KAFKA_VERSION)



@pytest.fixture(scope="module")
def elr_cluster() -> Iterator[Kafka]:
    with KafkaCluster(brokers=[0, 1, 2], controllers=1, elr=True,
                      kafka_version=KAFKA_VERSION) as c:
        yield Kafka.on(c)


@pytest.fixture(scope="module")
def legacy_cluster() -> Iterator[Kafka]:
    # ELR off; broker 4 hosts no replica of the test topics and is never
    # faulted: it answers metadata requests when every replica is down.
    with KafkaCluster(brokers=[1, 2, 3, 4], controllers=1, elr=False,
                      kafka_version=KAFKA_VERSION) as c:
        yield Kafka.on(c)


@pytest.fixture(scope="module")
def jbod_cluster() -> Iterator[Kafka]:
    """ELR on, two log dirs per broker (JBOD), both on the FUSE layer."""
    with KafkaCluster(brokers=[0, 1, 2], controllers=1, elr=True, kafka_version=KAFKA_VERSION,
                      log_dirs=2) as c:
        yield Kafka.on(c)


@pytest.fixture(scope="module")
def four_broker_cluster() -> Iterator[Kafka]:
    """ELR on, four brokers at min ISR 2: room to move a partition of three replicas."""
    with KafkaCluster(brokers=[0, 1, 2, 3], controllers=1, elr=True, kafka_version=KAFKA_VERSION,
                      min_insync_replicas=2) as c:
        yield Kafka.on(c)


@pytest.fixture
def elr(elr_cluster: Kafka) -> Iterator[Kafka]:
    """The ELR cluster, restored to health after the test."""
    yield elr_cluster
    elr_cluster.faults.heal_everything()


@pytest.fixture
def legacy(legacy_cluster: Kafka) -> Iterator[Kafka]:
    yield legacy_cluster
    legacy_cluster.faults.heal_everything()


@pytest.fixture
def topic_factory() -> Callable[[Kafka, list[int], int], str]:
    def make(kafka: Kafka, replicas: list[int], min_isr: int) -> str:
        name = random_topic()
        kafka.client.create_topic(name, {0: replicas}, min_insync_replicas=min_isr)
        return name
    return make
