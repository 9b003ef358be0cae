"""Spark SQL text for expressions built in Python.

A column built with ``pyspark.sql.functions`` costs a py4j round trip per call (function lookups,
operators, aliases): the checker's plans took ~11,000 of them, 2.3 s of a cold confirmation's 6 s
(docs/performance.md). The same expression as SQL text is one call, parsed by Spark.
"""

from __future__ import annotations

from collections.abc import Iterable


def lit(value: str) -> str:
    """A SQL string literal (backslash escapes are Spark's default)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def ident(name: str) -> str:
    """A column name, quoted."""
    return "`" + name.replace("`", "``") + "`"


def isin(column: str, values: Iterable[str]) -> str:
    return f"{ident(column)} IN ({', '.join(lit(v) for v in values)})"


def case(branches: Iterable[tuple[str, str]], otherwise: str | None = None) -> str:
    """``CASE WHEN cond THEN value ... [ELSE otherwise] END`` from (cond, value) pairs."""
    whens = " ".join(f"WHEN {cond} THEN {value}" for cond, value in branches)
    return f"CASE {whens}{'' if otherwise is None else f' ELSE {otherwise}'} END"
