"""Kafka's controller meters, read on demand from a controller's JVM.

The image ships no JMX client (no ``kafka-tools`` jar, no ``jcmd``) and the nodes start with no JMX
port, so nothing is added to a cluster's start: a read runs ``agents/ElrMeters.java`` as a
single-file source program in the controller's container (its JRE has ``jdk.attach`` and
``jdk.compiler``), which attaches to the Kafka JVM, starts its local JMX agent and prints each
meter's ``Count``. One read is one JVM start: ~0.7 s measured on Kafka 4.4.0 (docs/model.md,
"Metrics"). Every controller replays the same metadata log, so each one's meters count the same
records since its JVM started.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import resources as importlib_resources
from typing import TYPE_CHECKING

from pytest_elr.sut.errors import NodeCommandError

if TYPE_CHECKING:
    from pytest_elr.sut.node import KafkaNode

#: the controller meters of Kafka's ``ControllerMetadataMetrics`` the expectations name
ELECTION_METERS: Mapping[str, str] = {
    "elr_elections": "kafka.controller:type=ControllerStats,name=ElectionFromEligibleLeaderReplicasPerSec",
    "unclean_elections": "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec",
}
READER_IN_NODE = "/opt/elr/ElrMeters.java"
#: a JVM that may hang on a stopped target is not waited for
READ_TIMEOUT_S = 30


def read_meters(node: KafkaNode, names: Sequence[str]) -> dict[str, int | None]:
    """Each meter's count on ``node``'s Kafka JVM; None for one its release does not register."""
    source = (importlib_resources.files("pytest_elr.sut") / "agents" / "ElrMeters.java").read_text()
    node.put_file(READER_IN_NODE, source)
    # JAVA_TOOL_OPTIONS would load the nodes' agents into the reader too
    script = (f'unset JAVA_TOOL_OPTIONS; exec timeout {READ_TIMEOUT_S} java -XX:TieredStopAtLevel=1 '
              f'-XX:+UseSerialGC {READER_IN_NODE} "$(cat /run/kafka/kafka.pid)" "$@"')
    _, out = node.exec("bash", "-c", script, "read-meters", *names)
    counts: dict[str, int | None] = {}
    for line in out.splitlines():
        name, _, value = line.rpartition(" ")
        if name in names:
            counts[name] = None if value == "absent" else int(value)
    missing = [n for n in names if n not in counts]
    if missing:
        raise NodeCommandError(f"{node.name}: the meter reader did not answer for {missing}: {out.strip()[-2000:]}")
    return counts


def election_counts(node: KafkaNode) -> dict[str, int]:
    """``ELECTION_METERS`` read on ``node``, by expectation key; a meter the release lacks is left out."""
    counts = read_meters(node, list(ELECTION_METERS.values()))
    return {key: count for key, meter in ELECTION_METERS.items() if (count := counts[meter]) is not None}
