"""Network faults per link and per direction, through each node's Toxiproxy.

Every node runs a Toxiproxy server in its own network namespace with one
proxy per peer: ``to-<peer>`` on node *j* carries every TCP connection that
*j* opens to that peer (see :mod:`pytest_elr.sut.config`). A connection
opened by *j* to *i* has an ``upstream`` stream (*j* -> *i*) and a
``downstream`` stream (*i* -> *j*).

Direction semantics: ``cut(src, dst)`` drops the *data flowing from src to
dst*, whoever opened the connection - the upstream of ``src:to-dst`` and the
downstream of ``dst:to-src``. So ``cut(1, "controller")`` makes broker 1's
heartbeats vanish (the controller fences it) while the controller's data
still reaches broker 1; ``cut("controller", 1)`` lets heartbeats arrive but
loses the replies. Brokers only open connections to controllers, never the
reverse, so a dialer-based definition would make one direction a no-op.
(Measured: either one-way cut between a broker and the controller fences
the broker within the session timeout - the broker waits for each heartbeat
reply before it sends the next one, so lost replies stop its heartbeats.)

Why a ``timeout`` toxic with ``timeout=0`` and not disabling the proxy:
disabling refuses new connections (*connection refused*, an instant,
unrealistic error that makes Kafka reconnect in a tight loop) and leaves
established connections alone; a ``timeout`` toxic with 0 black-holes the
stream - established and new connections stay open and silent, as in a real
partition, and Kafka has to notice by its own timeouts. Removing the toxic
closes the held connections, so Kafka reconnects at once after ``heal``.

The time from API call to cut link is the REST round trip, measured in
``elr bench cluster`` (:mod:`pytest_elr.faults.bench`; a few ms): the toxic is installed in the live
links' chains before the call returns.

``hold(src, dst)`` is the one fault that reads Kafka: our ``kafka_hold`` toxic
(``pytest_elr/sut/recipes/toxiproxy/kafka_hold.go``) holds back the requests of one API key,
AlterPartition by default, on src's connections to dst and delivers them when
healed, while every other request flows. A broker sends AlterPartition on a
connection of its own, so its heartbeats keep it unfenced however long the
hold lasts: KIP-903's late AlterPartition, which a ``slow`` cannot stage (its
heartbeats would be late too, and the broker fenced). Holding BrokerHeartbeat (63) instead lets a
restarting broker's registration through and keeps it fenced: the window between an unclean
registration and unfencing (KAFKA-19522), which otherwise lasts a fraction of a second.

A broker whose links to a controller are cut or slowed may answer from stale metadata: after
every change the set of such brokers is written into the cluster's ``metadata_lag`` (under
``"network"``), so the client asks them last.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from pytest_elr.sut.config import NodeSpec
from pytest_elr.sut.errors import ToxiproxyError

if TYPE_CHECKING:
    from pytest_elr.sut.cluster import KafkaCluster

NodeRef = int | str  # a node id, or "controller"/"controllers"/"brokers"/"all"
Group = Literal["brokers", "controller", "all"]

CUT = "cut"
SLOW = "slow"
HOLD = "hold"
ALTER_PARTITION = 56  # Kafka API keys
BROKER_HEARTBEAT = 63
FETCH = 1  # the KRaft Fetch a broker sends the controller for the metadata log
ASSIGN_REPLICAS_TO_DIRS = 73


class NetworkFaults:
    """Cut, slow, hold and heal the links between a cluster's nodes (one instance per cluster)."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        # (src id, dst id) pairs whose src->dst data is currently dropped.
        self.cuts: set[tuple[int, int]] = set()
        self.slowed: dict[tuple[int, int], int] = {}
        #: (src id, dst id, API key) of every hold in place
        self.holds: set[tuple[int, int, int]] = set()

    # ------------------------------------------------------------ resolution

    def nodes(self, ref: NodeRef | Iterable[NodeRef]) -> list[NodeSpec]:
        topo = self.cluster.topology
        if isinstance(ref, int):
            return [topo.node(ref)]
        if isinstance(ref, str):
            groups = {"controller": topo.controllers, "controllers": topo.controllers,
                      "brokers": topo.brokers, "all": topo.nodes}
            if ref not in groups:
                raise ValueError(f"unknown node {ref!r}: use an id or one of {sorted(groups)}")
            return list(groups[ref])
        return [n for r in ref for n in self.nodes(r)]

    def _links(self, src: NodeRef | Iterable[NodeRef],
               dst: NodeRef | Iterable[NodeRef]) -> list[tuple[NodeSpec, NodeSpec]]:
        return [(s, d) for s in self.nodes(src) for d in self.nodes(dst) if s != d]

    def _toxi(self, node: NodeSpec):  # type: ignore[no-untyped-def]
        client = self.cluster.node(node.node_id).toxiproxy
        assert client is not None, "cluster not started"
        return client

    def _add(self, s: NodeSpec, d: NodeSpec, kind: str, type_: str,
             attrs: dict[str, int | float]) -> None:
        # data s -> d: upstream of s's proxy to d, downstream of d's proxy to s.
        for node, proxy, stream in ((s, f"to-{d.name}", "upstream"),
                                    (d, f"to-{s.name}", "downstream")):
            name = f"{kind}-{stream}"
            toxi = self._toxi(node)
            try:
                toxi.add_toxic(proxy, name, type_, stream, attrs)  # type: ignore[arg-type]
            except ToxiproxyError as e:
                if "HTTP 409" not in str(e):  # already there: replace (e.g. new latency)
                    raise
                toxi.remove_toxic(proxy, name)
                toxi.add_toxic(proxy, name, type_, stream, attrs)  # type: ignore[arg-type]

    def _remove(self, s: NodeSpec, d: NodeSpec, kind: str) -> None:
        self._toxi(s).remove_toxic(f"to-{d.name}", f"{kind}-upstream")
        if not kind.startswith(HOLD):
            self._toxi(d).remove_toxic(f"to-{s.name}", f"{kind}-downstream")

    # ------------------------------------------------------------ API

    def cut(self, src: NodeRef, dst: NodeRef, both_ways: bool = False) -> float:
        """Drop data from ``src`` to ``dst`` (and back if ``both_ways``). Returns seconds taken."""
        t0 = time.monotonic()
        links = self._links(src, dst) + (self._links(dst, src) if both_ways else [])
        for s, d in links:
            if (s.node_id, d.node_id) in self.cuts:
                continue  # replacing the toxic would close the held connections: a brief heal
            self._add(s, d, CUT, "timeout", {"timeout": 0})
            self.cuts.add((s.node_id, d.node_id))
        self._publish_lag()
        return time.monotonic() - t0

    def cut_both(self, a: NodeRef, b: NodeRef) -> float:
        return self.cut(a, b, both_ways=True)

    def heal(self, src: NodeRef, dst: NodeRef, both_ways: bool = True) -> float:
        """Remove cuts and slowness between ``src`` and ``dst``."""
        t0 = time.monotonic()
        links = self._links(src, dst) + (self._links(dst, src) if both_ways else [])
        for s, d in links:
            self._remove(s, d, CUT)
            self._remove(s, d, SLOW)
            for held in [h for h in self.holds if h[:2] == (s.node_id, d.node_id)]:
                self._remove(s, d, _hold_toxic(held[2]))  # removing it delivers what it held
                self.holds.discard(held)
            self.cuts.discard((s.node_id, d.node_id))
            self.slowed.pop((s.node_id, d.node_id), None)
        self._publish_lag()
        return time.monotonic() - t0

    def heal_all(self) -> float:
        t0 = time.monotonic()
        for n in self.cluster.topology.nodes:
            self._toxi(n).reset()
        self.cuts.clear()
        self.slowed.clear()
        self.holds.clear()
        self._publish_lag()
        return time.monotonic() - t0

    def slow(self, src: NodeRef, dst: NodeRef, latency_ms: int, jitter_ms: int = 0,
             both_ways: bool = False) -> float:
        """Delay data from ``src`` to ``dst`` by ``latency_ms`` (Toxiproxy ``latency`` toxic).

        A link already slowed by as much is left alone: replacing its toxic delivers at once what
        it delays (Toxiproxy's latency toxic, interrupted, passes its data on), so a follower's
        fetch would arrive on time and it could rejoin the ISR -- a brief heal the model does not
        have (``elr explore`` on 4.3.1: four flaky findings, each after a second ``slow`` of a slow
        link). A new latency replaces the toxic, with that effect.
        """
        t0 = time.monotonic()
        links = self._links(src, dst) + (self._links(dst, src) if both_ways else [])
        for s, d in links:
            if self.slowed.get((s.node_id, d.node_id)) == latency_ms and not jitter_ms:
                continue
            self._add(s, d, SLOW, "latency", {"latency": latency_ms, "jitter": jitter_ms})
            self.slowed[(s.node_id, d.node_id)] = latency_ms
        self._publish_lag()
        return time.monotonic() - t0

    def hold(self, src: NodeRef, dst: NodeRef, api_key: int = ALTER_PARTITION) -> float:
        """Hold ``src``'s requests with ``api_key`` to ``dst`` until healed; the rest flows.

        Requests travel on the connections ``src`` opens, so only the upstream of ``src``'s
        proxy to ``dst`` is touched (unlike cut and slow, which act on data in either). A link
        already held for that key stays as it is: replacing its toxic would deliver what it holds.
        Holds of different keys chain: each holds only the connections that carry its key
        (AlterPartition and the heartbeats travel on channels of their own).
        """
        t0 = time.monotonic()
        for s, d in self._links(src, dst):
            if (s.node_id, d.node_id, api_key) in self.holds:
                continue
            self._toxi(s).add_toxic(f"to-{d.name}", f"{_hold_toxic(api_key)}-upstream", "kafka_hold", "upstream",
                                    {"api_key": api_key})
            self.holds.add((s.node_id, d.node_id, api_key))
        return time.monotonic() - t0

    def held_by(self, src: int, api_key: int = ALTER_PARTITION) -> bool:
        """Whether ``src``'s requests with ``api_key`` are held on some link (held yet or not)."""
        return any(s == src and key == api_key for s, _, key in self.holds)

    def held_requests(self, src: int, api_key: int = ALTER_PARTITION) -> int:
        """How many requests with ``api_key`` ``src``'s holds keep back right now."""
        total = 0
        for s, d, key in self.holds:
            if s != src or key != api_key:
                continue
            name = self.cluster.topology.node(d).name
            for toxic in self._toxi(self.cluster.topology.node(s)).toxics(f"to-{name}"):
                attributes = toxic.get("attributes", {})
                if toxic.get("type") == "kafka_hold" and attributes.get("api_key") == api_key:
                    total += int(attributes.get("held", 0))
        return total

    def isolate(self, node: int, from_: Group = "all") -> float:
        """Cut ``node`` both ways from the brokers, the controller(s), or every other node."""
        group = {"brokers": "brokers", "controller": "controller", "all": "all"}[from_]
        return self.cut(node, group, both_ways=True)

    def is_cut(self, src: int, dst: int) -> bool:
        return (src, dst) in self.cuts

    def cut_from_controller(self, broker: int) -> bool:
        """True when any link between ``broker`` and a controller is cut or slowed: its metadata
        may lag, so it is the last broker to ask about the cluster. (A hold delays only
        AlterPartition; metadata still flows.)"""
        faulty = self.cuts | set(self.slowed)
        return any((broker, c.node_id) in faulty or (c.node_id, broker) in faulty
                   for c in self.cluster.topology.controllers)

    def _publish_lag(self) -> None:
        self.cluster.metadata_lag["network"] = frozenset(
            b for b in self.cluster.broker_ids if self.cut_from_controller(b))


def _hold_toxic(api_key: int) -> str:
    """The toxic's name: the AlterPartition hold keeps its first name, other keys get their own."""
    return HOLD if api_key == ALTER_PARTITION else f"{HOLD}-{api_key}"
