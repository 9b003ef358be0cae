"""Probe: what Kafka does to a partition when the operator unregisters a broker that is gone
(UnregisterBroker, ``kafka-cluster.sh unregister --id``), with ELR on and off, and what happens when
a broker with that id comes back. The reading behind the ``unregister`` action's model rule
(docs/model.md) and the mutants of ``ReplicationControlManager.handleBrokerUnregistered``.

    PYTHONPATH=. python3 docs/probes/unregister_broker.py [--elr on|off] [--kafka-version 4.4.0]

Partition [0, 1, 2], min ISR 2: 2 and then 1 shut down cleanly (ISR [0], ELR [1] with ELR on),
1 unregistered, 1 back (registers anew), then 0 shut down and 1 unregistered again while it leads
nothing; the partition and the fenced set are printed after each step, once the metadata settles.
"""

import argparse
import time

from pytest_elr.faults import Faults
from pytest_elr.sut import KafkaCluster
from pytest_elr.sut.client import ClusterClient

T0 = time.monotonic()


def say(*words: object) -> None:
    print(f"{time.monotonic() - T0:7.2f}", *words, flush=True)


def show(client: ClusterClient, what: str, settle_s: float = 4.0) -> None:
    time.sleep(settle_s)  # a probe, not a test: the state is printed as it is then, nothing asserted
    p = client.describe_partition("probe")
    brokers = client.brokers()
    say(f"{what:<34}", "leader", p.leader, "epoch", p.leader_epoch, "isr", list(p.isr), "elr", p.elr,
        "lkelr", p.last_known_elr, "registered", [b.broker_id for b in brokers],
        "fenced", sorted(b.broker_id for b in brokers if b.fenced))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--elr", choices=("on", "off"), default="on")
    parser.add_argument("--kafka-version", default="4.4.0")
    parser.add_argument("--live", action="store_true", help="unregister running broker 1 instead, and watch it")
    args = parser.parse_args()
    if args.live:
        live(args)
        return
    with KafkaCluster(brokers=[0, 1, 2, 3], controllers=1, elr=args.elr == "on",
                      kafka_version=args.kafka_version) as c:
        client, faults = ClusterClient(c), Faults(c)
        client.create_topic("probe", {0: [0, 1, 2]}, min_insync_replicas=2)
        show(client, "created", 1)
        faults.process.shutdown(2)
        faults.process.shutdown(1)
        show(client, "2 and 1 shut down")
        for broker in (1, 2):
            try:
                client.unregister_broker(broker)
                show(client, f"{broker} unregistered")
            except Exception as exc:  # noqa: BLE001 - the probe prints what Kafka answered
                say(f"unregister {broker}: {exc}")
        faults.process.shutdown(0)
        show(client, "0 shut down")
        try:
            client.unregister_broker(0)
            show(client, "0 unregistered")
        except Exception as exc:  # noqa: BLE001
            say(f"unregister 0: {exc}")
        faults.process.start(1)
        show(client, "1 back", 6)
        faults.process.start(0)
        show(client, "0 back", 6)
        faults.process.start(2)
        show(client, "2 back", 6)


def live(args: argparse.Namespace) -> None:
    """Broker 1 unregistered while it runs and is in the ISR: what the controller does to the
    partition, then what the broker does (its heartbeats name a registration that is gone)."""
    with KafkaCluster(brokers=[0, 1, 2, 3], controllers=1, elr=args.elr == "on",
                      kafka_version=args.kafka_version) as c:
        client = ClusterClient(c)
        client.create_topic("probe", {0: [1, 0, 2]}, min_insync_replicas=2)
        show(client, "created (1 leads)", 1)
        client.unregister_broker(1)
        for i in range(8):
            show(client, f"1 unregistered, +{4 * (i + 1)} s")
        say("broker 1 state", c.node_state(1))
        say(c.logs(1, 30))


if __name__ == "__main__":
    main()
