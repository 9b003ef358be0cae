"""Run a scenario on a backend: actions, eventual expectations, invariants, final verdict.

The executor is the *schedule* of Jepsen's vocabulary: it walks the steps, hands each action to
the backend (the faults and the workload), checks what the backend observes, and ends with the
checker's verdict on the history.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_elr.actions import (
    Action,
    Crash,
    Heal,
    Pause,
    PowerOff,
    Produce,
    ReplaceDisk,
    Restart,
    Resume,
    Shutdown,
    Wait,
)
from pytest_elr.backends.base import Backend
from pytest_elr.backends.model import ModelBackend, build_model
from pytest_elr.checker import Checker, Verdict, inline_checker
from pytest_elr.core.errors import BackendError
from pytest_elr.core.history import History
from pytest_elr.core.observation import FaultBit, LossEvidence, Observation, ProduceOutcome, fault_bit
from pytest_elr.model import invariants
from pytest_elr.model.cluster import ModelCluster, ModelError
from pytest_elr.scenario.schema import Scenario, Step

DEFAULT_STEP_TIMEOUT_S = 60.0
#: how long a real cluster gets to reach the model's predicted state after each fault
SETTLE_TIMEOUT_S = 30.0
POLL_INTERVAL_S = 0.25


class ScenarioFailure(AssertionError):
    """The system did not do what the scenario says. The message is the whole report."""


@dataclass
class StepContext:
    hwm_before: int | None
    produce: ProduceOutcome | None = None
    losses: list[LossEvidence] = field(default_factory=list)
    protocol_errors: list[str] = field(default_factory=list)


@dataclass
class RunResult:
    scenario: str
    path: str
    profile: str
    backend: str
    passed: bool
    message: str
    verdict: Verdict | None
    expected_loss: str
    violations: list[str]
    losses: list[LossEvidence]
    history_dir: Path | None
    duration_s: float

    @property
    def fault_bit(self) -> FaultBit:
        return fault_bit(self.losses)


class Executor:
    def __init__(self, scenario: Scenario, backend: Backend, profile: str, history: History):
        self.scenario = scenario
        self.backend = backend
        self.profile = profile
        self.history = history
        self.expected_loss = scenario.verdict.for_profile(profile)
        self.violations: list[str] = []
        self.losses: list[LossEvidence] = []
        self.stopped: set[int] = set()
        self.paused: set[int] = set()
        self.last_hwm: int | None = None
        # The oracle: the backend's own model, or a shadow model fed the same actions.
        self.model: ModelCluster | None = None
        self._shadow = not isinstance(backend, ModelBackend)

    # --- the run -------------------------------------------------------------------------

    def run(self) -> None:
        s = self.scenario
        self.backend.start(s.cluster, s.topic, self.profile, self.history)
        if isinstance(self.backend, ModelBackend):
            self.model = self.backend.model
        else:
            self.model = build_model(s.cluster, s.topic, self.profile)
        self._observe_and_record()
        start_workload = getattr(self.backend, "start_workload", None)
        if s.workload is not None and start_workload is not None:
            start_workload(s.workload)  # real time: a producer thread for the whole run
        for step in s.steps:
            self._step(step)
        if s.finale:
            self.finale()
        self.history.step = "final"
        drained = self.backend.drain()
        for record in drained:
            self.history.record("consume", partition=0, offset=record.offset, value=record.value,
                                reader="drain")

    def _step(self, step: Step) -> None:
        self.history.step = step.label
        self.history.record("step", phase="begin", line=step.line, note=step.note)
        ctx = StepContext(hwm_before=self.last_hwm)
        workload = self.scenario.workload
        background = workload is not None and self.backend.settles_instantly and workload.per_step
        if background:
            self.apply(Produce(count=workload.per_step, acks=workload.acks), ctx, record=False)  # type: ignore[union-attr,arg-type]
        for action in step.actions:
            self.apply(action, ctx)
        ctx.protocol_errors += self.backend.protocol_errors()
        obs = self.await_expectations(step, ctx)
        self.check_invariants(step, obs)
        if background:
            self.apply(Produce(count=workload.per_step, acks=workload.acks), StepContext(None), record=False)  # type: ignore[union-attr,arg-type]
        self.history.record("step", phase="end")

    def apply(self, action: Action, ctx: StepContext, record: bool = True) -> None:
        if record and not isinstance(action, Produce):
            self.history.record("fault", **action.describe())
        self._track(action)
        result = self.backend.apply(action)
        if self._shadow and self.model is not None:
            try:
                self.model.apply(action)
            except ModelError as exc:
                self.history.record("model_error", message=str(exc))
            if not isinstance(action, (Produce, Wait)):
                self._settle_like_model(action)
        if isinstance(result, ProduceOutcome):
            ctx.produce = result
        elif isinstance(result, list):
            for loss in result:
                ctx.losses.append(loss)
                self.losses.append(loss)
                self.history.record("loss_evidence", **loss.as_event(), after=action.kind)

    def _settle_like_model(self, action: Action) -> None:
        """Let a real cluster converge before the next action, as the model does after each one.

        The model predicts leader, ISR, ELR and fenced brokers; the cluster is polled until it
        agrees or the time is up, with a trickle of acks=1 records while a follower must drop out
        of the ISR for lagging (Kafka only shrinks the ISR of a follower that falls *behind*).
        A disagreement is recorded, not raised: the step's own expectations decide.
        """
        assert self.model is not None
        m = self.model.observe()
        # `held`: a fault that holds a request must have caught one before the next action.
        want = {"leader": m.leader, "isr": frozenset(m.isr), "elr": frozenset(m.elr),
                "fenced": frozenset(m.fenced), "held": frozenset(m.held)}
        # Followers the model has fetched everything: the next fault may depend on it (a leader
        # asks to add a follower to the ISR only once it has caught up).
        caught_up = self.model.caught_up_followers()
        nudge = getattr(self.backend, "nudge", None)

        def check(obs: Observation) -> list[str]:
            differences = compare(want, obs, StepContext(hwm_before=None))
            end = obs.leo.get(obs.leader) if obs.leader is not None else None
            differences += [f"replica {b} has not caught up with leader {obs.leader}"
                            for b in sorted(caught_up) if end is None or obs.leo.get(b) != end]
            # Only a follower that must leave the ISR for lagging (not for being fenced) needs
            # traffic; elsewhere extra records would blur what a lossy shutdown took.
            lagging = set(obs.isr) - want["isr"] - want["fenced"]
            if differences and lagging and nudge is not None:
                nudge()
            return differences

        obs, differences = self._poll(check, self._settle_timeout())
        if differences:
            self.history.record("disagreement", after=action.kind, differences=differences,
                                observed=obs.as_event(), model=m.as_event())

    def _settle_timeout(self) -> float:
        # A backend whose fencing waits for a long session timeout says how long to allow.
        custom = getattr(self.backend, "settle_timeout_s", None)
        return max(SETTLE_TIMEOUT_S, custom()) if custom is not None else SETTLE_TIMEOUT_S

    def _track(self, action: Action) -> None:
        if isinstance(action, (Shutdown, Crash)):
            self.stopped.add(action.broker)
        elif isinstance(action, PowerOff):
            self.stopped |= set(action.brokers)
        elif isinstance(action, (Restart, ReplaceDisk)):
            self.stopped.discard(action.broker)
        elif isinstance(action, Pause):
            self.paused.add(action.broker)
        elif isinstance(action, Resume):
            self.paused.discard(action.broker)

    def finale(self) -> None:
        """Heal every link and bring every broker back, so what survived can be read."""
        self.history.step = "finale"
        ctx = StepContext(hwm_before=self.last_hwm)
        self.apply(Heal(links=None), ctx)
        for broker in sorted(self.paused):
            self.apply(Resume(broker=broker), ctx)
        for broker in sorted(self.stopped):
            self.apply(Restart(broker=broker), ctx)
        if not self.backend.settles_instantly:
            self._poll(lambda obs: [] if obs.leader is not None else ["no leader yet"],
                       DEFAULT_STEP_TIMEOUT_S)
        self._observe_and_record()

    # --- expectations ----------------------------------------------------------------------

    def await_expectations(self, step: Step, ctx: StepContext) -> Observation:
        expected = self._expected(step)
        timeout = step.timeout_s or max(DEFAULT_STEP_TIMEOUT_S, self._settle_timeout())
        obs, mismatches = self._poll(lambda o: compare(expected, o, ctx), timeout)
        self._observe_and_record(obs)
        if mismatches:
            raise ScenarioFailure(self._report(step, mismatches, obs))
        return obs

    def _poll(self, check: Any, timeout: float) -> tuple[Observation, list[str]]:
        deadline = time.monotonic() + timeout
        while True:
            obs = self.backend.observe()
            mismatches = check(obs)
            if not mismatches or self.backend.settles_instantly or time.monotonic() >= deadline:
                return obs, mismatches
            time.sleep(POLL_INTERVAL_S)

    def _expected(self, step: Step) -> dict[str, Any]:
        expected = step.expectations_for(self.profile)
        if step.from_model and self.model is not None:
            m = self.model.observe()
            expected = {
                "leader": m.leader, "isr": frozenset(m.isr), "elr": frozenset(m.elr),
                "last_known_elr": frozenset(m.last_known_elr), "fenced": frozenset(m.fenced),
                **expected,
            }
        return expected

    def _report(self, step: Step, mismatches: list[str], obs: Observation) -> str:
        lines = [
            f"step {step.label} ({self.scenario.path}:{step.line}) on backend "
            f"{self.backend.name}, profile {self.profile}:",
            *(f"  {m}" for m in mismatches),
            f"  observed: {describe(obs)}",
        ]
        if self.model is not None and self._shadow:
            lines.append(f"  model:    {describe(self.model.observe())}")
        return "\n".join(lines)

    def _observe_and_record(self, obs: Observation | None = None) -> Observation:
        obs = obs or self.backend.observe()
        self.history.record("observe", **obs.as_event())
        if obs.hwm is not None and obs.leader is not None and obs.leader not in obs.fenced:
            self.last_hwm = obs.hwm if self.last_hwm is None else max(self.last_hwm, obs.hwm)
        return obs

    # --- invariants --------------------------------------------------------------------------

    def check_invariants(self, step: Step, obs: Observation) -> None:
        found = [str(v) for v in observed_invariants(obs)]
        if self.model is not None:
            found += [str(v) for v in invariants.check(self.model, self._model_hwm_floor())]
        if not found:
            return
        for violation in found:
            self.history.record("violation", message=violation)
        if self.expected_loss == "found":
            self.violations += [f"{step.label}: {v}" for v in found]  # the negative control
            return
        raise ScenarioFailure(
            f"step {step.label} ({self.scenario.path}:{step.line}) on backend {self.backend.name}, "
            f"profile {self.profile}:\n" + "\n".join(f"  {v}" for v in found)
        )

    def _model_hwm_floor(self) -> int | None:
        return len(self.model.committed) if self.model is not None else None


def compare(expected: dict[str, Any], obs: Observation, ctx: StepContext) -> list[str]:
    """Every way the observation differs from the expectations, in words."""
    out: list[str] = []
    for key, want in expected.items():
        if key == "leader":
            if obs.leader != want:
                out.append(f"leader: expected {_b(want)}, observed {_b(obs.leader)}")
        elif key in ("isr", "elr", "last_known_elr", "fenced", "held"):
            got = frozenset(getattr(obs, key))
            if got != want:
                out.append(f"{key}: expected {sorted(want)}, observed {sorted(got)}")
        elif key == "hwm":
            out += _compare_hwm(want, obs, ctx)
        elif key == "recovering" and obs.recovering != want:
            out.append(f"recovering: expected {want}, observed {obs.recovering}")
        elif key == "produce":
            out += _compare_produce(want, ctx.produce)
        elif key == "rejected" and want not in ctx.protocol_errors:
            out.append(f"rejected: expected the controller to answer {want}, "
                       f"saw {ctx.protocol_errors or 'no error'}")
        elif key == "lost":
            bit = {loss.broker for loss in ctx.losses if loss.bit}
            if bit != want:
                detail = ", ".join(f"broker {x.broker}: LEO {x.leo_before} -> {x.leo_after}, "
                                   f"{x.bytes_lost} bytes dropped" for x in ctx.losses)
                out.append(f"lost: expected brokers {sorted(want)} to lose unsynced records, "
                           f"observed {sorted(bit)} ({detail or 'no lossy shutdown'})")
    return out


def _compare_hwm(want: Any, obs: Observation, ctx: StepContext) -> list[str]:
    before, now = ctx.hwm_before, obs.hwm
    if isinstance(want, int):
        return [] if now == want else [f"hwm: expected {want}, observed {now}"]
    if want == "advanced" and not (now is not None and (before is None or now > before)):
        return [f"hwm: expected to advance past {before}, observed {now}"]
    if want == "frozen" and now is not None and before is not None and now > before:
        return [f"hwm: expected frozen at {before}, observed {now}"]
    return []


def _compare_produce(want: dict[str, Any], got: ProduceOutcome | None) -> list[str]:
    if got is None:
        return ["produce: expected a produce outcome, but the step sent nothing"]
    out = []
    if "acked" in want and got.acked != want["acked"]:
        out.append(f"produce: expected {want['acked']} acknowledged, observed {got.acked} "
                   f"(failed: {got.failed or 'none'})")
    if "rejected" in want and want["rejected"] not in got.errors:
        out.append(f"produce: expected rejection {want['rejected']}, observed "
                   f"{sorted(got.errors) or 'no error'} ({got.acked} acknowledged)")
    return out


def observed_invariants(obs: Observation) -> list[str]:
    """Invariants that can be checked on any observation, real or modelled."""
    out = []
    overlap = set(obs.isr) & set(obs.elr)
    if overlap:
        out.append(f"invariant elr_disjoint_from_isr broken: {sorted(overlap)} in both ISR and ELR")
    return out


def describe(obs: Observation) -> str:
    return (f"leader={_b(obs.leader)} isr={list(obs.isr)} elr={list(obs.elr)} "
            f"last_known_elr={list(obs.last_known_elr)} fenced={list(obs.fenced)} hwm={obs.hwm}")


def _b(value: int | None) -> str:
    return "none" if value is None else str(value)


def run_scenario(
    scenario: Scenario, backend: Backend, profile: str, history_root: Path | None = None,
    checker: Checker = inline_checker,
) -> RunResult:
    started = time.monotonic()
    history = History.create(
        history_root, scenario=scenario.name, scenario_file=scenario.path, backend=backend.name,
        profile=profile, kafka_version=getattr(backend, "kafka_version", None),
        topic=scenario.topic.name, min_insync_replicas=scenario.topic.min_insync_replicas,
    )
    executor = Executor(scenario, backend, profile, history)
    verdict: Verdict | None = None
    try:
        executor.run()
        history.end_events()
        verdict = checker(history)
        message = judge(scenario, profile, executor, verdict)
        passed = message is None
    except ScenarioFailure as exc:
        passed, message = False, str(exc)
    except BackendError as exc:
        passed, message = False, f"{scenario.path}: backend {backend.name} failed: {exc}"
    finally:
        try:
            backend.close()
        except Exception as exc:  # a cluster that cannot heal is evicted; say so, keep the verdict
            history.record("backend_error", message=str(exc))
    history.close("passed" if passed else ("error" if verdict is None else "failed"))
    return RunResult(
        scenario=scenario.name, path=scenario.path, profile=profile, backend=backend.name,
        passed=passed, message=message or "", verdict=verdict,
        expected_loss=executor.expected_loss, violations=executor.violations,
        losses=executor.losses, history_dir=history.directory,
        duration_s=time.monotonic() - started,
    )


def judge(scenario: Scenario, profile: str, ex: Executor, verdict: Verdict) -> str | None:
    """None when the run's verdict is the one the scenario expects, else why not."""
    lossy = any(isinstance(a, (PowerOff, ReplaceDisk)) for s in scenario.steps for a in s.actions)
    bit = any(loss.bit for loss in ex.losses)
    head = f"{scenario.path}: verdict on backend {ex.backend.name}, profile {profile}: "
    if lossy and not bit:
        return head + ("the fault did not bite: no lossy shutdown lost any record, so the run "
                       "proves nothing about durability")
    if ex.expected_loss == "none" and verdict.lost_count:
        return head + f"{verdict.lost_count} acknowledged acks=all records lost: {verdict.examples()}"
    if ex.expected_loss == "none" and verdict.fatal:
        return head + f"the {verdict.checker} checker found {verdict.fatal}"
    if ex.expected_loss == "found" and not verdict.lost_count:
        return head + ("negative control: acknowledged records should have been lost, "
                       f"but all {verdict.acked} were read back")
    return None
