"""Typed Kafka admin/observation requests over :mod:`pytest_elr.sut.wire`.

Why a Python client and not ``kafka-topics --describe`` in a container: the
JVM tool costs seconds per call (measured ~1.6 s on 2 cores; see
``elr bench cluster``), the Python request ~2 ms, so a test
can poll leader/ISR/ELR many times a second. Both read the same
``DescribeTopicPartitions`` response (API key 75), so nothing is inferred.

Requests used (all flexible versions):

=====================  ====  =======  ==========================================
request                key   version  what for
=====================  ====  =======  ==========================================
CreateTopics           19    7        explicit replica assignment + topic configs
IncrementalAlterConfigs 44   1        change a topic's ``min.insync.replicas``, or the
                                      cluster default's (resource BROKER, name "")
DescribeCluster        60    2        ``IncludeFencedBrokers`` -> ``IsFenced`` (KIP-1073)
DescribeTopicPartitions 75   0        leader, epoch, ISR, ELR, LastKnownELR (KIP-966)
ListOffsets            2     6        ReplicaId=-1: leader's HWM; ReplicaId=-2 (debug):
                                      any replica's local log end offset
AlterReplicaLogDirs    34    2        move a replica to another of its broker's log dirs (JBOD)
DescribeLogDirs        35    3        which log dir holds a replica, and whether a future
                                      copy (a move under way) is there too
AlterPartitionReassignments 45 0      start a reassignment to a target replica list, or
                                      cancel one (a null list)
ListPartitionReassignments 46  0      a reassignment under way: replicas, adding, removing
DescribeQuorum         55    1        the metadata quorum's leader: the active controller
                                      (a broker forwards it to the controllers)
UnregisterBroker       64    0        remove a broker's registration (``kafka-cluster.sh
                                      unregister``): the operator's step for a broker gone for good
=====================  ====  =======  ==========================================

Per-replica LEO: ``DescribeLogDirs`` reports ``OffsetLag`` = max(HW - LEO, 0)
of the broker's *own* log, always 0 for a current replica, so it cannot show
a follower's LEO. ``ListOffsets`` with the debugging replica id (-2) is served
by followers too and, for a non-consumer replica id, ``LATEST`` answers the
local log end offset instead of the high watermark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_elr.sut.errors import KafkaProtocolError
from pytest_elr.sut.wire import Reader, Writer, request

LATEST = -1
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2

ERRORS = {
    3: "UNKNOWN_TOPIC_OR_PARTITION", 6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT",
    36: "TOPIC_ALREADY_EXISTS", 37: "INVALID_PARTITIONS", 38: "INVALID_REPLICATION_FACTOR",
    39: "INVALID_REPLICA_ASSIGNMENT", 40: "INVALID_CONFIG", 41: "NOT_CONTROLLER",
    42: "INVALID_REQUEST", 51: "CONCURRENT_TRANSACTIONS", 56: "KAFKA_STORAGE_ERROR",
    57: "LOG_DIR_NOT_FOUND", 74: "FENCED_LEADER_EPOCH", 75: "UNKNOWN_LEADER_EPOCH", 89: "THROTTLING_QUOTA_EXCEEDED",
    85: "NO_REASSIGNMENT_IN_PROGRESS", 102: "BROKER_ID_NOT_REGISTERED",
    55: "OPERATION_NOT_ATTEMPTED", 77: "STALE_BROKER_EPOCH", 95: "INVALID_UPDATE_VERSION", 100: "UNKNOWN_TOPIC_ID",
    107: "INELIGIBLE_REPLICA", 108: "NEW_LEADER_ELECTED",
    5: "LEADER_NOT_AVAILABLE", 19: "NOT_ENOUGH_REPLICAS", 20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    15: "COORDINATOR_NOT_AVAILABLE", 0: "NONE", -1: "UNKNOWN_SERVER_ERROR",
}


def _err(code: int, what: str, message: str | None = None) -> KafkaProtocolError:
    name = ERRORS.get(code, f"error {code}")
    return KafkaProtocolError(f"{what}: {name}" + (f" ({message})" if message else ""), code)


@dataclass(frozen=True)
class PartitionState:
    """One partition as the cluster's metadata describes it."""

    topic: str
    partition: int
    leader: int | None  # None when leaderless (LeaderId -1)
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...] | None  # None: the broker sent null (ELR feature off)
    last_known_elr: tuple[int, ...] | None
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    fenced: bool


def _t(xs: list[int] | None) -> tuple[int, ...]:
    return tuple(xs or ())


def _s(xs: list[int] | None) -> tuple[int, ...]:
    return tuple(sorted(xs or ()))


#: partitions per DescribeTopicPartitions page (ResponsePartitionLimit; the broker caps it at its
#: ``max.request.partition.size.limit``, default 2000)
PARTITIONS_PER_PAGE = 2000
#: pages one describe may take before it is taken for a cursor that does not advance
MAX_PAGES = 1000


def describe_topic_partitions(host: str, port: int, topic: str, timeout_s: float = 5.0,
                              page: int = PARTITIONS_PER_PAGE) -> list[PartitionState]:
    """Every partition of ``topic``: one request per ``page`` partitions, each continuing at the
    previous answer's NextCursor (one round trip for a topic of up to ``page`` partitions)."""
    out: list[PartitionState] = []
    cursor: tuple[str, int] | None = None
    for _ in range(MAX_PAGES):
        cursor = _describe_page(host, port, topic, timeout_s, page, cursor, out)
        if cursor is None:
            return sorted(out, key=lambda p: p.partition)
    raise KafkaProtocolError(f"describe {topic}: more than {MAX_PAGES} pages of {page} partitions")


def _describe_page(host: str, port: int, topic: str, timeout_s: float, page: int,
                   cursor: tuple[str, int] | None, out: list[PartitionState]) -> tuple[str, int] | None:
    """One DescribeTopicPartitions v0 request from ``cursor`` (None: the first partition); appends
    what it answers to ``out`` and returns the NextCursor (None: the last page)."""
    body = Writer()
    body.compact_array([topic], lambda w, t: w.compact_string(t).tags())
    body.int32(page)  # ResponsePartitionLimit
    if cursor is None:
        body.int8(-1)  # Cursor: null
    else:
        body.int8(1).compact_string(cursor[0]).int32(cursor[1]).tags()
    body.tags()
    r = request(host, port, 75, 0, bytes(body.buf), timeout_s)
    r.int32()  # throttle

    def partition(r: Reader, name: str) -> None:
        code = r.int16()
        index = r.int32()
        leader = r.int32()
        epoch = r.int32()
        replicas, isr = r.int32_array(), r.int32_array()
        elr, lke = r.int32_array(), r.int32_array()
        offline = r.int32_array()
        r.tags()
        if code:
            raise _err(code, f"describe {name}-{index}")
        # ISR/ELR/LastKnownELR are sets (their order differs across versions):
        # sorted. Replicas keep their order (the first is the preferred leader).
        out.append(PartitionState(name, index, None if leader < 0 else leader, epoch,
                                  _t(replicas), _s(isr), None if elr is None else _s(elr),
                                  None if lke is None else _s(lke), _s(offline)))

    def topic_entry(r: Reader) -> None:
        code = r.int16()
        name = r.compact_string() or topic
        r.uuid()
        r.boolean()
        r.compact_array(lambda r: partition(r, name))
        r.int32()  # authorized operations
        r.tags()
        if code:
            raise _err(code, f"describe topic {name}")

    r.compact_array(topic_entry)
    if r.int8() < 0:  # NextCursor: null, the last page
        return None
    name, index = r.compact_string() or topic, r.int32()
    r.tags()
    return name, index


def describe_cluster(host: str, port: int, timeout_s: float = 5.0) -> list[BrokerInfo]:
    """Registered brokers, fenced ones included (DescribeCluster v2, KIP-1073)."""
    body = Writer().boolean(False).int8(1).boolean(True).tags()
    r = request(host, port, 60, 2, bytes(body.buf), timeout_s)
    r.int32()
    code, msg = r.int16(), r.compact_string()
    if code:
        raise _err(code, "describe cluster", msg)
    r.int8()  # endpoint type
    r.compact_string()  # cluster id
    r.int32()  # controller id

    def broker(r: Reader) -> BrokerInfo:
        b = BrokerInfo(r.int32(), r.compact_string() or "", r.int32(), False)
        r.compact_string()  # rack
        fenced = r.boolean()
        r.tags()
        return BrokerInfo(b.broker_id, b.host, b.port, fenced)

    brokers = r.compact_array(broker) or []
    return sorted(brokers, key=lambda b: b.broker_id)


METADATA_TOPIC = "__cluster_metadata"


def unregister_broker(host: str, port: int, broker_id: int, timeout_s: float = 10.0) -> None:
    """Remove ``broker_id``'s registration (UnregisterBroker v0, forwarded to the active
    controller); ``BROKER_ID_NOT_REGISTERED`` (no such registration) is raised like any error."""
    r = request(host, port, 64, 0, bytes(Writer().int32(broker_id).tags().buf), timeout_s)
    r.int32()  # throttle time
    code, msg = r.int16(), r.compact_string()
    if code:
        raise _err(code, f"unregister broker {broker_id}", msg)


def describe_quorum_leader(host: str, port: int, timeout_s: float = 5.0) -> int | None:
    """The node id of the metadata quorum's leader, the active controller (DescribeQuorum v1 for
    ``__cluster_metadata-0``); None when the quorum has none (LeaderId -1, or an error: no
    controller could answer the forwarded request)."""
    body = Writer()
    body.compact_array([METADATA_TOPIC], lambda w, t: w.compact_string(t).compact_array(
        [0], lambda w, p: w.int32(p).tags()).tags())
    body.tags()
    r = request(host, port, 55, 1, bytes(body.buf), timeout_s)
    if r.int16():  # top-level error code
        return None
    if r.uvarint() < 2:  # compact array length + 1: no topic in the answer
        return None
    r.compact_string()  # topic name
    if r.uvarint() < 2:
        return None
    r.int32()  # partition index
    if r.int16():  # partition error code
        return None
    leader = r.int32()  # the rest (epoch, HWM, voters, observers) is not needed
    return None if leader < 0 else leader


def list_offset(host: str, port: int, topic: str, partition: int, replica_id: int,
                timestamp: int = LATEST, timeout_s: float = 5.0) -> int:
    """ListOffsets v6 for one partition. See the module docstring for replica ids."""
    body = Writer().int32(replica_id).int8(0)
    body.compact_array([topic], lambda w, t: w.compact_string(t).compact_array(
        [partition], lambda w2, p: w2.int32(p).int32(-1).int64(timestamp).tags()).tags())
    body.tags()
    r = request(host, port, 2, 6, bytes(body.buf), timeout_s)
    r.int32()
    result: list[int] = []

    def part(r: Reader) -> None:
        r.int32()
        code = r.int16()
        r.int64()  # timestamp
        offset = r.int64()
        r.int32()  # leader epoch
        r.tags()
        if code:
            raise _err(code, f"list offsets {topic}-{partition} on {host}:{port}")
        result.append(offset)

    def top(r: Reader) -> None:
        r.compact_string()
        r.compact_array(part)
        r.tags()

    r.compact_array(top)
    if not result:
        raise KafkaProtocolError(f"list offsets {topic}-{partition}: empty response")
    return result[0]


def create_topic(host: str, port: int, name: str, assignment: Mapping[int, Sequence[int]],
                 configs: Mapping[str, str], timeout_ms: int = 30000) -> None:
    """CreateTopics v7 with an explicit replica assignment {partition: [broker ids]}."""
    body = Writer()

    def topic(w: Writer, _: object) -> None:
        w.compact_string(name).int32(-1).int16(-1)
        w.compact_array(sorted(assignment.items()), lambda w2, kv: w2.int32(kv[0]).compact_array(
            kv[1], Writer.int32).tags())
        w.compact_array(sorted(configs.items()),
                        lambda w2, kv: w2.compact_string(kv[0]).compact_string(kv[1]).tags())
        w.tags()

    body.compact_array([None], topic).int32(timeout_ms).boolean(False).tags()
    r = request(host, port, 19, 7, bytes(body.buf), timeout_s=timeout_ms / 1000 + 5)
    r.int32()
    errors: list[KafkaProtocolError] = []

    def result(r: Reader) -> None:
        tname = r.compact_string()
        r.uuid()
        code, msg = r.int16(), r.compact_string()
        r.int32()
        r.int16()

        def cfg(r: Reader) -> None:
            r.compact_string()
            r.compact_string()
            r.boolean()
            r.int8()
            r.boolean()
            r.tags()

        r.compact_array(cfg)
        r.tags()  # holds TopicConfigErrorCode (tag 0)
        if code:
            errors.append(_err(code, f"create topic {tname}", msg))

    r.compact_array(result)
    if errors:
        raise errors[0]


TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4  # ConfigResource types
CLUSTER_DEFAULT = ""  # a BROKER resource with no name: the cluster-wide default


def alter_topic_config(host: str, port: int, topic: str, configs: Mapping[str, str | None]) -> None:
    """IncrementalAlterConfigs v1: SET (value) or DELETE (None) topic configs."""
    alter_configs(host, port, TOPIC_RESOURCE, topic, configs)


def alter_configs(host: str, port: int, resource_type: int, name: str, configs: Mapping[str, str | None]) -> None:
    """IncrementalAlterConfigs v1 on one resource: SET (value) or DELETE (None) its configs
    (``BROKER_RESOURCE`` with ``CLUSTER_DEFAULT``: the dynamic cluster-wide default)."""
    body = Writer()
    what = f"alter config of {name}" if name else "alter cluster-wide config"

    def resource(w: Writer, _: object) -> None:
        w.int8(resource_type).compact_string(name)
        w.compact_array(sorted(configs.items()), lambda w2, kv: w2.compact_string(kv[0]).int8(
            0 if kv[1] is not None else 1).compact_string(kv[1]).tags())
        w.tags()

    body.compact_array([None], resource).boolean(False).tags()
    r = request(host, port, 44, 1, bytes(body.buf))
    r.int32()
    errors: list[KafkaProtocolError] = []

    def resp(r: Reader) -> None:
        code, msg = r.int16(), r.compact_string()
        r.int8()
        r.compact_string()
        r.tags()
        if code:
            errors.append(_err(code, what, msg))

    r.compact_array(resp)
    if errors:
        raise errors[0]


def alter_replica_log_dir(host: str, port: int, topic: str, partition: int, log_dir: str,
                          timeout_s: float = 5.0) -> None:
    """AlterReplicaLogDirs v2, sent to the broker that holds the replica: move it to ``log_dir``
    (the broker copies it there as a future replica, then swaps the two)."""
    body = Writer()
    body.compact_array([log_dir], lambda w, d: w.compact_string(d).compact_array(
        [topic], lambda w2, t: w2.compact_string(t).compact_array([partition], Writer.int32).tags()).tags())
    body.tags()
    r = request(host, port, 34, 2, bytes(body.buf), timeout_s)
    r.int32()
    _raise_partition_error(r, f"move {topic}-{partition} to {log_dir} on {host}:{port}", messages=False)


def _raise_partition_error(r: Reader, what: str, *, messages: bool) -> None:
    """Read a response's topics -> partitions results (name; index, error code[, message]) and
    raise the first partition's error, if any."""
    errors: list[KafkaProtocolError] = []

    def part(r: Reader) -> None:
        r.int32()
        code = r.int16()
        message = r.compact_string() if messages else None
        r.tags()
        if code:
            errors.append(_err(code, what, message))

    def top(r: Reader) -> None:
        r.compact_string()
        r.compact_array(part)
        r.tags()

    r.compact_array(top)
    if errors:
        raise errors[0]


@dataclass(frozen=True)
class ReplicaDir:
    """Where a broker keeps its replica of one partition."""

    log_dir: str
    future: bool  # a copy being made for a move (the current copy is in another dir)


def describe_replica_dirs(host: str, port: int, topic: str, partition: int,
                          timeout_s: float = 5.0) -> list[ReplicaDir]:
    """DescribeLogDirs v3 for one partition on the broker asked: each of its log dirs that holds a
    copy (current or future) of the replica."""
    body = Writer()
    body.compact_array([topic], lambda w, t: w.compact_string(t).compact_array([partition], Writer.int32).tags())
    body.tags()
    r = request(host, port, 35, 3, bytes(body.buf), timeout_s)
    r.int32()
    code = r.int16()
    if code:
        raise _err(code, f"describe log dirs on {host}:{port}")
    found: list[ReplicaDir] = []

    def result(r: Reader) -> None:
        dir_code, log_dir = r.int16(), r.compact_string() or ""

        def top(r: Reader) -> None:
            name = r.compact_string()

            def part(r: Reader) -> None:
                index = r.int32()
                r.int64()  # size
                r.int64()  # offset lag
                future = r.boolean()
                r.tags()
                if name == topic and index == partition and not dir_code:
                    found.append(ReplicaDir(log_dir, future))

            r.compact_array(part)
            r.tags()

        r.compact_array(top)
        r.tags()

    r.compact_array(result)
    return found


def alter_partition_reassignment(host: str, port: int, topic: str, partition: int,
                                 replicas: Sequence[int] | None, timeout_ms: int = 30000) -> None:
    """AlterPartitionReassignments v0 for one partition: reassign it to ``replicas`` (in order, the
    first is the preferred leader), or cancel the reassignment under way (``None``: a null list)."""
    def part(w: Writer, _: object) -> None:
        w.int32(partition)
        if replicas is None:
            w.uvarint(0)  # a null compact array: cancel
        else:
            w.compact_array(replicas, Writer.int32)
        w.tags()

    body = Writer().int32(timeout_ms)
    body.compact_array([topic], lambda w, t: w.compact_string(t).compact_array([None], part).tags())
    body.tags()
    r = request(host, port, 45, 0, bytes(body.buf), timeout_s=timeout_ms / 1000 + 5)
    r.int32()
    what = f"{'cancel reassignment of' if replicas is None else 'reassign'} {topic}-{partition}"
    code, msg = r.int16(), r.compact_string()
    if code:
        raise _err(code, what, msg)
    _raise_partition_error(r, what, messages=True)


def alter_partition(host: str, port: int, broker_id: int, broker_epoch: int, topic_id: bytes, partition: int,
                    leader_epoch: int, partition_epoch: int, isr_with_epochs: Sequence[tuple[int, int]],
                    recovering: bool, timeout_s: float = 10.0) -> None:
    """AlterPartition v3 (KIP-903's ``NewIsrWithEpochs``) for one partition, as broker ``broker_id``
    at ``broker_epoch`` would send it, to a controller's own listener. The request's error code, else
    the partition's, is raised (NEW_LEADER_ELECTED too: applied, but the leader moved). A Kafka broker
    sends it only as the partition's leader; this is the harness forging one, to hold the
    controller's checks to the model."""
    def part(w: Writer, _: object) -> None:
        w.int32(partition).int32(leader_epoch)
        w.compact_array(isr_with_epochs, lambda w, b: w.int32(b[0]).int64(b[1]).tags())
        w.int8(1 if recovering else 0).int32(partition_epoch).tags()

    body = Writer().int32(broker_id).int64(broker_epoch)
    body.compact_array([topic_id], lambda w, t: w.raw(t).compact_array([None], part).tags())
    body.tags()
    r = request(host, port, 56, 3, bytes(body.buf), timeout_s)
    r.int32()  # throttle time
    what = f"AlterPartition of partition {partition} as broker {broker_id}"
    code = r.int16()  # the request's: STALE_BROKER_EPOCH, NOT_CONTROLLER
    if code:
        raise _err(code, what)
    codes: list[int] = []

    def answer(r: Reader) -> None:
        r.int32()  # partition index
        codes.append(r.int16())
        r.int32(), r.int32(), r.int32_array(), r.int8(), r.int32()  # leader, leader epoch, ISR, recovery, epoch
        r.tags()

    r.compact_array(lambda r: (r.uuid(), r.compact_array(answer), r.tags()))
    if len(codes) != 1:
        raise KafkaProtocolError(f"{what}: {len(codes)} partition answers, expected 1")
    if codes[0]:
        raise _err(codes[0], what)


@dataclass(frozen=True)
class Reassignment:
    """A partition's reassignment under way, as the controller lists it."""

    replicas: tuple[int, ...]  # the current (union) replica set, in order
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def list_partition_reassignment(host: str, port: int, topic: str, partition: int,
                                timeout_s: float = 5.0) -> Reassignment | None:
    """ListPartitionReassignments v0 for one partition: its reassignment under way, or None."""
    body = Writer().int32(int(timeout_s * 1000))
    body.compact_array([topic], lambda w, t: w.compact_string(t).compact_array([partition], Writer.int32).tags())
    body.tags()
    r = request(host, port, 46, 0, bytes(body.buf), timeout_s)
    r.int32()
    code, msg = r.int16(), r.compact_string()
    if code:
        raise _err(code, f"list reassignments of {topic}-{partition}", msg)
    found: list[Reassignment] = []

    def top(r: Reader) -> None:
        name = r.compact_string()

        def part(r: Reader) -> None:
            index = r.int32()
            replicas, adding, removing = r.int32_array(), r.int32_array(), r.int32_array()
            r.tags()
            if name == topic and index == partition:
                found.append(Reassignment(_t(replicas), _s(adding), _s(removing)))

        r.compact_array(part)
        r.tags()

    r.compact_array(top)
    return found[0] if found else None
