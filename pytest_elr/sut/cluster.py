"""``KafkaCluster``: a real KRaft cluster in containers -- its lifecycle, topology and nodes.

    with KafkaCluster(brokers=[0, 1, 2], controllers=1, elr=True) as c:
        client = ClusterClient(c)                        # pytest_elr.sut.client
        client.create_topic("t", {0: [0, 1, 2]}, min_insync_replicas=2)
        faults = Faults(c)                               # pytest_elr.faults
        faults.network.cut_both(2, 0)
        client.await_partition("t", lambda p: p.isr == (0, 1))

Talking to the brokers over Kafka's protocol is :class:`pytest_elr.sut.client.ClusterClient`'s
job; faults are :mod:`pytest_elr.faults`' (a layer above, operating on a cluster). The one thing
they share through the cluster is :attr:`KafkaCluster.metadata_lag`: which brokers the faults left
with metadata that may lag, so the client asks them last.

Disks: by default each broker's log dir is a FUSE mount of
:mod:`pytest_elr.lazyfs` (``lazyfs=`` its metadata mode; ``None`` for a plain
directory), so a power off loses what Kafka never fsynced while a crash
(SIGKILL) and a shutdown (SIGTERM) lose nothing. Kafka fsyncs a segment only
when it rolls (``log.flush.*`` defaults), so the layer holds up to
``log.segment.bytes`` per partition in memory: 1 MiB here. The controllers of a
3-controller quorum sit behind the same layer (``power_off_controller``: KRaft
flushes its log before a voter acknowledges, so the layer holds little); a
single controller keeps a plain directory.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import docker.errors

from pytest_elr.sut import admin, images, resources
from pytest_elr.sut.config import Topology
from pytest_elr.sut.errors import ClusterStartError, NodeCommandError, SutError
from pytest_elr.sut.instrument import Instrumentation, build_agents
from pytest_elr.sut.metadata_log import MetadataLog
from pytest_elr.sut.meters import election_counts
from pytest_elr.sut.node import KafkaNode, Network, without_ryuk
from pytest_elr.sut.polling import poll

T = TypeVar("T")

# Metadata mode of the FUSE layer under each broker's log dir, and a quorum's controllers' (see pytest_elr.lazyfs).
DEFAULT_LAZYFS = "fsyncdir"
# Small segments bound the layer's memory: Kafka fsyncs a segment when it rolls.
LAZYFS_CONFIG = {
    "log.segment.bytes": str(1 << 20),  # Kafka 4's minimum
    "offsets.topic.segment.bytes": str(1 << 20),
    "transaction.state.log.segment.bytes": str(1 << 20),
}
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


def _kafka_uuid() -> str:
    """Kafka's cluster id: a random UUID as 22 chars of url-safe base64.

    Like Kafka's own ``Uuid.randomUuid``, never one that starts with ``-``: command lines (the
    storage tool's ``-t ID``) would read it as an option. Found by the model-vs-Kafka comparison:
    1 cluster start in 64 failed to format.
    """
    while True:
        text = urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _parallel(fn: Callable[[KafkaNode], T], nodes: Sequence[KafkaNode],
              stopping: threading.Event | None = None) -> list[T]:
    """``fn`` on every node at once. Leaving (an error, an interrupt) awaits the calls under way;
    ``stopping`` is set first, so that they can skip what they have not begun."""
    with ThreadPoolExecutor(max_workers=max(1, len(nodes))) as ex:
        try:
            return list(ex.map(fn, nodes))
        except BaseException:
            if stopping is not None:
                stopping.set()
            raise


class KafkaCluster:
    """Brokers + dedicated KRaft controllers, one container each, on a private network."""

    def __init__(self, brokers: Sequence[int] = (0, 1, 2), controllers: int | Sequence[int] = 1,
                 *, elr: bool = True, kafka_version: str = images.DEFAULT_KAFKA_VERSION,
                 min_insync_replicas: int = 1, image: str | None = None,
                 extra_config: Mapping[str, str] | None = None,
                 start_timeout_s: float = 120.0, lazyfs: str | None = DEFAULT_LAZYFS,
                 instrumentation: Instrumentation | None = None, log_dirs: int = 1) -> None:
        if isinstance(controllers, int):
            base = max(1000, max(brokers, default=0) + 1)
            controllers = list(range(base, base + controllers))
        if lazyfs is not None:
            extra_config = {**LAZYFS_CONFIG, **(extra_config or {})}
        self.topology = Topology.build(list(brokers), list(controllers), min_insync_replicas,
                                       extra_config, broker_log_dirs=log_dirs)
        self.lazyfs = lazyfs
        #: Java agents in the JVMs (coverage, a planted mutant of Kafka's code): sut.instrument
        self.instrumentation = instrumentation
        #: the subdirectory of the coverage directory that dumps go to now (one per scenario run)
        self.coverage_run = "cluster"
        self._coverage_dumps = 0
        self.elr = elr
        self.kafka_version = kafka_version
        self.start_timeout_s = start_timeout_s
        self.cluster_id = resources.new_cluster_id()  # our resource id
        self.kafka_cluster_id = _kafka_uuid()  # Kafka's cluster.id
        self._image = image
        self._nodes: dict[int, KafkaNode] = {}
        self._network: Network | None = None
        self._closed = False
        self._lock = threading.Lock()
        self.timings: dict[str, float] = {}  # seconds per startup phase
        # Brokers whose metadata may lag the controller's, by cause ("network", "process"). The faults
        # keep it current (a broker they stopped, or cut from the controller, answers from a stale
        # cache); the client asks these brokers last.
        self.metadata_lag: dict[str, frozenset[int]] = {}
        self._metadata_logs: dict[int, MetadataLog] = {}
        #: set when the startup stops early (an interrupt, a node's failed step): no node begins another step
        self._startup_stopping = threading.Event()

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> KafkaCluster:
        image = images.resolve_image(self.kafka_version, self._image)
        labels = resources.labels(self.cluster_id)
        resources.register(id(self), self.close)
        agents = build_agents() if self.instrumentation is not None else None
        try:
            net = Network(docker_network_kw={"labels": labels})
            net.name = f"pytest-elr-{self.cluster_id}"
            self._network = net.create()
            for spec in self.topology.nodes:
                self._nodes[spec.node_id] = KafkaNode(
                    spec, self.topology, image, net, self.cluster_id, labels,
                    lazyfs=self.lazyfs if spec.is_broker or len(self.controller_ids) > 1 else None,
                    instrumentation=self.instrumentation, agents=agents)
            nodes = list(self._nodes.values())
            with without_ryuk():
                self._bring_up(nodes, "1" if self.elr else "0")
            t0 = time.monotonic()
            self.wait_ready(self.start_timeout_s)
            self.timings["ready"] = time.monotonic() - t0
        except BaseException:
            self.close()
            raise
        return self

    def _bring_up(self, nodes: Sequence[KafkaNode], elr: str) -> None:
        """Every node through its own steps at once, timed (``timings``: the slowest node's per step).

        No barrier between steps: a node never waits for the slowest node's previous step, so the
        controller's JVM starts while the brokers still mount their disk layers. Interrupted (or
        one node failed), the others end the step under way and begin no other: the cluster is
        closed once they have, and an xdist worker whose controller went has 15 s for all of it.
        """
        stopping = self._startup_stopping = threading.Event()
        steps: list[tuple[str, Callable[[KafkaNode], object]]] = [
            ("containers", lambda n: n.start_container()),
            ("configure", lambda n: n.configure()),
            ("format", lambda n: n.ctl("format", self.kafka_cluster_id, elr)),
            ("start", lambda n: n.ctl("start")),
        ]

        def up(node: KafkaNode) -> dict[str, float]:
            took: dict[str, float] = {}
            for step, fn in steps:
                if stopping.is_set():
                    break
                t0 = time.monotonic()
                try:
                    fn(node)
                except NodeCommandError as e:
                    stopping.set()
                    raise ClusterStartError(f"startup step '{step}' failed on {node.name}: {e}",
                                            {n.name: n.logs() for n in nodes}) from e
                except BaseException:
                    stopping.set()
                    raise
                took[step] = time.monotonic() - t0
            return took

        for took in _parallel(up, nodes, stopping):
            for step, seconds in took.items():
                self.timings[step] = max(self.timings.get(step, 0.0), seconds)

    def wait_ready(self, timeout_s: float) -> None:
        """Every broker registered and unfenced, seen by every broker."""
        want = set(self.broker_ids)

        def not_ready() -> str | None:  # what is missing; None: ready
            dead = [self._nodes[i] for i, state in self.node_states().items() if state == "stopped"]
            if dead:
                raise ClusterStartError(
                    f"JVM exited during startup on {', '.join(n.name for n in dead)}",
                    {n.name: n.logs() for n in dead})
            for b in self.broker_ids:
                seen = admin.describe_cluster("127.0.0.1", self.client_port(b), 2.0)
                unfenced = {x.broker_id for x in seen if not x.fenced}
                if unfenced != want:
                    return f"broker {b} sees unfenced {sorted(unfenced)}"
            return None

        poll(not_ready, until=lambda missing: missing is None, timeout_s=timeout_s, interval_s=0.25,
             timed_out=lambda last: ClusterStartError(
                 f"cluster not ready within {timeout_s:.0f}s (last: {last})",
                 {n.name: n.logs() for n in self._nodes.values()}))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        resources.unregister(id(self))
        # By label: also catches containers whose creation raced an interrupt.
        with contextlib.suppress(SutError, docker.errors.DockerException):
            resources.remove_cluster(self.cluster_id)

    # ------------------------------------------------------------ instrumentation

    def dump_coverage(self, node_ids: Sequence[int] | None = None) -> int:
        """JaCoCo's coverage of these nodes' JVMs (default: all) since their last dump into
        ``<coverage dir>/<coverage_run>/``, then reset; the number of JVMs that answered. Called at a
        run's end and before a fault ends a JVM (its lines would die with it)."""
        if self.instrumentation is None or self.instrumentation.coverage_dir is None:
            return 0
        with self._lock:
            self._coverage_dumps += 1
            seq = self._coverage_dumps
        ids = list(node_ids) if node_ids is not None else list(self._nodes)
        nodes = [self._nodes[i] for i in ids if i in self._nodes]
        (self.instrumentation.coverage_dir / self.coverage_run).mkdir(parents=True, exist_ok=True)
        return sum(_parallel(lambda n: n.dump_coverage(f"{self.coverage_run}/{n.name}-{seq}.exec"), nodes))

    def planted_mutants(self) -> dict[str, str]:
        """Per node whose JVM runs the mutation agent, what it wrote on planting (empty: its class
        never loaded there yet)."""
        if self.instrumentation is None or self.instrumentation.mutant is None:
            return {}
        here = [n for n in self._nodes.values() if self.instrumentation.mutant_here(n.spec.is_broker)]
        return {n.name: n.planted_mutant() or "" for n in here}

    # ------------------------------------------------------------ topology

    def node(self, node_id: int) -> KafkaNode:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise KeyError(f"no node {node_id} in this cluster (started?)") from None

    @property
    def broker_ids(self) -> list[int]:
        return [b.node_id for b in self.topology.brokers]

    def election_counts(self, controller: int | None = None) -> dict[str, int]:
        """Kafka's election meters on ``controller`` (default: the first), by expectation key
        (``sut/meters.py``): counts since that controller's JVM started."""
        return election_counts(self.node(self.controller_ids[0] if controller is None else controller))

    @property
    def controller_ids(self) -> list[int]:
        return [c.node_id for c in self.topology.controllers]

    def topology_ids(self) -> list[int]:
        return [n.node_id for n in self.topology.nodes]

    def client_port(self, broker_id: int) -> int:
        port = self.node(broker_id).client_port
        if port is None:
            raise KeyError(f"{broker_id} is not a broker")
        return port

    @property
    def bootstrap_servers(self) -> str:
        """For clients in the test process (bypasses the proxies)."""
        return ",".join(f"127.0.0.1:{self.client_port(b)}" for b in self.broker_ids)

    def lagging_brokers(self) -> set[int]:
        """Brokers whose metadata may lag, whatever the cause (see ``metadata_lag``)."""
        return set().union(*self.metadata_lag.values())

    # ------------------------------------------------------------ nodes, read from their containers

    def logs(self, node_id: int, lines: int = 40) -> str:
        return self.node(node_id).logs(lines)

    def node_state(self, node: int) -> str:
        """``running`` | ``paused`` | ``stopped`` (of the JVM, not the container)."""
        return self.node(node).state()

    def node_states(self) -> dict[int, str]:
        """Every node's ``node_state`` by node id, asked at once: each is a Docker exec (up to 3.5 s
        on a loaded machine, 2026-11-27), and a cluster of 3 controllers has 7 nodes or more."""
        ids = self.topology_ids()
        with ThreadPoolExecutor(max_workers=max(1, len(ids))) as pool:
            return dict(zip(ids, pool.map(self.node_state, ids), strict=True))

    def disk_stats(self, node: int) -> dict[str, Any]:
        """The broker's FUSE layer ``stats``: unsynced bytes per file and in total."""
        return self.node(node).fs_stats()

    def unsynced_bytes(self, node: int) -> int:
        """Bytes a power cut of ``node`` would lose right now."""
        return int(self.disk_stats(node)["unsynced_bytes"])

    def unsynced_report(self) -> dict[int, int]:
        """Unsynced bytes per broker that has the layer."""
        return {b: self.unsynced_bytes(b) for b in self.broker_ids if self.node(b).lazyfs}

    def metadata_log(self, controller: int) -> MetadataLog:
        """The controller's metadata log, replayed; kept, so each read copies only what was appended."""
        if controller not in self._metadata_logs:
            self._metadata_logs[controller] = MetadataLog(self.node(controller))
        return self._metadata_logs[controller]

    def has_clean_shutdown_marker(self, node: int) -> bool:
        """Whether ``.kafka_cleanshutdown`` is in the node's (first) log dir, as Kafka would see it."""
        kafka_node = self.node(node)
        code, _ = kafka_node.exec("test", "-f", f"{kafka_node.spec.log_dirs[0]}/{CLEAN_SHUTDOWN_FILE}",
                                  check=False)
        return code == 0
