"""The system under test: a real multi-node KRaft Kafka cluster in containers.

Images: ``elr images build`` (see :mod:`pytest_elr.sut.images`).
Cluster: :class:`KafkaCluster` (lifecycle, topology, nodes: :mod:`pytest_elr.sut.cluster`) and
:class:`ClusterClient` (topics, produce, observation: :mod:`pytest_elr.sut.client`). Faults act on a
cluster from the layer above (:mod:`pytest_elr.faults`).
Cleanup: :func:`cleanup`, :func:`reap_leftovers`.

Names are imported lazily so that ``python -m pytest_elr.sut.images`` does not import its own
module twice, and importing this package needs neither Docker nor testcontainers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "BrokerInfo": "admin", "PartitionState": "admin",
    "KafkaCluster": "cluster", "ClusterClient": "client", "PartitionOffsets": "client",
    "BuildStepError": "errors", "ClusterStartError": "errors",
    "EngineNotRunningError": "errors", "ImageMissingError": "errors",
    "KafkaProtocolError": "errors", "PortClashError": "errors", "SutError": "errors",
    "UnknownKafkaVersionError": "errors",
    "cleanup": "resources", "reap_leftovers": "resources", "session_id": "resources",
}

__all__ = [
    "BrokerInfo", "BuildStepError", "ClusterClient", "ClusterStartError", "EngineNotRunningError",
    "ImageMissingError", "KafkaCluster", "KafkaProtocolError", "PartitionOffsets",
    "PartitionState", "PortClashError", "SutError", "UnknownKafkaVersionError", "cleanup",
    "reap_leftovers", "session_id",
]

if TYPE_CHECKING:
    from pytest_elr.sut.admin import BrokerInfo, PartitionState
    from pytest_elr.sut.client import ClusterClient, PartitionOffsets
    from pytest_elr.sut.cluster import KafkaCluster
    from pytest_elr.sut.errors import (
        BuildStepError,
        ClusterStartError,
        EngineNotRunningError,
        ImageMissingError,
        KafkaProtocolError,
        PortClashError,
        SutError,
        UnknownKafkaVersionError,
    )
    from pytest_elr.sut.resources import cleanup, reap_leftovers, session_id


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"pytest_elr.sut.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'pytest_elr.sut' has no attribute {name!r}")
