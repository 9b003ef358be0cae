"""The final drain: read a partition from its start up to the highest offset anyone saw.

The target is the larger of the high watermark and one past the highest acknowledged offset in
the history: an acknowledged record above the HWM is exactly what the checker must not miss. A
consumer never reads past the HWM, so when the target stays out of reach (acks=1 records that
were truncated, or an acks=all loss) the drain stops once the HWM has not moved for ``settle_s``
at the end of the log, or at ``timeout_s`` -- it never hangs a run.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from pytest_elr.core.history import History


@dataclass(frozen=True)
class DrainedRecord:
    offset: int
    value: str


@dataclass
class DrainResult:
    records: list[DrainedRecord] = field(default_factory=list)
    target: int = 0  # offset the drain had to reach (exclusive)
    hwm: int | None = None  # last high watermark seen
    next_offset: int = 0  # one past the last offset read (or the log start)
    reached: bool = False  # read everything up to the target
    elapsed_s: float = 0.0
    skipped: int = 0  # records read but not recorded (``skip``)
    stop: str = "timeout"  # why it stopped: reached | stalled (the rest is above the HWM) | timeout

    @property
    def values(self) -> list[str]:
        return [r.value for r in self.records]


def max_acked_offset(history: History | Iterable[dict[str, Any]], topic_partition: int = 0,
                     acks: str | None = None) -> int | None:
    """The highest offset of a produce ``ok`` in the history for the partition (null partition = 0),
    of records sent with ``acks`` when given."""
    events = history.events if isinstance(history, History) else history
    best: int | None = None
    for e in events:
        if e.get("type") == "produce" and e.get("op") == "ok" and e.get("offset") is not None \
                and (e.get("partition") or 0) == topic_partition and (acks is None or e.get("acks") == acks):
            best = e["offset"] if best is None else max(best, e["offset"])
    return best


def _default_skip(value: str) -> bool:
    # ClusterClient.await_partition(traffic=True) writes literal b"tick" records that no produce
    # event stands for; as consume events they would all be one value read at many offsets.
    return value == "tick"


def drain(bootstrap_servers: str, topic: str, history: History | None, *, partition: int = 0,
          start: int = 0, min_offset: int | None = None, timeout_s: float = 30.0, settle_s: float = 2.0,
          reader: str = "drain", skip: Callable[[str], bool] | None = _default_skip,
          config: dict[str, Any] | None = None) -> DrainResult:
    """Read ``topic``/``partition`` from ``start`` (default: the beginning), recording a ``consume``
    event per record when a history is given.

    ``min_offset``: the highest offset some writer saw acknowledged; by default taken from the
    history's ``ok`` events. ``skip``: values read but not recorded (tick records of no send).
    """
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    if history is not None and min_offset is None:
        min_offset = max_acked_offset(history, partition)
    result = DrainResult()
    consumer = Consumer({
        "bootstrap.servers": bootstrap_servers,
        "group.id": f"elr-drain-{secrets.token_hex(4)}",  # never committed: no group state matters
        "enable.auto.commit": False,
        "isolation.level": "read_uncommitted",
        "enable.partition.eof": True,
        "topic.metadata.refresh.interval.ms": 1000,
        "fetch.wait.max.ms": 100,
        **(config or {}),
    })
    try:
        tp = TopicPartition(topic, partition, start or OFFSET_BEGINNING)
        consumer.assign([tp])
        hwm = _watermark(consumer, topic, partition, deadline)
        result.hwm = hwm
        target = max(hwm or 0, (min_offset + 1) if min_offset is not None else 0)
        result.target = target
        stalled_since: float | None = None
        next_offset: int | None = start if target <= start else None  # nothing to read: done at once
        while time.monotonic() < deadline:
            if next_offset is not None and next_offset >= target:
                result.reached = True
                result.stop = "reached"
                break
            msg = consumer.poll(0.2)
            if msg is None:
                # The consumer reports the end of the log once, not on every poll: a stall that
                # began at that end keeps counting while nothing arrives.
                if stalled_since is not None and time.monotonic() - stalled_since >= settle_s:
                    new_hwm = _watermark(consumer, topic, partition, min(deadline, time.monotonic() + 2))
                    if new_hwm is None or (result.hwm is not None and new_hwm <= result.hwm):
                        result.stop = "stalled"  # the rest is above the HWM: not readable, not coming
                        break
                    result.hwm = new_hwm
                    target = max(target, new_hwm)
                    result.target = target
                    stalled_since = None
                continue
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    continue  # transient (leader moving, broker down): the consumer retries
                eof = msg.offset()
                next_offset = eof if next_offset is None else max(next_offset, eof)
                if next_offset >= target:
                    continue  # top of loop marks it reached
                # At the end of the log short of the target: has the HWM moved?
                new_hwm = _watermark(consumer, topic, partition, min(deadline, time.monotonic() + 2))
                if new_hwm is not None and (result.hwm is None or new_hwm > result.hwm):
                    result.hwm = new_hwm
                    target = max(target, new_hwm)
                    result.target = target
                    stalled_since = None
                elif stalled_since is None:
                    stalled_since = time.monotonic()
                elif time.monotonic() - stalled_since >= settle_s:
                    result.stop = "stalled"  # the rest is above the HWM: not readable, not coming
                    break
                continue
            stalled_since = None
            offset = msg.offset()
            raw = msg.value()
            value = raw.decode("utf-8", errors="replace") if raw is not None else ""
            next_offset = offset + 1
            if skip is not None and skip(value):
                result.skipped += 1
                continue
            result.records.append(DrainedRecord(offset, value))
            if history is not None:
                history.record("consume", partition=partition, offset=offset, value=value, reader=reader)
        result.next_offset = next_offset if next_offset is not None else start
        result.reached = result.reached or (next_offset is not None and next_offset >= target)
        return result
    finally:
        result.elapsed_s = time.monotonic() - t0
        consumer.close()


def _watermark(consumer: Consumer, topic: str, partition: int, deadline: float) -> int | None:
    """The partition's high watermark from its leader, retried until ``deadline`` (None if never)."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                     timeout=min(2.0, remaining), cached=False)
            return int(high)
        except KafkaException:
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
