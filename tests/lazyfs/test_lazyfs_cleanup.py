"""Nothing stays mounted after a test that fails, is interrupted, or is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from pytest_elr.lazyfs.harness import is_mounted


def ctrl_c_as_a_terminal_gives_it() -> None:
    """In the child before it runs: SIGINT back to its default. A shell that started this run in the
    background without job control (a CI step's ``cmd &``) ignores SIGINT, the child would inherit
    that, and a Ctrl-C test would test nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


INNER = textwrap.dedent("""
    import os, time
    from pytest_elr.lazyfs.harness import mounted

    def test_inner(tmp_path):
        with mounted(os.environ["LZ_BACKING"], os.environ["LZ_MNT"]) as fs:
            with open(os.path.join(fs.mountpoint, "f"), "wb") as f:
                f.write(b"x")
            print("MOUNTED", flush=True)
            # the outer test looks at the mount first: it creates LZ_GO once it has seen it
            deadline = time.monotonic() + 30
            while not os.path.exists(os.environ["LZ_GO"]) and time.monotonic() < deadline:
                time.sleep(0.01)
            if os.environ["LZ_HOW"] == "fail":
                assert False, "fails mid-way"
            time.sleep(60)  # killed or interrupted here
""")


def _lazyfs_pids(mountpoint: str) -> list[int]:
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if b"pytest_elr.lazyfs" in cmd and os.fsencode(mountpoint) in cmd:
            pids.append(int(pid))
    return pids


def _wait_gone(mountpoint: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while is_mounted(mountpoint) or _lazyfs_pids(mountpoint):
        if time.monotonic() > deadline:
            pytest.fail(f"still mounted or running: {mountpoint} {_lazyfs_pids(mountpoint)}")
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["fail", "sigint", "sigkill"])
def test_nothing_left_mounted(tmp_path, needs_fuse, how: str) -> None:
    inner = tmp_path / "inner_lazyfs_test.py"
    inner.write_text(INNER)
    mnt = str(tmp_path / "mnt")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    go = tmp_path / "go"
    env = dict(os.environ, LZ_BACKING=str(tmp_path / "backing"), LZ_MNT=mnt, LZ_HOW=how, LZ_GO=str(go),
               PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "no:elr",
         "-p", "no:hypothesispytest",
         "--rootdir", str(tmp_path), str(inner)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        preexec_fn=ctrl_c_as_a_terminal_gives_it)
    assert proc.stdout is not None
    out = b""
    while b"MOUNTED" not in out:
        line = proc.stdout.readline()
        assert line, out.decode()
        out += line
    assert is_mounted(mnt)
    go.touch()  # only now may the inner test fail (it would unmount before this looked)
    if how == "sigint":
        proc.send_signal(signal.SIGINT)
    elif how == "sigkill":
        proc.send_signal(signal.SIGKILL)  # no finally runs: the layer notices by itself
    out += proc.stdout.read()
    proc.wait(timeout=60)
    assert proc.returncode != 0, out.decode()
    _wait_gone(mnt)
    # a clean unmount synced what the test wrote
    with open(tmp_path / "backing" / "f", "rb") as f:
        assert f.read() == b"x"


def test_sigterm_is_a_clean_shutdown(lazyfs) -> None:
    with open(os.path.join(lazyfs.mountpoint, "f"), "wb") as f:
        f.write(b"unsynced")
    lazyfs.proc.send_signal(signal.SIGTERM)
    assert lazyfs.proc.wait(timeout=20) == 0
    _wait_gone(lazyfs.mountpoint)
    with open(os.path.join(lazyfs.backing, "f"), "rb") as f:
        assert f.read() == b"unsynced"


def test_sigkill_is_a_power_cut(lazyfs) -> None:
    with open(os.path.join(lazyfs.mountpoint, "f"), "wb") as f:
        f.write(b"unsynced")
    lazyfs.kill()
    assert not is_mounted(lazyfs.mountpoint)
    assert os.listdir(lazyfs.backing) == [".lazyfs"]
    lazyfs.start()
    assert os.listdir(lazyfs.mountpoint) == []
