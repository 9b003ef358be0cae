"""A partition leader's ISR shrinks, read from its own log line, and whether each was a lag.

Kafka's leader logs every shrink before it asks the controller for it (``Partition.maybeShrinkIsr``,
the same text in 4.0.2 and 4.4.0)::

    [03:07:35,505] INFO [Partition t-0 broker=1] Shrinking ISR from 1,2,3 to 1,2. Leader:
    (highWatermark: 10, endOffset: 10). Out of sync replicas: (brokerId: 3, endOffset: 8,
    lastCaughtUpTimeMs: 1764300455000). (Partition)

A follower is out of sync when it is behind the leader's end *and* last caught up more than
``replica.lag.time.max.ms`` ago (``ReplicaState.isCaughtUp``). A follower starved of CPU on a loaded
machine meets both without any fault, leaves the ISR and comes back: its partition epoch moves by
two where the model (which has no clock) moves it by none. The line shows the two facts the leader
decided on, so such a round trip is told from a leader that dropped a follower it had no cause to
(a bug): the executor declares the first and fails the second.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

#: the line's time of day: the nodes' log4j pattern ``[%d{HH:mm:ss,SSS}]`` (recipes/kafka-node),
#: in the JVM's zone, UTC in the node image (Debian's default), as ``time.time()`` counts
_TIME = re.compile(r"^\[(\d\d):(\d\d):(\d\d),(\d{3})\]")
_SHRINK = re.compile(r"\[Partition (?P<tp>\S+) broker=(?P<broker>\d+)\] Shrinking ISR from (?P<before>[\d,]*) "
                     r"to (?P<after>[\d,]*)\. Leader: \(highWatermark: (?P<hwm>-?\d+), endOffset: (?P<leo>-?\d+)\)\. "
                     r"Out of sync replicas: (?P<out>.*)\.")
_OUT = re.compile(r"\(brokerId: (?P<id>\d+), endOffset: (?P<leo>-?\d+|unknown), "
                  r"lastCaughtUpTimeMs: (?P<caught>-?\d+|unknown)\)")
DAY_MS = 86_400_000


@dataclass(frozen=True)
class OutOfSync:
    """One follower a shrink dropped, as the leader saw it."""

    broker: int
    log_end: int | None  # None: the leader had no state of it ("unknown")
    lag_ms: int | None  # the line's time minus its last caught-up time (None: unknown)

    def lagged(self, leader_end: int, max_lag_ms: int) -> bool:
        """Kafka's own cause to drop it: behind the leader's end and not caught up for longer
        than ``max_lag_ms``."""
        return (self.log_end is not None and self.lag_ms is not None
                and self.log_end != leader_end and self.lag_ms > max_lag_ms)


@dataclass(frozen=True)
class IsrShrink:
    """One ``Shrinking ISR`` line of a partition leader."""

    broker: int
    at_ms: int  # the line's time of day, ms since midnight
    before: tuple[int, ...]
    after: tuple[int, ...]
    leader_end: int
    dropped: tuple[OutOfSync, ...]
    line: str

    def lagged(self, max_lag_ms: int) -> bool:
        """Whether every follower it dropped had fallen out of sync for lag (``OutOfSync.lagged``)."""
        return bool(self.dropped) and all(d.lagged(self.leader_end, max_lag_ms) for d in self.dropped)

    def since(self, wall_s: float) -> bool:
        """Whether the line was written at or after the wall time ``wall_s``: time of day only, so
        within half a day of it (a run's step lasts minutes)."""
        return (self.at_ms - int(wall_s * 1000)) % DAY_MS < DAY_MS // 2


def isr_shrinks(lines: Iterable[str], topic: str, partition: int) -> list[IsrShrink]:
    """The ``Shrinking ISR`` lines of ``topic``-``partition`` among ``lines``, in order; a line of
    another partition, or one not in the shape above, is none."""
    found = []
    for line in lines:
        shrink = _SHRINK.search(line)
        when = _TIME.match(line)
        if shrink is None or when is None or shrink["tp"] != f"{topic}-{partition}":
            continue
        at_ms = _ms_of_day(when)
        dropped = tuple(
            OutOfSync(int(o["id"]), None if o["leo"] == "unknown" else int(o["leo"]),
                      None if o["caught"] == "unknown" else (at_ms - int(o["caught"])) % DAY_MS)
            for o in _OUT.finditer(shrink["out"]))
        found.append(IsrShrink(int(shrink["broker"]), at_ms, _ids(shrink["before"]), _ids(shrink["after"]),
                               int(shrink["leo"]), dropped, line))
    return found


def time_of_day_ms(line: str) -> int | None:
    """A node's log line's time of day in ms since midnight; None: not a line in the nodes' pattern."""
    when = _TIME.match(line)
    return None if when is None else _ms_of_day(when)


def _ms_of_day(when: re.Match[str]) -> int:
    h, m, s, ms = (int(g) for g in when.groups())
    return ((h * 60 + m) * 60 + s) * 1000 + ms


def _ids(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)
