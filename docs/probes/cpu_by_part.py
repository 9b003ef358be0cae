"""Where a command's CPU goes, by part of the machine: Kafka's JVMs, the node's other processes,
commands run in the containers, the harness's Python, Docker's daemons, short-lived host processes.

    python3 docs/probes/cpu_by_part.py [--interval 0.5] [--threads] [--json OUT] -- COMMAND ...

Samples every process's own CPU time (``/proc/PID/stat`` utime + stime) and every container's
cgroup (``cpuacct.usage``, cgroup v1, which keeps the CPU of its exited processes) while COMMAND
runs, and the machine's total (the root cgroup). A process is counted at its last sample, so what
lived less than an interval is not seen by itself: it is the part left over in its container's
cgroup ("exec'd in a container") or in the machine's total ("short-lived on the host": the docker
CLI, runc). ``--threads`` also splits the Kafka JVMs' CPU by thread (the JVM names its native
threads, 15 characters, digits read as N): which of Kafka's own threads the time goes to. Linux
only, run as root; issue 26 (docs/performance.md, "Where the CPU goes").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
TICK = os.sysconf("SC_CLK_TCK")


def _processes() -> dict[tuple[int, int], tuple[str, str, float]]:
    """(pid, start time) -> (part, container id or "", own CPU seconds)."""
    seen: dict[tuple[int, int], tuple[str, str, float]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cgroup = Path(entry.path, "cgroup").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICK
        container = ""
        for line in cgroup.splitlines():
            if ":cpuacct" in line or ":cpu,cpuacct" in line:
                path = line.split(":", 2)[2]
                if path.startswith("/docker/"):
                    container = path.split("/")[2]
        seen[(int(entry.name), int(fields[19]))] = (_part(comm, cmdline, container), container, cpu)
    return seen


def _threads(pid: str, role: str) -> dict[tuple[int, int], tuple[str, float]]:
    """(pid, tid) -> (the JVM's role and the thread's name class, the thread's CPU seconds)."""
    found: dict[tuple[int, int], tuple[str, float]] = {}
    for task in os.scandir(f"/proc/{pid}/task"):
        try:
            stat = Path(task.path, "stat").read_text()
            name = Path(task.path, "comm").read_text().strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        found[(int(pid), int(task.name))] = (f"{role}: {re.sub(r'[0-9]+', 'N', name)}",
                                             (int(fields[11]) + int(fields[12])) / TICK)
    return found


def _part(comm: str, cmdline: str, container: str) -> str:
    if container:
        if comm == "java" and "kafka.Kafka" in cmdline:
            return "kafka JVM (controller)" if "-Xmx256m" in cmdline else "kafka JVM (broker)"
        if "toxiproxy" in comm:
            return "toxiproxy (in the node)"
        if "lazyfs" in comm or "fuse" in cmdline:
            return "FUSE layer (in the node)"
        words = [w.rsplit("/", 1)[-1] for w in cmdline.split()[:2]]
        return f"other long-lived in a container: {' '.join(words) or comm}"
    if comm.startswith("python") or comm.startswith("pytest"):
        return "harness Python (host)"
    if comm in ("dockerd", "containerd") or comm.startswith("containerd-shim"):
        return f"docker daemons: {comm if not comm.startswith('containerd-shim') else 'containerd-shim'}"
    if comm == "java":
        return "java on the host (Spark, unit tests)"
    return f"other host: {comm}"


def _container_usage() -> dict[str, float]:
    usage: dict[str, float] = {}
    for entry in CPUACCT.joinpath("docker").glob("*/cpuacct.usage"):
        with contextlib.suppress(OSError):
            usage[entry.parent.name] = int(entry.read_text()) / 1e9
    return usage


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--threads", action="store_true", help="split the Kafka JVMs' CPU by thread")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("a command to run is required after --")
    before_total = int(CPUACCT.joinpath("cpuacct.usage").read_text()) / 1e9
    baseline = {key: cpu for key, (_, _, cpu) in _processes().items()}
    last: dict[tuple[int, int], tuple[str, str, float]] = {}
    containers: dict[str, float] = {}
    started = time.monotonic()
    child = subprocess.Popen(command)
    threads: dict[tuple[int, int], tuple[str, float]] = {}
    while child.poll() is None:
        for key, value in _processes().items():
            last[key] = value
            if args.threads and value[0].startswith("kafka JVM"):
                threads.update(_threads(str(key[0]), value[0].split("(")[1].rstrip(")")))
        for cid, cpu in _container_usage().items():
            containers[cid] = max(containers.get(cid, 0.0), cpu)
        time.sleep(args.interval)
    wall = time.monotonic() - started
    total = int(CPUACCT.joinpath("cpuacct.usage").read_text()) / 1e9 - before_total

    parts: dict[str, float] = defaultdict(float)
    own_in_container: dict[str, float] = defaultdict(float)
    for key, (part, container, cpu) in last.items():
        used = cpu - baseline.get(key, 0.0)
        if key[0] == os.getpid() or used <= 0:
            continue
        parts[part] += used
        if container:
            own_in_container[container] += used
    for cid, cpu in containers.items():
        parts["exec'd in a container (short-lived)"] += max(0.0, cpu - own_in_container.get(cid, 0.0))
    parts["short-lived on the host (docker CLI, runc, ...)"] = max(0.0, total - sum(parts.values()))
    print(f"\nwall {wall:.0f} s, CPU {total:.0f} s ({total / wall:.2f} cores of {os.cpu_count()}), "
          f"exit code {child.returncode}")
    for part, cpu in sorted(parts.items(), key=lambda item: -item[1]):
        if cpu >= 0.05 * total / 100 or cpu >= 1:
            print(f"  {cpu:8.1f} s  {100 * cpu / total:5.1f} %  {part}")
    by_thread: dict[str, float] = defaultdict(float)
    for name, cpu in threads.values():
        by_thread[name] += cpu
    if by_thread:
        jvm_total = sum(by_thread.values())
        print(f"\nKafka JVM threads ({jvm_total:.0f} s of the JVMs' CPU seen by thread):")
        for name, cpu in sorted(by_thread.items(), key=lambda item: -item[1])[:25]:
            print(f"  {cpu:8.1f} s  {100 * cpu / jvm_total:5.1f} %  {name}")
    if args.json:
        args.json.write_text(json.dumps({"wall_s": wall, "cpu_s": total, "parts": parts, "threads": by_thread,
                                         "command": command, "exit": child.returncode}, indent=1))
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
