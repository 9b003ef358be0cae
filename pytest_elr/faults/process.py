"""Process faults: the JVM in a node container is signalled, the container stays.

=================  ===========================  ======================================
fault              how                          what survives
=================  ===========================  ======================================
shutdown (clean)   SIGTERM, wait for exit       everything; controlled shutdown moves
                                                leadership; ``.kafka_cleanshutdown``
                                                is written
begin_shutdown     SIGTERM, no wait             as shutdown; the next start (or kill)
                                                of the node waits for the exit first
crash              SIGKILL of the JVM only      everything written (page cache is the
                                                kernel's): unclean, but no data loss
pause / resume     SIGSTOP / SIGCONT            everything; peers see a silent node
restart            ``kafka-ctl start`` in the   same container, address and log dir
                   same container
replace_disk       SIGKILL, empty the log dir   nothing: new ``meta.properties`` (same
                   (and the FUSE layer's        cluster id and node id, new directory
                   cache), StorageTool format   id), empty logs (KIP-903)
                   with the same ids
power_off          SIGKILL of the JVM, then     what was fsynced (and, for names, made
                   the FUSE layer under the     durable per the layer's metadata mode);
                   log dir drops everything     no ``.kafka_cleanshutdown``; the JVM
                   unsynced; the JVM stays      restarts with ``start``/``restart``
                   stopped
=================  ===========================  ======================================

Shutdown and crash go through the layer like any write: the layer outlives the
JVM, as the page cache outlives a process, so neither loses anything.

The power-off seam: a :class:`DiskLayer` is attached as ``disk_layer``
(:class:`LazyFsLayer`, the ``pytest_elr.lazyfs`` process in each broker
container, when the cluster runs with it); ``power_off`` stops the JVM, asks
the layer to drop unsynced writes (Jepsen's ``lazyfs.clj``: kill, then lose the
unfsynced writes) and keeps the evidence (:mod:`pytest_elr.faults.evidence`).

A node whose JVM is stopped, killed or paused answers from stale metadata, if at all: the set of
such nodes is kept in the cluster's ``metadata_lag`` (under ``"process"``), so the client asks
them last.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from pytest_elr.faults.evidence import PowerOffEvidence, PowerOffRecord

_log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pytest_elr.sut.cluster import KafkaCluster
    from pytest_elr.sut.node import KafkaNode


class DiskLayer(Protocol):
    """What a lossy disk layer provides per node (implemented by the FUSE layer)."""

    def has_layer(self, node: KafkaNode) -> bool: ...

    def drop_unsynced(self, node: KafkaNode) -> dict[str, Any]:
        """SIGKILL of a live JVM, wait until it is gone, then drop what was never synced."""
        ...


class LazyFsLayer:
    """The FUSE write-cache layer in each node container, driven by ``kafka-ctl``."""

    def has_layer(self, node: KafkaNode) -> bool:
        return bool(node.lazyfs)

    def drop_unsynced(self, node: KafkaNode) -> dict[str, Any]:
        """The layer's reply: ``dropped_bytes``, ``invalidated_inodes``. One node command: ``kafka-ctl
        power-off`` kills a live JVM and waits until it is gone before the layer drops."""
        return node.ctl_json("power-off")


class ProcessFaults:
    """Signal, restart and re-disk a cluster's JVMs; cut their power (one instance per cluster)."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        self.disk_layer: DiskLayer | None = LazyFsLayer() if cluster.lazyfs is not None else None
        self.evidence = PowerOffEvidence(cluster)
        # Nodes whose JVM we stopped, killed or paused.
        self.down: set[int] = set()
        # Nodes sent SIGTERM without waiting for the exit (``begin_shutdown``).
        self.exiting: set[int] = set()

    def _node(self, node_id: int) -> KafkaNode:
        return self.cluster.node(node_id)

    def _mark(self, node_id: int, down: bool) -> None:
        if down:
            self.down.add(node_id)
        else:
            self.down.discard(node_id)
        self.cluster.metadata_lag["process"] = frozenset(self.down)

    def _before_jvm_ends(self, node_id: int) -> None:
        """A JVM that ends takes its coverage with it: collect it first (no-op without coverage; a
        paused JVM cannot answer, and a stopped one has nothing left)."""
        if node_id not in self.down:
            self.cluster.dump_coverage([node_id])

    def shutdown(self, node_id: int, timeout_s: float = 60.0) -> float:
        """Clean shutdown (SIGTERM, controlled shutdown). Returns seconds to exit."""
        self._before_jvm_ends(node_id)
        t0 = time.monotonic()
        self._mark(node_id, down=True)
        self._node(node_id).ctl("stop", str(int(timeout_s)))
        return time.monotonic() - t0

    def begin_shutdown(self, node_id: int) -> None:
        """Clean shutdown that does not wait for the exit: SIGTERM, and return while the broker's
        controlled shutdown runs (what the controller does meanwhile can be read). ``kafka-ctl stop 0``
        signals as ``stop`` does and gives up waiting at once (its "still alive" exit is expected).
        The next ``start``, ``crash`` or ``shutdown`` of the node waits for the exit first."""
        self._before_jvm_ends(node_id)
        self._mark(node_id, down=True)
        self._node(node_id).ctl("stop", "0", check=False)
        self.exiting.add(node_id)

    def await_exit(self, node_id: int, timeout_s: float = 330.0) -> None:
        """Wait until a JVM sent SIGTERM by ``begin_shutdown`` has exited (no-op otherwise); a JVM
        still alive after ``timeout_s`` fails the node command."""
        if node_id in self.exiting:
            self._node(node_id).ctl("stop", str(int(timeout_s)))  # "not running" once it exited
            self.exiting.discard(node_id)

    def crash(self, node_id: int) -> float:
        """SIGKILL of the JVM; the container (and its page cache) stays."""
        self.await_exit(node_id)
        self._before_jvm_ends(node_id)
        t0 = time.monotonic()
        self._mark(node_id, down=True)
        self._node(node_id).ctl("kill")
        return time.monotonic() - t0

    def pause(self, node_id: int) -> None:
        self._mark(node_id, down=True)
        self._node(node_id).ctl("pause")

    def resume(self, node_id: int) -> None:
        self._node(node_id).ctl("resume")
        self._mark(node_id, down=False)

    def start(self, node_id: int) -> None:
        """Start the JVM again (no-op when it runs), same container and log dir."""
        self.await_exit(node_id)
        self._node(node_id).ctl("start")
        self._mark(node_id, down=False)

    def restart(self, node_id: int, clean: bool = True) -> None:
        """Stop (clean or crash) if running, then start again."""
        if self._node(node_id).state() != "stopped":
            self.shutdown(node_id) if clean else self.crash(node_id)
        self.start(node_id)

    def replace_disk(self, node_id: int, start: bool = True) -> None:
        """Kill the JVM, empty its log dir, re-format with the same ids, start again.

        KRaft refuses a log dir without ``meta.properties``, so the new disk is
        formatted with the cluster's id and the node's id; it gets a new
        directory id, as a real new disk would.
        """
        node = self._node(node_id)
        self.crash(node_id)
        node.ctl("wipe")
        node.ctl("format", self.cluster.kafka_cluster_id, "1" if self.cluster.elr else "0")
        if start:
            self.start(node_id)

    def flush(self, node_id: int) -> None:
        """The disk layer makes everything the node wrote durable (as ``sync`` would)."""
        self._node(node_id).ctl("fs-sync")

    def power_off(self, node_id: int, topics: Iterable[str] = ()) -> PowerOffRecord:
        """Power cut of one broker: stop (SIGKILL), drop everything unsynced, keep the evidence.

        The JVM stays stopped: ``power_on`` (or ``start``/``restart``) boots it on what was synced.
        ``topics``: whose partitions on the broker the evidence covers, besides those with unsynced
        data. Returns the evidence (also kept in ``evidence.records``); ``power_on`` completes it.
        """
        layer = self._disk_layer(node_id)
        before = self.evidence.before_cut(node_id, topics)
        t0 = time.monotonic()
        self.await_exit(node_id)  # as ``crash`` does: a JVM still exiting cleanly finishes first
        reply = self._cut_power(node_id, layer)
        return self.evidence.cut(node_id, before, time.monotonic() - t0, reply)

    def power_off_controller(self, node_id: int) -> dict[str, Any]:
        """Power cut of one controller: SIGKILL, and its metadata log dir drops what it never
        fsynced. No evidence in records: a controller holds no partition of a topic; the layer's
        reply (``dropped_bytes``, ``invalidated_inodes``) is returned and logged."""
        reply = self._cut_power(node_id, self._disk_layer(node_id))
        _log.info("power cut of controller %d: %s", node_id, reply)
        return reply

    def _cut_power(self, node_id: int, layer: DiskLayer) -> dict[str, Any]:
        """SIGKILL, then the drop, in the one node command of ``drop_unsynced`` (a ``crash`` before
        it was one more Docker call, up to 1.2 s at load 18, 2026-11-27): the layer drops only once
        the JVM is gone. The layer's reply."""
        self._before_jvm_ends(node_id)
        self._mark(node_id, down=True)
        return layer.drop_unsynced(self._node(node_id))

    def power_on(self, node_id: int, timeout_s: float = 60.0) -> PowerOffRecord | None:
        """Start a powered-off broker; wait until it answers its LEOs and record them.

        Returns the broker's latest :class:`PowerOffRecord` (``None`` if it never
        lost power), with ``leo_after`` and ``restart_seconds`` filled in.
        """
        record = self.evidence.latest(node_id)
        started = time.monotonic()
        self.start(node_id)
        if record is None:
            return None
        return self.evidence.after_restart(record, started, timeout_s)

    def _disk_layer(self, node_id: int) -> DiskLayer:
        layer = self.disk_layer
        if layer is None or not layer.has_layer(self._node(node_id)):
            raise NotImplementedError(
                f"power_off needs the FUSE disk layer under {self._node(node_id).name}'s log dir "
                "(KafkaCluster(lazyfs=...)); crash() is an unclean shutdown "
                "that loses nothing")
        return layer
