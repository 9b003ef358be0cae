"""Faults (Jepsen's nemesis) on a real cluster: they operate on a ``KafkaCluster`` from above.

    faults = Faults(cluster)
    faults.network.cut_both(2, 0)        # Toxiproxy links (pytest_elr.faults.network)
    faults.process.power_off(1, ["t"])   # JVM signals, disks, power (pytest_elr.faults.process)
    faults.heal_everything()

One ``Faults`` per cluster at a time: it remembers what it did (cuts, stopped JVMs, power cuts)
and tells the cluster which brokers' metadata may lag (``KafkaCluster.metadata_lag``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_elr.faults.network import NetworkFaults
from pytest_elr.faults.process import ProcessFaults

if TYPE_CHECKING:
    from pytest_elr.sut.cluster import KafkaCluster

READY_TIMEOUT_S = 60.0


class Faults:
    """Every fault of one cluster: ``network`` and ``process``."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        self.network = NetworkFaults(cluster)
        self.process = ProcessFaults(cluster)

    def heal_everything(self) -> None:
        """Undo every fault: heal every link, resume or start every JVM, wait until every broker is
        registered and unfenced."""
        self.network.heal_all()
        for node in sorted(self.process.exiting):  # a JVM sent SIGTERM must be gone before its start
            self.process.await_exit(node)
        states = self.cluster.node_states()  # every node's at once: one Docker exec each
        for node in self.cluster.topology_ids():
            state = states[node]
            if state == "paused":
                self.process.resume(node)
            elif state == "stopped":
                self.process.start(node)
        self.cluster.wait_ready(READY_TIMEOUT_S)


__all__ = ["Faults", "NetworkFaults", "ProcessFaults"]
