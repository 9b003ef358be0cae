"""Labels, names and cleanup of every Docker resource this project creates.

Every container and network carries:

* ``pytest-elr=1``                 - made by this project (what ``reap_leftovers`` finds)
* ``pytest-elr.session=<id>``      - the test session (``$PYTEST_ELR_SESSION``, or
                                     ``<pid>-<random>``; an xdist worker's is its
                                     controller's, given in ``workerinput``)
* ``pytest-elr.xdist-worker=<gwN>`` - the pytest-xdist worker, if any
* ``pytest-elr.cluster=<id>``      - one cluster
* ``pytest-elr.owner-pid=<pid>``   - the creating process, so leftovers of dead
                                     processes can be reaped without touching a
                                     live parallel session's clusters

Ryuk (testcontainers' reaper) is an image we cannot pull, so cleanup is ours:
``KafkaCluster.close`` removes by label (which also catches containers created
concurrently with an interrupt), live clusters are closed at interpreter exit,
and SIGTERM is turned into ``KeyboardInterrupt`` so that ``finally`` blocks and exit handlers
run. An xdist controller removes, after its workers, what a worker killed before its cleanup left
(``reap_session``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import docker.errors

from pytest_elr.sut.errors import EngineNotRunningError

LABEL = "pytest-elr"
SESSION_LABEL = f"{LABEL}.session"
CLUSTER_LABEL = f"{LABEL}.cluster"
OWNER_LABEL = f"{LABEL}.owner-pid"
WORKER_LABEL = f"{LABEL}.xdist-worker"

_session_id: str | None = None


def session_id() -> str:
    """This process's session id (stable for the process)."""
    global _session_id
    if _session_id is None:
        # A given $PYTEST_ELR_SESSION is shared by all xdist workers, so one
        # cleanup(session) removes what every worker made.
        _session_id = (os.environ.get("PYTEST_ELR_SESSION")
                       or f"{os.getpid()}-{secrets.token_hex(3)}")
    return _session_id


def use_session(session: str) -> None:
    """Label what this process makes with ``session`` (an xdist worker: its controller's id), so the
    controller can remove what a worker that died before its cleanup left behind."""
    global _session_id
    _session_id = session


_reaped_in: int | None = None  # the pid that has reaped dead owners' leftovers (a fork must again)


def new_cluster_id() -> str:
    """Unique per process and xdist worker: pid + random suffix. The first cluster of a process
    first removes what processes that died without cleaning up left behind (SIGKILL, an OOM kill, a
    power cut: no handler runs then), so one such death does not pin containers and memory for good."""
    global _reaped_in
    if _reaped_in != os.getpid():
        _reaped_in = os.getpid()
        with contextlib.suppress(EngineNotRunningError, docker.errors.DockerException):
            reap_leftovers(only_dead_owners=True)
    return f"{os.getpid()}-{secrets.token_hex(4)}"


def labels(cluster_id: str) -> dict[str, str]:
    return {LABEL: "1", SESSION_LABEL: session_id(), CLUSTER_LABEL: cluster_id,
            OWNER_LABEL: str(os.getpid()),
            WORKER_LABEL: os.environ.get("PYTEST_XDIST_WORKER", "")}


def docker_client() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except docker.errors.DockerException as e:
        raise EngineNotRunningError(
            f"no Docker engine answers ({e}).\nfix: run `elr images setup-host` as root "
            "(installs docker.io and starts dockerd), or start your engine / set DOCKER_HOST"
        ) from e
    return client


def _containers(client: docker.DockerClient, filters: dict[str, Any]) -> list[dict[str, Any]]:
    # Low-level listing: the high-level one inspects each container and raises
    # NotFound for one being created or removed concurrently.
    result: list[dict[str, Any]] = client.api.containers(all=True, filters=filters)
    return result


def _remove(client: docker.DockerClient, filters: dict[str, Any]) -> int:
    n = 0
    for c in _containers(client, filters):
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            client.api.remove_container(c["Id"], force=True, v=True)
            n += 1
    for net in client.api.networks(filters=filters):
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            client.api.remove_network(net["Id"])
            n += 1
    vols = client.api.volumes(filters=filters).get("Volumes") or []
    for vol in vols:
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            client.api.remove_volume(vol["Name"], force=True)
            n += 1
    return n


def remove_cluster(cluster_id: str, client: docker.DockerClient | None = None) -> int:
    return _remove(client or docker_client(), {"label": f"{CLUSTER_LABEL}={cluster_id}"})


def cleanup(session_label: str | None = None) -> int:
    """Remove every resource of one session (default: this process's). Returns the count."""
    return _remove(docker_client(), {"label": f"{SESSION_LABEL}={session_label or session_id()}"})


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has exited: it only waits for its parent to read its status
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc: kill(0) is all we know


def reap_leftovers(only_dead_owners: bool = True) -> int:
    """Remove resources labelled by this project.

    With ``only_dead_owners`` (default) only those whose creating process is
    gone, so a parallel live session is left alone; ``False`` removes all.
    """
    client = docker_client()
    n = 0
    seen: set[str] = set()
    found = [c.get("Labels") or {} for c in _containers(client, {"label": LABEL})]
    found += [net.get("Labels") or {} for net in client.api.networks(filters={"label": LABEL})]
    for lab in found:
        cid = lab.get(CLUSTER_LABEL)
        if not cid or cid in seen:
            continue
        owner = lab.get(OWNER_LABEL, "")
        if only_dead_owners and owner.isdigit() and _pid_alive(int(owner)):
            continue
        seen.add(cid)
        n += remove_cluster(cid, client)
    return n


def reap_session(session: str, wait_s: float) -> int:
    """Remove the clusters of ``session`` whose creating process has ended, after awaiting (up to
    ``wait_s``) the end of those processes. An xdist controller calls this after its workers: a
    worker killed before its cleanup finished (execnet ends one 15 s after it loses its controller,
    xdist kills one that does not stop within 10 s) leaves its cluster labelled with the session."""
    client = docker_client()
    f = {"label": f"{SESSION_LABEL}={session}"}
    deadline = time.monotonic() + wait_s
    while True:
        found = [c.get("Labels") or {} for c in _containers(client, f)]
        found += [net.get("Labels") or {} for net in client.api.networks(filters=f)]
        owners = {lab.get(CLUSTER_LABEL, ""): lab.get(OWNER_LABEL, "") for lab in found}
        alive = {cid for cid, owner in owners.items() if owner.isdigit() and _pid_alive(int(owner))}
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    return sum(remove_cluster(cid, client) for cid in owners if cid and cid not in alive)


def count_resources(session_label: str) -> int:
    client = docker_client()
    f = {"label": f"{SESSION_LABEL}={session_label}"}
    vols = client.api.volumes(filters=f).get("Volumes") or []
    return len(_containers(client, f)) + len(client.api.networks(filters=f)) + len(vols)


# ------------------------------------------------------------ exit handling

_live: dict[int, Callable[[], None]] = {}
_lock = threading.Lock()
_atexit_installed = False
#: the SIGTERM handler before ours, while containers of ours live (None: ours is not installed)
_previous_sigterm: Any = None


def _close_all() -> None:
    with _lock:
        closers = list(_live.values())
        _live.clear()
    for close in closers:
        with contextlib.suppress(Exception):
            close()


def _on_sigterm(signum: int, frame: object) -> None:
    # SIGTERM (a CI job's timeout, `kill`) ends the run as Ctrl-C does: KeyboardInterrupt unwinds
    # `finally` blocks and fixtures, and pytest stops the session instead of counting one failed
    # test and starting the next cluster. atexit closes whatever is still open.
    raise KeyboardInterrupt(f"signal {signum}")


def register(key: int, close: Callable[[], None]) -> None:
    """Close ``close`` at interpreter exit unless unregistered first. While anything registered
    lives, SIGTERM interrupts the main thread like Ctrl-C; the handler before comes back after."""
    global _atexit_installed, _previous_sigterm
    with _lock:
        _live[key] = close
        if not _atexit_installed:
            atexit.register(_close_all)
            _atexit_installed = True
        if (_previous_sigterm is None and threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None)):
            _previous_sigterm = signal.getsignal(signal.SIGTERM) or signal.SIG_DFL
            signal.signal(signal.SIGTERM, _on_sigterm)


def unregister(key: int) -> None:
    global _previous_sigterm
    with _lock:
        _live.pop(key, None)
        if (not _live and _previous_sigterm is not None
                and threading.current_thread() is threading.main_thread()):
            signal.signal(signal.SIGTERM, _previous_sigterm)
            _previous_sigterm = None
