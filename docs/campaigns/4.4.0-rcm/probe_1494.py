"""The measurement behind the 1494 survivor's reading (docs/kafka-mutants.md, "The survivors of the
fourth campaign"): not a scenario, a probe on the harness's own cluster and faults.

A bystander broker (3) whose metadata Fetch to the controller is held stays unfenced with a stale
metadata offset, so the controller cannot let a broker finish its controlled shutdown
(BrokerHeartbeatManager.calculateNextBrokerState: SHUTDOWN_NOW only once the lowest active offset
passes the shutdown's). Broker 0, the last ISR member, shuts down cleanly in that window (ISR [],
ELR [0, 1]); broker 1 then comes back and is unfenced, and the controller elects from the ELR.
Kafka 4.4.0 elects 1 (0 is in controlled shutdown: not an acceptable leader); with mutant 1494
planted (no IN_CONTROLLED_SHUTDOWN registration change) it elects the shutting-down 0.

    PYTHONPATH=. python3 docs/campaigns/4.4.0-rcm/probe_1494.py
    M='handleBrokerInControlledShutdown(IJLjava/util/List;)V:1494:NEGATE_CONDITIONALS:0'
    PYTEST_ELR_KAFKA_MUTANT="org.apache.kafka.controller.ReplicationControlManager#$M" \
      PYTHONPATH=. python3 docs/campaigns/4.4.0-rcm/probe_1494.py

Broker 4 is never faulted: the partition is read through it (3's metadata is stale by design).
"""

import time

from pytest_elr.faults import Faults
from pytest_elr.sut import KafkaCluster
from pytest_elr.sut.client import ClusterClient
from pytest_elr.sut.instrument import Instrumentation

FETCH = 1  # the API key of the raft Fetch a broker sends the controller for metadata
T0 = time.monotonic()


def say(*words: object) -> None:
    print(f"{time.monotonic() - T0:7.2f}", *words, flush=True)


def show(client: ClusterClient, cluster: KafkaCluster, what: str) -> None:
    p = client.describe_partition("probe", via=4)
    say(what, "leader", p.leader, "isr", p.isr, "elr", p.elr, "lkelr", p.last_known_elr,
        "fenced", sorted(client.fenced_brokers(via=4)), "node0", cluster.node_state(0))


def main() -> None:
    with KafkaCluster(brokers=[0, 1, 2, 3, 4], controllers=1, elr=True, kafka_version="4.4.0",
                      instrumentation=Instrumentation.from_env()) as c:
        say("planted", c.planted_mutants())
        client, faults = ClusterClient(c), Faults(c)
        client.create_topic("probe", {0: [0, 1, 2]}, min_insync_replicas=2)
        show(client, c, "created")
        faults.process.shutdown(2)
        faults.process.shutdown(1)
        time.sleep(2)
        show(client, c, "1 and 2 shut down")
        faults.network.hold(3, "controller", api_key=FETCH)
        time.sleep(1)
        faults.process.begin_shutdown(0)
        for _ in range(4):
            time.sleep(1)
            show(client, c, "window")
        faults.process.start(1)
        for _ in range(12):
            time.sleep(1.5)
            show(client, c, "1 restarted")
        faults.network.heal_all()
        for _ in range(4):
            time.sleep(1.5)
            show(client, c, "healed")


if __name__ == "__main__":
    main()
