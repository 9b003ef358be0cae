"""Hypothesis drives the layer and a model of files side by side.

The model separates inodes (live and durable content) from names (live and durable
namespace), which is what the layer promises: fsync makes an inode's content durable,
fsyncdir makes the whole namespace durable, a power cut keeps exactly the durable
state. After every step the mount must show exactly the model's live state.
"""

from __future__ import annotations

import os
import shutil

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

DIRS = ["p", "q"]
NAMES = ["a", "b", "c", "p/a", "p/b", "q/a", "q/b"]
names = st.sampled_from(NAMES)
payloads = st.one_of(  # small random ones, and runs spanning pages
    st.binary(min_size=1, max_size=64),
    st.builds(lambda n, b: bytes([b]) * n, st.integers(1, 9000), st.integers(1, 255)),
)
offsets = st.integers(min_value=0, max_value=12000)


class Inode:
    def __init__(self) -> None:
        self.live = bytearray()
        self.durable = bytearray()


def _parent(name: str) -> str:
    return os.path.dirname(name)


class LayerVsModel(RuleBasedStateMachine):
    fs = None  # set per test: one mount serves every example

    names: dict[str, Inode]  # live namespace: file path -> inode
    dirs: set[str]

    @initialize()
    def reset(self) -> None:
        # Start each example from an empty durable tree.
        mnt = self.fs.mountpoint
        for entry in os.listdir(mnt):
            path = os.path.join(mnt, entry)
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
        self._fsync_dir()
        self.fs.power_off()  # also proves nothing is left over
        assert self._tree(self.fs.backing) == {}, "an earlier example left durable state"
        self.names, self.dirs = {}, set()
        self.durable_names: dict[str, Inode] = {}
        self.durable_dirs: set[str] = set()

    def path(self, name: str) -> str:
        return os.path.join(self.fs.mountpoint, name)

    def _fsync_dir(self) -> None:
        fd = os.open(self.fs.mountpoint, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(fd)
        os.close(fd)

    def existing(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from(sorted(self.names)), label="name")

    def _free_names(self) -> list[str]:
        return [n for n in NAMES if n not in self.names and _parent(n) in {"", *self.dirs}]

    # -- rules: files ------------------------------------------------------------

    @precondition(lambda self: self._free_names())
    @rule(data=st.data())
    def create(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(self._free_names()), label="new")
        os.close(os.open(self.path(name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        self.names[name] = Inode()

    @precondition(lambda self: self.names)
    @rule(data=st.data(), off=offsets, buf=payloads)
    def pwrite(self, data: st.DataObject, off: int, buf: bytes) -> None:
        name = self.existing(data)
        fd = os.open(self.path(name), os.O_WRONLY)
        os.pwrite(fd, buf, off)
        os.close(fd)
        live = self.names[name].live
        if off > len(live):
            live.extend(bytes(off - len(live)))
        live[off : off + len(buf)] = buf

    @precondition(lambda self: self.names)
    @rule(data=st.data(), buf=payloads)
    def append(self, data: st.DataObject, buf: bytes) -> None:
        name = self.existing(data)
        fd = os.open(self.path(name), os.O_WRONLY | os.O_APPEND)
        os.write(fd, buf)
        os.close(fd)
        self.names[name].live += buf

    @precondition(lambda self: self.names)
    @rule(data=st.data(), size=offsets, via_open=st.booleans())
    def truncate(self, data: st.DataObject, size: int, via_open: bool) -> None:
        name = self.existing(data)
        if via_open:
            os.close(os.open(self.path(name), os.O_WRONLY | os.O_TRUNC))
            size = 0
        else:
            os.truncate(self.path(name), size)
        live = self.names[name].live
        del live[size:]
        live.extend(bytes(size - len(live)))

    @precondition(lambda self: self.names)
    @rule(data=st.data(), datasync=st.booleans())
    def fsync(self, data: st.DataObject, datasync: bool) -> None:
        name = self.existing(data)
        fd = os.open(self.path(name), os.O_RDWR)
        (os.fdatasync if datasync else os.fsync)(fd)
        os.close(fd)
        inode = self.names[name]
        inode.durable = bytearray(inode.live)

    @precondition(lambda self: self.names)
    @rule(data=st.data())
    def rename(self, data: st.DataObject) -> None:
        src = self.existing(data)
        targets = [n for n in NAMES if _parent(n) in {"", *self.dirs}]
        dst = data.draw(st.sampled_from(targets), label="dst")
        os.rename(self.path(src), self.path(dst))
        self.names[dst] = self.names.pop(src)

    @precondition(lambda self: self.names)
    @rule(data=st.data())
    def unlink(self, data: st.DataObject) -> None:
        name = self.existing(data)
        os.unlink(self.path(name))
        del self.names[name]

    # -- rules: directories --------------------------------------------------------

    @precondition(lambda self: len(self.dirs) < len(DIRS))
    @rule(data=st.data())
    def mkdir(self, data: st.DataObject) -> None:
        d = data.draw(st.sampled_from([d for d in DIRS if d not in self.dirs]), label="dir")
        os.mkdir(self.path(d))
        self.dirs.add(d)

    def _empty_dirs(self) -> list[str]:
        return [d for d in sorted(self.dirs) if not any(_parent(n) == d for n in self.names)]

    @precondition(lambda self: self._empty_dirs())
    @rule(data=st.data())
    def rmdir(self, data: st.DataObject) -> None:
        d = data.draw(st.sampled_from(self._empty_dirs()), label="dir")
        os.rmdir(self.path(d))
        self.dirs.remove(d)

    @precondition(lambda self: self.dirs)
    @rule(data=st.data())
    def rename_dir(self, data: st.DataObject) -> None:
        """Kafka renames a whole partition dir to ``*-delete`` (or back, for a future log)."""
        src = data.draw(st.sampled_from(sorted(self.dirs)), label="dir")
        dsts = [d for d in DIRS if d != src and (d not in self.dirs or d in self._empty_dirs())]
        if not dsts:
            return
        dst = data.draw(st.sampled_from(dsts), label="to")
        os.rename(self.path(src), self.path(dst))
        self.dirs.remove(src)
        self.dirs.add(dst)
        moved = {n: i for n, i in self.names.items() if _parent(n) == src}
        for n, inode in moved.items():
            del self.names[n]
            self.names[os.path.join(dst, os.path.basename(n))] = inode

    # -- durability ----------------------------------------------------------------

    @rule()
    def fsync_dir(self) -> None:
        self._fsync_dir()
        self.durable_names = dict(self.names)
        self.durable_dirs = set(self.dirs)

    @rule()
    def power_cut(self) -> None:
        # What SIGKILL of the layer would leave is the backing dir as it is now.
        assert self._tree(self.fs.backing) == self._expected(self.durable_names,
                                                             self.durable_dirs, durable=True)
        self.fs.power_off()
        self.names = dict(self.durable_names)
        self.dirs = set(self.durable_dirs)
        for inode in self.names.values():
            inode.live = bytearray(inode.durable)

    # -- the check -------------------------------------------------------------

    @staticmethod
    def _tree(root: str) -> dict[str, bytes | None]:
        """Every file (content) and directory (None) below root, bar the layer's own."""
        out: dict[str, bytes | None] = {}
        for dirpath, dirnames, filenames in os.walk(root):
            rel = os.path.relpath(dirpath, root)
            if rel == ".":
                rel = ""
                dirnames[:] = [d for d in dirnames if d != ".lazyfs"]
            for d in dirnames:
                out[os.path.join(rel, d)] = None
            for f in filenames:
                full = os.path.join(dirpath, f)
                with open(full, "rb") as fh:
                    out[os.path.join(rel, f)] = fh.read()
                assert os.stat(full).st_size == len(out[os.path.join(rel, f)])
        return out

    @staticmethod
    def _expected(names: dict[str, Inode], dirs: set[str],
                  durable: bool = False) -> dict[str, bytes | None]:
        out: dict[str, bytes | None] = dict.fromkeys(dirs)
        for n, inode in names.items():
            out[n] = bytes(inode.durable if durable else inode.live)
        return out

    @invariant()
    def mount_shows_the_model(self) -> None:
        assert self._tree(self.fs.mountpoint) == self._expected(self.names, self.dirs)


def test_layer_matches_model(lazyfs) -> None:
    LayerVsModel.fs = lazyfs
    run_state_machine_as_test(
        LayerVsModel,
        settings=settings(max_examples=100, stateful_step_count=30, deadline=None,
                          database=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                 HealthCheck.too_slow]),
    )
    assert lazyfs.stats()["power_cuts"] > 0
