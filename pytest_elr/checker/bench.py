"""Wall time of the Spark checker against the same analysis in DuckDB, on synthetic histories.

    elr bench checker --records 10000000

runs sizes 1e5, 1e6, ... up to --records (or --sizes), each a synthetic run with a few lost
records, checks it with Spark (``local[2]`` by default, JVM already warm) and with DuckDB
(2 threads), asserts both find the same anomalies, and prints the times and their ratio.
Histories are kept under --dir and reused by later runs. Needs ``pip install duckdb``.

Spark reads the run's columnar copy (``events.parquet``), as it does a large run's under pytest:
the copy is made first, the way a run makes it when its history closes, and its cost is timed and
printed apart ("copy s"). ``--text`` also times the check from the JSON Lines alone (the copy
ignored), ``--text-only`` only that.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from typing import Any

from pytest_elr.core import columnar
from pytest_elr.core.commandline import command_parser
from pytest_elr.core.history import EVENTS_FILE, META_FILE

# The same checks as pytest_elr.checker.checks, in DuckDB SQL (counts only).
DUCKDB_CHECKS = """
CREATE TEMP TABLE ev AS
SELECT row_number() OVER () AS line, * FROM read_json(
  ?, format = 'newline_delimited', ignore_errors = true,
  columns = {t: 'DOUBLE', type: 'VARCHAR', op: 'VARCHAR', id: 'BIGINT', value: 'VARCHAR',
             acks: 'VARCHAR', "partition": 'BIGINT', "offset": 'BIGINT', reader: 'VARCHAR',
             hwm: 'BIGINT'});
CREATE TEMP TABLE acked AS
SELECT id, value, lower(acks) IN ('all', '-1') AS acks_all, coalesce("partition", 0) AS p,
       "offset" AS o, line
FROM ev WHERE type = 'produce' AND op = 'ok';
CREATE TEMP TABLE reads AS
SELECT reader, "partition" AS p, "offset" AS o, value, line FROM ev WHERE type = 'consume';
CREATE TEMP TABLE unread AS
SELECT a.*, m.max_read FROM acked a
LEFT JOIN (SELECT p, max(o) AS max_read FROM reads GROUP BY p) m USING (p)
WHERE NOT EXISTS (SELECT 1 FROM reads r WHERE r.value = a.value);
SELECT
 (SELECT count(*) FROM unread WHERE acks_all AND o <= max_read) AS lost,
 (SELECT count(*) FROM unread WHERE acks_all AND NOT coalesce(o <= max_read, false)) AS unseen,
 (SELECT count(*) FROM (SELECT value FROM reads GROUP BY value
                        HAVING min(p * 1099511627776 + o) <> max(p * 1099511627776 + o)))
   AS duplicate,
 (SELECT count(*) FROM (SELECT p, o FROM (SELECT p, o, value FROM reads UNION ALL
                                          SELECT p, o, value FROM acked
                                          WHERE acks_all AND o IS NOT NULL)
                        GROUP BY p, o HAVING min(value) <> max(value))) AS inconsistent_offset,
 (SELECT count(*) FROM (SELECT o < lag(o) OVER (PARTITION BY reader, p ORDER BY line) AS back
                        FROM reads) WHERE back) AS reorder,
 (SELECT count(*) FROM (SELECT hwm < lag(hwm) OVER (PARTITION BY type, reader, "partition"
                                                    ORDER BY line) AS back
                        FROM ev WHERE type IN ('observe', 'hwm_read') AND hwm IS NOT NULL)
  WHERE back) AS hwm_regression,
 (SELECT count(*) FROM unread WHERE NOT acks_all) AS acks1_uncommitted
"""


def duckdb_check(path: str, threads: int = 2) -> dict[str, int]:
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute("SET preserve_insertion_order = true")  # row_number() = line number
    statements = [s for s in DUCKDB_CHECKS.split(";") if s.strip()]
    con.execute(statements[0], [os.path.join(path, EVENTS_FILE)])
    for s in statements[1:-1]:
        con.execute(s)
    cur = con.execute(statements[-1])
    names = [d[0] for d in cur.description]
    row = cur.fetchone()
    con.close()
    assert row is not None
    return dict(zip(names, row, strict=True))


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}"


def _ensure(root: str, records: int, lose: int) -> str:
    from pytest_elr.checker.synth import generate

    path = os.path.join(root, f"records-{records}-lose-{lose}")
    meta = os.path.join(path, META_FILE)
    if os.path.exists(meta) and os.path.exists(os.path.join(path, EVENTS_FILE)):
        return path
    t0 = time.monotonic()
    generate(path, records, lose=lose)
    size = os.path.getsize(os.path.join(path, EVENTS_FILE)) / 2**20
    print(f"  generated {records:>11,} records ({size:,.0f} MiB) in "
          f"{time.monotonic() - t0:.1f} s", file=sys.stderr)  # fmt: skip
    return path


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("bench checker", __doc__)
    ap.add_argument("--records", type=int, default=1_000_000, help="largest size")
    ap.add_argument("--sizes", help="comma-separated sizes instead of decades up to --records")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "pytest-elr-bench"))
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--standalone", action="store_true",
                    help="run Spark on a standalone master with two 1-core workers started here (separate JVMs)")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    ap.add_argument("--text", action="store_true", help="also check from the JSON Lines alone")
    ap.add_argument("--text-only", action="store_true", help="check from the JSON Lines alone")
    args = ap.parse_args(argv)
    if args.sizes:
        sizes = [int(float(s)) for s in args.sizes.split(",")]
    else:
        sizes, n = [], 100_000
        while n < args.records:
            sizes.append(n)
            n *= 10
        sizes.append(args.records)

    with contextlib.ExitStack() as stack:
        if args.standalone:
            from pytest_elr.checker.cluster import LocalSparkCluster

            cluster = stack.enter_context(LocalSparkCluster(workers=2, cores=1, worker_memory="4g"))
            args.master = cluster.master_url
            from pytest_elr.checker.session import stop_spark

            stack.callback(stop_spark)  # the application ends before its cluster does
        return _bench(args, sizes)


def _bench(args: argparse.Namespace, sizes: list[int]) -> int:
    from pytest_elr.checker.job import check_run
    from pytest_elr.checker.session import SparkSettings, get_spark

    t0 = time.monotonic()
    conf = (("spark.executor.memory", "3g"),) if args.standalone else ()
    spark = get_spark(SparkSettings(master=args.master, driver_memory=args.driver_memory, conf=conf))
    start_s = time.monotonic() - t0
    os.makedirs(args.dir, exist_ok=True)
    warm = _ensure(args.dir, 1000, 1)
    if not args.text_only:  # the first check reads a copy, as the timed ones do
        columnar.write(os.path.join(warm, EVENTS_FILE), min_bytes=0)
    t0 = time.monotonic()
    check_run(warm, spark=spark)
    warm_s = time.monotonic() - t0
    print(f"Spark {spark.version} {args.master}: session start {start_s:.1f} s, first check "
          f"(1,000 records) {warm_s:.1f} s; load average {os.getloadavg()[0]:.1f}; "
          f"{os.cpu_count()} CPUs", flush=True)  # fmt: skip
    print(f"{'records':>11} {'lines':>11} {'MiB':>7} {'copy s':>7} {'spark s':>8} {'text s':>7} "
          f"{'duckdb s':>9} {'spark/duckdb':>12}  load", flush=True)  # fmt: skip
    results: list[dict[str, Any]] = []
    for n in sizes:
        lose = 3 + n // 100_000
        path = _ensure(args.dir, n, lose)
        size = os.path.getsize(os.path.join(path, EVENTS_FILE)) / 2**20
        copy_s = spark_s = text_s = None
        found = []
        if not args.text_only:
            t0 = time.monotonic()
            if not columnar.write(os.path.join(path, EVENTS_FILE), min_bytes=0):
                print(f"no columnar copy of {path}", file=sys.stderr)
                return 1
            copy_s = time.monotonic() - t0
            t0 = time.monotonic()
            found.append(check_run(path, spark=spark))
            spark_s = time.monotonic() - t0
        if args.text or args.text_only:
            t0 = time.monotonic()
            found.append(check_run(path, spark=spark, columnar=False))
            text_s = time.monotonic() - t0
        t0 = time.monotonic()
        duck = duckdb_check(path)
        duck_s = time.monotonic() - t0
        for v in found:
            counts = {k: a.count for k, a in v.anomalies.items()}
            if counts != duck or counts["lost"] != lose:
                print(f"MISMATCH at {n}: spark {counts} duckdb {duck}", file=sys.stderr)
                return 1
        if len(found) == 2 and found[0].to_dict() != found[1].to_dict():
            print(f"MISMATCH at {n}: the copy and the text give different findings", file=sys.stderr)
            return 1
        lines = 3 * n - lose + 9
        load = os.getloadavg()[0]
        judged = spark_s if spark_s is not None else text_s
        assert judged is not None
        print(f"{n:>11,} {lines:>11,} {size:>7,.0f} {_s(copy_s):>7} {_s(spark_s):>8} {_s(text_s):>7} "
              f"{duck_s:>9.1f} {judged / duck_s:>12.2f}  {load:.1f}", flush=True)  # fmt: skip
        results.append({"records": n, "lines": lines, "mib": round(size), "copy_s": copy_s, "spark_s": spark_s,
                        "text_s": text_s, "duckdb_s": duck_s, "loadavg": load})  # fmt: skip
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"spark_start_s": start_s, "master": args.master, "runs": results}, f,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
