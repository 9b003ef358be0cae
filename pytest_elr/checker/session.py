"""The one Spark session of a process, and the settings it is built from.

Local mode (``local[*]``) by default; any master through ``PYTEST_ELR_SPARK_MASTER``, Spark
Connect through ``PYTEST_ELR_SPARK_REMOTE``, and under ``spark-submit`` whatever the launcher
was given (its ``--master`` wins).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_elr.checker import class_archive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ENV_MASTER = "PYTEST_ELR_SPARK_MASTER"
ENV_REMOTE = "PYTEST_ELR_SPARK_REMOTE"
ENV_DRIVER_MEMORY = "PYTEST_ELR_SPARK_DRIVER_MEMORY"
ENV_SHUFFLE_PARTITIONS = "PYTEST_ELR_SPARK_SHUFFLE_PARTITIONS"
ENV_JAVA_OPTIONS = "PYTEST_ELR_SPARK_JAVA_OPTIONS"
#: any other Spark settings, ``key=value`` separated by spaces (e.g. ``spark.executor.memory=2g``)
ENV_CONF = "PYTEST_ELR_SPARK_CONF"

# log4j2 config for a JVM we launch ourselves: Spark's default prints INFO/WARN lines
# (native-hadoop, stage bars) that bury the checker's own output.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# Spark sets an interactive (pyspark) driver to this logger's level, WARN unless configured.
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


@dataclass(frozen=True)
class SparkSettings:
    """How to reach Spark. ``remote`` (Spark Connect) takes precedence over ``master``."""

    master: str = "local[*]"
    remote: str | None = None
    driver_memory: str = "2g"
    # The default 200 shuffle partitions cost ~200 tiny tasks per shuffle: far too many for
    # histories that fit on one machine.
    shuffle_partitions: int = 4
    app_name: str = "pytest-elr-checker"
    log_level: str = "ERROR"
    # Extra driver JVM flags. Tests pass -XX:TieredStopAtLevel=1: the JIT's first tier only
    # halves the cold start on small histories (and slows big ones).
    java_options: str = ""
    # Any other Spark settings, applied last.
    conf: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SparkSettings:
        env = os.environ if env is None else env
        default = cls()
        return cls(
            master=env.get(ENV_MASTER) or default.master,
            java_options=env.get(ENV_JAVA_OPTIONS) or default.java_options,
            conf=tuple((k, v) for k, _, v in (kv.partition("=") for kv in (env.get(ENV_CONF) or "").split())),
            remote=env.get(ENV_REMOTE) or None,
            driver_memory=env.get(ENV_DRIVER_MEMORY) or default.driver_memory,
            shuffle_partitions=int(env.get(ENV_SHUFFLE_PARTITIONS) or default.shuffle_partitions),
        )

    @property
    def is_local(self) -> bool:
        return self.remote is None and self.master.startswith("local")


_lock = threading.Lock()
_session: SparkSession | None = None
#: the class-data sharing archive the local JVM of ``_session`` maps or writes (:mod:`.class_archive`)
_archive: class_archive.Archive | None = None


def under_spark_submit() -> bool:
    """True when this Python process was started by ``spark-submit`` (the JVM exists already)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _log4j2_file() -> str:
    path = os.path.join(tempfile.gettempdir(), "pytest-elr-log4j2.properties")
    with open(path, "w", encoding="utf-8") as f:
        f.write(_LOG4J2)
    return path


def get_spark(settings: SparkSettings | None = None) -> SparkSession:
    """The process's Spark session, created on first use and reused afterwards.

    ``settings`` only matter for the first call: a JVM can't be reconfigured once started.
    """
    global _session
    with _lock:
        if _session is not None:
            return _session
        settings = settings or SparkSettings.from_env()
        _session = _start(settings)
        return _session


def _start(settings: SparkSettings) -> SparkSession:
    """A session; a local JVM we launch maps the class-data sharing archive, or writes it when it
    exits. A JVM that will not start with the archive starts again without it (and it is deleted)."""
    global _archive
    if settings.remote or not settings.is_local or under_spark_submit():
        return _build(settings)
    # A command line or script that just exits would leave the JVM to exit after it (writing the
    # archive takes seconds, and the archive would never be renamed): its JVM is stopped and waited
    # for at exit. Harmless when stop_spark() ran already.
    atexit.register(stop_spark)
    _archive = class_archive.plan(settings.java_options, settings.driver_memory)
    if _archive is None:
        return _build(settings)
    try:
        return _build(settings, _archive.java_options)
    except Exception:
        if _archive.writing is not None:
            _archive.finish(None)
            _archive = None
            raise
        _archive.discard()
        _archive = None
        return _build(settings)


def _build(settings: SparkSettings, archive_options: str = "") -> SparkSession:
    # PySpark warns about pandas >= 3 on import; the checker doesn't use pandas.
    warnings.filterwarnings(
        "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
    )
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(settings.app_name)
    if settings.remote:
        builder = builder.remote(settings.remote)
    else:
        if not under_spark_submit():
            builder = builder.master(settings.master)
            builder = builder.config("spark.driver.memory", settings.driver_memory)
            builder = builder.config(
                "spark.driver.extraJavaOptions",
                f"-Dlog4j2.configurationFile=file:{_log4j2_file()} {settings.java_options} {archive_options}".strip(),
            )
            if settings.is_local:
                # Resolving the host name can take seconds (or pick an unreachable address)
                # on containers; loopback is all local mode needs.
                os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
                builder = builder.config("spark.driver.host", "127.0.0.1")
                builder = builder.config("spark.driver.bindAddress", "127.0.0.1")
                # Adaptive execution re-plans every stage: on one machine with a handful of shuffle
                # partitions it only costs (1 M records, alternating A/B, load 14-25: 40-49 s
                # without it, 57-83 s with it; docs/performance.md).
                builder = builder.config("spark.sql.adaptive.enabled", "false")
        builder = (
            builder.config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.warehouse.dir", os.path.join(tempfile.gettempdir(), "pytest-elr-wh"))
        )
    builder = builder.config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
    builder = builder.config("spark.sql.session.timeZone", "UTC")
    # A soak is thousands of run directories of kilobytes each. With the default cost of opening a
    # file (4 MiB) Spark packs 32 of them into a partition, so 10,000 runs became ~300 partitions
    # and every later stage over the cached events ~300 tasks; at 64 KiB they are a handful.
    builder = builder.config("spark.sql.files.openCostInBytes", str(64 << 10))
    # Beyond 32 paths Spark lists them with a job of one task per path (10,000 tasks for a soak,
    # twice: events and meta); the driver lists a local or shared directory's runs far faster.
    builder = builder.config("spark.sql.sources.parallelPartitionDiscovery.threshold", "100000")
    for key, value in settings.conf:
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if not settings.remote:
        spark.sparkContext.setLogLevel(settings.log_level)
    return spark


def stop_spark() -> None:
    """Stop the session and, when this process launched its JVM, wait until that JVM has exited: no
    process outlives the caller, and a JVM writing the class-data sharing archive finishes it."""
    global _session, _archive
    with _lock:
        if _session is None:
            return
        spark, _session = _session, None
        archive, _archive = _archive, None
        proc = None if not hasattr(spark, "sparkContext") else getattr(spark.sparkContext._gateway, "proc", None)
        if proc is None:  # Spark Connect, or a JVM spark-submit started (it outlives us by design)
            spark.stop()
            return
        exit_code = _stop_local(spark, proc)
        if archive is not None:
            archive.finish(exit_code)


#: the private attributes of a SparkContext the quick stop uses; ``pyproject.toml`` admits any pyspark
#: 4.x, so a release without one of them is stopped through pyspark's public ``stop()`` instead
_PRIVATE = ("_jvm", "_jsc", "_gateway", "_accumulatorServer")


def _has_internals(sc: object) -> bool:
    """Whether ``sc`` has every attribute the quick stop reads. Looked at before anything is stopped:
    a stop half done the quick way cannot be finished the public way (its gateway is gone)."""
    return all(hasattr(sc, name) for name in _PRIVATE)


def _stop_local(spark: SparkSession, proc: subprocess.Popen[bytes]) -> int | None:
    """Stop a session whose JVM this process launched, then the JVM, and wait for it.

    ``SparkSession.stop()`` would leave the JVM to exit when this process does, and spends ~1 s
    waiting for pyspark's accumulator server, which polls its connection from the JVM once a second:
    the JVM goes first here, so that connection closes at once. A pyspark whose internals differ is
    stopped with ``stop()``, then its JVM is waited for all the same."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession, SQLContext

    sc = spark.sparkContext
    if not _has_internals(sc):
        spark.stop()
        return _wait_jvm(proc)
    try:
        jvm = sc._jvm
        jvm.SparkSession.clearDefaultSession()
        jvm.SparkSession.clearActiveSession()
        sc._jsc.stop()
    except Exception:  # a JVM that died already: it is waited for below all the same
        pass
    sc._jsc = None  # type: ignore[assignment]
    with contextlib.suppress(Exception):
        sc._gateway.shutdown()
    server = sc._accumulatorServer
    if server is not None:  # the JVM's hanging up is no error
        server.server_shutdown = True
        server.handle_error = lambda *args: None  # type: ignore[method-assign]
    exit_code = _wait_jvm(proc)
    if server is not None:
        # Its handler reads the JVM's connection until that closes (then it stops, quietly: see
        # above). shutdown() waits for its serving loop's next poll; the thread is a daemon.
        threading.Thread(target=server.shutdown, name="pytest-elr-accumulators", daemon=True).start()
        sc._accumulatorServer = None  # type: ignore[assignment]
    sc.stop()  # what is left: pyspark forgets the active context
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    SQLContext._instantiatedContext = None
    SparkContext._gateway = None
    SparkContext._jvm = None
    return exit_code


#: a JVM that has used no CPU for this long while we wait for it to exit is hung: killed
JVM_EXIT_IDLE_S = 120.0


def _cpu_ticks(pid: int) -> int | None:
    """The process's user + system CPU time in clock ticks (Linux ``/proc``), None where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat(5))
    except (OSError, IndexError, ValueError):
        return None


def _wait_jvm(proc: subprocess.Popen[bytes], idle_s: float = JVM_EXIT_IDLE_S) -> int | None:
    """Close the JVM's stdin (pyspark's gateway server exits when it closes) and wait for it to exit;
    killed once it has used no CPU for ``idle_s``. Writing the class-data sharing archive takes ~30 s of
    CPU: on a loaded machine more than 120 s of wall time (CI: an archive never written), so what
    is awaited is the work ending, not a time."""
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    ticks, busy_at = _cpu_ticks(proc.pid), time.monotonic()
    while True:
        try:
            return proc.wait(timeout=min(5.0, idle_s))
        except subprocess.TimeoutExpired:
            pass
        now_ticks = _cpu_ticks(proc.pid)
        if now_ticks is not None and now_ticks != ticks:
            ticks, busy_at = now_ticks, time.monotonic()
        elif time.monotonic() - busy_at > idle_s:
            proc.kill()
            proc.wait()
            return None
