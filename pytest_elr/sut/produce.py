"""A minimal synchronous producer (Produce v9, record batch v2) for tests of the SUT.

Why here: Kafka shrinks the ISR only when a follower falls *behind* the
leader's log end (a follower with LEO == leader LEO counts as caught up even
if it stopped fetching), so the SUT's own tests need a few records to make a
fault visible. The real workload (history, unique values) is another module's
job; this one only appends records and reports the base offset.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pytest_elr.sut.errors import KafkaProtocolError
from pytest_elr.sut.wire import Reader, Writer, request


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _zigzag(v: int) -> int:
    return (v << 1) ^ (v >> 63)


def _varint(w: Writer, v: int) -> None:
    w.uvarint(_zigzag(v))


def record_batch(values: Sequence[bytes], now_ms: int | None = None) -> bytes:
    ts = int(time.time() * 1000) if now_ms is None else now_ms
    recs = Writer()
    for i, v in enumerate(values):
        body = Writer().int8(0)
        _varint(body, 0)  # timestamp delta
        _varint(body, i)  # offset delta
        _varint(body, -1)  # null key
        _varint(body, len(v))
        body.raw(v)
        _varint(body, 0)  # no headers
        _varint(recs, len(body.buf))
        recs.raw(bytes(body.buf))
    # The CRC covers attributes .. end of records.
    tail = Writer().int16(0).int32(len(values) - 1).int64(ts).int64(ts)
    tail.int64(-1).int16(-1).int32(-1).int32(len(values)).raw(bytes(recs.buf))
    crc = crc32c(bytes(tail.buf))
    after_length = Writer().int32(-1).int8(2).raw(crc.to_bytes(4, "big")).raw(bytes(tail.buf))
    return bytes(Writer().int64(0).int32(len(after_length.buf)).raw(bytes(after_length.buf)).buf)


def produce(host: str, port: int, topic: str, partition: int, values: Sequence[bytes],
            acks: int = -1, timeout_ms: int = 10000) -> int:
    """Append ``values`` in one batch; returns the base offset. ``acks``: -1 (all) or 1."""
    if acks not in (-1, 1):
        raise ValueError("acks must be -1 (all) or 1")
    batch = record_batch(values)
    body = Writer().compact_string(None).int16(acks).int32(timeout_ms)

    def part(w: Writer, _: object) -> None:
        w.int32(partition).uvarint(len(batch) + 1).raw(batch).tags()

    body.compact_array([topic], lambda w, t: w.compact_string(t).compact_array([None], part).tags())
    body.tags()
    r = request(host, port, 0, 9, bytes(body.buf), timeout_s=timeout_ms / 1000 + 5)
    out: list[int] = []

    def presp(r: Reader) -> None:
        r.int32()
        code = r.int16()
        base = r.int64()
        r.int64()
        r.int64()
        r.compact_array(lambda r: (r.int32(), r.compact_string(), r.tags()))
        msg = r.compact_string()
        r.tags()
        if code:
            from pytest_elr.sut.admin import ERRORS
            raise KafkaProtocolError(
                f"produce to {topic}-{partition}: {ERRORS.get(code, code)} {msg or ''}", code)
        out.append(base)

    r.compact_array(lambda r: (r.compact_string(), r.compact_array(presp), r.tags()))
    return out[0]
