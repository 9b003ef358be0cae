"""``elr spark serve``: a Spark Connect server on this machine, kept warm for pytest sessions.

A pytest session's confirmation job pays for a JVM start and a cold first job (docs/spark.md): more
than a model suite's runs take. A server started once and reused skips both:

    elr spark serve                      # in a terminal of its own; Ctrl-C stops it
    PYTEST_ELR_SPARK_REMOTE=sc://127.0.0.1:15002 pytest scenarios/ --elr-backend=model

It is opt-in and explicitly managed: it runs in the foreground, in a process group of its own that
is killed when the command ends -- on Ctrl-C, SIGTERM, or after ``--lifetime`` (default one hour),
whichever comes first -- so nothing survives it. It listens on loopback only and runs its jobs in
local mode (``--master``), with the small-job settings a session's confirmation uses; on loopback it
reads the same files as the pytest process, so a session needs no shared ``--elr-history-dir``.
"""

from __future__ import annotations

import signal
import sys
import time
from types import FrameType

from pytest_elr.checker.cluster import CONNECT_CLASS, CONNECT_READY, HOST, ClusterError, LocalSparkCluster, spark_home
from pytest_elr.checker.confirm import SMALL_JOBS
from pytest_elr.core.commandline import command_parser

DEFAULT_PORT = 15002  # Spark Connect's own default


def connect_server_argv(master: str, port: int, driver_memory: str) -> list[str]:
    conf = [*SMALL_JOBS, ("spark.sql.shuffle.partitions", "2"), ("spark.ui.enabled", "false"),
            ("spark.connect.grpc.binding.address", HOST), ("spark.connect.grpc.binding.port", str(port)),
            ("spark.driver.host", HOST), ("spark.driver.bindAddress", HOST),
            ("spark.sql.files.openCostInBytes", str(64 << 10)),
            ("spark.sql.sources.parallelPartitionDiscovery.threshold", "100000"),
            ("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")]
    argv = [str(spark_home() / "bin" / "spark-submit"), "--class", CONNECT_CLASS, "--name", "pytest-elr-serve",
            "--master", master, "--driver-memory", driver_memory]
    for key, value in conf:
        argv += ["--conf", f"{key}={value}"]
    return [*argv, "spark-internal"]


class _Stop(Exception):
    pass


def _stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("spark serve", __doc__)
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default="2g")
    ap.add_argument("--lifetime", type=float, default=3600.0, help="seconds before the server is stopped")
    args = ap.parse_args(argv)
    cluster = LocalSparkCluster(workers=0, timeout_s=180.0)
    signal.signal(signal.SIGTERM, _stop)
    t0 = time.monotonic()
    try:
        server = cluster._start("connect", connect_server_argv(args.master, args.port, args.driver_memory))
        cluster._await(server, "the Connect server ready",
                       lambda: CONNECT_READY in server.log.read_text(errors="replace"))
        print(f"Spark Connect on {args.master} ready in {time.monotonic() - t0:.1f} s; stops in {args.lifetime:.0f} s "
              f"or on Ctrl-C. Log: {server.log}\n"
              f"PYTEST_ELR_SPARK_REMOTE=sc://{HOST}:{args.port}", flush=True)
        while time.monotonic() - t0 < args.lifetime:
            if server.popen.poll() is not None:
                print(f"the Connect server exited ({server.popen.returncode}):\n{server.tail()}", file=sys.stderr)
                return 1
            time.sleep(1.0)
        print("lifetime over: stopping the Connect server", flush=True)
    except (KeyboardInterrupt, _Stop):
        print("stopping the Connect server", flush=True)
    except ClusterError as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
