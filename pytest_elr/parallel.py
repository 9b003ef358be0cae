"""Concurrent runs: independent scenarios go to different clusters at the same time.

A real-Kafka run leaves the machine's CPUs mostly idle (it waits on Kafka's own timers), so a session
with several Kafka scenarios hands them to pytest-xdist workers, one pool of clusters per worker: the
verdict table, the report and JUnit are the controller's, as under ``-n``. ``--elr-parallel``
(ini ``elr_parallel``, env ``PYTEST_ELR_PARALLEL``) sets the number of workers; ``auto`` (the
default) sizes it from the machine (``sut.capacity.cluster_slots``) and from the work: one worker
per scenario file at most, none for the model backend (milliseconds a run: a worker's start costs
more than it saves). The user's own ``-n``/``--dist``/``--tx`` always win, and nothing is
distributed for ``--collect-only``, ``--pdb`` or inside an xdist worker.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_elr.scenario.suite import SCENARIO_SUFFIXES
from pytest_elr.settings import setting, setting_source
from pytest_elr.sut.capacity import available_memory, cluster_slots, cpu_count

ENV = "PYTEST_ELR_PARALLEL"
#: scenario files counted under the session's arguments; past this the count changes nothing
MAX_COUNTED = 64


@dataclass(frozen=True)
class Decision:
    workers: int  # 0: leave the session as pytest and xdist have it
    why: str


def parse_parallel(value: str, where: str) -> int | None:
    """``auto`` -> None, a positive integer -> itself; anything else is a usage error naming ``where``."""
    if value == "auto":
        return None
    if value.isdigit() and int(value) >= 1:
        return int(value)
    raise pytest.UsageError(f"{where}: expected auto or a number of concurrent clusters (1 or more), got {value!r}")


def decide(config: pytest.Config) -> Decision:
    """How many xdist workers this session gets from pytest-elr."""
    value = str(setting(config, "parallel"))
    asked = parse_parallel(value, setting_source(config, "parallel"))
    if hasattr(config, "workerinput"):
        return Decision(0, "an xdist worker")
    xdist = config.pluginmanager.hasplugin("xdist")
    if asked is not None and asked > 1 and not xdist:
        raise pytest.UsageError(f"{setting_source(config, 'parallel')} {asked}: concurrent runs need pytest-xdist, "
                                "which is not loaded (-p no:xdist, or not installed); fix: drop -p no:xdist, or "
                                "--elr-parallel 1")
    if not xdist:
        return Decision(0, "pytest-xdist is not loaded")
    option = config.option
    if option.numprocesses is not None or option.dist != "no" or option.tx:
        return Decision(0, "the command line's -n/--dist/--tx decide")
    if option.collectonly or config.getoption("usepdb", False):
        return Decision(0, "--collect-only or --pdb")
    if asked is not None:
        return Decision(asked if asked > 1 else 0, f"{setting_source(config, 'parallel')} {asked}")
    if setting(config, "backend") != "kafka":
        return Decision(0, "the model backend runs a scenario in milliseconds")
    files = count_scenario_files(config)
    slots = cluster_slots()
    workers = min(slots, files)
    why = (f"--elr-parallel auto: {slots} for {cpu_count():g} cores and {available_memory() / 2**30:.0f} GiB "
           f"available, {files}{'+' if files >= MAX_COUNTED else ''} scenario files")
    return Decision(workers if workers > 1 else 0, why)


def count_scenario_files(config: pytest.Config) -> int:
    """Scenario files named by or under the session's arguments (``path::node`` ids count their file;
    under ``--pyargs`` a package counts its directory), up to ``MAX_COUNTED``. Directories pytest does
    not recurse into (``norecursedirs``) are not walked."""
    cwd = Path(config.invocation_params.dir)
    skip = [str(p) for p in config.getini("norecursedirs")]
    found: set[Path] = set()
    for arg in config.args:
        path = _path_of(arg.split("::", 1)[0], cwd, pyargs=bool(config.option.pyargs))
        if path is None:
            continue
        if path.is_file():
            if path.name.endswith(SCENARIO_SUFFIXES):
                found.add(path.resolve())
            continue
        for root, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not any(fnmatch.fnmatch(d, pattern) for pattern in skip))
            found |= {(Path(root) / n).resolve() for n in names if n.endswith(SCENARIO_SUFFIXES)}
            if len(found) >= MAX_COUNTED:
                return MAX_COUNTED
    return min(len(found), MAX_COUNTED)


def _path_of(arg: str, cwd: Path, *, pyargs: bool) -> Path | None:
    path = Path(arg) if Path(arg).is_absolute() else cwd / arg
    if path.exists():
        return path
    if pyargs:
        try:
            spec = importlib.util.find_spec(arg)
        except (ImportError, ValueError):
            return None
        if spec is not None and spec.submodule_search_locations:
            return Path(next(iter(spec.submodule_search_locations)))
    return None


def distribute(config: pytest.Config) -> Decision:
    """Turn on xdist's load distribution when ``decide`` says so. Runs in the plugin's
    ``pytest_configure``, before xdist's own (``trylast``) registers its session from these options."""
    decision = decide(config)
    if decision.workers:
        config.option.numprocesses = decision.workers
        config.option.dist = "load"
        # A session a test starts inside a worker (pytester, the wheel's tests) runs one cluster at a
        # time: the machine's slots are this session's workers already.
        config.option.tx = [f"popen//env:{ENV}=1"] * decision.workers
    return decision
