"""The inline checker: the history's events read in Python, for acknowledged-but-never-read records only.

For the model's own inner loops (property search, mutation check), where starting Spark per run would
cost more than the run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pytest_elr.checker.verdict import Verdict


def check_history(events: Iterable[dict[str, Any]]) -> Verdict:
    """The acks=all records acknowledged and never read, every one named and counted as ``unseen``."""
    acked: dict[str, int | None] = {}
    read: set[str] = set()
    for e in events:
        if e["type"] == "produce" and e.get("op") == "ok" and e.get("acks") == "all":
            acked[e["value"]] = e.get("offset")
        elif e["type"] == "consume":
            read.add(e["value"])
    lost = [(v, o) for v, o in acked.items() if v not in read]
    return Verdict(acked=len(acked), read=len(read), lost_count=len(lost), lost=lost,
                   anomalies={"unseen": len(lost)}, checker="inline")
