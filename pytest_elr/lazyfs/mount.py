"""The layer's process: mount, serve FUSE and the control socket, unmount.

Ways out, and what each means for unsynced data:
- ``umount``/``fusermount3 -u``, the control's ``unmount``, SIGTERM, SIGINT, or the
  parent dying (``exit_with_parent``): a clean shutdown, everything is synced first,
  as an operating system does when it unmounts.
- SIGKILL of this process (e.g. its container killed): a power cut, nothing
  unsynced reaches the backing directory. The dead mount must then be detached
  with ``fusermount3 -uz``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import signal
from dataclasses import dataclass
from typing import Any

import pyfuse3
import trio

from . import control
from .filesystem import LazyFs

log = logging.getLogger(__name__)


@dataclass
class MountOptions:
    backing: str
    mountpoint: str
    control: str
    metadata: str = "fsyncdir"
    fsync_backing: bool = False
    allow_other: bool = False
    exit_with_parent: bool = False


def run(opts: MountOptions) -> None:
    _raise_fd_limit()  # one store fd per file: Kafka keeps many segment files
    os.makedirs(opts.backing, exist_ok=True)
    os.makedirs(opts.mountpoint, exist_ok=True)
    fs = LazyFs(opts.backing, opts.metadata, opts.fsync_backing)
    fuse_opts = set(pyfuse3.default_options) | {"fsname=lazyfs", "subtype=lazyfs"}
    if opts.allow_other:
        fuse_opts.add("allow_other")  # the application may run as another user
    pyfuse3.init(fs, opts.mountpoint, fuse_opts)
    try:
        trio.run(_serve, fs, opts)
    finally:
        try:
            fs.sync_all()  # no-op after a power_off without later writes
        finally:
            pyfuse3.close(unmount=True)
        log.info("lazyfs: unmounted %s", opts.mountpoint)


async def _serve(fs: LazyFs, opts: MountOptions) -> None:
    async with trio.open_nursery() as nursery:
        shutdown = trio.Event()

        async def fuse_main() -> None:
            await pyfuse3.main()
            nursery.cancel_scope.cancel()  # unmounted from outside

        async def handle(cmd: str) -> dict[str, Any]:
            return await _command(fs, opts, cmd, shutdown)

        nursery.start_soon(fuse_main)
        await nursery.start(control.serve, opts.control, handle)
        nursery.start_soon(_on_signals, shutdown)
        if opts.exit_with_parent:
            nursery.start_soon(_watch_parent, shutdown)
        log.info("lazyfs: %s mounted on %s, control %s", opts.backing, opts.mountpoint,
                 opts.control)
        await shutdown.wait()
        await _flush_kernel(opts.mountpoint)
        pyfuse3.terminate()
        nursery.cancel_scope.cancel()


async def _command(fs: LazyFs, opts: MountOptions, cmd: str,
                   shutdown: trio.Event) -> dict[str, Any]:
    if cmd == "ping":
        return {"mountpoint": opts.mountpoint, "backing": opts.backing, "pid": os.getpid()}
    if cmd == "stats":
        return fs.stats()
    if cmd == "sync":
        await _flush_kernel(opts.mountpoint)
        fs.sync_all()
        return {}
    if cmd == "power_off":
        dropped = fs.stats()["unsynced_bytes"]
        stale = fs.power_off()
        # In a thread: dropping dirty mmapped pages makes the kernel write them back
        # to us first (discarded: their inode is dead), which this loop must serve.
        await trio.to_thread.run_sync(_invalidate, stale)
        return {"dropped_bytes": dropped, "invalidated_inodes": len(stale)}
    if cmd == "unmount":
        shutdown.set()
        return {}
    raise ValueError(f"unknown command {cmd!r}")


def _invalidate(inodes: list[int]) -> None:
    for ino in inodes:
        with contextlib.suppress(OSError):  # ENOENT: the kernel already forgot it
            pyfuse3.invalidate_inode(ino)


async def _flush_kernel(mountpoint: str) -> None:
    """Make the kernel hand us dirty mmapped pages (needs this loop running)."""
    with contextlib.suppress(OSError):
        await trio.to_thread.run_sync(pyfuse3.syncfs, mountpoint)


async def _on_signals(shutdown: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            shutdown.set()


async def _watch_parent(shutdown: trio.Event) -> None:
    parent = os.getppid()
    while os.getppid() == parent:
        await trio.sleep(0.2)
    log.warning("lazyfs: parent %d died, unmounting", parent)
    shutdown.set()


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
