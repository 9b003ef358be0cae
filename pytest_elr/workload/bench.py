"""Benchmark of reading a topic of many partitions on a real cluster:
``elr bench reads [--partitions N] [--records R] [--rounds K] [--kafka-version V]``.

One 3-broker cluster, a topic of N partitions (leaders rotated over the brokers) holding R records
each; K rounds alternate, so both sides meet the same load:

* the observation's read: every partition's leader/ISR/ELR in one DescribeTopicPartitions round
  trip (paged), the figure issue 27 asks <= 50 ms of at 50 partitions;
* the final read of the whole topic: ``drain`` once per partition (one consumer each, the baseline:
  how the kafka backend read a topic before) beside ``drain_partitions`` (one consumer for all).

Prints each round and the medians with their ratio.
"""

from __future__ import annotations

import statistics
import time

from pytest_elr.core.commandline import command_parser
from pytest_elr.sut import images
from pytest_elr.sut.client import ClusterClient
from pytest_elr.sut.cluster import KafkaCluster
from pytest_elr.workload.drain import drain, drain_partitions

BROKERS = (0, 1, 2)


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("bench reads")
    ap.add_argument("--kafka-version", default=images.DEFAULT_KAFKA_VERSION)
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--records", type=int, default=20, help="records per partition")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, each side once per round")
    a = ap.parse_args(argv)
    if not 1 <= a.partitions <= 1000 or not 0 <= a.records <= 10_000 or not 1 <= a.rounds <= 50:
        ap.error("--partitions takes 1-1000, --records 0-10000, --rounds 1-50")
    print(f"pytest-elr read benchmark, Kafka {a.kafka_version}: {a.partitions} partitions x {a.records} records")
    cluster = KafkaCluster(brokers=list(BROKERS), controllers=1, kafka_version=a.kafka_version)
    cluster.start()
    try:
        client = ClusterClient(cluster)
        n = len(BROKERS)
        client.create_topic("bench", {p: [BROKERS[(p + i) % n] for i in range(n)] for p in range(a.partitions)},
                            min_insync_replicas=2)
        for p in range(a.partitions):
            if a.records:
                client.produce("bench", [f"p{p}-{k}".encode() for k in range(a.records)], partition=p)
        bootstrap = cluster.bootstrap_servers
        describe: list[float] = []
        each: list[float] = []
        once: list[float] = []
        for r in range(a.rounds):
            polls = []
            for _ in range(20):
                t0 = time.perf_counter()
                states = client.partitions("bench")
                polls.append(time.perf_counter() - t0)
            if len(states) != a.partitions:
                raise SystemExit(f"DescribeTopicPartitions read {len(states)} of {a.partitions} partitions")
            describe.append(statistics.median(polls))
            t0 = time.perf_counter()
            read = sum(len(drain(bootstrap, "bench", None, partition=p, min_offset=a.records - 1).records)
                       for p in range(a.partitions))
            each.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            results = drain_partitions(bootstrap, "bench", None, dict.fromkeys(range(a.partitions), 0),
                                       min_offsets=dict.fromkeys(range(a.partitions), a.records - 1))
            once.append(time.perf_counter() - t0)
            together = sum(len(x.records) for x in results.values())
            if read != together or together != a.partitions * a.records:
                raise SystemExit(f"the two reads disagree: {read} and {together} of {a.partitions * a.records}")
            print(f"[{r + 1}] DescribeTopicPartitions {describe[-1] * 1000:.1f} ms (median of 20); final read: "
                  f"a consumer per partition {each[-1]:.2f} s, one consumer {once[-1]:.2f} s", flush=True)
        e, o = statistics.median(each), statistics.median(once)
        print(f"median of {a.rounds}: DescribeTopicPartitions {statistics.median(describe) * 1000:.1f} ms; "
              f"final read {e:.2f} s -> {o:.2f} s ({e / o:.1f}x)")
    finally:
        cluster.close()
    return 0
