"""A suite: every scenario file under a directory, in a stable order."""

from __future__ import annotations

from pathlib import Path

from pytest_elr.scenario.loader import load_scenario
from pytest_elr.scenario.schema import Scenario


def load_suite(directory: Path) -> list[Scenario]:
    """The ``*.elr.yaml`` / ``*.elr.yml`` files under ``directory`` (recursively), sorted by path."""
    files = sorted(p for p in directory.rglob("*.elr.y*ml"))
    return [load_scenario(p) for p in files]
