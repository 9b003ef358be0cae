"""Synthetic histories: a writer and builder for hand-built ones, and a large generator.

    python -m pytest_elr.checker.synth OUT_DIR --records 10000000 [--lose N]

writes a run directory with N acknowledged acks=all records, all read back by a final drain
except ``--lose`` of them (spread over the log, each below the highest offset read, so the
checker must report exactly that many ``lost``). The bulk lines are written by Spark, one
part file per task, and concatenated in order.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from pytest_elr.core.history import EVENTS_FILE, META_FILE, SCHEMA
from pytest_elr.core.observation import LossEvidence, Observation


def meta(**fields: Any) -> dict[str, Any]:
    """A complete meta.json; ``fields`` override the defaults."""
    now = datetime.now(timezone.utc).isoformat()
    base: dict[str, Any] = {
        "schema": SCHEMA,
        "run_id": "synthetic",
        "scenario": "synthetic",
        "scenario_file": "synthetic.yaml",
        "backend": "model",
        "profile": "kip966",
        "kafka_version": None,
        "topic": "elr-test",
        "min_insync_replicas": 2,
        "started_at": now,
        "finished_at": now,
        "outcome": "passed",
    }
    base.update(fields)
    return base


def write_history(
    out_dir: str | os.PathLike[str],
    meta_fields: Mapping[str, Any],
    events: Iterable[Mapping[str, Any] | str],
) -> str:
    """Write a run directory; ``events`` are dicts (dumped as one line each) or raw lines
    (for broken histories)."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, META_FILE), "w", encoding="utf-8") as f:
        json.dump(dict(meta_fields), f, indent=2)
    with open(os.path.join(out_dir, EVENTS_FILE), "w", encoding="utf-8") as f:
        for e in events:
            f.write(e if isinstance(e, str) else json.dumps(e, separators=(",", ":")) + "\n")
    return str(out_dir)


class SyntheticHistory:
    """A hand-built event list (tests, examples), unlike :class:`pytest_elr.core.history.History`
    clocked by hand: every event added gets the next ``t``, 0.1 s apart, and a line may be broken
    on purpose; pass ``.events`` to :func:`write_history`."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any] | str] = []
        self.t = 0.0

    def add(self, type_: str, step: str | None = "T1", **fields: Any) -> SyntheticHistory:
        self.t = round(self.t + 0.1, 3)
        self.events.append({"t": self.t, "type": type_, "step": step, **fields})
        return self

    def raw(self, line: str) -> SyntheticHistory:
        """A line as is (malformed histories)."""
        self.events.append(line)
        return self

    def send(self, id_: int, offset: int | None, acks: str = "all", op: str = "ok",
             value: str | None = None, partition: int = 0) -> SyntheticHistory:
        value = value or f"v{id_}"
        self.add("produce", op="invoke", id=id_, value=value, acks=acks, partition=partition,
                 offset=None, error=None)
        return self.add("produce", op=op, id=id_, value=value, acks=acks, partition=partition,
                        offset=offset, error=None if op == "ok" else "NOT_ENOUGH_REPLICAS")

    def read(self, offset: int, value: str, reader: str = "drain", partition: int = 0) -> SyntheticHistory:
        return self.add("consume", step="T9", partition=partition, offset=offset, value=value,
                        reader=reader)

    def observe(self, leader: int | None, isr: list[int], hwm: int | None) -> SyntheticHistory:
        return self.add("observe", leader=leader, leader_epoch=1, isr=isr, elr=[],
                        last_known_elr=[], fenced=[], hwm=hwm, leo={"1": hwm or 0})

    def fault(self, action: str, **args: Any) -> SyntheticHistory:
        return self.add("fault", action=action, args=args)

    def at(self, t: float) -> SyntheticHistory:
        """Jump the clock: the next event comes at ``t`` + 0.1."""
        self.t = t
        return self


def clean_history(n: int = 5) -> SyntheticHistory:
    """n acks=all records at offsets 0..n-1, all read back in order."""
    h = SyntheticHistory().add("step", step="T0", phase="begin")
    for i in range(n):
        h.send(i, i)
    for i in range(n):
        h.read(i, f"v{i}")
    return h


def every_event_type() -> SyntheticHistory:
    """One event of each type a history holds (``EVENT_TYPES``), shaped as the executor writes
    them: one acks=all record, acknowledged and read back; nothing wrong."""
    obs = Observation(leader=1, leader_epoch=2, isr=(1, 2), elr=(), last_known_elr=(), fenced=(3,), hwm=1,
                      leo={1: 1, 2: 1})
    h = SyntheticHistory().add("step", step="T0", phase="begin", line=5, note="the setup")
    h.fault("power_off", brokers=[3]).add("observe", **obs.as_event())
    h.add("loss_evidence", **LossEvidence(broker=3, leo_before=1, leo_after=0).as_event(), after="power_off")
    h.add("disagreement", after="power_off", differences=["isr: expected [1], observed [1, 2]"],
          observed=obs.as_event(), model=obs.as_event())
    h.add("declared_difference", after="power_off", field="last_known_elr", model=[3], observed=[],
          reason="measured on Kafka 4.3.1", source="profile kafka")
    h.add("start_settled", seconds=4.2, differs=[])
    h.add("known_failure_rested", at="T2", seconds=10.0, declared=["elr", "leader"], differs=["elr"])
    h.add("kip_departure", after="set_min_isr", rule="change_min_isr", summary="min ISR change clears ELR",
          reason="a ClearElrRecord whatever the ISR", source="measured on Kafka 4.3.1")
    h.add("lag_churn", partition=0, leader=1, moved_by=2, slowed=[],
          churn={"shrinks": 1, "lagged": 1, "without_cause": [], "dropped": [3]})
    h.add("refusals", system=["INELIGIBLE_REPLICA"], model=[])
    h.add("alternatives", after="slow", allowed=3, kept=1,
          states=["leader=1 isr=[1] elr=[2, 3]", "leader=1 isr=[1] elr=[3]", "leader=1 isr=[1] elr=[2]"],
          observed="leader=1 isr=[1] elr=[3]")
    h.add("violation", message="invariant elr_disjoint_from_isr broken: [2] in both ISR and ELR")
    h.add("model_error", message="broker 3 is not running")
    h.add("refused", action="reassign", code="UNKNOWN_SERVER_ERROR", message="Replica 1 is not assigned")
    h.add("registration_miss", state="PartitionState(topic='t', partition=0, leader=1, ...)",
          why="controller 1000's log: 3 records, none of them this state (latest: ...)")
    h.add("election_counts", at="T6", counts={"elr_elections": 3, "unclean_elections": 0},
          since_start={"elr_elections": 1})
    h.send(1, 0).add("hwm_read", partition=0, hwm=1, reader="tail").read(0, "v1")
    h.add("scenario_error", message="s.elr.yaml:9: step T1 (s.elr.yaml:9): crash: {leader_of: 2}: partition 2 has "
                                    "no leader when the step runs, so {leader_of: 2} names no broker")
    return h.add("backend_error", message="cluster could not heal").add("step", phase="end")


def _observe(t: float, leader: int | None, isr: list[int], hwm: int | None) -> dict[str, Any]:
    return {
        "t": t, "type": "observe", "step": "T1", "leader": leader, "leader_epoch": 1,
        "isr": isr, "elr": [], "last_known_elr": [], "fenced": [], "hwm": hwm, "leo": {},
    }  # fmt: skip


def generate(
    out_dir: str,
    records: int,
    *,
    lose: int = 0,
    partitions: int = 1,
    tasks: int | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """Write a synthetic run of ``records`` acks=all sends (invoke + ok each) and a drain.

    Record ``i`` goes to partition ``i % partitions`` at offset ``i // partitions``, value
    ``v<i>``. Lost records are every ``step``-th of the first ``records - partitions`` (so a
    higher offset of the same partition is always read).
    """
    from pyspark.sql import functions as F

    from pytest_elr.checker.session import get_spark

    if records < 1:
        raise ValueError("records must be positive")
    if lose and lose > records - partitions:
        raise ValueError(f"can lose at most {records - partitions} of {records} records")
    spark = get_spark()
    tasks = tasks or max(2, min(64, records // 500_000))
    step = (records - partitions) // lose if lose else 0
    dt = 1e-5  # 100k sends per second of history time
    t_send_end = 1.0 + records * dt

    os.makedirs(out_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="elr-synth-", dir=out_dir)
    try:
        i = F.col("id")
        part = (i % partitions).cast("long")
        offset = (i / partitions).cast("long")
        t = F.lit(1.0) + i * F.lit(dt)
        common = '"type":"produce","step":"T1","id":%d,"value":"v%d","acks":"all","partition":%d,'
        invoke = F.format_string(
            '{"t":%.6f,' + common + '"op":"invoke","offset":null,"error":null}',
            t, i, i, part,
        )
        ok = F.format_string(
            '{"t":%.6f,' + common + '"op":"ok","offset":%d,"error":null}',
            t + F.lit(dt / 2), i, i, part, offset,
        )
        sends = spark.range(0, records, numPartitions=tasks).select(
            F.explode(F.array(invoke, ok)).alias("value")
        )
        sends.write.text(os.path.join(work, "sends"))

        drain_t0 = t_send_end + 10.0
        kept = spark.range(0, records, numPartitions=tasks)
        if lose:
            kept = kept.filter(~((i % step == 0) & (i / step < lose) & (i < records - partitions)))
        consume = kept.select(
            F.format_string(
                '{"t":%.6f,"type":"consume","step":"T3","partition":%d,"offset":%d,'
                '"value":"v%d","reader":"drain"}',
                F.lit(drain_t0) + i * F.lit(dt), part, offset, i,
            ).alias("value")
        )
        consume.write.text(os.path.join(work, "drain"))

        mid_t = t_send_end + 1.0
        head = [
            {"t": 0.0, "type": "step", "step": "T0", "phase": "begin"},
            _observe(0.1, 1, [1, 2, 3], 0),
            {"t": 0.5, "type": "step", "step": "T1", "phase": "begin"},
        ]
        middle = [
            {"t": mid_t, "type": "fault", "step": "T2", "action": "power_off",
             "args": {"broker": 1}},
            _observe(mid_t + 0.5, None, [2, 3], records // partitions),
            _observe(mid_t + 2.0, 2, [2], records // partitions),
            _observe(mid_t + 6.0, 2, [2, 3], records // partitions),
            {"t": mid_t + 6.5, "type": "hwm_read", "step": "T2", "partition": 0,
             "hwm": records // partitions, "reader": "drain"},
        ]  # fmt: skip
        tail = [{"t": drain_t0 + records * dt + 0.1, "type": "step", "step": "T3", "phase": "end"}]

        def dump(lines: list[dict[str, Any]], f: Any) -> None:
            for e in lines:
                f.write((json.dumps(e, separators=(",", ":")) + "\n").encode())

        def cat(directory: str, f: Any) -> None:
            for name in sorted(os.listdir(directory)):
                if name.startswith("part-"):
                    with open(os.path.join(directory, name), "rb") as src:
                        shutil.copyfileobj(src, f, 16 << 20)

        with open(os.path.join(out_dir, EVENTS_FILE), "wb") as f:
            dump(head, f)
            cat(os.path.join(work, "sends"), f)
            dump(middle, f)
            cat(os.path.join(work, "drain"), f)
            dump(tail, f)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    info = meta(
        run_id=run_id or f"synthetic-{records}-lose{lose}",
        scenario="synthetic",
        finished_at=datetime.now(timezone.utc).isoformat(),
        outcome="failed" if lose else "passed",
    )
    with open(os.path.join(out_dir, META_FILE), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2)
    return {"records": records, "lost": lose, "partitions": partitions,
            "lines": 3 * records - lose + len(head) + len(middle) + len(tail)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pytest_elr.checker.synth", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--lose", type=int, default=0,
                    help="acknowledged records left out of the drain")
    ap.add_argument("--partitions", type=int, default=1)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    info = generate(args.out_dir, args.records, lose=args.lose, partitions=args.partitions)
    size = os.path.getsize(os.path.join(args.out_dir, EVENTS_FILE))
    print(f"wrote {args.out_dir}: {info['lines']} lines, {size / 2**20:.0f} MiB, "
          f"{info['lost']} lost, in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
