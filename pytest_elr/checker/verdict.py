"""A run's verdict on its acks=all records: the one type the executor, plugin, soak and report see.

Two checkers give it (:mod:`pytest_elr.checker`): ``spark`` (every anomaly kind of docs/history.md)
and ``inline`` (acknowledged-but-never-read only). Plain Python, no pyspark: it is also read back
from a run directory's ``verdict.json``.
"""

from __future__ import annotations

import json
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
        return {"checker": self.checker, "acked": self.acked, "read": self.read, "lost_count": self.lost_count,
                "lost": [[value, offset] for value, offset in self.lost], "anomalies": dict(self.anomalies)}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Verdict:
        return cls(acked=doc["acked"], read=doc["read"], lost_count=doc["lost_count"],
                   lost=[(str(value), offset) for value, offset in doc["lost"]],
                   anomalies=dict(doc["anomalies"]), checker=doc["checker"])

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
