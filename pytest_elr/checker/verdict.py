"""A run's verdict on its acks=all records: the one type the executor, plugin, soak and report see.

Two checkers give it (:mod:`pytest_elr.checker`): ``spark`` (every anomaly kind of docs/history.md)
and ``inline`` (acknowledged-but-never-read only). Plain Python, no pyspark: it is also read back
from a run directory's ``verdict.json``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_elr.core.history import VERDICT_FILE

#: anomalies that fail a scenario whose verdict is ``acked_loss: none``
FATAL = ("lost", "unseen", "duplicate", "inconsistent_offset")
#: anomalies that fail a negative control too: an expected loss explains records missing, not a
#: record read twice, nor more offsets holding two values than it took records (the executor's judge)
FATAL_BESIDE_LOSS = ("duplicate", "inconsistent_offset")
#: where every anomaly kind is defined (the table "What the checker reports")
ANOMALIES_DOC = "docs/history.md#what-the-checker-reports"
#: each anomaly kind in words: what is counted (one, several) and what happened to it
ANOMALY_WORDS: dict[str, tuple[str, str, str]] = {
    "lost": ("record", "records", "acknowledged with acks=all and never read, though a read got past that offset"),
    "unseen": ("record", "records", "acknowledged with acks=all and never read, beyond the highest offset any "
                                    "read reached"),
    "duplicate": ("record", "records", "read at more than one offset"),
    "inconsistent_offset": ("offset", "offsets", "holding different records in different reads"),
    "reorder": ("read", "reads", "of an offset after a higher one by the same reader"),
    "hwm_regression": ("time", "times", "a high watermark went back below one seen before"),
    "acks1_uncommitted": ("record", "records", "acknowledged with acks=1 or acks=0 and never read: those acks "
                                               "allow it (the leader answered before any follower had the record), "
                                               "so they are counted, not a failure"),
}


def explain(kind: str, count: int) -> str:
    """One anomaly count in words (``explain("acks1_uncommitted", 34)``: "34 records acknowledged ...")."""
    if kind not in ANOMALY_WORDS:
        return f"{count} × {kind}"
    one, several, what = ANOMALY_WORDS[kind]
    return f"{count} {one if count == 1 else several} {what}"


@dataclass
class Verdict:
    acked: int = 0
    read: int = 0
    lost_count: int = 0  # acknowledged acks=all records never read
    lost: list[tuple[str, int | None]] = field(default_factory=list)  # examples: (value, offset)
    anomalies: dict[str, int] = field(default_factory=dict)  # every kind the checker counted
    checker: str = "inline"  # who judged: "spark" | "inline"
    #: a topic of several partitions: per partition, its acknowledged acks=all records (``acked``),
    #: the records read from it (``read``) and the acknowledged ones never read (``lost``); empty for
    #: one partition (``by_partition``)
    partitions: dict[int, dict[str, int]] = field(default_factory=dict)

    @property
    def fatal(self) -> dict[str, int]:
        return {k: n for k, n in self.anomalies.items() if k in FATAL and n}

    @property
    def beside_loss(self) -> dict[str, int]:
        """What an expected loss does not explain: it explains records missing (lost, unseen) and,
        at most once per lost record, its offset taken over by a record written after the
        truncation (two values at one offset); never a record read twice, nor more offsets with two
        values than records lost."""
        return {k: n for k, n in self.fatal.items() if k in FATAL_BESIDE_LOSS
                and not (k == "inconsistent_offset" and n <= self.lost_count)}

    def examples(self, n: int = 5) -> str:
        shown = ", ".join(f"{v}@{o}" for v, o in self.lost[:n])
        more = f" and {self.lost_count - n} more" if self.lost_count > n else ""
        return shown + more

    def to_dict(self) -> dict[str, Any]:
        out = {"checker": self.checker, "acked": self.acked, "read": self.read, "lost_count": self.lost_count,
               "lost": [[value, offset] for value, offset in self.lost], "anomalies": dict(self.anomalies)}
        if self.partitions:  # a one-partition topic's verdict stays as it was
            out["partitions"] = {str(p): dict(counts) for p, counts in sorted(self.partitions.items())}
        return out

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Verdict:
        return cls(acked=doc["acked"], read=doc["read"], lost_count=doc["lost_count"],
                   lost=[(str(value), offset) for value, offset in doc["lost"]],
                   anomalies=dict(doc["anomalies"]), checker=doc["checker"],
                   partitions={int(p): dict(c) for p, c in doc.get("partitions", {}).items()})

    def save(self, run_dir: Path) -> None:
        """Write ``verdict.json`` into the run directory it judged."""
        (Path(run_dir) / VERDICT_FILE).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, run_dir: Path) -> Verdict | None:
        """The verdict saved in a run directory; None when no checker judged it (or the file is broken)."""
        try:
            return cls.from_dict(json.loads((Path(run_dir) / VERDICT_FILE).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None


def by_partition(events: Iterable[Mapping[str, Any]]) -> dict[int, dict[str, int]]:
    """Per partition of a topic of several (events naming a partition other than 0), what its
    acks=all records came to: ``acked`` (acknowledged), ``read`` (records read from it, each value
    once) and ``lost`` (acknowledged, never read from any partition); empty for one partition."""
    acked: dict[int, set[str]] = {}
    read: dict[int, set[str]] = {}
    for e in events:
        p = e.get("partition") or 0
        if e.get("type") == "produce" and e.get("op") == "ok" and str(e.get("acks")) in ("all", "-1"):
            acked.setdefault(p, set()).add(e["value"])
        elif e.get("type") == "consume":
            read.setdefault(p, set()).add(e["value"])
    if not any(acked) and not any(read):
        return {}
    every_read = set().union(*read.values()) if read else set()
    return {p: {"acked": len(acked.get(p, ())), "read": len(read.get(p, ())),
                "lost": len(acked.get(p, set()) - every_read)} for p in sorted(set(acked) | set(read))}
