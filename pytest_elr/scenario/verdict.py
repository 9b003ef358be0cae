"""The per-scenario verdict on acks=all records, from the run's history.

Two checkers answer the same question. ``spark`` (the default under pytest) runs the PySpark job
of :mod:`pytest_elr.analysis` on the run directory: lost, unseen, duplicate, inconsistent offsets,
regressions. ``inline`` reads the in-memory events in Python: only acknowledged-but-never-read,
for the model's own inner loops (property search, mutation check) where starting Spark per run
would cost more than the run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_elr.core.history import History

#: anomalies that fail a scenario whose verdict is ``acked_loss: none``
FATAL = ("lost", "unseen", "duplicate", "inconsistent_offset")


@dataclass
class Verdict:
    acked: int = 0
    read: int = 0
    lost_count: int = 0  # acknowledged acks=all records never read
    lost: list[tuple[str, int | None]] = field(default_factory=list)  # examples: (value, offset)
    anomalies: dict[str, int] = field(default_factory=dict)  # every kind the checker counted
    checker: str = "inline"

    @property
    def fatal(self) -> dict[str, int]:
        return {k: n for k, n in self.anomalies.items() if k in FATAL and n}

    def examples(self, n: int = 5) -> str:
        shown = ", ".join(f"{v}@{o}" for v, o in self.lost[:n])
        more = f" and {self.lost_count - n} more" if self.lost_count > n else ""
        return shown + more


Checker = Callable[[History], Verdict]


def check_history(events: Iterable[dict[str, Any]]) -> Verdict:
    acked: dict[str, int | None] = {}
    read: set[str] = set()
    for e in events:
        if e["type"] == "produce" and e.get("op") == "ok" and e.get("acks") == "all":
            acked[e["value"]] = e.get("offset")
        elif e["type"] == "consume":
            read.add(e["value"])
    lost = [(v, o) for v, o in acked.items() if v not in read]
    return Verdict(acked=len(acked), read=len(read), lost_count=len(lost), lost=lost,
                   anomalies={"unseen": len(lost)})


def inline_checker(history: History) -> Verdict:
    return check_history(history.events)


def spark_checker(history: History) -> Verdict:
    """The Spark job over the run directory written so far."""
    from pytest_elr.analysis.verdict import check_run  # pyspark is heavy: import on first use

    if history.directory is None:
        raise ValueError("the spark checker needs the history on disk (a history directory)")
    v = check_run(str(history.directory))
    lost_examples: list[tuple[str, int | None]] = []
    for kind in ("lost", "unseen"):
        for example in v.anomalies[kind].examples:
            lost_examples.append((str(example.get("value")), example.get("offset")))
    return Verdict(
        acked=v.acked, read=v.read, lost_count=v.lost_acked, lost=lost_examples,
        anomalies={k: a.count for k, a in v.anomalies.items()}, checker="spark",
    )


CHECKERS: dict[str, Checker] = {"spark": spark_checker, "inline": inline_checker}
