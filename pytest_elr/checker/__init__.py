"""The checker: judges a run's history and gives its :class:`~.verdict.Verdict`.

Two checkers answer the same question. ``spark`` (the default under pytest) runs the PySpark job of
:mod:`.job` on the run directory: lost, unseen, duplicate, inconsistent offsets, regressions
(``python -m pytest_elr.checker RUN_DIR... [--rollup]`` is the same job from the command line, and
rolls runs up). ``inline`` (:mod:`.inline`) reads the in-memory events in Python:
the same checks in Python, for histories that fit in memory. Under pytest the ``spark`` setting
judges each run inline as it ends and confirms every verdict with one Spark job over all runs at
the end of the session (:mod:`.confirm`). Either one, judging a history on disk, saves its verdict there
(``verdict.json``) so that a report built later shows what was judged.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_elr.checker.confirm import SPARK_EXAMPLES, Confirmation, Mismatch
from pytest_elr.checker.inline import check_history
from pytest_elr.checker.verdict import Verdict, by_partition
from pytest_elr.core.history import History

__all__ = ["CHECKERS", "Checker", "Confirmation", "Mismatch", "Verdict", "check_history", "inline_checker",
           "spark_checker"]

Checker = Callable[[History], Verdict]


def inline_checker(history: History) -> Verdict:
    return _saved(history, check_history(history.events))


def spark_checker(history: History) -> Verdict:
    """The Spark job over the run directory written so far."""
    from pytest_elr.checker.job import check_run  # pyspark is heavy: import on first use

    if history.directory is None:
        raise ValueError("the spark checker needs the history on disk (a history directory)")
    return _saved(history, check_run(str(history.directory), examples=SPARK_EXAMPLES).verdict())


def _saved(history: History, verdict: Verdict) -> Verdict:
    verdict.partitions = by_partition(history.events)  # several partitions: each one's counts too
    if history.directory is not None:
        verdict.save(history.directory)
    return verdict


CHECKERS: dict[str, Checker] = {"spark": spark_checker, "inline": inline_checker}
