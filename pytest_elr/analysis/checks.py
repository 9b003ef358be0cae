"""The anomaly checks, after Jepsen's Kafka checker. Each is ``events DataFrame -> DataFrame``
with one row per anomaly and a ``run`` column; the verdict counts and samples them.

``events`` is what :func:`pytest_elr.analysis.load.load_runs` yields: valid events of all
runs with columns ``run``, ``line`` and the event fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

c = F.col


def _acks_all() -> Column:
    # Kafka clients spell acks=all as "all" or "-1".
    return F.lower(c("acks")).isin("all", "-1")


def acked(events: DataFrame) -> DataFrame:
    """Acknowledged sends. A missing partition means 0 (single-partition topic)."""
    return events.filter((c("type") == "produce") & (c("op") == "ok")).select(
        "run",
        "id",
        "value",
        _acks_all().alias("acks_all"),
        F.coalesce(c("partition"), F.lit(0)).alias("partition"),
        "offset",
        "line",
    )


def reads(events: DataFrame) -> DataFrame:
    return events.filter(c("type") == "consume").select(
        "run", "reader", "partition", "offset", "value", "line"
    )


def _read_values(events: DataFrame) -> DataFrame:
    """Per value read: lowest and highest (partition, offset) it was read at."""
    place = F.struct("partition", "offset")
    return (
        reads(events)
        .groupBy("run", "value")
        .agg(F.min(place).alias("lo"), F.max(place).alias("hi"))
    )


def _acked_unread(events: DataFrame) -> DataFrame:
    """Acknowledged values never read, with the highest offset read in their partition."""
    max_read = reads(events).groupBy("run", "partition").agg(F.max("offset").alias("max_read"))
    return (
        acked(events)
        .join(_read_values(events).select("run", "value"), ["run", "value"], "left_anti")
        .join(max_read, ["run", "partition"], "left")
    )


def _readable() -> Column:
    # A read reached this offset (or beyond) in the partition, so the record should have been
    # seen. At the highest read offset itself another value was read: lost too.
    return c("offset").isNotNull() & c("max_read").isNotNull() & (c("offset") <= c("max_read"))


_UNREAD = ("value", "partition", "offset", "id", "max_read", "line")


def lost(events: DataFrame) -> DataFrame:
    """acks=all acknowledged, never read, though reads got to (or past) its offset."""
    return _acked_unread(events).filter(c("acks_all") & _readable()).select("run", *_UNREAD)


def unseen(events: DataFrame) -> DataFrame:
    """acks=all acknowledged, never read, and above the highest offset read (or no offset
    known, or its partition never read)."""
    return _acked_unread(events).filter(c("acks_all") & ~_readable()).select("run", *_UNREAD)


def acks1_uncommitted(events: DataFrame) -> DataFrame:
    """acks=1/0 acknowledged and never read: allowed by those acks, so counted, not an error."""
    return _acked_unread(events).filter(~c("acks_all")).select("run", *_UNREAD)


def duplicate(events: DataFrame) -> DataFrame:
    """A value read at more than one (partition, offset)."""
    dup = _read_values(events).filter(c("lo") != c("hi")).select("run", "value")
    places = (
        reads(events)
        .join(dup, ["run", "value"], "left_semi")
        .groupBy("run", "value")
        .agg(F.sort_array(F.collect_set(F.struct("partition", "offset"))).alias("places"))
    )
    ids = acked(events).groupBy("run", "value").agg(F.min("id").alias("id"))
    return places.join(ids, ["run", "value"], "left").select(
        "run",
        "value",
        c("places")[0]["partition"].alias("partition"),
        c("places")[0]["offset"].alias("offset"),
        "id",
        "places",
    )


def inconsistent_offset(events: DataFrame) -> DataFrame:
    """One (partition, offset) holding different values across reads and acks=all
    acknowledgements (acks=1 may legitimately lose an offset to another record)."""
    seen = reads(events).select("run", "partition", "offset", "value", F.lit(None).cast("long").alias("id"))
    acks = (
        acked(events)
        .filter(c("acks_all") & c("offset").isNotNull())
        .select("run", "partition", "offset", "value", "id")
    )
    obs = seen.unionByName(acks)
    key = ["run", "partition", "offset"]
    bad = (
        obs.groupBy(*key)
        .agg(F.min("value").alias("vmin"), F.max("value").alias("vmax"))
        .filter(c("vmin") != c("vmax"))
        .select(*key)
    )
    return (
        obs.join(bad, key, "left_semi")
        .groupBy(*key)
        .agg(
            F.sort_array(F.collect_set("value")).alias("values"),
            F.sort_array(F.collect_set(F.when(c("id").isNotNull(), c("value")))).alias(
                "acked_values"
            ),
            F.sort_array(F.collect_set("id")).alias("ids"),
        )
    )


def reorder(events: DataFrame) -> DataFrame:
    """Within one reader and partition, an offset read after a higher one."""
    w = Window.partitionBy("run", "reader", "partition").orderBy("line")
    return (
        reads(events)
        .withColumn("prev_offset", F.lag("offset").over(w))
        .filter(c("offset") < c("prev_offset"))
        .select("run", "reader", "partition", "offset", "prev_offset", "value", "line")
    )


def hwm_regression(events: DataFrame) -> DataFrame:
    """An observed high watermark lower than the one observed before it by the same observer:
    the cluster's ``observe`` series, and each ``hwm_read`` reader per partition."""
    obs = events.filter(
        ((c("type") == "observe") | (c("type") == "hwm_read")) & c("hwm").isNotNull()
    ).select(
        "run",
        F.when(c("type") == "observe", F.lit("observe"))
        .otherwise(F.concat(F.lit("reader "), c("reader")))
        .alias("source"),
        "partition",
        "hwm",
        "t",
        "line",
    )
    w = Window.partitionBy("run", "source", "partition").orderBy("line")
    return (
        obs.withColumn("prev_hwm", F.lag("hwm").over(w))
        .filter(c("hwm") < c("prev_hwm"))
        .select("run", "source", "partition", "hwm", "prev_hwm", "t", "line")
    )


Check = Callable[["DataFrame"], "DataFrame"]

# kind -> (check, columns that order its examples). Order matters for display only.
CHECKS: dict[str, tuple[Check, tuple[str, ...]]] = {
    "lost": (lost, ("partition", "offset", "line")),
    "unseen": (unseen, ("partition", "offset", "line")),
    "duplicate": (duplicate, ("partition", "offset")),
    "inconsistent_offset": (inconsistent_offset, ("partition", "offset")),
    "reorder": (reorder, ("line",)),
    "hwm_regression": (hwm_regression, ("line",)),
    "acks1_uncommitted": (acks1_uncommitted, ("partition", "offset", "line")),
}

# Kinds that make a run invalid (acks1_uncommitted is accounting, not an error).
INVALIDATING = ("lost", "unseen", "duplicate", "inconsistent_offset", "reorder", "hwm_regression")
