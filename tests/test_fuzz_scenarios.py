"""Runs the structured scenario fuzzer (tests/fuzz_scenarios.py) in a child process whose address
space is capped, so an input that makes the product allocate without bound fails the test
(MemoryError) instead of taking the machine down; a wall-clock cap bounds the whole run."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

MEMORY_CAP = 3 << 30  # bytes of address space: the model and the loader need far less
WALL_CAP_S = 900


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def test_structured_fuzz_under_memory_and_time_caps() -> None:
    here = Path(__file__).parent
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         str(here / "fuzz_scenarios.py")],
        cwd=here.parent, capture_output=True, text=True, timeout=WALL_CAP_S, preexec_fn=_cap_memory,
        env={**os.environ, "ELR_FUZZ_EXAMPLES": os.environ.get("ELR_FUZZ_EXAMPLES", "2000")},
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "1 passed" in proc.stdout
