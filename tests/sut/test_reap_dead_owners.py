"""A process killed with SIGKILL runs no handler: what it started is removed by the next process
that starts a cluster, and only what a dead process owned."""

from __future__ import annotations

import contextlib
import os
import subprocess

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
