"""Histories to report on: real scenario runs on the model backend, made once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_helpers import run_all


@pytest.fixture(scope="session")
def history_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("histories")
    run_all(root)
    return root
