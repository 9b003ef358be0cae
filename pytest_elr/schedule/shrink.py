"""Delta debugging (Zeller and Hildebrandt's ddmin) over a schedule's actions.

``shrink(actions, fails, budget)`` returns a smaller list for which ``fails`` still holds: first
removing chunks (halves, quarters, ...), then single actions, until no removal keeps the failure or
the budget of ``fails`` calls is spent. On a real cluster each call is a replay (tens of seconds),
so the budget bounds the shrink's time; a candidate the model refuses (an impossible sequence)
costs nothing: ``fails`` answers None for it and it counts as "does not fail".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


@dataclass
class Shrunk:
    items: list  # type: ignore[type-arg]
    #: replays spent (calls of ``fails`` that ran something), and candidates refused before running
    replays: int = 0
    refused: int = 0
    history: list[int] = field(default_factory=list)  # the length after each successful removal


def shrink(items: Sequence[T], fails: Callable[[list[T]], bool | None], budget: int) -> Shrunk:
    """The smallest sub-list of ``items`` (order kept) found within ``budget`` replays that still
    fails. ``fails(candidate)``: True (still fails), False (passes), None (not runnable: refused)."""
    current = list(items)
    out = Shrunk(current)
    n = 2
    while len(current) >= 2 and out.replays < budget:
        chunk = max(1, len(current) // n)
        removed = False
        for start in range(0, len(current), chunk):
            if out.replays >= budget:
                break
            candidate = current[:start] + current[start + chunk:]
            if not candidate:
                continue
            verdict = fails(candidate)
            if verdict is None:
                out.refused += 1
                continue
            out.replays += 1
            if verdict:
                current, removed = candidate, True
                out.history.append(len(current))
                n = max(n - 1, 2)
                break
        if not removed:
            if chunk == 1:
                break  # no single action can go: 1-minimal
            n = min(len(current), n * 2)
    out.items = current
    return out
