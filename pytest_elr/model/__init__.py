"""The reference model (the oracle): a cluster and its partitions under the controller's rules.

``build_model`` is the one way to get an oracle for a scenario's cluster and topic; the model
backend runs on it, and every other backend is held to one.
"""

from __future__ import annotations

from pytest_elr.core.specs import ClusterSpec, TopicSpec
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.profiles import Profile, UncleanRecovery, get_profile


def build_model(cluster: ClusterSpec, topic: TopicSpec, profile: str | Profile) -> ModelCluster:
    """The model of ``topic``'s partitions on ``cluster`` under ``profile``."""
    prof = get_profile(profile) if isinstance(profile, str) else profile
    if topic.unclean_recovery is not None:
        prof = prof.with_unclean_recovery(UncleanRecovery(topic.unclean_recovery))
    return ModelCluster(cluster.brokers, list(topic.replicas), topic.min_insync_replicas, prof,
                        controllers=cluster.controllers,
                        more_partitions=tuple(list(r) for r in topic.more_partitions))


__all__ = ["ModelCluster", "build_model"]
