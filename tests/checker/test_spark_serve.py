"""``elr spark serve``: a warm Connect server that gives the local verdicts, stops on SIGTERM and
leaves nothing listening."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pytest_elr.checker.cluster import HOST, free_port
from pytest_elr.checker.job import check_runs
from pytest_elr.checker.session import ENV_REMOTE
from pytest_elr.checker.synth import SyntheticHistory, meta, write_history

ROOT = Path(__file__).resolve().parents[2]


def _line_with(proc: subprocess.Popen[str], text: str) -> str:
    """The first line of ``proc``'s output holding ``text``. Bounded without a timer of ours: the
    server gives up on its own (its start-up timeout) and exits, which ends the output."""
    assert proc.stdout is not None
    seen: list[str] = []
    for line in proc.stdout:
        seen.append(line)
        if text in line:
            return line
    raise AssertionError(f"{text!r} never printed; printed: {''.join(seen)[-2000:]}")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex((HOST, port)) == 0


def test_serve_gives_the_local_verdicts_and_leaves_nothing(spark: Any, tmp_path: Path) -> None:
    h = SyntheticHistory().send(1, 0).send(2, 1).send(3, 2).read(0, "v1").read(2, "v3")  # v2 lost
    run = write_history(tmp_path / "run", meta(run_id="run"), h.events)
    local = json.loads(json.dumps([f.to_dict() for f in check_runs([run], spark=spark)]))
    assert local[0]["lost_count"] == 1
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "pytest_elr", "spark", "serve", "--port", str(port),
                               "--lifetime", "600", "--driver-memory", "1g"],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    try:
        assert _line_with(server, "PYTEST_ELR_SPARK_REMOTE=").strip() == f"PYTEST_ELR_SPARK_REMOTE=sc://{HOST}:{port}"
        done = subprocess.run([sys.executable, "-m", "pytest_elr.checker", "--json", "-", run],
                              env={**os.environ, ENV_REMOTE: f"sc://{HOST}:{port}"}, cwd=ROOT,
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 1, done.stderr[-3000:]  # 1: a run with loss
        assert json.loads(done.stdout)["findings"] == local
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            raise
    assert server.returncode == 0
    time.sleep(1)
    assert not _listening(port), "the Connect server still listens after elr spark serve ended"
