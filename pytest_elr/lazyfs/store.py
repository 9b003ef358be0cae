"""The backing directory: the durable state, and the journal of namespace changes.

The backing directory always holds exactly what would survive a power cut. Files
created since the last namespace commit live in ``.lazyfs/staging/<ino>`` until a
commit gives them their name; a power cut (or a restart of the layer) wipes staging.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

from .nodes import DirNode, FileNode, Node

log = logging.getLogger(__name__)

META_DIR = b".lazyfs"  # hidden at the root of the mount


@dataclass
class Journal:
    """Namespace changes not yet durable, in the order they were made.

    Ops name paths as they were when the op ran, so replaying them in order on the
    backing directory reproduces the live namespace exactly.
    """

    ops: list[tuple] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ops)


class BackingStore:
    def __init__(self, root: str, fsync: bool = False) -> None:
        self.root = os.fsencode(os.path.abspath(root))
        self.fsync = fsync  # also fsync the backing store (survive a real host crash)
        self.meta = os.path.join(self.root, META_DIR)
        self.staging = os.path.join(self.meta, b"staging")

    def abspath(self, rel: bytes) -> bytes:
        return os.path.join(self.root, rel) if rel else self.root

    def reset_staging(self) -> None:
        """Forget files whose creation never became durable."""
        shutil.rmtree(self.staging, ignore_errors=True)
        os.makedirs(self.staging, exist_ok=True)

    def new_staged_file(self, ino: int, mode: int, uid: int, gid: int) -> tuple[bytes, int]:
        path = os.path.join(self.staging, str(ino).encode())
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode & 0o7777)
        _chown(fd, uid, gid)
        return path, fd

    def sync_file(self, node: FileNode) -> int:
        assert node.fd is not None
        written = node.data.flush_to(node.fd)
        if self.fsync:
            os.fsync(node.fd)
        return written

    # -- namespace ---------------------------------------------------------------

    def commit(self, journal: Journal) -> int:
        """Replay pending namespace changes onto the backing directory."""
        ops, journal.ops = journal.ops, []
        touched: set[bytes] = set()
        for op in ops:
            try:
                touched.update(self._apply(op))
            except OSError as e:  # the backing dir was changed behind our back
                log.warning("lazyfs: replaying %r failed: %s", op[:3], e)
        if self.fsync:
            for d in touched:
                _fsync_dir(d)
        return len(ops)

    def _apply(self, op: tuple) -> list[bytes]:
        kind = op[0]
        if kind == "mkdir":
            _, rel, mode, uid, gid = op
            path = self.abspath(rel)
            os.mkdir(path, mode & 0o7777)
            if os.geteuid() == 0:
                os.chown(path, uid, gid)
            return [os.path.dirname(path)]
        if kind == "create":
            _, staged, rel, node = op
            path = self.abspath(rel)
            os.rename(staged, path)
            if node.staged == staged:
                node.staged = None
            return [os.path.dirname(path), self.staging]
        if kind == "unlink":
            path = self.abspath(op[1])
            os.unlink(path)
            return [os.path.dirname(path)]
        if kind == "rmdir":
            path = self.abspath(op[1])
            os.rmdir(path)
            return [os.path.dirname(path)]
        if kind == "rename":
            old, new = self.abspath(op[1]), self.abspath(op[2])
            os.rename(old, new)
            return [os.path.dirname(old), os.path.dirname(new)]
        raise ValueError(f"unknown journal op {kind}")

    # -- loading -----------------------------------------------------------------

    def load(self, new_ino: Callable[[], int], root_ino: int) -> tuple[DirNode, list[Node]]:
        """Build the live tree from the durable state; returns (root, all nodes)."""
        st = os.stat(self.root)
        root = DirNode(root_ino, st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns)
        nodes: list[Node] = [root]
        stack: list[tuple[DirNode, bytes]] = [(root, self.root)]
        while stack:
            parent, dpath = stack.pop()
            with os.scandir(dpath) as it:
                for entry in it:
                    name = entry.name
                    if parent is root and name == META_DIR:
                        continue
                    st = entry.stat(follow_symlinks=False)
                    node: Node
                    if stat.S_ISDIR(st.st_mode):
                        node = DirNode(new_ino(), st.st_mode, st.st_uid, st.st_gid,
                                       st.st_mtime_ns)
                        stack.append((node, entry.path))
                    elif stat.S_ISREG(st.st_mode):
                        fd = os.open(entry.path, os.O_RDWR | os.O_CLOEXEC)
                        node = FileNode(new_ino(), st.st_mode, st.st_uid, st.st_gid,
                                        st.st_mtime_ns, fd, st.st_size)
                    else:
                        log.warning("lazyfs: ignoring %r (not a file or directory)", entry.path)
                        continue
                    parent.attach(name, node)
                    nodes.append(node)
        return root, nodes


def _chown(fd: int, uid: int, gid: int) -> None:
    if os.geteuid() == 0:
        os.fchown(fd, uid, gid)


def _fsync_dir(path: bytes) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
