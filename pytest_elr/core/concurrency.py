"""What a tool that runs several clusters at once needs from the process: SIGTERM that unwinds like
Ctrl-C (so every ``finally`` stops its children), and output lines that stay whole when several
threads print."""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

#: how long a child told to stop (SIGTERM) gets to remove what it started before it is killed
CHILD_GRACE_S = 300.0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While inside, SIGTERM raises KeyboardInterrupt in the main thread (a handler installed from a
    worker thread is not possible, so one installed there would never stop the workers' children).
    A handler someone else installed is left alone; outside the main thread this does nothing."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        yield
        return
    previous: Any = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous or signal.SIG_DFL)


def whole_lines(say: Callable[[str], None]) -> Callable[[str], None]:
    """``say`` one line at a time: ``print`` writes a line and its newline apart, so two threads
    printing at once could mix their lines."""
    lock = threading.Lock()

    def locked(line: str) -> None:
        with lock:
            say(line)

    return locked


def parallel_count(text: str) -> int:
    """``--parallel N``: a whole number of concurrent clusters, at least 1."""
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"--parallel: expected a whole number from 1 to 64, got {text!r}")
    return int(text)


def run_to_its_end(cmd: Sequence[str], grace_s: float = CHILD_GRACE_S,
                   **popen: Any) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` for a child that cleans up after itself (a pytest session with clusters).
    The child runs in a session of its own, so a terminal's Ctrl-C reaches this process alone; an
    interrupt here (Ctrl-C, or SIGTERM under ``sigterm_interrupts``) is passed on as one SIGTERM --
    which the plugin unwinds like Ctrl-C, a second would cut its clean-up short -- and the child is
    waited for (``grace_s``, then SIGKILL) before the interrupt goes on up. ``subprocess.run``
    would SIGKILL it at once, and a parent that SIGTERM's default ends leaves it writing into a
    closed pipe: either way its clusters stay behind (seen: ``elr soak`` stopped by SIGTERM left 31
    containers)."""
    with subprocess.Popen(list(cmd), start_new_session=True, **popen) as proc:
        try:
            out, err = proc.communicate()
        except BaseException:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
            raise
    return subprocess.CompletedProcess(list(cmd), proc.returncode, out, err)
