"""Probe (docs/model.md, "A quorum leader that loses its majority"): the active controller A keeps no
round trip with either other voter -- A and B cut both ways, A's data to C dropped -- while B and C
keep theirs. Every 0.2 s for 20 s it prints what changed of (active controller, fenced brokers,
partition leader, leader epoch, ISR), then heals and does it again on whichever controller leads.

    python3 docs/probes/controller_leader_loses_its_majority.py 4      # rounds; one cluster, ~2 min
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


def main(rounds: int) -> None:
    with KafkaCluster(brokers=[0, 1, 2], controllers=3, elr=True, kafka_version="4.4.0") as cluster:
        kafka = Kafka.on(cluster)
        kafka.client.create_topic("probe", {0: [0, 1, 2]}, min_insync_replicas=2)
        for round_ in range(rounds):
            active = await_value(kafka.client.active_controller, lambda x: x is not None, timeout_s=30,
                                 what="an active controller")
            b, c = [x for x in cluster.controller_ids if x != active]
            print(f"round {round_}: active {active}; cut {active}<->{b}, {active}->{c}", flush=True)
            t0 = time.monotonic()
            kafka.faults.network.cut_both(active, b)
            kafka.faults.network.cut(active, c)
            print_changes(kafka, "probe", t0)
            await_healed(kafka, "probe")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
