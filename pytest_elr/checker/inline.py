"""The inline checker: the Spark job's checks (:mod:`.checks`, docs/history.md) over a history's
events in Python, for histories that fit in memory.

It judges a run the moment it ends (a scenario-sized history takes milliseconds, where a Spark
job has a floor of seconds); under pytest the Spark job then confirms every one of these verdicts
in one job at the end of the session (:mod:`.confirm`), so both must count the same things the
same way: every anomaly kind, ``acked`` as acks=all acknowledgements and ``read`` as ``consume``
events.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pytest_elr.checker.verdict import Verdict

#: the anomaly kinds both checkers count (the Spark job's ``KINDS``, without importing pyspark)
KINDS = ("lost", "unseen", "duplicate", "inconsistent_offset", "reorder", "hwm_regression", "acks1_uncommitted")


def _acks_all(acks: object) -> bool:
    return str(acks).lower() in ("all", "-1")


def check_history(events: Iterable[dict[str, Any]]) -> Verdict:
    """Every anomaly kind of the Spark job, counted the same way; ``lost`` names every acks=all record
    acknowledged and never read (``lost`` first, then ``unseen``, each by partition and offset)."""
    counts = dict.fromkeys(KINDS, 0)
    acked = read = 0
    sends: dict[str, tuple[bool, int, int | None]] = {}  # value -> (acks=all, partition, offset)
    places: dict[str, set[tuple[int, int]]] = {}  # value -> (partition, offset) it was read at
    at_offset: dict[tuple[int, int], set[str]] = {}  # acks=all acks and reads per place
    max_read: dict[int, int] = {}
    last_read: dict[tuple[str, int], int] = {}  # (reader, partition) -> previous offset
    last_hwm: dict[tuple[str, Any], int] = {}  # (series, partition) -> previous high watermark
    for e in events:
        kind = e.get("type")
        if kind == "produce" and e.get("op") == "ok":
            all_ = _acks_all(e.get("acks"))
            acked += all_
            partition = e.get("partition") or 0
            sends.setdefault(e["value"], (all_, partition, e.get("offset")))
            if all_ and e.get("offset") is not None:
                at_offset.setdefault((partition, e["offset"]), set()).add(e["value"])
        elif kind == "consume":
            read += 1
            place = (e["partition"], e["offset"])
            places.setdefault(e["value"], set()).add(place)
            at_offset.setdefault(place, set()).add(e["value"])
            max_read[place[0]] = max(max_read.get(place[0], place[1]), place[1])
            series = (str(e["reader"]), place[0])
            if series in last_read and place[1] < last_read[series]:
                counts["reorder"] += 1
            last_read[series] = place[1]
        elif kind in ("observe", "hwm_read") and e.get("hwm") is not None:
            key = ("observe" if kind == "observe" else f"reader {e.get('reader')}", e.get("partition"))
            if key in last_hwm and e["hwm"] < last_hwm[key]:
                counts["hwm_regression"] += 1
            last_hwm[key] = e["hwm"]
    lost: list[tuple[int, int, int, str, int | None]] = []  # (unseen?, partition, offset, value, offset)
    for value, (all_, partition, offset) in sends.items():
        if value in places:
            continue
        if not all_:
            counts["acks1_uncommitted"] += 1
            continue
        readable = offset is not None and partition in max_read and offset <= max_read[partition]
        counts["lost" if readable else "unseen"] += 1
        order = offset if offset is not None else 2**63 - 1
        lost.append((0 if readable else 1, partition, order, value, offset))
    counts["duplicate"] = sum(len(p) > 1 for p in places.values())
    counts["inconsistent_offset"] = sum(len(v) > 1 for v in at_offset.values())
    lost.sort(key=lambda x: (x[0], x[1], x[2]))
    return Verdict(acked=acked, read=read, lost_count=len(lost), lost=[(v, o) for *_, v, o in lost],
                   anomalies=counts, checker="inline")
