"""Rates across runs with their uncertainty: how often a (scenario, profile, Kafka version) lost
acknowledged records, with a Wilson score interval. Plain Python: the rollup (Spark) and the HTML
report (given verdicts) both use it.

Why Wilson: a soak reports 0 of 10 or 10 of 10 as often as anything in between, and the normal
approximation gives a zero-width interval at both ends; Wilson's stays honest there (0 of 10 is
"at most 28 %" at 95 %), and it is what Jepsen-style tallies of rare anomalies use.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

#: a 95 % interval
Z95 = 1.959964


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion of ``k`` in ``n`` trials; (0, 1) when n = 0."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"{k} of {n}: a count must lie between 0 and the number of trials")
    p = k / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


GroupKey = tuple[str | None, str | None, str | None, str | None]  # scenario, backend, kafka_version, profile


@dataclass(frozen=True)
class LossRate:
    """Of ``runs`` runs of one group, ``with_loss`` lost acknowledged acks=all records."""

    key: GroupKey
    runs: int
    with_loss: int

    @property
    def rate(self) -> float:
        return self.with_loss / self.runs if self.runs else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.with_loss, self.runs)

    @property
    def label(self) -> str:
        scenario, backend, version, profile = self.key
        return f"{scenario} [{profile}] {backend}{' ' + version if version else ''}"


def loss_rates(runs: Iterable[tuple[GroupKey, bool]]) -> list[LossRate]:
    """One rate per group, from (group, lost any acknowledged record) per run; sorted by group."""
    counts: dict[GroupKey, list[int]] = {}
    for key, lost in runs:
        tally = counts.setdefault(key, [0, 0])
        tally[0] += 1
        tally[1] += int(lost)
    return [LossRate(key, n, k) for key, (n, k) in sorted(counts.items(), key=lambda kv: tuple(map(str, kv[0])))]
