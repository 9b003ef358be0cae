"""What the checker counts besides loss is said in words, with where it is defined -- in the
terminal's verdict table as in the report -- never as a raw ``{'acks1_uncommitted': 34}``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_elr.checker.verdict import ANOMALIES_DOC, ANOMALY_WORDS, FATAL, explain

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def test_every_kind_the_checkers_count_has_words() -> None:
    from pytest_elr.checker.inline import check_history  # the inline checker's kinds are the Spark job's
    assert set(check_history([]).anomalies) <= set(ANOMALY_WORDS)
    assert set(FATAL) <= set(ANOMALY_WORDS)
    assert explain("acks1_uncommitted", 1).startswith("1 record acknowledged with acks=1 or acks=0")
    assert explain("hwm_regression", 2).startswith("2 times a high watermark went back")


def test_the_terminal_says_the_acks1_count_in_words(pytester: pytest.Pytester) -> None:
    shutil.copy(SCENARIOS / "kip966_last_replica_standing.elr.yaml", pytester.path)
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly")
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    assert "acks1_uncommitted" not in out and "{'" not in out, out
    also = [line for line in out.splitlines() if ": also " in line]
    assert also and all("acknowledged with acks=1 or acks=0 and never read" in line and ANOMALIES_DOC in line
                        for line in also), out
