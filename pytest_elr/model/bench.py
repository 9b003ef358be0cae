"""``elr bench model``: steps per second of the model.

Prints the figure beside its target and, as a same-run baseline, the cost of the cheapest step (a
``wait``: one settle of an unchanged model).
"""

from __future__ import annotations

import sys
import time

from pytest_elr.actions import Cut, Heal, Produce, Wait
from pytest_elr.core.commandline import command_parser
from pytest_elr.core.nodes import isolation_links
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.profiles import get_profile


def steps_per_second(n: int = 20_000) -> tuple[float, float]:
    """Steps per second of a produce / cut / produce / heal cycle, and of idle settles."""
    brokers = (0, 1, 2)
    m = ModelCluster(brokers, list(brokers), 2, get_profile("kip966"))
    actions = [Produce(count=1), Cut(links=isolation_links(1, "brokers", brokers)), Produce(count=1),
               Heal(links=None)]
    started = time.perf_counter()
    for i in range(n):
        m.apply(actions[i % len(actions)])
    faults = n / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in range(n):
        m.apply(Wait(seconds=0))
    idle = n / (time.perf_counter() - started)
    return faults, idle


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("bench model", __doc__)
    parser.add_argument("--steps", type=int, default=20_000, help="steps of each kind to time")
    args = parser.parse_args(argv)
    faults, idle = steps_per_second(args.steps)
    print(f"model steps per second: {faults:,.0f} with faults (target >= 20,000); "
          f"idle settle {idle:,.0f}/s; ratio {faults / idle:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
