"""Probe (docs/performance.md, "A broker's power off and its restart"): a pytest plugin that times
each Docker call (``KafkaNode.exec``, the archive reads) made inside a broker's ``power_off``, a
controller's ``power_off_controller`` and a ``power_on``, and prints them at the session's end: the
fault call's wall time, then each call in the order made, its start within the fault, its duration,
its thread and its command. Nothing is changed, only timed.

    PYTHONPATH=docs/probes python3 -m pytest -p docker_calls scenarios/kip966_last_replica_standing.elr.yaml \
        --elr-backend=kafka --elr-kafka-version=4.4.0 --elr-parallel 1 --elr-checker=inline -p no:randomly -q -rA

One cluster at a time (``--elr-parallel 1``): the plugin times the calls of its own process only.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from pytest_elr.faults.process import ProcessFaults
from pytest_elr.sut.node import KafkaNode

FAULTS = ("power_off", "power_off_controller", "power_on")
_lock = threading.Lock()
_calls: list[tuple[float, float, str, str]] = []  # start, seconds, thread, what
_faults: list[tuple[str, int, float, float]] = []  # name, node id, start, seconds


def _timed(fn: Callable[..., Any], record: Callable[[float, float, tuple[Any, ...]], None]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            record(start, time.monotonic() - start, args)
    return wrapper


def _docker_call(kind: str) -> Callable[[float, float, tuple[Any, ...]], None]:
    def record(start: float, seconds: float, args: tuple[Any, ...]) -> None:
        node, rest = args[0], args[1:]
        what = " ".join(map(str, rest if kind == "exec" else rest[1:2]))
        with _lock:
            _calls.append((start, seconds, threading.current_thread().name, f"{node.name} {kind} {what}"[:140]))
    return record


def _fault(name: str) -> Callable[[float, float, tuple[Any, ...]], None]:
    def record(start: float, seconds: float, args: tuple[Any, ...]) -> None:
        with _lock:
            _faults.append((name, int(args[1]), start, seconds))
    return record


def pytest_configure(config: pytest.Config) -> None:
    KafkaNode.exec = _timed(KafkaNode.exec, _docker_call("exec"))  # type: ignore[method-assign]
    KafkaNode._archive_files = _timed(KafkaNode._archive_files, _docker_call("archive"))  # type: ignore[method-assign]
    for name in FAULTS:
        setattr(ProcessFaults, name, _timed(getattr(ProcessFaults, name), _fault(name)))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for name, node, start, seconds in _faults:
        inside = [c for c in _calls if start <= c[0] <= start + seconds]
        terminalreporter.write_line(f"{name}({node}): {seconds:.2f} s, {len(inside)} Docker calls "
                                    f"({sum(c[1] for c in inside):.2f} s in them)")
        for at, took, thread, what in inside:
            terminalreporter.write_line(f"  +{at - start:6.2f} s {took:6.2f} s  {thread[:14]:14s} {what}")
