"""Probe (docs/model.md, "A slow link between controllers"): what a 3-voter KRaft quorum does when a
link between two controllers is slowed beyond ``controller.quorum.fetch.timeout.ms`` (2 s here) by a
Toxiproxy latency toxic -- data still flows, late. Each case on whichever controller leads, A the
active one and B, C the others; every 0.2 s for 20 s it prints what changed of (active controller,
fenced brokers, partition leader, leader epoch, ISR), then heals and waits for the cluster to settle.

    python3 docs/probes/slow_between_controllers.py 5000     # latency ms; one cluster, ~3 min
    python3 docs/probes/slow_between_controllers.py 5000 A->B,A->C A->B,A->C   # chosen cases

Cases (default all four): A->B (B's fetch answers late), B->A (B's fetches late), A->B,A->C (every
answer late), B<->C (the two followers' link, both ways). An item ``crash:A`` crashes that controller
(started again after the heal): ``B<->C,crash:A`` leaves two voters whose link is slow.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "sut"))
from kafka_under_test import Kafka  # noqa: E402
from quorum_watch import await_healed, print_changes  # noqa: E402

from pytest_elr.sut import KafkaCluster  # noqa: E402
from pytest_elr.sut.polling import await_value  # noqa: E402

CASES = ("A->B", "B->A", "A->B,A->C", "B<->C")


def main(latency_ms: int, cases: tuple[str, ...] = CASES) -> None:
    with KafkaCluster(brokers=[0, 1, 2], controllers=3, elr=True, kafka_version="4.4.0") as cluster:
        kafka = Kafka.on(cluster)
        kafka.client.create_topic("probe", {0: [0, 1, 2]}, min_insync_replicas=2)
        net = kafka.faults.network
        for case in cases:
            active = await_value(kafka.client.active_controller, lambda x: x is not None, timeout_s=30,
                                 what="an active controller")
            b, c = [x for x in cluster.controller_ids if x != active]
            names = {"A": active, "B": b, "C": c}
            print(f"case {case} ({latency_ms} ms): A={active} B={b} C={c}", flush=True)
            t0 = time.monotonic()
            crashed = []
            for link in case.split(","):
                if link.startswith("crash:"):
                    crashed.append(names[link.removeprefix("crash:")])
                    kafka.faults.process.crash(crashed[-1])
                    continue
                both = "<->" in link
                src, dst = link.replace("<->", "->").split("->")
                net.slow(names[src], names[dst], latency_ms, both_ways=both)
            print_changes(kafka, "probe", t0)
            kafka.faults.network.heal_all()
            for node in crashed:
                kafka.faults.process.start(node)
            await_healed(kafka, "probe")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000, tuple(sys.argv[2:]) or CASES)
