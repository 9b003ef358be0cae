"""``elr bench model``: steps per second of the model.

Prints the figure beside its target and, as a same-run baseline, the cost of the cheapest step (a
``wait``: one settle of an unchanged model). ``--partitions N``: a topic of N partitions, partition
i on the brokers rotated by i (docs/performance.md, "The model with many partitions").
"""

from __future__ import annotations

import argparse
import sys
import time

from pytest_elr.actions import Cut, Heal, Produce, Wait
from pytest_elr.core.commandline import command_parser
from pytest_elr.core.nodes import isolation_links
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.profiles import get_profile


def _partitions(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 10_000:
        raise argparse.ArgumentTypeError(f"--partitions: expected a whole number from 1 to 10000, got {text!r}")
    return int(text)


#: the targets of issue 27: one partition, and a topic of 50
TARGETS = {1: 20_000, 50: 2_000}


def steps_per_second(n: int = 20_000, partitions: int = 1) -> tuple[float, float]:
    """Steps per second of a produce / cut / produce / heal cycle, and of idle settles."""
    brokers = (0, 1, 2)
    more = tuple([brokers[(p + k) % len(brokers)] for k in range(len(brokers))] for p in range(1, partitions))
    m = ModelCluster(brokers, list(brokers), 2, get_profile("kip966"), more_partitions=more)
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
    parser.add_argument("--partitions", type=_partitions, default=1,
                        help="partitions of the topic (default 1), rotated over 3 brokers")
    args = parser.parse_args(argv)
    faults, idle = steps_per_second(args.steps, args.partitions)
    target = TARGETS.get(args.partitions)
    print(f"model steps per second ({args.partitions} partition{'s' if args.partitions > 1 else ''}): "
          f"{faults:,.0f} with faults ({f'target >= {target:,}' if target else 'no target'}); "
          f"idle settle {idle:,.0f}/s; ratio {faults / idle:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
