"""A columnar copy of a run's history: ``events.parquet`` beside ``events.jsonl``.

The JSON Lines file stays the source of truth (append-only, crash-safe, line numbers in every
error). When a run's history closes, a large one (:data:`MIN_BYTES` and up) also gets a Parquet
copy, made here with pyarrow (multi-threaded, no Spark): the same events, one row per line, each
with its ``line`` number. The Spark checker reads the copy instead of parsing the JSON when it is
there and not older than the JSON Lines (:func:`fresh`); parsing JSON is what dominates a check
(docs/performance.md).

No copy is written -- the checker then reads the JSON Lines as before -- unless every line of the
file is a JSON object whose fields have the types the checker's schema gives them (pyarrow's
typed reader, which fails on anything else) and the file holds no blank line (the number of rows
equals the number of lines, so row *i* is line *i* + 1). A history with a broken, truncated or
blank line is therefore always judged from its text, where the checker names the line.
Not checked in the copy: ``args`` (any JSON value; Spark keeps it as text either way) and ``leo``
(an object of integers), which no check reads.
"""

from __future__ import annotations

import atexit
import os
import shutil
import threading
from pathlib import Path

COLUMNAR_FILE = "events.parquet"
#: histories smaller than this are read as text: Spark parses a few MiB of JSON faster than it
#: opens a Parquet file, and the copy would only cost time at the end of every run
MIN_BYTES = 16 << 20

#: (field, type) of the copy, as the checker's Spark schema (checker/load.py EVENT_SCHEMA) types
#: them: "long", "double", "string", "longs" (a list of longs)
FIELDS: tuple[tuple[str, str], ...] = (
    ("t", "double"), ("type", "string"), ("step", "string"), ("phase", "string"), ("action", "string"),
    ("leader", "long"), ("leader_epoch", "long"), ("isr", "longs"), ("elr", "longs"),
    ("last_known_elr", "longs"), ("fenced", "longs"), ("hwm", "long"), ("broker", "long"),
    ("leo_before", "long"), ("leo_after", "long"), ("records_lost", "long"), ("bytes_lost", "long"),
    ("op", "string"), ("id", "long"), ("value", "string"), ("acks", "string"), ("partition", "long"),
    ("offset", "long"), ("error", "string"), ("reader", "string"), ("after", "string"),
)  # fmt: skip
LINE = "line"


def fresh(events_file: str | os.PathLike[str]) -> bool:
    """True when the events file ``events_file`` has a columnar copy beside it, made after the events
    file last changed."""
    try:
        copy = os.stat(os.path.join(os.path.dirname(events_file), COLUMNAR_FILE))
        events = os.stat(events_file)
    except OSError:
        return False
    return copy.st_mtime_ns >= events.st_mtime_ns


def _arrow_schema():  # type: ignore[no-untyped-def]  # pyarrow has no type stubs
    import pyarrow as pa

    kinds = {"long": pa.int64(), "double": pa.float64(), "string": pa.string(), "longs": pa.list_(pa.int64())}
    return pa.schema([(name, kinds[kind]) for name, kind in FIELDS])


def _count_lines(path: Path) -> int:
    lines, last = 0, b"\n"
    with path.open("rb") as f:
        while chunk := f.read(1 << 24):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines + (last != b"\n")  # a last line without its newline is a line too


def write(events_file: str | os.PathLike[str], *, min_bytes: int | None = None) -> bool:
    """Write the columnar copy of the events file ``events_file`` beside it if the history qualifies
    (see the module; ``min_bytes``: :data:`MIN_BYTES`); True if written. A stale copy is removed
    whatever happens, so the checker never reads one."""
    events = Path(events_file)
    directory = events.parent
    copy = directory / COLUMNAR_FILE
    min_bytes = MIN_BYTES if min_bytes is None else min_bytes
    if copy.is_dir():  # a copy Spark wrote (a directory of parts): not ours to trust
        shutil.rmtree(copy)
    copy.unlink(missing_ok=True)
    try:
        size = events.stat().st_size
    except OSError:
        return False
    if size < min_bytes or size == 0:
        return False
    try:
        import pyarrow as pa
        import pyarrow.json as pj
        import pyarrow.parquet as pq
    except ImportError:
        return False
    tmp = directory / f".{COLUMNAR_FILE}.tmp"
    parse = pj.ParseOptions(explicit_schema=_arrow_schema(), unexpected_field_behavior="ignore",
                            newlines_in_values=False)
    rows = 0
    try:
        reader = pj.open_json(events, read_options=pj.ReadOptions(block_size=16 << 20), parse_options=parse)
        writer = None
        try:
            for batch in reader:
                n = batch.num_rows
                batch = batch.append_column(LINE, pa.array(range(rows + 1, rows + n + 1), pa.int64()))
                if writer is None:
                    writer = pq.ParquetWriter(tmp, batch.schema, compression="snappy")
                writer.write_batch(batch, row_group_size=1 << 20)
                rows += n
        finally:
            if writer is not None:
                writer.close()
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError):
        tmp.unlink(missing_ok=True)
        return False
    if rows == 0 or rows != _count_lines(events):  # a blank line: row numbers are not line numbers
        tmp.unlink(missing_ok=True)
        return False
    os.replace(tmp, copy)
    return True


_pending: list[threading.Thread] = []
_pending_lock = threading.Lock()


def write_later(events_file: str | os.PathLike[str], *, min_bytes: int | None = None) -> None:
    """:func:`write` in a thread of its own: a run's history closes at once, and its copy is made while
    the next run goes on (pyarrow releases the GIL). :func:`wait` waits for every copy begun; so does
    the process at exit (a thread not a daemon: a copy is never left half-written by our exit, and
    the checker reads the JSON Lines of a run whose copy is not there yet)."""
    thread = threading.Thread(target=write, args=(events_file,), kwargs={"min_bytes": min_bytes},
                              name="pytest-elr-columnar-copy")
    with _pending_lock:
        _pending[:] = [t for t in _pending if t.is_alive()]
        _pending.append(thread)
    thread.start()


def wait() -> None:
    """Wait until every copy begun by :func:`write_later` is written (or given up)."""
    with _pending_lock:
        threads, _pending[:] = list(_pending), []
    for thread in threads:
        thread.join()


atexit.register(wait)
