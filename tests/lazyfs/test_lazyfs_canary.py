"""Canaries: after a power cut exactly the unsynced part is gone, byte for byte.

Each runs with both cuts: ``power_off`` in place, and SIGKILL of the layer + remount.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import signal
import subprocess
import sys

import pytest

PAGE = mmap.PAGESIZE


def write_file(path: str, data: bytes, sync: bool = True) -> None:
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def durable_file(fs, name: str, data: bytes) -> str:
    path = os.path.join(fs.mountpoint, name)
    write_file(path, data)
    fsync_dir(os.path.dirname(path))
    return path


def test_append(lazyfs, power_cut) -> None:
    path = os.path.join(lazyfs.mountpoint, "00000000000000000000.log")
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    os.write(fd, b"A" * 5000)
    os.fsync(fd)
    fsync_dir(lazyfs.mountpoint)
    os.write(fd, b"B" * 3000)
    os.write(fd, b"C" * 17)
    os.close(fd)
    assert read(path) == b"A" * 5000 + b"B" * 3000 + b"C" * 17
    assert os.stat(path).st_size == 8017
    stats = lazyfs.stats()
    assert stats["unsynced_bytes"] == 3017
    assert [(f["path"], f["unsynced_bytes"]) for f in stats["files"]] == [
        ("00000000000000000000.log", 3017)]

    power_cut(lazyfs)

    assert read(path) == b"A" * 5000
    assert lazyfs.stats()["unsynced_bytes"] == 0


def test_fdatasync_counts_as_sync(lazyfs, power_cut) -> None:
    path = os.path.join(lazyfs.mountpoint, "f")
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, b"x" * 100)
    os.fdatasync(fd)
    fsync_dir(lazyfs.mountpoint)
    os.write(fd, b"y" * 100)
    os.close(fd)
    power_cut(lazyfs)
    assert read(path) == b"x" * 100


def test_overwrite(lazyfs, power_cut) -> None:
    path = durable_file(lazyfs, "f", b"A" * 8192)
    fd = os.open(path, os.O_RDWR)
    os.pwrite(fd, b"B" * 2000, 1000)
    os.fsync(fd)
    os.pwrite(fd, b"C" * 1000, 5000)  # unsynced overwrite
    os.pwrite(fd, b"D" * 10, 8190)  # unsynced, extends by 8
    os.close(fd)
    live = b"A" * 1000 + b"B" * 2000 + b"A" * 2000 + b"C" * 1000 + b"A" * 2190 + b"D" * 10
    assert read(path) == live

    power_cut(lazyfs)

    assert read(path) == b"A" * 1000 + b"B" * 2000 + b"A" * 5192


def test_truncate_and_preallocate(lazyfs, power_cut) -> None:
    """Kafka's index files: preallocated with ftruncate, trimmed on close/roll."""
    path = durable_file(lazyfs, "shrunk", bytes(range(256)) * 32)  # 8192 bytes
    os.truncate(path, 100)
    fd = os.open(path, os.O_RDWR)
    os.fsync(fd)
    os.ftruncate(fd, 4096)  # unsynced preallocation
    os.pwrite(fd, b"X" * 10, 200)
    os.close(fd)
    assert os.stat(path).st_size == 4096

    unsynced_cut = durable_file(lazyfs, "cut", b"K" * 5000)
    os.truncate(unsynced_cut, 10)  # never synced: the cut must come back
    os.truncate(unsynced_cut, 20)
    assert read(unsynced_cut) == b"K" * 10 + bytes(10)

    power_cut(lazyfs)

    assert read(path) == (bytes(range(256)) * 32)[:100]
    assert read(unsynced_cut) == b"K" * 5000


def test_truncate_then_extend_reads_zeros(lazyfs, power_cut) -> None:
    path = durable_file(lazyfs, "f", b"A" * 1000)
    os.truncate(path, 10)
    os.truncate(path, 1000)
    fd = os.open(path, os.O_RDWR)
    os.fsync(fd)
    os.close(fd)
    power_cut(lazyfs)
    assert read(path) == b"A" * 10 + bytes(990)


def test_checkpoint_rename_needs_fsyncdir(lazyfs, power_cut) -> None:
    """Kafka's checkpoints: write tmp, fsync, rename over, fsync the directory."""
    ckpt = os.path.join(lazyfs.mountpoint, "replication-offset-checkpoint")
    tmp = ckpt + ".tmp"
    write_file(tmp, b"v1")
    os.rename(tmp, ckpt)
    fsync_dir(lazyfs.mountpoint)
    write_file(tmp, b"v2")  # synced data, but the rename is never made durable
    os.rename(tmp, ckpt)
    assert read(ckpt) == b"v2"
    assert lazyfs.stats()["pending_namespace_ops"] == 2

    power_cut(lazyfs)

    assert read(ckpt) == b"v1"
    assert sorted(os.listdir(lazyfs.mountpoint)) == ["replication-offset-checkpoint"]


def test_segment_renames(lazyfs, power_cut) -> None:
    """Kafka deletes a segment by renaming .log to .deleted, later unlinking it."""
    part = os.path.join(lazyfs.mountpoint, "topic-0")
    os.mkdir(part)
    seg = os.path.join(part, "00000000000000000000.log")
    write_file(seg, b"records")
    fsync_dir(part)
    os.rename(seg, seg + ".deleted")
    fsync_dir(part)
    os.unlink(seg + ".deleted")  # not made durable
    os.rename(part, part + ".abc-delete")  # not made durable either
    assert os.listdir(lazyfs.mountpoint) == ["topic-0.abc-delete"]

    power_cut(lazyfs)

    assert os.listdir(part) == ["00000000000000000000.log.deleted"]
    assert read(seg + ".deleted") == b"records"


def test_unsynced_creates_are_lost(lazyfs, power_cut) -> None:
    mnt = lazyfs.mountpoint
    os.mkdir(os.path.join(mnt, "newdir"))
    write_file(os.path.join(mnt, "newdir", "f"), b"synced data, no fsyncdir")
    write_file(os.path.join(mnt, "g"), b"synced data, no fsyncdir")
    assert sorted(os.listdir(mnt)) == ["g", "newdir"]
    names_durable = [f["name_durable"] for f in lazyfs.stats()["files"]]
    assert names_durable == [False, False]

    power_cut(lazyfs)

    assert os.listdir(mnt) == []


def test_fsyncdir_makes_creates_durable(lazyfs, power_cut) -> None:
    mnt = lazyfs.mountpoint
    os.mkdir(os.path.join(mnt, "d"))
    write_file(os.path.join(mnt, "d", "f"), b"data")
    fsync_dir(mnt)  # commits every earlier namespace change, as a journal would
    rm = durable_file(lazyfs, "removed", b"x")
    os.unlink(rm)  # unsynced unlink: the file comes back

    power_cut(lazyfs)

    assert read(os.path.join(mnt, "d", "f")) == b"data"
    assert read(rm) == b"x"


def test_open_flags(lazyfs, power_cut) -> None:
    path = durable_file(lazyfs, "f", b"0123456789")
    with pytest.raises(FileExistsError):
        os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"ab")
    os.close(fd)
    assert read(path) == b"0123456789ab"
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"new")
    os.close(fd)
    assert read(path) == b"new"
    excl = os.path.join(lazyfs.mountpoint, "excl")
    os.close(os.open(excl, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    assert os.stat(excl).st_mode & 0o777 == 0o600

    power_cut(lazyfs)

    assert read(path) == b"0123456789"
    assert not os.path.exists(excl)


def test_rmdir_and_errors(lazyfs) -> None:
    mnt = lazyfs.mountpoint
    os.makedirs(os.path.join(mnt, "a", "b"))
    with pytest.raises(OSError) as e:
        os.rmdir(os.path.join(mnt, "a"))
    assert e.value.errno == errno.ENOTEMPTY
    with pytest.raises(OSError) as e:
        os.rename(os.path.join(mnt, "a"), os.path.join(mnt, "a", "b", "c"))
    assert e.value.errno == errno.EINVAL
    os.rmdir(os.path.join(mnt, "a", "b"))
    os.rmdir(os.path.join(mnt, "a"))
    with pytest.raises(PermissionError):
        os.mkdir(os.path.join(mnt, ".lazyfs"))
    assert os.listdir(mnt) == []


# -- mmap: Kafka's .index/.timeindex files --------------------------------------------

_libc = ctypes.CDLL("libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
MS_SYNC = 4


def map_like_kafka(path: str, length: int) -> int:
    """MAP_SHARED mapping whose fd is closed at once, as Kafka's AbstractIndex does
    (so no close() ever flushes its dirty pages)."""
    fd = os.open(path, os.O_RDWR)
    try:
        addr = _libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed")
        return addr
    finally:
        os.close(fd)


def test_mmap_with_and_without_msync(lazyfs, power_cut) -> None:
    length = 3 * PAGE
    path = durable_file(lazyfs, "00000000000000000000.index", bytes(length))
    addr = map_like_kafka(path, length)
    try:
        ctypes.memmove(addr + 10, b"synced-1", 8)
        ctypes.memmove(addr + PAGE + 10, b"synced-2", 8)
        assert _libc.msync(addr, length, MS_SYNC) == 0  # MappedByteBuffer.force()
        ops = lazyfs.stats()["ops"]
        assert ops["fdatasync"] >= 1 and ops["write_bytes"] >= 2 * PAGE

        ctypes.memmove(addr + 20, b"lost-1", 6)  # dirties an already synced page
        ctypes.memmove(addr + 2 * PAGE + 10, b"lost-2", 6)  # and a fresh one
        # the app is "dead" but its dirty pages are still in the kernel: the cut
        # must drop them too (they come back to the layer, which discards them)
        power_cut(lazyfs)
    finally:
        _libc.munmap(addr, length)

    expected = bytearray(length)
    expected[10:18] = b"synced-1"
    expected[PAGE + 10 : PAGE + 18] = b"synced-2"
    assert read(path) == bytes(expected)


def test_mmap_without_msync_reaches_layer_on_munmap(lazyfs) -> None:
    """Without msync, dirty mapped pages reach the layer only when the kernel writes
    them back (munmap's last reference, writeback): unsynced, droppable."""
    path = durable_file(lazyfs, "i.index", bytes(PAGE))
    addr = map_like_kafka(path, PAGE)
    ctypes.memmove(addr, b"dirty", 5)
    assert lazyfs.stats()["unsynced_bytes"] == 0  # still only in the kernel
    _libc.munmap(addr, PAGE)
    assert lazyfs.stats()["unsynced_bytes"] == PAGE  # whole page written back
    assert read(path)[:5] == b"dirty"
    lazyfs.power_off()
    assert read(path) == bytes(PAGE)


# -- what a process crash (not a power cut) keeps ---------------------------------------

WRITER = """
import os, signal, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
os.write(fd, b"unsynced" * 1000)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_killing_the_app_keeps_unsynced_data(lazyfs) -> None:
    path = os.path.join(lazyfs.mountpoint, "f")
    proc = subprocess.run([sys.executable, "-c", WRITER, path])
    assert proc.returncode == -signal.SIGKILL
    assert read(path) == b"unsynced" * 1000  # the layer, like the page cache, lives on
    assert lazyfs.stats()["unsynced_bytes"] == 8000
    lazyfs.stop()  # clean unmount: everything is synced, as an OS shutdown would
    assert read(os.path.join(lazyfs.backing, "f")) == b"unsynced" * 1000
    lazyfs.start()
    assert read(path) == b"unsynced" * 1000


# -- the other metadata modes ------------------------------------------------------------

@pytest.mark.parametrize("mode", ["immediate", "fsync"])
def test_lenient_metadata_modes(tmp_path, needs_fuse, mode: str) -> None:
    from pytest_elr.lazyfs.harness import mounted

    with mounted(str(tmp_path / "b"), str(tmp_path / "m"), metadata=mode) as fs:
        synced = os.path.join(fs.mountpoint, "synced")
        write_file(synced, b"data")  # fsync, but no fsyncdir
        unsynced = os.path.join(fs.mountpoint, "unsynced")
        write_file(unsynced, b"data", sync=False)
        fs.power_off()
        assert read(synced) == b"data"
        if mode == "immediate":  # LazyFS-like: the name survives, its data does not
            assert read(unsynced) == b""
        else:  # ext4-like: only an fsync commits the journal
            assert not os.path.exists(unsynced)
