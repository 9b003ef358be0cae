"""Run a scenario on a backend: actions, eventual expectations, invariants, final verdict.

The executor is the *schedule* of Jepsen's vocabulary: it walks the steps, hands each action to
the backend (the faults and the workload), checks what the backend observes, and ends with the
checker's verdict on the history.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_elr.actions import Action, Heal, Lifecycle, Produce, Restart, Resume
from pytest_elr.backends.base import Backend
from pytest_elr.checker import Checker, Verdict, inline_checker
from pytest_elr.core.errors import BackendError
from pytest_elr.core.history import History
from pytest_elr.core.observation import FaultBit, LossEvidence, Observation, ProduceOutcome, fault_bit
from pytest_elr.model import build_model, invariants
from pytest_elr.model.cluster import ModelCluster, ModelError
from pytest_elr.scenario.schema import Scenario, Step

DEFAULT_STEP_TIMEOUT_S = 60.0
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

    def to_dict(self) -> dict[str, Any]:
        """Plain data (what an xdist worker sends its controller)."""
        out = asdict(self)
        out["verdict"] = self.verdict.to_dict() if self.verdict is not None else None
        out["history_dir"] = str(self.history_dir) if self.history_dir is not None else None
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        verdict = data.get("verdict")
        return cls(**{
            **data,
            "verdict": Verdict.from_dict(verdict) if verdict else None,
            "losses": [LossEvidence(**x) for x in data["losses"]],
            "history_dir": Path(data["history_dir"]) if data.get("history_dir") else None,
        })


class Executor:
    def __init__(self, scenario: Scenario, backend: Backend, profile: str, history: History,
                 progress: Callable[[str], None] | None = None):
        self.scenario = scenario
        #: told one line per step as it ends (live progress in a CI log)
        self.progress = progress
        self.backend = backend
        self.profile = profile
        self.history = history
        self.expected_loss = scenario.verdict.for_profile(profile)
        self.violations: list[str] = []
        self.losses: list[LossEvidence] = []
        #: brokers whose process an action left down or paused (the finale brings them back)
        self.lifecycle: dict[int, Lifecycle] = {}
        self.last_hwm: int | None = None
        # The oracle: the backend's own model, or a shadow model fed the same actions.
        self.model: ModelCluster | None = None
        self._shadow = True
        self._background = False  # the executor sends the workload's records around each step

    # --- the run -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the backend and its oracle: the one start path of YAML runs and the Python API."""
        s = self.scenario
        self.backend.start(s.cluster, s.topic, self.profile, self.history)
        own = self.backend.own_model()
        self._shadow = own is None
        self.model = own if own is not None else build_model(s.cluster, s.topic, self.profile)
        self._observe_and_record()
        if s.workload is not None:
            # Real time: a producer for the whole run, or records sent around every step.
            self._background = not self.backend.start_workload(s.workload) and s.workload.per_step > 0

    def run(self) -> None:
        """Every step, the finale and the final read; a failing step is reported with every other
        failing step at the end (the first one first), so one run shows all that went wrong."""
        s = self.scenario
        if self.model is None:
            self.start()
        failures: list[str] = []
        for step in s.steps:
            try:
                self._step(step)
            except ScenarioFailure as exc:
                failures.append(str(exc))
                self.history.record("step", phase="end", failed=True)
        if s.finale:
            self.finale()
        self.history.step = "final"
        drained = self.backend.drain()
        for record in drained:
            self.history.record("consume", partition=0, offset=record.offset, value=record.value,
                                reader="drain")
        if failures:
            more = f"\n({len(failures)} steps failed)" if len(failures) > 1 else ""
            raise ScenarioFailure("\n".join(failures) + more)

    def _step(self, step: Step) -> None:
        started = time.monotonic()
        try:
            obs = self._run_step(step)
        except ScenarioFailure:
            self._say(step, None, started)
            raise
        self._say(step, obs, started)

    def _say(self, step: Step, obs: Observation | None, started: float) -> None:
        if self.progress is None:
            return
        brokers = self.scenario.cluster.brokers
        did = "; ".join(f"{k} {_flow(v)}" for a in step.actions for item in a.to_yaml(brokers)
                        for k, v in item.items())
        state = describe(obs) if obs is not None else "FAILED"
        self.progress(f"  {step.label:<8} {did or '-'} -> {state} ({time.monotonic() - started:.1f}s)")

    def _run_step(self, step: Step) -> Observation:
        self.history.step = step.label
        self.history.record("step", phase="begin", line=step.line, note=step.note)
        ctx = StepContext(hwm_before=self.last_hwm)
        workload = self.scenario.workload
        background = self._background
        if background:
            self.apply(Produce(count=workload.per_step, acks=workload.acks), ctx, record=False)  # type: ignore[union-attr,arg-type]
        for i, action in enumerate(step.actions):
            line = step.action_lines[i] if i < len(step.action_lines) else step.line
            try:
                self.apply(action, ctx)
            except ModelError as exc:
                raise ScenarioFailure(f"step {step.label} ({self.scenario.path}:{line}): {action.kind}: "
                                      f"the model cannot do it here: {exc}") from None
            except BackendError as exc:
                raise BackendError(f"step {step.label} ({self.scenario.path}:{line}): {action.kind}: "
                                   f"{exc}") from None
        ctx.protocol_errors += self.backend.protocol_errors()
        obs = self.await_expectations(step, ctx)
        self.check_invariants(step, obs)
        if background:
            self.apply(Produce(count=workload.per_step, acks=workload.acks), StepContext(None), record=False)  # type: ignore[union-attr,arg-type]
        self.history.record("step", phase="end")
        return obs

    def apply(self, action: Action, ctx: StepContext, record: bool = True) -> None:
        if record and action.fault:
            self.history.record("fault", **action.describe())
        self.lifecycle.update(action.transitions())
        result = self.backend.apply(action)
        if self._shadow and self.model is not None:
            try:
                self.model.apply(action)
            except ModelError as exc:
                self.history.record("model_error", message=str(exc))
            if action.settles:
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

        def check(obs: Observation) -> list[str]:
            differences = compare(want, obs, StepContext(hwm_before=None))
            end = obs.leo.get(obs.leader) if obs.leader is not None else None
            differences += [f"replica {b} has not caught up with leader {obs.leader}"
                            for b in sorted(caught_up) if end is None or obs.leo.get(b) != end]
            # Only a follower that must leave the ISR for lagging (not for being fenced) needs
            # traffic; elsewhere extra records would blur what a lossy shutdown took.
            lagging = set(obs.isr) - want["isr"] - want["fenced"]
            if differences and lagging:
                self.backend.nudge()
            return differences

        obs, differences = self._poll(check, self.backend.settle_timeout_s())
        if differences:
            self.history.record("disagreement", after=action.kind, differences=differences,
                                observed=obs.as_event(), model=m.as_event())

    def finale(self) -> None:
        """Heal every link and bring every broker back, so what survived can be read."""
        self.history.step = "finale"
        ctx = StepContext(hwm_before=self.last_hwm)
        self.apply(Heal(links=None), ctx)
        for broker, state in sorted(self.lifecycle.items()):
            if state == "paused":
                self.apply(Resume(broker=broker), ctx)
        for broker, state in sorted(self.lifecycle.items()):
            if state == "down":
                self.apply(Restart(broker=broker), ctx)
        if not self.backend.settles_instantly:
            self._poll(lambda obs: [] if obs.leader is not None else ["no leader yet"],
                       DEFAULT_STEP_TIMEOUT_S)
        self._observe_and_record()

    # --- expectations ----------------------------------------------------------------------

    def await_expectations(self, step: Step, ctx: StepContext) -> Observation:
        expected = self._expected(step)
        timeout = step.timeout_s or max(DEFAULT_STEP_TIMEOUT_S, self.backend.settle_timeout_s())
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
        """The first mismatch first, at its expectation's own line (pytest's short summary shows
        the first line), then the rest and both states."""
        key = mismatches[0].split(":", 1)[0]
        line = step.key_lines.get(key, step.line)
        lines = [
            f"step {step.label} ({self.scenario.path}:{line}): {mismatches[0]}",
            *(f"  {m}" for m in mismatches[1:]),
            f"  on backend {self.backend.name}, profile {self.profile}",
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
            f"step {step.label} ({self.scenario.path}:{step.line}): {found[0]}\n"
            + "".join(f"  {v}\n" for v in found[1:])
            + f"  on backend {self.backend.name}, profile {self.profile}"
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


def _flow(value: Any) -> str:
    """A YAML value on one line, as a scenario would write it (``{broker: 0, from: all}``)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False)
    return text.strip().removesuffix("...").strip()


def describe(obs: Observation) -> str:
    return (f"leader={_b(obs.leader)} isr={list(obs.isr)} elr={list(obs.elr)} "
            f"last_known_elr={list(obs.last_known_elr)} fenced={list(obs.fenced)} hwm={obs.hwm}")


def _b(value: int | None) -> str:
    return "none" if value is None else str(value)


class ScenarioRun:
    """One scenario on one backend under one profile, in two phases: ``start`` brings the cluster
    up (what fails there is infrastructure: pytest reports it as an error of the test's setup),
    ``finish`` runs the steps and judges the history (what fails there is the system under test)."""

    def __init__(self, scenario: Scenario, backend: Backend, profile: str, history_root: Path | None = None,
                 checker: Checker = inline_checker, progress: Callable[[str], None] | None = None) -> None:
        self.scenario, self.backend, self.profile, self.checker = scenario, backend, profile, checker
        self.started = time.monotonic()
        self.history = History.create(
            history_root, scenario=scenario.name, scenario_file=scenario.path, backend=backend.name,
            profile=profile, kafka_version=backend.kafka_version,
            topic=scenario.topic.name, min_insync_replicas=scenario.topic.min_insync_replicas,
        )
        self.executor = Executor(scenario, backend, profile, self.history, progress)
        self._closed = False

    def start(self) -> None:
        """Raises BackendError (after closing the run) when the system under test cannot start."""
        try:
            self.executor.start()
        except BackendError as exc:
            self.history.record("backend_error", message=str(exc))
            self.close("error")
            raise

    def finish(self) -> RunResult:
        scenario, backend, history = self.scenario, self.backend, self.history
        verdict: Verdict | None = None
        try:
            self.executor.run()
            history.end_events()
            verdict = self.checker(history)
            message = judge(scenario, self.profile, self.executor, verdict)
            passed = message is None
        except ScenarioFailure as exc:
            passed, message = False, str(exc)
        except BackendError as exc:
            passed, message = False, f"{scenario.path}: backend {backend.name} failed: {exc}"
        finally:
            self._release()
        self.close("passed" if passed else ("error" if verdict is None else "failed"))
        return self.result(passed, message or "", verdict)

    def result(self, passed: bool, message: str, verdict: Verdict | None = None) -> RunResult:
        ex = self.executor
        return RunResult(
            scenario=self.scenario.name, path=self.scenario.path, profile=self.profile, backend=self.backend.name,
            passed=passed, message=message, verdict=verdict, expected_loss=ex.expected_loss,
            violations=ex.violations, losses=ex.losses, history_dir=self.history.directory,
            duration_s=time.monotonic() - self.started,
        )

    def _release(self) -> None:
        try:
            self.backend.close()
        except Exception as exc:  # a cluster that cannot heal is evicted; say so, keep the verdict
            self.history.record("backend_error", message=str(exc))

    def close(self, outcome: str) -> None:
        if not self._closed:
            self._closed = True
            if outcome == "error":
                self._release()
            self.history.close(outcome)


def run_scenario(
    scenario: Scenario, backend: Backend, profile: str, history_root: Path | None = None,
    checker: Checker = inline_checker, progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Start and finish one run; a system that cannot start gives a failed result, not an exception."""
    run = ScenarioRun(scenario, backend, profile, history_root, checker, progress)
    try:
        run.start()
    except BackendError as exc:
        return run.result(False, f"{scenario.path}: backend {backend.name} could not start: {exc}")
    return run.finish()


def judge(scenario: Scenario, profile: str, ex: Executor, verdict: Verdict) -> str | None:
    """None when the run's verdict is the one the scenario expects, else why not."""
    lossy = any(a.lossy for s in scenario.steps for a in s.actions)
    bit = any(loss.bit for loss in ex.losses)
    head = f"{scenario.path}: verdict on backend {ex.backend.name}, profile {profile}: "
    if lossy and not bit:
        return head + ("the fault did not bite: no lossy shutdown lost any record, so the run "
                       "proves nothing about durability")
    if ex.expected_loss == "none" and verdict.lost_count:
        down = sorted(b for b, state in ex.lifecycle.items() if state != "up")
        hint = ""
        if not scenario.finale and down:
            hint = (f" (finale: false left brokers {down} stopped or paused, so the final read could not "
                    "see what only they hold: restart them in a last step, or drop finale: false)")
        return head + f"{verdict.lost_count} acknowledged acks=all records lost: {verdict.examples()}{hint}"
    if ex.expected_loss == "none" and verdict.fatal:
        return head + f"the {verdict.checker} checker found {verdict.fatal}"
    if ex.expected_loss == "found" and not verdict.lost_count:
        return head + ("negative control: acknowledged records should have been lost, "
                       f"but all {verdict.acked} were read back")
    return None
