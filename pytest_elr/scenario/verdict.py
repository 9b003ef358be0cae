"""The per-scenario verdict on acks=all records, computed from the history's events.

This in-memory check answers the one question a scenario asserts (was an acknowledged acks=all
record lost?). The full anomaly analysis over stored histories -- duplicates, inconsistent
offsets, regressions, rollups across runs -- is the Spark pipeline in ``pytest_elr.analysis``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Verdict:
    acked: int = 0
    read: int = 0
    lost: list[tuple[str, int | None]] = field(default_factory=list)  # (value, acked offset)

    def examples(self, n: int = 5) -> str:
        shown = ", ".join(f"{v}@{o}" for v, o in self.lost[:n])
        more = f" and {len(self.lost) - n} more" if len(self.lost) > n else ""
        return shown + more


def check_history(events: Iterable[dict[str, Any]]) -> Verdict:
    acked: dict[str, int | None] = {}
    read: set[str] = set()
    for e in events:
        if e["type"] == "produce" and e.get("op") == "ok" and e.get("acks") == "all":
            acked[e["value"]] = e.get("offset")
        elif e["type"] == "consume":
            read.add(e["value"])
    lost = [(v, o) for v, o in acked.items() if v not in read]
    return Verdict(acked=len(acked), read=len(read), lost=lost)
