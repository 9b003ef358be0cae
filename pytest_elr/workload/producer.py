"""A background producer: unique values to one partition at a steady rate, every send in the History.

One thread owns the confluent-kafka ``Producer``: it sends on a schedule and serves the delivery
callbacks (confluent-kafka runs them inside ``poll``/``flush``, i.e. on this thread), so each
``invoke`` is written before its completion. Scenario code records faults and observations from
another thread at the same time: ``History`` serialises them with its own lock.

Outcomes (``produce`` events, docs/history.md):

* ``ok``   -- acknowledged, with partition and offset (offset null for acks=0: no answer comes).
* ``fail`` -- *definitely not written*: the leader refused the batch before appending it, or the
  client never sent it. Only the errors in :data:`DEFINITE_ERRORS`, and ``_PURGE_QUEUE`` when the
  producer does not retry (with retries a purged message may have been sent before).
* ``info`` -- *indeterminate*: everything else. Above all timeouts (``_MSG_TIMED_OUT``,
  ``REQUEST_TIMED_OUT``: the leader may have appended and be waiting for followers), a dead
  connection with the request in flight (``_TRANSPORT``, ``NETWORK_EXCEPTION``, ``_PURGE_INFLIGHT``),
  and ``NOT_ENOUGH_REPLICAS_AFTER_APPEND`` (appended to the leader's log, then the ISR shrank: the
  record may still commit). Unknown errors are indeterminate: calling a written record "failed"
  would hide a read of it; calling a failed one "info" only weakens a check.

Leader changes, with ``retries=0`` (the default without idempotence, for a definite answer per send):
a send to a broker that knows it lost leadership fails ``NOT_LEADER_OR_FOLLOWER`` (definite;
librdkafka then refreshes metadata, so later sends go to the new leader). A send to a *zombie* leader
(fenced, cut from the controller, still believing it leads) is acknowledged at once with acks=1 (and
may be truncated later: the checker counts ``acks1_uncommitted``), and with acks=all waits for
followers that have left, so it ends ``REQUEST_TIMED_OUT``/``_MSG_TIMED_OUT`` (indeterminate). A
broker that vanishes gives ``_TRANSPORT`` for what was in flight (indeterminate) and
``_MSG_TIMED_OUT`` for what waited for a leader. Metadata is refreshed every second and the client
bootstraps from every broker given, so losing the bootstrap broker does not stop it.

With ``idempotence=True`` (acks must be ``all``) librdkafka retries internally until
``message.timeout.ms``: failures then surface as ``_MSG_TIMED_OUT`` (indeterminate) rather than a
broker error. A fatal idempotence error makes the client unusable: it is replaced by a new one, and
whatever the old one still held is recorded indeterminate.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from confluent_kafka import KafkaError, KafkaException, Producer

from pytest_elr.core.history import History

Acks = Literal["all", "1", "0"]

# The broker refused the request before appending (or the client never sent it): not written.
DEFINITE_ERRORS: frozenset[str] = frozenset({
    "NOT_ENOUGH_REPLICAS",  # checked before the append (the ISR is already below min ISR)
    "NOT_LEADER_FOR_PARTITION",  # a.k.a. NOT_LEADER_OR_FOLLOWER
    "LEADER_NOT_AVAILABLE",
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
    "UNKNOWN_TOPIC_OR_PART",
    "MSG_SIZE_TOO_LARGE",
    "RECORD_LIST_TOO_LARGE",
    "INVALID_RECORD",
    "INVALID_MSG",  # CORRUPT_MESSAGE
    "INVALID_TIMESTAMP",
    "INVALID_REQUIRED_ACKS",
    "TOPIC_AUTHORIZATION_FAILED",
    "CLUSTER_AUTHORIZATION_FAILED",
    "POLICY_VIOLATION",
    "UNSUPPORTED_VERSION",
    "UNSUPPORTED_FOR_MESSAGE_FORMAT",
    "INVALID_PRODUCER_EPOCH",
    "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "UNKNOWN_PRODUCER_ID",
    "THROTTLING_QUOTA_EXCEEDED",
    # Local: refused by the client before sending.
    "_UNKNOWN_PARTITION",
    "_UNKNOWN_TOPIC",
    "_MSG_SIZE_TOO_LARGE",
    "_INVALID_ARG",
    "_QUEUE_FULL",
    "_STATE",
})


def is_definite(error: str, retries: bool = False) -> bool:
    """Whether a delivery error (librdkafka name, leading ``_`` for local ones) means 'not written'."""
    if error == "_PURGE_QUEUE":
        return not retries  # never sent -- unless it was sent once and queued again for a retry
    return error in DEFINITE_ERRORS


@dataclass
class ProducerStats:
    sent: int = 0  # handed to the client (an invoke each)
    acked: int = 0
    failed: Counter[str] = field(default_factory=Counter)  # definite, by error
    indeterminate: Counter[str] = field(default_factory=Counter)  # by error
    skipped: int = 0  # scheduled sends dropped because the producer fell too far behind
    in_flight: int = 0
    elapsed_s: float = 0.0

    @property
    def completed(self) -> int:
        return self.acked + sum(self.failed.values()) + sum(self.indeterminate.values())

    @property
    def rate(self) -> float:
        """Sends per second since start."""
        return self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass
class _Pending:
    ident: int
    value: str
    partition: int


class SendSchedule:
    """When the next send is due: send ``n`` at ``base + n / rate``, so loop overhead never drifts.

    Pure (the clock is passed in), so its pacing is tested without a broker or a wall clock. A loop
    that fell more than ``max_lag_s`` behind (in-flight bound, a starved thread) skips the missed
    slots instead of sending them in a burst; a loop less far behind catches up at once.
    """

    def __init__(self, rate: float, max_lag_s: float, base: float) -> None:
        self.interval = 1.0 / rate
        self.max_lag_s = max_lag_s
        self.base = base
        self.slots = 0  # slots used: sent or skipped

    def wait_s(self, now: float) -> float:
        """Seconds until the next send is due (<= 0: due now)."""
        return self.base + self.slots * self.interval - now

    def take(self, now: float) -> int:
        """Use the slot of the send about to go out; returns how many missed slots it skips first."""
        due = self.base + self.slots * self.interval
        behind = int((now - due) / self.interval)
        skipped = behind if now - due > self.max_lag_s and behind > 0 else 0
        self.slots += skipped + 1
        return skipped


class BackgroundProducer:
    """Writes ``rate`` unique records/s to ``topic``/``partition`` on a thread, recording each send;
    with ``partitions`` N > 1, the k-th send goes to partition k mod N (a topic's every partition
    under load, as a scenario's own produce steps spread them).

    ``bootstrap_servers``: every broker (``cluster.bootstrap_servers``), so any live one answers.
    ``max_in_flight``: sends without a completion yet; at the bound the schedule waits (and sends
    more than ``max_lag_s`` behind schedule are skipped, counted in ``stats().skipped``, rather
    than sent in a burst). ``retries``: default 0 without idempotence (a definite answer per send),
    librdkafka's default with it (it requires retries).
    """

    def __init__(self, bootstrap_servers: str, topic: str, history: History | None, *, rate: float,
                 partition: int = 0, partitions: int = 1, acks: Acks = "all", idempotence: bool = False,
                 retries: int | None = None, max_in_flight: int = 1000,
                 request_timeout_s: float = 5.0, message_timeout_s: float = 10.0,
                 max_lag_s: float = 1.0, value_prefix: str = "bg",
                 config: dict[str, Any] | None = None) -> None:
        if rate <= 0:
            raise ValueError("rate must be > 0 records/s")
        if acks not in ("all", "1", "0"):
            raise ValueError(f"acks must be 'all', '1' or '0', not {acks!r}")
        if idempotence and acks != "all":
            raise ValueError("idempotence needs acks='all' (librdkafka refuses anything else)")
        if idempotence and retries == 0:
            raise ValueError("idempotence needs retries >= 1 (librdkafka refuses 0)")
        self.topic = topic
        if partitions < 1:
            raise ValueError("partitions must be >= 1")
        self.partition = partition
        self.partitions = partitions
        self.acks: Acks = acks
        self.rate = float(rate)
        self.idempotence = idempotence
        self.retries = retries if retries is not None else (0 if not idempotence else None)
        self.max_in_flight = max_in_flight
        self.max_lag_s = max_lag_s
        self.message_timeout_s = message_timeout_s
        self.history = history
        self._prefix = f"{value_prefix}-{secrets.token_hex(2)}-"  # unique across producers of a run
        self._config: dict[str, Any] = {
            "bootstrap.servers": bootstrap_servers,
            "acks": acks,
            "enable.idempotence": idempotence,
            "linger.ms": 0,  # send when due: the invoke time is the send time
            "request.timeout.ms": int(request_timeout_s * 1000),
            "message.timeout.ms": int(message_timeout_s * 1000),
            # Follow leader changes quickly: refresh metadata every second, fast while unknown.
            "topic.metadata.refresh.interval.ms": 1000,
            "topic.metadata.refresh.fast.interval.ms": 100,
            "metadata.max.age.ms": 3000,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 1000,
            "socket.connection.setup.timeout.ms": 5000,
            **({"retries": self.retries} if self.retries is not None else {}),
            **(config or {}),
        }
        self._lock = threading.Lock()  # guards _stats and _pending (stats() reads from other threads)
        self._stats = ProducerStats()
        self._pending: dict[int, _Pending] = {}
        self._fatal: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_at = 0.0
        self._stopped_at: float | None = None
        self._next_local_id = 0
        self._error: BaseException | None = None
        self._drain_timeout_s = 0.0

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> BackgroundProducer:
        if self._thread is not None:
            raise RuntimeError("already started")
        producer = self._new_producer()  # raise config errors here, not on the thread
        self._started_at = time.monotonic()
        self._thread = threading.Thread(target=self._run, args=(producer,), name=f"elr-producer-{self.topic}",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 15.0) -> ProducerStats:
        """Stop sending; wait up to ``timeout`` s for outstanding deliveries, then record the rest
        indeterminate (purged in flight) or failed (purged unsent, without retries)."""
        if self._thread is None:
            return self.stats()
        self._drain_timeout_s = timeout
        self._stop.set()
        self._thread.join(timeout + 10)  # the thread bounds itself; this is a backstop
        if self._thread.is_alive():
            raise RuntimeError("producer thread did not stop")
        if self._error is not None:
            raise RuntimeError(f"producer thread failed: {self._error!r}") from self._error
        return self.stats()

    def __enter__(self) -> BackgroundProducer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stats(self) -> ProducerStats:
        with self._lock:
            s = self._stats
            end = self._stopped_at if self._stopped_at is not None else time.monotonic()
            return ProducerStats(sent=s.sent, acked=s.acked, failed=Counter(s.failed),
                                 indeterminate=Counter(s.indeterminate), skipped=s.skipped,
                                 in_flight=len(self._pending),
                                 elapsed_s=end - self._started_at if self._started_at else 0.0)

    # --- the thread -------------------------------------------------------------------------

    def _new_producer(self) -> Producer:
        return Producer({**self._config, "error_cb": self._on_error})

    def _on_error(self, err: KafkaError) -> None:
        # Transient errors (_TRANSPORT, _ALL_BROKERS_DOWN) are the client's business; fatal ones
        # (idempotence) make it useless, so the loop replaces it.
        if err.fatal():
            self._fatal = err.name()

    def _run(self, producer: Producer) -> None:
        try:
            producer = self._send_loop(producer)
        except BaseException as exc:  # surfaced by stop()
            self._error = exc
        finally:
            self._finish(producer)

    def _send_loop(self, producer: Producer) -> Producer:
        schedule = SendSchedule(self.rate, self.max_lag_s, time.monotonic())
        while not self._stop.is_set():
            if self._fatal is not None:
                self._finish(producer, timeout=0.0)
                self._fatal = None
                producer = self._new_producer()
            wait = schedule.wait_s(time.monotonic())
            if wait > 0:
                producer.poll(min(wait, 0.05))  # serve callbacks while waiting
                continue
            if len(self._pending) >= self.max_in_flight:
                producer.poll(0.01)
                continue
            skipped = schedule.take(time.monotonic())
            if skipped:
                with self._lock:
                    self._stats.skipped += skipped
            self._send(producer)
            producer.poll(0)
        return producer

    def _send(self, producer: Producer) -> None:
        ident = self._new_id()
        value = f"{self._prefix}{ident}"
        partition = self.partition if self.partitions == 1 else self._stats.sent % self.partitions
        self._record("invoke", ident, value, None, None, partition)  # before it can complete
        with self._lock:
            self._stats.sent += 1
            self._pending[ident] = _Pending(ident, value, partition)
        try:
            producer.produce(self.topic, value=value.encode(), partition=partition,
                             on_delivery=lambda err, msg: self._delivered(ident, err, msg))
        except BufferError:  # local queue full: never enqueued
            self._complete(ident, None, None, "_QUEUE_FULL")
        except KafkaException as exc:
            self._complete(ident, None, None, exc.args[0].name() if exc.args else "_FAIL")

    def _new_id(self) -> int:
        if self.history is not None:
            return self.history.new_id()
        self._next_local_id += 1
        return self._next_local_id

    def _delivered(self, ident: int, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            offset = msg.offset()
            # acks=0: no answer, librdkafka reports an invalid offset (< 0).
            self._complete(ident, msg.partition(), offset if offset is not None and offset >= 0 else None, None)
        else:
            self._complete(ident, None, None, err.name())

    def _complete(self, ident: int, partition: int | None, offset: int | None, error: str | None) -> None:
        with self._lock:
            pending = self._pending.pop(ident, None)
            if pending is None:
                return  # already completed (one completion per id)
            if error is None:
                self._stats.acked += 1
                op = "ok"
            elif is_definite(error, retries=self.retries != 0):
                self._stats.failed[error.lstrip("_")] += 1
                op = "fail"
            else:
                self._stats.indeterminate[error.lstrip("_")] += 1
                op = "info"
        self._record(op, ident, pending.value, offset, error.lstrip("_") if error else None,
                     partition if partition is not None else pending.partition)

    def _finish(self, producer: Producer, timeout: float | None = None) -> None:
        """Wait for outstanding deliveries, purge the rest, and complete anything left as info."""
        deadline = time.monotonic() + (self._drain_timeout_s if timeout is None else timeout)
        while self._pending and time.monotonic() < deadline:
            producer.poll(min(0.1, max(0.0, deadline - time.monotonic())))
        if self._pending:
            producer.purge(in_queue=True, in_flight=True)
            # Serve the purge callbacks (_PURGE_QUEUE / _PURGE_INFLIGHT); poll returns after the first.
            until = time.monotonic() + 2.0
            while self._pending and time.monotonic() < until:
                producer.poll(0.05)
        for ident in list(self._pending):
            self._complete(ident, None, None, "_STOPPED")  # no callback came: indeterminate
        with self._lock:
            if timeout is None:
                self._stopped_at = time.monotonic()

    def _record(self, op: str, ident: int, value: str, offset: int | None, error: str | None,
                partition: int | None = None) -> None:
        if self.history is not None:
            self.history.record("produce", op=op, id=ident, value=value, acks=self.acks,
                                partition=self.partition if partition is None else partition,
                                offset=offset, error=error, writer="background")
