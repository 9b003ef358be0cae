"""``ModelCluster.fork`` (issue 27, speed: the timing alternatives fork a 50-partition model tens of
times after a fault) against ``deep_fork`` (``copy.deepcopy``, what ``fork`` was): over seeded
random schedules of every action the model handles (tests/test_settle_dirty.py's), a fork is equal
to the deep copy in everything the model shows and holds, shares no mutable object with its
original, and goes on as the deep copy does. A fork that forgets to copy a container, or shares a
pending request's sends, is shown caught (``test_a_shallow_fork_is_caught``)."""

from __future__ import annotations

import random
import types
from collections.abc import Callable
from typing import Any

import pytest
from test_settle_dirty import DRAWN, _apply, build, draw, snapshot

from pytest_elr.actions import Cut, Heal, Produce, Slow, Wait
from pytest_elr.core.nodes import CONTROLLER
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.partition import ModelPartition, Send
from pytest_elr.model.profiles import PROFILES, Profile
from pytest_elr.model.state import AlterPartition, PartitionView, Record

#: what a fork may share with its original: immutable objects (a finished ``Send`` is never written
#: again: ``ModelCluster._complete`` writes a pending request's alone)
IMMUTABLE = (int, str, float, bool, type(None), tuple, frozenset, Record, AlterPartition, PartitionView, Profile,
             types.FunctionType, type)


def reachable(root: Any) -> dict[int, Any]:
    """Every object reachable from ``root`` through attributes and containers, by id; the profile
    not entered (shared by design), nor ``ModelPartition._key`` (a tuple only ever compared and
    replaced whole: ``ModelCluster._settle``)."""
    seen: dict[int, Any] = {}
    stack = [root]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen[id(o)] = o
        if isinstance(o, (Profile, types.FunctionType, type)):
            continue
        if isinstance(o, types.MethodType):
            stack.append(o.__self__)
        elif isinstance(o, dict):
            stack += [*o.keys(), *o.values()]
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack += list(o)
        elif hasattr(o, "__dict__"):
            stack += [v for k, v in vars(o).items() if not (isinstance(o, ModelPartition) and k == "_key")]
    return seen


def shared_mutables(a: ModelCluster, b: ModelCluster) -> list[str]:
    ours = reachable(a)
    return [f"{type(o).__name__} {o!r:.80}" for i, o in reachable(b).items()
            if i in ours and not isinstance(o, IMMUTABLE) and not (isinstance(o, Send) and o.status != "pending")]


def check_fork(m: ModelCluster, where: str) -> None:
    fork, deep = m.fork(), m.deep_fork()
    assert snapshot(fork) == snapshot(deep) == snapshot(m), f"{where}: the fork differs from the deep copy"
    shared = shared_mutables(m, fork)
    assert not shared, f"{where}: the fork shares mutable objects with its original: {shared[:3]}"
    for method in ("_is_unfenced", "_broker_epoch", "_log_info", "_has_online_dir"):
        bound = getattr(fork.ctx, {"_is_unfenced": "is_unfenced", "_broker_epoch": "broker_epoch",
                                   "_log_info": "log_info", "_has_online_dir": "has_online_dir"}[method])
        assert bound.__self__ is fork, f"{where}: the fork's controller context asks the original ({method})"


def run_forks(seed: int, profile: str, partitions: int) -> None:
    rng = random.Random(f"fork-{seed}-{profile}-{partitions}")
    brokers = (0, 1, 2) if rng.random() < 0.7 else (0, 1, 2, 3)
    controllers = 1 if rng.random() < 0.6 else 3
    m = build(random.Random(seed), profile, partitions, brokers, controllers)
    deep = m.deep_fork()
    weights = [6 if k is Produce else 2 if k in (Cut, Heal, Wait) else 1 for k in DRAWN]
    for step in range(30):
        where = f"seed {seed} {profile} {partitions} partitions, step {step}"
        action = draw(rng, rng.choices(DRAWN, weights)[0], brokers, controllers)
        script = tuple(rng.randint(0, 2) for _ in range(rng.randint(0, 4))) if rng.random() < 0.15 else None
        got = _apply(m, action, script), _apply(deep, action, script)
        assert got[0] == got[1], f"{where} {action}: the results differ: {got[0]} != {got[1]}"
        if rng.random() < 0.2:
            m.mark_hwm()
            deep.mark_hwm()
        assert snapshot(m) == snapshot(deep), f"{where} {action}: the fork chain left the deep copies"
        check_fork(m, f"{where} {action}")
        if rng.random() < 0.3:  # go on on a fork (and its twin a deep copy), the original dropped
            m, deep = m.fork(), deep.deep_fork()


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_a_fork_is_the_deep_copy(profile: str, partitions: int) -> None:
    for seed in range(8):
        run_forks(seed, profile, partitions)


def test_a_fork_keeps_a_pending_produce_whole() -> None:
    """An acks=all produce pending (the followers cut from their leader, whose AlterPartition the
    controller does not get): the fork's requests, sends and outcome are its own, one
    outcome for the requests of every partition (as ``copy.deepcopy`` keeps it), and completing
    them in the fork leaves the original's pending."""
    m = ModelCluster((0, 1, 2), [0, 1, 2], 2, PROFILES["kafka"], more_partitions=([0, 2, 1], [0, 1, 2]))
    m.apply(Slow(links=((0, CONTROLLER),)))
    m.apply(Cut(links=((1, 0), (0, 1), (2, 0), (0, 2))))
    outcome = m.apply(Produce(count=6))
    assert outcome.pending, "the produce waits"
    check_fork(m, "pending produce")
    fork = m.fork()
    outcomes = {id(req.outcome) for p in fork.partitions.values() for req in p.pending_produce}
    assert len(outcomes) == 1 and outcomes != {id(outcome)}
    fork.apply(Heal(links=None))
    assert all(not p.pending_produce for p in fork.partitions.values())
    assert [s.status for _, s in fork.send_log] != [s.status for _, s in m.send_log]
    assert outcome.pending == 6 and all(s.status == "pending" for _, s in m.send_log)


def _partition_fork_shares_outrun(monkeypatch: pytest.MonkeyPatch) -> None:
    """A partition's fork forgets one container (``outrun``)."""
    original = ModelPartition.fork

    def fork(self: ModelPartition, shared: dict[int, object]) -> ModelPartition:
        new = original(self, shared)
        new.outrun = self.outrun
        return new
    monkeypatch.setattr(ModelPartition, "fork", fork)


def _pending_sends_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    """A partition's fork shares the sends of its pending requests."""
    original = ModelPartition.fork

    def fork(self: ModelPartition, shared: dict[int, object]) -> ModelPartition:
        new = original(self, shared)
        for mine, theirs in zip(new.pending_produce, self.pending_produce, strict=True):
            mine.sends = theirs.sends
        return new
    monkeypatch.setattr(ModelPartition, "fork", fork)


@pytest.mark.parametrize("plant", [_partition_fork_shares_outrun, _pending_sends_shared])
def test_a_shallow_fork_is_caught(plant: Callable[[pytest.MonkeyPatch], None],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    plant(monkeypatch)
    with pytest.raises(AssertionError, match="shares mutable objects"):
        test_a_fork_keeps_a_pending_produce_whole()
