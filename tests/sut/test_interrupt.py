"""Interrupting a real run leaves nothing behind (SIGINT and SIGTERM of pytest)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import docker.errors
import pytest
from docker.models.containers import Container

from pytest_elr.sut import resources


def ctrl_c_as_a_terminal_gives_it() -> None:
    """In the child before it runs: SIGINT back to its default. A shell that started this run in the
    background without job control (a CI step's ``cmd &``) ignores SIGINT, the child would inherit
    that, and a Ctrl-C test would test nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]

CHILD_TEST = textwrap.dedent("""
    import time
    from pytest_elr.sut import KafkaCluster

    def test_holds_a_cluster():
        with KafkaCluster(brokers=[0, 1], controllers=1) as c:
            time.sleep(600)
""")


def _jvm_running(container: Container) -> bool:
    try:
        res = container.exec_run(["/opt/elr/bin/kafka-ctl", "status"])
    except docker.errors.APIError:  # not started yet
        return False
    return bool(res.output.strip() == b"running")


def _run_and_interrupt(tmp_path: Path, sig: signal.Signals, when: str) -> str:
    session = f"interrupt-{secrets.token_hex(4)}"
    (tmp_path / "test_child.py").write_text(CHILD_TEST)
    # Not an xdist worker itself, even when this test runs in one.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
    env = {**env, "PYTEST_ELR_SESSION": session,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_child.py"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        preexec_fn=ctrl_c_as_a_terminal_gives_it)
    client = resources.docker_client()
    flt = {"label": f"{resources.SESSION_LABEL}={session}"}
    out = b""
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            cs = client.containers.list(all=True, filters=flt, ignore_removed=True)
            # "created": the first container exists (mid-startup);
            # "ready": all three containers exist and the JVMs answer.
            if when == "created" and cs:
                break
            if when == "ready" and len(cs) == 3 and all(_jvm_running(c) for c in cs):
                time.sleep(3)
                break
            assert child.poll() is None, child.stdout.read().decode() if child.stdout else ""
            time.sleep(0.05)
        else:
            pytest.fail("the child never created its containers")
        child.send_signal(sig)
        out, _ = child.communicate(timeout=90)
        left = resources.count_resources(session)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        resources.cleanup(session)  # never leak, even when this test fails
    assert left == 0, f"{left} resources left after {sig.name}; child said:\n{out.decode()}"
    # The brokers' FUSE layers mount inside their containers' namespaces only.
    # (Other lazyfs mounts on the host, e.g. of tests/lazyfs, are not ours.)
    assert "/var/lib/kafka/data fuse.lazyfs" not in Path("/proc/mounts").read_text()
    return out.decode()


def test_sigint_during_startup_leaves_nothing(tmp_path: Path) -> None:
    _run_and_interrupt(tmp_path, signal.SIGINT, "created")


def test_sigterm_of_a_running_session_leaves_nothing(tmp_path: Path) -> None:
    out = _run_and_interrupt(tmp_path, signal.SIGTERM, "ready")
    # The plugin stops the session as Ctrl-C does: not one failed test and on to the next.
    assert "KeyboardInterrupt: signal 15" in out, out
