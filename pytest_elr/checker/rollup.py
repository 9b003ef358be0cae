"""Across runs: per scenario, backend, Kafka version and profile, how many runs passed, how
often acknowledged records were lost (with a Wilson interval), the anomalies by kind, time spent
under min ISR, unavailability windows (no leader), records at stake per lossy fault and time to a
new leader after a fault.

The per-run timings are computed by Spark from ``observe`` and ``fault`` events; the grouping
of a few per-run rows is plain Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from pytest_elr.checker.checks import CHECKS
from pytest_elr.checker.job import DEFAULT_EXAMPLES, Findings, findings_from
from pytest_elr.checker.load import Loaded, load_runs, local_rows
from pytest_elr.checker.rates import GroupKey, LossRate
from pytest_elr.checker.session import get_spark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

c = F.col


def _end(events: DataFrame) -> DataFrame:
    """(run, t_end): the time of each run's last event."""
    return events.groupBy("run").agg(F.max("t").alias("t_end"))


def under_min_isr(events: DataFrame, min_isr: DataFrame, end: DataFrame | None = None) -> DataFrame:
    """Seconds per run with fewer in-sync replicas than min ISR.

    An observation holds until the next one; the last one until the run's last event (``end``:
    (run, t_end), by default from ``events``). ``min_isr``: (run, min_isr) for the runs whose
    meta.json gives it.
    """
    end = _end(events) if end is None else end
    w = Window.partitionBy("run").orderBy("line")
    obs = events.filter((c("type") == "observe") & c("isr").isNotNull()).select(
        "run", "t", "isr", F.lead("t").over(w).alias("t_next")
    )
    return (
        obs.join(F.broadcast(min_isr), "run")
        .join(end, "run")
        .groupBy("run")
        .agg(
            F.sum(
                F.when(
                    F.size("isr") < c("min_isr"), F.coalesce("t_next", "t_end") - c("t")
                ).otherwise(0.0)
            ).alias("under_min_isr_s")
        )
    )


def time_to_leader(events: DataFrame) -> DataFrame:
    """Per fault: seconds from the fault to the first observation of a new leader.

    A new leader is one different from the leader last observed before the fault, or any
    leader after a leaderless observation. Only observations before the next fault count: a
    fault that moves no leadership (a follower's) has no row.
    """
    w = Window.partitionBy("run").orderBy("line")
    fo = (
        events.filter(c("type").isin("fault", "observe"))
        .select("run", "line", "t", "type", "leader", "action")
        # segment k = the fault k and the observations after it, up to the next fault
        .withColumn("seg", F.sum(F.when(c("type") == "fault", 1).otherwise(0)).over(w))
        # leader + 1, and 0 for "no leader", so that last(ignorenulls) skips only faults
        .withColumn(
            "code",
            F.when(c("type") == "observe", F.coalesce(c("leader") + 1, F.lit(0))),
        )
        .withColumn(
            "prev_code",
            F.last("code", ignorenulls=True).over(w.rowsBetween(Window.unboundedPreceding, -1)),
        )
    )
    ws = (
        Window.partitionBy("run", "seg")
        .orderBy("line")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    fo = (
        fo.filter(c("seg") > 0)
        .withColumn("pre", F.first("prev_code").over(ws))  # the fault row comes first
        .withColumn("t_fault", F.first("t").over(ws))
        .withColumn("fault", F.first("action").over(ws))
        .withColumn(
            "leaderless_seen",
            F.max(F.when((c("type") == "observe") & c("leader").isNull(), 1).otherwise(0)).over(
                ws
            ),
        )
    )
    new_leader = (
        (c("type") == "observe")
        & c("leader").isNotNull()
        & (
            c("pre").isNull()
            | (c("pre") == 0)
            | (c("leader") + 1 != c("pre"))
            | (c("leaderless_seen") == 1)
        )
    )
    return (
        fo.filter(new_leader)
        .groupBy("run", "seg")
        .agg(
            F.first("fault").alias("fault"),
            F.min_by(c("t") - c("t_fault"), c("line")).alias("seconds"),
            F.min_by("leader", "line").alias("leader"),
        )
    )


def unavailability(events: DataFrame, end: DataFrame | None = None) -> DataFrame:
    """Per run: windows without a leader (consecutive leaderless observations make one window; an
    observation holds until the next one, the last one until the run's last event -- ``end``, as in
    :func:`under_min_isr`): how many, their total and the longest, in seconds."""
    end = _end(events) if end is None else end
    w = Window.partitionBy("run").orderBy("line")
    obs = (
        events.filter(c("type") == "observe")
        .select("run", "line", "t", c("leader").isNull().alias("down"), F.lead("t").over(w).alias("t_next"))
        .withColumn("prev_down", F.lag("down").over(w))
        # a window starts at a leaderless observation after one with a leader (or the first)
        .withColumn("start", (c("down") & ~F.coalesce(c("prev_down"), F.lit(False))).cast("int"))
        .withColumn("window", F.sum("start").over(w))
        .join(end, "run")
        .filter(c("down"))
        .groupBy("run", "window")
        .agg(F.sum(F.coalesce("t_next", "t_end") - c("t")).alias("seconds"))
    )
    return obs.groupBy("run").agg(
        F.count(F.lit(1)).alias("windows"),
        F.sum("seconds").alias("unavailable_s"),
        F.max("seconds").alias("longest_s"),
    )


def records_at_stake(events: DataFrame) -> DataFrame:
    """Per run: lossy faults (a ``loss_evidence`` of a cut; not its restart, not a proof by presence)
    and the records each took from its victim's log, summed and the largest."""
    cuts = events.filter(
        (c("type") == "loss_evidence") & c("records_lost").isNotNull()
        & (F.coalesce(c("after"), F.lit("")) != "restart")
    )  # fmt: skip
    return cuts.groupBy("run").agg(
        F.count(F.lit(1)).alias("lossy_faults"),
        F.sum("records_lost").alias("records_at_stake"),
        F.max("records_lost").alias("records_at_stake_max"),
    )


@dataclass
class RollupRow:
    scenario: str | None
    backend: str | None
    kafka_version: str | None
    profile: str | None
    runs: int = 0
    passes: int = 0
    # runs that lost acknowledged acks=all records (lost or unseen), and the 95 % Wilson interval
    runs_with_loss: int = 0
    loss_rate: float = 0.0
    loss_rate_low: float = 0.0
    loss_rate_high: float = 1.0
    anomalies: dict[str, int] = field(default_factory=lambda: {k: 0 for k in CHECKS})
    runs_with: dict[str, int] = field(default_factory=lambda: {k: 0 for k in CHECKS})
    malformed: int = 0
    under_min_isr_s: float | None = None  # total over the runs that give min ISR
    faults: int = 0
    leader_changes: int = 0
    time_to_leader_mean_s: float | None = None
    time_to_leader_max_s: float | None = None
    unavailable_windows: int = 0  # windows without a leader, over the runs
    unavailable_s: float = 0.0
    unavailable_max_s: float | None = None  # the longest window
    lossy_faults: int = 0  # cuts that took records from their victim's log
    records_at_stake: int = 0  # records those cuts took, summed
    records_at_stake_mean: float | None = None  # per lossy fault
    records_at_stake_max: int | None = None
    _ttl: list[float] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
        return d


def per_run(
    events: DataFrame, min_isr: DataFrame
) -> tuple[dict[int, float], dict[int, list[float]], dict[int, Any], dict[int, Any], dict[int, int]]:
    """Every per-run figure of the rollup in ONE Spark job: seconds under min ISR, seconds to a new
    leader per fault, unavailability windows, records at stake, faults. The events the figures read
    (observations, faults, loss evidence: a few per run) are picked once, with each run's end;
    the four computations share that input and their windows' shuffle."""
    few = events.filter(c("type").isin("observe", "fault", "loss_evidence"))
    end = _end(events)
    ttl = time_to_leader(few).groupBy("run").agg(F.collect_list("seconds").alias("ttl"))
    faults = few.filter(c("type") == "fault").groupBy("run").agg(F.count(F.lit(1)).alias("faults"))
    joined = (
        under_min_isr(few, min_isr, end)
        .join(unavailability(few, end), "run", "full")
        .join(records_at_stake(few), "run", "full")
        .join(faults, "run", "full")
        .join(ttl, "run", "full")
    )
    under: dict[int, float] = {}
    ttls: dict[int, list[float]] = {}
    down: dict[int, Any] = {}
    stake: dict[int, Any] = {}
    counts: dict[int, int] = {}
    for r in joined.collect():
        run = r["run"]
        if r["under_min_isr_s"] is not None:
            under[run] = r["under_min_isr_s"]
        if r["ttl"]:
            ttls[run] = list(r["ttl"])
        if r["windows"] is not None:
            down[run] = r
        if r["lossy_faults"] is not None:
            stake[run] = r
        if r["faults"] is not None:
            counts[run] = r["faults"]
    return under, ttls, down, stake, counts


def rollup_from(loaded: Loaded, findings: Sequence[Findings]) -> list[RollupRow]:
    spark = loaded.spark
    ev = loaded.events
    mins = [
        (source.index, int(source.meta["min_insync_replicas"]))
        for source in loaded.sources
        if isinstance(source.meta.get("min_insync_replicas"), int)
    ]
    under, ttl, down, stake, faults = per_run(ev, local_rows(spark, mins, "run int, min_isr int"))
    for idx, _ in mins:  # min ISR known but no observation: nothing measured, 0 s
        under.setdefault(idx, 0.0)

    groups: dict[GroupKey, RollupRow] = {}
    for source, v in zip(loaded.sources, findings, strict=True):
        key: GroupKey = (v.scenario, v.backend, v.kafka_version, v.profile)
        row = groups.setdefault(key, RollupRow(*key))
        row.runs += 1
        row.passes += int(v.valid)
        row.malformed += v.malformed_count
        for kind, a in v.anomalies.items():
            row.anomalies[kind] += a.count
            row.runs_with[kind] += int(a.count > 0)
        if source.index in under:
            row.under_min_isr_s = (row.under_min_isr_s or 0.0) + under[source.index]
        row.faults += faults.get(source.index, 0)
        row._ttl.extend(ttl.get(source.index, []))
        row.runs_with_loss += int(v.lost_count > 0)
        if source.index in down:
            d = down[source.index]
            row.unavailable_windows += d["windows"]
            row.unavailable_s += d["unavailable_s"] or 0.0
            row.unavailable_max_s = max(row.unavailable_max_s or 0.0, d["longest_s"] or 0.0)
        if source.index in stake:
            k = stake[source.index]
            row.lossy_faults += k["lossy_faults"]
            row.records_at_stake += k["records_at_stake"] or 0
            row.records_at_stake_max = max(row.records_at_stake_max or 0, k["records_at_stake_max"] or 0)
    for row in groups.values():
        rate = LossRate((row.scenario, row.backend, row.kafka_version, row.profile), row.runs, row.runs_with_loss)
        row.loss_rate, (row.loss_rate_low, row.loss_rate_high) = rate.rate, rate.interval
        if row.lossy_faults:
            row.records_at_stake_mean = row.records_at_stake / row.lossy_faults
        row.leader_changes = len(row._ttl)
        if row._ttl:
            row.time_to_leader_mean_s = sum(row._ttl) / len(row._ttl)
            row.time_to_leader_max_s = max(row._ttl)
    return sorted(groups.values(), key=lambda r: tuple(str(x) for x in
                                                       (r.scenario, r.backend, r.kafka_version,
                                                        r.profile)))


def rollup_runs(
    paths: Sequence[str], *, spark: SparkSession | None = None, examples: int = DEFAULT_EXAMPLES
) -> tuple[list[Findings], list[RollupRow]]:
    """Findings and rollup of the run directories ``paths``, reading them once."""
    with load_runs(spark or get_spark(), [str(p) for p in paths]) as loaded:
        findings = findings_from(loaded, examples=examples)
        return findings, rollup_from(loaded, findings)
