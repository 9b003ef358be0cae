"""Choices the protocol leaves to timing, as the model takes them.

Where a rule gives several legal outcomes (``controller.lagging_leave``: which of several lagging
followers leave the ISR first), the model takes the first (the canonical one) unless a ``Timing``
is attached: then the choices are replayed from ``script`` and, past it, the first option is taken
and the branch point noted in ``open``, so ``model/alternatives.py`` can run every other choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


@dataclass
class Timing:
    #: the option to take at each branch point, in order; past its end the first one
    script: tuple[int, ...] = ()
    #: the options taken so far
    taken: list[int] = field(default_factory=list)
    #: branch points past the script: (the choices that led there, how many options it had)
    open: list[tuple[tuple[int, ...], int]] = field(default_factory=list)

    def choose(self, options: Sequence[T]) -> T:
        if len(options) < 2:
            return options[0]
        at = len(self.taken)
        if at < len(self.script):
            pick = self.script[at]
            if not 0 <= pick < len(options):
                raise ValueError(f"choice {pick} at branch point {at}: only {len(options)} options")
        else:
            pick = 0
            self.open.append((tuple(self.taken), len(options)))
        self.taken.append(pick)
        return options[pick]
