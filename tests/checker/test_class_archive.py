"""The class-data sharing archive of the local driver JVM (checker/class_archive.py): written once
under a temporary name and renamed when its JVM exited cleanly, reused while its inputs are the same,
and never a reason for a session not to start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_elr.checker import class_archive
from pytest_elr.checker.class_archive import MAGIC, plan


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(class_archive.ENV_CACHE, str(tmp_path / "cache"))
    monkeypatch.delenv(class_archive.ENV_CDS, raising=False)
    return tmp_path / "cache"


def test_missing_archive_is_written_under_a_temporary_name_then_renamed(cache: Path) -> None:
    a = plan("-XX:TieredStopAtLevel=1", "2g")
    assert a is not None and a.writing is not None and not a.path.exists()
    assert f"-XX:ArchiveClassesAtExit={a.writing}" in a.java_options and "-Xlog:cds*=off" in a.java_options
    assert a.writing.parent == a.path.parent == cache and a.writing.name.endswith(".tmp")
    a.writing.write_bytes(MAGIC + b"\0" * 64)  # what the JVM writes at exit
    a.finish(0)
    assert a.path.read_bytes().startswith(MAGIC) and list(cache.glob("*.tmp")) == []
    b = plan("-XX:TieredStopAtLevel=1", "2g")  # the next session maps it
    assert b is not None and b.writing is None and b.path == a.path
    assert f"-XX:SharedArchiveFile={a.path}" in b.java_options


@pytest.mark.parametrize("exit_code", [1, None])
def test_a_jvm_that_did_not_exit_cleanly_leaves_no_archive(cache: Path, exit_code: int | None) -> None:
    a = plan("", "1g")
    assert a is not None and a.writing is not None
    a.writing.write_bytes(MAGIC)  # half written
    a.finish(exit_code)
    assert list(cache.iterdir()) == []


def test_concurrent_writers_each_write_their_own_file(cache: Path) -> None:
    a, b = plan("", "1g"), plan("", "1g")
    assert a is not None and b is not None and a.writing != b.writing and a.path == b.path
    for x, body in ((a, b"first"), (b, b"second")):
        assert x.writing is not None
        x.writing.write_bytes(MAGIC + body)
    a.finish(0)
    b.finish(0)  # the last rename wins, whole
    assert a.path.read_bytes() == MAGIC + b"second" and [p.name for p in cache.iterdir()] == [a.path.name]


def test_corrupt_archive_is_replaced(cache: Path) -> None:
    first = plan("", "1g")
    assert first is not None
    first.path.write_bytes(b"not an archive")
    a = plan("", "1g")
    assert a is not None and a.writing is not None and not a.path.exists()


def test_stale_archives_are_dropped_other_flags_kept(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def write(java_options: str) -> Path:
        a = plan(java_options, "1g")
        assert a is not None and a.writing is not None
        a.writing.write_bytes(MAGIC)
        a.finish(0)
        return a.path

    old = write("-Xmx1g")
    other_flags = write("-Xmx1g -XX:+UseSerialGC")  # another key, kept: both are in use
    assert other_flags != old and sorted(cache.iterdir()) == sorted([old, other_flags])
    java = cache.parent / "java"  # another JDK (or other jars): the archives above are stale
    java.write_text("")
    monkeypatch.setattr(class_archive, "_java", lambda: str(java))
    new = write("-Xmx1g")
    assert new not in (old, other_flags) and list(cache.iterdir()) == [new]


def test_turned_off(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(class_archive.ENV_CDS, "0")
    assert plan("", "1g") is None


_SESSION = """
import os, sys
from pytest_elr.checker.session import SparkSettings, get_spark, stop_spark
spark = get_spark(SparkSettings(master="local[1]", driver_memory="1g", java_options="-XX:TieredStopAtLevel=1"))
print(sys.argv[1], spark.range(3).count(), spark.sparkContext._gateway.proc.pid, flush=True)
if sys.argv[1] != "first":  # the first exits as a command line does: stopped at exit
    stop_spark()
"""


def _session(cache: Path, tag: str) -> int:
    env = {**os.environ, class_archive.ENV_CACHE: str(cache)}
    env.pop(class_archive.ENV_CDS, None)
    out = subprocess.run([sys.executable, "-c", _SESSION, tag], env=env, capture_output=True, text=True,
                         timeout=600, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith(tag))
    _, count, pid = line.split()
    assert count == "3"
    return int(pid)


def test_sessions_write_then_map_the_archive_and_survive_a_damaged_one(tmp_path: Path) -> None:
    """Real JVMs: the first session writes the archive (its JVM has exited when the process exits,
    without a call to stop_spark),
    the second maps it, a third starts although the archive was cut in half (a JVM mapping it crashes:
    the session starts again without it), and the next one writes it again."""
    cache = tmp_path / "cache"
    pid = _session(cache, "first")
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # no JVM outlives the session
    (archive,) = cache.glob("*.jsa")
    assert archive.read_bytes()[:4] == MAGIC and list(cache.glob("*.tmp")) == []
    _session(cache, "second")
    assert archive.exists()
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    _session(cache, "third")
    assert not archive.exists() or archive.stat().st_size != len(data) // 2
    _session(cache, "fourth")
    assert archive.read_bytes()[:4] == MAGIC


_PUBLIC_STOP = """
import os, sys
from pytest_elr.checker import session
session._has_internals = lambda sc: False  # as with a pyspark whose private attributes differ
spark = session.get_spark(session.SparkSettings(master="local[1]", driver_memory="1g"))
pid = spark.sparkContext._gateway.proc.pid
print("count", spark.range(3).count(), pid, flush=True)
session.stop_spark()
os.kill(pid, 0)  # raises ProcessLookupError: the JVM has exited before stop_spark returned
"""


def test_a_pyspark_with_other_internals_is_stopped_the_public_way_and_leaves_no_jvm() -> None:
    """The quick stop reads pyspark's private attributes; when one is missing nothing is stopped that
    way, pyspark's own stop() runs, and the JVM is still waited for (a half-done quick stop blocked)."""
    env = {**os.environ, class_archive.ENV_CDS: "0"}
    done = subprocess.run([sys.executable, "-c", _PUBLIC_STOP], env=env, capture_output=True, text=True, timeout=300)
    assert "count 3" in done.stdout, done.stderr[-2000:]
    assert done.returncode != 0 and "ProcessLookupError" in done.stderr, done.stderr[-2000:]


def test_the_quick_stop_needs_every_private_attribute() -> None:
    from pytest_elr.checker.session import _PRIVATE, _has_internals

    class Context:
        pass

    sc = Context()
    for name in _PRIVATE:
        assert not _has_internals(sc)
        setattr(sc, name, None)
    assert _has_internals(sc)


def test_a_jvm_that_works_on_is_waited_for_one_that_idles_is_killed() -> None:
    """CI under load: the JVM writing the archive was killed at a fixed 120 s and the archive lost.
    ``_wait_jvm`` kills only a process that has used no CPU for its idle limit."""
    from pytest_elr.checker.session import _wait_jvm

    busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.process_time() + 4\n"
                             "while time.process_time() < end: pass"], stdin=subprocess.PIPE)
    assert _wait_jvm(busy, idle_s=3.0) == 0  # 4 s of CPU, never 3 s idle: waited for, not killed
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.PIPE)
    assert _wait_jvm(idle, idle_s=1.0) is None and idle.returncode == -9  # killed, not ended by itself
