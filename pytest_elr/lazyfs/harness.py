"""Run the layer in a subprocess from tests, and always take it down again."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from . import control

_running: set[LazyFsProcess] = set()


def is_mounted(mountpoint: str) -> bool:
    target = os.path.realpath(mountpoint)
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            # /proc/mounts escapes spaces etc. as octal (\040)
            if len(fields) > 1 and _unescape(fields[1]) == target:
                return True
    return False


def _unescape(field: str) -> str:
    return field.encode().decode("unicode_escape").encode("latin-1").decode()


def unmount(mountpoint: str) -> None:
    """Unmount if mounted: a normal FUSE unmount first, a lazy detach as fallback."""
    if not is_mounted(mountpoint):
        return
    for args in (["-u"], ["-uz"]):
        subprocess.run(["fusermount3", *args, mountpoint], capture_output=True, timeout=30)
        if not is_mounted(mountpoint):
            return
        time.sleep(0.1)
    subprocess.run(["umount", "-l", mountpoint], capture_output=True, timeout=30)


def _child_env() -> dict[str, str]:
    """Let the child import this very package, installed or not."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


class LazyFsProcess:
    """One mounted layer. ``power_off`` drops in place; ``kill`` is a real power cut."""

    def __init__(self, backing: str, mountpoint: str, control_path: str | None = None,
                 metadata: str = "fsyncdir", fsync_backing: bool = False) -> None:
        self.backing = os.path.abspath(backing)
        self.mountpoint = os.path.abspath(mountpoint)
        self.control = control_path or control.default_path(self.backing)
        self.metadata = metadata
        self.fsync_backing = fsync_backing
        self.proc: subprocess.Popen[bytes] | None = None
        fd, self._log_path = tempfile.mkstemp(prefix="lazyfs-", suffix=".log")
        os.close(fd)

    def start(self, timeout: float = 20.0) -> LazyFsProcess:
        os.makedirs(self.backing, exist_ok=True)
        os.makedirs(self.mountpoint, exist_ok=True)
        cmd = [sys.executable, "-m", "pytest_elr.lazyfs", "mount", self.backing,
               self.mountpoint, "--control", self.control, "--metadata", self.metadata,
               "--exit-with-parent"]
        if self.fsync_backing:
            cmd.append("--fsync-backing")
        with open(self._log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=_child_env())
        _running.add(self)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                self._cleanup()
                raise RuntimeError(f"lazyfs exited with {self.proc.returncode}:\n{self.log()}")
            with contextlib.suppress(OSError):
                self.request("ping", timeout=2)
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"lazyfs did not come up:\n{self.log()}")
            time.sleep(0.02)

    def request(self, cmd: str, timeout: float = 60.0) -> dict[str, Any]:
        return control.request(self.control, cmd, timeout)

    def power_off(self) -> dict[str, Any]:
        """Drop every unsynced write and namespace change; stay mounted.

        Kill the application first, as a power cut would: a process that survives
        gets EIO from its old fds, and what it writes through them vanishes.
        """
        return self.request("power_off")

    def stats(self) -> dict[str, Any]:
        return self.request("stats")

    def sync(self) -> None:
        self.request("sync")

    def kill(self) -> None:
        """A real power cut: SIGKILL the layer, detach its dead mount."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self._cleanup()

    def stop(self, timeout: float = 20.0) -> None:
        """Clean unmount (syncs everything); escalates to kill + lazy unmount."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError, RuntimeError):
                self.request("unmount", timeout=timeout)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._cleanup()
        with contextlib.suppress(OSError):
            os.unlink(self._log_path)

    def log(self) -> str:
        with open(self._log_path, errors="replace") as f:
            return f.read()[-8000:]

    def _cleanup(self) -> None:
        unmount(self.mountpoint)
        _running.discard(self)

    def __enter__(self) -> LazyFsProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def mounted(backing: str, mountpoint: str, **kwargs: Any) -> Iterator[LazyFsProcess]:
    """Mount the layer in a subprocess; nothing stays mounted however the body ends."""
    fs = LazyFsProcess(backing, mountpoint, **kwargs)
    try:
        fs.start()
        yield fs
    finally:
        fs.stop()


@atexit.register
def _stop_all() -> None:
    for fs in list(_running):
        with contextlib.suppress(Exception):
            fs.stop(timeout=5)
