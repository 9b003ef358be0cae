"""The controller's metadata log, replayed for the records of one partition.

The partition record the controller keeps has a field no client API returns: LeaderRecoveryState
(RECOVERING after an unclean election, until the leader reports a follower back in the ISR). It
is read here from where the controller writes it: the ``__cluster_metadata`` log in its data dir,
parsed with :mod:`pytest_elr.sut.record_batches` and replayed as Kafka's
``PartitionRegistration.merge`` does (a change record carries only what changed; every change
bumps the partition epoch, a new leader the leader epoch).

Brokers' epochs are read from ``RegisterBrokerRecord`` (and dropped by ``UnregisterBrokerRecord``).
Record layouts from Kafka's public metadata schemas (``TopicRecord``, ``PartitionRecord``,
``PartitionChangeRecord``, ``ClearElrRecord``; every version flexible). ``ClearElrRecord`` (key 28,
one field, the topic's name, empty for every topic) follows a change of ``min.insync.replicas``:
it empties ELR and LastKnownElr of the topic's partitions (Kafka 4.3.1, dumped with
``DumpLogSegments --cluster-metadata-decoder``: ``{"type":"CLEAR_ELR_RECORD","data":
{"topicName":"same-a66592"}}`` right after the topic's ``min.insync.replicas`` config record).

Only what each segment file gained since the last refresh is copied out (inside the container,
through the FUSE layer when there is one) and read through Docker's archive API, binary-safe
(``KafkaNode.read_tails``), then parsed.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pytest_elr.sut.config import DATA_DIR
from pytest_elr.sut.errors import KafkaProtocolError
from pytest_elr.sut.record_batches import batches, record_values
from pytest_elr.sut.wire import Reader

if TYPE_CHECKING:
    from pytest_elr.sut.node import KafkaNode

METADATA_DIR = f"{DATA_DIR}/__cluster_metadata-0"
REGISTER_BROKER_RECORD, UNREGISTER_BROKER_RECORD = 0, 1
TOPIC_RECORD, PARTITION_RECORD, PARTITION_CHANGE_RECORD, CLEAR_ELR_RECORD = 2, 3, 5, 28
NO_LEADER, NO_LEADER_CHANGE = -1, -2
RECOVERING = 1


@dataclass(frozen=True)
class Registration:
    """One partition as the controller recorded it, after one metadata record."""

    leader: int | None
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    recovering: bool
    #: the assigned replicas, and those a reassignment under way adds and removes (empty: none)
    replicas: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    #: the ISR in the record's order (``isr`` is sorted): Kafka writes a record for a new order alone
    isr_order: tuple[int, ...] = ()


class MetadataLog:
    """One controller's metadata log, replayed as it grows."""

    def __init__(self, node: KafkaNode) -> None:
        self.node = node
        self._read_to: dict[str, int] = {}  # segment file's name -> bytes replayed
        self._staging = f"/run/kafka/metadata-read-{secrets.token_hex(4)}"  # this reader's copies
        self._topics: dict[bytes, str] = {}  # topic id -> name
        self._states: dict[tuple[str, int], list[Registration]] = {}
        self._broker_epochs: dict[int, int] = {}  # broker -> the epoch of its latest registration

    def topic_id(self, topic: str) -> bytes | None:
        """The topic's id as its TopicRecord gave it, at the last ``refresh`` (None: not seen)."""
        return next((tid for tid, name in self._topics.items() if name == topic), None)

    def broker_epochs(self) -> dict[int, int]:
        """Each registered broker's epoch (its latest RegisterBrokerRecord's, at the last
        ``refresh``): what KIP-903's checks compare an AlterPartition's epochs to."""
        return dict(self._broker_epochs)

    def registrations(self, topic: str, partition: int = 0) -> list[Registration]:
        """Every state of the partition the log holds so far, oldest first (refreshed first)."""
        self.refresh()
        return self.replayed(topic, partition)

    def replayed(self, topic: str, partition: int = 0) -> list[Registration]:
        """Every state of the partition the log held at the last ``refresh``, oldest first."""
        return list(self._states.get((topic, partition), ()))

    def refresh(self) -> None:
        """Replay what was appended since the last refresh (batches are replayed whole or not at all:
        one still being written is read again next time)."""
        tails = self.node.read_tails(METADATA_DIR, ".log", self._read_to, self._staging)
        for name, data in sorted(tails.items()):  # segments by base offset: their names are its digits
            start = self._read_to.get(name, 0)
            for batch in batches(data):
                if not batch.control:
                    try:
                        values = list(record_values(batch))
                    except ValueError as exc:  # a compressed batch: this reader cannot replay the log
                        raise KafkaProtocolError(f"metadata log {METADATA_DIR}/{name}: {exc}") from None
                    for value in values:
                        self._replay(value)
                self._read_to[name] = start + batch.end

    def _replay(self, value: bytes) -> None:
        r = Reader(value)
        try:
            r.uvarint()  # frame version
            api_key, version = r.uvarint(), r.uvarint()
            if api_key == REGISTER_BROKER_RECORD:
                broker = r.int32()
                if version >= 2:
                    r.boolean()  # IsMigratingZkBroker
                r.uuid()  # IncarnationId
                self._broker_epochs[broker] = r.int64()
            elif api_key == UNREGISTER_BROKER_RECORD:
                self._broker_epochs.pop(r.int32(), None)
            elif api_key == TOPIC_RECORD:
                name = r.compact_string() or ""
                self._topics[r.uuid()] = name
            elif api_key == PARTITION_RECORD:
                self._partition_record(r, version)
            elif api_key == PARTITION_CHANGE_RECORD:
                self._change_record(r)
            elif api_key == CLEAR_ELR_RECORD:
                self._clear_elr(r.compact_string() or "")
        except KafkaProtocolError:
            pass  # a record of a layout this reader does not know: nothing about our partitions

    def _partition_record(self, r: Reader, version: int) -> None:
        partition, topic = r.int32(), self._topics.get(r.uuid())
        replicas = r.int32_array() or []
        isr = r.int32_array() or []
        removing = r.int32_array() or []
        adding = r.int32_array() or []
        leader = r.int32()
        leader_epoch, partition_epoch = r.int32(), r.int32()
        if version >= 1:
            r.compact_array(Reader.uuid)  # directories
        tags = _tags(r)
        if topic is None:
            return
        state = Registration(
            leader=None if leader < 0 else leader, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
            isr=tuple(sorted(isr)), elr=_ids(tags.get(1)), last_known_elr=_ids(tags.get(2)),
            recovering=tags.get(0, b"\x00")[0] == RECOVERING,
            replicas=tuple(replicas), adding=tuple(sorted(adding)), removing=tuple(sorted(removing)),
            isr_order=tuple(isr),
        )
        self._states[(topic, partition)] = [state]

    def _change_record(self, r: Reader) -> None:
        partition, topic = r.int32(), self._topics.get(r.uuid())
        tags = _tags(r)
        history = self._states.get((topic, partition)) if topic is not None else None
        if not history:
            return
        state = history[-1]
        leader = Reader(tags[1]).int32() if 1 in tags else NO_LEADER_CHANGE
        recovery = tags[5][0] if 5 in tags else None
        history.append(replace(
            state,
            leader=state.leader if leader == NO_LEADER_CHANGE else (None if leader == NO_LEADER else leader),
            leader_epoch=state.leader_epoch + (leader != NO_LEADER_CHANGE),
            partition_epoch=state.partition_epoch + 1,
            isr=_ids(tags[0]) if 0 in tags else state.isr,
            isr_order=tuple(Reader(tags[0]).int32_array() or []) if 0 in tags else state.isr_order,
            elr=_ids(tags[6]) if 6 in tags else state.elr,
            last_known_elr=_ids(tags[7]) if 7 in tags else state.last_known_elr,
            recovering=state.recovering if recovery is None or recovery == 0xFF else recovery == RECOVERING,
            # a list tag absent is null, "unchanged" (``PartitionRegistration.merge``); the
            # reassignment's end writes both lists empty
            replicas=tuple(Reader(tags[2]).int32_array() or []) if 2 in tags else state.replicas,
            removing=_ids(tags[3]) if 3 in tags else state.removing,
            adding=_ids(tags[4]) if 4 in tags else state.adding,
        ))

    def _clear_elr(self, topic: str) -> None:
        for (name, _), history in self._states.items():
            # Kafka merges a change record into each partition whose ELR or LastKnownElr is not
            # empty (``ReplicationControlManager.removeTopicElrs``): its partition epoch moves.
            last = history[-1] if history else None
            if last is not None and (not topic or name == topic) and (last.elr or last.last_known_elr):
                history.append(replace(last, elr=(), last_known_elr=(), partition_epoch=last.partition_epoch + 1))


def _tags(r: Reader) -> dict[int, bytes]:
    """A flexible message's tagged fields, raw, by tag."""
    out: dict[int, bytes] = {}
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        out[tag] = r.raw(r.uvarint())
    return out


def _ids(raw: bytes | None) -> tuple[int, ...]:
    """A tagged ``[]int32`` field (compact, nullable) as a sorted tuple; absent or null: empty."""
    if raw is None:
        return ()
    return tuple(sorted(Reader(raw).int32_array() or []))
