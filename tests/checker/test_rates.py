"""Loss rates across runs and their Wilson intervals (plain Python: the rollup and the report share them)."""

from __future__ import annotations

import pytest

from pytest_elr.checker.rates import loss_rates, wilson


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    (0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (5, 10, 0.2366, 0.7634), (1, 100, 0.0018, 0.0545)])
def test_wilson_matches_the_published_values(k: int, n: int, low: float, high: float) -> None:
    lo, hi = wilson(k, n)
    assert (round(lo, 4), round(hi, 4)) == (low, high)


def test_wilson_of_no_runs_says_nothing_and_refuses_impossible_counts() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="between 0 and the number of trials"):
        wilson(3, 2)


def test_loss_rates_group_runs() -> None:
    a, b = ("s", "kafka", "4.3.1", "legacy"), ("s", "kafka", "4.3.1", "kafka")
    rates = loss_rates([(a, True), (a, False), (b, False), (a, True)])
    assert [(r.key, r.runs, r.with_loss) for r in rates] == [(b, 1, 0), (a, 3, 2)]
    assert rates[1].label == "s [legacy] kafka 4.3.1" and rates[1].rate == pytest.approx(2 / 3)
