"""Kafka wire-protocol primitives: just enough for the observation and admin requests.

Only flexible (KIP-482) request versions are used: request header v2
(client id as a classic int16 string, then tagged fields) and response
header v1. Written from the protocol's public message schemas.
"""

from __future__ import annotations

import itertools
import socket
import struct
from collections.abc import Callable, Iterable
from typing import TypeVar

from pytest_elr.sut.errors import KafkaProtocolError

T = TypeVar("T")
CLIENT_ID = b"pytest-elr"


class Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, v: int) -> Writer:
        self.buf += struct.pack(">b", v)
        return self

    def int16(self, v: int) -> Writer:
        self.buf += struct.pack(">h", v)
        return self

    def int32(self, v: int) -> Writer:
        self.buf += struct.pack(">i", v)
        return self

    def int64(self, v: int) -> Writer:
        self.buf += struct.pack(">q", v)
        return self

    def boolean(self, v: bool) -> Writer:
        return self.int8(1 if v else 0)

    def uvarint(self, v: int) -> Writer:
        while True:
            b = v & 0x7F
            v >>= 7
            if v:
                self.buf.append(b | 0x80)
            else:
                self.buf.append(b)
                return self

    def compact_string(self, s: str | None) -> Writer:
        if s is None:
            return self.uvarint(0)
        raw = s.encode()
        return self.uvarint(len(raw) + 1).raw(raw)

    def compact_array(self, items: Iterable[T], write: Callable[[Writer, T], object]) -> Writer:
        items = list(items)
        self.uvarint(len(items) + 1)
        for it in items:
            write(self, it)
        return self

    def tags(self) -> Writer:
        return self.uvarint(0)  # no tagged fields

    def raw(self, b: bytes) -> Writer:
        self.buf += b
        return self


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise KafkaProtocolError("truncated response")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def int8(self) -> int:
        return int(struct.unpack(">b", self._take(1))[0])

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def boolean(self) -> bool:
        return self.int8() != 0

    def uuid(self) -> bytes:
        return self._take(16)

    def raw(self, n: int) -> bytes:
        return self._take(n)

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._take(n - 1).decode()

    def compact_array(self, read: Callable[[Reader], T]) -> list[T] | None:
        n = self.uvarint()
        return None if n == 0 else [read(self) for _ in range(n - 1)]

    def int32_array(self) -> list[int] | None:
        return self.compact_array(Reader.int32)

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())


_correlation = itertools.count(1)


def request(host: str, port: int, api_key: int, api_version: int, body: bytes,
            timeout_s: float = 5.0) -> Reader:
    """One request on a fresh connection; returns a reader positioned at the body.

    A fresh connection per request keeps this free of state: a broker that
    was paused, cut or restarted cannot leave a half-read socket behind.
    """
    cid = next(_correlation) & 0x7FFFFFFF
    hdr = Writer().int16(api_key).int16(api_version).int32(cid)
    hdr.int16(len(CLIENT_ID)).raw(CLIENT_ID).tags()
    payload = bytes(hdr.buf) + body
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.settimeout(timeout_s)
            s.sendall(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", _recv_exact(s, 4))[0]
            data = _recv_exact(s, size)
    except OSError as e:
        raise KafkaProtocolError(f"api {api_key} to {host}:{port}: {e}") from e
    r = Reader(data)
    if r.int32() != cid:
        raise KafkaProtocolError(f"api {api_key} to {host}:{port}: correlation id mismatch")
    r.tags()
    return r


def _recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed by broker")
        out += chunk
    return bytes(out)
