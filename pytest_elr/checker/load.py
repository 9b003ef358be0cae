"""Reading history directories (format version 1, see docs/history.md) into Spark DataFrames.

All runs given are read at once into one DataFrame with a ``run`` column (the run's index in
the list given) and a ``line`` column (1-based line number in its ``events.jsonl``). Lines that
are not valid events are kept aside as *malformed* entries naming file and line, and the rest
is analysed as usual. Every event type of :data:`~pytest_elr.core.history.EVENT_TYPES` is valid;
the ones no check reads (disagreements, violations, ...) are validated, then dropped.
"""

from __future__ import annotations

import json
import os
import posixpath
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from pyspark import StorageLevel
from pyspark.sql import Window
from pyspark.sql import functions as F

from pytest_elr.checker import sql
from pytest_elr.checker.parquet import read_columnar
from pytest_elr.checker.schema import (
    ANALYSED,
    CORRUPT,
    EVENT_SCHEMA,
    FIELD_TYPES,
    INT,
    LIST,
    NUM,
    OBJ,
    REASON,
    STR,
    USED,
)
from pytest_elr.core.columnar import MIN_BYTES
from pytest_elr.core.columnar import fresh as copy_is_fresh
from pytest_elr.core.columnar import wait as wait_for_copies
from pytest_elr.core.history import EVENTS_FILE, META_FILE, SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: a local history smaller than this is read as one string per file (:func:`_load_whole`): its meta.json
#: and its lines counted and judged in one Spark job with the other runs'; a larger one (and a URI's,
#: which the client cannot size) line by line, with line numbers rebuilt from the file's splits.
WHOLE_MAX = MIN_BYTES


class HistoryError(Exception):
    """A run directory that can't be analysed at all (no events file)."""


@dataclass
class Source:
    """One run directory as given to :func:`load_runs`: its index (the ``run`` column), path and
    meta.json."""

    index: int
    path: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def events_path(self) -> str:
        return _join(self.path, EVENTS_FILE)

    @property
    def meta_path(self) -> str:
        return _join(self.path, META_FILE)


class Loaded:
    """Runs read into Spark. ``events`` is cached: call :meth:`close` (or use ``with``).

    What the scan of every run's meta.json and small history tells (each run's meta, its line count
    and malformed lines) may still be on its way, in a Spark job of its own that runs beside the
    caller's: :attr:`sources`, :attr:`lines`, :attr:`malformed` and :attr:`malformed_count` wait
    for it; :attr:`events` does not."""

    def __init__(self, spark: SparkSession, sources: list[Source], events: DataFrame, cached: list[DataFrame],
                 lines: dict[int, int], malformed: dict[int, list[dict[str, Any]]], malformed_count: dict[int, int],
                 pending: Callable[[], None] | None = None) -> None:
        self.spark = spark
        self.events = events  # the valid events the analysis uses (see schema.USED)
        self.cached = cached  # what events is filtered from; persisted
        self._sources = sources
        self._lines = lines  # run index -> number of lines in events.jsonl
        self._malformed = malformed  # run index -> entries, up to the limit
        self._malformed_count = malformed_count
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        if pending is not None:
            self._thread = threading.Thread(target=self._run, args=(pending,), name="pytest-elr-scan", daemon=True)
            self._thread.start()

    def _run(self, pending: Callable[[], None]) -> None:
        try:
            pending()
        except BaseException as exc:  # raised where the results are asked for
            self._error = exc

    def settle(self) -> None:
        """Wait for the scan's job; raises what it raised."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error

    @property
    def sources(self) -> list[Source]:
        self.settle()
        return self._sources

    @property
    def lines(self) -> dict[int, int]:
        self.settle()
        return self._lines

    @property
    def malformed(self) -> dict[int, list[dict[str, Any]]]:
        self.settle()
        return self._malformed

    @property
    def malformed_count(self) -> dict[int, int]:
        self.settle()
        return self._malformed_count

    def close(self) -> None:
        if self._thread is not None:  # its job reads the cache: it ends first (an error of its own is moot)
            self._thread.join()
        for df in self.cached:
            df.unpersist()

    def __enter__(self) -> Loaded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_uri(path: str) -> bool:
    return "://" in path


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name if _is_uri(base) else os.path.join(base, name)


def spark_path(path: str) -> str:
    """What Spark is given for a run directory: a URI as is, a local path made absolute. A local
    path is resolved where the files are read -- by the executors, or by a Spark Connect server --
    so it must name the same directory there (docs/spark.md)."""
    return path if _is_uri(path) else os.path.abspath(path)


def path_key(path: str) -> str:
    """One spelling for a directory or file, whether given (``/h/run``, ``hdfs://nn/h/run``) or as
    Spark names what it read (``file:///h/run/events.jsonl``, percent-encoded): the path part,
    decoded and normalised. Hosts and ports are dropped: Spark adds them to what it names."""
    if _is_uri(path):
        part = unquote(urlsplit(path).path)
    elif path.startswith("file:"):  # Hadoop's short form, file:/h/run
        part = unquote(path[len("file:"):])
    else:
        part = os.path.abspath(path)
    return posixpath.normpath("/" + part.lstrip("/"))


def is_run_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, EVENTS_FILE)) or os.path.isfile(
        os.path.join(path, META_FILE)
    )


def discover(paths: Sequence[str]) -> list[str]:
    """Run directories under ``paths``: a path that is a run is kept, a local directory that
    is not is searched (sorted, recursively) for runs. URIs are taken as runs."""
    found: list[str] = []
    for p in paths:
        if _is_uri(p) or is_run_dir(p) or not os.path.isdir(p):
            found.append(p)
            continue
        for root, dirs, _files in os.walk(p):
            dirs.sort()
            if is_run_dir(root):
                found.append(root)
                dirs.clear()
    return found


def local_rows(spark: SparkSession, rows: Sequence[Sequence[Any]], ddl: str) -> DataFrame:
    """A small table made on the driver, e.g. ``local_rows(spark, [(0, 2)], "run int, min_isr int")``.

    Sent as ONE JSON literal that Spark parses: ``spark.createDataFrame`` makes a Python RDD, whose
    first use costs a cold JVM seconds (unpickling classes; measured 5.7 s at load 12, docs/performance.md)."""
    names = [part.split()[0] for part in ddl.split(",")]
    text = json.dumps([dict(zip(names, row, strict=True)) for row in rows])
    return spark.range(1).select(F.inline(F.from_json(F.lit(text), f"array<struct<{ddl}>>")))


def _malformed(file: str, line: int | None, error: str, text: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"file": file, "line": line, "error": error}
    if text is not None:
        entry["text"] = text if len(text) <= 200 else text[:200] + "…"
    return entry


def _read_files(spark: SparkSession, dirs: Sequence[str], name: str, **options: Any) -> DataFrame:
    """The files called ``name`` directly in the directories ``dirs``, as Spark's text source reads
    them (lines, or whole files with ``wholetext``). One listing and one scan for all runs: read as
    one union per run, 10,000 runs made a plan Spark took minutes to analyse."""
    return spark.read.option("pathGlobFilter", name).text(list(dirs), **options)


def _load_meta(source: Source, text: str | None) -> list[dict[str, Any]]:
    """Fill ``source.meta`` from the text of its meta.json (None: there is none); returns malformed
    entries (missing or broken meta.json)."""
    if text is None:
        return [_malformed(source.meta_path, None, "missing meta.json")]
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as e:
        return [_malformed(source.meta_path, e.lineno, f"invalid JSON: {e.msg} (column {e.colno})")]
    if not isinstance(meta, dict):
        return [_malformed(source.meta_path, 1, "meta.json is not a JSON object")]
    source.meta = meta
    if meta.get("schema") != SCHEMA:
        return [_malformed(source.meta_path, None, f"schema is {meta.get('schema')!r}, "
                                                   f"expected {SCHEMA!r}")]
    return []


def explain(text: str, spark_reason: str) -> str:
    """Why a line is not a valid event, in words (Spark flags it; Python says why)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        return f"invalid JSON: {e.msg} (column {e.colno})"
    if not isinstance(obj, dict):
        return f"not a JSON object but {type(obj).__name__}"
    for name, kind in FIELD_TYPES.items():
        v = obj.get(name)
        if v is None:
            continue
        ok = {
            NUM: isinstance(v, int | float) and not isinstance(v, bool),
            INT: isinstance(v, int) and not isinstance(v, bool),
            STR: isinstance(v, str | int | float),  # Spark reads numbers as strings too
            LIST: isinstance(v, list) and all(isinstance(x, int) for x in v),
            OBJ: isinstance(v, dict),
        }[kind]
        if not ok:
            return f"field {name!r} should be {kind}, got {json.dumps(v)[:40]}"
    return spark_reason


def load_runs(
    spark: SparkSession, paths: Sequence[str], *, malformed_limit: int = 100, columnar: bool = True
) -> Loaded:
    """Read the run directories ``paths`` (each holding meta.json and events.jsonl).

    Everything is read through Spark -- the client opens no file -- so a run directory only has
    to be visible where Spark reads: on every executor, or on a Spark Connect server. A run with a
    fresh columnar copy (``events.parquet``, :mod:`pytest_elr.core.columnar`) is read from it
    instead of its JSON Lines (``columnar=False``: never); the client only looks whether the copy
    is there (a URI's run is always read as text).

    Every meta.json, and the small local histories, are read in ONE scan whose job (metadata, line
    counts, malformed lines) runs in a thread of its own beside the caller's checks: on a cold JVM
    the two share the cores (docs/performance.md). Under Spark Connect it runs before returning."""
    if not paths:
        raise HistoryError("no run directories given")
    wait_for_copies()  # this process's runs' columnar copies, made in the background as they ended
    sources = [Source(i, p) for i, p in enumerate(paths)]
    runs_of: dict[str, list[int]] = {}  # directory key -> indices of the runs naming it
    for r in sources:
        runs_of.setdefault(path_key(r.path), []).append(r.index)

    def runs_for(file: str) -> list[int]:
        return runs_of.get(posixpath.dirname(path_key(file)), [])

    by_copy = [r for r in sources if columnar and not _is_uri(r.path) and copy_is_fresh(r.events_path)]
    whole = [r for r in sources if r not in by_copy and _whole(r)]
    as_text = [r for r in sources if r not in by_copy and r not in whole]
    tally = Tally({r.index: 0 for r in sources}, {r.index: [] for r in sources},
                  dict.fromkeys((r.index for r in sources), 0))
    parts: list[DataFrame] = []  # events, by the way they were read
    cached: list[DataFrame] = []
    # Every meta.json, and the whole-file runs' events, in ONE scan and ONE job.
    whole_dirs = list(dict.fromkeys(spark_path(r.path) for r in whole))
    meta_dirs = [d for d in dict.fromkeys(spark_path(r.path) for r in sources) if d not in set(whole_dirs)]
    try:
        scans = [_read_files(spark, ds, name, wholetext=True)
                 for ds, name in ((whole_dirs, f"{{{EVENTS_FILE},{META_FILE}}}"), (meta_dirs, META_FILE)) if ds]
    except Exception as exc:  # AnalysisException (classic and Connect): a path that isn't there
        if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
            raise HistoryError(f"{exc}".splitlines()[0]) from None
        raise
    scan = scans[0] if len(scans) == 1 else scans[0].unionByName(scans[1])
    scan = scan.select(F.input_file_name().alias("_file"), F.col("value").alias("_text"))
    if whole:
        summary, text, parsed = _load_whole(spark, scan, whole, malformed_limit)
        parts.append(text)
        cached.append(parsed)
    else:
        summary = scan.select(F.lit("meta").alias("_kind"), "_file", F.lit(None).cast("long").alias("_line"),
                              F.lit(None).cast("long").alias("_n"), "_text",
                              F.lit(None).cast("string").alias("_reason"))  # fmt: skip

    def settle_scan() -> None:
        rows = summary.collect()
        _tally_whole(rows, whole, runs_for, tally)
        meta_text: dict[int, str] = {}
        for row in rows:
            if row["_kind"] == "meta":
                for i in runs_for(row["_file"]):
                    meta_text[i] = row["_text"]
        for r in sources:  # meta.json problems first
            problems = _load_meta(r, meta_text.get(r.index))
            tally.malformed[r.index][:0] = problems
            tally.malformed_count[r.index] += len(problems)

    if by_copy:
        copied = read_columnar(spark, [(r.index, spark_path(r.path)) for r in by_copy])
        tally.lines.update(copied.lines)
        # A line Spark calls malformed is reported from the text, with the line itself.
        as_text += [r for r in by_copy if r.index in copied.flagged]
        if copied.lines:
            parts.append(copied.events)
    if as_text:
        text, parsed = _load_text(spark, as_text, runs_for, tally, malformed_limit)
        parts.append(text)
        cached.append(parsed)
    events = parts[0]
    for more in parts[1:]:
        events = events.unionByName(more)
    loaded = Loaded(spark, sources, events, cached, tally.lines, tally.malformed, tally.malformed_count,
                    pending=settle_scan if _classic(spark) else None)
    if not _classic(spark):
        settle_scan()
    return loaded


def _classic(spark: SparkSession) -> bool:
    """A classic session (not Spark Connect's client), where two threads may run jobs at once."""
    return not type(spark).__module__.startswith("pyspark.sql.connect")


@dataclass
class Tally:
    """What reading tells per run index besides its events: lines in events.jsonl, its first
    malformed lines (up to the limit given to :func:`load_runs`), and how many there are in all."""

    lines: dict[int, int]
    malformed: dict[int, list[dict[str, Any]]]
    malformed_count: dict[int, int]

    def bad_line(self, source: Source, line: int, spark_reason: str, text: str, count: int, first: bool) -> None:
        """A malformed line of ``source``'s events.jsonl (``count``: how many the file has, taken
        with its ``first`` one)."""
        why = explain(text, spark_reason)
        if line == self.lines[source.index] and why.startswith("invalid JSON"):
            why += " (truncated last line?)"
        self.malformed[source.index].append(_malformed(source.events_path, line, why, text))
        if first:
            self.malformed_count[source.index] += count


def _parse(raw: DataFrame, position: list[str]) -> DataFrame:
    """Lines (``_file``, the ``position`` columns, ``_text``) parsed and judged, persisted: the
    analysed fields of the valid events used, and ``_reason`` ("" for a blank line, null for a valid
    event), with the text only where it explains an error."""
    return (
        raw.select(
            "_file",
            *position,
            "_text",
            F.from_json("_text", EVENT_SCHEMA, {"columnNameOfCorruptRecord": CORRUPT}).alias("e"),
        )
        # Blank lines carry nothing and are no error: reason "" (kept for the line count).
        .selectExpr("_file", *position, "_text", "e.*")
        .selectExpr("*", f"CASE WHEN trim(_text) = '' THEN '' ELSE {REASON} END AS _reason")
        # Only what the checks and the rollup use is cached (nulls cost next to nothing);
        # raw text only where it explains an error.
        .selectExpr(
            "_file",
            *position,
            *[f"CASE WHEN _reason IS NULL AND {USED} THEN {sql.ident(n)} END AS {sql.ident(n)}" for n in ANALYSED],
            "CASE WHEN _reason != '' THEN _text END AS _text",
            "_reason",
        )
        .persist(StorageLevel.MEMORY_AND_DISK)
    )


def _whole(source: Source) -> bool:
    """Read as one string per file (:func:`_load_whole`): a local history below WHOLE_MAX bytes."""
    if _is_uri(source.path):
        return False
    try:
        return os.path.getsize(source.events_path) < WHOLE_MAX
    except OSError:
        raise HistoryError(f"{source.events_path}: no such file (is {source.path} a run directory?)") from None


#: :func:`path_key` in Spark SQL, for the local files Spark names (``file:///h/run/events.jsonl``,
#: percent-encoded; a ``+`` is no space there)
_SPARK_PATH_KEY = "url_decode(replace(regexp_replace(_file, '^file:(//)?', ''), '+', '%2B'))"


def _load_whole(
    spark: SparkSession, scan: DataFrame, sources: list[Source], malformed_limit: int
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """The runs ``sources`` from the whole-file ``scan`` (``_file``, ``_text``: every meta.json
    given, and these runs' events.jsonl): (the summary, valid events, the cached parse). The summary
    holds the meta.json texts, lines per file and the first malformed lines of each file, for
    :func:`_tally_whole`; the events need none of it, so the checks' job can run beside its job.

    Spark splits each file into lines as its text source does (LF, CR LF or a lone CR ends a line;
    the last line needs none), so a line's number is its position: nothing to rebuild."""
    is_events = F.col("_file").endswith("/" + EVENTS_FILE)
    split = F.split(F.col("_text"), r"\r\n|\n|\r")
    # the text after the last end of line is a line only if it is not empty
    cut = F.when(F.element_at(split, -1) == "", F.slice(split, 1, F.size(split) - 1)).otherwise(split)
    raw = scan.filter(is_events).select("_file", F.posexplode(cut).alias("_line", "_text"))
    parsed = _parse(raw.withColumn("_line", F.col("_line") + 1), ["_line"])
    w = Window.partitionBy("_file")
    metas = scan.filter(~is_events).select(
        F.lit("meta").alias("_kind"), "_file", F.lit(None).cast("long").alias("_line"),
        F.lit(None).cast("long").alias("_n"), "_text", F.lit(None).cast("string").alias("_reason"),
    )  # fmt: skip
    counts = parsed.groupBy("_file").agg(F.max("_line").alias("_n")).select(
        F.lit("lines").alias("_kind"), "_file", F.lit(None).cast("long").alias("_line"), "_n",
        F.lit(None).cast("string").alias("_text"), F.lit(None).cast("string").alias("_reason"),
    )  # fmt: skip
    bad = (
        parsed.filter(F.col("_reason") != "")
        .select("_file", "_line", "_text", "_reason", F.count(F.lit(1)).over(w).alias("_n"),
                F.row_number().over(w.orderBy("_line")).alias("_rn"))
        .filter(F.col("_rn") <= malformed_limit)
        .select(F.lit("bad").alias("_kind"), "_file", "_line", "_n", "_text", "_reason")
    )  # fmt: skip
    # Each run's events by the path of its file, known before any job (a run directory given
    # twice is two runs).
    run_of = local_rows(spark, [(path_key(r.events_path), r.index) for r in sources], "_key string, run int")
    events = (
        parsed.filter(F.col("_reason").isNull() & F.col("type").isNotNull())
        .withColumn("_key", F.expr(_SPARK_PATH_KEY))
        .join(F.broadcast(run_of), "_key")
        .select("run", "_line", *ANALYSED)
        .withColumnRenamed("_line", "line")
    )
    return metas.unionByName(counts).unionByName(bad), events, parsed


def _tally_whole(rows: Sequence[Any], sources: list[Source], runs_for: Callable[[str], list[int]],
                 tally: Tally) -> None:
    """Lines and malformed lines of the runs ``sources`` from the summary rows of :func:`_load_whole`."""
    wanted = {r.index for r in sources}

    def text_runs(file: str) -> list[int]:
        return [i for i in runs_for(file) if i in wanted]

    for row in rows:
        if row["_kind"] == "lines":
            for i in text_runs(row["_file"]):
                tally.lines[i] = row["_n"]
    by_index = {r.index: r for r in sources}
    counted: set[int] = set()
    for row in sorted((r for r in rows if r["_kind"] == "bad"), key=lambda r: (r["_file"], r["_line"])):
        for i in text_runs(row["_file"]):
            tally.bad_line(by_index[i], row["_line"], row["_reason"], row["_text"], row["_n"], i not in counted)
            counted.add(i)


def _load_text(
    spark: SparkSession, sources: list[Source], runs_for: Callable[[str], list[int]], tally: Tally,
    malformed_limit: int,
) -> tuple[DataFrame, DataFrame]:
    """The runs ``sources`` read from their JSON Lines: (valid events, the cached parse). Tallies
    their lines and malformed lines."""
    dirs = list(dict.fromkeys(spark_path(r.path) for r in sources))
    try:
        events_text = _read_files(spark, dirs, EVENTS_FILE)
        has_events = {i for f in events_text.inputFiles() for i in runs_for(f)}
    except Exception as exc:  # AnalysisException (classic and Connect): a path that isn't there
        if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
            raise HistoryError(f"{exc}".splitlines()[0]) from None
        raise
    missing = [r for r in sources if r.index not in has_events]
    if missing:
        r = missing[0]
        raise HistoryError(f"{r.events_path}: no such file (is {r.path} a run directory?)")
    wanted = {r.index for r in sources}

    def text_runs(file: str) -> list[int]:
        return [i for i in runs_for(file) if i in wanted]

    # Line numbers without a global sort: within one file split (block) rows keep file order
    # and consecutive monotonically_increasing_id values, so a line is the count of rows in
    # earlier blocks plus the position in its own block. The block counts come from the same
    # pass that parses and caches, so the text is read once.
    raw = events_text.select(
        F.input_file_name().alias("_file"),
        F.input_file_block_start().alias("_block"),
        F.monotonically_increasing_id().alias("_mid"),
        F.col("value").alias("_text"),
    )
    parsed = _parse(raw, ["_block", "_mid"])
    blocks = (
        parsed.groupBy("_file", "_block")
        .agg(F.count(F.lit(1)).alias("n"), F.min("_mid").alias("_mid0"))
        .collect()
    )
    # (file, block) -> (first mid, lines before) and file -> lines
    bases: dict[tuple[str, int], tuple[int, int]] = {}
    file_lines: dict[str, int] = {}
    for b in sorted(blocks, key=lambda b: (b["_file"], b["_block"])):
        bases[(b["_file"], b["_block"])] = (b["_mid0"], file_lines.get(b["_file"], 0))
        file_lines[b["_file"]] = file_lines.get(b["_file"], 0) + b["n"]
    for file, n in file_lines.items():
        for i in text_runs(file):
            tally.lines[i] = n

    def line_of(file: str, block: int, mid: int) -> int:
        mid0, before = bases[(file, block)]
        return before + mid - mid0 + 1

    w = Window.partitionBy("_file")
    bad_rows = (
        parsed.filter(F.col("_reason") != "")
        .select(
            "_file",
            "_block",
            "_mid",
            "_text",
            "_reason",
            F.count(F.lit(1)).over(w).alias("_n"),
            F.row_number().over(w.orderBy("_block", "_mid")).alias("_rn"),
        )
        .filter(F.col("_rn") <= malformed_limit)
        .collect()
    )
    by_index = {r.index: r for r in sources}
    counted: set[int] = set()
    for row in sorted(bad_rows, key=lambda r: (r["_file"], r["_block"], r["_mid"])):
        line = line_of(row["_file"], row["_block"], row["_mid"])
        for i in text_runs(row["_file"]):
            tally.bad_line(by_index[i], line, row["_reason"], row["_text"], row["_n"], i not in counted)
            counted.add(i)

    base_df = local_rows(
        spark,
        [(file, block, run, mid0, before)
         for (file, block), (mid0, before) in bases.items() for run in text_runs(file)],
        "_file string, _block long, run int, _mid0 long, _before long",
    )  # fmt: skip
    events = (
        parsed.filter(F.col("_reason").isNull() & F.col("type").isNotNull())
        .join(F.broadcast(base_df), ["_file", "_block"])
        .select(
            "run",
            (F.col("_before") + F.col("_mid") - F.col("_mid0") + 1).alias("line"),
            *ANALYSED,
        )
    )
    return events, parsed
