"""What a scenario asks for: the cluster's shape, the topic, the background workload."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClusterSpec:
    brokers: tuple[int, ...]
    controllers: int = 1
    #: How long the controller waits for a silent broker before fencing it, on a real cluster
    #: (None: the backend's tuned default, 3 s on Kafka). The model fences at once.
    session_timeout_ms: int | None = None
    #: log directories per broker; more than one is JBOD, where a replica can move between them
    log_dirs: int = 1


@dataclass(frozen=True)
class TopicSpec:
    name: str
    #: partition 0's replicas (its first is the preferred leader)
    replicas: tuple[int, ...]
    min_insync_replicas: int
    unclean_recovery: str | None = None  # kip966 profile only: none | balanced | aggressive
    #: the replicas of partitions 1, 2, ... in order (``topic: {partitions: N}``); none: one partition
    more_partitions: tuple[tuple[int, ...], ...] = ()

    @property
    def partitions(self) -> int:
        return 1 + len(self.more_partitions)

    @property
    def assignment(self) -> tuple[tuple[int, ...], ...]:
        """Every partition's replicas, by partition number."""
        return (self.replicas, *self.more_partitions)


def rotated_assignment(replicas: tuple[int, ...], partitions: int) -> tuple[tuple[int, ...], ...]:
    """``partitions`` partitions of ``replicas``, partition p holding the list rotated by p: the
    preferred leader moves on by one broker a partition, so the leaders spread round-robin (the
    language's ``topic: {partitions: N, replicas: [...]}``)."""
    n = len(replicas)
    return tuple(tuple(replicas[p % n:] + replicas[:p % n]) for p in range(partitions))


@dataclass(frozen=True)
class WorkloadSpec:
    """A background producer that runs for the whole scenario."""

    acks: str = "all"
    rate_per_s: float = 100.0
    per_step: int = 5  # records the model backend sends around each step, for the same effect
