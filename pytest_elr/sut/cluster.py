"""``KafkaCluster``: a real KRaft cluster in containers, with faults and observation.

    with KafkaCluster(brokers=[0, 1, 2], controllers=1, elr=True) as c:
        c.create_topic("t", {0: [0, 1, 2]}, min_insync_replicas=2)
        c.cut_both(2, 0)
        c.await_partition("t", lambda p: p.isr == (0, 1))
        print(c.describe_partition("t"))

Observations are read from the cluster (DescribeTopicPartitions, DescribeCluster,
ListOffsets on the client listeners), never inferred. Metadata is asked of a
broker that is running and not cut from the controller, since a cut-off
broker's metadata cache is stale.

Disks: by default each broker's log dir is a FUSE mount of
:mod:`pytest_elr.lazyfs` (``lazyfs=`` its metadata mode; ``None`` for a plain
directory), so ``power_off`` loses what Kafka never fsynced while ``crash``
(SIGKILL) and ``shutdown`` (SIGTERM) lose nothing. Kafka fsyncs a segment only
when it rolls (``log.flush.*`` defaults), so the layer holds up to
``log.segment.bytes`` per partition in memory: 1 MiB here. Controllers keep a
plain directory (KRaft fsyncs its log on every append anyway).
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import docker.errors

from pytest_elr.faults.network import Group, NetworkFaults, NodeRef
from pytest_elr.faults.process import LazyFsLayer, ProcessFaults
from pytest_elr.sut import admin, images, produce, resources
from pytest_elr.sut.admin import PartitionState
from pytest_elr.sut.config import DATA_DIR, Topology
from pytest_elr.sut.errors import (
    ClusterStartError,
    ImageMissingError,
    KafkaProtocolError,
    NodeCommandError,
    SutError,
    UnknownKafkaVersionError,
)
from pytest_elr.sut.node import KafkaNode, Network

T = TypeVar("T")

# Metadata mode of the FUSE layer under each broker's log dir (see pytest_elr.lazyfs).
DEFAULT_LAZYFS = "fsyncdir"
# Small segments bound the layer's memory: Kafka fsyncs a segment when it rolls.
LAZYFS_CONFIG = {
    "log.segment.bytes": str(1 << 20),  # Kafka 4's minimum
    "offsets.topic.segment.bytes": str(1 << 20),
    "transaction.state.log.segment.bytes": str(1 << 20),
}
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


@dataclass
class PowerOffRecord:
    """Evidence of one power cut: what the broker had, what the layer dropped, what came back.

    ``leo_before``: the broker's own log end offset per partition (ListOffsets,
    debugging replica id) just before the cut, for every partition with unsynced
    data on it and every partition of the topics named. ``leo_after``: the same,
    read as soon as the restarted broker answers (``KafkaCluster.power_on``); a
    follower that can reach its leader may already have re-fetched by then, so
    cut it from the leader to see the recovered log.
    """

    node: int
    seconds: float  # kill + drop
    dropped_bytes: int  # exact, from the layer
    unsynced_files: dict[str, int]  # file in the log dir -> unsynced bytes just before
    leo_before: dict[tuple[str, int], int | None]
    leo_after: dict[tuple[str, int], int | None] = field(default_factory=dict)
    restart_seconds: float | None = None  # power_on: start until every LEO answers

    @property
    def records_lost(self) -> dict[tuple[str, int], int]:
        """Per partition: LEO before minus LEO after (known on both sides)."""
        out = {}
        for tp, before in self.leo_before.items():
            after = self.leo_after.get(tp)
            if before is not None and after is not None:
                out[tp] = before - after
        return out


@dataclass(frozen=True)
class PartitionOffsets:
    """HWM as the leader reports it; each replica's own log end offset (None: no answer)."""

    leader: int | None
    hwm: int | None
    leo: dict[int, int | None]


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


def _parallel(fn: Callable[[KafkaNode], T], nodes: Sequence[KafkaNode]) -> list[T]:
    with ThreadPoolExecutor(max_workers=max(1, len(nodes))) as ex:
        return list(ex.map(fn, nodes))


class KafkaCluster:
    """Brokers + dedicated KRaft controllers, one container each, on a private network."""

    def __init__(self, brokers: Sequence[int] = (0, 1, 2), controllers: int | Sequence[int] = 1,
                 *, elr: bool = True, kafka_version: str = images.DEFAULT_KAFKA_VERSION,
                 min_insync_replicas: int = 1, image: str | None = None,
                 extra_config: Mapping[str, str] | None = None,
                 start_timeout_s: float = 120.0, lazyfs: str | None = DEFAULT_LAZYFS) -> None:
        if isinstance(controllers, int):
            base = max(1000, max(brokers, default=0) + 1)
            controllers = list(range(base, base + controllers))
        if lazyfs is not None:
            extra_config = {**LAZYFS_CONFIG, **(extra_config or {})}
        self.topology = Topology.build(list(brokers), list(controllers), min_insync_replicas,
                                       extra_config)
        self.lazyfs = lazyfs
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
        self.net = NetworkFaults(self)
        self.proc = ProcessFaults(self)
        if lazyfs is not None:
            self.proc.disk_layer = LazyFsLayer()
        self.power_offs: list[PowerOffRecord] = []

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def resolve_image(self) -> str:
        client = resources.docker_client()
        if self._image:
            tag = self._image
        else:
            try:
                tag = images.expected_tags(self.kafka_version).node
            except ImageMissingError:
                # Installed without the recipes: newest image built for this version.
                found = client.images.list(filters={"label": [
                    f"{images.LABEL_PREFIX}.image=kafka-node",
                    f"{images.LABEL_PREFIX}.kafka-version={self.kafka_version}"]})
                if not found:
                    raise
                return str(found[0].id)
        try:
            client.images.get(tag)
        except docker.errors.ImageNotFound:
            cmd = images.build_command(self.kafka_version)
            if self.kafka_version not in images.KNOWN_KAFKA_VERSIONS:
                raise UnknownKafkaVersionError(
                    f"no image for Kafka {self.kafka_version}; versions built and tested here: "
                    f"{', '.join(images.KNOWN_KAFKA_VERSIONS)}.\nfix: `{cmd}` (it fails with the "
                    "cause if Maven Central has no such version)") from None
            raise ImageMissingError(
                f"image {tag} is missing (or outdated).\nfix: `{cmd}`") from None
        return tag

    def start(self) -> KafkaCluster:
        image = self.resolve_image()
        labels = resources.labels(self.cluster_id)
        resources.register(id(self), self.close)
        try:
            net = Network(docker_network_kw={"labels": labels})
            net.name = f"pytest-elr-{self.cluster_id}"
            self._network = net.create()
            for spec in self.topology.nodes:
                self._nodes[spec.node_id] = KafkaNode(
                    spec, self.topology, image, net, self.cluster_id, labels,
                    lazyfs=self.lazyfs if spec.is_broker else None)
            nodes = list(self._nodes.values())
            elr = "1" if self.elr else "0"
            phases: list[tuple[str, Callable[[KafkaNode], object]]] = [
                ("containers", lambda n: n.start_container()),
                ("configure", lambda n: n.configure()),
                ("format", lambda n: n.ctl("format", self.kafka_cluster_id, elr)),
                ("start", lambda n: n.ctl("start")),
            ]
            for phase, fn in phases:
                t0 = time.monotonic()
                try:
                    _parallel(fn, nodes)
                except NodeCommandError as e:
                    raise ClusterStartError(f"startup phase '{phase}' failed: {e}",
                                            {n.name: n.logs() for n in nodes}) from e
                self.timings[phase] = time.monotonic() - t0
            t0 = time.monotonic()
            self.wait_ready(self.start_timeout_s)
            self.timings["ready"] = time.monotonic() - t0
        except BaseException:
            self.close()
            raise
        return self

    def wait_ready(self, timeout_s: float) -> None:
        """Every broker registered and unfenced, seen by every broker."""
        deadline = time.monotonic() + timeout_s
        want = {b.node_id for b in self.topology.brokers}
        last = "no answer yet"
        while time.monotonic() < deadline:
            dead = [n for n in self._nodes.values() if n.state() == "stopped"]
            if dead:
                raise ClusterStartError(
                    f"JVM exited during startup on {', '.join(n.name for n in dead)}",
                    {n.name: n.logs() for n in dead})
            try:
                ok = True
                for b in self.topology.brokers:
                    seen = admin.describe_cluster("127.0.0.1", self.client_port(b.node_id), 2.0)
                    unfenced = {x.broker_id for x in seen if not x.fenced}
                    if unfenced != want:
                        ok, last = False, f"broker {b.node_id} sees unfenced {sorted(unfenced)}"
                        break
                if ok:
                    return
            except KafkaProtocolError as e:
                last = str(e)
            time.sleep(0.25)
        raise ClusterStartError(
            f"cluster not ready within {timeout_s:.0f}s (last: {last})",
            {n.name: n.logs() for n in self._nodes.values()})

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        resources.unregister(id(self))
        # By label: also catches containers whose creation raced an interrupt.
        with contextlib.suppress(SutError, docker.errors.DockerException):
            resources.remove_cluster(self.cluster_id)

    # ------------------------------------------------------------ nodes

    def node(self, node_id: int) -> KafkaNode:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise KeyError(f"no node {node_id} in this cluster (started?)") from None

    @property
    def broker_ids(self) -> list[int]:
        return [b.node_id for b in self.topology.brokers]

    @property
    def controller_ids(self) -> list[int]:
        return [c.node_id for c in self.topology.controllers]

    def client_port(self, broker_id: int) -> int:
        port = self.node(broker_id).client_port
        if port is None:
            raise KeyError(f"{broker_id} is not a broker")
        return port

    @property
    def bootstrap_servers(self) -> str:
        """For clients in the test process (bypasses the proxies)."""
        return ",".join(f"127.0.0.1:{self.client_port(b)}" for b in self.broker_ids)

    def logs(self, node_id: int, lines: int = 40) -> str:
        return self.node(node_id).logs(lines)

    # ------------------------------------------------------------ topics

    def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]],
                     min_insync_replicas: int | None = None,
                     configs: Mapping[str, str] | None = None, wait: bool = True) -> None:
        """Create a topic with an explicit assignment ``{partition: [replica ids]}``.

        The first replica of each partition is its preferred (initial) leader.
        """
        cfg = dict(configs or {})
        if min_insync_replicas is not None:
            cfg["min.insync.replicas"] = str(min_insync_replicas)
        self._ask(lambda port: admin.create_topic("127.0.0.1", port, name, assignment, cfg))
        if wait:
            def ready(p: PartitionState) -> bool:
                return p.leader is not None and set(p.isr) == set(p.replicas)
            for part in assignment:
                self.await_partition(name, ready, partition=part, timeout_s=30)

    def set_min_insync_replicas(self, topic: str, value: int | None) -> None:
        self._ask(lambda port: admin.alter_topic_config(
            "127.0.0.1", port, topic,
            {"min.insync.replicas": None if value is None else str(value)}))

    # ------------------------------------------------------------ observation

    def _observers(self) -> list[int]:
        good = [b for b in self.broker_ids
                if b not in self.proc.down and not self.net.cut_from_controller(b)]
        return good + [b for b in self.broker_ids if b not in good]

    def _ask(self, fn: Callable[[int], T], via: int | None = None) -> T:
        errors: list[str] = []
        for b in [via] if via is not None else self._observers():
            try:
                return fn(self.client_port(b))
            except KafkaProtocolError as e:
                if e.error_code is not None:  # the broker answered: a real error
                    raise
                errors.append(f"broker {b}: {e}")
        raise KafkaProtocolError("no broker answered: " + "; ".join(errors))

    def describe_partition(self, topic: str, partition: int = 0,
                           via: int | None = None) -> PartitionState:
        """Leader, epoch, ISR, ELR, LastKnownELR as the cluster's metadata says."""
        parts = self._ask(lambda port: admin.describe_topic_partitions(
            "127.0.0.1", port, topic, 3.0), via)
        for p in parts:
            if p.partition == partition:
                return p
        raise KafkaProtocolError(f"{topic} has no partition {partition}")

    def describe_partition_cli(self, topic: str, via: int | None = None) -> str:
        """The same via Kafka's own TopicCommand in a broker container (slow; cross-check)."""
        b = via if via is not None else self._observers()[0]
        spec = self.topology.node(b)
        return self.node(b).exec(
            "java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", "/opt/kafka/libs/*",
            "-Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties",
            "org.apache.kafka.tools.TopicCommand", "--bootstrap-server",
            f"{spec.name}:{spec.peer_port}", "--describe", "--topic", topic)[1]

    def produce(self, topic: str, values: Sequence[bytes], partition: int = 0,
                acks: int = -1, timeout_ms: int = 10000) -> int:
        """Append records via the partition's current leader; returns the base offset."""
        leader = self.describe_partition(topic, partition).leader
        if leader is None:
            raise KafkaProtocolError(f"{topic}-{partition} has no leader", 5)
        return produce.produce("127.0.0.1", self.client_port(leader), topic, partition,
                               values, acks, timeout_ms)

    def brokers(self, via: int | None = None) -> list[admin.BrokerInfo]:
        return self._ask(lambda port: admin.describe_cluster("127.0.0.1", port, 3.0), via)

    def fenced_brokers(self, via: int | None = None) -> set[int]:
        """Registered brokers that the controller has fenced (DescribeCluster v2)."""
        return {b.broker_id for b in self.brokers(via) if b.fenced}

    def offsets(self, topic: str, partition: int = 0, via: int | None = None) -> PartitionOffsets:
        state = self.describe_partition(topic, partition, via)
        leo: dict[int, int | None] = {}
        for r in state.replicas:
            try:
                leo[r] = admin.list_offset("127.0.0.1", self.client_port(r), topic, partition,
                                           admin.DEBUGGING_REPLICA_ID, timeout_s=2.0)
            except KafkaProtocolError:
                leo[r] = None
        hwm = None
        if state.leader is not None:
            with contextlib.suppress(KafkaProtocolError):
                hwm = admin.list_offset("127.0.0.1", self.client_port(state.leader), topic,
                                        partition, admin.CONSUMER_REPLICA_ID, timeout_s=2.0)
        return PartitionOffsets(state.leader, hwm, leo)

    def await_partition(self, topic: str, predicate: Callable[[PartitionState], bool],
                        partition: int = 0, timeout_s: float = 30.0, interval_s: float = 0.2,
                        via: int | None = None, traffic: bool = False) -> PartitionState:
        """Poll until ``predicate(state)``; on timeout raise with the last state seen.

        ``traffic``: append one record (acks=1) per poll. Kafka drops a follower
        from the ISR only when it is *behind* the leader's log end for
        ``replica.lag.time.max.ms``; on an idle partition a follower that
        stopped fetching still counts as caught up, and the ISR never shrinks.
        """
        def read() -> PartitionState:
            if traffic:
                with contextlib.suppress(KafkaProtocolError):
                    self.produce(topic, [b"tick"], partition, acks=1, timeout_ms=2000)
            return self.describe_partition(topic, partition, via)

        return self.await_value(read, predicate, timeout_s, interval_s, f"{topic}-{partition}")

    def await_value(self, read: Callable[[], T], predicate: Callable[[T], bool],
                    timeout_s: float = 30.0, interval_s: float = 0.2, what: str = "value") -> T:
        deadline = time.monotonic() + timeout_s
        last: T | str = "no observation"
        while True:
            try:
                value = read()
                if predicate(value):
                    return value
                last = value
            except KafkaProtocolError as e:
                last = f"error: {e}"
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: condition not met within {timeout_s}s; last: {last}")
            time.sleep(interval_s)

    # ------------------------------------------------------------ faults (delegates)

    def cut(self, src: NodeRef, dst: NodeRef) -> float:
        return self.net.cut(src, dst)

    def cut_both(self, a: NodeRef, b: NodeRef) -> float:
        return self.net.cut_both(a, b)

    def heal(self, src: NodeRef, dst: NodeRef) -> float:
        return self.net.heal(src, dst)

    def heal_all(self) -> float:
        return self.net.heal_all()

    def slow(self, src: NodeRef, dst: NodeRef, latency_ms: int) -> float:
        return self.net.slow(src, dst, latency_ms)

    def hold(self, src: NodeRef, dst: NodeRef) -> float:
        """Hold ``src``'s AlterPartition requests to ``dst`` until healed (KIP-903's race)."""
        return self.net.hold(src, dst)

    def isolate(self, node: int, from_: Group = "all") -> float:
        return self.net.isolate(node, from_)

    def shutdown(self, node: int) -> float:
        return self.proc.shutdown(node)

    def crash(self, node: int) -> float:
        return self.proc.crash(node)

    def pause(self, node: int) -> None:
        self.proc.pause(node)

    def resume(self, node: int) -> None:
        self.proc.resume(node)

    def restart(self, node: int, clean: bool = True) -> None:
        self.proc.restart(node, clean)

    def start_node(self, node: int) -> None:
        self.proc.start(node)

    def replace_disk(self, node: int, start: bool = True) -> None:
        self.proc.replace_disk(node, start)

    def wait_serving(self, node: int, timeout_s: float = 60.0) -> float:
        """Wait until a (re)started broker answers clients; returns the seconds waited.

        A KRaft broker opens its listeners to requests only once it has registered and the
        controller has unfenced it, so an answer means the new incarnation is registered: its
        old session, which a killed JVM leaves behind for up to the session timeout, is gone.
        """
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.node(node).state() == "stopped":
                raise ClusterStartError(f"broker {node}'s JVM exited while starting",
                                        {self.node(node).name: self.node(node).logs()})
            try:
                admin.describe_cluster("127.0.0.1", self.client_port(node), 2.0)
                return time.monotonic() - t0
            except KafkaProtocolError as e:
                last = str(e)
            time.sleep(0.1)
        raise ClusterStartError(f"broker {node} did not serve within {timeout_s:.0f}s (last: {last})",
                                {self.node(node).name: self.node(node).logs()})

    def power_off(self, node: int, topics: Iterable[str] = ()) -> PowerOffRecord:
        """Power cut of one broker: SIGKILL, the layer drops everything unsynced, JVM stays off.

        Returns (and appends to ``power_offs``) the evidence; ``power_on`` completes it.
        """
        stats = self.disk_stats(node)
        files = {str(f["path"]): int(f["unsynced_bytes"]) for f in stats["files"] if f["path"]}
        parts = {tp for tp in map(_partition_of, files) if tp is not None}
        for topic in topics:
            with contextlib.suppress(KafkaProtocolError):
                parts |= {(topic, p.partition) for p in self._ask(
                    lambda port, t=topic: admin.describe_topic_partitions(
                        "127.0.0.1", port, t, 3.0)) if node in p.replicas}
        before = {tp: self._local_leo(node, tp) for tp in sorted(parts)}
        t0 = time.monotonic()
        reply = self.proc.power_off(node)
        rec = PowerOffRecord(node, time.monotonic() - t0, int(reply["dropped_bytes"]), files, before)
        self.power_offs.append(rec)
        return rec

    def power_on(self, node: int, timeout_s: float = 60.0) -> PowerOffRecord | None:
        """Start a powered-off broker; wait until it answers its LEOs and record them.

        Returns the broker's latest :class:`PowerOffRecord` (``None`` if it never
        lost power), with ``leo_after`` and ``restart_seconds`` filled in.
        """
        rec = next((r for r in reversed(self.power_offs) if r.node == node), None)
        t0 = time.monotonic()
        self.start_node(node)
        if rec is None:
            return None
        deadline = t0 + timeout_s
        for tp in rec.leo_before:
            leo = None
            while leo is None and time.monotonic() < deadline:
                leo = self._local_leo(node, tp)
                if leo is None:
                    time.sleep(0.1)
            rec.leo_after[tp] = leo
        rec.restart_seconds = time.monotonic() - t0
        return rec

    def _local_leo(self, node: int, tp: tuple[str, int]) -> int | None:
        try:
            return admin.list_offset("127.0.0.1", self.client_port(node), tp[0], tp[1],
                                     admin.DEBUGGING_REPLICA_ID, timeout_s=2.0)
        except KafkaProtocolError:
            return None

    def disk_stats(self, node: int) -> dict[str, Any]:
        """The broker's FUSE layer ``stats``: unsynced bytes per file and in total."""
        return self.node(node).fs_stats()

    def unsynced_bytes(self, node: int) -> int:
        """Bytes a power cut of ``node`` would lose right now."""
        return int(self.disk_stats(node)["unsynced_bytes"])

    def unsynced_report(self) -> dict[int, int]:
        """Unsynced bytes per broker that has the layer."""
        return {b: self.unsynced_bytes(b) for b in self.broker_ids if self.node(b).lazyfs}

    def has_clean_shutdown_marker(self, node: int) -> bool:
        """Whether ``.kafka_cleanshutdown`` is in the node's log dir (as Kafka would see it)."""
        code, _ = self.node(node).exec("test", "-f", f"{DATA_DIR}/{CLEAN_SHUTDOWN_FILE}",
                                       check=False)
        return code == 0

    def node_state(self, node: int) -> str:
        return self.node(node).state()

    def heal_everything(self, nodes: Iterable[int] | None = None) -> None:
        """Undo all faults: heal links, resume/start every JVM, wait until all unfenced."""
        self.heal_all()
        for n in nodes if nodes is not None else self.topology_ids():
            st = self.node(n).state()
            if st == "paused":
                self.proc.resume(n)
            elif st == "stopped":
                self.proc.start(n)
        self.wait_ready(60)

    def topology_ids(self) -> list[int]:
        return [n.node_id for n in self.topology.nodes]


def _partition_of(path: str) -> tuple[str, int] | None:
    """``topic-3/00000000000000000000.log`` -> ``("topic", 3)``; None for other files."""
    directory, sep, _ = path.partition("/")
    topic, dash, num = directory.rpartition("-")
    if not sep or not dash or not num.isdigit() or topic == "__cluster_metadata":
        return None
    return topic, int(num)


def random_topic(prefix: str = "t") -> str:
    return f"{prefix}-{secrets.token_hex(3)}"
