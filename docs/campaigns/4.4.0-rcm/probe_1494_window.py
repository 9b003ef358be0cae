"""How long a held metadata Fetch keeps a leader's controlled shutdown open (docs/kafka-mutants.md,
"Survivor 1494 killed"): the harness's cluster shape for held_metadata_shutting_down_not_elected
(brokers 0-3, the observer 900), 2 and 1 shut down, broker 3's Fetch to the controller held, then
broker 0 (leader, ISR [0]) sent SIGTERM. Polls every second until broker 0 is fenced (80 polls at
most), then prints the controller's lines about shutdowns and fencing.

    PYTHONPATH=. python3 docs/campaigns/4.4.0-rcm/probe_1494_window.py            # no restart
    PYTHONPATH=. python3 docs/campaigns/4.4.0-rcm/probe_1494_window.py restart    # 1 restarted 4 s in

The hold is put on 1 s before the SIGTERM: the Fetch in flight when the toxic goes on is not held.
"""

import sys
import time

from pytest_elr.faults import Faults
from pytest_elr.faults.network import FETCH
from pytest_elr.sut import KafkaCluster
from pytest_elr.sut.client import ClusterClient
from pytest_elr.sut.instrument import Instrumentation

OBSERVER = 900
T0 = time.monotonic()


def say(*words: object) -> None:
    print(f"{time.monotonic() - T0:7.2f}", *words, flush=True)


def main(restart: bool) -> None:
    with KafkaCluster(brokers=[0, 1, 2, 3, OBSERVER], controllers=1, elr=True, kafka_version="4.4.0",
                      instrumentation=Instrumentation.from_env()) as c:
        client, faults = ClusterClient(c), Faults(c)
        client.create_topic("probe", {0: [0, 1, 2]}, min_insync_replicas=2)
        faults.process.shutdown(2)
        faults.process.shutdown(1)
        faults.network.hold(3, "controller", api_key=FETCH)
        time.sleep(1)
        t_sigterm = time.monotonic()
        faults.process.begin_shutdown(0)
        if restart:
            time.sleep(4)
            faults.process.start(1)
            say("1 started")
        fenced_after = None
        for _ in range(80):
            time.sleep(1)
            p = client.describe_partition("probe", via=OBSERVER)
            fenced = sorted(client.fenced_brokers(via=OBSERVER))
            say("leader", p.leader, "isr", p.isr, "elr", p.elr, "fenced", fenced, "node0", c.node_state(0),
                "held Fetch of 3", faults.network.held_requests(3, FETCH))
            if 0 in fenced:
                fenced_after = time.monotonic() - t_sigterm
                break
        say("broker 0 fenced after (s):", fenced_after)
        for line in c.logs(c.controller_ids[0], lines=400).splitlines():
            if any(k in line for k in ("shut down", "hutdown", "Fencing", "fenc")):
                print("controller:", line[:300])


if __name__ == "__main__":
    main(restart=sys.argv[1:] == ["restart"])
