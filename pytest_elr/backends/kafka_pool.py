"""``ClusterPool``: started clusters kept for the next run of the same shape.

Starting a real cluster costs ~20 s, so a run of a shape seen before (broker ids, controllers,
ELR on/off, Kafka version, session timeout) gets that cluster back, healed by its last user. Idle
clusters still cost CPU (every KRaft node ticks) and 2 cores run everything, so the pool keeps
at most ``size`` clusters (``$PYTEST_ELR_POOL_SIZE``, default 2: the two most recent shapes, as a
scenario's profiles alternate ELR on and off): starting one closes the least recently used idle
ones beyond that. A cluster in use is never closed by the pool.

One pool serves one pytest session (``KafkaBackend.new_session``) or one tool's run; its owner
closes it at the end.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

POOL_SIZE_ENV = "PYTEST_ELR_POOL_SIZE"
DEFAULT_POOL_SIZE = 2


class Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


class ClusterPool(Generic[C]):
    """Clusters by shape, least recently used first; ``close()`` closes every one."""

    def __init__(self, size: int | None = None) -> None:
        wanted = size if size is not None else int(os.environ.get(POOL_SIZE_ENV, str(DEFAULT_POOL_SIZE)))
        self.size = max(1, wanted)
        self._idle: OrderedDict[Hashable, C] = OrderedDict()  # least recently released first
        self._busy: dict[int, tuple[Hashable, C]] = {}  # id(cluster) -> its shape and itself

    def __len__(self) -> int:
        return len(self._idle) + len(self._busy)

    def acquire(self, shape: Hashable, start: Callable[[], C]) -> C:
        """The idle cluster of ``shape``, else a new one from ``start()`` (after closing the least
        recently used idle clusters the new one would be too many for)."""
        cluster = self._idle.pop(shape, None)
        if cluster is None:
            for old in list(self._idle)[:max(0, len(self) + 1 - self.size)]:
                self._idle.pop(old).close()
            cluster = start()
        self._busy[id(cluster)] = (shape, cluster)
        return cluster

    def release(self, cluster: C) -> None:
        """Back to the pool, healthy, as the most recently used (a second idle one of its shape is closed)."""
        shape, _ = self._busy.pop(id(cluster))
        older = self._idle.pop(shape, None)
        if older is not None:
            older.close()
        self._idle[shape] = cluster

    def evict(self, cluster: C) -> None:
        """Close a cluster that cannot be reused (e.g. it did not heal) and forget it."""
        self._busy.pop(id(cluster), None)
        for shape, idle in list(self._idle.items()):
            if idle is cluster:
                del self._idle[shape]
        cluster.close()

    def clusters(self) -> list[C]:
        """Every cluster the pool holds now, idle or in use (none is closed by asking)."""
        return list(self._idle.values()) + [c for _, c in self._busy.values()]

    def close(self) -> None:
        """Close every cluster, idle or not (the pool itself can be used again)."""
        clusters = list(self._idle.values()) + [c for _, c in self._busy.values()]
        self._idle.clear()
        self._busy.clear()
        for cluster in clusters:
            cluster.close()
