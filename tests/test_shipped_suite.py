"""The KIP suite ships with the package (``pytest_elr/scenarios``, a link to ``scenarios/`` in a
checkout), and every command that needs scenarios refuses a path that holds none instead of testing
an empty suite (an empty suite once made ``elr mutants`` print ``killed 7 / 12``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_elr.scenario.suite import SHIPPED, NoScenariosError, load_suite, scenario_files

ROOT = Path(__file__).resolve().parents[1]


def test_the_shipped_suite_is_the_checkouts_scenarios() -> None:
    assert [p.name for p in scenario_files(SHIPPED)] == sorted(p.name for p in (ROOT / "scenarios").glob("*.elr.yaml"))
    assert SHIPPED.resolve() == (ROOT / "scenarios").resolve()  # one home, no second copy
    assert len(load_suite(SHIPPED)) >= 20


@pytest.mark.parametrize("where", ["empty", "missing"])
def test_no_scenarios_is_an_error_not_an_empty_suite(where: str, tmp_path: Path) -> None:
    path = tmp_path / "empty"
    if where == "empty":
        path.mkdir()
        (path / "notes.yaml").write_text("not: a scenario\n")
    with pytest.raises(NoScenariosError, match="no scenario files" if where == "empty" else "no such file"):
        load_suite(path)


@pytest.mark.parametrize("command", [("mutants", "--examples", "0", "--scenarios"), ("bench", "suite", "--scenarios"),
                                     ("compare", "--schedules", "0"), ("soak", "--suite"), ("bench", "concurrency")])
def test_each_command_that_needs_scenarios_says_it_found_none(command: tuple[str, ...], tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_elr", *command, str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{tmp_path}: no scenario files" in done.stderr and "killed" not in done.stdout


def test_mutants_and_bench_default_to_the_shipped_suite_from_anywhere(tmp_path: Path) -> None:
    """Run from a directory with no ``scenarios/``: the defaults still find the KIP suite."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from pytest_elr.cli import main; "
            "sys.exit(main(sys.argv[2:]))")
    bench = subprocess.run([sys.executable, "-c", code, str(ROOT), "bench", "suite"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert bench.returncode == 0, bench.stderr
    runs = sum(len(s.profiles) for s in load_suite(SHIPPED) if s.runs_on("model"))
    assert f"on the model: {runs} runs" in bench.stdout
    mutants = subprocess.run([sys.executable, "-c", code, str(ROOT), "mutants", "--examples", "0"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
    killed = mutants.stdout.splitlines()[-1]
    assert killed.startswith("killed ") and int(killed.split()[1]) >= 12, mutants.stdout[-2000:] + mutants.stderr
