"""The Python API: script a scenario in a test instead of YAML.

    def test_last_replica_standing(elr_cluster):
        c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2)
        c.produce(10)
        c.isolate(0)
        c.expect(leader=1, isr=[1, 2], elr=[])
        c.power_off(2)
        ...

Every action of the language is a method named as its YAML key, taking the same arguments:
``c.cut(from_=0, to="controller")`` is ``- cut: {from: 0, to: controller}``; one positional
argument is the scalar form (``c.isolate(0)`` is ``- isolate: 0``), several a list
(``c.power_off(1, 2)``), ``c.isolate(0, from_="brokers")`` the mapping with ``broker`` first.
The arguments are read by the same parser as the YAML, so they are validated the same way, and
errors name the calling line. Each call runs on the same executor as a YAML step, and the run is
judged as a scenario is (``judge``: the final read, the proof by presence, the fault that must bite,
the chosen checker) when the test calls :meth:`ClusterHandle.verdict` or, under pytest, when the
test ends. ``acked_loss="found"`` (a scenario's ``verdict: {acked_loss: found}``) declares a
negative control.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_elr.actions import FORMS, Action
from pytest_elr.backends.base import Backend
from pytest_elr.checker import Checker, Verdict, inline_checker
from pytest_elr.core.errors import BackendError, ScenarioError
from pytest_elr.core.limits import MAX_STEP_TIMEOUT_S
from pytest_elr.core.observation import Observation, ProduceOutcome
from pytest_elr.core.specs import ClusterSpec, TopicSpec
from pytest_elr.scenario.executor import RunResult, ScenarioRun, StepContext
from pytest_elr.scenario.loader import actions_from_python, expectation_from_python
from pytest_elr.scenario.schema import ELECTION_COUNTS, LossExpectation, Scenario, Step

_counter = itertools.count()
#: the mapping key one positional argument fills when keyword arguments are given too
_POSITIONAL_KEY = {"isolate": "broker", "produce": "count", "reassign": "replicas", "move_log_dir": "broker",
                   "elect_leaders": "election"}


class ClusterHandle:
    """One run of a scenario scripted in Python: a :class:`ScenarioRun` with no steps of its own,
    whose actions and expectations come from the test's calls."""

    def __init__(self, backend: Backend, profile: str, cluster: ClusterSpec, topic: TopicSpec,
                 history_root: Path | None = None, name: str = "python-api", *,
                 verdict: LossExpectation | None = None, checker: Checker = inline_checker,
                 path: str = "<python>", line: int = 0, start: bool = True, elections: bool = False) -> None:
        scenario = Scenario(
            name=name, path=path, description="", profiles=(profile,), cluster=cluster,
            topic=topic, workload=None, steps=(), verdict=verdict or LossExpectation(), line=line,
        )
        self.brokers = cluster.brokers
        self.cluster = cluster
        self.topic = topic
        self.run = ScenarioRun(scenario, backend, profile, history_root, checker)
        self.history = self.run.history
        self._executor = self.run.executor
        # the counts ``expect(elr_elections=...)`` compares with are read at the start: only if asked
        self._executor.count_elections = elections
        self._ctx = StepContext(hwm_before=None)
        #: the judged run (after :meth:`verdict`, or when the test ended under pytest)
        self.result: RunResult | None = None
        self.started = False
        if start:
            self.start()

    def start(self) -> None:
        """Bring the cluster up; raises BackendError (the run closed) when it cannot start."""
        self.run.start()
        self.started = True
        self._ctx = StepContext(hwm_before=None, epochs_before=dict(self._executor.epochs_seen))

    # --- actions: one method per YAML form ----------------------------------------------------

    def __getattr__(self, form: str) -> Callable[..., Any]:
        if form.startswith("_"):
            raise AttributeError(form)
        if form not in FORMS:  # a typo of an action: say so at the caller's line
            actions_from_python(form, None, self.brokers, _caller())

        def do(*args: Any, **kwargs: Any) -> ProduceOutcome | None:
            where = _caller()
            for action in actions_from_python(form, _arguments(form, args, kwargs, where), self.brokers, where,
                                              self.topic.partitions):
                self._apply(action, where)
            return self._ctx.produce if form == "produce" else None

        do.__name__ = form
        return do

    def do(self, action: Action) -> None:
        """Apply an action built in Python (e.g. by a generator of your own)."""
        self._apply(action, _caller())

    def _apply(self, action: Action, where: tuple[str, int]) -> None:
        self._refuse_after_verdict(action.kind, where)
        # The loader refuses impossible sequences before a YAML run; a script learns at the call.
        problem = action.refused_by(self.cluster) or action.refused_in(self._executor.lifecycle)
        if problem is not None:
            raise ScenarioError(f"{action.kind}: {problem}", *where)
        if action.lossy:
            # What a lossy action may take is read first, so its loss is proved by presence (a
            # YAML run reads at each step's end; a script has steps only where it calls expect).
            self._executor.read_for_presence(f"line {where[1]}", self._executor.backend.observe())
        try:
            self._executor.apply(action, self._ctx)
        except ScenarioError as exc:  # a target the call cannot be done on when it runs: at the caller's line
            raise ScenarioError(exc.message, *where) from None

    def _refuse_after_verdict(self, what: str, where: tuple[str, int]) -> None:
        if self.result is not None:
            raise ScenarioError(f"{what}: the run was already judged (verdict() heals, reads back and "
                                "closes the cluster): call it last", *where)

    # --- observation ---------------------------------------------------------------------------

    def observe(self) -> Observation:
        return self._executor.backend.observe()

    def unsynced(self) -> dict[int, int]:
        """What each broker would lose to a power off right now (bytes on real Kafka, records on
        the model)."""
        return self._executor.backend.unsynced_bytes()

    def expect(self, timeout: float | None = None, **expected: Any) -> Observation:
        """Wait until the partition looks as described (leader=, isr=, elr=, last_known_elr=,
        fenced=, hwm=, produce=, rejected=, lost=, recovering=, leader_epoch=, partition_epoch=,
        replicas=, adding=, removing=, active_controller=, elr_elections=, unclean_elections= --
        elections since the start, on a handle made with ``elections=True``; partitions= scopes the
        per-partition keys: ``{2: {...}, (1, 3): {...}, "preferred 0": {...}, "all": {"leader":
        "preferred", "isr": "assigned"}}``, docs/language.md); raise ScenarioFailure if not. Like a
        YAML step's end: the invariants are checked and what became readable is read."""
        where = _caller()
        self._refuse_after_verdict("expect", where)
        checks = expectation_from_python(expected, self.brokers, where, self.cluster.controllers,
                                         self.topic.assignment)
        counted = [key for key in ELECTION_COUNTS if key in checks]
        if counted and not self._executor.count_elections:
            raise ScenarioError(f"expect: {counted[0]} counts elections since the start, which were not read "
                                f"there: make the cluster with elr_cluster(..., elections=True)", *where)
        if timeout is not None and not 0 < timeout <= MAX_STEP_TIMEOUT_S:
            raise ScenarioError(f"expect: timeout must be more than 0 and at most {MAX_STEP_TIMEOUT_S:g}s, "
                                f"got {timeout!r}", *where)
        label = f"expect-{next(_counter)}"
        step = Step(label=label, line=where[1], actions=(), expect=checks, timeout_s=timeout)
        self._ctx.protocol_errors += self._executor.backend.protocol_errors()
        obs = self._executor.await_expectations(step, self._ctx)
        self._executor.check_invariants(step, obs)
        self._executor.read_for_presence(f"line {where[1]}", obs)
        self._ctx = StepContext(hwm_before=self._executor.last_hwm, epochs_before=dict(self._executor.epochs_seen))
        return obs

    # --- the verdict ---------------------------------------------------------------------------

    def finish(self) -> RunResult:
        """Judge the run as a YAML run is judged (once): heal and restart everything, read the
        partition back, check the final read, prove losses by presence, run the checker and hold
        its verdict to the declared one. The cluster is released. Raises BackendError when the
        backend failed (an error of the harness, not a verdict)."""
        if self.result is None:
            self.result = self.run.finish()
            if self.run.broken:
                raise BackendError(self.result.message)
        return self.result

    def verdict(self) -> Verdict:
        """The checker's verdict on the acks=all records (see :meth:`finish`). Whether the run
        passed -- the verdict is the one declared, the fault bit, the loss is proved -- is
        ``result.passed``; under pytest a run that did not pass fails its test."""
        verdict = self.finish().verdict
        if verdict is None:  # the run failed before a checker judged it
            raise BackendError(self.finish().message)
        return verdict

    def close(self) -> None:
        """Release the cluster without a verdict, unless the run was judged already."""
        if self.result is None:
            self.run.close("closed")


def _arguments(form: str, args: tuple[Any, ...], kwargs: dict[str, Any], where: tuple[str, int]) -> Any:
    """Python arguments as the YAML value of ``- <form>: <value>``."""
    kwargs = {k.rstrip("_"): v for k, v in kwargs.items()}  # from_ -> from
    if kwargs:
        if len(args) > 1 or (args and form not in _POSITIONAL_KEY):
            raise ScenarioError(f"{form}: give keyword arguments, or one positional "
                                f"{_POSITIONAL_KEY.get(form, 'argument')} with them, not several", *where)
        return {_POSITIONAL_KEY[form]: args[0], **kwargs} if args else kwargs
    if len(args) > 1:
        return list(args)
    if args:
        return args[0]
    return "all" if form == "heal" else None


def _caller() -> tuple[str, int]:
    """The file and line of the test that called the API (the first frame outside this module)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "<python>", 0
    return frame.f_code.co_filename, frame.f_lineno
