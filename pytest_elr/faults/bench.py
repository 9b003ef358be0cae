"""Benchmark of the real cluster and its faults:
``elr bench cluster [--kafka-version V] [--rounds N] [--start-rounds S] [--log-dirs D]``.

Prints:

* time to a ready cluster (3 brokers + 1 controller, all brokers unfenced,
  RF=3 topic created and fully in sync), per phase, beside a single plain
  Kafka node (combined broker+controller, no proxies) started in the same
  run from the same image, and their ratio (the single node formats with
  StorageTool, as a stock install does, and its JVM maps the image's class-data
  archive like every node's). S rounds alternate the two so both meet the same
  load; the ratio is of the medians. Each start also gives the CPU its containers
  used (Docker's counters): on 2 cores, four JVMs' start-up work bounds the cluster's
  wall time from below;
* time from the ``cut`` API call to the link being cut: the REST call's
  duration, and a probe inside the source node that sends ApiVersions
  requests through the proxy every ~2 ms and notes its last answer;
* what Kafka then shows: ISR shrink after cutting a follower off, fencing
  after cutting a broker from the controller;
* a DescribeTopicPartitions read of leader/ISR/ELR;
* peak memory per node and in total (``docker stats``, sampled every second).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from pytest_elr.core.commandline import command_parser
from pytest_elr.faults.network import NetworkFaults
from pytest_elr.sut import admin, images, resources
from pytest_elr.sut.client import ClusterClient
from pytest_elr.sut.cluster import KafkaCluster
from pytest_elr.sut.config import CLIENT_PORT
from pytest_elr.sut.polling import await_value, poll

PROBE = r"""
import socket, struct, sys, time
host, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection((host, port), timeout=2)
s.settimeout(1.0)
req = struct.pack(">hhih", 18, 0, 1, 5) + b"probe"
last = time.time()
print("start", last, flush=True)
try:
    while True:
        s.sendall(struct.pack(">i", len(req)) + req)
        n = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        s.recv(n, socket.MSG_WAITALL)
        last = time.time()
        time.sleep(0.002)
except Exception as e:
    print("last", last, type(e).__name__, flush=True)
"""


class MemorySampler:
    """Peak memory per container, sampled with ``docker stats`` one-shot calls."""

    def __init__(self, containers: dict[str, Any]) -> None:
        self.containers = containers
        self.peak: dict[str, int] = dict.fromkeys(containers, 0)
        self.peak_total = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            for name, c in self.containers.items():
                try:
                    st = c.stats(stream=False, one_shot=True)
                    mem = int(st["memory_stats"].get("usage", 0))
                    # cgroup v1 counts page cache: report what the kernel can't drop.
                    cache = int(st["memory_stats"].get("stats", {}).get("cache", 0))
                    mem -= cache
                except Exception:
                    continue
                self.peak[name] = max(self.peak[name], mem)
                total += mem
            self.peak_total = max(self.peak_total, total)
            self._stop.wait(1.0)

    def __enter__(self) -> MemorySampler:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


def container_cpu_s(container: Any) -> float:
    """CPU seconds a container has used so far (Docker's cgroup counter)."""
    stats = container.stats(stream=False, one_shot=True)
    return float(stats["cpu_stats"]["cpu_usage"]["total_usage"]) / 1e9


def plain_node_seconds(image: str) -> float:
    """Start one plain combined-mode Kafka node from the same image; seconds to answer."""
    return plain_node_start(image)[0]


def plain_node_start(image: str) -> tuple[float, float]:
    """Start one plain combined-mode Kafka node from the same image: (seconds to answer, CPU s)."""
    client = resources.docker_client()
    cid = resources.new_cluster_id()
    props = "\n".join([
        "process.roles=broker,controller", "node.id=1",
        "controller.quorum.voters=1@localhost:9093", "controller.listener.names=CONTROLLER",
        f"listeners=PLAINTEXT://0.0.0.0:{CLIENT_PORT},CONTROLLER://localhost:9093",
        "advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
        "log.dirs=/var/lib/kafka/data", "offsets.topic.replication.factor=1", ""])
    t0 = time.monotonic()
    c = client.containers.run(image, detach=True, labels=resources.labels(cid),
                              name=f"pytest-elr-{cid}-plain",
                              ports={f"{CLIENT_PORT}/tcp": ("127.0.0.1",)})
    try:
        c.reload()
        port = int(c.attrs["NetworkSettings"]["Ports"][f"{CLIENT_PORT}/tcp"][0]["HostPort"])
        conf = props.replace("{port}", str(port))
        c.exec_run(["bash", "-c", f"printf '%s' '{conf}' > /etc/kafka/server.properties"])
        c.exec_run(["/opt/elr/bin/kafka-ctl", "format", "plain-bench-cluster-id0", "1"])
        c.exec_run(["/opt/elr/bin/kafka-ctl", "start"])
        poll(lambda: admin.describe_cluster("127.0.0.1", port, 1.0), until=bool,
             timeout_s=120 - (time.monotonic() - t0), interval_s=0.2,
             timed_out=lambda _: TimeoutError("plain node not ready in 120 s:\n" + c.exec_run(
                 ["/opt/elr/bin/kafka-ctl", "logs", "30"]).output.decode()))
        return time.monotonic() - t0, container_cpu_s(c)
    finally:
        resources.remove_cluster(cid, client)


def _median_ms(xs: list[float]) -> str:
    return f"median {statistics.median(xs) * 1000:.1f} ms, max {max(xs) * 1000:.1f} ms"


def probe_cut(cluster: KafkaCluster, network: NetworkFaults, src: int, dst: int) -> tuple[float, float]:
    """(REST call seconds, seconds from call start to the probe's last answer)."""
    spec = cluster.topology.node(dst)
    node = cluster.node(src)
    exec_id = node.container.client.api.exec_create(
        node.container.id, ["python3", "-c", PROBE, spec.name, str(spec.peer_port)])
    stream = node.container.client.api.exec_start(exec_id, stream=True)
    first = next(iter(stream)).decode()
    assert first.startswith("start"), first
    time.sleep(0.3)  # let the probe run
    t_call = time.time()
    took = network.cut(src, dst)
    out = b"".join(stream).decode()
    network.heal(src, dst)
    last = float(out.split("last", 1)[1].split()[0])
    return took, last - t_call


def _timeit(fn: Callable[[], object]) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("bench cluster")
    ap.add_argument("--kafka-version", default=images.DEFAULT_KAFKA_VERSION)
    ap.add_argument("--rounds", type=int, default=10, help="cut probes")

    ap.add_argument("--start-rounds", type=int, default=3,
                    help="plain node and cluster starts, alternated (median of each)")
    ap.add_argument("--log-dirs", type=int, default=1,
                    help="also start, in each round, a cluster whose brokers have this many log dirs "
                         "(JBOD: StorageTool formats them) beside the plain node and the one-dir cluster")
    a = ap.parse_args(argv)
    if not 1 <= a.start_rounds <= 50 or not 1 <= a.rounds <= 1000:
        ap.error("--start-rounds takes 1-50, --rounds 1-1000")
    print(f"pytest-elr SUT benchmark, Kafka {a.kafka_version}")
    image = images.resolve_image(a.kafka_version)

    plains: list[float] = []
    totals: list[float] = []
    jbods: list[float] = []
    for i in range(a.start_rounds):
        plain, plain_cpu = plain_node_start(image)
        plains.append(plain)
        print(f"[{i + 1}] plain single Kafka node (combined mode) ready: {plain:.1f} s "
              f"(CPU {plain_cpu:.1f} s)", flush=True)
        if a.log_dirs > 1:
            jbod = KafkaCluster(brokers=[0, 1, 2], controllers=1, kafka_version=a.kafka_version,
                                log_dirs=a.log_dirs)
            t0 = time.monotonic()
            try:
                jbod.start()
                ClusterClient(jbod).create_topic("bench", {0: [0, 1, 2]}, min_insync_replicas=2)
                jbods.append(time.monotonic() - t0)
            finally:
                jbod.close()
            print(f"[{i + 1}] cluster with {a.log_dirs} log dirs per broker + topic ready: {jbods[-1]:.1f} s; "
                  f"ratio {jbods[-1] / plain:.1f}x", flush=True)
        cluster = KafkaCluster(brokers=[0, 1, 2], controllers=1, kafka_version=a.kafka_version)
        t0 = time.monotonic()
        cluster.start()
        last = i == a.start_rounds - 1
        try:
            t1 = time.monotonic()
            ClusterClient(cluster).create_topic("bench", {0: [0, 1, 2]}, min_insync_replicas=2)
            topic_s = time.monotonic() - t1
            total = time.monotonic() - t0
            totals.append(total)
            cpu = sum(container_cpu_s(cluster.node(n).container) for n in cluster.topology_ids())
            phases = ", ".join(f"{k} {v:.1f}" for k, v in cluster.timings.items())
            print(f"[{i + 1}] cluster 3 brokers + 1 controller + topic ready: {total:.1f} s "
                  f"({phases}, topic {topic_s:.1f}; CPU {cpu:.1f} s); ratio {total / plain:.1f}x", flush=True)
        except BaseException:
            cluster.close()
            raise
        if not last:
            cluster.close()
    print(f"start, median of {a.start_rounds}: plain node {statistics.median(plains):.1f} s, "
          f"cluster {statistics.median(totals):.1f} s; ratio of medians "
          f"{statistics.median(totals) / statistics.median(plains):.2f}x")
    if jbods:
        jbod_median = statistics.median(jbods)
        print(f"start with {a.log_dirs} log dirs per broker, median of {a.start_rounds}: {jbod_median:.1f} s, "
              f"{jbod_median / statistics.median(totals):.2f}x the one-dir cluster")

    try:  # the last round's cluster, already started, for the faults
        client, network = ClusterClient(cluster), NetworkFaults(cluster)

        sampler = MemorySampler({n.name: n.container for n in (cluster.node(i)
                                 for i in cluster.topology_ids())})
        with sampler:
            calls, effects = [], []
            for _ in range(a.rounds):
                took, effect = probe_cut(cluster, network, 2, 0)
                calls.append(took)
                effects.append(effect)
            print(f"cut(2, 0) REST call: {_median_ms(calls)}")
            print(f"cut(2, 0) call start -> probe's last answer: {_median_ms(effects)}")

            network.cut_both(2, 0)
            isr_s = _timeit(lambda: client.await_partition(
                "bench", lambda p: p.isr == (0, 1), traffic=True))
            network.heal_all()
            client.await_partition("bench", lambda p: p.isr == (0, 1, 2), traffic=True)
            fence_s = _timeit(lambda: (network.cut(1, "controller"), await_value(
                client.fenced_brokers, lambda f: f == {1}, interval_s=0.05)))
            unfence_s = _timeit(lambda: (network.heal_all(), await_value(
                client.fenced_brokers, lambda f: not f, interval_s=0.05)))
            print(f"cut_both(2, 0) -> ISR without 2: {isr_s:.1f} s "
                  "(replica.lag.time.max.ms=3000)")
            print(f"cut(1, controller) -> 1 fenced: {fence_s:.1f} s "
                  f"(broker.session.timeout.ms=3000); heal -> unfenced: {unfence_s:.1f} s")

            py = [_timeit(lambda: client.describe_partition("bench")) for _ in range(20)]
            print(f"describe partition (DescribeTopicPartitions): {_median_ms(py)}")
            # Some traffic so the memory figures include replication.
            for i in range(50):
                client.produce("bench", [b"x" * 1000] * 100)
                if i % 10 == 0:
                    client.offsets("bench")
        mib = 1024 * 1024
        per = ", ".join(f"{k} {v / mib:.0f}" for k, v in sampler.peak.items())
        print(f"peak memory (MiB, without page cache): {per}; "
              f"total {sampler.peak_total / mib:.0f}")
    finally:
        cluster.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
