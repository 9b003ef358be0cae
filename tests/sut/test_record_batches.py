"""Kafka's on-disk record batches and the controller's metadata log, read without a cluster:
batches are written here by the format's rules and read back."""

from __future__ import annotations

import struct
import uuid

from pytest_elr.sut.metadata_log import MetadataLog
from pytest_elr.sut.record_batches import crc32c, log_end_offset
from pytest_elr.sut.wire import Writer


def _zigzag(w: Writer, v: int) -> Writer:
    return w.uvarint((v << 1) ^ (v >> 63))


def batch(base_offset: int, values: list[bytes], control: bool = False) -> bytes:
    """A magic-2 record batch of uncompressed records, as a Kafka log holds it."""
    records = b""
    for i, value in enumerate(values):
        body = Writer().int8(0)
        _zigzag(body, 0)  # timestamp delta
        _zigzag(body, i)  # offset delta
        _zigzag(body, -1)  # no key
        _zigzag(body, len(value)).raw(value)
        _zigzag(body, 0)  # no headers
        records += bytes(_zigzag(Writer(), len(body.buf)).buf) + bytes(body.buf)
    after_crc = struct.pack(">hiqqqhii", 0x20 if control else 0, len(values) - 1, 0, 0, -1, -1, -1,
                            len(values)) + records
    head = struct.pack(">ibI", 0, 2, crc32c(after_crc))  # partition leader epoch, magic, crc
    return struct.pack(">qi", base_offset, len(head) + len(after_crc)) + head + after_crc


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value of CRC-32C


def test_log_end_offset_stops_where_recovery_truncates() -> None:
    log = batch(0, [b"a", b"b", b"c"]) + batch(3, [b"d"])
    assert log_end_offset([(0, log)]) == 4
    assert log_end_offset([(0, log[:-5])]) == 3  # the last batch cut short
    corrupt = bytearray(log)
    corrupt[-1] ^= 0xFF  # a flipped bit: the CRC no longer matches
    assert log_end_offset([(0, bytes(corrupt))]) == 3
    assert log_end_offset([(0, b"")]) == 0
    assert log_end_offset([]) == 0
    # An empty active segment ends at its base offset; a cut segment ends the log.
    assert log_end_offset([(0, log), (4, b"")]) == 4
    assert log_end_offset([(0, log[:-5]), (4, batch(4, [b"e"]))]) == 3


def _record(api_key: int, version: int, body: Writer) -> bytes:
    return bytes(Writer().uvarint(1).uvarint(api_key).uvarint(version).buf) + bytes(body.buf)


def _ids(w: Writer, ids: list[int] | None) -> Writer:
    return w.uvarint(0) if ids is None else w.compact_array(ids, Writer.int32)


def _tagged(fields: dict[int, bytes]) -> Writer:
    w = Writer().uvarint(len(fields))
    for tag, raw in sorted(fields.items()):
        w.uvarint(tag).uvarint(len(raw)).raw(raw)
    return w


class _Controller:
    """Stands in for a controller's container: its metadata log is in memory."""

    def __init__(self, log: bytes) -> None:
        self.log = log

    def read_tails(self, directory: str, suffix: str, starts: dict[str, int], staging: str) -> dict[str, bytes]:
        assert directory.endswith("__cluster_metadata-0") and suffix == ".log"
        return {"00000000000000000000.log": self.log[starts.get("00000000000000000000.log", 0):]}


def test_metadata_log_replays_leader_recovery_state() -> None:
    topic_id = uuid.uuid4().bytes
    topic = _record(2, 0, Writer().compact_string("t").raw(topic_id).tags())
    partition = Writer().int32(0).raw(topic_id)
    for ids in ([0, 1], [0, 1], None, None):
        _ids(partition, ids)
    partition.int32(0).int32(0).int32(0).compact_array([], Writer.raw)
    partition_rec = _record(3, 1, partition.raw(bytes(_tagged({}).buf)))

    def change(fields: dict[int, bytes]) -> bytes:
        body = Writer().int32(0).raw(topic_id).raw(bytes(_tagged(fields).buf))
        return _record(5, 2, body)

    def ids(values: list[int]) -> bytes:
        return bytes(_ids(Writer(), values).buf)

    unclean = change({0: ids([1]), 1: struct.pack(">i", 1), 5: b"\x01"})
    recovered = change({0: ids([0, 1]), 5: b"\x00"})
    log = batch(0, [topic, partition_rec]) + batch(2, [b"\x00\x00"], control=True) + batch(3, [unclean])
    controller = _Controller(log)
    meta = MetadataLog(controller)  # type: ignore[arg-type]
    states = meta.registrations("t")
    assert [(s.leader, s.leader_epoch, s.partition_epoch, s.isr, s.recovering) for s in states] == [
        (0, 0, 0, (0, 1), False), (1, 1, 1, (1,), True)]
    controller.log += batch(4, [recovered])  # appended later: replayed from where the last read ended
    assert [(s.isr, s.recovering) for s in meta.registrations("t")][-1] == ((0, 1), False)
    assert meta.registrations("other") == []


def test_metadata_log_replays_clear_elr_records() -> None:
    """A min.insync.replicas change writes a ClearElrRecord (key 28, the topic's name) on Kafka 4.3.1."""
    topic_id = uuid.uuid4().bytes
    topic = _record(2, 0, Writer().compact_string("t").raw(topic_id).tags())
    partition = Writer().int32(0).raw(topic_id)
    for ids in ([0, 1, 2], [0, 1, 2], None, None):
        _ids(partition, ids)
    partition.int32(0).int32(0).int32(0).compact_array([], Writer.raw)
    partition_rec = _record(3, 1, partition.raw(bytes(_tagged({}).buf)))
    shrink = _record(5, 2, Writer().int32(0).raw(topic_id).raw(bytes(_tagged(
        {0: bytes(_ids(Writer(), [0]).buf), 6: bytes(_ids(Writer(), [2]).buf)}).buf)))
    other, mine = (_record(28, 0, Writer().compact_string(name).tags()) for name in ("u", "t"))
    meta = MetadataLog(_Controller(batch(0, [topic, partition_rec, shrink, other])))  # type: ignore[arg-type]
    assert [(s.isr, s.elr) for s in meta.registrations("t")][-1] == ((0,), (2,))
    meta.node.log += batch(4, [mine])  # type: ignore[attr-defined]
    assert [(s.isr, s.elr, s.last_known_elr) for s in meta.registrations("t")][-1] == ((0,), (), ())
    # Kafka merges a change record into the partition (ReplicationControlManager.removeTopicElrs):
    # the partition epoch moves, the leader epoch does not; with the ELR already empty, nothing does.
    assert [(s.leader_epoch, s.partition_epoch) for s in meta.registrations("t")] == [(0, 0), (0, 1), (0, 2)]
    meta.node.log += batch(5, [mine])  # type: ignore[attr-defined]
    assert len(meta.registrations("t")) == 3


def test_metadata_log_replays_a_reassignment() -> None:
    """A reassignment's change record sets Replicas, AddingReplicas and RemovingReplicas (tags 2, 4,
    3); its completion writes the final replicas and both lists empty; a record without them leaves
    them as they were (null is "unchanged": ``PartitionRegistration.merge``)."""
    topic_id = uuid.uuid4().bytes
    topic = _record(2, 0, Writer().compact_string("t").raw(topic_id).tags())
    partition = Writer().int32(0).raw(topic_id)
    for ids in ([0, 1, 2], [0, 1, 2], [], []):
        _ids(partition, ids)
    partition.int32(0).int32(0).int32(0).compact_array([], Writer.raw)
    partition_rec = _record(3, 1, partition.raw(bytes(_tagged({}).buf)))

    def change(fields: dict[int, list[int]]) -> bytes:
        raw = {tag: bytes(_ids(Writer(), ids).buf) for tag, ids in fields.items()}
        return _record(5, 2, Writer().int32(0).raw(topic_id).raw(bytes(_tagged(raw).buf)))

    start = change({2: [1, 2, 3, 0], 3: [0], 4: [3]})
    joined = change({0: [0, 1, 2, 3]})
    done = change({0: [1, 2, 3], 2: [1, 2, 3], 3: [], 4: []})
    meta = MetadataLog(_Controller(batch(0, [topic, partition_rec, start, joined, done])))  # type: ignore[arg-type]
    assert [(s.replicas, s.adding, s.removing) for s in meta.registrations("t")] == [
        ((0, 1, 2), (), ()), ((1, 2, 3, 0), (3,), (0,)), ((1, 2, 3, 0), (3,), (0,)), ((1, 2, 3), (), ())]


def test_a_batch_of_registration_reads_copies_each_controller_s_log_once() -> None:
    """``refresh_metadata_logs`` replays each controller's log once; the ``registration`` reads of a
    batch (one per partition of an observation) then copy nothing more. A controller whose log
    could not be read is skipped with its reason, as a read of its own would."""
    from pytest_elr.sut.admin import PartitionState
    from pytest_elr.sut.client import ClusterClient
    from pytest_elr.sut.errors import SutError

    topic_id = uuid.uuid4().bytes
    topic = _record(2, 0, Writer().compact_string("t").raw(topic_id).tags())
    records = [topic]
    for p in range(3):
        partition = Writer().int32(p).raw(topic_id)
        for ids in ([0, 1], [0, 1], None, None):
            _ids(partition, ids)
        partition.int32(0).int32(0).int32(0).compact_array([], Writer.raw)
        records.append(_record(3, 1, partition.raw(bytes(_tagged({}).buf))))

    class Counted(_Controller):
        reads = 0

        def read_tails(self, directory: str, suffix: str, starts: dict[str, int], staging: str) -> dict[str, bytes]:
            self.reads += 1
            return super().read_tails(directory, suffix, starts, staging)

    class Broken(_Controller):
        def read_tails(self, directory: str, suffix: str, starts: dict[str, int], staging: str) -> dict[str, bytes]:
            raise SutError("container gone")

    nodes = {0: Counted(batch(0, records)), 1: Counted(batch(0, records)), 2: Broken(b"")}
    logs = {c: MetadataLog(node) for c, node in nodes.items()}  # type: ignore[arg-type]
    cluster = type("C", (), {"controller_ids": [0, 1, 2], "metadata_log": lambda self, c: logs[c]})()
    client = ClusterClient(cluster)  # type: ignore[arg-type]
    refreshed = client.refresh_metadata_logs()
    assert refreshed == {2: "controller 2's log unreadable (container gone)"}
    for p in range(3):
        state = PartitionState("t", p, 0, 0, (0, 1), (0, 1), (), (), ())
        reg = client.registration(state, refreshed)
        assert reg is not None and reg.partition_epoch == 0
    assert [nodes[0].reads, nodes[1].reads] == [1, 1]  # type: ignore[attr-defined]
    assert client.registration(PartitionState("t", 0, 1, 1, (0, 1), (1,), (), (), ()), refreshed) is None
    assert "controller 2's log unreadable (container gone)" in client.registration_miss


def test_the_controllers_logs_are_refreshed_at_once() -> None:
    """``refresh_metadata_logs``: every controller's read under way together (each fake read waits for
    the others: read one after another, the first would wait alone and fail)."""
    import threading

    from pytest_elr.sut.client import ClusterClient

    together = threading.Barrier(3, timeout=10)

    class Waiting(_Controller):
        def read_tails(self, directory: str, suffix: str, starts: dict[str, int], staging: str) -> dict[str, bytes]:
            together.wait()
            return super().read_tails(directory, suffix, starts, staging)

    logs = {c: MetadataLog(Waiting(b"")) for c in (0, 1, 2)}  # type: ignore[arg-type]
    cluster = type("C", (), {"controller_ids": [0, 1, 2], "metadata_log": lambda self, c: logs[c]})()
    assert ClusterClient(cluster).refresh_metadata_logs() == {}  # type: ignore[arg-type]


def test_metadata_log_reads_broker_epochs_topic_ids_and_the_isr_s_order() -> None:
    """What a forged AlterPartition is built from (``ClusterClient.forge_alter_partition``): each
    broker's latest RegisterBrokerRecord epoch (version 2 and on carry IsMigratingZkBroker first),
    none once UnregisterBrokerRecord drops it; the topic's id; the ISR in the record's order."""
    def register(broker: int, epoch: int, version: int) -> bytes:
        body = Writer().int32(broker)
        if version >= 2:
            body.boolean(False)
        return _record(0, version, body.raw(uuid.uuid4().bytes).int64(epoch).raw(b"\x00" * 8))

    topic_id = uuid.uuid4().bytes
    topic = _record(2, 0, Writer().compact_string("t").raw(topic_id).tags())
    partition = Writer().int32(0).raw(topic_id)
    for ids in ([0, 1, 2], [2, 0, 1], None, None):
        _ids(partition, ids)
    partition.int32(2).int32(0).int32(0).compact_array([], Writer.raw)
    partition_rec = _record(3, 1, partition.raw(bytes(_tagged({}).buf)))
    meta = MetadataLog(_Controller(batch(0, [register(0, 5, 3), register(1, 6, 1), register(2, 7, 4), topic,
                                             partition_rec])))  # type: ignore[arg-type]
    assert [s.isr_order for s in meta.registrations("t")] == [(2, 0, 1)]
    assert meta.broker_epochs() == {0: 5, 1: 6, 2: 7}
    assert meta.topic_id("t") == topic_id and meta.topic_id("u") is None
    new_isr = bytes(_ids(Writer(), [1, 2]).buf)
    shrink = _record(5, 2, Writer().int32(0).raw(topic_id).raw(bytes(_tagged({0: new_isr}).buf)))
    unregister = _record(1, 0, Writer().int32(1).int64(6).tags())
    meta.node.log += batch(5, [register(0, 9, 3), unregister, shrink])  # type: ignore[attr-defined]
    assert [s.isr_order for s in meta.registrations("t")][-1] == (1, 2)
    assert meta.broker_epochs() == {0: 9, 2: 7}


def test_a_forged_alter_partition_is_built_from_the_active_controller_s_log(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The leader, its epochs and every broker epoch as the active controller's log has them; the
    same members in the controller's order (a new order alone is a change to Kafka), new members
    as given; ``stale_broker_epoch`` one below the sender's own."""
    import pytest

    from pytest_elr.sut import admin
    from pytest_elr.sut.client import ClusterClient
    from pytest_elr.sut.errors import KafkaProtocolError

    topic_id = uuid.uuid4().bytes
    register = [_record(0, 3, Writer().int32(b).boolean(False).raw(uuid.uuid4().bytes).int64(10 + b).raw(b"\x00" * 8))
                for b in (0, 1, 2)]
    topic = _record(2, 0, Writer().compact_string("t").raw(topic_id).tags())
    partition = Writer().int32(0).raw(topic_id)
    for ids in ([0, 1, 2], [2, 0, 1], None, None):
        _ids(partition, ids)
    partition.int32(2).int32(4).int32(9).compact_array([], Writer.raw)
    log = MetadataLog(_Controller(batch(0, [*register, topic,
                                            _record(3, 1, partition.raw(bytes(_tagged({}).buf)))])))  # type: ignore[arg-type]
    node = type("N", (), {"controller_port": 4321})()
    cluster = type("C", (), {"metadata_log": lambda self, c: log, "node": lambda self, c: node})()
    client = ClusterClient(cluster)  # type: ignore[arg-type]
    monkeypatch.setattr(client, "active_controller", lambda: 3)
    sent: list[tuple[object, ...]] = []
    monkeypatch.setattr(admin, "alter_partition", lambda *args: sent.append(args))

    client.forge_alter_partition("t", 0, None, False, False)
    client.forge_alter_partition("t", 0, [0, 1, 2], True, True)
    client.forge_alter_partition("t", 0, [1, 2], False, False)
    assert [(s[1], s[2], s[3], s[4], s[6], s[7], s[8], s[9]) for s in sent] == [
        (4321, 2, 12, topic_id, 4, 9, [(2, 12), (0, 10), (1, 11)], False),
        (4321, 2, 11, topic_id, 4, 9, [(2, 12), (0, 10), (1, 11)], True),
        (4321, 2, 12, topic_id, 4, 9, [(1, 11), (2, 12)], False),
    ]
    with pytest.raises(KafkaProtocolError, match="no u-0"):
        client.forge_alter_partition("u", 0, None, False, False)
    monkeypatch.setattr(client, "active_controller", lambda: None)
    with pytest.raises(KafkaProtocolError, match="no controller is active"):
        client.forge_alter_partition("t", 0, None, False, False)
