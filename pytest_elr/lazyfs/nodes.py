"""In-memory inodes of the live (not yet durable) namespace."""

from __future__ import annotations

import os
import stat

from .overlay import Overlay


class Node:
    __slots__ = ("ino", "mode", "uid", "gid", "mtime_ns", "ctime_ns", "parent", "name",
                 "nlookup", "opened", "dead")

    def __init__(self, ino: int, mode: int, uid: int, gid: int, mtime_ns: int) -> None:
        self.ino = ino
        self.mode = mode
        self.uid = uid
        self.gid = gid
        self.mtime_ns = mtime_ns
        self.ctime_ns = mtime_ns
        self.parent: DirNode | None = None  # None once unlinked (no hard links)
        self.name = b""
        self.nlookup = 0  # references the kernel holds (lookup/create/readdirplus - forget)
        self.opened = 0  # open handles
        self.dead = False  # lost in a power cut: the kernel may still refer to it

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    def path(self) -> bytes:
        """Path relative to the mount root (b"" for the root)."""
        parts: list[bytes] = []
        node: Node = self
        while node.parent is not None:
            parts.append(node.name)
            node = node.parent
        return b"/".join(reversed(parts))


class DirNode(Node):
    __slots__ = ("children",)

    def __init__(self, ino: int, mode: int, uid: int, gid: int, mtime_ns: int) -> None:
        super().__init__(ino, mode, uid, gid, mtime_ns)
        self.children: dict[bytes, Node] = {}

    def attach(self, name: bytes, child: Node) -> None:
        self.children[name] = child
        child.parent = self
        child.name = name

    def detach(self, name: bytes) -> Node:
        child = self.children.pop(name)
        child.parent = None
        return child

    def contains(self, other: Node) -> bool:
        """True if `other` is this directory or lies below it."""
        node: Node | None = other
        while node is not None:
            if node is self:
                return True
            node = node.parent
        return False


class FileNode(Node):
    __slots__ = ("data", "fd", "staged")

    def __init__(self, ino: int, mode: int, uid: int, gid: int, mtime_ns: int,
                 fd: int, store_size: int, staged: bytes | None = None) -> None:
        super().__init__(ino, mode, uid, gid, mtime_ns)
        self.data = Overlay(store_size)
        self.fd: int | None = fd  # the durable store file, wherever its name is now
        self.staged = staged  # staging path while its creation is not yet durable

    def close_store(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
