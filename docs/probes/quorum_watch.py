"""What the controller probes print: every change of (active controller, fenced brokers, partition
leader, leader epoch, ISR), polled every 0.2 s, and the heal that ends a round."""

from __future__ import annotations

import time
from typing import Any

from pytest_elr.sut.polling import await_value


def print_changes(kafka: Any, topic: str, since: float, seconds: float = 20.0) -> None:
    """Poll ``topic``'s partition 0 and the quorum until ``seconds`` after ``since`` (a monotonic
    time), printing each new state with its time since ``since``."""
    last = None
    while time.monotonic() - since < seconds:
        try:
            p = kafka.client.describe_partition(topic)
            state = (kafka.client.active_controller(), sorted(kafka.client.fenced_brokers()), p.leader,
                     p.leader_epoch, tuple(p.isr))
        except Exception as e:  # noqa: BLE001 -- a probe prints what it saw
            state = ("error", type(e).__name__, str(e)[:80])
        if state != last:
            print(f"  {time.monotonic() - since:5.1f}s active, fenced, leader, leader epoch, ISR = {state}", flush=True)
            last = state
        time.sleep(0.2)


def await_healed(kafka: Any, topic: str) -> None:
    """Every link healed: the partition's ISR whole again and no broker fenced."""
    kafka.faults.network.heal_all()
    await_value(lambda: (kafka.client.describe_partition(topic), kafka.client.fenced_brokers()),
                lambda pf: len(pf[0].isr) == 3 and not pf[1], timeout_s=60, what="healed")
