"""Process faults: the JVM in a node container is signalled, the container stays.

=================  ===========================  ======================================
fault              how                          what survives
=================  ===========================  ======================================
shutdown (clean)   SIGTERM, wait for exit       everything; controlled shutdown moves
                                                leadership; ``.kafka_cleanshutdown``
                                                is written
crash              SIGKILL of the JVM only      everything written (page cache is the
                                                kernel's): unclean, but no data loss
pause / resume     SIGSTOP / SIGCONT            everything; peers see a silent node
restart            ``kafka-ctl start`` in the   same container, address and log dir
                   same container
replace_disk       SIGKILL, empty the log dir,  nothing: new ``meta.properties`` (same
                   StorageTool format with the  cluster id and node id, new directory
                   same cluster id and node id  id), empty logs (KIP-903)
power_off          not yet: needs the FUSE      (next issue) unsynced writes are lost
                   layer under the log dir
=================  ===========================  ======================================

The power-off seam: a :class:`DiskLayer` (the FUSE layer of the next issue)
is attached to the cluster as ``cluster.disk_layer``; ``power_off`` kills the
JVM and asks the layer to drop unsynced writes, ``power_on`` restarts.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pytest_elr.sut.cluster import KafkaCluster
    from pytest_elr.sut.node import KafkaNode


class DiskLayer(Protocol):
    """What a lossy disk layer provides per node (implemented by the FUSE layer)."""

    def drop_unsynced(self, node: KafkaNode) -> None: ...


class ProcessFaults:
    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        self.disk_layer: DiskLayer | None = None
        # Nodes whose JVM we stopped, killed or paused: not asked for metadata.
        self.down: set[int] = set()

    def _node(self, node_id: int) -> KafkaNode:
        return self.cluster.node(node_id)

    def shutdown(self, node_id: int, timeout_s: float = 60.0) -> float:
        """Clean shutdown (SIGTERM, controlled shutdown). Returns seconds to exit."""
        t0 = time.monotonic()
        self.down.add(node_id)
        self._node(node_id).ctl("stop", str(int(timeout_s)))
        return time.monotonic() - t0

    def crash(self, node_id: int) -> float:
        """SIGKILL of the JVM; the container (and its page cache) stays."""
        t0 = time.monotonic()
        self.down.add(node_id)
        self._node(node_id).ctl("kill")
        return time.monotonic() - t0

    def pause(self, node_id: int) -> None:
        self.down.add(node_id)
        self._node(node_id).ctl("pause")

    def resume(self, node_id: int) -> None:
        self._node(node_id).ctl("resume")
        self.down.discard(node_id)

    def start(self, node_id: int) -> None:
        """Start the JVM again (no-op when it runs), same container and log dir."""
        self._node(node_id).ctl("start")
        self.down.discard(node_id)

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

    def power_off(self, node_id: int) -> None:
        """Lossy unclean shutdown: needs a disk layer that can drop unsynced writes."""
        if self.disk_layer is None:
            raise NotImplementedError(
                "power_off needs the FUSE disk layer under the log dir (not built yet); "
                "crash() is an unclean shutdown that loses nothing")
        self.crash(node_id)
        self.disk_layer.drop_unsynced(self._node(node_id))
