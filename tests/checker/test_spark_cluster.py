"""The checker on a real Spark cluster: a standalone master and two workers, each a separate JVM on
loopback, and a Spark Connect server on that cluster. The histories sit in one directory that the
driver, the executors and the Connect server all see (docs/spark.md); the verdicts must be the ones
local mode gives, and the work must have been done by executors on both workers.

The cluster is started by ``LocalSparkCluster`` (pyspark's own ``bin/spark-class`` and
``bin/spark-submit``), awaited on the master's JSON view, and killed at the end of the module, also
when a test fails. The checker runs as its command line does (``python -m pytest_elr.checker``),
in a process of its own: one JVM per process, and the local-mode tests hold this one's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_elr.backends.model import ModelBackend
from pytest_elr.checker import inline_checker
from pytest_elr.checker.cluster import LocalSparkCluster
from pytest_elr.checker.confirm import SMALL_JOBS
from pytest_elr.checker.job import check_runs
from pytest_elr.checker.session import ENV_CONF, ENV_MASTER, ENV_REMOTE
from pytest_elr.checker.synth import SyntheticHistory, every_event_type, meta, write_history
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario
from pytest_elr.sut.polling import await_value

ROOT = Path(__file__).resolve().parents[2]
#: small histories: no whole-stage code generation nor adaptive execution (their cold cost is most of
#: a small job: see SMALL_JOBS), one executor core per worker
SMALL = " ".join(f"{k}={v}" for k, v in SMALL_JOBS) + " spark.sql.shuffle.partitions=2"
RUNS = [("kip966_last_replica_standing.elr.yaml", "legacy"), ("kip966_last_replica_standing.elr.yaml", "kip966"),
        ("design_clean_elr_recovery.elr.yaml", "legacy"), ("kip903_stale_broker_epoch.elr.yaml", "kafka")]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalSparkCluster]:
    with LocalSparkCluster(workers=2, cores=2, connect=True) as c:
        yield c


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Scenario runs on the model backend (losses among them), one history with every event type,
    and one with the rarer anomalies and a broken line."""
    shared = tmp_path_factory.mktemp("shared-histories")
    for file, profile in RUNS:
        run_scenario(load_scenario(ROOT / "scenarios" / file), ModelBackend(), profile, shared, inline_checker)
    write_history(shared / "every-type", meta(run_id="every-type"), every_event_type().events)
    h = SyntheticHistory().send(1, 0).send(2, 1).send(3, 1).observe(1, [1, 2], 5).observe(1, [1], 3)
    h.read(0, "v1").read(2, "v1").read(1, "v2").read(1, "v3").raw("not json\n")
    write_history(shared / "anomalies", meta(run_id="anomalies"), h.events)
    return sorted(str(p) for p in shared.iterdir())


def _cli(runs: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    """The checker's command line in a process of its own; its findings, as JSON."""
    done = subprocess.run([sys.executable, "-m", "pytest_elr.checker", "--json", "-", *runs],
                          env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return list(json.loads(done.stdout)["findings"])


@pytest.fixture(scope="module")
def local(spark: Any, runs: list[str]) -> list[dict[str, Any]]:
    found = json.loads(json.dumps([f.to_dict() for f in check_runs(runs, spark=spark)]))
    assert [f["lost_count"] for f in found if f["run_id"] and "legacy" in f["run_id"]] == [30, 40]
    assert next(f for f in found if f["run_id"] == "anomalies")["malformed_count"] == 1
    return list(found)


def test_standalone_cluster_gives_the_local_verdicts(cluster: LocalSparkCluster, runs: list[str],
                                                     local: list[dict[str, Any]]) -> None:
    conf = f"{SMALL} spark.cores.max=2 spark.executor.memory=512m"
    found = _cli(runs, {ENV_MASTER: cluster.master_url, ENV_CONF: conf})
    assert found == local
    app = next(a for a in cluster.status()["completedapps"] if a["name"] == "pytest-elr-checker")
    ran_on = {i for i, logs in cluster.executor_logs().items() if any(app["id"] in str(p) for p in logs)}
    assert ran_on == {0, 1}, f"executors of {app['id']} ran on workers {ran_on}"


def test_connect_server_gives_the_local_verdicts(cluster: LocalSparkCluster, runs: list[str],
                                                 local: list[dict[str, Any]]) -> None:
    assert cluster.remote_url is not None
    assert _cli(runs, {ENV_REMOTE: cluster.remote_url, ENV_CONF: SMALL}) == local


# --- nothing outlives its owner ----------------------------------------------------------------------

OWNER = """
import sys, time
from pathlib import Path
from pytest_elr.checker.cluster import LocalSparkCluster
c = LocalSparkCluster(work_dir=Path(sys.argv[1]))
p = c._start("stand-in", ["sleep", "600"])  # a daemon's stand-in, started exactly as the JVMs are
print(p.popen.pid, flush=True)
time.sleep(600)
"""


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_killed_owner_takes_its_spark_processes_with_it(tmp_path: Path) -> None:
    """SIGKILL runs no ``with`` block: the guard sees its owner's pipe close and kills the group."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    pgid = int(owner.stdout.readline())
    try:
        assert _group_alive(pgid)
        owner.kill()
        owner.wait()
        await_value(lambda: _group_alive(pgid), lambda alive: not alive, timeout_s=30)
    finally:
        if _group_alive(pgid):
            os.killpg(pgid, 9)


def test_a_guarded_process_that_dies_is_seen_with_its_status() -> None:
    c = LocalSparkCluster()  # its own temporary directory, removed at close
    p = c._start("early-exit", ["bash", "-c", "echo bye; exit 3"])
    assert p.popen.wait(timeout=30) == 3 and "bye" in p.log.read_text()
    c.close()
    assert c.work_dir is not None and not c.work_dir.exists()
