"""The Spark job: every check of :mod:`.checks` over all runs at once, counted and sampled in a
single job, into per-run :class:`Findings` (the CLI and the rollup read their detail; everything
else takes the :class:`~.verdict.Verdict` they give)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_elr.checker.checks import (
    ACKS_ALL,
    FAMILIES,
    FAMILY_OF,
    FIELDS,
    INVALIDATING,
    KINDS,
    ORDER,
    run_sql,
)
from pytest_elr.checker.load import Loaded, load_runs
from pytest_elr.checker.session import get_spark
from pytest_elr.checker.verdict import Verdict

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_EXAMPLES = 10


@dataclass
class Anomaly:
    count: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "examples": self.examples}


@dataclass
class Findings:
    """What the job found in one run: every anomaly kind counted, with examples, and the lines it
    could not read. ``valid``: no lost, unseen, duplicate, inconsistent_offset, reorder or
    hwm_regression. ``lost_count``: acks=all acknowledged records never read (lost + unseen).
    Malformed lines don't change ``valid`` (the CLI's ``--strict`` does)."""

    path: str
    run_id: str | None
    scenario: str | None
    profile: str | None
    backend: str | None
    kafka_version: str | None
    acked: int  # produce ok with acks=all
    acked_weak: int  # produce ok with acks=1 or 0
    read: int  # consume events (all readers)
    anomalies: dict[str, Anomaly]
    lost_count: int
    valid: bool
    malformed: list[dict[str, Any]]
    malformed_count: int
    meta: dict[str, Any] = field(default_factory=dict)

    def count(self, kind: str) -> int:
        return self.anomalies[kind].count

    @property
    def expected_loss(self) -> str:
        """What the run's scenario declared for its profile (meta.json): ``found`` for a negative
        control; ``none`` when the history does not say."""
        return str(self.meta.get("expected_loss") or "none")

    def judged(self) -> str:
        """The run judged as pytest judges its history: ``valid`` (no anomaly), ``loss as expected``
        (a negative control lost records and nothing the loss does not explain, the executor's
        rule: ``Verdict.beside_loss``), else ``INVALID`` and, for a negative control, why. The
        fault's bite and the proof by presence are the executor's to judge, during the run
        (meta.json's ``outcome``)."""
        if self.expected_loss != "found":
            return "valid" if self.valid else "INVALID"
        verdict = self.verdict()
        if not self.lost_count:
            return "INVALID: no loss"  # a negative control that lost nothing proves nothing
        beside = verdict.beside_loss
        return f"INVALID: {', '.join(beside)}" if beside else "loss as expected"

    @property
    def as_expected(self) -> bool:
        return not self.judged().startswith("INVALID")

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "scenario": self.scenario,
            "profile": self.profile,
            "backend": self.backend,
            "kafka_version": self.kafka_version,
            "path": self.path,
            "acked": self.acked,
            "acked_weak": self.acked_weak,
            "read": self.read,
            "anomalies": {k: a.to_dict() for k, a in self.anomalies.items()},
            "lost_count": self.lost_count,
            "valid": self.valid,
            "malformed": self.malformed,
            "malformed_count": self.malformed_count,
        }

    def verdict(self) -> Verdict:
        """The run's verdict: the counts, and the lost records named by the examples kept."""
        lost = [(str(e.get("value")), e.get("offset"))
                for kind in ("lost", "unseen") for e in self.anomalies[kind].examples]
        return Verdict(acked=self.acked, read=self.read, lost_count=self.lost_count, lost=lost,
                       anomalies={k: a.count for k, a in self.anomalies.items()}, checker="spark")


#: the row of :func:`_rows` that carries a run's counts (``example``: acked, acked_weak, read)
_STATS = "_stats"


def _examples(family: str) -> str:
    """The family's rows as (run, kind, _order, example): what orders a kind's examples (nulls last;
    one array type for every kind, as the union needs) and the example as JSON."""
    kinds = [k for k in KINDS if FAMILY_OF[k] == family]
    order = " ".join(
        f"WHEN kind = '{k}' THEN array("
        + ", ".join(f"coalesce(CAST(`{o}` AS BIGINT), {2**63 - 1})" for o in ORDER[k]) + ")"
        for k in kinds)  # fmt: skip
    example = " ".join(
        f"WHEN kind = '{k}' THEN to_json(named_struct("
        + ", ".join(f"'{name}', `{name}`" for name in FIELDS[k]) + "), map('ignoreNullFields', 'false'))"
        for k in kinds)  # fmt: skip
    return f"SELECT run, kind, CASE {order} END AS _order, CASE {example} END AS example FROM ({family})"


#: (run, kind, n, rn, example json) for up to ``{examples}`` anomalies per run and kind, and one
#: ``_stats`` row per run with its counts: the three check families in ONE Spark SQL statement.
_ROWS_SQL = f"""WITH found AS (
{" UNION ALL ".join(_examples(f) for f in FAMILIES)}
UNION ALL
SELECT run, '{_STATS}', array(CAST(0 AS BIGINT)),
       to_json(named_struct(
         'acked', count(CASE WHEN `type` = 'produce' AND op = 'ok' AND {ACKS_ALL} THEN 1 END),
         'acked_weak', count(CASE WHEN `type` = 'produce' AND op = 'ok' AND NOT {ACKS_ALL} THEN 1 END),
         'read', count(CASE WHEN `type` = 'consume' THEN 1 END)))
FROM {{events}} GROUP BY run
)
SELECT run, kind, example, n, rn FROM (
  SELECT run, kind, example, count(1) OVER (PARTITION BY run, kind) AS n,
         row_number() OVER (PARTITION BY run, kind ORDER BY _order) AS rn
  FROM found
) WHERE rn <= {{examples}}"""


def _rows(loaded: Loaded, examples: int) -> list[Any]:
    """(run, kind, n, rn, example json) for up to ``examples`` anomalies per run and kind, and one
    ``_stats`` row per run with its counts, in ONE Spark job over the three check families."""
    query = _ROWS_SQL.replace("{examples}", str(max(examples, 1)))
    return run_sql(query, loaded.events).collect()


def findings_from(loaded: Loaded, *, examples: int = DEFAULT_EXAMPLES) -> list[Findings]:
    rows = _rows(loaded, examples)
    stats = {r["run"]: json.loads(r["example"]) for r in rows if r["kind"] == _STATS}
    found: dict[int, dict[str, Anomaly]] = {source.index: {} for source in loaded.sources}
    for row in sorted((r for r in rows if r["kind"] != _STATS), key=lambda r: (r["run"], r["kind"], r["rn"])):
        a = found[row["run"]].setdefault(row["kind"], Anomaly(count=row["n"]))
        if len(a.examples) < examples:
            a.examples.append(json.loads(row["example"]))
    findings = []
    for source in loaded.sources:
        anomalies = {kind: found[source.index].get(kind, Anomaly()) for kind in KINDS}
        s = stats.get(source.index)
        meta = source.meta
        findings.append(
            Findings(
                path=source.path,
                run_id=meta.get("run_id"),
                scenario=meta.get("scenario"),
                profile=meta.get("profile"),
                backend=meta.get("backend"),
                kafka_version=meta.get("kafka_version"),
                acked=s["acked"] if s else 0,
                acked_weak=s["acked_weak"] if s else 0,
                read=s["read"] if s else 0,
                anomalies=anomalies,
                lost_count=anomalies["lost"].count + anomalies["unseen"].count,
                valid=all(anomalies[k].count == 0 for k in INVALIDATING),
                malformed=loaded.malformed[source.index],
                malformed_count=loaded.malformed_count[source.index],
                meta=meta,
            )
        )
    return findings


def check_runs(
    paths: Sequence[str],
    *,
    spark: SparkSession | None = None,
    examples: int = DEFAULT_EXAMPLES,
    columnar: bool = True,
) -> list[Findings]:
    """Findings for the run directories ``paths``, in that order (``columnar``: read a run's fresh
    columnar copy instead of its JSON Lines, :func:`~.load.load_runs`)."""
    with load_runs(spark or get_spark(), [str(p) for p in paths], columnar=columnar) as loaded:
        return findings_from(loaded, examples=examples)


def check_run(
    path: str, *, spark: SparkSession | None = None, examples: int = DEFAULT_EXAMPLES, columnar: bool = True
) -> Findings:
    return check_runs([path], spark=spark, examples=examples, columnar=columnar)[0]
