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
    if history is not None and min_offset is None:
        min_offset = max_acked_offset(history, partition)
    return drain_partitions(bootstrap_servers, topic, history, {partition: start}, min_offsets={partition: min_offset},
                            timeout_s=timeout_s, settle_s=settle_s, reader=reader, skip=skip, config=config)[partition]


@dataclass
class _Progress:
    """One partition's drain: how far it got and whether it is over."""

    result: DrainResult
    start: int
    target: int = 0
    next_offset: int | None = None
    stalled_since: float | None = None
    done: bool = False


def drain_partitions(bootstrap_servers: str, topic: str, history: History | None, starts: dict[int, int], *,
                     min_offsets: dict[int, int | None] | None = None, timeout_s: float = 30.0,
                     settle_s: float = 2.0, reader: str = "drain",
                     skip: Callable[[str], bool] | None = _default_skip,
                     config: dict[str, Any] | None = None) -> dict[int, DrainResult]:
    """Read each partition of ``starts`` from its start offset with ONE consumer, as ``drain`` reads
    one: a topic of 50 partitions is read in one pass, not in 50 consumers' (each paying its own
    join and its own stall at the end of the log). ``min_offsets``: per partition, the highest
    offset some writer saw acknowledged (none given: from the history). ``timeout_s`` bounds the
    whole read; a partition that neither reaches its target nor stalls stops there ("timeout")."""
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    wanted = dict(min_offsets or {})
    if history is not None:
        for p in starts:
            if wanted.get(p) is None:
                wanted[p] = max_acked_offset(history, p)
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
    progress = {p: _Progress(DrainResult(), start) for p, start in sorted(starts.items())}
    try:
        consumer.assign([TopicPartition(topic, p, start or OFFSET_BEGINNING) for p, start in sorted(starts.items())])
        for p, pr in progress.items():
            pr.result.hwm = hwm = _watermark(consumer, topic, p, deadline)
            acked = wanted.get(p)
            pr.target = pr.result.target = max(hwm or 0, (acked + 1) if acked is not None else 0)
            pr.next_offset = pr.start if pr.target <= pr.start else None  # nothing to read: done at once

        def reached(pr: _Progress) -> bool:
            return pr.next_offset is not None and pr.next_offset >= pr.target

        def hwm_moved(p: int, pr: _Progress) -> bool:
            """A new HWM above the last one raises the target (True); else the partition is stalled."""
            new_hwm = _watermark(consumer, topic, p, min(deadline, time.monotonic() + 2))
            if new_hwm is None or (pr.result.hwm is not None and new_hwm <= pr.result.hwm):
                return False
            pr.result.hwm = new_hwm
            pr.target = pr.result.target = max(pr.target, new_hwm)
            pr.stalled_since = None
            return True

        while time.monotonic() < deadline:
            for pr in progress.values():
                if not pr.done and reached(pr):
                    pr.done, pr.result.reached, pr.result.stop = True, True, "reached"
            if all(pr.done for pr in progress.values()):
                break
            msg = consumer.poll(0.2)
            if msg is None:
                # The consumer reports the end of a partition's log once, not on every poll: a stall
                # that began at that end keeps counting while nothing arrives.
                for p, pr in progress.items():
                    if not pr.done and pr.stalled_since is not None \
                            and time.monotonic() - pr.stalled_since >= settle_s and not hwm_moved(p, pr):
                        pr.done, pr.result.stop = True, "stalled"  # the rest is above the HWM: not coming
                continue
            p = msg.partition()
            pr = progress.get(p)  # type: ignore[assignment]
            if pr is None or pr.done:
                continue
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    continue  # transient (leader moving, broker down): the consumer retries
                eof = msg.offset()
                pr.next_offset = eof if pr.next_offset is None else max(pr.next_offset, eof)
                if reached(pr):
                    continue  # the top of the loop marks it reached
                # At the end of the log short of the target: has the HWM moved?
                if hwm_moved(p, pr):
                    continue
                if pr.stalled_since is None:
                    pr.stalled_since = time.monotonic()
                elif time.monotonic() - pr.stalled_since >= settle_s:
                    pr.done, pr.result.stop = True, "stalled"
                continue
            pr.stalled_since = None
            offset = msg.offset()
            raw = msg.value()
            value = raw.decode("utf-8", errors="replace") if raw is not None else ""
            pr.next_offset = offset + 1
            if skip is not None and skip(value):
                pr.result.skipped += 1
                continue
            pr.result.records.append(DrainedRecord(offset, value))
            if history is not None:
                history.record("consume", partition=p, offset=offset, value=value, reader=reader)
        for pr in progress.values():
            pr.result.next_offset = pr.next_offset if pr.next_offset is not None else pr.start
            pr.result.reached = pr.result.reached or reached(pr)
        return {p: pr.result for p, pr in progress.items()}
    finally:
        elapsed = time.monotonic() - t0
        for pr in progress.values():
            pr.result.elapsed_s = elapsed
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
