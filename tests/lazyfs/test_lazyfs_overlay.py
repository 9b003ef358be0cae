"""The dirty-extent overlay against a plain bytearray, without FUSE."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_elr.lazyfs.overlay import Overlay

ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 5000), st.binary(min_size=1, max_size=700)),
        st.tuples(st.just("append"), st.binary(min_size=1, max_size=300)),
        st.tuples(st.just("truncate"), st.integers(0, 6000)),
        st.tuples(st.just("sync")),
        st.tuples(st.just("read"), st.integers(0, 6000), st.integers(0, 3000)),
    ),
    max_size=40,
)


def _apply_model(model: bytearray, op: tuple) -> None:
    if op[0] == "write":
        _, off, data = op
        if off > len(model):
            model.extend(bytes(off - len(model)))
        model[off : off + len(data)] = data
    elif op[0] == "append":
        model += op[1]
    elif op[0] == "truncate":
        del model[op[1] :]
        model.extend(bytes(op[1] - len(model)))


@settings(max_examples=300, deadline=None, database=None)
@given(initial=st.binary(max_size=3000), ops=ops)
def test_overlay_matches_bytearray(tmp_path_factory, initial: bytes, ops: list) -> None:
    path = tmp_path_factory.mktemp("ov") / "store"
    path.write_bytes(initial)
    fd = os.open(path, os.O_RDWR)
    try:
        ov = Overlay(len(initial))
        model = bytearray(initial)
        durable = bytes(initial)
        for op in ops:
            if op[0] == "write":
                ov.write(op[1], op[2])
            elif op[0] == "append":
                ov.write(ov.size, op[1])
            elif op[0] == "truncate":
                ov.truncate(op[1])
            elif op[0] == "sync":
                ov.flush_to(fd)
                durable = bytes(model)
                assert not ov.dirty and ov.unsynced_bytes == 0
            elif op[0] == "read":
                assert ov.read(fd, op[1], op[2]) == bytes(model[op[1] : op[1] + op[2]])
            _apply_model(model, op)
            assert ov.size == len(model)
            assert ov.read(fd, 0, len(model) + 10) == bytes(model)
            # invariants: sorted, non-overlapping, non-adjacent, inside the file
            ends = [s + len(c) for s, c in zip(ov.starts, ov.chunks, strict=True)]
            assert all(e < s for e, s in zip(ends, ov.starts[1:], strict=False))
            assert all(len(c) > 0 for c in ov.chunks) and (not ends or ends[-1] <= ov.size)
        assert path.read_bytes() == durable  # nothing reaches the store before a sync
    finally:
        os.close(fd)


def test_appends_grow_one_extent() -> None:
    ov = Overlay(0)
    for i in range(1000):
        ov.write(i * 16, b"x" * 16)
    assert len(ov.chunks) == 1 and ov.unsynced_bytes == 16000
