"""``ClusterClient``: a running :class:`KafkaCluster` over Kafka's protocol -- topics, produce, and
what its metadata says.

Observations are read from the cluster (DescribeTopicPartitions, DescribeCluster, ListOffsets on
the client listeners), never inferred. Metadata is asked of a broker whose metadata is fresh
first: one the faults stopped or cut from the controller (``KafkaCluster.metadata_lag``) answers
from a stale cache, so it is asked last.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import docker.errors

from pytest_elr.sut import admin, produce
from pytest_elr.sut.admin import PartitionState
from pytest_elr.sut.errors import ClusterStartError, KafkaProtocolError, SutError
from pytest_elr.sut.metadata_log import Registration
from pytest_elr.sut.polling import await_value, poll

if TYPE_CHECKING:
    from pytest_elr.sut.cluster import KafkaCluster

T = TypeVar("T")
HOST = "127.0.0.1"  # every client listener is published on loopback


@dataclass(frozen=True)
class PartitionOffsets:
    """HWM as the leader reports it; each replica's own log end offset (None: no answer)."""

    leader: int | None
    hwm: int | None
    leo: dict[int, int | None]


def random_topic(prefix: str = "t") -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


class ClusterClient:
    """Admin requests, produce and observation against one cluster's brokers (no state of its own)."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        #: why the latest ``registration`` found no record of the state asked for
        self.registration_miss = ""

    # ------------------------------------------------------------ whom to ask

    def observers(self) -> list[int]:
        """Every broker, those whose metadata is fresh first."""
        lagging = self.cluster.lagging_brokers()
        ids = self.cluster.broker_ids
        return [b for b in ids if b not in lagging] + [b for b in ids if b in lagging]

    def _ask(self, fn: Callable[[int], T], via: int | None = None) -> T:
        errors: list[str] = []
        for b in [via] if via is not None else self.observers():
            try:
                return fn(self.cluster.client_port(b))
            except KafkaProtocolError as e:
                if e.error_code is not None:  # the broker answered: a real error
                    raise
                errors.append(f"broker {b}: {e}")
        raise KafkaProtocolError("no broker answered: " + "; ".join(errors))

    # ------------------------------------------------------------ topics

    def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]],
                     min_insync_replicas: int | None = None,
                     configs: Mapping[str, str] | None = None, wait: bool = True) -> None:
        """Create a topic with an explicit assignment ``{partition: [replica ids]}``.

        The first replica of each partition is its preferred (initial) leader.
        """
        cfg = dict(configs or {})
        if min_insync_replicas is not None:
            cfg["min.insync.replicas"] = str(min_insync_replicas)
        self._ask(lambda port: admin.create_topic(HOST, port, name, assignment, cfg))
        if wait:
            def ready(p: PartitionState) -> bool:
                return p.leader is not None and set(p.isr) == set(p.replicas)
            for part in assignment:
                self.await_partition(name, ready, partition=part, timeout_s=30)

    def set_min_insync_replicas(self, topic: str, value: int | None) -> None:
        self._ask(lambda port: admin.alter_topic_config(
            HOST, port, topic, {"min.insync.replicas": None if value is None else str(value)}))

    def set_cluster_min_insync_replicas(self, value: int | None) -> None:
        """The dynamic cluster-wide default (None: back to the controllers' static value)."""
        self._ask(lambda port: admin.alter_configs(
            HOST, port, admin.BROKER_RESOURCE, admin.CLUSTER_DEFAULT,
            {"min.insync.replicas": None if value is None else str(value)}))

    def produce(self, topic: str, values: Sequence[bytes], partition: int = 0,
                acks: int = -1, timeout_ms: int = 10000) -> int:
        """Append records via the partition's current leader; returns the base offset."""
        leader = self.describe_partition(topic, partition).leader
        if leader is None:
            raise KafkaProtocolError(f"{topic}-{partition} has no leader", 5)
        return produce.produce(HOST, self.cluster.client_port(leader), topic, partition,
                               values, acks, timeout_ms)

    def reassign(self, topic: str, replicas: Sequence[int], partition: int = 0) -> None:
        """Start moving the partition to ``replicas`` (AlterPartitionReassignments); the
        controller completes it on its own once the ISR allows."""
        self._ask(lambda port: admin.alter_partition_reassignment(HOST, port, topic, partition, list(replicas)))

    def cancel_reassignment(self, topic: str, partition: int = 0) -> None:
        """Cancel the partition's reassignment under way (NO_REASSIGNMENT_IN_PROGRESS if none)."""
        self._ask(lambda port: admin.alter_partition_reassignment(HOST, port, topic, partition, None))

    def reassignment(self, topic: str, partition: int = 0, via: int | None = None) -> admin.Reassignment | None:
        """The partition's reassignment under way (replicas, adding, removing), or None."""
        return self._ask(lambda port: admin.list_partition_reassignment(HOST, port, topic, partition, 3.0), via)

    def move_to_next_log_dir(self, node: int, topic: str, partition: int = 0, timeout_s: float = 30.0) -> str:
        """Move ``node``'s replica to the log dir after the one holding it (JBOD), and wait until
        the broker has swapped the copies: only the new dir holds it, and no future copy is left.
        Returns the new dir."""
        port = self.cluster.client_port(node)
        dirs = self.cluster.node(node).spec.log_dirs
        held = [d.log_dir for d in admin.describe_replica_dirs(HOST, port, topic, partition) if not d.future]
        if len(held) != 1 or held[0] not in dirs:
            raise KafkaProtocolError(f"broker {node} holds no single copy of {topic}-{partition} in its log dirs "
                                     f"{list(dirs)} (it has {held or 'none'})")
        target = dirs[(dirs.index(held[0]) + 1) % len(dirs)]
        admin.alter_replica_log_dir(HOST, port, topic, partition, target)
        await_value(lambda: admin.describe_replica_dirs(HOST, port, topic, partition),
                    lambda copies: copies == [admin.ReplicaDir(target, future=False)],
                    timeout_s, 0.1, f"{topic}-{partition} moving to {target} on broker {node}")
        # The broker answers from its map of logs, which it updates before it renames the old
        # directory away: await the disk too, so that what is read there next is the moved copy.
        await_value(lambda: self.cluster.node(node).dirs_holding(topic, partition), lambda held: held == [target],
                    timeout_s, 0.1, f"only {target} holding {topic}-{partition} on broker {node}'s disk")
        return target

    # ------------------------------------------------------------ observation

    def partitions(self, topic: str, via: int | None = None) -> list[PartitionState]:
        """Every partition of ``topic`` as the cluster's metadata says."""
        return self._ask(lambda port: admin.describe_topic_partitions(HOST, port, topic, 3.0), via)

    def describe_partition(self, topic: str, partition: int = 0,
                           via: int | None = None) -> PartitionState:
        """Leader, epoch, ISR, ELR, LastKnownELR as the cluster's metadata says."""
        for p in self.partitions(topic, via):
            if p.partition == partition:
                return p
        raise KafkaProtocolError(f"{topic} has no partition {partition}")

    def brokers(self, via: int | None = None) -> list[admin.BrokerInfo]:
        return self._ask(lambda port: admin.describe_cluster(HOST, port, 3.0), via)

    def fenced_brokers(self, via: int | None = None) -> set[int]:
        """Registered brokers that the controller has fenced (DescribeCluster v2)."""
        return {b.broker_id for b in self.brokers(via) if b.fenced}

    def unregister_broker(self, broker: int, via: int | None = None) -> None:
        """Remove ``broker``'s registration (UnregisterBroker, forwarded to the active controller)."""
        self._ask(lambda port: admin.unregister_broker(HOST, port, broker), via)

    def active_controller(self, via: int | None = None, timeout_s: float = 3.0) -> int | None:
        """The node id of the active controller (the metadata quorum's leader); None: no leader, or
        no broker could reach one within ``timeout_s``."""
        try:
            return self._ask(lambda port: admin.describe_quorum_leader(HOST, port, timeout_s), via)
        except KafkaProtocolError:
            return None

    def forge_alter_partition(self, topic: str, partition: int, isr: Sequence[int] | None, recovering: bool,
                              stale_broker_epoch: bool) -> None:
        """Send the active controller an AlterPartition as the partition's leader would: the leader
        and partition epochs, the ISR (``None``: as it stands) and every broker epoch as the
        controller's metadata log has them now, the sender's one below its own when
        ``stale_broker_epoch``. Its refusal is raised (``KafkaProtocolError`` with the code).

        An ISR of the same members is sent in the order the controller stored it: Kafka's
        ``PartitionChangeBuilder`` writes a record for a new order alone."""
        controller = self.active_controller()
        if controller is None:
            raise KafkaProtocolError("AlterPartition: no controller is active to send it to")
        log = self.cluster.metadata_log(controller)
        log.refresh()
        states, topic_id = log.replayed(topic, partition), log.topic_id(topic)
        if not states or topic_id is None:
            raise KafkaProtocolError(
                f"AlterPartition: controller {controller}'s metadata log has no {topic}-{partition}")
        now, epochs = states[-1], log.broker_epochs()
        if now.leader is None or now.leader not in epochs:
            raise KafkaProtocolError(f"AlterPartition: {topic}-{partition} has no registered leader to send it as")
        members = now.isr_order if isr is None or sorted(isr) == sorted(now.isr) else tuple(isr)
        port = self.cluster.node(controller).controller_port
        admin.alter_partition(HOST, port, now.leader, epochs[now.leader] - stale_broker_epoch, topic_id, partition,
                              now.leader_epoch, now.partition_epoch, [(b, epochs.get(b, -1)) for b in members],
                              recovering)

    def local_leo(self, node: int, tp: tuple[str, int]) -> int | None:
        """``node``'s own log end offset of partition ``tp`` (None: no answer)."""
        try:
            return admin.list_offset(HOST, self.cluster.client_port(node), tp[0], tp[1],
                                     admin.DEBUGGING_REPLICA_ID, timeout_s=2.0)
        except KafkaProtocolError:
            return None

    def offsets(self, topic: str, partition: int = 0, via: int | None = None,
                state: PartitionState | None = None) -> PartitionOffsets:
        """The leader's HWM, then each replica's log end: in that order, so that records appended
        between the reads can only make a log end larger than the HWM read before it, never smaller.
        ``state``: the partition as already read (its leader is asked), else read now."""
        state = state or self.describe_partition(topic, partition, via)
        hwm = None
        if state.leader is not None:
            with contextlib.suppress(KafkaProtocolError):
                hwm = admin.list_offset(HOST, self.cluster.client_port(state.leader), topic,
                                        partition, admin.CONSUMER_REPLICA_ID, timeout_s=2.0)
        leo = {r: self.local_leo(r, (topic, partition)) for r in state.replicas}
        return PartitionOffsets(state.leader, hwm, leo)

    def refresh_metadata_logs(self) -> dict[int, str]:
        """Replay what each controller's metadata log appended since the last read, once for a
        batch of ``registration(state, refreshed=...)`` reads (each log read is a copy out of the
        controller's container: read once per partition, fifty partitions took 34 s an observation
        on Kafka 4.4.0, 2026-11-27). The controllers' logs are read at once, each in a thread of its
        own: each read waits on Docker (two calls, up to 3.5 s each on a loaded machine), and each
        controller's reader is its own. Returns the controllers whose log could not be read, with why."""
        logs = {controller: self.cluster.metadata_log(controller) for controller in self.cluster.controller_ids}

        def unreadable(controller: int) -> str | None:
            try:
                logs[controller].refresh()
            except (SutError, docker.errors.DockerException) as exc:
                return f"controller {controller}'s log unreadable ({exc})"
            return None

        if len(logs) == 1:
            why = {c: unreadable(c) for c in logs}
        else:
            with ThreadPoolExecutor(max_workers=len(logs)) as pool:
                why = dict(zip(logs, pool.map(unreadable, logs), strict=True))
        return {c: w for c, w in why.items() if w is not None}

    def registration(self, state: PartitionState, refreshed: dict[int, str] | None = None) -> Registration | None:
        """The controller's record of the partition as ``state`` shows it, with what no client API
        returns (LeaderRecoveryState, the partition epoch): replayed from a controller's metadata
        log, the latest record matched on leader, leader epoch, ISR, ELR, LastKnownELR and replicas. None
        when no controller's log holds that state yet; then ``registration_miss`` says why.

        With several controllers every log is read and the match with the highest partition epoch
        wins: a stopped controller's log ends where it stopped, and a state that came back (an ISR
        that shrank and grew again) matches an older record there (measured on Kafka 4.4.0: the
        crashed active controller's log gave partition epoch 0 for ISR [0, 1, 2] regrown at 2).
        ``refreshed``: what ``refresh_metadata_logs`` returned for this batch of reads (the logs are
        then not read again); None: each log is read now."""
        why: list[str] = []
        found: Registration | None = None
        for controller in self.cluster.controller_ids:
            if refreshed is not None:  # the logs as ``refresh_metadata_logs`` just replayed them
                if controller in refreshed:
                    why.append(refreshed[controller])
                    continue
                registrations = self.cluster.metadata_log(controller).replayed(state.topic, state.partition)
            else:
                try:
                    registrations = self.cluster.metadata_log(controller).registrations(state.topic, state.partition)
                except (SutError, docker.errors.DockerException) as exc:
                    why.append(f"controller {controller}'s log unreadable ({exc})")
                    continue  # this controller's log cannot be read right now: unknown, not false
            match = next((reg for reg in reversed(registrations) if (
                reg.leader, reg.leader_epoch, reg.isr, reg.elr, reg.last_known_elr, reg.replicas) == (
                state.leader, state.leader_epoch, state.isr, state.elr or (), state.last_known_elr or (),
                state.replicas)), None)
            if match is not None:
                if found is None or match.partition_epoch > found.partition_epoch:
                    found = match
                continue
            latest = registrations[-1] if registrations else None
            why.append(f"controller {controller}'s log: {len(registrations)} records, none of them this state "
                       f"(latest: {latest})")
        if found is not None:
            return found
        self.registration_miss = "; ".join(why) or "no controller"
        return None

    # ------------------------------------------------------------ waiting

    def await_partition(self, topic: str, predicate: Callable[[PartitionState], bool],
                        partition: int = 0, timeout_s: float = 30.0, interval_s: float = 0.2,
                        via: int | None = None, traffic: bool = False) -> PartitionState:
        """Poll until ``predicate(state)``; on timeout raise with the last state seen.

        ``traffic``: append one record (acks=1) per poll. Kafka drops a follower
        from the ISR only when it is *behind* the leader's log end for
        ``replica.lag.time.max.ms``; on an idle partition a follower that
        stopped fetching still counts as caught up, and the ISR never shrinks.
        """
        def read() -> PartitionState:
            if traffic:
                with contextlib.suppress(KafkaProtocolError):
                    self.produce(topic, [b"tick"], partition, acks=1, timeout_ms=2000)
            return self.describe_partition(topic, partition, via)

        return await_value(read, predicate, timeout_s, interval_s, f"{topic}-{partition}")

    def wait_serving(self, node: int, timeout_s: float = 60.0) -> float:
        """Wait until a (re)started broker answers clients; returns the seconds waited.

        A KRaft broker opens its listeners to requests only once it has registered and the
        controller has unfenced it, so an answer means the new incarnation is registered: its
        old session, which a killed JVM leaves behind for up to the session timeout, is gone.
        """
        t0 = time.monotonic()
        broker = self.cluster.node(node)

        def answer() -> None:
            if broker.state() == "stopped":
                raise ClusterStartError(f"broker {node}'s JVM exited while starting",
                                        {broker.name: broker.logs()})
            admin.describe_cluster(HOST, self.cluster.client_port(node), 2.0)

        poll(answer, timeout_s=timeout_s, interval_s=0.1, timed_out=lambda last: ClusterStartError(
            f"broker {node} did not serve within {timeout_s:.0f}s (last: {last})", {broker.name: broker.logs()}))
        return time.monotonic() - t0
