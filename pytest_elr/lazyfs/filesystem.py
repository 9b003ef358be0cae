"""The FUSE operations: a live namespace in memory over the durable backing store.

See the package docstring for what is durable when.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

import pyfuse3

from . import METADATA_MODES
from .nodes import DirNode, FileNode, Node
from .store import META_DIR, BackingStore, Journal

log = logging.getLogger(__name__)

ROOT = pyfuse3.ROOT_INODE
# Entries are revalidated on every path walk, so after a power cut the kernel
# meets the fresh inodes at once; attributes of an inode only change through
# the kernel itself, so they may be cached.
ENTRY_TIMEOUT = 0.0
ATTR_TIMEOUT = 1.0



def _err(code: int) -> pyfuse3.FUSEError:
    return pyfuse3.FUSEError(code)


class LazyFs(pyfuse3.Operations):
    enable_writeback_cache = False  # the kernel must hand us every write as it happens

    def __init__(self, backing: str, metadata: str = "fsyncdir", fsync_backing: bool = False):
        super().__init__()
        if metadata not in METADATA_MODES:
            raise ValueError(f"metadata must be one of {METADATA_MODES}")
        self.metadata = metadata
        self.store = BackingStore(backing, fsync_backing)
        self.journal = Journal()
        self.inodes: dict[int, Node] = {}
        self.files: dict[int, FileNode] = {}  # open file handles
        self.dirs: dict[int, list[Any]] = {}  # open dir handles: [node, snapshot]
        self.ops: Counter[str] = Counter()
        self.power_cuts = 0
        self._next_ino = ROOT + 1
        self._next_fh = 1
        self.root = self._load()

    # -- bookkeeping -------------------------------------------------------------

    def _alloc_ino(self) -> int:
        # Never reused, so that inodes lost in a power cut stay distinguishable.
        ino = self._next_ino
        self._next_ino += 1
        return ino

    def _alloc_fh(self) -> int:
        fh = self._next_fh
        self._next_fh += 1
        return fh

    def _load(self) -> DirNode:
        self.store.reset_staging()
        root, nodes = self.store.load(self._alloc_ino, ROOT)
        for node in nodes:
            self.inodes[node.ino] = node
        return root

    def _node(self, ino: int) -> Node:
        node = self.inodes.get(ino)
        if node is None:
            raise _err(errno.ENOENT)
        if node.dead:
            raise _err(errno.EIO)
        return node

    def _dir(self, ino: int) -> DirNode:
        node = self._node(ino)
        if not isinstance(node, DirNode):
            raise _err(errno.ENOTDIR)
        return node

    def _maybe_free(self, node: Node) -> None:
        if node.nlookup > 0 or node.opened > 0 or node is self.root:
            return
        if node.parent is not None and not node.dead:
            return  # still named: stays in the tree
        if self.inodes.get(node.ino) is node:
            del self.inodes[node.ino]
        if isinstance(node, FileNode):
            node.close_store()

    def _attr(self, node: Node) -> pyfuse3.EntryAttributes:
        a = pyfuse3.EntryAttributes()
        a.st_ino = node.ino
        a.generation = 0
        a.entry_timeout = ENTRY_TIMEOUT
        a.attr_timeout = ATTR_TIMEOUT
        a.st_mode = node.mode
        if isinstance(node, FileNode):
            size = node.data.size
            a.st_nlink = 1 if node.parent is not None else 0
        else:
            size = 4096
            a.st_nlink = 2
        a.st_uid = node.uid
        a.st_gid = node.gid
        a.st_rdev = 0
        a.st_size = size
        a.st_blksize = 4096
        a.st_blocks = (size + 511) // 512
        a.st_atime_ns = node.mtime_ns
        a.st_mtime_ns = node.mtime_ns
        a.st_ctime_ns = node.ctime_ns
        return a

    def _check_name(self, parent: DirNode, name: bytes) -> None:
        if parent is self.root and name == META_DIR:
            raise _err(errno.EPERM)  # reserved for the layer's own state
        if len(name) > 255:
            raise _err(errno.ENAMETOOLONG)

    def _log_ns(self, op: tuple) -> None:
        self.journal.ops.append(op)
        if self.metadata == "immediate":
            self._commit()

    def _commit(self) -> None:
        try:
            self.store.commit(self.journal)
        except OSError as e:
            raise _err(e.errno or errno.EIO) from e

    @staticmethod
    def _touch(node: Node) -> None:
        node.mtime_ns = node.ctime_ns = time.time_ns()

    # -- lookups and attributes ----------------------------------------------------

    async def lookup(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext
                     ) -> pyfuse3.EntryAttributes:
        self.ops["lookup"] += 1
        parent = self._dir(parent_inode)
        if name == b".":
            node: Node = parent
        elif name == b"..":
            node = parent.parent or self.root
        else:
            child = parent.children.get(name)
            if child is None:
                raise _err(errno.ENOENT)
            node = child
        node.nlookup += 1
        return self._attr(node)

    async def forget(self, inode_list: Iterable[tuple[int, int]]) -> None:
        for ino, n in inode_list:
            node = self.inodes.get(ino)
            if node is not None:
                node.nlookup -= n
                self._maybe_free(node)

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        self.ops["getattr"] += 1
        return self._attr(self._node(inode))

    async def setattr(self, inode: int, attr: pyfuse3.EntryAttributes,
                      fields: pyfuse3.SetattrFields, fh: int | None,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        self.ops["setattr"] += 1
        node = self._node(inode)
        now = time.time_ns()
        if fields.update_size:
            if not isinstance(node, FileNode):
                raise _err(errno.EISDIR)
            self.ops["truncate"] += 1
            node.data.truncate(attr.st_size)
            node.mtime_ns = now
        try:
            # Permissions and owners go straight to the store: not worth a cache.
            store_fd = node.fd if isinstance(node, FileNode) else None
            if fields.update_mode:
                node.mode = stat.S_IFMT(node.mode) | (attr.st_mode & 0o7777)
                if store_fd is not None:
                    os.fchmod(store_fd, node.mode & 0o7777)
            if fields.update_uid or fields.update_gid:
                node.uid = attr.st_uid if fields.update_uid else node.uid
                node.gid = attr.st_gid if fields.update_gid else node.gid
                if store_fd is not None:
                    os.fchown(store_fd, node.uid, node.gid)
        except OSError as e:
            raise _err(e.errno or errno.EIO) from e
        if fields.update_mtime:
            node.mtime_ns = attr.st_mtime_ns
        node.ctime_ns = now
        return self._attr(node)

    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        st = os.statvfs(self.store.root)
        out = pyfuse3.StatvfsData()
        for f in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files",
                  "f_ffree", "f_favail", "f_namemax"):
            setattr(out, f, getattr(st, f))
        return out

    # -- namespace -----------------------------------------------------------------

    async def mkdir(self, parent_inode: int, name: bytes, mode: int,
                    ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        self.ops["mkdir"] += 1
        parent = self._dir(parent_inode)
        self._check_name(parent, name)
        if name in parent.children:
            raise _err(errno.EEXIST)
        mode = stat.S_IFDIR | (mode & ~ctx.umask & 0o7777)
        node = DirNode(self._alloc_ino(), mode, ctx.uid, ctx.gid, time.time_ns())
        parent.attach(name, node)
        self.inodes[node.ino] = node
        self._touch(parent)
        self._log_ns(("mkdir", node.path(), mode, ctx.uid, ctx.gid))
        node.nlookup += 1
        return self._attr(node)

    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
                     ctx: pyfuse3.RequestContext
                     ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        self.ops["create"] += 1
        parent = self._dir(parent_inode)
        self._check_name(parent, name)
        if name in parent.children:
            raise _err(errno.EEXIST)
        mode = stat.S_IFREG | (mode & ~ctx.umask & 0o7777)
        ino = self._alloc_ino()
        try:
            staged, fd = self.store.new_staged_file(ino, mode, ctx.uid, ctx.gid)
        except OSError as e:
            raise _err(e.errno or errno.EIO) from e
        node = FileNode(ino, mode, ctx.uid, ctx.gid, time.time_ns(), fd, 0, staged)
        parent.attach(name, node)
        self.inodes[ino] = node
        self._touch(parent)
        self._log_ns(("create", staged, node.path(), node))
        node.nlookup += 1
        return self._open_handle(node), self._attr(node)

    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        self.ops["unlink"] += 1
        parent = self._dir(parent_inode)
        child = parent.children.get(name)
        if child is None:
            raise _err(errno.ENOENT)
        if child.is_dir:
            raise _err(errno.EISDIR)
        path = child.path()
        parent.detach(name)
        self._touch(parent)
        self._log_ns(("unlink", path))
        self._maybe_free(child)

    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        self.ops["rmdir"] += 1
        parent = self._dir(parent_inode)
        child = parent.children.get(name)
        if child is None:
            raise _err(errno.ENOENT)
        if not isinstance(child, DirNode):
            raise _err(errno.ENOTDIR)
        if child.children:
            raise _err(errno.ENOTEMPTY)
        path = child.path()
        parent.detach(name)
        self._touch(parent)
        self._log_ns(("rmdir", path))
        self._maybe_free(child)

    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int,
                     name_new: bytes, flags: int, ctx: pyfuse3.RequestContext) -> None:
        self.ops["rename"] += 1
        if flags & pyfuse3.RENAME_EXCHANGE:
            raise _err(errno.EINVAL)  # not needed by Kafka; renameat2 has no os wrapper
        src_dir = self._dir(parent_inode_old)
        dst_dir = self._dir(parent_inode_new)
        self._check_name(dst_dir, name_new)
        src = src_dir.children.get(name_old)
        if src is None:
            raise _err(errno.ENOENT)
        dst = dst_dir.children.get(name_new)
        if dst is src:
            return
        if dst is not None:
            if flags & pyfuse3.RENAME_NOREPLACE:
                raise _err(errno.EEXIST)
            if isinstance(src, DirNode):
                if not isinstance(dst, DirNode):
                    raise _err(errno.ENOTDIR)
                if dst.children:
                    raise _err(errno.ENOTEMPTY)
            elif dst.is_dir:
                raise _err(errno.EISDIR)
        if isinstance(src, DirNode) and src.contains(dst_dir):
            raise _err(errno.EINVAL)
        old_path = src.path()
        dst_path = dst_dir.path()
        new_path = dst_path + b"/" + name_new if dst_path else name_new
        if dst is not None:
            dst_dir.detach(name_new)
        src_dir.detach(name_old)
        dst_dir.attach(name_new, src)
        self._touch(src_dir)
        self._touch(dst_dir)
        src.ctime_ns = time.time_ns()
        self._log_ns(("rename", old_path, new_path))
        if dst is not None:
            self._maybe_free(dst)

    async def symlink(self, parent_inode: int, name: bytes, target: bytes,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        raise _err(errno.EPERM)

    async def link(self, inode: int, new_parent_inode: int, new_name: bytes,
                   ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        raise _err(errno.EPERM)

    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int,
                    ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        raise _err(errno.EPERM)

    # -- files ---------------------------------------------------------------------

    def _open_handle(self, node: FileNode) -> pyfuse3.FileInfo:
        fh = self._alloc_fh()
        self.files[fh] = node
        node.opened += 1
        # Cached mode (no direct_io): Kafka mmaps index files with MAP_SHARED.
        # keep_cache: every change reaches the kernel's page cache through the
        # kernel itself, except a power cut, after which inodes are new anyway.
        return pyfuse3.FileInfo(fh=fh, keep_cache=True)

    def _handle(self, fh: int) -> FileNode:
        node = self.files.get(fh)
        if node is None:
            raise _err(errno.EBADF)
        return node

    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        self.ops["open"] += 1
        node = self._node(inode)
        if not isinstance(node, FileNode):
            raise _err(errno.EISDIR)
        if flags & os.O_TRUNC and flags & os.O_ACCMODE != os.O_RDONLY:
            node.data.truncate(0)
            self._touch(node)
        return self._open_handle(node)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        self.ops["read"] += 1
        node = self._handle(fh)
        if node.dead:
            raise _err(errno.EIO)
        try:
            return node.data.read(node.fd, off, size)
        except OSError as e:
            raise _err(e.errno or errno.EIO) from e

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        node = self.files[fh]
        ops = self.ops
        ops["write"] += 1
        ops["write_bytes"] += len(buf)
        if not node.dead:  # the kernel's late writeback of pages lost in a power cut
            node.data.write(off, buf)
            node.mtime_ns = time.time_ns()
        return len(buf)

    async def flush(self, fh: int) -> None:
        # close() promises no durability, so it syncs nothing.
        return None

    async def release(self, fh: int) -> None:
        node = self.files.pop(fh, None)
        if node is not None:
            node.opened -= 1
            self._maybe_free(node)

    async def fsync(self, fh: int, datasync: bool) -> None:
        self.ops["fdatasync" if datasync else "fsync"] += 1
        node = self._handle(fh)
        if node.dead:
            raise _err(errno.EIO)
        if self.metadata == "fsync":
            self._commit()
        self._sync_file(node)

    def _sync_file(self, node: FileNode) -> None:
        if not node.data.dirty:
            return
        try:
            self.ops["synced_bytes"] += self.store.sync_file(node)
        except OSError as e:
            raise _err(e.errno or errno.EIO) from e

    # -- directories ---------------------------------------------------------------

    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        node = self._dir(inode)
        fh = self._alloc_fh()
        self.dirs[fh] = [node, None]
        node.opened += 1
        return fh

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        self.ops["readdir"] += 1
        handle = self.dirs[fh]
        node: DirNode = handle[0]
        if node.dead:
            raise _err(errno.EIO)
        if start_id == 0 or handle[1] is None:
            handle[1] = sorted(node.children.items())
        entries: list[tuple[bytes, Node]] = handle[1]
        for i in range(start_id, len(entries)):
            name, child = entries[i]
            if node.children.get(name) is not child:
                continue  # removed since the listing began
            if not pyfuse3.readdir_reply(token, name, self._attr(child), i + 1):
                break
            child.nlookup += 1

    async def releasedir(self, fh: int) -> None:
        handle = self.dirs.pop(fh, None)
        if handle is not None:
            node: Node = handle[0]
            node.opened -= 1
            self._maybe_free(node)

    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        self.ops["fsyncdir"] += 1
        handle = self.dirs.get(fh)
        if handle is None:
            raise _err(errno.EBADF)
        if handle[0].dead:
            raise _err(errno.EIO)
        self._commit()

    # -- control -------------------------------------------------------------------

    def sync_all(self) -> None:
        """What a clean unmount does: everything becomes durable."""
        for node in list(self.inodes.values()):
            if isinstance(node, FileNode) and not node.dead and node.parent is not None:
                self._sync_file(node)
        self._commit()

    def power_off(self) -> list[int]:
        """Drop everything unsynced; returns the inodes whose kernel caches must go.

        The live tree is rebuilt from the backing store with new inode numbers, so
        whatever the kernel still holds for the old ones (cached pages, dirty mmapped
        pages written back late, open fds) can never reach the new state.
        """
        self.power_cuts += 1
        stale = [ino for ino, n in self.inodes.items() if n.nlookup > 0 or n.opened > 0]
        for node in self.inodes.values():
            node.dead = True
            if isinstance(node, FileNode):
                node.close_store()
                node.data.clear(0)
        self.journal.ops.clear()
        old = self.inodes
        self.inodes = {}
        self.root = self._load()
        for ino in stale:
            node = old[ino]
            if ino != ROOT:
                self.inodes[ino] = node  # until the kernel forgets it
        return stale

    def stats(self) -> dict[str, Any]:
        files = []
        total = 0
        for node in self.inodes.values():
            if not isinstance(node, FileNode) or node.dead:
                continue
            dirty = node.data.dirty
            if not dirty and node.staged is None:
                continue
            unsynced = node.data.unsynced_bytes
            total += unsynced
            files.append({
                "path": os.fsdecode(node.path()) if node.parent is not None else None,
                "ino": node.ino,
                "size": node.data.size,
                "durable_size": node.data.store_size,
                "unsynced_bytes": unsynced,
                "name_durable": node.staged is None,
            })
        files.sort(key=lambda f: f["path"] or "")
        return {
            "unsynced_bytes": total,
            "files": files,
            "pending_namespace_ops": len(self.journal),
            "metadata_mode": self.metadata,
            "power_cuts": self.power_cuts,
            "inodes": len(self.inodes),
            "ops": dict(self.ops),
        }
