"""Evidence that a power cut bit: what the broker had before, what the layer dropped, what came back.

Read from the cluster, never inferred, and counted in records: the broker's own log end offset per
partition (ListOffsets with the debugging replica id) just before the cut; the log end the
partition's segment files on its disk make right after the cut (parsed as Kafka's log recovery
reads them, :mod:`pytest_elr.sut.record_batches`); the log end the restarted broker reports when it
loads the log (its ``Completed load of Log`` line, written before it can fetch anything), and as
soon as it answers ListOffsets. The FUSE layer's unsynced bytes per file (``fs-stats``) are kept
too, but bytes are not records: index files are preallocated, so their bytes say nothing.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_elr.sut.client import ClusterClient
from pytest_elr.sut.errors import KafkaProtocolError
from pytest_elr.sut.polling import poll
from pytest_elr.sut.record_batches import log_end_offset

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
    #: per partition of ``leo_before``: the log end its segment files on disk make right after the cut
    leo_on_disk: dict[Partition, int | None] = field(default_factory=dict)
    #: per partition: the log end the restarted broker loaded (its log line; None: not found)
    leo_loaded: dict[Partition, int | None] = field(default_factory=dict)

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
        """The record of a cut that took ``seconds``; ``reply`` is the layer's (``dropped_bytes``).
        Reads what the partitions' segment files on the node's disk hold now."""
        record = PowerOffRecord(node, seconds, int(reply["dropped_bytes"]), before.unsynced_files, before.leo,
                                leo_on_disk=self.leos_on_disk(node, list(before.leo)))
        self.records.append(record)
        return record

    def leo_on_disk(self, node: int, tp: Partition) -> int | None:
        """The log end the partition's segment files on ``node``'s disk make (0: no segment; None:
        the disk could not be read). Read while the JVM is down, this is what its recovery will find."""
        return self.leos_on_disk(node, [tp])[tp]

    def leos_on_disk(self, node: int, tps: list[Partition]) -> dict[Partition, int | None]:
        """``leo_on_disk`` of each partition, their segments read from the node in one go (none for
        no partition)."""
        if not tps:
            return {}
        try:
            segments = self.cluster.node(node).partitions_segments(tps)
        except Exception:  # a container that does not answer: unmeasured, not zero
            return dict.fromkeys(tps)
        return {tp: log_end_offset(segments[tp]) for tp in tps}

    def leos_loaded(self, node: int, tps: list[Partition]) -> dict[Partition, int | None]:
        """The log end ``node`` loaded for each partition at its latest start, from its own log line
        (``Completed load of Log(dir=.../topic-p, ..., logEndOffset=N)``), written before it fetches;
        None: no such line. The log is read once for all of them."""
        needles = {tp: f"/{tp[0]}-{tp[1]}," for tp in tps}  # in Log(dir=<one of its log dirs>/topic-p, ...
        lines = self.cluster.node(node).log_since_start(*needles.values())
        return {tp: _loaded_leo([line for line in lines if needle in line]) for tp, needle in needles.items()}

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
        record.leo_loaded.update(self.leos_loaded(record.node, list(record.leo_before)))
        return record


def _loaded_leo(lines: list[str]) -> int | None:
    """The log end in the latest ``Completed load of Log`` line among ``lines`` (None: none)."""
    for line in reversed(lines):
        if "Completed load of Log(dir=" not in line:
            continue
        found = re.search(r"logEndOffset=(\d+)", line)
        if found:
            return int(found.group(1))
    return None
