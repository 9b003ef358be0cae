"""Command line: ``python -m pytest_elr.lazyfs {mount,power-off,stats,sync,umount}``."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from . import METADATA_MODES, control
from .harness import unmount


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pytest_elr.lazyfs", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    m = sub.add_parser("mount", help="mount BACKING on MOUNTPOINT (foreground)")
    m.add_argument("backing")
    m.add_argument("mountpoint")
    m.add_argument("--control", help="control socket (default BACKING/.lazyfs/control.sock)")
    m.add_argument("--metadata", choices=METADATA_MODES, default="fsyncdir",
                   help="what makes creates/renames/unlinks durable (default: fsyncdir)")
    m.add_argument("--fsync-backing", action="store_true",
                   help="also fsync the backing store on sync (survive a real host crash)")
    m.add_argument("--allow-other", action="store_true",
                   help="let other users (e.g. the app's) use the mount")
    m.add_argument("--exit-with-parent", action="store_true",
                   help="unmount (cleanly) when the parent process dies")
    m.add_argument("-v", "--verbose", action="store_true")

    for name, help_ in (("power-off", "drop everything unsynced (stays mounted)"),
                        ("stats", "unsynced bytes per file and in total, as JSON"),
                        ("sync", "make everything durable, like a clean shutdown")):
        c = sub.add_parser(name, help=help_)
        c.add_argument("--control", required=True)

    u = sub.add_parser("umount", help="unmount (clean: the layer syncs everything first)")
    u.add_argument("mountpoint")

    args = p.parse_args(argv)
    if args.cmd == "mount":
        from .mount import MountOptions, run  # needs pyfuse3: only where the layer runs

        logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                            format="%(asctime)s %(levelname)s %(message)s")
        run(MountOptions(args.backing, args.mountpoint,
                         args.control or control.default_path(args.backing),
                         args.metadata, args.fsync_backing, args.allow_other,
                         args.exit_with_parent))
        return 0
    if args.cmd == "umount":
        unmount(args.mountpoint)
        return 0
    cmd = {"power-off": "power_off", "stats": "stats", "sync": "sync"}[args.cmd]
    reply = control.request(args.control, cmd)
    json.dump(reply, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
