"""Run directories with any name: each run's events are matched to it by its file's path, which Spark
spells as a percent-encoded URI (``a b%c+d`` is ``a%20b%25c+d``) and the checker decodes in Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_elr.checker.job import check_runs
from pytest_elr.checker.synth import SyntheticHistory, meta, write_history

NAMES = ["plain", "a b", "100%", "x+y", "a%2Bb", "é ü", "#;=&@!~'", "a%20b"]


def _history() -> SyntheticHistory:
    h = SyntheticHistory().send(0, 0).send(1, 1).send(2, 2)
    return h.read(0, "v0").read(2, "v2")  # v1 lost


@pytest.mark.parametrize("name", NAMES)
def test_a_run_with_any_directory_name_is_judged_on_its_own_events(spark: Any, tmp_path: Path, name: str) -> None:
    odd = write_history(tmp_path / name / "run", meta(run_id="odd"), _history().events)
    twin = write_history(tmp_path / "twin", meta(run_id="twin"), SyntheticHistory().send(0, 0).read(0, "v0").events)
    found = check_runs([odd, twin, odd], spark=spark)
    assert [(f.run_id, f.acked, f.read, f.lost_count) for f in found] == [
        ("odd", 3, 2, 1), ("twin", 1, 1, 0), ("odd", 3, 2, 1)]  # the same directory twice: two runs
