"""Every state the protocol allows, where the model's one answer is a choice that timing makes.

The model is deterministic: when several followers lag at once its leader removes them in one
ISR change. A real leader judges each follower's lag on its own, so it may remove them one at a
time, in either order (``controller.lagging_leave``), and which of them lands in the ELR depends
on that order. ``Alternatives`` keeps the set of states the actions so far may have led to, the
canonical one first; the executor prunes it to the states consistent with what the cluster shows
(a linearizability checker pruning its candidate states). A difference is reported only when no
state fits, and then against the canonical state, as before.

Bounds: a branch point gives at most ``2**MAX_CONCURRENT_LEAVES - 1`` first choices (4 followers:
75 histories, 24 of them one at a time), at most ``MAX_HISTORIES`` histories are run per action
and state, states that look the same (the settle fingerprint) are kept once, and at most
``MAX_STATES`` states are carried (the canonical first; the rest in the order found).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_elr.actions import Action
from pytest_elr.core.observation import Result
from pytest_elr.model.cluster import ModelCluster, ModelError
from pytest_elr.model.timing import Timing

MAX_STATES = 64
MAX_HISTORIES = 512


def outcomes(model: ModelCluster, action: Action) -> list[tuple[ModelCluster, Result]]:
    """``action`` on ``model`` (in place: the canonical outcome, its errors raised as ever) and on
    copies of it under every other choice timing may make; each distinct state once, with the
    action's result."""
    return [(state, result) for state, result, _ in _outcomes(model, action, {})]


def _outcomes(model: ModelCluster, action: Action, seen: dict[tuple[object, ...], ModelCluster]
              ) -> list[tuple[ModelCluster, Result, tuple[object, ...]]]:
    """``outcomes``, each with its fingerprint (computed once a state). ``seen``: the states found
    so far by fingerprint, this call's added: a state that looks like one of them is absorbed into it
    (``ModelCluster.absorb_hwm_window``) and not returned -- ``Alternatives.apply`` passes the states
    of the states before, so a twin is judged a duplicate as soon as it is run."""
    before = model.fork()
    model.timing = Timing()
    try:
        result = model.apply(action)
        timing = model.timing
    finally:
        model.timing = None
    out: list[tuple[ModelCluster, Result, tuple[object, ...]]] = []

    def keep(state: ModelCluster, state_result: Result) -> None:
        """A new state is returned; a twin of one seen is absorbed into it."""
        key = state.fingerprint()
        if key in seen:
            seen[key].absorb_hwm_window(state)
        else:
            seen[key] = state
            out.append((state, state_result, key))

    keep(model, result)
    todo = [(*prefix, k) for prefix, n in timing.open for k in range(1, n)]
    runs = 1
    while todo and runs < MAX_HISTORIES:
        script = todo.pop(0)
        runs += 1
        twin = before.fork()
        twin.timing = Timing(script=script)
        try:
            twin_result = twin.apply(action)
        except ModelError:
            continue  # this order leads where the action cannot be done: not a history
        todo += [(*prefix, k) for prefix, n in twin.timing.open for k in range(1, n)]
        twin.timing = None
        keep(twin, twin_result)
    return out


@dataclass
class Alternatives:
    """The states the model allows after the actions so far, the canonical one first."""

    states: list[ModelCluster]

    @property
    def canonical(self) -> ModelCluster:
        return self.states[0]

    def apply(self, action: Action) -> list[Result]:
        """Apply ``action`` to every state; returns each resulting state's result, in order. The
        canonical state's ModelError is raised (the others' drop that state)."""
        # Each state once by its fingerprint, the first found (``_outcomes`` absorbs the others into
        # it as it finds them: the same states and HWM windows as absorbing them here, in this order).
        seen: dict[tuple[object, ...], ModelCluster] = {}
        found: list[tuple[ModelCluster, Result, tuple[object, ...]]] = []
        for i, state in enumerate(self.states):
            try:
                found += _outcomes(state, action, seen)
            except ModelError:
                if i == 0:
                    self.states = [state]
                    raise
        kept = [(state, result) for state, result, _ in found[:MAX_STATES]]
        for state, _, _ in found[MAX_STATES:]:
            kept[0][0].absorb_hwm_window(state)  # a state past the bound still counts for the HWM
        self.states = [state for state, _ in kept]
        return [result for _, result in kept]

    def keep(self, fits: Callable[[int, ModelCluster], bool]) -> bool:
        """Keep the states that ``fits`` (given each state's index and the state); when none does,
        keep them all and say so (False): the difference is then against the canonical state."""
        kept = [s for i, s in enumerate(self.states) if fits(i, s)]
        if not kept:
            return False
        self.states = kept
        return True
