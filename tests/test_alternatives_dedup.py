"""``Alternatives.apply`` absorbing a duplicate state as soon as it is run (issue 27, speed: one
fingerprint a state, ``model/alternatives.py``) against the way it was: every state's outcomes
first, then one state a fingerprint. Over seeded random schedules of every action the model handles
(tests/test_settle_dirty.py's), the same states in the same order, with the same results and the
same HWM windows. A dedup that forgets to absorb a duplicate's HWM window is shown caught."""

from __future__ import annotations

import random

import pytest
from test_settle_dirty import DRAWN, build, draw, snapshot

from pytest_elr.actions import Action, Cut, Heal, Produce, Wait
from pytest_elr.core.observation import Result
from pytest_elr.model import alternatives
from pytest_elr.model.alternatives import MAX_HISTORIES, MAX_STATES, Alternatives
from pytest_elr.model.cluster import ModelCluster, ModelError
from pytest_elr.model.profiles import PROFILES
from pytest_elr.model.timing import Timing


def reference_outcomes(model: ModelCluster, action: Action) -> list[tuple[ModelCluster, Result]]:
    """``alternatives.outcomes`` as it was before issue 27's speed pass."""
    before = model.deep_fork()
    model.timing = Timing()
    try:
        result = model.apply(action)
        timing = model.timing
    finally:
        model.timing = None
    out: list[tuple[ModelCluster, Result]] = [(model, result)]
    seen = {model.fingerprint()}
    todo = [(*prefix, k) for prefix, n in timing.open for k in range(1, n)]
    runs = 1
    while todo and runs < MAX_HISTORIES:
        script = todo.pop(0)
        runs += 1
        twin = before.deep_fork()
        twin.timing = Timing(script=script)
        try:
            twin_result = twin.apply(action)
        except ModelError:
            continue
        todo += [(*prefix, k) for prefix, n in twin.timing.open for k in range(1, n)]
        twin.timing = None
        if twin.fingerprint() not in seen:
            seen.add(twin.fingerprint())
            out.append((twin, twin_result))
        else:
            next(state for state, _ in out if state.fingerprint() == twin.fingerprint()).absorb_hwm_window(twin)
    return out


def reference_apply(alts: Alternatives, action: Action) -> list[Result]:
    """``Alternatives.apply`` as it was before issue 27's speed pass."""
    found: list[tuple[ModelCluster, Result]] = []
    for i, state in enumerate(alts.states):
        try:
            found += reference_outcomes(state, action)
        except ModelError:
            if i == 0:
                alts.states = [state]
                raise
    seen: dict[tuple[object, ...], ModelCluster] = {}
    kept: list[tuple[ModelCluster, Result]] = []
    for state, result in found:
        key = state.fingerprint()
        if key in seen:
            seen[key].absorb_hwm_window(state)
        elif len(kept) < MAX_STATES:
            seen[key] = state
            kept.append((state, result))
        else:
            kept[0][0].absorb_hwm_window(state)
    alts.states = [state for state, _ in kept]
    return [result for _, result in kept]


def _step(alts: Alternatives, action: Action, apply: object) -> tuple[str, object]:
    try:
        return "ok", apply(alts, action)  # type: ignore[operator]
    except ModelError as e:
        return "ModelError", str(e)


def run_alternatives(seed: int, profile: str, partitions: int, steps: int = 20) -> int:
    """One schedule on two twin ``Alternatives``, the new apply and the reference; returns the most
    states carried at once."""
    rng = random.Random(f"alt-{seed}-{profile}-{partitions}")
    brokers = (0, 1, 2) if rng.random() < 0.6 else (0, 1, 2, 3)
    controllers = 1 if rng.random() < 0.6 else 3
    new = Alternatives([build(random.Random(seed), profile, partitions, brokers, controllers)])
    old = Alternatives([new.canonical.deep_fork()])
    weights = [6 if k is Produce else 2 if k in (Cut, Heal, Wait) else 1 for k in DRAWN]
    most = 1
    for step in range(steps):
        action = draw(rng, rng.choices(DRAWN, weights)[0], brokers, controllers)
        got = _step(new, action, Alternatives.apply), _step(old, action, reference_apply)
        where = f"seed {seed} {profile} {partitions} partitions, step {step} {action}"
        assert got[0] == got[1], f"{where}: the results differ"
        assert len(new.states) == len(old.states), f"{where}: {len(new.states)} states, were {len(old.states)}"
        for i, (a, b) in enumerate(zip(new.states, old.states, strict=True)):
            assert snapshot(a) == snapshot(b), f"{where}: state {i} differs"
        most = max(most, len(new.states))
        if rng.random() < 0.2:
            for alts in (new, old):
                for state in alts.states:
                    state.mark_hwm()
        if len(new.states) > 8:  # the executor prunes to the states the cluster fits: keep a few
            keep = sorted(rng.sample(range(len(new.states)), 4))
            for alts in (new, old):
                alts.keep(lambda i, _, keep=keep: i in keep)
    return most


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_the_early_dedup_is_the_dedup_it_was(profile: str, partitions: int) -> None:
    most = max(run_alternatives(seed, profile, partitions) for seed in range(6))
    assert most > 1 or profile == "legacy", "no schedule branched: the comparison proves little"


def test_a_dedup_that_forgets_the_states_before_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each state's outcomes deduplicated on their own, the states found from the states before
    forgotten: a duplicate across them is carried twice."""
    original = alternatives._outcomes
    monkeypatch.setattr(alternatives, "_outcomes", lambda model, action, seen: original(model, action, {}))
    with pytest.raises(AssertionError, match="results differ|states, were"):
        for profile in sorted(PROFILES):
            for seed in range(6):
                run_alternatives(seed, profile, 3)
