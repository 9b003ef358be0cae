"""``elr bench kafka-agents``: what the Java agents cost a cluster start, beside a plain start.

    elr bench kafka-agents [--kafka-version V] [--rounds 3]

Each round starts, in turn, the same cluster (3 brokers, 1 controller, the FUSE layer) plain, with
JaCoCo's agent in every JVM (coverage on), and with one mutant planted in the controller, and times
each to ready (every broker registered and unfenced). The turns alternate so all three meet the
same load; the figures are the medians and their ratios to the plain start (issue target: coverage
at most 1.2x). The dump of one JVM's coverage (``org.jacoco.cli dump``, a JVM in the node) is timed
too: a run pays it once per JVM at its end and once before each crash or shutdown.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from pytest_elr.core.commandline import command_parser
from pytest_elr.sut.cluster import KafkaCluster
from pytest_elr.sut.images import DEFAULT_KAFKA_VERSION
from pytest_elr.sut.instrument import Instrumentation, build_agents

#: a mutant on a line every start runs, that changes nothing a start can see (a log line)
STARTUP_MUTANT = ("org.apache.kafka.controller.PartitionChangeBuilder#tryElection("
                  "Lorg/apache/kafka/common/metadata/PartitionChangeRecord;)V:337:VOID_METHOD_CALLS:1")


def start_seconds(version: str, instrumentation: Instrumentation | None) -> tuple[float, float | None]:
    """Seconds to a ready cluster, and (coverage on) seconds of one JVM's coverage dump."""
    t0 = time.monotonic()
    with KafkaCluster(brokers=[0, 1, 2], controllers=1, kafka_version=version, instrumentation=instrumentation) as c:
        ready = time.monotonic() - t0
        dump = None
        if instrumentation is not None and instrumentation.coverage_dir is not None:
            c.coverage_run = "bench"
            t1 = time.monotonic()
            c.dump_coverage([c.controller_ids[0]])
            dump = time.monotonic() - t1
    return ready, dump


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("bench kafka-agents", __doc__)
    parser.add_argument("--kafka-version", default=DEFAULT_KAFKA_VERSION)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    build_agents()  # once, outside the timings
    times: dict[str, list[float]] = {"plain": [], "coverage": [], "mutant": []}
    dumps: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        kinds = {"plain": None, "coverage": Instrumentation(Path(tmp)), "mutant": Instrumentation(None, STARTUP_MUTANT)}
        for r in range(args.rounds):
            for name, instrumentation in kinds.items():
                ready, dump = start_seconds(args.kafka_version, instrumentation)
                times[name].append(ready)
                if dump is not None:
                    dumps.append(dump)
                print(f"round {r + 1} {name:<8} ready in {ready:5.1f} s" + (f", dump {dump:.1f} s" if dump else ""),
                      flush=True)
    plain = statistics.median(times["plain"])
    print(f"\nKafka {args.kafka_version}, {args.rounds} rounds, medians (seconds to a ready cluster):")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"  {name:<9} {med:6.1f} s  ({med / plain:.2f}x plain)  [{', '.join(f'{v:.1f}' for v in values)}]")
    print(f"  coverage dump of one JVM: median {statistics.median(dumps):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
