"""Kafka's on-disk record batches (magic 2), read without a Kafka client.

Two readers need them: the controller's metadata log (what the partition record says, e.g. its
LeaderRecoveryState, which no client API returns) and a broker's partition log after a power cut
(how many records survived on its disk). Both stop at the first batch that is incomplete or fails
its CRC -- where Kafka's own log recovery truncates.

Layout (the protocol's public record format): baseOffset int64, batchLength int32 (bytes after
it), partitionLeaderEpoch int32, magic int8, crc uint32 (CRC-32C of everything after it),
attributes int16, lastOffsetDelta int32, then timestamps, producer fields and the records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from pytest_elr.sut.produce import crc32c  # one CRC-32C: the batches we write and those we read

_HEAD = struct.Struct(">qiibIhi")  # baseOffset .. lastOffsetDelta
_RECORDS_AT = 61  # the records start after the fixed batch header
_CONTROL = 0x20
_COMPRESSION = 0x07


@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    attributes: int
    records_data: bytes  # the records, as written (compressed when ``compression`` is not 0)
    count: int
    end: int  # the position just after the batch in the data it was read from

    @property
    def control(self) -> bool:
        return bool(self.attributes & _CONTROL)

    @property
    def compression(self) -> int:
        return self.attributes & _COMPRESSION


def batches(data: bytes, start: int = 0) -> Iterator[Batch]:
    """Each complete, valid batch from ``start``; stops at the first one that is cut short, of
    another magic, or whose CRC does not match."""
    pos = start
    while pos + _RECORDS_AT <= len(data):
        base, length, _epoch, magic, crc, attributes, last_delta = _HEAD.unpack_from(data, pos)
        end = pos + 12 + length
        if magic != 2 or length < _RECORDS_AT - 12 or end > len(data):
            return
        if crc32c(data[pos + 21:end]) != crc:
            return
        (count,) = struct.unpack_from(">i", data, pos + _RECORDS_AT - 4)
        yield Batch(base, base + last_delta, attributes, data[pos + _RECORDS_AT:end], count, end)
        pos = end


def log_end_offset(segments: list[tuple[int, bytes]]) -> int:
    """The log end offset Kafka's recovery would find in these segments (base offset, bytes),
    in order: one past the last valid batch; an empty segment ends at its base offset. A segment
    cut short ends the log there (recovery deletes the segments after it)."""
    end = segments[0][0] if segments else 0
    for base, data in segments:
        end, valid = max(end, base), 0
        for batch in batches(data):
            end, valid = batch.last_offset + 1, batch.end
        if valid < len(data):
            break
    return end


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (record fields) and the position after it."""
    shift = raw = 0
    while True:
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def record_values(batch: Batch) -> Iterator[bytes]:
    """The value of each record of an uncompressed batch (the metadata log is never compressed)."""
    if batch.compression:
        raise ValueError(f"batch at offset {batch.base_offset} is compressed (codec {batch.compression})")
    data, pos = batch.records_data, 0
    for _ in range(batch.count):
        length, pos = _varint(data, pos)
        end = pos + length
        pos += 1  # attributes
        _, pos = _varint(data, pos)  # timestamp delta
        _, pos = _varint(data, pos)  # offset delta
        key_length, pos = _varint(data, pos)
        pos += max(0, key_length)
        value_length, pos = _varint(data, pos)
        if value_length >= 0:
            yield data[pos:pos + value_length]
        pos = end
