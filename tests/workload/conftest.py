"""One real ELR cluster for all workload tests (startup ~20-25 s on 2 cores).

Without a Docker engine or the images the fixture raises the error naming the fix: the tests
FAIL, they never skip. Each test gets a fresh topic and leaves the cluster healed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from pytest_elr.faults import Faults
from pytest_elr.sut import ClusterClient, KafkaCluster
from pytest_elr.sut.images import DEFAULT_KAFKA_VERSION

KAFKA_VERSION = os.environ.get("PYTEST_ELR_KAFKA_VERSION", DEFAULT_KAFKA_VERSION)



@pytest.fixture(scope="session")
def workload_cluster() -> Iterator[KafkaCluster]:
    with KafkaCluster(brokers=[0, 1, 2], controllers=1, elr=True, kafka_version=KAFKA_VERSION) as c:
        yield c


@pytest.fixture(scope="session")
def workload_faults(workload_cluster: KafkaCluster) -> Faults:
    return Faults(workload_cluster)  # one per cluster: it remembers what it did


@pytest.fixture
def cluster(workload_cluster: KafkaCluster, workload_faults: Faults) -> Iterator[KafkaCluster]:
    yield workload_cluster
    workload_faults.heal_everything()


@pytest.fixture
def client(cluster: KafkaCluster) -> ClusterClient:
    return ClusterClient(cluster)


@pytest.fixture
def faults(cluster: KafkaCluster, workload_faults: Faults) -> Faults:
    return workload_faults
