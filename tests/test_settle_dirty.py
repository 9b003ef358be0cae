"""The settle over the partitions that may still move (issue 27, speed: ``ModelCluster._settle``'s
dirty sets) against the settle of every partition in every round (``full_settle``), the model as it
was: seeded random schedules of every action the model handles, on topics of 1, 3 and 10
partitions under every profile, compared after every action on all that the model shows (observe,
fingerprint, drain, the invariants, the history fields, the whole state of each partition and of the
cluster). A wrong rule for what may be left out is shown caught (``test_a_wrong_dirty_rule_is_caught``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import fields
from typing import Any

import pytest

from pytest_elr.actions import (
    ACTIVE_CONTROLLER,
    ALL_CONTROLLERS,
    Action,
    BeginShutdown,
    CancelReassignment,
    Crash,
    CrashController,
    Cut,
    ElectLeaders,
    Flush,
    ForgedAlterPartition,
    Heal,
    HoldDirAssignments,
    HoldHeartbeats,
    HoldMetadata,
    IsolateController,
    MoveLogDir,
    Pause,
    PowerOff,
    PowerOffController,
    Produce,
    Reassign,
    ReplaceDisk,
    Restart,
    RestartController,
    Resume,
    SetClusterMinIsr,
    SetMinIsr,
    Shutdown,
    ShutdownController,
    Slow,
    UncleanElection,
    Unregister,
    Wait,
)
from pytest_elr.core.nodes import CONTROLLER, isolation_links
from pytest_elr.model import invariants
from pytest_elr.model.cluster import _KEY_MOVED, ModelCluster, ModelError
from pytest_elr.model.profiles import PROFILES, get_profile
from pytest_elr.model.timing import Timing

#: the action kinds the schedules draw from: every action the model handles (checked below)
DRAWN: tuple[type, ...] = (
    BeginShutdown, CancelReassignment, Crash, CrashController, Cut, ElectLeaders, Flush, ForgedAlterPartition, Heal,
    HoldDirAssignments, HoldHeartbeats, HoldMetadata, IsolateController, MoveLogDir, Pause, PowerOff,
    PowerOffController, Produce, Reassign, ReplaceDisk, Restart, RestartController, Resume,
    SetClusterMinIsr, SetMinIsr, Shutdown, ShutdownController, Slow, UncleanElection, Unregister, Wait,
)
STEPS = 40


def test_every_action_is_drawn() -> None:
    assert set(ModelCluster.handled_actions()) - {Action, object} <= set(DRAWN)


def _links(rng: random.Random, brokers: tuple[int, ...]) -> tuple[Any, ...]:
    b = rng.choice(brokers)
    if rng.random() < 0.5:
        return isolation_links(b, rng.choice(("all", "brokers", "controller")), brokers)
    peer: Any = rng.choice([x for x in brokers if x != b] + [CONTROLLER])
    return ((b, peer),) if rng.random() < 0.5 else ((peer, b),)


def draw(rng: random.Random, kind: type, brokers: tuple[int, ...], controllers: int) -> Action:
    b = rng.choice(brokers)
    target: Any = rng.choice([ACTIVE_CONTROLLER, *range(controllers)])
    if kind is Produce:
        return Produce(count=rng.randint(1, 12), acks=rng.choice(("all", "all", "1", "0")))
    if kind in (Cut, Slow):
        return kind(links=_links(rng, brokers))
    if kind is Heal:
        return Heal(links=None) if rng.random() < 0.6 else Heal(links=_links(rng, brokers))
    if kind is PowerOff:
        return PowerOff(brokers=tuple(sorted(rng.sample(brokers, rng.randint(1, 2)))))
    if kind in (SetMinIsr, SetClusterMinIsr):
        return kind(value=rng.randint(1, len(brokers)))
    if kind is UncleanElection:
        return UncleanElection(enabled=rng.random() < 0.5)
    if kind is ElectLeaders:
        return ElectLeaders(election="preferred")
    if kind is Reassign:
        return Reassign(replicas=tuple(rng.sample(brokers, rng.randint(1, len(brokers)))))
    if kind is CancelReassignment:
        return CancelReassignment()
    if kind is ForgedAlterPartition:
        isr = tuple(rng.sample(brokers, rng.randint(0, len(brokers)))) if rng.random() < 0.7 else None
        return ForgedAlterPartition(isr=isr, recovering=rng.random() < 0.3, stale_broker_epoch=rng.random() < 0.2)
    if kind is Wait:
        return Wait(seconds=1)
    if kind is IsolateController:
        return IsolateController(controller=target, scope=rng.choice(("brokers", "controllers", "all")))
    if kind is RestartController:
        return RestartController(controller=rng.choice([ALL_CONTROLLERS, *range(controllers)]))
    if kind in (CrashController, ShutdownController, PowerOffController):
        return kind(controller=target)
    return kind(broker=b)


def build(rng: random.Random, profile: str, partitions: int, brokers: tuple[int, ...],
          controllers: int) -> ModelCluster:
    """Partition i on the brokers rotated by i; some on fewer replicas, so a link cut reaches only some."""
    n = len(brokers)
    rf = [n if i == 0 or rng.random() < 0.6 else rng.randint(1, n) for i in range(partitions)]
    assignments = [[brokers[(i + k) % n] for k in range(rf[i])] for i in range(partitions)]
    return ModelCluster(brokers, assignments[0], rng.randint(1, n), get_profile(profile),
                        controllers=controllers, more_partitions=tuple(assignments[1:]))


def _state(obj: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in fields(obj) if f.name not in skip}


def snapshot(m: ModelCluster) -> dict[str, Any]:
    """All the model shows and holds, but the settle's own bookkeeping."""
    ctx = m.ctx
    out: dict[str, Any] = {
        "observe": m.observe(),
        "fingerprint": m.fingerprint(),
        "invariants": invariants.check(m),
        "within_tolerance": m.within_tolerance(),
        "caught_up_followers": m.caught_up_followers(),
        "cluster": _state(m, ("partitions", "profile", "timing")),
        "ctx": (ctx.min_isr, ctx.unclean_election, ctx.chosen_unclean_elections, ctx.elections,
                ctx.departures, ctx.building_with),
    }
    for i, p in m.partitions.items():
        out[f"p{i}"] = _state(p, ("_key",))
        out[f"p{i}.derived"] = (m.drain(i), m.hwm_covers_committed(i), m.hwm_frozen_since_mark(i),
                                m.maximal_isr(p), m.late_in_sync_candidates(p), m.held_alter(p),
                                [m.ledger_allows(b) for b in m.brokers_ids])
    return out


def _apply(m: ModelCluster, action: Action, script: tuple[int, ...] | None) -> tuple[str, Any]:
    if script is not None:
        m.timing = Timing(script=script)
    try:
        return "ok", m.apply(action)
    except (ModelError, ValueError) as e:
        return type(e).__name__, str(e)
    finally:
        m.timing = None


def step_both(fast: ModelCluster, full: ModelCluster, action: Action, script: tuple[int, ...] | None,
              rng: random.Random, where: str) -> tuple[ModelCluster, ModelCluster]:
    """``action`` on both models (under a Timing with ``script`` if given), then their states compared."""
    got = _apply(fast, action, script), _apply(full, action, script)
    assert got[0] == got[1], f"{where} {action}: the results differ: {got[0]} != {got[1]}"
    if rng.random() < 0.2:  # the executor holds the system's HWM to this state
        for m in (fast, full):
            m.mark_hwm()
    a, b = snapshot(fast), snapshot(full)
    if a != b:
        diff = sorted(k for k in a if a[k] != b[k])
        raise AssertionError(f"{where} {action}: {diff} differ: {[(a[k], b[k]) for k in diff][:1]}")
    if rng.random() < 0.05:  # a fork goes on as the original would
        fast, full = fast.fork(), full.fork()
    return fast, full


def run_schedule(seed: int, profile: str, partitions: int) -> int:
    """One schedule, the fast settle and the full one side by side; returns the steps compared."""
    rng = random.Random(f"{seed}-{profile}-{partitions}")
    brokers = (0, 1, 2) if rng.random() < 0.7 else (0, 1, 2, 3)
    controllers = 1 if rng.random() < 0.6 else 3
    fast = build(random.Random(seed), profile, partitions, brokers, controllers)
    full = build(random.Random(seed), profile, partitions, brokers, controllers)
    full.full_settle = True
    assert snapshot(fast) == snapshot(full), "the new models differ"
    weights = [6 if k is Produce else 2 if k in (Cut, Heal, Wait) else 1 for k in DRAWN]
    for step in range(STEPS):
        action = draw(rng, rng.choices(DRAWN, weights)[0], brokers, controllers)
        # now and then a Timing (as ``Alternatives`` attaches one), with a script of choices
        script = tuple(rng.randint(0, 2) for _ in range(rng.randint(0, 4))) if rng.random() < 0.15 else None
        fast, full = step_both(fast, full, action, script, rng, f"seed {seed} {profile} {partitions} partitions, "
                               f"step {step}")
    return STEPS


SEEDS = range(30)


@pytest.mark.parametrize("partitions", [1, 3, 10])
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_the_dirty_settle_is_the_full_settle(profile: str, partitions: int) -> None:
    assert sum(run_schedule(seed, profile, partitions) for seed in SEEDS) == len(SEEDS) * STEPS


def test_an_assignment_left_for_a_produce() -> None:
    """A broker event in a produce's settle: a new disk's directory assignment that timing left for
    the next action (``_assignment_lands_now``) lands in it, and moves every partition on the broker,
    not only the one produced to."""
    run_assignment_left_for_a_produce()


def run_assignment_left_for_a_produce() -> None:
    rng = random.Random(0)
    models = [ModelCluster((0, 1, 2), [0, 1, 2], 2, get_profile("kafka"), more_partitions=([1, 2, 0], [2, 0, 1]))
              for _ in range(2)]
    models[1].full_settle = True
    fast, full = models
    for action, script in ((Produce(count=6), None), (ReplaceDisk(broker=1), (1,)), (Produce(count=1), None)):
        fast, full = step_both(fast, full, action, script, rng, "assignment left for a produce")
    assert not fast.dir_pending, "the assignment landed in the produce"


def _produce_marks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A produce leaves the partitions it appended to out of the settle."""
    monkeypatch.setattr(ModelCluster, "_mark_dirty", lambda self, ids: None)


def _links_reach_partition_zero_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A link change (cut, slow, heal) settles partition 0 only, as if no other could feel it."""
    original = ModelCluster.apply

    def apply(self: ModelCluster, action: Action) -> Any:
        if self.full_settle or not isinstance(action, (Cut, Slow, Heal)):
            return original(self, action)
        settle = self._settle

        def first_settle() -> None:
            self._dirty = {0}
            del self._settle
            settle()
        self._settle = first_settle  # type: ignore[method-assign]
        try:
            return original(self, action)
        finally:
            self.__dict__.pop("_settle", None)
    monkeypatch.setattr(ModelCluster, "apply", apply)


def _brokers_quiet_across_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker steps of the controller's part (``_broker_events``) skipped in an action's first
    round whenever the round before it, in the last settle, had no broker event -- as if the action
    could not change what they read (a cut, a crash, a restart do)."""
    original_settle, original_round = ModelCluster._settle, ModelCluster._controller_round

    def settle(self: ModelCluster) -> None:
        self.__dict__["_planted_first"] = True
        original_settle(self)

    def controller_round(self: ModelCluster, work: Any = None, quiet: bool = False, quorum: Any = None,
                         fetching: Any = None) -> bool:
        if self.__dict__.pop("_planted_first", False) and not self.full_settle and self.timing is None:
            quiet = self.__dict__.get("_planted_quiet", False)
        event = original_round(self, work, quiet, quorum, fetching)
        self.__dict__["_planted_quiet"] = not event
        return event
    monkeypatch.setattr(ModelCluster, "_settle", settle)
    monkeypatch.setattr(ModelCluster, "_controller_round", controller_round)


def _links_kept_across_every_action(monkeypatch: pytest.MonkeyPatch) -> None:
    """The links' answers of the last settle (``_trips``) kept across every action, as if none
    could cut, heal or slow a link or stop a broker (only a produce and a wait cannot)."""
    original = ModelCluster._settle

    def settle(self: ModelCluster) -> None:
        if not self.full_settle and self._trips is None:
            self._trips = self.__dict__.get("_planted_trips")
        original(self)
        self.__dict__["_planted_trips"] = self._trips
    monkeypatch.setattr(ModelCluster, "_settle", settle)


def _leader_flags_outrun_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader round's change flags as if it changed ``outrun`` alone (``_KEY_MOVED``, not
    ``_MOVES_ON``): a partition whose leader moved its HWM or asked for an ISR change does not run
    the next round (``_settle``'s change flags)."""
    original = ModelCluster._leader_round

    def leader_round(self: ModelCluster, p: Any) -> int:
        changed = original(self, p)
        return changed if self.full_settle or not changed else _KEY_MOVED
    monkeypatch.setattr(ModelCluster, "_leader_round", leader_round)


def _controller_touches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller's part of a round reports no partition touched (``_touched``) without a broker
    event: the partitions whose AlterPartition it answered get no ``note_change`` in the round, and
    their key is not compared unless the rest of the round changed them."""
    original = ModelCluster._controller_round

    def controller_round(self: ModelCluster, *args: Any) -> bool:
        event = original(self, *args)
        if not self.full_settle:
            self._touched = set()
        return event
    monkeypatch.setattr(ModelCluster, "_controller_round", controller_round)


@pytest.mark.parametrize("plant", [_produce_marks_nothing, _links_reach_partition_zero_only,
                                   _brokers_quiet_across_actions, _links_kept_across_every_action,
                                   _leader_flags_outrun_only,
                                   _controller_touches_nothing])
def test_a_wrong_dirty_rule_is_caught(plant: Callable[[pytest.MonkeyPatch], None],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Each planted wrong rule for what the settle may leave out is caught by the comparison.

    Three rules of ``_settle`` kept for exactness are not planted here: run as plants (a broker event
    that does not widen the round to every partition; a partition whose last round changed what the
    fingerprint leaves out not settled first in the next action; a key without that part), none
    changed anything in these schedules (2026-11-27): broker events happen in an action's first
    round, where every partition settles but in a produce's (a directory assignment timing left for
    it: ``test_an_assignment_left_for_a_produce``, where the change is an epoch bump the rounds
    after it do not react to). For the same reason the broker steps skipped in every round after an
    action's first (not only after a quiet round: ``_settle``'s ``quiet``) changed nothing here, run
    as a plant (2026-11-27); skipped in a first round, they are caught (``_brokers_quiet_across_actions``)."""
    plant(monkeypatch)
    with pytest.raises(AssertionError, match="differ"):
        run_assignment_left_for_a_produce()
        for seed in range(30):
            for profile in sorted(PROFILES):
                run_schedule(seed, profile, 3)
