"""A running cluster with its client and its faults, as the real-cluster tests use it."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_elr.faults import Faults
from pytest_elr.sut import ClusterClient, KafkaCluster


@dataclass(frozen=True)
class Kafka:
    """One of each per cluster, shared by all of a module's tests."""

    cluster: KafkaCluster
    client: ClusterClient
    faults: Faults

    @classmethod
    def on(cls, cluster: KafkaCluster) -> Kafka:
        return cls(cluster, ClusterClient(cluster), Faults(cluster))
