"""Concurrent runs (--elr-parallel): when a session is spread over xdist workers, how many, and who wins.

The decision is read from the configured session (``pytester.parseconfigure`` runs the plugin's
``pytest_configure``) with the machine's size pinned, so every case is exact; one session really runs
spread over two workers, on the model backend.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_elr import parallel
from pytest_elr.scenario.suite import SHIPPED
from pytest_elr.sut import capacity

SCENARIO = (SHIPPED / "kip966_last_replica_standing.elr.yaml").read_text()


@pytest.fixture
def slots(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The machine carries ``slots[0]`` clusters (3 unless a test changes it)."""
    size = [3]
    monkeypatch.setattr(parallel, "cluster_slots", lambda: size[0])
    monkeypatch.delenv("PYTEST_ELR_PARALLEL", raising=False)
    return size


def scenarios(pytester: pytest.Pytester, n: int, under: str = "suite") -> Path:
    root = pytester.path / under
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"s{i}.elr.yaml").write_text(SCENARIO)
    return root


def workers(pytester: pytest.Pytester, *args: str | Path) -> int:
    config = pytester.parseconfigure(*args)
    return int(config.option.numprocesses or 0)


def test_auto_on_kafka_runs_one_worker_per_scenario_file_up_to_the_machines_slots(
        pytester: pytest.Pytester, slots: list[int]) -> None:
    assert workers(pytester, scenarios(pytester, 2), "--elr-backend=kafka") == 2
    assert workers(pytester, scenarios(pytester, 5), "--elr-backend=kafka") == 3
    slots[0] = 1
    assert workers(pytester, scenarios(pytester, 5), "--elr-backend=kafka") == 0


def test_auto_keeps_one_scenario_file_and_the_model_backend_in_one_process(
        pytester: pytest.Pytester, slots: list[int]) -> None:
    one = scenarios(pytester, 1) / "s0.elr.yaml"
    assert workers(pytester, one, "--elr-backend=kafka") == 0
    assert workers(pytester, f"{one}::s0[kafka]", "--elr-backend=kafka") == 0
    assert workers(pytester, scenarios(pytester, 5), "--elr-backend=model") == 0


def test_the_command_lines_n_collect_only_and_pdb_win(pytester: pytest.Pytester, slots: list[int]) -> None:
    suite = scenarios(pytester, 5)
    assert workers(pytester, suite, "--elr-backend=kafka", "-n", "0") == 0
    assert workers(pytester, suite, "--elr-backend=kafka", "-n", "1") == 1
    assert workers(pytester, suite, "--elr-backend=kafka", "--collect-only") == 0
    assert workers(pytester, suite, "--elr-backend=kafka", "--pdb") == 0
    assert workers(pytester, suite, "--elr-backend=kafka", "--elr-parallel", "2", "-n", "0") == 0


def test_a_number_is_taken_as_given_from_the_option_the_environment_or_the_ini_file(
        pytester: pytest.Pytester, slots: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    suite = scenarios(pytester, 1)
    assert workers(pytester, suite, "--elr-backend=model", "--elr-parallel", "4") == 4
    assert workers(pytester, suite, "--elr-parallel", "1") == 0
    pytester.makeini("[pytest]\nelr_parallel = 2\n")
    assert workers(pytester, suite) == 2
    monkeypatch.setenv("PYTEST_ELR_PARALLEL", "5")
    assert workers(pytester, suite) == 5
    assert workers(pytester, suite, "--elr-parallel", "auto", "--elr-backend=model") == 0


@pytest.mark.parametrize("value", ["0", "two", "-1", "2.5", ""])
def test_a_bad_value_is_a_usage_error_naming_where_it_came_from(
        pytester: pytest.Pytester, slots: list[int], value: str) -> None:
    result = pytester.runpytest_subprocess(f"--elr-parallel={value}", "--elr-backend=model")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--elr-parallel: expected auto or a number of concurrent clusters" in result.stderr.str()
    assert "Traceback" not in result.stderr.str()


def test_a_number_without_xdist_is_a_usage_error_with_the_fix(pytester: pytest.Pytester, slots: list[int]) -> None:
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--elr-parallel", "2", "--elr-backend=model")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "concurrent runs need pytest-xdist" in result.stderr.str()
    assert "--elr-parallel 1" in result.stderr.str()


def test_scenario_files_pytest_does_not_recurse_into_are_not_counted(pytester: pytest.Pytester) -> None:
    scenarios(pytester, 2, "suite")
    scenarios(pytester, 4, "suite/.hidden")
    scenarios(pytester, 4, "suite/node_modules")
    scenarios(pytester, 1, "suite/deeper/still")
    config = pytester.parseconfig(pytester.path / "suite")
    assert parallel.count_scenario_files(config) == 3


def test_pyargs_counts_the_shipped_suite(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig("--pyargs", "pytest_elr.scenarios")
    assert parallel.count_scenario_files(config) == len(list(SHIPPED.glob("*.elr.yaml")))


def test_the_header_says_how_many_and_why(pytester: pytest.Pytester, slots: list[int]) -> None:
    config = pytester.parseconfigure(scenarios(pytester, 4), "--elr-backend=kafka")
    header = " ".join(line for lines in config.hook.pytest_report_header(config=config, start_path=pytester.path)
                      for line in lines)
    assert "pytest-elr: 3 runs at once" in header and "4 scenario files" in header
    assert "--elr-parallel 1 runs one at a time" in header


def test_runs_spread_over_two_workers_make_one_table(pytester: pytest.Pytester) -> None:
    """The whole path: two workers each run scenarios, the controller prints one table of all runs."""
    suite = scenarios(pytester, 4)
    result = pytester.runpytest_subprocess(suite, "--elr-backend=model", "--elr-checker=inline",
                                           "--elr-parallel", "2", "-v", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    out = result.stdout.str()
    assert "[gw0]" in out and "[gw1]" in out
    table = [line for line in out.splitlines() if re.match(r"kip966-last-replica-standing +\w+ +model .* PASS", line)]
    assert len(table) == 12  # 4 files x 3 profiles, each once


@pytest.mark.parametrize(("cpus", "memory", "expected"), [
    (2.0, 20 * 2**30, 3),  # the cores decide
    (8.0, capacity.RESERVED_MEMORY + 2 * capacity.CLUSTER_MEMORY, 2),  # the memory decides
    (1.0, 20 * 2**30, 1),
    (4.0, 20 * 2**30, 6),
    (0.5, 0, 1),  # never below one
])
def test_cluster_slots_take_the_smaller_of_cores_and_memory(cpus: float, memory: int, expected: int) -> None:
    assert capacity.cluster_slots(cpus, memory) == expected


def test_a_cgroup_cpu_quota_caps_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"/sys/fs/cgroup/cpu.max": "150000 100000"}
    monkeypatch.setattr(capacity, "_read", lambda p: files.get(str(p)))
    monkeypatch.setattr(capacity.os, "sched_getaffinity", lambda pid: set(range(8)))
    assert capacity.cpu_count() == 1.5
    files["/sys/fs/cgroup/cpu.max"] = "max 100000"
    assert capacity.cpu_count() == 8.0


def test_a_cgroup_memory_limit_caps_what_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"/proc/meminfo": "MemTotal: 99999999 kB\nMemAvailable: 20971520 kB\n",
             "/sys/fs/cgroup/memory.max": str(6 * 2**30), "/sys/fs/cgroup/memory.current": str(2**30)}
    monkeypatch.setattr(capacity, "_read", lambda p: files.get(str(p)))
    assert capacity.available_memory() == 5 * 2**30
    files["/sys/fs/cgroup/memory.max"] = "max"
    assert capacity.available_memory() == 20 * 2**30


def test_a_session_started_inside_a_worker_runs_one_cluster_at_a_time(pytester: pytest.Pytester) -> None:
    """The machine's slots are the outer session's workers: a test that starts pytest again (the wheel's
    tests, pytester) gets --elr-parallel 1 through its worker's environment."""
    scenarios(pytester, 2)
    pytester.makepyfile(test_env="""
        import os
        def test_a(): assert os.environ.get("PYTEST_ELR_PARALLEL") == "1"
        def test_b(): assert os.environ.get("PYTEST_ELR_PARALLEL") == "1"
    """)
    result = pytester.runpytest_subprocess("--elr-backend=model", "--elr-checker=inline", "--elr-parallel", "2",
                                           "-p", "no:randomly")
    result.assert_outcomes(passed=2 + 2 * 3)
