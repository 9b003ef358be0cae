"""Node topology and ``server.properties`` rendering.

Addressing (why every link can be cut per direction):

* Node *k* (brokers and controllers, in one sorted list) listens for peers on
  ``PEER_PORT_BASE + k``: unique in the cluster, so node *j*'s Toxiproxy can
  listen on ``127.0.0.1:<port of i>`` for every peer *i* without clashing
  with *j*'s own listener.
* Peers are addressed by advertised names ``b<id>`` / ``c<id>``, which every
  container maps to 127.0.0.1 (``extra_hosts``). A connection from *j* to *i*
  thus enters *j*'s local proxy ``to-<i>``, which forwards to *i*'s real
  address, the Docker network alias ``real-<name>``.
* Clients of the test process use a separate listener ``CLIENT`` (port 9092 in
  the container, published on 127.0.0.1:<random>), which bypasses the proxies.

Timeouts (tuned so that a fault shows within seconds; defaults in brackets):

=====================================  ========  ==========================================
setting                                value     why
=====================================  ========  ==========================================
replica.lag.time.max.ms [30000]        3000      a follower that stops fetching leaves the
                                                 ISR 3-4.5 s later (checked every half)
replica.fetch.wait.max.ms [500]        250       must stay < lag time; faster catch-up
replica.socket.timeout.ms [30000]      3000      a fetch into a black hole is abandoned
                                                 and retried after 3 s, not 30 s
replica.fetch.backoff.ms [1000]        200       quick retry after a failed fetch
broker.heartbeat.interval.ms [2000]    500       several heartbeats per session timeout
broker.session.timeout.ms [9000]       3000      controller fences a silent broker after 3 s
controller.quorum.election.timeout.ms  1000      (default) KRaft election among controllers
controller.quorum.fetch.timeout.ms     2000      (default) voter starts an election after
                                                 2 s without the leader
controller.quorum.request.timeout.ms   2000      [2000] brokers' RPCs to the controller
controller.quorum.retry.backoff.ms     20        (default)
request.timeout.ms (inter-broker)      5000      [30000] broker-to-broker/controller
                                                 channels give up sooner
connections.max.idle.ms [600000]       default   toxiproxy closes held connections itself
                                                 when a ``timeout`` toxic is removed
initial.broker.registration.timeout.ms 120000    [60000] the harness's own start deadline
                                                 (120 s) reports a broker that cannot
                                                 register, with every node's log: at
                                                 30 s a broker of eight JVMs beside
                                                 another cluster gave up first (CI,
                                                 2026-11-28)
auto.leader.rebalance.enable [true]    false     leadership moves only when a test says
unclean.leader.election.enable         false     (default) no unclean elections
unclean.leader.election.interval.ms    3600000   [300000] the controller's timed unclean
                                                 election of leaderless partitions whose
                                                 topic allows one stays out of every run:
                                                 the model has no clock (it elects on a
                                                 request or an event: docs/model.md)
group.initial.rebalance.delay.ms       0         [3000] consumers join at once
offsets/transaction topics             RF<=3,    few partitions: faster first consumer
                                       3 parts
=====================================  ========  ==========================================

Heaps: brokers ``-Xmx384m``, controllers ``-Xmx256m``; SerialGC and C1 only
(``-XX:TieredStopAtLevel=1``) because 4-6 JVMs share 2 cores.

``min.insync.replicas`` is set on the controllers (cluster default) and per
topic: with ELR on, Kafka rejects broker-level values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pytest_elr.core.limits import MAX_LOG_DIRS

PEER_PORT_BASE = 19001
CLIENT_PORT = 9092
TOXIPROXY_PORT = 8474
DATA_DIR = "/var/lib/kafka/data"
SERVER_LOG = "/var/log/kafka/server.log"  # the JVM's log (kafka-ctl appends a marker per start)
START_MARKER = "==== kafka-ctl start"


def jbod_dirs(count: int) -> tuple[str, ...]:
    """A broker's log dirs: ``DATA_DIR`` alone, or ``count`` directories under it. Kafka takes no
    log dir inside another (it would read ``d1`` as a partition directory), so a JBOD broker's
    dirs are siblings below the FUSE mount point and ``DATA_DIR`` itself is none of them."""
    return (DATA_DIR,) if count == 1 else tuple(f"{DATA_DIR}/d{i}" for i in range(count))


BROKER_HEAP = "-Xmx384m -Xms96m"
CONTROLLER_HEAP = "-Xmx256m -Xms64m"

# Shared by brokers and controllers (each ignores what does not concern it).
TUNING: dict[str, str] = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "250",
    "replica.socket.timeout.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.request.timeout.ms": "2000",
    "controller.quorum.retry.backoff.ms": "20",
    "request.timeout.ms": "5000",
    "initial.broker.registration.timeout.ms": "120000",
    "auto.leader.rebalance.enable": "false",
    "unclean.leader.election.enable": "false",
    "unclean.leader.election.interval.ms": "3600000",
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    # Fewer threads: several JVMs share two cores.
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.replica.fetchers": "1",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": "8388608",
}


@dataclass(frozen=True)
class NodeSpec:
    node_id: int
    role: str  # "broker" | "controller"
    index: int  # position in the cluster's node list -> peer port
    #: the node's ``log.dirs``: ``DATA_DIR`` itself, or (JBOD) directories under it, so that every
    #: one of them sits on the one FUSE layer a power cut empties
    log_dirs: tuple[str, ...] = (DATA_DIR,)

    @property
    def name(self) -> str:
        return f"{'b' if self.role == 'broker' else 'c'}{self.node_id}"

    @property
    def real_host(self) -> str:
        return f"real-{self.name}"

    @property
    def peer_port(self) -> int:
        return PEER_PORT_BASE + self.index

    @property
    def is_broker(self) -> bool:
        return self.role == "broker"


@dataclass(frozen=True)
class Topology:
    brokers: tuple[NodeSpec, ...]
    controllers: tuple[NodeSpec, ...]
    min_insync_replicas: int = 1
    extra: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls, broker_ids: Sequence[int], controller_ids: Sequence[int],
              min_insync_replicas: int = 1, extra: Mapping[str, str] | None = None,
              broker_log_dirs: int = 1) -> Topology:
        """``broker_log_dirs``: log directories per broker (JBOD when more than one)."""
        if not 1 <= len(broker_ids) <= 9:
            raise ValueError(f"1-9 brokers supported, got {len(broker_ids)}")
        if not 1 <= broker_log_dirs <= MAX_LOG_DIRS:
            raise ValueError(f"1-{MAX_LOG_DIRS} log dirs per broker supported, got {broker_log_dirs}")
        if len(controller_ids) not in (1, 3):
            raise ValueError(f"1 or 3 controllers supported, got {len(controller_ids)}")
        ids = list(broker_ids) + list(controller_ids)
        if len(set(ids)) != len(ids) or any(i < 0 for i in ids):
            raise ValueError(f"node ids must be distinct and >= 0: brokers {list(broker_ids)}, "
                             f"controllers {list(controller_ids)}")
        dirs = jbod_dirs(broker_log_dirs)
        brokers = tuple(NodeSpec(b, "broker", k, dirs) for k, b in enumerate(broker_ids))
        ctrls = tuple(NodeSpec(c, "controller", len(brokers) + k)
                      for k, c in enumerate(controller_ids))
        return cls(brokers, ctrls, min_insync_replicas, dict(extra or {}))

    @property
    def nodes(self) -> tuple[NodeSpec, ...]:
        return self.brokers + self.controllers

    def node(self, node_id: int) -> NodeSpec:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(f"no node {node_id}; brokers {[b.node_id for b in self.brokers]}, "
                       f"controllers {[c.node_id for c in self.controllers]}")

    def quorum_voters(self) -> str:
        return ",".join(f"{c.node_id}@{c.name}:{c.peer_port}" for c in self.controllers)

    def extra_hosts(self) -> dict[str, str]:
        return {n.name: "127.0.0.1" for n in self.nodes}

    def render(self, node: NodeSpec, client_host_port: int | None) -> str:
        rf = str(min(3, len(self.brokers)))
        props: dict[str, str] = {
            "node.id": str(node.node_id),
            "controller.quorum.voters": self.quorum_voters(),
            "controller.listener.names": "CONTROLLER",
            "log.dirs": ",".join(node.log_dirs),
            **TUNING,
        }
        if node.is_broker:
            props.update({
                "process.roles": "broker",
                "listeners": f"INTERNAL://0.0.0.0:{node.peer_port},CLIENT://0.0.0.0:{CLIENT_PORT}",
                "advertised.listeners": f"INTERNAL://{node.name}:{node.peer_port},"
                                        f"CLIENT://127.0.0.1:{client_host_port}",
                "listener.security.protocol.map":
                    "INTERNAL:PLAINTEXT,CLIENT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name": "INTERNAL",
                "offsets.topic.replication.factor": rf,
                "transaction.state.log.replication.factor": rf,
                "transaction.state.log.min.isr": "1",
            })
        else:
            props.update({
                "process.roles": "controller",
                "listeners": f"CONTROLLER://0.0.0.0:{node.peer_port}",
                "advertised.listeners": f"CONTROLLER://{node.name}:{node.peer_port}",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
                # Cluster-wide default; ELR rejects broker-level values.
                "min.insync.replicas": str(self.min_insync_replicas),
            })
        props.update(self.extra)
        return "".join(f"{k}={v}\n" for k, v in props.items())
