"""Kafka on the FUSE layer vs a plain directory, and a power off: ``elr bench power-off``.

Options: ``[--kafka-version V] [--records 50000] [--record-size 1024] [--rounds 3]``.

Two single-broker clusters (1 broker + 1 controller each) run side by side from
the same image: one broker's log dir is behind ``pytest_elr.lazyfs`` (strict
``fsyncdir`` mode, 1 MiB segments), the other's is a plain directory in the
container. An acks=1 producer in this process (librdkafka) writes to each broker's client
listener; rounds alternate between the two so that
load from the rest of the machine hits both alike, and medians are printed.

Then, on the layered broker: SIGKILL + drop of everything unsynced
(``power_off``), a remount of the layer (clean unmount + mount, as after a
reboot), and the broker's restart until it answers its log end offset again;
and the layer's memory (RSS) after the produce rounds.
"""

from __future__ import annotations

import statistics
import time

from pytest_elr.core.commandline import command_parser
from pytest_elr.faults.process import ProcessFaults
from pytest_elr.sut import images
from pytest_elr.sut.client import ClusterClient
from pytest_elr.sut.cluster import KafkaCluster
from pytest_elr.sut.node import KafkaNode

TOPIC = "bench"


def perf_produce(cluster: KafkaCluster, records: int, size: int) -> tuple[float, float]:
    """Produce ``records`` x ``size`` B (acks=1) to broker 0 from this process; (records/s, MB/s).

    librdkafka, not Kafka's ``ProducerPerformance``: that tool lives in kafka-tools, which the node
    no longer carries (Maven Central serves it for some releases only). Both clusters are measured
    by the same producer, so their ratio is what the bench reports.
    """
    from confluent_kafka import KafkaException, Producer  # here: only this bench needs librdkafka

    failed: list[str] = []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{cluster.client_port(0)}", "acks": "1",
                         "linger.ms": 5, "batch.size": 262144, "compression.type": "none"})
    value = b"x" * size
    t0 = time.monotonic()
    for _ in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, on_delivery=lambda err, _msg: err and failed.append(str(err)))
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.01)
    if producer.flush(120) or failed:
        raise KafkaException(f"{len(failed)} records failed: {failed[:3]}")
    took = time.monotonic() - t0
    return records / took, records * size / took / 2**20


def layer_rss_mib(node: KafkaNode) -> float:
    _, out = node.exec("bash", "-c", "ps -o rss= -p \"$(cat /run/kafka/lazyfs.pid)\"")
    return int(out.strip() or 0) / 1024


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("bench power-off")
    ap.add_argument("--kafka-version", default=images.DEFAULT_KAFKA_VERSION)
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    print(f"pytest-elr: Kafka {a.kafka_version} produce throughput through the FUSE layer "
          f"({a.records} records x {a.record_size} B, acks=1, {a.rounds} rounds)", flush=True)

    layered = KafkaCluster(brokers=[0], controllers=1, kafka_version=a.kafka_version)
    plain = KafkaCluster(brokers=[0], controllers=1, kafka_version=a.kafka_version, lazyfs=None,
                         extra_config={"log.segment.bytes": str(1 << 20)})  # same segments
    with layered, plain:
        for c in (layered, plain):
            ClusterClient(c).create_topic(TOPIC, {0: [0]}, min_insync_replicas=1)
        results: dict[str, list[tuple[float, float]]] = {"plain": [], "lazyfs": []}
        for r in range(a.rounds):
            for name, c in (("plain", plain), ("lazyfs", layered)):
                rps, mbps = perf_produce(c, a.records, a.record_size)
                results[name].append((rps, mbps))
                print(f"  round {r + 1} {name:6s}: {rps:9.0f} records/s {mbps:7.2f} MB/s",
                      flush=True)
        med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
               for k, v in results.items()}
        ratio = med["lazyfs"][0] / med["plain"][0]
        for k, (rps, mbps) in med.items():
            print(f"median {k:6s}: {rps:9.0f} records/s {mbps:7.2f} MB/s")
        print(f"ratio lazyfs/plain: {ratio:.2f} (target >= 0.5)")

        node = layered.node(0)
        print(f"layer RSS after {a.rounds * a.records} records: {layer_rss_mib(node):.0f} MiB; "
              f"unsynced now: {layered.unsynced_bytes(0) / 2**20:.2f} MiB")
        power = ProcessFaults(layered)
        rec = power.power_off(0, topics=[TOPIC])
        t0 = time.monotonic()
        node.ctl("fs-umount")
        node.ctl("fs-mount")
        remount = time.monotonic() - t0
        rec = power.power_on(0) or rec
        print(f"power_off (SIGKILL + drop {rec.dropped_bytes / 2**20:.2f} MiB): {rec.seconds:.2f} s; "
              f"layer remount: {remount:.2f} s; broker restart until it answers its LEO: "
              f"{rec.restart_seconds or float('nan'):.1f} s")
        print(f"LEO before {rec.leo_before}, after {rec.leo_after}: records lost "
              f"{rec.records_lost}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
