"""Unsynced content of one file, kept as sorted dirty extents over its durable store.

The durable store is a plain file in the backing directory, reached by an open fd.
Live content = store bytes below ``base_limit`` (an unsynced truncate can cut the
store's tail), overlaid by the dirty extents, padded with zeros up to ``size``.

Extents are non-overlapping, non-adjacent, sorted by start, each a bytearray, so an
append (Kafka's common case) is one ``bytearray +=`` and a page overwritten through
mmap is one slice assignment.
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right

NO_LIMIT = 1 << 62


class Overlay:
    __slots__ = ("starts", "chunks", "size", "store_size", "base_limit")

    def __init__(self, store_size: int) -> None:
        self.starts: list[int] = []
        self.chunks: list[bytearray] = []
        self.size = store_size  # live size
        self.store_size = store_size  # size of the store file as last synced/loaded
        self.base_limit = NO_LIMIT  # store bytes at or past this offset read as zeros

    # -- state -------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        size_changed = self.size != self.store_size or self.base_limit < self.store_size
        return bool(self.chunks) or size_changed

    @property
    def unsynced_bytes(self) -> int:
        """Bytes written (or cut off) since the last sync."""
        cut = max(0, self.store_size - self.base_limit)
        return sum(len(c) for c in self.chunks) + cut

    def clear(self, store_size: int) -> None:
        self.starts.clear()
        self.chunks.clear()
        self.size = self.store_size = store_size
        self.base_limit = NO_LIMIT

    # -- mutation ----------------------------------------------------------------

    def write(self, off: int, data: bytes) -> None:
        n = len(data)
        if n == 0:
            return
        end = off + n
        if end > self.size:
            self.size = end
        starts, chunks = self.starts, self.chunks
        if chunks:
            last_end = starts[-1] + len(chunks[-1])
            if off == last_end:
                chunks[-1] += data  # append: the hot path
                return
            if off < last_end:
                self._write_general(off, end, data)
                return
        starts.append(off)
        chunks.append(bytearray(data))

    def _write_general(self, off: int, end: int, data: bytes) -> None:
        starts, chunks = self.starts, self.chunks
        i = bisect_right(starts, off) - 1
        # the first extent to merge overlaps or touches the new data from the left
        first = i if i >= 0 and starts[i] + len(chunks[i]) >= off else i + 1
        last = bisect_right(starts, end) - 1  # last extent starting at or before end
        if first > last:
            starts.insert(first, off)
            chunks.insert(first, bytearray(data))
            return
        s0 = starts[first]
        c0 = chunks[first]
        if first == last and s0 <= off and end <= s0 + len(c0):
            c0[off - s0 : end - s0] = data  # overwrite inside one extent
            return
        # Extents strictly between first and last are fully covered by the new data;
        # only the head of `first` and the tail of `last` survive.
        sl, cl = starts[last], chunks[last]
        tail = cl[end - sl :] if end - sl < len(cl) else b""
        if s0 < off:
            merged = c0
            del merged[off - s0 :]
            merged += data
        else:
            merged = bytearray(data)
        merged += tail
        new_start = min(s0, off)
        starts[first : last + 1] = [new_start]
        chunks[first : last + 1] = [merged]

    def truncate(self, new_size: int) -> None:
        if new_size < self.size:
            starts, chunks = self.starts, self.chunks
            i = bisect_left(starts, new_size)  # extents starting at/after new_size go
            del starts[i:], chunks[i:]
            if chunks and starts[-1] + len(chunks[-1]) > new_size:
                del chunks[-1][new_size - starts[-1] :]
            if new_size < self.base_limit:
                self.base_limit = new_size
        self.size = new_size

    # -- I/O ---------------------------------------------------------------------

    def read(self, fd: int | None, off: int, length: int) -> bytes:
        end = min(off + length, self.size)
        if off >= end:
            return b""
        starts, chunks = self.starts, self.chunks
        i = bisect_right(starts, off) - 1
        if i >= 0:
            s, c = starts[i], chunks[i]
            if end <= s + len(c):  # fully inside one dirty extent: the common tail read
                return bytes(c[off - s : end - s])
        out = bytearray(end - off)
        base_end = min(end, self.base_limit, self.store_size)
        if fd is not None and off < base_end:
            got = os.pread(fd, base_end - off, off)
            out[: len(got)] = got
        k = max(i, 0)
        while k < len(starts) and starts[k] < end:
            s, c = starts[k], chunks[k]
            a, b = max(s, off), min(s + len(c), end)
            if a < b:
                out[a - off : b - off] = c[a - s : b - s]
            k += 1
        return bytes(out)

    def flush_to(self, fd: int) -> int:
        """Write the unsynced state into the store; returns bytes written."""
        written = 0
        current = self.store_size
        if self.base_limit < current:
            os.ftruncate(fd, self.base_limit)
            current = self.base_limit
        for s, c in zip(self.starts, self.chunks, strict=True):
            view = memoryview(c)
            pos = 0
            while pos < len(view):
                pos += os.pwrite(fd, view[pos:], s + pos)
            written += len(c)
            current = max(current, s + len(c))
        if current != self.size:
            os.ftruncate(fd, self.size)
        self.clear(self.size)
        return written
