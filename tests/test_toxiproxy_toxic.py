"""The node's Toxiproxy toxics (Go tests), run with the Toxiproxy library they are built against.

kafka_hold decides what a `slow` link to the controller does on Kafka: hold AlterPartition
requests until healed, pass everything else. Our latency toxic replaces the stock one, which can
hang the proxy for good when removed while its connection is stuck or dying. Its real-cluster counterpart is
tests/sut/test_cluster_elr.py::test_hold_keeps_alter_partition_back_but_not_heartbeats.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from pytest_elr.sut.images import recipe_path


def test_kafka_hold_toxic_go_tests() -> None:
    go = shutil.which("go")
    assert go is not None, "Go is needed to build the node image's Toxiproxy (recipes/toxiproxy)"
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
    with recipe_path("toxiproxy") as src:
        run = subprocess.run([go, "test", "-count=1", "-v", "./..."], cwd=src, env=env,
                             capture_output=True, text=True, timeout=600)
        unformatted = subprocess.run([str(Path(go).with_name("gofmt")), "-l", "."], cwd=src,
                                     capture_output=True, text=True, timeout=60).stdout.split()
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert not unformatted, f"gofmt would change {unformatted}"
    for name in ("TestHeldUntilRemovedThenDeliveredInOrder", "TestInterruptKeepsTheHold",
                 "TestClientGoneStillDelivers", "TestOtherRequestsPass", "TestNotKafkaPassesThrough",
                 "TestRemovingLatencyNeverHangsOnAStuckClient"):
        assert f"--- PASS: {name}" in out, out
