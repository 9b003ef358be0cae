"""The ``kafka`` backend: scenarios run against a real KRaft cluster in containers.

Profiles: ``kafka`` formats the cluster with ELR on (``eligible.leader.replicas.version=1``),
``legacy`` with it off; the full-KIP profile cannot run here (Kafka ships no unclean recovery).

Every cluster gets one extra broker, the *observer*: it holds no replica and no fault touches
it, so the partition's state can be read from a broker with fresh metadata even when every
scenario broker is down or cut from the controller (a cut-off broker answers from a stale cache).

Clusters are pooled per shape (broker ids, controllers, ELR): starting one costs ~20 s, so the
next scenario of the same shape gets the same cluster, healed, with a topic of its own. The pool
is emptied when the pytest session ends or the process exits.
"""

from __future__ import annotations

import atexit
import os
import secrets
import time
from typing import Any, ClassVar

from confluent_kafka import KafkaError, Producer

from pytest_elr.actions import (
    Action,
    Crash,
    Cut,
    Flush,
    Heal,
    Pause,
    PowerOff,
    Produce,
    ReplaceDisk,
    Restart,
    Resume,
    SetMinIsr,
    Shutdown,
    Slow,
    Wait,
)
from pytest_elr.core.errors import BackendError
from pytest_elr.core.history import History
from pytest_elr.core.nodes import CONTROLLER, Node
from pytest_elr.core.observation import ConsumedRecord, LossEvidence, Observation, ProduceOutcome
from pytest_elr.core.specs import ClusterSpec, TopicSpec, WorkloadSpec
from pytest_elr.workload.drain import drain, max_acked_offset
from pytest_elr.workload.producer import BackgroundProducer, is_definite

KAFKA_VERSION_ENV = "PYTEST_ELR_KAFKA_VERSION"
IMAGE_ENV = "PYTEST_ELR_KAFKA_IMAGE"  # use this node image instead of the one built here
PRODUCE_TIMEOUT_S = 15.0
OBSERVER_ID = 900  # below the controllers' ids (1000+) and above any scenario broker (0-99)
DRAIN_TIMEOUT_S = 30.0

# How the controller logs the AlterPartition requests it refuses (Kafka exposes no counter):
# KIP-903's broker-epoch check, and the partition-epoch check that runs before it.
_REJECTIONS = {
    "INELIGIBLE_REPLICA": "because it specified ineligible replicas",
    "INVALID_UPDATE_VERSION": "because the current partition epoch is",
}
_POOL: dict[tuple[Any, ...], Any] = {}  # in order of last use
# Idle clusters still cost CPU (every KRaft node ticks), and 2 cores run everything: keep the
# clusters of the two most recent shapes (a scenario's profiles alternate ELR on and off).
POOL_SIZE = int(os.environ.get("PYTEST_ELR_POOL_SIZE", "2"))
_IN_USE: set[int] = set()  # ids of pooled clusters a backend is using right now


def close_pool() -> None:
    while _POOL:
        _, cluster = _POOL.popitem()
        cluster.close()


atexit.register(close_pool)


def _sut() -> Any:
    # Imported lazily: the model backend and the language must work without Docker installed.
    from pytest_elr import sut

    return sut


class KafkaBackend:
    name: ClassVar[str] = "kafka"
    profiles: ClassVar[frozenset[str]] = frozenset({"kafka", "legacy"})
    settles_instantly: ClassVar[bool] = False

    def __init__(self, kafka_version: str | None = None) -> None:
        sut = _sut()
        from pytest_elr.sut.images import DEFAULT_KAFKA_VERSION

        self.kafka_version = kafka_version or os.environ.get(KAFKA_VERSION_ENV, DEFAULT_KAFKA_VERSION)
        self._sut = sut
        self.cluster: Any = None
        self.topic = ""
        self.history: History | None = None
        self._errors_seen: dict[str, int] = {}
        from pytest_elr.sut.config import TUNING

        # The tuned value, unless a scenario sets cluster.session_timeout_ms.
        self.default_session_timeout_ms = int(TUNING["broker.session.timeout.ms"])
        self.session_timeout_ms = self.default_session_timeout_ms
        self._controllers: list[int] = []
        self._powered_off: set[int] = set()
        self._workload: BackgroundProducer | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def start(self, cluster: ClusterSpec, topic: TopicSpec, profile: str, history: History) -> None:
        if profile not in self.profiles:
            raise BackendError(f"the kafka backend cannot run profile {profile!r}")
        self.history = history
        self.session_timeout_ms = cluster.session_timeout_ms or self.default_session_timeout_ms
        key = (cluster.brokers, cluster.controllers, profile == "kafka", self.kafka_version,
               self.session_timeout_ms)
        self.cluster = _POOL.pop(key, None)
        if self.cluster is None:
            idle = [k for k, c in _POOL.items() if id(c) not in _IN_USE]  # least recently used first
            for old in idle[:max(0, len(_POOL) + 1 - max(1, POOL_SIZE))]:
                _POOL.pop(old).close()
            extra = {"broker.session.timeout.ms": str(self.session_timeout_ms)}
            try:
                self.cluster = self._sut.KafkaCluster(
                    brokers=[*cluster.brokers, OBSERVER_ID], controllers=cluster.controllers,
                    elr=profile == "kafka", kafka_version=self.kafka_version,
                    image=os.environ.get(IMAGE_ENV) or None, extra_config=extra,
                ).start()
            except self._sut.SutError as exc:
                raise BackendError(str(exc)) from None
        _POOL[key] = self.cluster
        _IN_USE.add(id(self.cluster))
        self._controllers = self.cluster.controller_ids
        self.topic = f"{topic.name}-{secrets.token_hex(3)}"
        self._errors_seen = self._rejection_count()
        self.cluster.create_topic(self.topic, {0: list(topic.replicas)},
                                  min_insync_replicas=topic.min_insync_replicas)
        # The observer answers every later read: wait until its metadata has the topic too.
        self.cluster.await_partition(self.topic, lambda p: set(p.isr) == set(topic.replicas),
                                     via=OBSERVER_ID, timeout_s=30)

    def close(self) -> None:
        self.stop_workload()
        if self.cluster is not None:
            _IN_USE.discard(id(self.cluster))
            try:  # back to health for the next scenario of the same shape
                self.cluster.heal_everything()
            except Exception:
                self._evict()
                raise
            self.cluster = None

    def _evict(self) -> None:
        for key, cluster in list(_POOL.items()):
            if cluster is self.cluster:
                del _POOL[key]
                cluster.close()

    # --- actions -----------------------------------------------------------------------------

    def apply(self, action: Action) -> ProduceOutcome | list[LossEvidence] | None:
        c = self.cluster
        if isinstance(action, Cut):
            for src, dst in action.links:
                c.net.cut(_ref(src), _ref(dst))
        elif isinstance(action, Slow):
            for src, dst in action.links:
                if dst == CONTROLLER:  # the model's meaning: requests held, heartbeats flow
                    c.net.hold(_ref(src), "controller")
                else:
                    c.net.slow(_ref(src), _ref(dst), action.latency_ms)
        elif isinstance(action, Heal):
            if action.links is None:
                c.heal_all()
            else:
                for src, dst in action.links:
                    c.net.heal(_ref(src), _ref(dst), both_ways=False)
        elif isinstance(action, Shutdown):
            c.shutdown(action.broker)
        elif isinstance(action, Crash):
            c.crash(action.broker)
        elif isinstance(action, PowerOff):
            return [self._power_off(b) for b in action.brokers]
        elif isinstance(action, Restart):
            return self._restart(action.broker)
        elif isinstance(action, ReplaceDisk):
            before = self._leo(action.broker)
            c.replace_disk(action.broker)
            self._await_registered(action.broker)
            return [LossEvidence(action.broker, before, 0)]
        elif isinstance(action, Pause):
            c.pause(action.broker)
        elif isinstance(action, Resume):
            c.resume(action.broker)
        elif isinstance(action, Flush):
            c.node(action.broker).ctl("fs-sync")  # the disk layer makes everything durable
        elif isinstance(action, SetMinIsr):
            c.set_min_insync_replicas(self.topic, action.value)
        elif isinstance(action, Wait):
            time.sleep(action.seconds)  # the scenario asked for time to pass
        elif isinstance(action, Produce):
            return self._produce(action.count, action.acks)
        else:  # pragma: no cover
            raise BackendError(f"the kafka backend does not know action {action.kind!r}")
        return None

    def settle_timeout_s(self) -> float:
        """Fencing by session timeout is the slowest thing a step may wait for."""
        return 30.0 + 2 * self.session_timeout_ms / 1000

    def _power_off(self, broker: int) -> LossEvidence:
        record = self.cluster.power_off(broker, topics=[self.topic])
        self._powered_off.add(broker)
        prefix = f"{self.topic}-0/"
        dropped = sum(n for path, n in record.unsynced_files.items() if path.lstrip("/").startswith(prefix))
        return LossEvidence(broker, record.leo_before.get((self.topic, 0)), None, bytes_lost=dropped)

    def _restart(self, broker: int) -> list[LossEvidence] | None:
        if broker not in self._powered_off:
            self.cluster.start_node(broker)
            self._await_registered(broker)
            return None
        self._powered_off.discard(broker)
        record = self.cluster.power_on(broker)
        if record is None:
            return None
        tp = (self.topic, 0)
        # Read as soon as the broker answers; a follower that reaches its leader may already have
        # re-fetched part of what it lost, so this is a lower bound of the loss.
        return [LossEvidence(broker, record.leo_before.get(tp), record.leo_after.get(tp))]

    def _await_registered(self, broker: int) -> None:
        """The model registers a restarted broker at once; Kafka only after its old session (which
        a killed JVM leaves behind) expires. Later steps rely on the new registration."""
        try:
            self.cluster.wait_serving(broker, timeout_s=30 + 2 * self.session_timeout_ms / 1000)
        except self._sut.SutError as exc:
            raise BackendError(str(exc)) from None

    def _leo(self, broker: int) -> int | None:
        try:
            return self.cluster.offsets(self.topic, via=OBSERVER_ID).leo.get(broker)
        except self._sut.KafkaProtocolError:
            return None

    # --- workload ----------------------------------------------------------------------------

    def _producer(self, acks: str) -> Producer:
        """A new producer per send: it learns leadership from the observer broker, whose metadata
        is fresh. A long-lived client keeps sending to a fenced leader that still believes it
        leads (a zombie) until its metadata refresh -- real, but not what a step means to test."""
        return Producer({
            "bootstrap.servers": self._bootstrap(),
            "acks": {"all": "all", "1": "1", "0": "0"}[acks],
            "enable.idempotence": False,
            # A definite answer per send: no retries hide NOT_ENOUGH_REPLICAS behind a timeout.
            "retries": 0,
            "message.timeout.ms": int(PRODUCE_TIMEOUT_S * 1000),
            "linger.ms": 0,
        })

    def _bootstrap(self) -> str:
        # Only the observer: librdkafka asks a *random* bootstrap broker for metadata, and a broker
        # cut from the controller answers with stale leadership (it still names itself leader).
        return f"127.0.0.1:{self.cluster.client_port(OBSERVER_ID)}"

    def start_workload(self, spec: WorkloadSpec) -> None:
        """The scenario's background producer, for the whole run (stopped before the drain)."""
        self._workload = BackgroundProducer(self._bootstrap(), self.topic, self.history, rate=spec.rate_per_s,
                                            acks=spec.acks)  # type: ignore[arg-type]
        self._workload.start()

    def stop_workload(self) -> None:
        if self._workload is not None:
            self._workload.stop(timeout=15)
            self._workload = None

    def _produce(self, count: int, acks: str, tick: bool = False) -> ProduceOutcome:
        outcome = ProduceOutcome(acks=acks, sent=count)
        history = self.history
        producer = self._producer(acks)
        pending = count

        def record(op: str, ident: int, value: str, offset: int | None, error: str | None) -> None:
            if history is not None:
                history.record("produce", op=op, id=ident, value=value, acks=acks, partition=0,
                               offset=offset, error=error, **({"tick": True} if tick else {}))

        def delivered(ident: int, value: str) -> Any:
            def callback(err: KafkaError | None, msg: Any) -> None:
                nonlocal pending
                pending -= 1
                if err is None:
                    offset = msg.offset() if acks != "0" else None
                    if acks != "0":
                        outcome.acked += 1
                    record("ok", ident, value, offset if offset is not None and offset >= 0 else None, None)
                else:
                    # Definite only when the leader refused before appending (see workload.producer).
                    op = "fail" if is_definite(err.name()) else "info"
                    name = err.name().lstrip("_")
                    outcome.failed[name] = outcome.failed.get(name, 0) + 1
                    record(op, ident, value, None, name)
            return callback

        prefix = "tick" if tick else "v"
        for _ in range(count):
            ident = history.new_id() if history is not None else 0
            value = f"{prefix}{ident}-{secrets.token_hex(2)}"
            record("invoke", ident, value, None, None)
            producer.produce(self.topic, value=value.encode(), partition=0,
                             on_delivery=delivered(ident, value))
        deadline = time.monotonic() + PRODUCE_TIMEOUT_S + 5
        while pending > 0 and time.monotonic() < deadline:
            producer.poll(0.05)
        outcome.pending = pending
        return outcome

    def nudge(self) -> None:
        """One acks=1 record: Kafka shrinks the ISR only when a follower is *behind* the leader."""
        self._produce(1, "1", tick=True)

    # --- observation -------------------------------------------------------------------------

    def observe(self) -> Observation:
        c = self.cluster
        try:
            p = c.describe_partition(self.topic, via=OBSERVER_ID)
            fenced = c.fenced_brokers(via=OBSERVER_ID)
            offsets = c.offsets(self.topic, via=OBSERVER_ID)
        except self._sut.KafkaProtocolError as exc:
            raise BackendError(f"cannot observe the cluster: {exc}") from None
        return Observation(
            leader=p.leader, leader_epoch=p.leader_epoch, isr=tuple(sorted(p.isr)),
            elr=tuple(sorted(p.elr or ())), last_known_elr=tuple(sorted(p.last_known_elr or ())),
            fenced=tuple(sorted(fenced - {OBSERVER_ID})), hwm=offsets.hwm,
            leo={b: v for b, v in offsets.leo.items() if v is not None},
            held=tuple(sorted(s for s in {s for s, _ in c.net.holds} if c.net.held_requests(s) > 0)),
        )

    def unsynced_bytes(self) -> dict[int, int]:
        """Per broker, the bytes its disk layer holds that a power off would lose right now."""
        report = self.cluster.unsynced_report()
        return {b: n for b, n in report.items() if b != OBSERVER_ID}

    def protocol_errors(self) -> list[str]:
        counts = self._rejection_count()
        new = [code for code, n in counts.items() for _ in range(max(0, n - self._errors_seen.get(code, 0)))]
        self._errors_seen = counts
        return new

    def _rejection_count(self) -> dict[str, int]:
        """AlterPartition rejections of this scenario's partition the controllers have logged."""
        counts = dict.fromkeys(_REJECTIONS, 0)
        marker = f" for {self.topic}-0 "
        for controller in self._controllers:
            for line in self.cluster.logs(controller, lines=3000).splitlines():
                if "Rejecting AlterPartition" in line and marker in line:
                    for code, text in _REJECTIONS.items():
                        counts[code] += text in line
        return counts

    def drain(self) -> list[ConsumedRecord]:
        self.stop_workload()
        result = drain(self._bootstrap(), self.topic, None, timeout_s=DRAIN_TIMEOUT_S,
                       skip=lambda v: v.startswith("tick"),
                       min_offset=max_acked_offset(self.history) if self.history is not None else None)
        return [ConsumedRecord(r.offset, r.value) for r in result.records]


def _ref(node: Node) -> int | str:
    return "controller" if node == CONTROLLER else int(node)
