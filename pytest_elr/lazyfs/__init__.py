"""lazyfs: a FUSE layer that loses unsynced writes on command, like a power cut.

Killing a process loses nothing it wrote: the page cache is the kernel's. This layer
(mounted over a broker's log dir) keeps everything unsynced in its own memory, and
writes to the backing directory only when the application syncs. So:

- killing the application keeps its unsynced data (the layer lives on, as the page
  cache would);
- ``power_off`` (control socket / CLI) drops everything unsynced in place;
- killing the layer's process (e.g. the node's whole container) is a real power cut:
  the backing directory holds exactly the durable state;
- a clean unmount (``umount``, SIGTERM) syncs everything, as an OS shutdown does.

What is durable when
--------------------
*File content and size* (writes, truncates, ``ftruncate`` preallocation, O_TRUNC) are
per inode: ``fsync`` and ``fdatasync`` (identical here: sizes are data) write the
file's unsynced content into its store file. ``close``/``flush`` sync nothing (POSIX
promises nothing on close; ext4's auto_da_alloc heuristics are not emulated).
``fallocate`` is not offered (pyfuse3 has no handler: callers get EOPNOTSUPP; glibc's
``posix_fallocate`` then falls back to writes, and Kafka preallocates with
``RandomAccessFile.setLength`` = ``ftruncate``, which works).

*Names* (create, mkdir, rename, unlink, rmdir) go to a journal, replayed in order
onto the backing directory by a commit. In the default ``fsyncdir`` mode only
``fsyncdir`` (of any directory) commits, and it commits every earlier namespace
change: what survives a power cut is always a prefix of the namespace history, as with
a journaling filesystem's single running transaction (ext4, xfs). A file created and
fsynced but whose directory was never fsynced is lost with its data; an unsynced
rename or unlink is undone. This is exactly what POSIX guarantees and stricter than
ext4 (whose file fsync also commits the create), because the point is to find code
that forgets ``fsyncdir``; Kafka fsyncs the partition dir after a segment roll and
after ``Utils.atomicMoveWithFallback`` (checkpoints, ``.swap``/``.deleted`` renames).
Other modes: ``fsync`` (a file's fsync commits the journal too: ext4-like) and
``immediate`` (names durable at once: what LazyFS does).

Permissions and owners of files go straight to the store; timestamps live in memory.
``fcntl``/``flock`` locks are kept by the kernel (one node, as Kafka's ``.lock`` needs).
Hard links, symlinks, device nodes and xattrs are refused.

mmap
----
Cached mode (no ``direct_io``: with it ``mmap(MAP_SHARED)`` fails with ENODEV), no
writeback cache. Stores into a shared mapping reach the layer only when the kernel
writes dirty pages back, as whole-page ``write`` calls: on ``msync(MS_SYNC)`` (then a
``fdatasync`` follows, so the pages become durable: Kafka's ``MappedByteBuffer.force``)
on ``munmap`` of the last reference, on ``close`` of an fd whose mapping is dirty, or on
periodic writeback. Pages still dirty in the kernel at a power cut are lost too: the
layer gives every inode a new number after ``power_off`` and invalidates the old ones;
the kernel's late write-back of their pages is discarded.

Costs
-----
Unsynced data lives in the layer's memory (``stats`` reports it): a Kafka broker that
never fsyncs its active segment holds up to ``log.segment.bytes`` per partition
there, so tests use small segments. The layer is one trio thread: an fsync copies its
file's unsynced bytes into the backing file while other requests wait.

Use from tests: ``with mounted(backing, mountpoint) as fs: ... fs.power_off()``.
"""

from __future__ import annotations

METADATA_MODES = ("fsyncdir", "fsync", "immediate")

from .harness import LazyFsProcess, is_mounted, mounted, unmount  # noqa: E402

__all__ = ["METADATA_MODES", "LazyFsProcess", "is_mounted", "mounted", "unmount"]
