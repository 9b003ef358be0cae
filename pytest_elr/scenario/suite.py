"""A suite: every scenario file under a directory, in a stable order; and the KIP suite this package ships."""

from __future__ import annotations

from pathlib import Path

from pytest_elr.scenario.loader import load_scenario
from pytest_elr.scenario.schema import Scenario

#: The KIP suite. In a checkout ``pytest_elr/scenarios`` links to ``scenarios/`` (its one home); in the
#: wheel it is package data, so ``elr mutants``, ``elr bench suite`` and ``pytest --pyargs
#: pytest_elr.scenarios`` need no checkout.
SHIPPED = Path(__file__).resolve().parents[1] / "scenarios"
#: what names a scenario file, for pytest's collection and for every count of scenario files
SCENARIO_SUFFIXES = (".elr.yaml", ".elr.yml")


class NoScenariosError(Exception):
    """A command needs scenarios and the path it was given holds none: said, never an empty suite."""


def scenario_files(path: Path) -> list[Path]:
    """``path`` itself if it is a file, else the ``*.elr.yaml`` / ``*.elr.yml`` files under it
    (recursively), sorted by path; NoScenariosError when there are none."""
    if path.is_file():
        return [path]
    files = sorted(path.rglob("*.elr.y*ml")) if path.is_dir() else []
    if not files:
        why = "no scenario files (*.elr.yaml)" if path.is_dir() else "no such file or directory"
        raise NoScenariosError(f"{path}: {why}; the KIP suite this package ships is {SHIPPED}")
    return files


def load_suite(directory: Path) -> list[Scenario]:
    """The scenarios of :func:`scenario_files`, loaded."""
    return [load_scenario(p) for p in scenario_files(directory)]
