"""The event schema the checker reads a history with, and what makes an event valid (docs/history.md).

Shared by the two ways a history is read (:mod:`.load`: JSON Lines as text; :mod:`.parquet`: the
columnar copy)."""

from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.sql import types as T

from pytest_elr.checker import sql
from pytest_elr.core.history import EVENT_TYPES, REQUIRED_FIELDS

PRODUCE_OPS = ("invoke", "ok", "fail", "info")
CORRUPT = "_corrupt"

_L = T.LongType()
_S = T.StringType()
_IDS = T.ArrayType(_L)

# One schema for every event type: from_json leaves the fields a type doesn't have null.
# ``args`` is an arbitrary object; a string field keeps its raw JSON text.
EVENT_SCHEMA = T.StructType(
    [
        T.StructField("t", T.DoubleType()),
        T.StructField("type", _S),
        T.StructField("step", _S),
        T.StructField("phase", _S),
        T.StructField("action", _S),
        T.StructField("args", _S),
        T.StructField("leader", _L),
        T.StructField("leader_epoch", _L),
        T.StructField("isr", _IDS),
        T.StructField("elr", _IDS),
        T.StructField("last_known_elr", _IDS),
        T.StructField("fenced", _IDS),
        T.StructField("hwm", _L),
        T.StructField("leo", T.MapType(_S, _L)),
        T.StructField("broker", _L),
        T.StructField("leo_before", _L),
        T.StructField("leo_after", _L),
        T.StructField("records_lost", _L),
        T.StructField("bytes_lost", _L),
        T.StructField("op", _S),
        T.StructField("id", _L),
        T.StructField("value", _S),
        T.StructField("acks", _S),
        T.StructField("partition", _L),
        T.StructField("offset", _L),
        T.StructField("error", _S),
        T.StructField("reader", _S),
        T.StructField("after", _S),
        T.StructField(CORRUPT, _S),
    ]
)

# JSON types per field, only to explain a malformed line in words (Spark already found it).
NUM, INT, STR, LIST, OBJ = "number", "integer", "string", "list", "object"
FIELD_TYPES: dict[str, str] = {
    "t": NUM, "type": STR, "phase": STR, "action": STR, "args": OBJ,
    "leader": INT, "leader_epoch": INT, "isr": LIST, "elr": LIST,
    "last_known_elr": LIST, "fenced": LIST, "hwm": INT, "leo": OBJ, "broker": INT,
    "leo_before": INT, "leo_after": INT, "records_lost": INT, "bytes_lost": INT,
    "op": STR, "id": INT, "value": STR, "acks": STR, "partition": INT, "offset": INT,
    "error": STR, "reader": STR, "after": STR,
}  # fmt: skip


# Event fields the analysis uses (the others are validated, then dropped).
ANALYSED = ("t", "type", "action", "leader", "isr", "hwm", "op", "id", "value", "acks",
            "partition", "offset", "reader", "records_lost", "after")


#: events some check or the rollup reads; the rest (sends' invokes, failures, steps) is validated and
#: counted for line numbers, but not cached: a third fewer rows to keep
USED = (f"({sql.isin('type', ('consume', 'observe', 'fault', 'hwm_read', 'loss_evidence'))}"
        " OR (`type` = 'produce' AND `op` = 'ok'))")


def _reason() -> str:
    produce = "`type` = 'produce'"
    branches = [
        (f"{sql.ident(CORRUPT)} IS NOT NULL", sql.lit("invalid JSON or wrong field type")),
        ("`t` IS NULL", sql.lit("missing field 't'")),
        ("`type` IS NULL", sql.lit("missing field 'type'")),
        (f"NOT {sql.isin('type', EVENT_TYPES)}", f"concat({sql.lit('unknown event type ')}, `type`)"),
    ]
    branches += [(f"`type` = {sql.lit(etype)} AND {sql.ident(name)} IS NULL",
                  sql.lit(f"{etype} event without field {name!r}"))
                 for etype, names in REQUIRED_FIELDS.items() for name in names]  # fmt: skip
    branches += [
        (f"{produce} AND NOT {sql.isin('op', PRODUCE_OPS)}", f"concat({sql.lit('unknown produce op ')}, `op`)"),
        (f"{produce} AND `op` = 'ok' AND `acks` IS NULL", sql.lit("produce ok without field 'acks'")),
    ]
    return sql.case(branches)


#: null for a valid event, else a short reason (refined in Python by :func:`~.load.explain`)
REASON = _reason()


def used() -> F.Column:
    return F.expr(USED)


def reason() -> F.Column:
    return F.expr(REASON)
