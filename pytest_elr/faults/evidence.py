"""Evidence that a power cut bit: what the broker had before, what the layer dropped, what came back.

Read from the cluster, never inferred: the broker's FUSE layer reports its unsynced bytes per file
(``fs-stats``) and the broker its own log end offset per partition (ListOffsets with the debugging
replica id), before the cut and again as soon as the restarted broker answers.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_elr.sut.client import ClusterClient
from pytest_elr.sut.errors import KafkaProtocolError
from pytest_elr.sut.polling import poll

if TYPE_CHECKING:
    from pytest_elr.sut.cluster import KafkaCluster

Partition = tuple[str, int]


@dataclass
class PowerOffRecord:
    """Evidence of one power cut: what the broker had, what the layer dropped, what came back.

    ``leo_before``: the broker's own log end offset per partition (ListOffsets, debugging replica
    id) just before the cut, for every partition with unsynced data on it and every partition of the
    topics named. ``leo_after``: the same, read as soon as the restarted broker answers
    (``ProcessFaults.power_on``); a follower that can reach its leader may already have re-fetched
    by then, so cut it from the leader to see the recovered log.
    """

    node: int
    seconds: float  # kill + drop
    dropped_bytes: int  # exact, from the layer
    unsynced_files: dict[str, int]  # file in the log dir -> unsynced bytes just before
    leo_before: dict[Partition, int | None]
    leo_after: dict[Partition, int | None] = field(default_factory=dict)
    restart_seconds: float | None = None  # power_on: start until every LEO answers

    @property
    def records_lost(self) -> dict[Partition, int]:
        """Per partition: LEO before minus LEO after (known on both sides)."""
        out = {}
        for tp, before in self.leo_before.items():
            after = self.leo_after.get(tp)
            if before is not None and after is not None:
                out[tp] = before - after
        return out


class BeforeCut(NamedTuple):
    """What a broker had just before its power cut."""

    unsynced_files: dict[str, int]
    leo: dict[Partition, int | None]


def partition_of(path: str) -> Partition | None:
    """``topic-3/00000000000000000000.log`` -> ``("topic", 3)``; None for other files."""
    directory, sep, _ = path.partition("/")
    topic, dash, num = directory.rpartition("-")
    if not sep or not dash or not num.isdigit() or topic == "__cluster_metadata":
        return None
    return topic, int(num)


class PowerOffEvidence:
    """The records of one cluster's power cuts, each read from the cluster."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        self.client = ClusterClient(cluster)
        self.records: list[PowerOffRecord] = []

    def before_cut(self, node: int, topics: Iterable[str]) -> BeforeCut:
        """Unsynced bytes per file on ``node``; its LEO of every partition with unsynced data and of
        every partition of ``topics`` it holds a replica of."""
        stats = self.cluster.disk_stats(node)
        files = {str(f["path"]): int(f["unsynced_bytes"]) for f in stats["files"] if f["path"]}
        parts = {tp for tp in map(partition_of, files) if tp is not None}
        for topic in topics:
            with contextlib.suppress(KafkaProtocolError):
                parts |= {(topic, p.partition) for p in self.client.partitions(topic) if node in p.replicas}
        return BeforeCut(files, {tp: self.client.local_leo(node, tp) for tp in sorted(parts)})

    def cut(self, node: int, before: BeforeCut, seconds: float, reply: dict[str, Any]) -> PowerOffRecord:
        """The record of a cut that took ``seconds``; ``reply`` is the layer's (``dropped_bytes``)."""
        record = PowerOffRecord(node, seconds, int(reply["dropped_bytes"]), before.unsynced_files, before.leo)
        self.records.append(record)
        return record

    def latest(self, node: int) -> PowerOffRecord | None:
        return next((r for r in reversed(self.records) if r.node == node), None)

    def after_restart(self, record: PowerOffRecord, started: float, timeout_s: float) -> PowerOffRecord:
        """Fill in ``leo_after`` (each partition as soon as the broker answers it; None if it never
        does within ``timeout_s`` of ``started``) and ``restart_seconds``."""
        leos: dict[Partition, int | None] = dict.fromkeys(record.leo_before)

        def unanswered() -> list[Partition]:
            for tp, leo in leos.items():
                if leo is None:
                    leos[tp] = self.client.local_leo(record.node, tp)
            return [tp for tp, leo in leos.items() if leo is None]

        remaining = max(0.0, started + timeout_s - time.monotonic())
        with contextlib.suppress(TimeoutError):
            poll(unanswered, until=lambda missing: not missing, timeout_s=remaining, interval_s=0.1,
                 timed_out=lambda missing: TimeoutError(f"no LEO of {missing} from broker {record.node}"))
        record.leo_after.update(leos)
        record.restart_seconds = time.monotonic() - started
        return record
