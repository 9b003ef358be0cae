"""Throughput of sequential appends with periodic fsync: plain directory vs the layer.

``elr bench lazyfs [--dir DIR] [--mib N] [--fsync-every-mib N] [--rounds N]``

Columns: a plain directory (its fsync reaches the disk); the layer (its fsync writes
the cache into the backing directory's page cache); the layer with
``--fsync-backing`` (its fsync also reaches the disk, like the plain directory).
Configurations are interleaved round by round and the median is printed, so that
load from other processes on the machine hits them alike.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time

from pytest_elr.core.commandline import command_parser

from .harness import mounted

CHUNKS = (("1 MiB", 1 << 20), ("16 KiB", 16 << 10))


def append_throughput(directory: str, chunk: int, total: int, fsync_every: int) -> float:
    """MB/s of appending `total` bytes in `chunk`-sized writes, fsync every `fsync_every`."""
    path = os.path.join(directory, "00000000000000000000.log")
    buf = os.urandom(chunk)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        unsynced = 0
        for _ in range(total // chunk):
            os.write(fd, buf)
            unsynced += chunk
            if unsynced >= fsync_every:
                os.fsync(fd)
                unsynced = 0
        os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
        _fsync_dir(directory)  # lets the layer drop the deleted file's store, as Kafka would
    return total / elapsed / 1e6


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    p = command_parser("bench lazyfs", __doc__)
    p.add_argument("--dir", default=None, help="where to work (default: a temp dir)")
    p.add_argument("--mib", type=int, default=128, help="MiB written per run")
    p.add_argument("--fsync-every-mib", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5, help="median of N interleaved rounds")
    args = p.parse_args(argv)
    work = tempfile.mkdtemp(prefix="lazyfs-bench-", dir=args.dir)
    total, every = args.mib << 20, args.fsync_every_mib << 20
    try:
        with contextlib.ExitStack() as stack:
            targets = {"plain dir": os.path.join(work, "plain")}
            os.makedirs(targets["plain dir"])
            for label, fsync_backing in (("lazyfs", False), ("lazyfs+fsync-backing", True)):
                fs = stack.enter_context(mounted(os.path.join(work, f"backing-{label}"),
                                                 os.path.join(work, f"mnt-{label}"),
                                                 fsync_backing=fsync_backing))
                targets[label] = fs.mountpoint
            runs: dict[tuple[str, str], list[float]] = {}
            for _ in range(args.rounds):
                for name, chunk in CHUNKS:
                    for label, directory in targets.items():
                        mbs = append_throughput(directory, chunk, total, every)
                        runs.setdefault((name, label), []).append(mbs)
        print(f"sequential appends of {args.mib} MiB, fsync every {args.fsync_every_mib} MiB;"
              f" median of {args.rounds} interleaved rounds, MB/s (ratio to plain dir)")
        print(f"{'write size':>10}" + "".join(f" {label:>26}" for label in targets))
        for name, _ in CHUNKS:
            base = statistics.median(runs[(name, "plain dir")])
            cells = []
            for label in targets:
                mbs = statistics.median(runs[(name, label)])
                cells.append(f"{mbs:>17.0f} ({mbs / base:5.2f})")
            print(f"{name:>10}" + "".join(f" {c:>26}" for c in cells))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
