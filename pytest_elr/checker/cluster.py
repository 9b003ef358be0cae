"""A real Spark cluster on this machine, from the pyspark package alone: a standalone master and its
workers, each a separate JVM on loopback, and a Spark Connect server.

The pyspark wheel has no ``start-master.sh``/``start-worker.sh``; its ``bin/spark-class`` starts the
master (``org.apache.spark.deploy.master.Master``) and a worker (``...deploy.worker.Worker``), and
its ``jars/`` hold the Connect server (``org.apache.spark.sql.connect.service.SparkConnectServer``),
which ``bin/spark-submit`` starts in the foreground (``sbin/start-connect-server.sh`` would
daemonise it, out of our reach). Every process is started in a session of its own and its whole
group is killed on exit -- also when start-up fails -- so nothing outlives the ``with`` block. And
since a ``with`` block does not run when its process is killed (SIGKILL, a CI job cancelled, an
xdist worker lost), each JVM runs under a guard that holds a pipe from this process and kills its
group when the pipe closes: the JVMs never outlive their owner.

For the tests (a checker verdict on a cluster equals the local one) and ``elr bench checker
--standalone``; pointing the checker at a cluster you run yourself is docs/spark.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, NoReturn

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    stop_after_delay,
    wait_fixed,
)

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: the line the Connect server logs once it accepts clients
CONNECT_READY = "Spark Connect server started"


class ClusterError(RuntimeError):
    """A Spark process that would not start; the message ends with the tail of its log."""


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


# The guard: runs the command with stdin closed, and kills its whole group (the command, anything
# it forked, itself) when the owner's pipe on fd 3 reaches EOF, i.e. when the owner is gone. It exits
# with the command's status otherwise, so a JVM that dies at start-up is still seen at once.
_GUARD = """exec 3<&0
"$@" </dev/null 3<&- & child=$!
{ read -r _ <&3; kill -KILL -- -$$; } &
watch=$!
wait "$child"; status=$?
kill "$watch" 2>/dev/null
exit "$status"
"""


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    _out: IO[bytes]

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # its own group: the JVM and anything it forked
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()
        self._out.close()
        if self.popen.stdin is not None:
            self.popen.stdin.close()


@dataclass
class LocalSparkCluster:
    """``workers`` standalone workers (``cores`` each) under one master, and with ``connect`` a Spark
    Connect server whose sessions run on that master (with one core per worker, ``spark.cores.max``,
    leaving the rest to other applications). ``master_url``, ``remote_url``: what to give
    ``PYTEST_ELR_SPARK_MASTER`` / ``PYTEST_ELR_SPARK_REMOTE``."""

    workers: int = 2
    cores: int = 2
    worker_memory: str = "1g"
    connect: bool = False
    timeout_s: float = 90.0
    #: the processes' logs and the workers' directories; by default a temporary one, removed at close
    work_dir: Path | None = None
    master_url: str = ""
    remote_url: str | None = None
    web_url: str = ""
    _processes: list[_Process] = field(default_factory=list)
    _own_work_dir: bool = False

    def __post_init__(self) -> None:
        if self.work_dir is None:
            self.work_dir, self._own_work_dir = Path(tempfile.mkdtemp(prefix="pytest-elr-spark-")), True

    @property
    def _dir(self) -> Path:
        assert self.work_dir is not None  # set by __post_init__
        return self.work_dir

    def env(self) -> dict[str, str]:
        env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP=HOST, SPARK_NO_DAEMONIZE="1")
        env.pop("PYSPARK_GATEWAY_PORT", None)
        return env

    def _start(self, name: str, argv: list[str]) -> _Process:
        log = self._dir / f"{name}.log"
        out = log.open("wb")
        # stdin: the guard's pipe, never written; it closes when this process ends, however it ends
        popen = subprocess.Popen(["bash", "-c", _GUARD, "pytest-elr-spark-guard", *argv], stdout=out,
                                 stderr=subprocess.STDOUT, stdin=subprocess.PIPE, env=self.env(),
                                 cwd=self._dir, start_new_session=True)
        process = _Process(name, popen, log, out)
        self._processes.append(process)
        return process

    def _await(self, process: _Process, what: str, check: Callable[[], Any]) -> Any:
        """``check()`` until it returns something true (a refused connection: not yet); the process
        exiting first, or the timeout, raises :class:`ClusterError` with the tail of its log."""
        def attempt() -> Any:
            if process.popen.poll() is not None:
                raise ClusterError(f"{process.name} exited ({process.popen.returncode}) before {what}:\n"
                                   f"{process.tail()}")
            return check()

        def give_up(state: RetryCallState) -> NoReturn:
            raise ClusterError(f"{process.name}: {what} not seen within {self.timeout_s:.0f} s:\n{process.tail()}")

        return Retrying(stop=stop_after_delay(self.timeout_s), wait=wait_fixed(0.25),
                        retry=retry_if_exception_type(OSError) | retry_if_result(lambda v: not v),
                        retry_error_callback=give_up)(attempt)

    def status(self) -> dict[str, Any]:
        """The master's own view (its web UI's JSON): workers, their state and cores, applications."""
        with urllib.request.urlopen(self.web_url + "/json/", timeout=5) as reply:
            return dict(json.load(reply))

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.status().get("workers", []) if w.get("state") == "ALIVE"]

    def __enter__(self) -> LocalSparkCluster:
        try:
            self._start_all()
        except BaseException:
            self.close()
            raise
        return self

    def _start_all(self) -> None:
        home = spark_home()
        spark_class = str(home / "bin" / "spark-class")
        port, web = free_port(), free_port()
        self.master_url, self.web_url = f"spark://{HOST}:{port}", f"http://{HOST}:{web}"
        master = self._start("master", [spark_class, MASTER_CLASS, "--host", HOST, "--port", str(port),
                                        "--webui-port", str(web)])
        self._await(master, "the master's web UI", lambda: self.status().get("status") == "ALIVE")
        for i in range(self.workers):
            work = self._dir / f"worker-{i}"
            work.mkdir(exist_ok=True)
            self._start(f"worker-{i}", [spark_class, WORKER_CLASS, self.master_url, "--host", HOST,
                                        "--cores", str(self.cores), "--memory", self.worker_memory,
                                        "--webui-port", str(free_port()), "--work-dir", str(work)])
        # registered = the master lists them ALIVE (polled on its REST/JSON view, no fixed sleep)
        self._await(master, f"{self.workers} workers registered",
                    lambda: len(self.alive_workers()) >= self.workers)
        if self.connect:
            grpc = free_port()
            server = self._start("connect", [
                str(home / "bin" / "spark-submit"), "--class", CONNECT_CLASS, "--name", "pytest-elr-connect",
                "--master", self.master_url, "--conf", f"spark.connect.grpc.binding.address={HOST}",
                "--conf", f"spark.connect.grpc.binding.port={grpc}", "--conf", "spark.ui.enabled=false",
                "--conf", f"spark.driver.host={HOST}", "--conf", "spark.executor.memory=512m",
                "--conf", "spark.sql.shuffle.partitions=2", "--conf", f"spark.cores.max={self.workers}",
                "spark-internal"])
            self._await(server, "the Connect server ready",
                        lambda: CONNECT_READY in server.log.read_text(errors="replace"))
            self.remote_url = f"sc://{HOST}:{grpc}"

    def executor_logs(self) -> dict[int, list[Path]]:
        """Per worker, the stderr of every executor it ran (``work-dir/app-*/N/stderr``): proof the
        work was done there."""
        return {i: sorted((self._dir / f"worker-{i}").glob("app-*/*/stderr")) for i in range(self.workers)}

    def close(self) -> None:
        for process in reversed(self._processes):  # the Connect server and workers before the master
            process.stop()
        self._processes.clear()
        if self._own_work_dir:  # a failed start's log tail is already in its ClusterError
            shutil.rmtree(self._dir, ignore_errors=True)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
