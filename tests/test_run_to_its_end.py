"""``run_to_its_end``: a tool stopped by SIGTERM passes it on to its pytest child and waits for its
clean-up (``elr soak`` stopped so once left 31 containers: its child died on a closed pipe)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: the child: on SIGTERM it takes a moment to "remove its clusters", then says it did
CHILD = """
import signal, sys, time
from pathlib import Path
done = Path(sys.argv[1])
def stop(signum, frame):
    time.sleep(1.0)
    done.write_text("cleaned up")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
Path(sys.argv[2]).write_text("started")
time.sleep(120)
"""

#: the parent: a tool running the child as ``elr soak`` runs pytest
PARENT = """
import subprocess, sys
from pytest_elr.core.concurrency import run_to_its_end, sigterm_interrupts
with sigterm_interrupts():
    run_to_its_end([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
"""


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_tool_waits_for_its_child_to_clean_up(tmp_path: Path, stop: signal.Signals) -> None:
    done, started = tmp_path / "done", tmp_path / "started"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, str(done), str(started)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not started.exists():
        assert time.monotonic() < deadline and parent.poll() is None, parent.communicate()
        time.sleep(0.05)
    parent.send_signal(stop)
    _, err = parent.communicate(timeout=60)
    assert parent.returncode != 0 and "KeyboardInterrupt" in err
    assert done.read_text() == "cleaned up", "the parent went before its child had cleaned up"


def test_the_child_runs_in_a_session_of_its_own(tmp_path: Path) -> None:
    """A terminal's Ctrl-C goes to the tool alone, which passes on one SIGTERM (a second would cut
    the plugin's clean-up short)."""
    from pytest_elr.core.concurrency import run_to_its_end

    done = run_to_its_end([sys.executable, "-c", "import os; print(os.getsid(0))"], stdout=subprocess.PIPE,
                          text=True)
    assert int(done.stdout) != os.getsid(0)
