"""``elr soak --suite --parallel 1,2`` / ``elr bench concurrency``: each round runs the suite at every
level, the first level is the baseline of the others' wall time, and a verdict that differs between
levels is flaky. Run on the model backend (the levels are real xdist sessions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_elr.scenario.suite import SHIPPED
from pytest_elr.schedule import soak


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "suite"
    root.mkdir()
    (root / "pytest.ini").write_text("[pytest]\nelr_backend = model\nelr_checker = inline\n")
    for name in ("kip966_last_replica_standing", "kip903_stale_broker_epoch"):
        (root / f"{name}.elr.yaml").write_text((SHIPPED / f"{name}.elr.yaml").read_text())
    monkeypatch.setattr(soak, "_leftovers", lambda: {"containers": 0, "networks": 0, "volumes": 0, "fuse mounts": 0})
    return root


def test_each_level_is_timed_beside_the_first(suite: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert soak.soak_suite(1, [suite], tmp_path / "out", ("1", "2")) == 0
    out = capsys.readouterr().out
    assert "run 1 (--elr-parallel 1):" in out and "run 1 (--elr-parallel 2):" in out
    assert "2 runs of 5 tests: flaky 0, failed in some run 0, left behind 0" in out
    assert "--elr-parallel 2: wall time per run" in out and "x the speed of --elr-parallel 1" in out


def test_a_verdict_that_differs_between_levels_is_flaky(suite: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    read = soak._junit
    calls = []

    def second_level_loses(path: Path) -> dict[str, tuple[str, str, float, int, int]]:
        calls.append(path)
        results = read(path)
        if len(calls) == 2:  # the second level's run: one verdict differs
            key = sorted(results)[0]
            results[key] = ("failed", "loss found (1)", *results[key][2:])
        return results

    monkeypatch.setattr(soak, "_junit", second_level_loses)
    assert soak.soak_suite(1, [suite], tmp_path / "out", ("1", "2")) == 1
    assert "flaky 1" in capsys.readouterr().out


def test_levels_are_auto_or_numbers() -> None:
    assert soak.parse_levels("1, auto,3") == ("1", "auto", "3")
    for bad in ("", "0", "1,two", "-2"):
        with pytest.raises(Exception, match="auto or numbers"):
            soak.parse_levels(bad)
