"""A process killed with SIGKILL runs no handler: what it started is removed by the next process
that starts a cluster, or by the xdist controller of its session after its workers, and only what a
dead process owned."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import threading

import docker.errors
import pytest

from pytest_elr.sut import resources

pytestmark = pytest.mark.docker


def _network_of(owner: int, cluster_id: str) -> str:
    client = resources.docker_client()
    labels = {**resources.labels(cluster_id), resources.OWNER_LABEL: str(owner)}
    return client.networks.create(f"pytest-elr-reap-test-{cluster_id}", labels=labels).id


def test_the_first_cluster_of_a_process_removes_what_dead_processes_left(monkeypatch: pytest.MonkeyPatch) -> None:
    dead_pid = subprocess.Popen(["true"])
    dead_pid.wait()
    client = resources.docker_client()
    dead = _network_of(dead_pid.pid, f"{dead_pid.pid}-deadbeef")
    alive = _network_of(os.getpid(), f"{os.getpid()}-a11ce000")
    try:
        monkeypatch.setattr(resources, "_reaped_in", None)
        resources.new_cluster_id()
        names = {n.id for n in client.networks.list(filters={"label": resources.LABEL})}
        assert dead not in names, "a dead process's network survived the next cluster's start"
        assert alive in names, "a live process's network was removed"
        assert resources._reaped_in == os.getpid()
    finally:
        for net in (dead, alive):
            with contextlib.suppress(Exception):  # already removed (the point of the test)
                client.networks.get(net).remove()


def test_reap_session_awaits_the_owners_then_removes_only_dead_owners_clusters(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What an xdist controller does after its workers: once its session's owners have ended
    (awaited, bounded), their clusters go; a live owner's and another session's stay.

    The owners are live processes that this process alone sees end (``_pid_alive`` patched here):
    a really dead owner's network is fair game for any other process of a parallel run that starts
    a cluster (``reap_leftovers``), which would make the counts below a race. Whether a pid is alive
    is ``_pid_alive``'s own test (a zombie is dead, tests/sut/test_units.py)."""
    client = resources.docker_client()
    session = f"reap-{secrets.token_hex(4)}"
    dead = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    ending = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    ended = {dead.pid}
    real_alive = resources._pid_alive
    monkeypatch.setattr(resources, "_pid_alive", lambda pid: pid not in ended and real_alive(pid))
    owners = {"dead": (session, dead.pid), "ending": (session, ending.pid),
              "other": (f"{session}-other", dead.pid), "live": (f"{session}-live", os.getpid())}
    made = []

    def ours() -> set[str]:
        return {n["Labels"][resources.CLUSTER_LABEL] for n in client.api.networks(filters={"label": resources.LABEL})
                if n["Labels"].get(resources.CLUSTER_LABEL, "").startswith(session)}

    try:
        for name, (sess, pid) in owners.items():
            labels = {resources.LABEL: "1", resources.CLUSTER_LABEL: f"{session}-{name}",
                      resources.SESSION_LABEL: sess, resources.OWNER_LABEL: str(pid)}
            made.append(client.api.create_network(f"pytest-elr-{session}-{name}", labels=labels)["Id"])
        removed: list[int] = []
        reaper = threading.Thread(target=lambda: removed.append(resources.reap_session(session, wait_s=120)))
        reaper.start()
        assert reaper.is_alive() and len(ours()) == 4  # an owner of the session lives: nothing goes yet
        ended.add(ending.pid)
        reaper.join(timeout=60)  # well before its 120 s: it awaits the owners, not the time
        assert not reaper.is_alive(), "reap_session went on after its session's owners ended"
        assert removed == [2] and ours() == {f"{session}-other", f"{session}-live"}, (removed, ours())
        # A live owner: after the (bounded) wait its cluster stays.
        assert resources.reap_session(f"{session}-live", wait_s=0.5) == 0
        assert ours() == {f"{session}-other", f"{session}-live"}
    finally:
        for process in (dead, ending):
            process.kill()
            process.wait()
        for net in made:
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_network(net)
