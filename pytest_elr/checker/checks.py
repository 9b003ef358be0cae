"""The anomaly checks, after Jepsen's Kafka checker.

Each kind is a function ``events DataFrame -> DataFrame`` (one row per anomaly, with a
``run`` column). They are cut from three *families*, each one shuffle over the events, so
that a verdict costs three shuffles and not one per kind:

* :func:`value_anomalies` groups acks and reads by value: lost, unseen, acks1_uncommitted,
  duplicate;
* :func:`offset_anomalies` groups them by (partition, offset): inconsistent_offset;
* :func:`sequence_anomalies` orders each reader's offsets and each observer's high watermarks
  by line: reorder, hwm_regression.

``events`` is what :func:`pytest_elr.checker.load.load_runs` yields: the valid events of all
runs with columns ``run``, ``line`` and the event fields. Aggregates use only fixed-width
values (longs, hashes) so Spark can hash-aggregate instead of sorting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

c = F.col


def _null_long() -> Column:
    return F.lit(None).cast("long")

# (partition, offset) packed in one long so min/max stay hash aggregates; offsets below 2^40
# (10^12) and partitions below 2^23 fit.
_SHIFT = 1 << 40


def _place(partition: str, offset: str) -> Column:
    return c(partition) * F.lit(_SHIFT) + c(offset)


def _unplace(col: Column) -> Column:
    return F.struct(
        F.floor(col / F.lit(_SHIFT)).cast("long").alias("partition"),
        F.pmod(col, F.lit(_SHIFT)).cast("long").alias("offset"),
    )


def acks_all() -> Column:
    """A send with acks=all: Kafka clients spell it "all" or "-1"."""
    return F.lower(c("acks")).isin("all", "-1")


def acked(events: DataFrame) -> DataFrame:
    """Acknowledged sends. A missing partition means 0 (single-partition topic)."""
    return events.filter((c("type") == "produce") & (c("op") == "ok")).select(
        "run",
        "id",
        "value",
        acks_all().alias("acks_all"),
        F.coalesce(c("partition"), F.lit(0)).alias("partition"),
        "offset",
        "line",
    )


def reads(events: DataFrame) -> DataFrame:
    return events.filter(c("type") == "consume").select(
        "run", "reader", "partition", "offset", "value", "line"
    )


# Example fields per kind (the family DataFrames carry the union of them).
FIELDS: dict[str, tuple[str, ...]] = {
    "lost": ("value", "partition", "offset", "id", "max_read", "line"),
    "unseen": ("value", "partition", "offset", "id", "max_read", "line"),
    "acks1_uncommitted": ("value", "partition", "offset", "id", "acks", "line"),
    "duplicate": ("value", "partition", "offset", "id", "places", "reads"),
    "inconsistent_offset": ("partition", "offset", "values", "acked_values", "ids", "reads"),
    "reorder": ("reader", "partition", "offset", "prev_offset", "value", "line"),
    "hwm_regression": ("source", "partition", "hwm", "prev_hwm", "line"),
}
# What orders a kind's examples (display only).
ORDER: dict[str, tuple[str, ...]] = {
    "lost": ("partition", "offset", "line"),
    "unseen": ("partition", "offset", "line"),
    "acks1_uncommitted": ("partition", "offset", "line"),
    "duplicate": ("partition", "offset"),
    "inconsistent_offset": ("partition", "offset"),
    "reorder": ("line",),
    "hwm_regression": ("line",),
}


def value_anomalies(events: DataFrame) -> DataFrame:
    """Acks and reads of each value side by side (one shuffle by value), classified:

    * lost: acks=all acknowledged, never read, though reads got to (or past) its offset in
      its partition; at the highest read offset itself another value was read, so lost too;
    * unseen: acks=all acknowledged, never read, above the highest offset read (or no offset
      known, or its partition never read);
    * acks1_uncommitted: acks=1/0 acknowledged and never read (allowed: counted, no error);
    * duplicate: read at more than one (partition, offset); the example gives the lowest and
      highest place and the number of reads.
    """
    ack = acked(events).select(
        "run", "value", "id", "acks_all", _place("partition", "offset").alias("place"),
        "partition", "offset", "line", F.lit(True).alias("is_ack"),
    )  # fmt: skip
    read = reads(events).select(
        "run", "value", _null_long(), F.lit(None).cast("boolean"),
        _place("partition", "offset"), "partition", "offset", "line", F.lit(False),
    ).toDF(*ack.columns)  # fmt: skip
    is_ack = c("is_ack")
    by_value = (
        ack.unionByName(read)
        .groupBy("run", "value")
        .agg(
            # a value is sent (so acknowledged) once; min() picks the ack out of the reads
            F.min(F.when(is_ack, c("id"))).alias("id"),
            F.max(F.when(is_ack, c("acks_all"))).alias("acks_all"),
            F.min(F.when(is_ack, c("partition"))).alias("partition"),
            F.min(F.when(is_ack, c("offset"))).alias("offset"),
            F.min(F.when(is_ack, c("line"))).alias("line"),
            F.count(F.when(is_ack, 1)).alias("acks"),
            F.count(F.when(~is_ack, 1)).alias("reads"),
            F.min(F.when(~is_ack, c("place"))).alias("lo"),
            F.max(F.when(~is_ack, c("place"))).alias("hi"),
        )
    )
    # Highest offset read per partition: a tiny aggregate, broadcast into the join.
    max_read = reads(events).groupBy("run", "partition").agg(F.max("offset").alias("max_read"))
    unread = (c("acks") > 0) & (c("reads") == 0)
    readable = c("offset").isNotNull() & c("max_read").isNotNull() & (c("offset") <= c("max_read"))
    kind = (
        F.when(unread & c("acks_all") & readable, F.lit("lost"))
        .when(unread & c("acks_all"), F.lit("unseen"))
        .when(unread, F.lit("acks1_uncommitted"))
        .when(c("lo") != c("hi"), F.lit("duplicate"))
    )
    lo, hi = _unplace(c("lo")), _unplace(c("hi"))
    return (
        by_value.filter(unread | (c("lo") != c("hi")))
        .join(F.broadcast(max_read), ["run", "partition"], "left")
        .select(
            "run",
            kind.alias("kind"),
            "value",
            F.when(unread, c("partition")).otherwise(lo["partition"]).alias("partition"),
            F.when(unread, c("offset")).otherwise(lo["offset"]).alias("offset"),
            "id",
            "max_read",
            "line",
            F.when(~c("acks_all"), F.lit("1/0")).alias("acks"),
            F.when(~unread, F.array(lo, hi)).alias("places"),
            "reads",
        )
    )


def offset_anomalies(events: DataFrame) -> DataFrame:
    """inconsistent_offset: one (partition, offset) holding different values across reads and
    acks=all acknowledgements (acks=1 may legitimately lose an offset to another record).

    Values are compared by 64-bit hash in the big aggregate; only the offsets found are
    joined back for their values.
    """
    seen = reads(events).select("run", "partition", "offset", "value", _null_long().alias("id"))
    acks = (
        acked(events)
        .filter(c("acks_all") & c("offset").isNotNull())
        .select("run", "partition", "offset", "value", "id")
    )
    obs = seen.unionByName(acks)
    key = ["run", "partition", "offset"]
    h = F.xxhash64("value")
    bad = (
        obs.groupBy(*key)
        .agg(F.min(h).alias("hmin"), F.max(h).alias("hmax"))
        .filter(c("hmin") != c("hmax"))
        .select(*key)
    )
    is_ack = c("id").isNotNull()
    return (
        obs.join(bad, key, "left_semi")
        .groupBy(*key)
        .agg(
            F.sort_array(F.collect_set("value")).alias("values"),
            F.sort_array(F.collect_set(F.when(is_ack, c("value")))).alias("acked_values"),
            F.sort_array(F.collect_set("id")).alias("ids"),
            F.count(F.when(~is_ack, 1)).alias("reads"),
        )
        .select("run", F.lit("inconsistent_offset").alias("kind"), *key[1:], "values",
                "acked_values", "ids", "reads")  # fmt: skip
    )


def sequence_anomalies(events: DataFrame) -> DataFrame:
    """Positions going backwards, in one window pass:

    * reorder: within one reader and partition, an offset read after a higher one;
    * hwm_regression: a high watermark lower than the one observed before it by the same
      observer (the cluster's ``observe`` series; each ``hwm_read`` reader per partition).
    """
    read_pos = reads(events).select(
        "run", F.concat(F.lit("read "), c("reader")).alias("series"), "reader",
        "partition", c("offset").alias("pos"), "value", "line",
    )  # fmt: skip
    hwm_pos = events.filter(
        ((c("type") == "observe") | (c("type") == "hwm_read")) & c("hwm").isNotNull()
    ).select(
        "run",
        F.when(c("type") == "observe", F.lit("observe"))
        .otherwise(F.concat(F.lit("reader "), c("reader")))
        .alias("series"),
        F.lit(None).cast("string").alias("reader"),
        "partition",
        c("hwm").alias("pos"),
        F.lit(None).cast("string").alias("value"),
        "line",
    )
    w = Window.partitionBy("run", "series", "partition").orderBy("line")
    is_read = c("series").startswith("read ")
    return (
        read_pos.unionByName(hwm_pos)
        .withColumn("prev", F.lag("pos").over(w))
        .filter(c("pos") < c("prev"))
        .select(
            "run",
            F.when(is_read, F.lit("reorder")).otherwise(F.lit("hwm_regression")).alias("kind"),
            "reader",
            F.when(~is_read, c("series")).alias("source"),
            "partition",
            F.when(is_read, c("pos")).alias("offset"),
            F.when(is_read, c("prev")).alias("prev_offset"),
            F.when(~is_read, c("pos")).alias("hwm"),
            F.when(~is_read, c("prev")).alias("prev_hwm"),
            "value",
            "line",
        )
    )


Family = Callable[["DataFrame"], "DataFrame"]
FAMILIES: tuple[Family, ...] = (value_anomalies, offset_anomalies, sequence_anomalies)
FAMILY_OF: dict[str, Family] = {
    "lost": value_anomalies,
    "unseen": value_anomalies,
    "duplicate": value_anomalies,
    "inconsistent_offset": offset_anomalies,
    "reorder": sequence_anomalies,
    "hwm_regression": sequence_anomalies,
    "acks1_uncommitted": value_anomalies,
}
KINDS = tuple(FAMILY_OF)
# Kinds that make a run invalid (acks1_uncommitted is accounting, not an error).
INVALIDATING = ("lost", "unseen", "duplicate", "inconsistent_offset", "reorder", "hwm_regression")


def check(kind: str, events: DataFrame) -> DataFrame:
    """The anomalies of one kind: ``run`` and the kind's example fields."""
    return (
        FAMILY_OF[kind](events).filter(c("kind") == kind).select("run", *FIELDS[kind])
    )


def lost(events: DataFrame) -> DataFrame:
    return check("lost", events)


def unseen(events: DataFrame) -> DataFrame:
    return check("unseen", events)


def acks1_uncommitted(events: DataFrame) -> DataFrame:
    return check("acks1_uncommitted", events)


def duplicate(events: DataFrame) -> DataFrame:
    return check("duplicate", events)


def inconsistent_offset(events: DataFrame) -> DataFrame:
    return check("inconsistent_offset", events)


def reorder(events: DataFrame) -> DataFrame:
    return check("reorder", events)


def hwm_regression(events: DataFrame) -> DataFrame:
    return check("hwm_regression", events)


CHECKS: dict[str, Callable[[DataFrame], DataFrame]] = {
    "lost": lost,
    "unseen": unseen,
    "duplicate": duplicate,
    "inconsistent_offset": inconsistent_offset,
    "reorder": reorder,
    "hwm_regression": hwm_regression,
    "acks1_uncommitted": acks1_uncommitted,
}
