"""How many Kafka clusters this machine runs at once: sized from its cores and its memory.

A running scenario keeps its cluster's CPUs mostly idle (Kafka's own timers: session timeouts, lag
checks, settle polls), but every start and restart of a node burns a JVM start, and those bunch
up. Measured on 2 cores (docs/performance.md, "Concurrent runs"): the suite on real Kafka under 1,
2 and 3 concurrent clusters; the figures below are what that measurement supports, not a guess.
"""

from __future__ import annotations

import os
from pathlib import Path

#: clusters per core the measurement supports (2 cores: the suite takes 466 s under 3 clusters, 542 s under 2)
CLUSTERS_PER_CORE = 1.5
#: resident memory a 4-broker, 1-controller cluster reaches in the suite (5 JVMs of ~150 MiB, Toxiproxy),
#: rounded up with room for a Python worker and the page cache of its logs
CLUSTER_MEMORY = 1536 * 2**20
#: memory left to everything else (the Spark checker's JVM, Docker, the test process)
RESERVED_MEMORY = 2 * 2**30


def cpu_count() -> float:
    """Cores this process may use: its affinity, capped by a cgroup v2 CPU quota (a CI container)."""
    cores = float(len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else float(os.cpu_count() or 1)
    quota = _read(Path("/sys/fs/cgroup/cpu.max"))
    if quota:
        limit, _, period = quota.partition(" ")
        if limit != "max" and period.strip().isdigit() and int(period) > 0:
            cores = min(cores, int(limit) / int(period))
    return max(cores, 1.0)


def available_memory() -> int:
    """Bytes available for new processes: MemAvailable, capped by a cgroup v2 memory limit."""
    available = 0
    for line in (_read(Path("/proc/meminfo")) or "").splitlines():
        if line.startswith("MemAvailable:"):
            available = int(line.split()[1]) * 1024
    limit = _read(Path("/sys/fs/cgroup/memory.max"))
    used = _read(Path("/sys/fs/cgroup/memory.current"))
    if limit and limit.isdigit() and used and used.isdigit():
        available = min(available, int(limit) - int(used)) if available else int(limit) - int(used)
    return max(available, 0)


def cluster_slots(cpus: float | None = None, memory: int | None = None) -> int:
    """Concurrent clusters for this machine (at least 1): the smaller of what its cores and its
    memory carry."""
    cpus = cpu_count() if cpus is None else cpus
    memory = available_memory() if memory is None else memory
    by_cpu = int(cpus * CLUSTERS_PER_CORE)
    by_memory = (memory - RESERVED_MEMORY) // CLUSTER_MEMORY
    return max(1, min(by_cpu, by_memory))


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
