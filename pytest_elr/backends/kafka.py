"""The ``kafka`` backend: scenarios run against a real KRaft cluster in containers.

Profiles: ``kafka`` formats the cluster with ELR on (``eligible.leader.replicas.version=1``),
``legacy`` with it off; the full-KIP profile cannot run here (Kafka ships no unclean recovery).

Every cluster gets one extra broker, the *observer*: it holds no replica and no fault touches
it, so the partition's state can be read from a broker with fresh metadata even when every
scenario broker is down or cut from the controller (a cut-off broker answers from a stale cache).

Clusters are pooled per shape (:class:`~pytest_elr.backends.kafka_pool.ClusterPool`): starting one
costs ~20 s, so the next scenario of the same shape gets the same cluster, healed, with a topic of
its own. The plugin keeps one pool per pytest session (``new_session``); a backend made without
one has a pool of its own, closed with it.

Each action has one handler (``_do``, a ``functools.singledispatchmethod``), which drives the
faults (:mod:`pytest_elr.faults`) or the cluster's client (:mod:`pytest_elr.sut.client`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import lru_cache, singledispatchmethod
from typing import Any, ClassVar, cast

from confluent_kafka import ElectionType, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from pytest_elr.actions import (
    ACTIVE_CONTROLLER,
    ALL_CONTROLLERS,
    Action,
    BeginShutdown,
    CancelReassignment,
    ControllerAction,
    Crash,
    CrashController,
    Cut,
    ElectLeaders,
    Flush,
    ForgedAlterPartition,
    Heal,
    HoldDirAssignments,
    HoldHeartbeats,
    HoldMetadata,
    IsolateController,
    MoveLogDir,
    Pause,
    PowerOff,
    PowerOffController,
    Produce,
    Reassign,
    ReplaceDisk,
    Restart,
    RestartController,
    Resume,
    SetClusterMinIsr,
    SetMinIsr,
    Shutdown,
    ShutdownController,
    Slow,
    StopController,
    UncleanElection,
    Unregister,
    Wait,
)
from pytest_elr.backends.base import Backend, LagChurn, Session
from pytest_elr.backends.kafka_pool import ClusterPool
from pytest_elr.core.errors import BackendError
from pytest_elr.core.history import History
from pytest_elr.core.nodes import CONTROLLER, Node, controller_of, is_controller
from pytest_elr.core.observation import (
    ConsumedRecord,
    LossEvidence,
    Observation,
    ProduceOutcome,
    Read,
    Refusal,
    Result,
)
from pytest_elr.core.outcomes import classify
from pytest_elr.core.specs import ClusterSpec, TopicSpec, WorkloadSpec
from pytest_elr.faults import Faults
from pytest_elr.faults.evidence import PowerOffRecord
from pytest_elr.faults.network import ASSIGN_REPLICAS_TO_DIRS, BROKER_HEARTBEAT, FETCH
from pytest_elr.sut.admin import ERRORS, PartitionState
from pytest_elr.sut.client import ClusterClient
from pytest_elr.sut.config import TUNING
from pytest_elr.sut.errors import ClusterStartError, KafkaDistError, KafkaProtocolError, NodeCommandError, SutError
from pytest_elr.sut.isr_shrinks import DAY_MS, isr_shrinks
from pytest_elr.sut.kafka_dist import DIST_ENV, KafkaDist
from pytest_elr.sut.metadata_log import Registration
from pytest_elr.sut.polling import await_value
from pytest_elr.sut.refusals import UnracedRefusal, ineligible_refusals, registration_changes, unraced
from pytest_elr.workload.drain import DrainResult, drain_partitions, max_acked_offset
from pytest_elr.workload.producer import BackgroundProducer, is_definite

KAFKA_VERSION_ENV = "PYTEST_ELR_KAFKA_VERSION"
IMAGE_ENV = "PYTEST_ELR_KAFKA_IMAGE"  # use this node image instead of the one built here
START_TIMEOUT_ENV = "PYTEST_ELR_KAFKA_START_TIMEOUT"  # seconds a new cluster has to be ready (default 120)
#: how a run's failure says that its cluster never started (a mutant campaign counts these apart)
CLUSTER_DID_NOT_START = "the cluster did not start"
PRODUCE_TIMEOUT_S = 15.0
OBSERVER_ID = 900  # below the controllers' ids (1000+) and above any scenario broker (0-99)
GROUP_OFFSETS_TOPIC = "__consumer_offsets"
DRAIN_TIMEOUT_S = 30.0
# A broker cut from the controller takes 300.5 s to finish a clean shutdown (measured on 4.3.1:
# its controlled shutdown waits for the controller that long), so a clean shutdown gets longer.
CLEAN_SHUTDOWN_TIMEOUT_S = 330.0
READ_TIMEOUT_S = 10.0  # a read at a step's end, for the proof of presence
#: how long a new topic's replicas get for their directory assignments (several log dirs only)
DIRECTORY_ASSIGNMENT_WAIT_S = 15.0
OBSERVE_TRIES = 5  # reads of the partition until two agree around the fenced set

# How the controller logs the AlterPartition requests it refuses (Kafka exposes no counter):
# KIP-903's broker-epoch check, and the partition-epoch check that runs before it.
_REJECTIONS = {
    "INELIGIBLE_REPLICA": "because it specified ineligible replicas",
    "INVALID_UPDATE_VERSION": "because the current partition epoch is",
}


def count_rejections(lines: Iterable[str], topic: str) -> dict[str, int]:
    """The AlterPartition rejections among a controller's log ``lines`` of any partition of
    ``topic`` (the model counts every partition's), by error code. Kafka's line:
    "Rejecting AlterPartition request from node 1 for <topic>-<p> because ..."."""
    counts = dict.fromkeys(_REJECTIONS, 0)
    marker = re.compile(rf" for {re.escape(topic)}-\d+ ")
    for line in lines:
        if "Rejecting AlterPartition" in line and marker.search(line):
            for code, text in _REJECTIONS.items():
                counts[code] += text in line
    return counts


def dist_from_env() -> KafkaDist | None:
    """The distribution ``$PYTEST_ELR_KAFKA_DIST`` names (``elr explore --kafka-dist`` sets it), or None."""
    path = os.environ.get(DIST_ENV)
    if not path:
        return None
    try:
        stat = os.stat(path)
    except OSError:
        stat = None
    try:  # once per file version: hashing every jar of a dist costs a moment, and every run makes a backend
        return _open_dist(path, (stat.st_mtime_ns, stat.st_size) if stat else None)
    except KafkaDistError as exc:
        raise BackendError(f"${DIST_ENV}: {exc}") from None


@lru_cache(maxsize=8)
def _open_dist(path: str, _version: object) -> KafkaDist:
    from pytest_elr.sut.images import load_dist  # here: the images module imports Docker's client

    return load_dist(path)


class KafkaBackend(Backend):
    name: ClassVar[str] = "kafka"
    profiles: ClassVar[frozenset[str]] = frozenset({"kafka", "legacy"})
    many_partitions: ClassVar[bool] = True
    settles_instantly: ClassVar[bool] = False

    @classmethod
    def default_version(cls) -> str:
        from pytest_elr.sut.images import DEFAULT_KAFKA_VERSION  # here: the images module imports Docker's client

        dist = dist_from_env()
        if dist is not None:
            return dist.release
        return os.environ.get(KAFKA_VERSION_ENV) or DEFAULT_KAFKA_VERSION

    def __init__(self, session: Session | None = None, version: str | None = None,
                 dist: KafkaDist | None = None) -> None:
        """``session``: the pytest session's :class:`ClusterPool` (None: a pool of this backend's own,
        closed by ``close``); ``version``: the Kafka release (default ``$PYTEST_ELR_KAFKA_VERSION``,
        else the one the images are built for); ``dist``: a Kafka distribution of one's own to run
        instead (default ``$PYTEST_ELR_KAFKA_DIST``), whose release it is then."""
        super().__init__(session, version)
        self.dist = dist or dist_from_env()
        if self.dist is not None and version not in (None, self.dist.release):
            raise BackendError(f"Kafka {version} was asked for, but the distribution {self.dist.source} "
                               f"is Kafka {self.dist.version}: give one of them")
        self.kafka_version = self.dist.release if self.dist is not None else version or self.default_version()
        self._own_pool = session is None
        self.pool = cast(ClusterPool[Any], session) if session is not None else ClusterPool()
        self.cluster: Any = None  # a started pytest_elr.sut.cluster.KafkaCluster, from the pool
        self.client: ClusterClient  # set by start, with the cluster
        self.faults: Faults
        self.topic = ""
        self.history: History | None = None
        self._errors_seen: dict[str, int] = {}
        # The tuned value, unless a scenario sets cluster.session_timeout_ms.
        self.default_session_timeout_ms = int(TUNING["broker.session.timeout.ms"])
        self.session_timeout_ms = self.default_session_timeout_ms
        self._controllers: list[int] = []
        #: controllers (their node ids) this run crashed and has not restarted
        self._controllers_down: set[int] = set()
        self._powered_off: set[int] = set()
        #: a run set the cluster-wide min ISR: set back at close to the value the cluster started
        #: with, for the next run on the pooled cluster
        self._cluster_min_isr_set = False
        self._workload: BackgroundProducer | None = None
        # per partition, the controller's record last read from its metadata log (LeaderRecoveryState,
        # the partition epoch), and the partition state it was read for
        self._registration_read: dict[int, tuple[tuple[object, ...], Registration | None]] = {}
        self._miss_recorded: dict[int, tuple[tuple[object, ...], str]] = {}
        #: the topic's partitions, and the records sent so far (record k goes to partition k mod N,
        #: as the model sends them)
        self._partitions = 1
        self._sent = 0
        #: per controller (node id), its election meters at this run's first read; None: not read
        self._meter_bases: dict[int, dict[str, int]] | None = None
        #: controllers this run crashed, restarted or not: their meters started again from zero
        self._controllers_crashed: set[int] = set()
        self._started_at = time.monotonic()
        #: per node, what the mutation agent reported at the run's end (``sut.instrument``)
        self.planted_mutants: dict[str, str] = {}

    @classmethod
    def new_session(cls) -> ClusterPool[Any]:
        """The pool of clusters the runs of one pytest session share."""
        return ClusterPool()

    @classmethod
    def handled_actions(cls) -> set[type]:
        return {t for t in cls.__dict__["_do"].dispatcher.registry if t is not object}

    # --- lifecycle -------------------------------------------------------------------------

    def start(self, cluster: ClusterSpec, topic: TopicSpec, profile: str, history: History) -> None:
        if profile not in self.profiles:
            raise BackendError(f"the kafka backend cannot run profile {profile!r}")
        self.history = history
        self.session_timeout_ms = cluster.session_timeout_ms or self.default_session_timeout_ms
        instrumentation = self._instrumentation()
        # Two distributions never share a cluster, even of one release: the dist's hash is in the shape.
        shape = (cluster.brokers, cluster.controllers, cluster.log_dirs, profile == "kafka", self.kafka_version,
                 self.dist.libs_hash if self.dist is not None else None,
                 self.session_timeout_ms, instrumentation.key if instrumentation else None)
        self.cluster = self.pool.acquire(
            shape, lambda: self._new_cluster(cluster, elr=profile == "kafka", instrumentation=instrumentation))
        # Coverage (when on) is collected per run: this run's lines go to its own directory.
        self.cluster.coverage_run = str(history.meta["run_id"])
        self._started_at = time.monotonic()
        self.client = ClusterClient(self.cluster)
        self.faults = Faults(self.cluster)
        self._controllers = self.cluster.controller_ids
        self._controllers_down = set()
        self._controllers_crashed = set()
        self._meter_bases = None
        self.topic = f"{topic.name}-{secrets.token_hex(3)}"
        self._errors_seen = self._rejection_count()
        self._partitions, self._sent = topic.partitions, 0
        self.client.create_topic(self.topic, {i: list(r) for i, r in enumerate(topic.assignment)},
                                 min_insync_replicas=topic.min_insync_replicas)
        # The observer answers every later read: wait until its metadata has the topic too.
        states = [self.client.await_partition(self.topic, lambda p, r=replicas: set(p.isr) == set(r),
                                              partition=i, via=OBSERVER_ID, timeout_s=30)
                  for i, replicas in enumerate(topic.assignment)]
        # And the controllers' record of each partition: the partition epoch the run starts from (without
        # it the first step's "did the epoch move" has nothing to compare with; a read once found none).
        # Each controller's log is read once a round for every partition.
        def unrecorded() -> list[int]:
            refreshed = self.client.refresh_metadata_logs()
            return [st.partition for st in states if self.client.registration(st, refreshed) is None]

        try:
            await_value(unrecorded, lambda missing: not missing, timeout_s=30,
                        what=f"the controllers' metadata log record of every partition of {self.topic} (missing)")
        except TimeoutError as exc:
            raise BackendError(f"{exc} ({self.client.registration_miss})") from None
        if cluster.log_dirs > 1:
            self._await_directory_assignments(states, topic)

    def _await_directory_assignments(self, states: list[PartitionState], topic: TopicSpec) -> None:
        """With several log dirs the controller leaves a new replica's directory unassigned and each
        broker assigns its own (AssignReplicasToDirs, KIP-858): one partition change a broker, so a
        partition of N replicas is at partition epoch N once all landed. The last one landing after
        the run's start moved every epoch before any fault (a CI rehearsal, 2026-11-27:
        jbod_move_one_partition_of_three, epochs 2 -> 3 at the first move). Waited for up to
        ``DIRECTORY_ASSIGNMENT_WAIT_S``; a release that assigns otherwise is let go then, as before."""
        def unassigned() -> list[int]:
            refreshed = self.client.refresh_metadata_logs()
            return [st.partition for st, replicas in zip(states, topic.assignment, strict=True)
                    if (reg := self.client.registration(st, refreshed)) is None
                    or reg.partition_epoch < len(replicas)]

        with contextlib.suppress(TimeoutError):
            await_value(unassigned, lambda missing: not missing, timeout_s=DIRECTORY_ASSIGNMENT_WAIT_S,
                        what=f"every replica's directory assignment of {self.topic}")

    @staticmethod
    def _instrumentation() -> Any:
        """The Java agents the environment asks for (coverage, a planted mutant: sut.instrument)."""
        from pytest_elr.sut.instrument import Instrumentation

        try:
            return Instrumentation.from_env()
        except ValueError as exc:
            raise BackendError(str(exc)) from None

    def _new_cluster(self, cluster: ClusterSpec, elr: bool, instrumentation: Any = None) -> Any:
        from pytest_elr.sut.cluster import KafkaCluster  # here: it imports Docker's and testcontainers' packages

        extra = {"broker.session.timeout.ms": str(self.session_timeout_ms)}
        try:
            image = os.environ.get(IMAGE_ENV) or None
            if self.dist is not None:
                from pytest_elr.sut.images import resolve_dist_image  # here: it imports Docker's client

                image = resolve_dist_image(self.dist)  # built on first use (minutes), then reused
            started = KafkaCluster(
                brokers=[*cluster.brokers, OBSERVER_ID], controllers=cluster.controllers, elr=elr,
                kafka_version=self.kafka_version, image=image, extra_config=extra, log_dirs=cluster.log_dirs,
                instrumentation=instrumentation, start_timeout_s=float(os.environ.get(START_TIMEOUT_ENV) or 120),
            ).start()
            try:
                self._pin_group_offsets(started)
            except SutError:
                started.close()
                raise
            return started
        except ClusterStartError as exc:
            raise BackendError(f"{CLUSTER_DID_NOT_START}: {exc}") from None
        except SutError as exc:
            raise BackendError(str(exc)) from None

    @staticmethod
    def _pin_group_offsets(cluster: Any) -> None:
        """Create ``__consumer_offsets`` on the observer alone. The drain's consumer group needs it;
        auto-created, its partitions land on the scenario's brokers, elect on their faults and count
        in the controller's election meters (measured on 4.4.0: the walkthrough's T6 counted
        ``__consumer_offsets-2``'s election of its last known leader as unclean). The observer is
        never faulted; Kafka's group coordinator uses a topic of that name that already exists."""
        partitions = int(TUNING["offsets.topic.num.partitions"])
        ClusterClient(cluster).create_topic(GROUP_OFFSETS_TOPIC, {p: [OBSERVER_ID] for p in range(partitions)},
                                            configs={"cleanup.policy": "compact"})

    def close(self) -> None:
        try:
            self.stop_workload()
            if self.cluster is not None:
                cluster, self.cluster = self.cluster, None
                # Read first: a cluster that cannot heal is evicted, and its nodes with it.
                self.planted_mutants = cluster.planted_mutants()
                try:  # back to health for the next scenario of the same shape
                    self.faults.heal_everything()
                    self._collect_instrumentation(cluster)
                    if self._cluster_min_isr_set:  # Kafka refuses to remove it while ELR is on
                        self.client.set_cluster_min_insync_replicas(cluster.topology.min_insync_replicas)
                        self._cluster_min_isr_set = False
                except Exception:
                    self.pool.evict(cluster)
                    raise
                self.pool.release(cluster)
        finally:
            if self._own_pool:
                self.pool.close()

    def _collect_instrumentation(self, cluster: Any) -> None:
        """At a run's end: its coverage (every JVM's, then reset for the next run on this cluster)
        and what the mutation agent planted, beside it in ``run.json`` for ``elr kafka-coverage``."""
        instrumentation = cluster.instrumentation
        if instrumentation is None or instrumentation.coverage_dir is None or self.history is None:
            return
        dumped = cluster.dump_coverage()
        meta = self.history.meta
        run = {"run_id": meta["run_id"], "scenario": meta.get("scenario"), "scenario_file": meta.get("scenario_file"),
               "profile": meta.get("profile"), "kafka_version": self.kafka_version, "jvms_dumped": dumped,
               "seconds": round(time.monotonic() - self._started_at, 1), "mutant": instrumentation.mutant,
               "planted": self.planted_mutants}
        (instrumentation.coverage_dir / cluster.coverage_run / "run.json").write_text(json.dumps(run, indent=1))

    # --- actions: one handler per action class -----------------------------------------------

    def apply(self, action: Action) -> Result:
        # A state seen before may come back with a higher partition epoch (an ISR that shrank and
        # grew again): after an action, the record is read again.
        self._registration_read = {}
        try:
            return self._do(action)
        except SutError as exc:  # the harness could not do it: an error of the run, never a finding
            raise BackendError(f"{action.kind}: {exc}") from None

    @singledispatchmethod
    def _do(self, action: Action) -> Result:
        raise BackendError(f"the kafka backend does not know action {action.kind!r}")

    @_do.register
    def _(self, action: Cut) -> Result:
        ends = self._link_ends(action.links)
        for src, dst in action.links:
            self.faults.network.cut(ends[src], ends[dst])
        return None

    def _link_ends(self, links: tuple[tuple[Node, Node], ...]) -> dict[Node, int | str]:
        """Each link end as the network layer names it: a broker's id, ``controller`` (every
        controller), or one controller's node id (``{controller: active}``: asked once, now)."""
        ends: dict[Node, int | str] = {}
        for node in {n for link in links for n in link}:
            target = controller_of(node)
            if target is None:
                ends[node] = _ref(node)
            elif target == ACTIVE_CONTROLLER:
                active = self.client.active_controller(via=OBSERVER_ID)
                if active is None:
                    raise BackendError("no controller is active (DescribeQuorum names no quorum leader)")
                ends[node] = active
            else:
                ends[node] = self._controllers[int(target)]
        return ends

    @_do.register
    def _(self, action: Slow) -> Result:
        ends = self._link_ends(action.links)
        for src, dst in action.links:
            if is_controller(src) and is_controller(dst):  # between voters: delayed (docs/model.md)
                self.faults.network.slow(ends[src], ends[dst], action.latency_ms)
            elif is_controller(dst):  # the model's meaning: requests held, heartbeats flow
                self.faults.network.hold(_ref(src), ends[dst])
            else:
                self.faults.network.slow(_ref(src), _ref(dst), action.latency_ms)
        return None

    @_do.register
    def _(self, action: Heal) -> Result:
        if action.links is None:
            self.faults.network.heal_all()
        else:
            ends = self._link_ends(action.links)
            for src, dst in action.links:
                self.faults.network.heal(ends[src], ends[dst], both_ways=False)
        return None

    @_do.register
    def _(self, action: HoldHeartbeats) -> Result:
        self.faults.network.hold(action.broker, "controller", api_key=BROKER_HEARTBEAT)
        return None

    @_do.register
    def _(self, action: HoldMetadata) -> Result:
        network = self.faults.network
        network.hold(action.broker, "controller", api_key=FETCH)
        if action.broker in self.faults.process.down:
            return None
        # The Fetch in flight when the toxic goes on is not held: a long poll the controller answers
        # with whatever it writes within the fetch's wait, so a controlled shutdown begun right after
        # could still reach the broker, and its next heartbeat let the shutdown finish (Kafka 4.4.0,
        # held_metadata_shutting_down_not_elected: begin_shutdown 0.3 s after the hold, broker 0 was
        # fenced before the heal; with this wait, 0.7 s in all, it passed). Its metadata offset is
        # frozen once its next Fetch is held.
        try:
            await_value(lambda: network.held_requests(action.broker, FETCH), lambda n: n > 0, timeout_s=30,
                        interval_s=0.1, what=f"broker {action.broker}'s first held metadata Fetch")
        except TimeoutError as exc:
            raise BackendError(str(exc)) from None
        return None

    @_do.register
    def _(self, action: HoldDirAssignments) -> Result:
        self.faults.network.hold(action.broker, "controller", api_key=ASSIGN_REPLICAS_TO_DIRS)
        return None

    @_do.register
    def _(self, action: Shutdown) -> Result:
        self.faults.process.shutdown(action.broker, timeout_s=CLEAN_SHUTDOWN_TIMEOUT_S)
        return None

    @_do.register
    def _(self, action: BeginShutdown) -> Result:
        # SIGTERM only: the settle that follows reads the partition while the controlled shutdown
        # runs (Kafka moves the leadership at the shutdown's first heartbeat; the broker's own wait
        # for the controller is up to 5 min, KafkaBroker.shutdown()).
        self.faults.process.begin_shutdown(action.broker)
        return None

    @_do.register
    def _(self, action: Crash) -> Result:
        self.faults.process.crash(action.broker)
        return None

    @_do.register
    def _(self, action: PowerOff) -> Result:
        return [loss for b in action.brokers for loss in self._power_off(b)]

    @_do.register
    def _(self, action: Restart) -> Result:
        return self._restart(action.broker)

    @_do.register
    def _(self, action: ReplaceDisk) -> Result:
        """The new disk's log end is measured, not assumed: read from the disk before the JVM
        starts, and from the broker once it serves (it may have fetched by then)."""
        process = self.faults.process
        held = [p.partition for p in self.client.partitions(self.topic, via=OBSERVER_ID)
                if action.broker in p.replicas] or [0]
        before = {p: self.client.local_leo(action.broker, (self.topic, p)) for p in held}
        process.replace_disk(action.broker, start=False)
        after = {p: process.evidence.leo_on_disk(action.broker, (self.topic, p)) for p in held}
        process.start(action.broker)
        self._await_registered(action.broker)
        return [LossEvidence(action.broker, before[p], after[p], partition=p,
                             leo_restart=self.client.local_leo(action.broker, (self.topic, p))) for p in held]

    @_do.register
    def _(self, action: CrashController) -> Result:
        return self._stop_controller(action, self.faults.process.crash)

    @_do.register
    def _(self, action: ShutdownController) -> Result:
        return self._stop_controller(action, self.faults.process.shutdown)

    @_do.register
    def _(self, action: PowerOffController) -> Result:
        return self._stop_controller(action, self.faults.process.power_off_controller)

    def _stop_controller(self, action: StopController, stop: Callable[[int], object]) -> Result:
        node = self._controller_node(action)
        stop(node)
        self._controllers_down.add(node)
        self._controllers_crashed.add(node)  # its meters start from zero when it is back
        return None

    @_do.register
    def _(self, action: RestartController) -> Result:
        every = action.controller == ALL_CONTROLLERS
        nodes = sorted(self._controllers_down) if every else [self._controller_node(action)]
        for node in nodes:
            self.faults.process.start(node)
            self._controllers_down.discard(node)
        return None

    @_do.register
    def _(self, action: IsolateController) -> Result:
        """Both ways, every link between the controller and the scenario's brokers and/or the other
        controllers (the observer keeps its links: it reads the cluster)."""
        node = self._controller_node(action)
        peers: list[int] = []
        if action.scope in ("brokers", "all"):
            peers += [b for b in self.cluster.broker_ids if b != OBSERVER_ID]
        if action.scope in ("controllers", "all"):
            peers += [c for c in self._controllers if c != node]
        for peer in peers:
            self.faults.network.cut(node, peer, both_ways=True)
        return None

    def _controller_node(self, action: ControllerAction) -> int:
        """The node id of the controller ``action`` names: by its number, or the active one now."""
        if action.controller != ACTIVE_CONTROLLER:
            return self._controllers[int(action.controller)]
        active = self.client.active_controller(via=OBSERVER_ID)
        if active is None:
            raise BackendError("no controller is active (DescribeQuorum names no quorum leader)")
        return active

    def _active_controller(self) -> int | None:
        """The active controller by its number in the scenario (0 .. controllers - 1); None: none. A
        single controller never crashed is not asked for: it is controller 0."""
        if len(self._controllers) == 1 and not self._controllers_down:
            return 0
        node = self.client.active_controller(via=OBSERVER_ID)
        return self._controllers.index(node) if node in self._controllers else None

    @_do.register
    def _(self, action: Pause) -> Result:
        self.faults.process.pause(action.broker)
        return None

    @_do.register
    def _(self, action: Resume) -> Result:
        self.faults.process.resume(action.broker)
        return None

    @_do.register
    def _(self, action: MoveLogDir) -> Result:
        """AlterReplicaLogDirs to the broker, then wait until it has swapped the copies; its
        AssignReplicasToDirs to the controller follows on its own (the step's settle waits)."""
        try:
            self.client.move_to_next_log_dir(action.broker, self.topic, action.partition,
                                             timeout_s=self.settle_timeout_s())
        except (KafkaProtocolError, TimeoutError) as exc:
            raise BackendError(f"move_log_dir {action.broker} (partition {action.partition}): {exc}") from None
        return None

    @_do.register
    def _(self, action: Flush) -> Result:
        self.faults.process.flush(action.broker)
        return None

    @_do.register
    def _(self, action: SetMinIsr) -> Result:
        self.client.set_min_insync_replicas(self.topic, action.value)
        return None

    @_do.register
    def _(self, action: SetClusterMinIsr) -> Result:
        self._cluster_min_isr_set = True
        self.client.set_cluster_min_insync_replicas(action.value)
        return None

    @_do.register
    def _(self, action: UncleanElection) -> Result:
        """IncrementalAlterConfigs on the topic, then (when turned on, unless ``elect: false``)
        ElectLeaders with election type UNCLEAN, as the runbook does: the controller's own check for
        leaderless partitions runs on a timer set beyond any run (sut/config.py). The config is the
        topic's, so the request names every partition of it, as the model elects in each.
        ELECTION_NOT_NEEDED (a leader is there) and ELIGIBLE_LEADERS_NOT_AVAILABLE (no replica is
        unfenced) are answers, not failures: the state says what happened."""
        admin = AdminClient({"bootstrap.servers": self._bootstrap()})
        entry = ConfigEntry("unclean.leader.election.enable", "true" if action.enabled else "false",
                            incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.TOPIC, self.topic, incremental_configs=[entry])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=PRODUCE_TIMEOUT_S)
        if action.enabled and action.elect:
            return self._elect_leaders(action, admin, ElectionType.UNCLEAN, KafkaError.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                                       range(self._partitions))
        return None

    @_do.register
    def _(self, action: ElectLeaders) -> Result:
        """ElectLeaders with election type PREFERRED. ELECTION_NOT_NEEDED (the preferred replica
        leads) and PREFERRED_LEADER_NOT_AVAILABLE (it may not lead) are answers: the state says."""
        admin = AdminClient({"bootstrap.servers": self._bootstrap()})
        return self._elect_leaders(action, admin, ElectionType.PREFERRED, KafkaError.PREFERRED_LEADER_NOT_AVAILABLE,
                                   (action.partition,))

    def _elect_leaders(self, action: Action, admin: AdminClient, election: ElectionType,
                       no_candidate: int, partitions: Iterable[int]) -> Refusal | None:
        """ElectLeaders for the partitions. Any other error code is the controller refusing the
        operator's request (a Kafka mutant's exception comes back as UNKNOWN_SERVER_ERROR): an
        outcome the executor holds to the model's, which refuses no election."""
        numbers = list(partitions)
        answers = admin.elect_leaders(election, [TopicPartition(self.topic, p) for p in numbers])
        said = f"{election.name.lower()} election of {self.topic}-{','.join(map(str, numbers))}"
        try:
            per_partition = answers.result(timeout=PRODUCE_TIMEOUT_S)
        except KafkaException as exc:  # the request as a whole failed
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            # librdkafka's own errors (no answer: a timeout, a transport failure) are -200..-100;
            # a broker's answer is -1 (UNKNOWN_SERVER_ERROR) or more
            if error is None or error.code() < KafkaError.UNKNOWN:
                raise BackendError(f"{said}: no answer: {exc}") from exc
            return Refusal(action.kind, ERRORS.get(error.code(), f"error {error.code()}"),
                           f"{said}: {error}")
        for tp, error in sorted(per_partition.items(), key=lambda answer: answer[0].partition):
            # a KafkaError per partition (None: elected); older clients wrapped it in a KafkaException
            kafka_error = error.args[0] if isinstance(error, Exception) else error
            code = kafka_error.code() if kafka_error is not None else None
            if code not in (None, KafkaError.ELECTION_NOT_NEEDED, no_candidate):
                return Refusal(action.kind, ERRORS.get(code, f"error {code}"),
                               f"{election.name.lower()} election of {tp.topic}-{tp.partition}: {error}")
        return None

    @_do.register
    def _(self, action: Reassign) -> Result:
        return self._operator_request(
            action, lambda: self.client.reassign(self.topic, action.replicas, action.partition))

    @_do.register
    def _(self, action: CancelReassignment) -> Result:
        return self._operator_request(action, lambda: self.client.cancel_reassignment(self.topic, action.partition))

    @_do.register
    def _(self, action: Unregister) -> Result:
        return self._operator_request(action, lambda: self.client.unregister_broker(action.broker))

    @_do.register
    def _(self, action: ForgedAlterPartition) -> Result:
        return self._operator_request(action, lambda: self.client.forge_alter_partition(
            self.topic, action.partition, action.isr, action.recovering, action.stale_broker_epoch))

    @staticmethod
    def _operator_request(action: Action, ask: Callable[[], None]) -> Refusal | None:
        """An operator request the controller answers with an error is refused: an outcome the
        executor holds to the model's. No answer at all stays an error of the run."""
        try:
            ask()
        except KafkaProtocolError as exc:
            if exc.error_code is None:
                raise
            return Refusal(action.kind, ERRORS.get(exc.error_code, f"error {exc.error_code}"), str(exc))
        return None

    @_do.register
    def _(self, action: Wait) -> Result:
        time.sleep(action.seconds)  # the scenario asked for time to pass
        return None

    @_do.register
    def _(self, action: Produce) -> Result:
        return self._produce(action.count, action.acks)

    def settle_timeout_s(self) -> float:
        """Fencing by session timeout is the slowest thing a step may wait for."""
        return 30.0 + 2 * self.session_timeout_ms / 1000

    def rest_s(self) -> float:
        """Twice the longest timer that changes the cluster on its own: fencing (the session
        timeout), a follower's lag (``replica.lag.time.max.ms``, checked every half of it), a
        request given up (``request.timeout.ms``); sut/config.py tunes them to 3-5 s."""
        timers_ms = (self.session_timeout_ms, 1.5 * int(TUNING["replica.lag.time.max.ms"]),
                     int(TUNING["request.timeout.ms"]))
        return 2 * max(timers_ms) / 1000

    def _power_off(self, broker: int) -> list[LossEvidence]:
        record = self.faults.process.power_off(broker, topics=[self.topic])
        self._powered_off.add(broker)
        return self._evidence(record)

    def _evidence(self, record: PowerOffRecord) -> list[LossEvidence]:
        """Per partition of the topic the victim holds: the log end before the cut, on the disk
        after it, and (once restarted) as the broker loaded it -- its log line, else its first
        ListOffsets answer (a lower bound: by then a follower may have re-fetched). Bytes only of
        the partition's segment files, for the record. Partition 0's alone (unmeasured) when the
        victim holds none, as the model says."""
        held = sorted(p for topic, p in record.leo_before if topic == self.topic) or [0]
        out = []
        for p in held:
            tp, prefix = (self.topic, p), f"{self.topic}-{p}/"
            dropped = sum(n for path, n in record.unsynced_files.items()
                          if path.lstrip("/").startswith(prefix) and path.endswith(".log"))
            restart = record.leo_loaded.get(tp)
            out.append(LossEvidence(record.node, record.leo_before.get(tp), record.leo_on_disk.get(tp),
                                    bytes_lost=dropped, partition=p,
                                    leo_restart=restart if restart is not None else record.leo_after.get(tp)))
        return out

    def _restart(self, broker: int) -> list[LossEvidence] | None:
        if broker not in self._powered_off:
            self.faults.process.start(broker)
            self._await_registered(broker)
            return None
        self._powered_off.discard(broker)
        record = self.faults.process.power_on(broker)
        return self._evidence(record) if record is not None else None

    def _await_registered(self, broker: int) -> None:
        """The model registers a restarted broker at once; Kafka only after its old session (which
        a killed JVM leaves behind) expires. Later steps rely on the new registration.

        A broker serves only once unfenced. With its heartbeats held it never is: its first held
        heartbeat is the sign, as a broker sends heartbeats only after its registration is accepted."""
        timeout_s = 30 + 2 * self.session_timeout_ms / 1000
        network = self.faults.network
        try:
            if network.held_by(broker, BROKER_HEARTBEAT):
                await_value(lambda: network.held_requests(broker, BROKER_HEARTBEAT), lambda n: n > 0,
                            timeout_s=timeout_s, interval_s=0.1, what=f"broker {broker}'s first (held) heartbeat")
            else:
                self.client.wait_serving(broker, timeout_s=timeout_s)
        except (SutError, TimeoutError) as exc:
            raise BackendError(str(exc)) from None

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

    def start_workload(self, spec: WorkloadSpec) -> bool:
        """The scenario's background producer, for the whole run (stopped before the drain)."""
        self._workload = BackgroundProducer(self._bootstrap(), self.topic, self.history, rate=spec.rate_per_s,
                                            partitions=self._partitions, acks=spec.acks)  # type: ignore[arg-type]
        self._workload.start()
        return True

    def stop_workload(self) -> None:
        if self._workload is not None:
            self._workload.stop(timeout=15)
            self._workload = None

    def _produce(self, count: int, acks: str, tick: bool = False) -> ProduceOutcome:
        outcome = ProduceOutcome(acks=acks, sent=count)
        history = self.history
        producer = self._producer(acks)
        pending = count

        def record(op: str, ident: int, value: str, offset: int | None, error: str | None, partition: int) -> None:
            if history is not None:
                word = {} if op == "invoke" else {"outcome": classify(error, acks)}
                history.record("produce", op=op, id=ident, value=value, acks=acks, partition=partition,
                               offset=offset, error=error, **word, **({"tick": True} if tick else {}))

        def delivered(ident: int, value: str, partition: int) -> Any:
            def callback(err: KafkaError | None, msg: Any) -> None:
                nonlocal pending
                pending -= 1
                if err is None:
                    offset = msg.offset() if acks != "0" else None
                    if acks != "0":
                        outcome.acked += 1
                    record("ok", ident, value, offset if offset is not None and offset >= 0 else None, None,
                           partition)
                else:
                    # Definite only when the leader refused before appending (see workload.producer).
                    op = "fail" if is_definite(err.name()) else "info"
                    name = err.name().lstrip("_")
                    outcome.failed[name] = outcome.failed.get(name, 0) + 1
                    record(op, ident, value, None, name, partition)
            return callback

        prefix = "tick" if tick else "v"
        for _ in range(count):
            ident = history.new_id() if history is not None else 0
            value = f"{prefix}{ident}-{secrets.token_hex(2)}"
            # round-robin as the model sends: the k-th record of the run to partition k mod N
            partition = 0 if tick else self._sent % self._partitions
            self._sent += 0 if tick else 1
            record("invoke", ident, value, None, None, partition)
            producer.produce(self.topic, value=value.encode(), partition=partition,
                             on_delivery=delivered(ident, value, partition))
        producer.flush(PRODUCE_TIMEOUT_S + 5)  # serves the delivery callbacks until every send has its answer
        outcome.pending = pending
        return outcome

    def nudge(self, partitions: Sequence[int] = (0,)) -> None:
        """One acks=1 record to each of ``partitions``: Kafka shrinks the ISR only when a follower is
        *behind* the leader."""
        for i in partitions:
            if i == 0:
                self._produce(1, "1", tick=True)  # partition 0's in the history, as ever
                continue
            with contextlib.suppress(KafkaProtocolError):
                self.client.produce(self.topic, [b"tick"], i, acks=1, timeout_ms=2000)

    # --- observation -------------------------------------------------------------------------

    def observe(self) -> Observation:
        """One consistent view: the partition is read before and after the fenced set, and again
        until both reads agree (the observer's metadata may change between two requests, and a
        torn view -- an old leader beside the new fenced set -- is no state the cluster was in)."""
        client, network = self.client, self.faults.network
        try:
            # every partition in one DescribeTopicPartitions round trip (paged), before and after the fenced set
            ps = client.partitions(self.topic, via=OBSERVER_ID)
            for _ in range(OBSERVE_TRIES):
                fenced = client.fenced_brokers(via=OBSERVER_ID)
                again = client.partitions(self.topic, via=OBSERVER_ID)
                if again == ps:
                    break
                ps = again
            by_number = {p.partition: p for p in ps}
            missing = [i for i in range(self._partitions) if i not in by_number]
            if missing:
                raise KafkaProtocolError(f"{self.topic} has no partition {missing[0]} in the observer's metadata")
            offsets = {i: client.offsets(self.topic, i, state=by_number[i]) for i in range(self._partitions)}
        except KafkaProtocolError as exc:
            raise BackendError(f"cannot observe the cluster: {exc}") from None
        held = {s for s in {s for s, _, _ in network.holds} if network.held_requests(s) > 0}
        active = self._active_controller()

        # the controllers' logs are read once for every partition whose state changed
        refreshed = self.client.refresh_metadata_logs() if any(map(self._registration_stale, ps)) else {}

        def one(i: int) -> Observation:
            p, o = by_number[i], offsets[i]
            return Observation(
                leader=p.leader, leader_epoch=p.leader_epoch, isr=tuple(sorted(p.isr)),
                elr=tuple(sorted(p.elr or ())), last_known_elr=tuple(sorted(p.last_known_elr or ())),
                fenced=tuple(sorted(fenced - {OBSERVER_ID})), hwm=o.hwm, replicas=p.replicas,
                leo={b: v for b, v in o.leo.items() if v is not None},
                **self._registration(p, refreshed),
                # a held request is the broker's, not a partition's: partition 0 shows every holder, the
                # others the holder among their leader
                held=tuple(sorted(held if i == 0 else held & {p.leader})),
                active_controller=active,
            )
        first = one(0)
        if self._partitions == 1:
            return first
        return replace(first, partitions={i: one(i) for i in range(1, self._partitions)})

    def _registration_stale(self, p: PartitionState) -> bool:
        """Whether ``_registration`` reads the controllers' logs again for ``p``."""
        key = (p.leader, p.leader_epoch, p.isr, p.elr, p.last_known_elr, p.replicas)
        read = self._registration_read.get(p.partition)
        return read is None or read[0] != key or read[1] is None

    def _registration(self, p: PartitionState, refreshed: dict[int, str]) -> dict[str, Any]:
        """LeaderRecoveryState, the partition epoch and the replicas a reassignment adds and removes,
        from the controllers' metadata log (no client API returns the first two; the others come
        with them at no extra request), read again when the partition's state changed or an action was
        done (an unclean election and the recovery's end both change the state); None: not read.
        ``refreshed``: the logs were just replayed, once for every partition of the observation."""
        key = (p.leader, p.leader_epoch, p.isr, p.elr, p.last_known_elr, p.replicas)
        if self._registration_stale(p):
            reg = self.client.registration(p, refreshed)
            before = self._registration_read.get(p.partition)
            if reg is not None and before is not None and before[1] is not None \
                    and reg.partition_epoch < before[1].partition_epoch:
                # The partition epoch never goes back: a match older than a record already read is an
                # earlier visit of the same state (an unclean election's ISR [2], ELR [] matched again
                # after a cluster-wide ClearElr emptied the ELR), read before the log held this one.
                # Not known yet: read again at the next observation (CI, 2026-11-27: epoch 9 -> 5).
                reg = None
            self._registration_read[p.partition] = (key, reg)
        reg = self._registration_read[p.partition][1]
        miss = (key, self.client.registration_miss)
        if reg is None and self.history is not None and miss != self._miss_recorded.get(p.partition):
            self._miss_recorded[p.partition] = miss  # why the epoch is unknown, once per state and reason
            self.history.record("registration_miss", state=str(p), why=self.client.registration_miss)
        return {"recovering": reg.recovering if reg else None, "partition_epoch": reg.partition_epoch if reg else None,
                "adding": reg.adding if reg else None, "removing": reg.removing if reg else None}

    def unsynced_bytes(self) -> dict[int, int]:
        """Per broker, the bytes its disk layer holds that a power off would lose right now."""
        report = self.cluster.unsynced_report()
        return {b: n for b, n in report.items() if b != OBSERVER_ID}

    def election_counts(self) -> dict[str, int]:
        """Kafka's controller meters (``sut/meters.py``), as counts since this run's first read.
        Every controller replays the same metadata log, so each counts the same elections -- since
        its own JVM started: the first read takes every running controller's counts as its base, and
        each later read uses a controller this run has not crashed (a crash starts its meters from
        zero again). The meters count every topic's elections: before the first read the topics
        earlier runs left on this pooled cluster are deleted, or their partitions would elect on
        this run's faults."""
        try:
            if self._meter_bases is None:
                self._delete_other_topics()
                self._meter_bases = {node: self.cluster.election_counts(node) for node in self._controllers
                                     if node not in self._controllers_down}
            intact = [node for node in self._meter_bases if node not in self._controllers_crashed]
            if not intact:
                raise BackendError("elections cannot be counted: every controller whose meters were read at "
                                   "the start has been crashed since, and a crashed JVM counts from zero again")
            node = intact[0]
            now, base = self.cluster.election_counts(node), self._meter_bases[node]
        except NodeCommandError as exc:
            raise BackendError(f"cannot read the controller's meters: {exc}") from None
        return {key: count - base[key] for key, count in now.items() if key in base}

    def _delete_other_topics(self) -> None:
        """DeleteTopics for every topic but this run's and Kafka's internal ones, waited for."""
        admin = AdminClient({"bootstrap.servers": self._bootstrap()})
        others = [t for t in admin.list_topics(timeout=PRODUCE_TIMEOUT_S).topics
                  if t != self.topic and not t.startswith("__")]
        for future in (admin.delete_topics(others, operation_timeout=PRODUCE_TIMEOUT_S).values() if others else ()):
            future.result(timeout=PRODUCE_TIMEOUT_S)

    def protocol_errors(self) -> list[str]:
        counts = self._rejection_count()
        new = [code for code, n in counts.items() for _ in range(max(0, n - self._errors_seen.get(code, 0)))]
        self._errors_seen = counts
        return new

    def lag_churn(self, partition: int, leader: int, since: float) -> LagChurn | None:
        """The leader's ``Shrinking ISR`` lines of ``partition`` since ``since`` (its log since its
        latest start, one Docker exec), each judged by Kafka's own lag rule
        (:mod:`pytest_elr.sut.isr_shrinks`); None: the log could not be read."""
        if self.cluster is None or leader not in self.cluster.broker_ids:
            return None
        from docker.errors import DockerException  # here: Docker's client stays out of a model-only run

        try:
            lines = self.cluster.node(leader).log_since_start("Shrinking ISR")
        except (SutError, DockerException):
            return None
        max_lag_ms = int(TUNING["replica.lag.time.max.ms"])
        shrinks = [s for s in isr_shrinks(lines, self.topic, partition) if s.since(since)]
        return LagChurn(len(shrinks), sum(s.lagged(max_lag_ms) for s in shrinks),
                        tuple(s.line for s in shrinks if not s.lagged(max_lag_ms))[:3],
                        tuple(sorted({d.broker for s in shrinks for d in s.dropped})))

    def unraced_refusals(self, since: float) -> list[UnracedRefusal] | None:
        """Each controller's refusal lines since ``since`` against the registration changes it
        replayed (:func:`pytest_elr.sut.refusals.unraced`); None: a log could not be read."""
        from docker.errors import DockerException  # here: Docker's client stays out of a model-only run

        try:
            logs = self._controller_logs()
        except (SutError, DockerException):
            return None
        since_ms = int(since * 1000) % DAY_MS
        return [found for log in logs for lines in (log.splitlines(),)
                for found in unraced(ineligible_refusals(lines, self.topic), registration_changes(lines), since_ms)]

    def _controller_logs(self) -> list[str]:
        """Every controller's latest log lines, read at once, a thread each: each read is a Docker
        exec (up to 14 s on a loaded machine; one after another, 10-38 s of a 3-controller run)."""
        with ThreadPoolExecutor(max_workers=max(1, len(self._controllers))) as pool:
            return list(pool.map(lambda c: self.cluster.logs(c, lines=3000), self._controllers))

    def _rejection_count(self) -> dict[str, int]:
        """AlterPartition rejections of this scenario's partitions the controllers have logged, read
        after every step's actions."""
        return count_rejections((line for log in self._controller_logs() for line in log.splitlines()), self.topic)

    def drain(self) -> Read:
        return self.drain_partitions()[0]

    def drain_partitions(self) -> dict[int, Read]:
        """Every partition read to its HWM (or its highest acknowledged offset) by one consumer."""
        self.stop_workload()
        acked = {i: max_acked_offset(self.history, i) if self.history is not None else None
                 for i in range(self._partitions)}
        results = drain_partitions(self._bootstrap(), self.topic, None, dict.fromkeys(range(self._partitions), 0),
                                   min_offsets=acked, timeout_s=DRAIN_TIMEOUT_S, skip=lambda v: v.startswith("tick"))
        return {i: _as_read(result) for i, result in results.items()}

    def read_partitions(self, starts: Mapping[int, int]) -> dict[int, Read]:
        """Each partition from its offset in ``starts`` up to the HWM, as a consumer sees it now."""
        results = drain_partitions(self._bootstrap(), self.topic, None, dict(starts), timeout_s=READ_TIMEOUT_S,
                                   settle_s=1.0, skip=lambda v: v.startswith("tick"))
        return {i: _as_read(result) for i, result in results.items()}


def _as_read(result: DrainResult) -> Read:
    return Read([ConsumedRecord(r.offset, r.value) for r in result.records], result.next_offset)


def _ref(node: Node) -> int | str:
    return "controller" if node == CONTROLLER else int(node)
