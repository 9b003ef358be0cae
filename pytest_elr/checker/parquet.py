"""Reading runs from their columnar copies (``events.parquet``, :mod:`pytest_elr.core.columnar`).

The copy holds every line of ``events.jsonl`` as a typed row with its line number, so Spark reads
only the columns the checks use, with no JSON to parse and no line numbers to reconstruct. Spark
still judges every row as it judges a line of text (:func:`~.schema.reason`): a run with a row it
calls malformed is returned in :attr:`Columnar.flagged`, for the caller to read from its text,
where the line itself is shown.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql import types as T

from pytest_elr.checker.schema import ANALYSED, CORRUPT, reason, used
from pytest_elr.core.columnar import COLUMNAR_FILE, FIELDS, LINE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_TYPES = {"long": T.LongType(), "double": T.DoubleType(), "string": T.StringType(),
          "longs": T.ArrayType(T.LongType())}  # fmt: skip
#: the copy's schema, given to Spark (no footer is read to infer it)
PARQUET_SCHEMA = T.StructType(
    [T.StructField(name, _TYPES[kind]) for name, kind in FIELDS] + [T.StructField(LINE, T.LongType())]
)


@dataclass
class Columnar:
    events: DataFrame  # run, line and the analysed fields of the valid events used
    lines: dict[int, int]  # run index -> lines, for the runs read here (not flagged)
    flagged: set[int]  # run indices with a row Spark calls malformed


def read_columnar(spark: SparkSession, runs: Sequence[tuple[int, str]]) -> Columnar:
    """The runs ``runs`` ((index, directory as Spark reads it)) from their columnar copies."""
    rows = None
    for index, path in runs:  # few runs have a copy (large histories only): one branch each
        part = spark.read.schema(PARQUET_SCHEMA).parquet(posixpath.join(path, COLUMNAR_FILE))
        part = part.withColumn("run", F.lit(index))
        rows = part if rows is None else rows.unionByName(part)
    assert rows is not None
    rows = rows.withColumn(CORRUPT, F.lit(None).cast("string")).withColumn("_reason", reason())
    stats = rows.groupBy("run").agg(F.count(F.lit(1)).alias("n"), F.count("_reason").alias("bad")).collect()
    flagged = {r["run"] for r in stats if r["bad"]}
    lines = {r["run"]: r["n"] for r in stats if r["run"] not in flagged}
    # Not cached: a scan of the few columns a check reads costs less than building a cache.
    events = rows.filter(F.col("_reason").isNull() & used() & ~F.col("run").isin(*flagged, -1))
    return Columnar(events.select("run", LINE, *ANALYSED), lines, flagged)
