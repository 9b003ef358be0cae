"""Inline verdicts confirmed by Spark: one Spark job over every run of a session.

Under pytest each run is judged inline the moment it ends (milliseconds; a Spark job per run had a
floor of ~3 s, which dominated the model suite). At the end of the session :meth:`Confirmation.run`
reads every run directory in ONE Spark job, compares each Spark verdict with the inline one, and
saves Spark's as the run's ``verdict.json``: every verdict shown afterwards is one Spark computed.
A difference (or a line of a history Spark calls malformed: the writer and the checker disagree
about the format) is a :class:`Mismatch`, which the plugin turns into a failed session.

The session's JVM starts in a background thread (:meth:`Confirmation.warm_up`) as soon as the
plugin knows there will be runs, so its start-up overlaps with the runs instead of following them.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_elr.checker.verdict import Verdict

#: examples the Spark job keeps per kind: every lost record of a scenario-sized run is named
SPARK_EXAMPLES = 1000


#: Spark settings for a session of scenario-sized histories (kilobytes each). Measured on the model
#: suite's 25 runs (2 cores, load ~12): the first job 32 s -> 20 s without whole-stage code generation
#: (Janino compiles every stage's code before it runs) and adaptive execution (re-plans every
#: stage); later jobs 6 -> 5 s. Interpreted expressions (no Janino at all) took the confirmation of
#: 46 runs from 5.2-5.4 s to 4.0-4.5 s once lower() was gone (docs/performance.md, fourth pass);
#: they would slow a history of millions of lines. With them go the JIT's first tier only and one
#: shuffle partition.
SMALL_JOBS = (("spark.sql.codegen.wholeStage", "false"), ("spark.sql.adaptive.enabled", "false"),
              ("spark.sql.codegen.factoryMode", "NO_CODEGEN"))


def _first_job(spark: object) -> None:
    """Run the whole job once on a tiny synthetic history, while the real runs go on: a JVM's first
    job loads and links every class the plan needs and costs several times a later one."""
    import tempfile

    from pytest_elr.checker.job import check_runs
    from pytest_elr.checker.synth import clean_history, meta, write_history

    with tempfile.TemporaryDirectory(prefix="pytest-elr-warm-") as tmp:
        check_runs([write_history(os.path.join(tmp, "warm"), meta(run_id="warm"), clean_history(3).events)],
                   spark=spark)  # type: ignore[arg-type]


@dataclass
class Mismatch:
    """A run whose Spark verdict is not its inline verdict, and how they differ."""

    run_dir: Path
    differences: list[str]

    def __str__(self) -> str:
        return f"{self.run_dir}: " + "; ".join(self.differences)


def differences(inline: Verdict, spark: Verdict) -> list[str]:
    """How two verdicts on the same history differ, in words (empty: the same verdict)."""
    found = [f"{name}: inline {a}, spark {b}" for name, a, b in (
        ("acked", inline.acked, spark.acked), ("read", inline.read, spark.read),
        ("lost_count", inline.lost_count, spark.lost_count)) if a != b]
    for kind in sorted(set(inline.anomalies) | set(spark.anomalies)):
        a, b = inline.anomalies.get(kind, 0), spark.anomalies.get(kind, 0)
        if a != b:
            found.append(f"{kind}: inline {a}, spark {b}")
    # Spark names up to SPARK_EXAMPLES records per kind; each one it names the inline checker named too
    named = set(inline.lost)
    if (spark.lost_count <= SPARK_EXAMPLES and sorted(named) != sorted(spark.lost)) or not set(spark.lost) <= named:
        only = sorted(set(spark.lost) ^ named)[:5]
        found.append(f"lost records named differently (e.g. {only})")
    return found


@dataclass
class Confirmation:
    """The Spark confirmation of one session's inline verdicts."""

    seconds: float = 0.0  # the job, from the first run directory read to the last verdict saved
    start_s: float | None = None  # the JVM's start-up, in the background thread
    runs: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def warm_up(self, prime: bool = True) -> None:
        """Start the session's Spark in a background thread (once); :meth:`run` waits for it.

        ``prime``: also run the job once on a tiny history, which pays off when the runs last longer
        than it (a real cluster's); runs of milliseconds would only wait for it."""
        if self._thread is not None:
            return

        def start() -> None:
            from pytest_elr.checker.session import (
                ENV_JAVA_OPTIONS,
                ENV_SHUFFLE_PARTITIONS,
                SparkSettings,
                get_spark,
            )

            t0 = time.monotonic()
            try:
                settings = SparkSettings.from_env()
                if settings.is_local and not os.environ.get(ENV_JAVA_OPTIONS):
                    settings = replace(settings, java_options="-XX:TieredStopAtLevel=1",
                                       shuffle_partitions=int(os.environ.get(ENV_SHUFFLE_PARTITIONS) or 1),
                                       conf=SMALL_JOBS + settings.conf)  # the user's settings last
                spark = get_spark(settings)
                if prime:
                    _first_job(spark)
            except BaseException as exc:  # reported by run(), in the main thread
                self._error = exc
            self.start_s = time.monotonic() - t0

        self._thread = threading.Thread(target=start, name="pytest-elr-spark-start", daemon=True)
        self._thread.start()

    def run(self, verdicts: Mapping[Path, Verdict]) -> dict[Path, Verdict]:
        """Spark's verdict per run directory (saved there), and every mismatch with the inline ones
        in :attr:`mismatches`. Raises whatever kept Spark from starting or reading the runs."""
        self.warm_up()
        assert self._thread is not None
        self._thread.join()
        if self._error is not None:
            raise self._error
        from pytest_elr.checker.job import check_runs

        t0 = time.monotonic()
        dirs = list(verdicts)
        findings = check_runs([str(d) for d in dirs], examples=SPARK_EXAMPLES)
        confirmed: dict[Path, Verdict] = {}
        for run_dir, found in zip(dirs, findings, strict=True):
            spark = found.verdict()
            spark.save(run_dir)
            confirmed[run_dir] = spark
            problems = differences(verdicts[run_dir], spark)
            problems += [f"malformed {m['file']}:{m['line']}: {m['error']}" for m in found.malformed]
            if problems:
                self.mismatches.append(Mismatch(run_dir, problems))
        self.runs = len(dirs)
        self.seconds = time.monotonic() - t0
        return confirmed
