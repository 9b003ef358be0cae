"""The anomaly checks, after Jepsen's Kafka checker.

Each kind is a function ``events DataFrame -> DataFrame`` (one row per anomaly, with a
``run`` column). They are cut from three *families*, each one shuffle over the events, so
that a verdict costs three shuffles and not one per kind:

* :data:`VALUE_SQL` groups acks and reads by value: lost, unseen, acks1_uncommitted,
  duplicate;
* :data:`OFFSET_SQL` groups them by (partition, offset): inconsistent_offset;
* :data:`SEQUENCE_SQL` orders each reader's offsets and each observer's high watermarks
  by line: reorder, hwm_regression.

``events`` is what :func:`pytest_elr.checker.load.load_runs` yields: the valid events of all
runs with columns ``run``, ``line`` and the event fields. Aggregates use only fixed-width
values (longs, hashes) so Spark can hash-aggregate instead of sorting.

The families are Spark SQL text over a relation ``{events}``: one call to build a plan that the
DataFrame API built with hundreds of py4j round trips of ~0.3 ms each (docs/performance.md).
:mod:`.job` puts all three in one statement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: a send with acks=all: Kafka clients spell it "all" (in any case) or "-1". The usual spellings
#: are matched first; then a regular expression, not lower(): Spark's lower() initialises ICU, 13 %
#: of a cold confirmation's task time.
ACKS_ALL = "(acks IN ('all', '-1') OR acks RLIKE '^(?i:all)$')"

# (partition, offset) packed in one long so min/max stay hash aggregates; offsets below 2^40
# (10^12) and partitions below 2^23 fit.
_SHIFT = str(1 << 40)


def _partition_of(place: str) -> str:
    return f"CAST(floor({place} / {_SHIFT}) AS BIGINT)"


def _offset_of(place: str) -> str:
    return f"pmod({place}, {_SHIFT})"


def _unplace(place: str) -> str:
    return f"named_struct('partition', {_partition_of(place)}, 'offset', {_offset_of(place)})"


#: acknowledged sends; a missing partition means 0 (single-partition topic)
ACKED_SQL = f"""SELECT run, id, value, {ACKS_ALL} AS acks_all, coalesce(`partition`, 0) AS `partition`, `offset`, line
FROM {{events}} WHERE `type` = 'produce' AND op = 'ok'"""

READS_SQL = "SELECT run, reader, `partition`, `offset`, value, line FROM {events} WHERE `type` = 'consume'"

#: Acks and reads of each value side by side (one shuffle by value), classified:
#:
#: * lost: acks=all acknowledged, never read, though reads got to (or past) its offset in its
#:   partition; at the highest read offset itself another value was read, so lost too;
#: * unseen: acks=all acknowledged, never read, above the highest offset read (or no offset known,
#:   or its partition never read);
#: * acks1_uncommitted: acks=1/0 acknowledged and never read (allowed: counted, no error);
#: * duplicate: read at more than one (partition, offset); the example gives the lowest and highest
#:   place and the number of reads.
VALUE_SQL = f"""WITH ack AS ({ACKED_SQL}), rd AS ({READS_SQL}),
obs AS (
  SELECT run, value, id, acks_all, `partition` * {_SHIFT} + `offset` AS place, `partition`, `offset`, line,
         true AS is_ack FROM ack
  UNION ALL
  SELECT run, value, CAST(NULL AS BIGINT), CAST(NULL AS BOOLEAN), `partition` * {_SHIFT} + `offset`,
         `partition`, `offset`, line, false FROM rd
),
by_value AS (
  -- a value is sent (so acknowledged) once; min() picks the ack out of the reads
  SELECT run, value,
         min(CASE WHEN is_ack THEN id END) AS id,
         max(CASE WHEN is_ack THEN acks_all END) AS acks_all,
         min(CASE WHEN is_ack THEN `partition` END) AS `partition`,
         min(CASE WHEN is_ack THEN `offset` END) AS `offset`,
         min(CASE WHEN is_ack THEN line END) AS line,
         count(CASE WHEN is_ack THEN 1 END) AS acks,
         count(CASE WHEN NOT is_ack THEN 1 END) AS reads,
         min(CASE WHEN NOT is_ack THEN place END) AS lo,
         max(CASE WHEN NOT is_ack THEN place END) AS hi
  FROM obs GROUP BY run, value
),
-- highest offset read per partition: a tiny aggregate, broadcast into the join
max_read AS (SELECT run, `partition`, max(`offset`) AS max_read FROM rd GROUP BY run, `partition`),
found AS (
  SELECT /*+ BROADCAST(m) */ b.*, m.max_read, b.acks > 0 AND b.reads = 0 AS unread
  FROM by_value b LEFT JOIN max_read m ON b.run = m.run AND b.`partition` = m.`partition`
  WHERE (b.acks > 0 AND b.reads = 0) OR b.lo != b.hi
)
SELECT run,
       CASE WHEN unread AND acks_all AND `offset` IS NOT NULL AND max_read IS NOT NULL
                 AND `offset` <= max_read THEN 'lost'
            WHEN unread AND acks_all THEN 'unseen'
            WHEN unread THEN 'acks1_uncommitted'
            WHEN lo != hi THEN 'duplicate' END AS kind,
       value,
       CASE WHEN unread THEN `partition` ELSE {_partition_of('lo')} END AS `partition`,
       CASE WHEN unread THEN `offset` ELSE {_offset_of('lo')} END AS `offset`,
       id, max_read, line,
       CASE WHEN NOT acks_all THEN '1/0' END AS acks,
       CASE WHEN NOT unread THEN array({_unplace('lo')}, {_unplace('hi')}) END AS places,
       reads
FROM found"""

#: inconsistent_offset: one (partition, offset) holding different values across reads and acks=all
#: acknowledgements (acks=1 may legitimately lose an offset to another record). Values are compared
#: by 64-bit hash in the big aggregate; only the offsets found are joined back for their values.
OFFSET_SQL = f"""WITH obs AS (
  SELECT run, `partition`, `offset`, value, CAST(NULL AS BIGINT) AS id FROM ({READS_SQL})
  UNION ALL
  SELECT run, `partition`, `offset`, value, id FROM ({ACKED_SQL}) WHERE acks_all AND `offset` IS NOT NULL
),
bad AS (
  SELECT run, `partition`, `offset` FROM obs GROUP BY run, `partition`, `offset`
  HAVING min(xxhash64(value)) != max(xxhash64(value))
)
SELECT o.run, 'inconsistent_offset' AS kind, o.`partition`, o.`offset`,
       sort_array(collect_set(o.value)) AS `values`,
       sort_array(collect_set(CASE WHEN o.id IS NOT NULL THEN o.value END)) AS acked_values,
       sort_array(collect_set(o.id)) AS ids,
       count(CASE WHEN o.id IS NULL THEN 1 END) AS reads
FROM obs o LEFT SEMI JOIN bad b ON o.run = b.run AND o.`partition` = b.`partition` AND o.`offset` = b.`offset`
GROUP BY o.run, o.`partition`, o.`offset`"""

#: Positions going backwards, in one window pass:
#:
#: * reorder: within one reader and partition, an offset read after a higher one;
#: * hwm_regression: a high watermark lower than the one observed before it by the same observer
#:   (the cluster's ``observe`` series; each ``hwm_read`` reader per partition).
SEQUENCE_SQL = f"""WITH pos AS (
  SELECT run, concat('read ', reader) AS series, reader, `partition`, `offset` AS pos, value, line FROM ({READS_SQL})
  UNION ALL
  SELECT run, CASE WHEN `type` = 'observe' THEN 'observe' ELSE concat('reader ', reader) END,
         CAST(NULL AS STRING), `partition`, hwm, CAST(NULL AS STRING), line
  FROM {{events}} WHERE (`type` = 'observe' OR `type` = 'hwm_read') AND hwm IS NOT NULL
),
back AS (
  SELECT *, lag(pos) OVER (PARTITION BY run, series, `partition` ORDER BY line) AS prev,
         startswith(series, 'read ') AS is_read
  FROM pos
)
SELECT run, CASE WHEN is_read THEN 'reorder' ELSE 'hwm_regression' END AS kind, reader,
       CASE WHEN NOT is_read THEN series END AS source, `partition`,
       CASE WHEN is_read THEN pos END AS `offset`, CASE WHEN is_read THEN prev END AS prev_offset,
       CASE WHEN NOT is_read THEN pos END AS hwm, CASE WHEN NOT is_read THEN prev END AS prev_hwm,
       value, line
FROM back WHERE pos < prev"""

#: the family queries, each over ``{events}``
FAMILIES: tuple[str, ...] = (VALUE_SQL, OFFSET_SQL, SEQUENCE_SQL)
FAMILY_OF: dict[str, str] = {
    "lost": VALUE_SQL,
    "unseen": VALUE_SQL,
    "duplicate": VALUE_SQL,
    "inconsistent_offset": OFFSET_SQL,
    "reorder": SEQUENCE_SQL,
    "hwm_regression": SEQUENCE_SQL,
    "acks1_uncommitted": VALUE_SQL,
}
KINDS = tuple(FAMILY_OF)
# Kinds that make a run invalid (acks1_uncommitted is accounting, not an error).
INVALIDATING = ("lost", "unseen", "duplicate", "inconsistent_offset", "reorder", "hwm_regression")

# Example fields per kind (the family queries carry the union of them).
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


def run_sql(query: str, events: DataFrame) -> DataFrame:
    """``query`` with ``{events}`` standing for the DataFrame ``events`` (a temporary view)."""
    return events.sparkSession.sql(query, events=events)


def check(kind: str, events: DataFrame) -> DataFrame:
    """The anomalies of one kind: ``run`` and the kind's example fields."""
    columns = ", ".join(f"`{name}`" for name in FIELDS[kind])
    return run_sql(f"SELECT run, {columns} FROM ({FAMILY_OF[kind]}) WHERE kind = '{kind}'", events)


def _check_of(kind: str) -> Callable[[DataFrame], DataFrame]:
    def check_kind(events: DataFrame) -> DataFrame:
        return check(kind, events)

    check_kind.__name__ = kind
    return check_kind


CHECKS: dict[str, Callable[[DataFrame], DataFrame]] = {kind: _check_of(kind) for kind in
                                                        ("lost", "unseen", "duplicate", "inconsistent_offset",
                                                         "reorder", "hwm_regression", "acks1_uncommitted")}
