"""The class-data sharing archive (AppCDS) of the local Spark driver's JVM.

A Spark driver loads ~15,000 classes from pyspark's jars, verifying each, before its first job
ends; a JDK (13 and up) can write the classes a JVM loaded into an archive when it exits
(``-XX:ArchiveClassesAtExit``) and map that archive at the next start (``-XX:SharedArchiveFile``).
Measured on the model suite's 45 runs (2 cores, load ~2-4): JVM and session start 3.5-4.4 s ->
1.7-1.9 s, the first parse of the runs 4.4-6.5 s -> 2.8-3.0 s (docs/performance.md).

The first local session of a user writes the archive into a per-user cache directory; later ones
map it. It is safe when the archive is

* missing: the JVM writes a new one under a name of its own (``<key>.<pid>.<random>.tmp``), renamed
  to ``<key>.jsa`` only after that JVM exited cleanly -- concurrent sessions (pytest-xdist,
  parallel invocations) each write their own and the last rename wins, whole;
* stale: its name is a hash of what it was made from (the ``java`` binary and pyspark's jars; the JVM
  flags), so another pyspark or JDK reads and writes another name, and drops the archives of the
  others (those of other flags are kept: the plugin and ``elr check`` use different ones);
* corrupt: a file without the archive's magic number is deleted and written again; a JVM that
  will not start with it (:func:`discard`) starts again without it, and the file is deleted.

The JVM reports every class it cannot archive (signed jars, generated classes) as a warning on
its stdout: CDS logging is turned off (``-Xlog:cds*=off``). ``PYTEST_ELR_SPARK_CDS=0`` turns the
archive off.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

ENV_CDS = "PYTEST_ELR_SPARK_CDS"
#: where the archives are kept (default: ``$XDG_CACHE_HOME/pytest-elr`` or ``~/.cache/pytest-elr``)
ENV_CACHE = "PYTEST_ELR_CACHE_DIR"
#: the first four bytes of a JDK dynamic archive (``CDS_DYNAMIC_ARCHIVE_MAGIC``), little-endian
MAGIC = (0xF00BABA8).to_bytes(4, "little")
_QUIET = "-Xlog:cds*=off"
#: a temporary archive older than this was left by a JVM that died while writing it
_STALE_TMP_S = 3600


def enabled(env: dict[str, str] | None = None) -> bool:
    value = (os.environ if env is None else env).get(ENV_CDS, "1").strip().lower()
    return value not in ("0", "false", "no", "off")


def cache_dir() -> Path:
    if os.environ.get(ENV_CACHE):
        return Path(os.environ[ENV_CACHE])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-elr"


def _java() -> str:
    """The ``java`` that pyspark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on the path."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java") or "java"
    return os.path.realpath(java)


def _spark_jars() -> str:
    import pyspark

    home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    return os.path.join(home, "jars")


def key(java_options: str, driver_memory: str) -> str:
    """What the archive depends on, hashed: ``spark-driver-<the JVM and every jar on the driver's class
    path>-<the flags>`` (heap size and GC decide whether an archive can be mapped)."""
    h = hashlib.sha256()
    for path in [_java(), *sorted(glob.glob(os.path.join(_spark_jars(), "*.jar")))]:
        try:
            st = os.stat(path)
        except OSError:
            continue
        h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    flags = hashlib.sha256(f"{java_options}\0{driver_memory}".encode())
    return f"spark-driver-{h.hexdigest()[:12]}-{flags.hexdigest()[:8]}"


def _is_archive(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


@dataclass
class Archive:
    """The archive of one JVM start: the file it maps (``use``) or the file it writes at exit
    (``writing``, renamed to ``path`` by :meth:`finish`)."""

    path: Path
    writing: Path | None = None

    @property
    def java_options(self) -> str:
        if self.writing is not None:
            return f"-XX:ArchiveClassesAtExit={self.writing} {_QUIET}"
        # A JVM that maps a damaged archive can crash: its error report goes beside the archive,
        # not into the working directory (and the session starts again without it, :func:`discard`).
        return f"-XX:SharedArchiveFile={self.path} -XX:ErrorFile={self.path.parent}/hs_err_pid%p.log {_QUIET}"

    def finish(self, exit_code: int | None) -> None:
        """After the JVM exited: keep what it wrote if it exited cleanly, else drop it."""
        if self.writing is None:
            return
        try:
            if exit_code == 0 and _is_archive(self.writing):
                os.replace(self.writing, self.path)
                self._drop_others()
            else:
                self.writing.unlink(missing_ok=True)
        except OSError:
            pass
        self.writing = None

    def discard(self) -> None:
        """The JVM would not start with this archive: delete it, so the next start writes another."""
        for p in (self.path, self.writing):
            if p is not None:
                with contextlib.suppress(OSError):
                    p.unlink(missing_ok=True)

    def _drop_others(self) -> None:
        """Archives of another JDK or pyspark (stale: never mapped again), and temporary files a dead
        JVM left. Archives of other flags stay: the plugin, the tests and ``elr check`` start their
        JVMs with different ones, and would otherwise replace each other's at every switch."""
        now = time.time()
        ours = self.path.name.rsplit("-", 1)[0] + "-"  # spark-driver-<JDK and jars>-
        for p in self.path.parent.glob("spark-driver-*"):
            with contextlib.suppress(OSError):
                stale = p.name.endswith(".jsa") and not p.name.startswith(ours)
                if stale or (p.name.endswith(".tmp") and now - p.stat().st_mtime > _STALE_TMP_S):
                    p.unlink()


def plan(java_options: str, driver_memory: str) -> Archive | None:
    """The archive for a local driver started with these flags, or None (turned off, or the cache
    directory can't be written)."""
    if not enabled():
        return None
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    path = directory / f"{key(java_options, driver_memory)}.jsa"
    if path.exists() and _is_archive(path):
        return Archive(path)
    if path.exists():  # not an archive: truncated or overwritten by something else
        try:
            path.unlink()
        except OSError:
            return None
    if not os.access(directory, os.W_OK):
        return None
    return Archive(path, writing=directory / f"{path.stem}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
