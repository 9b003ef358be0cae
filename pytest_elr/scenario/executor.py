"""Run a scenario on a backend: actions, the oracle, eventual expectations, invariants, verdict.

The executor is the *schedule* of Jepsen's vocabulary: it walks the steps, hands each action to
the backend (the faults and the workload), checks what the backend observes, and ends with the
checker's verdict on the history.

Unless the backend is the model, the system is held to the model after every action: each fault
is followed by a settle (polled until every field the backend observes agrees with the model's
prediction, or the settle timeout passes; the HWM against the model's bounds, there and at every
step's end) and each produce's outcome is compared with the model's, record by record. A
difference that persists fails the step with both states, unless the step (``differs:``) or the
profile (``Profile.deviations``) declares it with a reason; declared differences that occurred
are kept in the history and the result.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from pytest_elr.actions import (
    ALL_CONTROLLERS,
    Action,
    Heal,
    Lifecycle,
    Produce,
    Restart,
    RestartController,
    Resume,
    SetMinIsr,
    StopController,
)
from pytest_elr.backends.base import Backend, LagChurn
from pytest_elr.checker import Checker, Verdict, inline_checker
from pytest_elr.core.errors import BackendError, ScenarioError
from pytest_elr.core.history import History
from pytest_elr.core.nodes import LEADER_OF, partition_led
from pytest_elr.core.observation import (
    FaultBit,
    LossEvidence,
    Observation,
    ProduceOutcome,
    Read,
    Refusal,
    Result,
    fault_bit,
)
from pytest_elr.core.outcomes import OUTCOMES, error_name
from pytest_elr.model import build_model, invariants
from pytest_elr.model.alternatives import Alternatives
from pytest_elr.model.cluster import ModelCluster, ModelError
from pytest_elr.model.controller import effective_min_isr
from pytest_elr.model.profiles import Profile, get_profile
from pytest_elr.scenario.schema import (
    ANY_CONTROLLER,
    BROKER_SET_KEYS,
    ELECTION_COUNTS,
    PARTITIONS,
    UNCHANGED,
    Failure,
    KnownFailure,
    OneOf,
    Scenario,
    Step,
    unexplained,
)
from pytest_elr.workload.drain import max_acked_offset

DEFAULT_STEP_TIMEOUT_S = 60.0
POLL_INTERVAL_S = 0.25
#: the fields of an observation the model predicts after every fault; ``hwm`` is held to bounds,
#: not to the model's value (``Executor._hwm_differences``); the leader epoch is counted from the
#: start (``Executor._epoch_base``), the partition epoch held to whether it moved (``_moved``)
STATE_FIELDS = ("leader", "isr", "elr", "last_known_elr", "fenced", "held", "recovering",
                "leader_epoch", "partition_epoch", "hwm", "replicas", "adding", "removing")
#: the epochs of the partition record
EPOCHS = ("leader_epoch", "partition_epoch")
#: the fields whose values say where the cluster rests (the HWM and the log ends move with the
#: background producer's records; the election counts are read apart)
RESTING_FIELDS = tuple(f for f in STATE_FIELDS if f != "hwm")
#: how long a settle awaits a resting state before it keeps a moment at which a slow follower is
#: back in the ISR (``Executor._settle_like_model``): one take-back-and-drop cycle, measured <= 6.5 s
LATE_IN_SYNC_CYCLE_S = 8.0
#: why a partition epoch that moved (or not) against the model is no failure while a slow follower
#: sits at the frozen HWM (``ModelCluster.late_in_sync_candidates``)
OSCILLATING_EPOCH = ("a slow follower at the frozen HWM is taken back into the ISR and dropped in turn, an ISR "
                     "change each: whether one falls within the step is timing",
                     "docs/model.md, Timing: a slow follower at the frozen HWM")
#: why a partition epoch that moved where the model's did not is no failure when the leader's own
#: log shows ISR shrinks for lag, each undone (``Backend.lag_churn``): a follower starved of CPU for
#: longer than replica.lag.time.max.ms leaves the ISR and comes back with no fault (CI, 2026-11-28:
#: ISR [1, 2, 3] before and after a flush, partition epoch 0 -> 2); the model has no clock
LAG_CHURN = ("a follower that lagged on its own (behind the leader's end, not caught up for longer than "
             "replica.lag.time.max.ms: the leader's own log) left the ISR and came back",
             "Kafka Partition.maybeShrinkIsr / ReplicaState.isCaughtUp; docs/model.md, Timing")
#: how far before a mark the leaders' logged ISR shrinks are counted: the mark's observation was
#: read a moment before it is set
MARK_SLACK_S = 2.0
#: how far before the previous read of the controllers' refusals their lines are read again: a line
#: is written a moment after the refusal it counts
REFUSAL_READ_SLACK_S = 1.0
#: how long the election counts may lag the state a step awaited (the controller marks its meters
#: when it publishes the committed records, as the brokers learn them)
ELECTION_COUNTS_WAIT_S = 10.0
#: lost records named in one loss_evidence event (the count is always complete)
MAX_NAMED_LOSSES = 20


class ScenarioFailure(AssertionError):
    """The system did not do what the scenario says. The message is the whole report; ``failures``
    the same in structured form (which step, which field or invariant), what known failures match."""

    def __init__(self, message: str, failures: tuple[Failure, ...] = ()) -> None:
        super().__init__(message)
        self.failures = failures


class ObservedViolation(str):
    """The words of an invariant broken on the observed state, with the invariant's name."""

    invariant: str

    def __new__(cls, invariant: str, text: str) -> ObservedViolation:
        self = super().__new__(cls, text)
        self.invariant = invariant
        return self


@dataclass(frozen=True)
class Difference:
    """A field in which the system and the model disagree after an action, once the system had
    time to settle; ``reason`` and ``source`` when the scenario or the profile declares it."""

    step: str
    after: str  # the action's kind
    line: int | None  # the action's line in the scenario
    field: str
    observed: Any
    model: Any
    observed_state: str  # both whole states when it was seen (describe())
    model_state: str
    reason: str | None = None
    source: str | None = None
    #: the partition it is in (a one-partition topic's differences are all partition 0's)
    partition: int = 0

    def __str__(self) -> str:
        where = f"partition {self.partition}: " if self.partition else ""
        return f"{where}{self.field}: model {_show(self.model)}, observed {_show(self.observed)}"

    def as_dict(self) -> dict[str, Any]:
        out = {k: _plain(v) for k, v in asdict(self).items()}
        if not self.partition:
            del out["partition"]  # a one-partition topic's history stays as it was
        return out


@dataclass
class StepContext:
    hwm_before: int | None
    #: the epochs and the active controller observed at the previous step's end (``leader_epoch:
    #: unchanged``, ``active_controller: unchanged`` compare with them)
    epochs_before: dict[str, int | None] = field(default_factory=dict)
    produce: ProduceOutcome | None = None  # the step's last produce (a mapping ``produce:`` expectation)
    produces: list[ProduceOutcome] = field(default_factory=list)  # every produce, in order
    losses: list[LossEvidence] = field(default_factory=list)
    protocol_errors: list[str] = field(default_factory=list)
    #: the step's operator requests the controller refused (``refused:``), in order
    refusals: list[Refusal] = field(default_factory=list)
    #: undeclared differences from the model: each fails the step
    differences: list[Difference] = field(default_factory=list)
    #: the system's election counts since the start, read where the step names one
    elections: dict[str, int | None] = field(default_factory=dict)


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
    #: differences from the model: undeclared (each failed its step) and declared (with reasons)
    disagreements: list[dict[str, Any]] = field(default_factory=list)
    declared: list[dict[str, Any]] = field(default_factory=list)
    #: acknowledged acks=all records an earlier read saw and the final read did not
    lost_by_presence: list[dict[str, Any]] = field(default_factory=list)
    #: the profile's documented differences from the KIP this run relied on (a pass by one of them
    #: is a pass of Kafka's rule, not the KIP's: the verdict table and the report say so)
    departures: list[dict[str, Any]] = field(default_factory=list)
    #: the release under test (None: the backend has none) and, when the scenario declares this
    #: release a known failure, why (the run is then expected to fail)
    kafka_version: str | None = None
    known_failure: str = ""
    #: what failed, structured (empty when the run passed or the backend failed)
    failures: list[Failure] = field(default_factory=list)

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
            "failures": [Failure(**f) for f in data.get("failures", [])],
        })


@dataclass(frozen=True)
class Seen:
    """Where a read before the end found a record."""

    offset: int
    step: str
    leader: int | None
    partition: int = 0


class Executor:
    def __init__(self, scenario: Scenario, backend: Backend, profile: str, history: History,
                 progress: Callable[[str], None] | None = None, oracle: Profile | None = None):
        self.scenario = scenario
        #: the shadow model's profile when not ``profile``'s own (``elr explore`` plants a mutant)
        self.oracle = oracle
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
        #: a controller was crashed (the finale restarts every stopped controller)
        self.controller_crashed = False
        #: every known HWM the cluster reported at a step's end, in order (label, HWM)
        self.hwm_seen: list[tuple[str, int]] = []
        self.min_isr = scenario.topic.min_insync_replicas
        # The oracle: the backend's own model, or a shadow model fed the same actions.
        self.model: ModelCluster | None = None
        #: a shadow oracle's states allowed so far (where timing decides, several); ``model`` is
        #: the first of them, the canonical one unless the cluster showed another
        self.alternatives: Alternatives | None = None
        self._shadow = True
        self._background = False  # the executor sends the workload's records around each step
        self.disagreements: list[Difference] = []
        self.declared: list[Difference] = []
        #: read the system's election counts at the start (``Backend.election_counts``): a step names
        #: one, or the Python API asked (``elr_cluster(elections=True)``); None: not read
        self.count_elections = any(set(step.expectations_for(profile)) & set(ELECTION_COUNTS)
                                   for step in scenario.steps)
        self._elections_at_start: dict[str, int] | None = None
        # The step being run: its label and declared differences, for the settle after each action.
        self._step: Step | None = None
        self._line: int | None = None
        #: records reads before the end saw (value -> where), for the proof of loss by presence
        self.seen: dict[str, Seen] = {}
        #: the step's expectations and what was observed for each (the step's end event carries them)
        self._judged: dict[str, Any] = {}
        #: per partition, how far reads before the end got
        self._read_to: dict[int, int] = {}
        self.lost_by_presence: list[dict[str, Any]] = []
        #: the profile's differences from the KIP the oracle relied on, each once, in order
        self.departures: list[dict[str, Any]] = []
        #: the system's HWM at the last point it was held to the model and agreed (the oracle's
        #: states are marked there too, ``ModelCluster.mark_hwm``), or None before the first
        self._hwm_mark: int | None = None
        #: the highest offset of an acknowledged acks=all record in the history, and how far it is read
        self._acked_all_max: int | None = None
        self._events_scanned = 0
        self._other_events_scanned = 0
        #: why the final read could not be judged (a harness error beside failed steps), if so
        self.final_read_error: str | None = None
        #: end the run at the first failing step that no known failure of the release declares (a
        #: mutant campaign needs to know that a run fails, not everything that fails after)
        self.stop_at_first_failure = False
        self.stopped_early = False  # it did: no finale, no final read, so no verdict to judge
        #: what the release's known failures declare failing at the step under way (``_poll``)
        self._known_here: frozenset[str] = frozenset()
        #: a lossy action was done (a YAML step's or a Python API call's): the fault must bite
        self.lossy_applied = False
        #: per epoch, the system's value minus the model's at the start: the model numbers its
        #: partition from its own creation (leader epoch 1), so the bumps since then are compared
        self._epoch_base: dict[str, int] = {}
        #: the epochs observed at the latest step's end (or the start)
        self.epochs_seen: dict[str, int | None] = {}
        #: the system's partition epoch at the latest settle (the model's: each state's
        #: ``partition_epoch_at_mark``)
        self._partition_epoch_mark: int | None = None
        #: the same three for the topic's other partitions (1, 2, ...), by partition number
        self._partition_epoch_marks: dict[int, int | None] = {}
        #: the wall time of the marks (``time.time()``), and the leaders' logged ISR shrinks since,
        #: by (partition, observed partition epoch, leader): ``_lag_churn``
        self._marked_at = 0.0
        self._lag_churns: dict[tuple[int, int, int], LagChurn | None] = {}
        #: the wall time of the latest read of the controllers' refusals, and the codes the model's
        #: states refused in the step before it (a refusal logged while a step settled is read at
        #: the next step's): ``_hold_refusals_to_model``
        self._refusals_read_at = time.time()
        self._model_refused_before: set[str] = set()
        self._hwm_marks: dict[int, int] = {}
        self._acked_all_max_of: dict[int, int] = {}
        #: per other partition, its HWM at the latest step's end that knew one (label, HWM)
        self._hwm_seen_of: dict[int, tuple[str, int]] = {}
        #: the broker each symbolic target (``leader_of(N)``) named when it was last resolved: what
        #: ``restart``, ``resume`` and ``heal`` name by it
        self.named_by: dict[str, int] = {}
        #: a symbolic target named different brokers on the system and on the model: the run stops
        self._target_split = False

    @property
    def last_hwm(self) -> int | None:
        """The HWM the cluster reported at the end of the latest step that knew one."""
        return self.hwm_seen[-1][1] if self.hwm_seen else None

    # --- the run -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the backend and its oracle: the one start path of YAML runs and the Python API."""
        s = self.scenario
        if s.topic.partitions > 1 and not self.backend.many_partitions:
            raise BackendError(f"the {self.backend.name} backend stages topics of one partition: a topic of "
                               f"{s.topic.partitions} partitions cannot run on it (nothing was started)")
        self.backend.start(s.cluster, s.topic, self.profile, self.history)
        own = self.backend.own_model()
        self._shadow = own is None
        self.model = own if own is not None else build_model(s.cluster, s.topic, self.oracle or self.profile)
        self.alternatives = Alternatives([self.model]) if self._shadow else None
        m = self.model.observe()
        t0 = time.monotonic()
        first, mismatches = self._poll(lambda o: _start_mismatches(o, m), self.backend.settle_timeout_s())
        if time.monotonic() - t0 > 1.0 or mismatches:
            self.history.record("start_settled", seconds=round(time.monotonic() - t0, 1), differs=mismatches)
        obs = self._observe_and_record(first)
        if obs.hwm is not None:
            self.hwm_seen.append(("start", obs.hwm))
        self._epoch_base = {f: getattr(obs, f) - getattr(m, f) for f in EPOCHS
                            if getattr(obs, f) is not None and getattr(m, f) is not None}
        self.epochs_seen = {f: getattr(obs, f) for f in (*EPOCHS, "active_controller")}
        self._mark_epochs_seen(obs)
        if self.count_elections:
            self._elections_at_start = self.backend.election_counts()
            self.history.record("election_counts", at="start", counts=self._elections_at_start)
        if s.workload is not None:
            # Real time: a producer for the whole run, or records sent around every step.
            self._background = not self.backend.start_workload(s.workload) and s.workload.per_step > 0

    def run(self) -> None:
        """Every step, the finale and the final read; a failing step is reported with every other
        failing step at the end (the first one first), so one run shows all that went wrong."""
        s = self.scenario
        if self.model is None:
            self.start()
        self._refuse_unobservable()
        failures: list[ScenarioFailure] = []
        known = s.known_failures_on(self.backend.kafka_version)
        for step in s.steps:
            self._known_here = _declared_at(known, step.label)
            try:
                self._step_run(step)
            except ScenarioFailure as exc:
                failures.append(exc)
                # why, in the history too: the report shows it at the step that failed
                self.history.record("step", phase="end", failed=True, message=str(exc), **self._judged)
                if self._target_split or (self.stop_at_first_failure and unexplained(known, exc.failures) != []):
                    self.stopped_early = True
                    raise ScenarioFailure("\n".join(str(f) for f in failures) + "\n(the run stopped at its first "
                                          "failure)", tuple(x for f in failures for x in f.failures)) from None
        if s.finale:
            self._known_here = _declared_at(known, "finale")
            try:
                self.finale()
            except ScenarioFailure as exc:
                failures.append(exc)
        self._known_here = frozenset()
        self.history.step = "final"
        reads = {0: self.backend.drain()} if s.topic.partitions == 1 else self.backend.drain_partitions()
        for i, read in sorted(reads.items()):
            for record in read.records:
                self.history.record("consume", partition=i, offset=record.offset, value=record.value,
                                    reader="drain")
        final = Read([r for _, read in sorted(reads.items()) for r in read.records], reads[0].end_offset
                     if 0 in reads else None)
        try:
            last = self.backend.observe()  # once: at 50 partitions an observation costs up to a second
            for i in range(s.topic.partitions):
                if i not in reads:
                    raise BackendError(f"the final read did not read partition {i}: a harness error, not a loss")
                self._check_final_read(reads[i], last, i)
        except BackendError as exc:
            if not failures:
                raise
            # The steps' failures are findings; the final read cannot be judged beside them.
            self.history.record("backend_error", message=str(exc))
            self.final_read_error = str(exc)
        else:
            self._prove_losses(final)
        if failures:
            more = f"\n({len(failures)} steps failed)" if len(failures) > 1 else ""
            unjudged = f"\n(the final read was not judged: {self.final_read_error})" if self.final_read_error else ""
            raise ScenarioFailure("\n".join(str(f) for f in failures) + more + unjudged,
                                  tuple(x for f in failures for x in f.failures))

    def _refuse_unobservable(self) -> None:
        """A step that expects what the backend cannot read would pass vacuously: refused."""
        blind = self.backend.cannot_observe
        for step in self.scenario.steps:
            expected = step.expectations_for(self.profile)
            scoped = {k for sub in expected.get(PARTITIONS, {}).values() for k in sub}
            for key in sorted((set(expected) | scoped) & blind):
                line = step.key_lines.get(key, step.line)
                raise ScenarioFailure(f"step {step.label} ({self.scenario.path}:{line}): expects {key}, which the "
                                      f"{self.backend.name} backend cannot observe (a pass would prove nothing)",
                                      (Failure(step.label, f"unobservable {key}"),))

    def _step_run(self, step: Step) -> None:
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
        # the actions as the user wrote them (the report shows the step in the YAML's own form)
        do = [item for a in step.actions for item in a.to_yaml(self.scenario.cluster.brokers)]
        self.history.record("step", phase="begin", line=step.line, note=step.note, do=do)
        self._step = step
        self._judged = {}
        ctx = StepContext(hwm_before=self.last_hwm, epochs_before=dict(self.epochs_seen))
        model_refusals_from = min((len(s.protocol_errors) for s in self.alternatives.states), default=0) \
            if self._shadow and self.alternatives is not None else 0
        workload = self.scenario.workload
        background = self._background
        if background:
            self.apply(Produce(count=workload.per_step, acks=workload.acks), ctx, record=False)  # type: ignore[union-attr,arg-type]
        for i, action in enumerate(step.actions):
            self._line = step.action_lines[i] if i < len(step.action_lines) else step.line
            try:
                self.apply(action, ctx)
            except ModelError as exc:
                raise ScenarioFailure(f"step {step.label} ({self.scenario.path}:{self._line}): {action.kind}: "
                                      f"the model cannot do it here: {exc}",
                                      (Failure(step.label, "model_error"),)) from None
            except BackendError as exc:
                raise BackendError(f"step {step.label} ({self.scenario.path}:{self._line}): {action.kind}: "
                                   f"{exc}") from None
        read_at = time.time()
        ctx.protocol_errors += self.backend.protocol_errors()
        self._hold_refusals_to_model(ctx, model_refusals_from)
        self._refusals_read_at = read_at
        obs = self.await_expectations(step, ctx)
        self.check_invariants(step, obs)
        self.read_for_presence(step.label, obs)
        if background:
            self.apply(Produce(count=workload.per_step, acks=workload.acks), StepContext(None), record=False)  # type: ignore[union-attr,arg-type]
        self.history.record("step", phase="end", **self._judged)
        self._step = None
        return obs

    def apply(self, action: Action, ctx: StepContext, record: bool = True) -> None:
        targets: list[dict[str, Any]] = []
        if action.symbols():
            action, targets = self._resolve(action)
        if record and action.fault:
            self.history.record("fault", **action.describe(), **({"targets": targets} if targets else {}))
        result = self.backend.apply(action)
        # Only once the system took it: an action it refused (the model backend's ModelError) left
        # every broker as it was, and the finale must not restart one that never stopped.
        self.lifecycle.update(action.transitions())
        self.controller_crashed |= isinstance(action, StopController)
        self.lossy_applied |= action.lossy
        if isinstance(action, SetMinIsr):
            self.min_isr = action.value
        predicted: list[tuple[ModelCluster, Any]] = []  # each allowed state and its result
        if self._shadow and self.alternatives is not None:
            # a slow follower at the frozen HWM before the action (``OSCILLATING_EPOCH``)
            oscillating = any(state.late_in_sync_candidates() for state in self.alternatives.states)
            try:
                results = self.alternatives.apply(action)
                predicted = list(zip(self.alternatives.states, results, strict=True))
            except ModelError as exc:
                self.history.record("model_error", message=str(exc))
            self.model = self.alternatives.canonical
            if action.operator and predicted:
                self._hold_refusal_to_model(action, result, predicted, ctx)
            if action.settles:
                self._settle_like_model(action, ctx, oscillating)
        if isinstance(result, Refusal):
            ctx.refusals.append(result)
            self.history.record("refused", action=result.action, code=result.code, message=result.message)
        if isinstance(result, ProduceOutcome):
            ctx.produce = result
            if record:  # the workload's records are no produce of the step's own
                ctx.produces.append(result)
            outcomes = [(state, p) for state, p in predicted if isinstance(p, ProduceOutcome)]
            if self._shadow and outcomes:
                self._hold_produce_to_model(result, outcomes, ctx)
        elif isinstance(result, list):
            for loss in result:
                self._keep_loss(loss, action, ctx)
        self._note_departures(action)

    # --- symbolic targets ---------------------------------------------------------------------

    def _resolve(self, action: Action) -> tuple[Action, list[dict[str, Any]]]:
        """The action with each ``{leader_of: N}`` as a broker: partition N's leader now -- on the
        cluster as the cluster reports it, held to the model's (a different broker fails the step
        naming both, and the run stops: never one side followed) -- or, for ``restart``, ``resume``
        and ``heal``, the broker the symbol named when last resolved. A target the action cannot be
        done on here (no leader, a broker in the wrong state) is an error of the scenario."""
        said = " ".join(f"{k}: {_flow(v)}" for item in action.to_yaml(self.scenario.cluster.brokers)
                        for k, v in item.items())
        where = f"step {self.history.step} ({self.scenario.path}:{self._line}): {said}"  # a failure's words
        said = f"step {self.history.step}: {said}" if self.history.step else said  # a ScenarioError's: with its line
        chosen: dict[str, int] = {}
        for symbol in action.symbols():
            p = partition_led(symbol)
            assert p is not None
            if action.recalls:
                if symbol not in self.named_by:
                    raise ScenarioError(f"{said}: {{{LEADER_OF}: {p}}} names the broker it named when last "
                                        "resolved, and nothing resolved it before", self.scenario.path, self._line)
                chosen[symbol] = self.named_by[symbol]
                continue
            if p >= self.scenario.topic.partitions:
                raise ScenarioError(f"{said}: no partition {p}: the topic has {self.scenario.topic.partitions}",
                                    self.scenario.path, self._line)
            chosen[symbol] = self._leader_now(p, action, where, said)
        done = action.resolved(chosen)
        said_as = ", ".join(f"{{{LEADER_OF}: {partition_led(k)}}} named broker {b}" for k, b in chosen.items())
        brokers = list(getattr(done, "brokers", ()))
        problem = done.refused_in(self.lifecycle)
        if len(set(brokers)) < len(brokers):
            problem = "it names one broker twice"
        if getattr(done, "links", None) == ():
            problem = "it names no link between two different brokers"
        if problem is not None:
            raise ScenarioError(f"{said}: {said_as}, and the action cannot be done: {problem} (an error of the "
                                "scenario, not a finding)", self.scenario.path, self._line)
        if not action.recalls:
            self.named_by.update(chosen)
        return done, [{LEADER_OF: partition_led(k), "broker": b, "recalled": action.recalls}
                      for k, b in chosen.items()]

    def _leader_now(self, p: int, action: Action, where: str, said: str) -> int:
        """Partition ``p``'s leader as the system reports it and as the model has it, which must agree."""
        assert self.model is not None
        if not self._shadow:  # the model is the system
            leader = self.model.partitions[p].part.leader
        else:
            assert self.alternatives is not None
            states = self.alternatives.states
            allowed = sorted({s.partitions[p].part.leader for s in states}, key=str)
            obs = self.backend.observe()
            got = obs.of(p)
            leader = got.leader if got is not None else None
            if leader not in allowed:
                m = self.model.observe()
                d = self._difference("leader", leader, allowed[0] if len(allowed) == 1 else allowed, action.kind,
                                     got or obs, m.of(p) or m, partition=p)
                self.disagreements.append(d)
                self.history.record("disagreement", after=action.kind, field="leader", differences=[str(d)],
                                    observed_value=_plain(leader), model_value=_plain(d.model),
                                    observed=d.observed_state, model=d.model_state, partition=p, target=True)
                self._target_split = True
                raise ScenarioFailure(
                    f"{where}: the system and the model name different leaders of partition {p}: the system "
                    f"{_led_by(leader)}, the model {' or '.join(_led_by(b) for b in allowed)}; the action is not done "
                    "(it would hit a different broker on each) and the run stops here",
                    (Failure(self.history.step or "", "leader"),))
            if len(allowed) > 1:  # the states the model allows differ here: the system's leader says which
                self.alternatives.keep(lambda _, s: s.partitions[p].part.leader == leader)
                self.model = self.alternatives.canonical
        if leader is None:
            raise ScenarioError(f"{said}: partition {p} has no leader when the step runs, so {{{LEADER_OF}: {p}}} "
                                "names no broker (an error of the scenario, not a finding)",
                                self.scenario.path, self._line)
        return leader

    def _note_departures(self, action: Action) -> None:
        """Each documented difference from the KIP the oracle's rules relied on, the first time."""
        if self.model is None:
            return
        known = {d["rule"] for d in self.departures}
        for deviation in self.model.profile.kip_differences:
            if deviation.field in self.model.ctx.departures and deviation.field not in known:
                entry = {"rule": deviation.field, "summary": deviation.summary or deviation.field,
                         "reason": deviation.reason, "source": deviation.source}
                self.departures.append({"step": self.history.step, **entry})
                self.history.record("kip_departure", after=action.kind, **entry)

    def _keep_loss(self, loss: LossEvidence, action: Action, ctx: StepContext) -> None:
        """A lossy action's evidence counts for the step; a restart's completes the cut's."""
        self.history.record("loss_evidence", **loss.as_event(), after=action.kind)
        if action.lossy:
            ctx.losses.append(loss)
            self.losses.append(loss)
            return
        for i in range(len(self.losses) - 1, -1, -1):
            if (self.losses[i].broker, self.losses[i].partition) == (loss.broker, loss.partition):
                self.losses[i] = loss
                return
        self.losses.append(loss)

    # --- holding the system to the model --------------------------------------------------------

    def _declared(self, name: str) -> tuple[str, str] | None:
        """(reason, where) when the step or the profile declares a difference in ``name``."""
        step = self._step
        if step is not None:
            reason = step.differences_for(self.profile).get(name)
            if reason is not None:
                return reason, f"step {step.label} ({self.scenario.path}:{step.differs_line or step.line})"
        for deviation in get_profile(self.profile).deviations:
            if deviation.field == name:
                return deviation.reason, f"profile {self.profile}: {deviation.source}"
        return None

    def _difference(self, name: str, observed: Any, model: Any, after: str, obs: Observation,
                    m: Observation, timing: tuple[str, str] | None = None, partition: int = 0) -> Difference:
        """``timing``: (reason, source) when the model knows the field is timing's at this step."""
        declared = self._declared(name) or timing
        if declared is None and name == "partition_epoch":
            declared = self._lag_churn(partition, obs, m)
        return Difference(
            step=self.history.step or "", after=after, line=self._line, field=name, observed=observed, model=model,
            observed_state=describe(obs), model_state=describe(m),
            reason=declared[0] if declared else None, source=declared[1] if declared else None,
            partition=partition,
        )

    def _hold_refusals_to_model(self, ctx: StepContext, model_from: int) -> None:
        """The partition leaders' AlterPartition refusals since the last read against the model's
        (any allowed state's, this step or the one before): recorded where they differ. A refusal
        of an ineligible replica that no state has fails the step -- unless it came soon after that
        broker's registration changed (a leader's metadata trails the controller's: a race the
        protocol allows; :mod:`pytest_elr.sut.refusals`). A forged request's refusal is the
        request's own answer, held to the model where it is made (``_hold_refusal_to_model``)."""
        if not self._shadow or self.alternatives is None:
            return
        refused = {e for st in self.alternatives.states for e in st.protocol_errors[model_from:]}
        model = refused | self._model_refused_before
        self._model_refused_before = refused
        system = Counter(ctx.protocol_errors) - Counter(r.code for r in ctx.refusals)
        if sorted(refused) != sorted(system):
            self.history.record("refusals", system=sorted(system.elements()), model=sorted(refused))
        if not system["INELIGIBLE_REPLICA"] or "INELIGIBLE_REPLICA" in model:
            return
        unexplained = self.backend.unraced_refusals(self._refusals_read_at - REFUSAL_READ_SLACK_S)
        if unexplained:
            words = "; ".join(str(u) for u in unexplained[:3]) + (f" (and {len(unexplained) - 3} more)"
                                                                 if len(unexplained) > 3 else "")
            self._note(self._difference("refused", f"INELIGIBLE_REPLICA: {words}", "none",
                                        "a partition leader's AlterPartition", self.backend.observe(),
                                        self.model.observe()), ctx)

    def _late_fetchers(self, partition: int) -> set[int]:
        """The followers of ``partition`` that some allowed state has behind a slow link."""
        states = self.alternatives.states if self.alternatives is not None else [self.model]
        return {f for st in states if partition in st.partitions for f in st.late_fetchers(partition)}

    def _lag_churn(self, partition: int, raw: Observation, m: Observation) -> tuple[str, str] | None:
        """(reason, source) when a partition epoch that moved where the model's did not (``m``'s is
        the moved flag) is its leader's logged ISR shrinks since the mark, each for lag and undone
        (``LagChurn.explains``) of followers no fault slows; None otherwise. The leader's log is read
        once per epoch seen."""
        mark = self._partition_epoch_mark if partition == 0 else self._partition_epoch_marks.get(partition)
        if m.partition_epoch != 0 or raw.partition_epoch is None or mark is None or raw.leader is None:
            return None
        key = (partition, raw.partition_epoch, raw.leader)
        slowed = self._late_fetchers(partition)
        if key not in self._lag_churns:
            churn = self._lag_churns[key] = self.backend.lag_churn(partition, raw.leader, self._marked_at)
            self.history.record("lag_churn", partition=partition, leader=raw.leader,
                                moved_by=raw.partition_epoch - mark, churn=None if churn is None else vars(churn),
                                slowed=sorted(slowed))
        churn = self._lag_churns[key]
        if churn is None or not churn.explains(raw.partition_epoch - mark):
            return None
        if slowed & set(churn.dropped):
            # A follower behind a slow link gets no records: once the HWM has passed its end Kafka
            # keeps it out (Partition.isFollowerInSync), and at the frozen HWM the model allows its
            # round trips (OSCILLATING_EPOCH). Taken back past the HWM is a leader's bug (mutant 897).
            return None
        return (f"{LAG_CHURN[0]} (broker {raw.leader} logged {churn.shrinks} such shrink(s) since the last settle)",
                LAG_CHURN[1])

    def _predicted(self, m: Observation, name: str) -> Any:
        """The model's value of a field, in the system's numbering: the leader epoch is the
        system's at the start plus the bumps the model made since (Kafka creates a partition at
        leader epoch 0, the model at 1). Measured on Kafka 4.4.0 and 4.0.2 (docs/model.md, "Epochs")."""
        value = getattr(m, name)
        if name == "leader_epoch" and value is not None and name in self._epoch_base:
            return value + self._epoch_base[name]
        return value

    def _moved(self, state: ModelCluster) -> Observation:
        """The state's observation with its partition epoch as whether it moved since the last
        settle (1) or not (0): how many change records a step writes depends on timing the model
        does not follow (a follower behind a slow link leaves and rejoins the ISR several times:
        docs/model.md, "Epochs"), whether it writes one does not."""
        m = state.observe()
        moved = replace(m, partition_epoch=int(state.part.partition_epoch != state.partition.partition_epoch_at_mark))
        if not m.partitions:
            return moved
        others = {i: replace(o, partition_epoch=int(state.partitions[i].part.partition_epoch
                                                     != state.partitions[i].partition_epoch_at_mark))
                  for i, o in m.partitions.items()}
        return replace(moved, partitions=others)

    def _observed_moved(self, obs: Observation) -> Observation:
        """The observation with its partition epoch as whether it moved since the last settle."""
        if obs.partitions:
            obs = replace(obs, partitions={i: self._moved_since(o, self._partition_epoch_marks.get(i))
                                           for i, o in obs.partitions.items()})
        return self._moved_since(obs, self._partition_epoch_mark)

    @staticmethod
    def _moved_since(obs: Observation, mark: int | None) -> Observation:
        if obs.partition_epoch is None or mark is None:
            return replace(obs, partition_epoch=None)
        return replace(obs, partition_epoch=int(obs.partition_epoch != mark))

    def _mark_epochs_seen(self, obs: Observation) -> None:
        self._partition_epoch_mark = obs.partition_epoch
        self._partition_epoch_marks = {i: o.partition_epoch for i, o in obs.partitions.items()}
        self._marked_at = time.time() - MARK_SLACK_S
        self._lag_churns.clear()

    def _mark_partition_epoch(self, obs: Observation) -> None:
        assert self.alternatives is not None
        self._mark_epochs_seen(obs)
        for state in self.alternatives.states:
            for p in state.partitions.values():
                p.partition_epoch_at_mark = p.part.partition_epoch

    def _settle_like_model(self, action: Action, ctx: StepContext, oscillating: bool = False) -> None:
        """Hold the system to the model after an action that changes the cluster.

        The model predicts every field the backend observes (``STATE_FIELDS``) and which followers
        hold the leader's whole log; where timing decides (several followers lagging at once) it
        allows several states (``model/alternatives.py``). The cluster is polled until it agrees
        with one of them or the settle timeout passes, with a trickle of acks=1 records while a
        follower must drop out of the ISR for lagging (Kafka only shrinks the ISR of a follower
        that falls *behind*); the states that fit the cluster are kept, the others dropped. What
        still differs from every state is a disagreement with the first (canonical) one -- it
        fails the step -- or a difference the scenario or the profile declares; each is kept in
        the history with both states.
        """
        assert self.alternatives is not None
        names = [f for f in STATE_FIELDS if f not in self.backend.cannot_observe]
        # Followers the model has fetched everything: the next fault may depend on it (a leader
        # asks to add a follower to the ISR only once it has caught up).
        allowed = [(self._moved(state), state.caught_up_followers()) for state in self.alternatives.states]
        hwm_bounds = self._hwm_bounds()  # before the first observation: see _least_hwm
        other_bounds = self._other_hwm_bounds()
        # A slow follower at the frozen HWM, before the action or after it, is taken back into the
        # ISR and dropped in turn, an ISR change each: whether one falls between two settles is timing.
        oscillating = oscillating or any(s.late_in_sync_candidates() for s in self.alternatives.states)
        timing = OSCILLATING_EPOCH if oscillating else None

        def differences(raw: Observation, m: Observation, caught_up: set[int]) -> list[Difference]:
            obs = self._observed_moved(raw)
            found = [self._difference(f, _shown(f, getattr(obs, f), raw, self._partition_epoch_mark),
                                      _shown(f, self._predicted(m, f)), action.kind, raw, m,
                                      timing if f == "partition_epoch" else None)
                     for f in names if f != "hwm" and _value(getattr(obs, f)) != _value(self._predicted(m, f))]
            if "hwm" in names:
                found += self._hwm_differences(obs, m, hwm_bounds, action.kind)
            for i, mi in sorted(m.partitions.items()):
                found += self._partition_differences(i, raw, obs, mi, m, names, other_bounds.get(i, (None, None)),
                                                     action.kind, timing)
            end = obs.leo.get(obs.leader) if obs.leader is not None else None
            behind = [b for b in sorted(caught_up) if end is None or obs.leo.get(b) != end]
            if behind:
                found.append(self._difference("caught_up", sorted(set(caught_up) - set(behind)), sorted(caught_up),
                                              action.kind, obs, m))
            return found

        def undeclared(obs: Observation) -> list[list[Difference]]:
            return [[d for d in differences(obs, m, c) if d.reason is None] for m, c in allowed]

        # A state with a slow follower back in the ISR by its late fetches is a moment of a take-back-
        # and-drop cycle, not where the cluster rests: a state without one is awaited first, for one
        # cycle (measured on 4.4.0 and 4.0.2: back 1.5-5 s after a drop, in for 0.4-1.5 s), and a moment
        # is kept only when nothing else fits by then (else a later step starts from it; CI: T2).
        resting = [not state.partition.late_in_sync for state in self.alternatives.states]
        moments_from = time.monotonic() + LATE_IN_SYNC_CYCLE_S

        def check(obs: Observation) -> list[Any]:
            per_state = undeclared(obs)
            fit = [not u for u in per_state]
            if any(f and r for f, r in zip(fit, resting, strict=True)) or \
                    (any(fit) and time.monotonic() >= moments_from):
                return []
            # Only a follower that must leave the ISR for lagging (not for being fenced), or that the
            # leader asks to drop in a request the model holds, needs traffic, and only on its own
            # partition: elsewhere extra records would blur what a lossy shutdown took, and put every
            # follower of every partition behind, which a follower starved of CPU for longer than
            # replica.lag.time.max.ms pays with an ISR shrink no fault made (CI, 2026-11-27: a partition
            # of fifty that no fault touched, under a tick to all fifty).
            behind = self._must_fall_behind(obs, [m for m, _ in allowed]) | self._drop_needs_records(obs)
            if behind:
                self.backend.nudge(sorted(behind))
            return per_state[0] or ["a moment of a slow follower's take-back and drop"]

        obs, _ = self._poll(check, self.backend.settle_timeout_s())
        fits = [not u for u in undeclared(obs)]
        chosen = fits.index(True) if any(fits) else 0
        if len(allowed) > 1:
            self.alternatives.keep(lambda i, _: fits[i])
            self.model = self.alternatives.canonical
            self.history.record("alternatives", after=action.kind, allowed=len(allowed), kept=sum(fits),
                                states=[describe(m, epochs=True) for m, _ in allowed],
                                observed=describe(self._observed_moved(obs), epochs=True))
        for d in differences(obs, *allowed[chosen]):
            self._note(d, ctx)
        self._mark_partition_epoch(obs)
        if any(fits):
            self._mark_hwm(obs)

    @staticmethod
    def _must_fall_behind(obs: Observation, models: list[Observation]) -> set[int]:
        """The partitions with a follower still in the observed ISR that some allowed state has left
        it, unfenced: it must leave for lagging, which it does only once behind its leader."""
        behind = set()
        for m in models:
            for i in (0, *m.partitions):
                seen, want = obs.of(i), m.of(i)
                if seen is not None and want is not None and set(seen.isr) - set(want.isr) - set(m.fenced):
                    behind.add(i)
        return behind

    def _drop_needs_records(self, obs: Observation) -> set[int]:
        """The partitions with a follower the model's leader has asked to drop (the request held or
        unanswered) still in the observed ISR: a Kafka leader sends that request only once the
        follower is behind it."""
        assert self.alternatives is not None
        needs = set()
        for state in self.alternatives.states:
            for i, dropped in state.asked_to_drop().items():
                seen = obs.of(i)
                if seen is not None and dropped & set(seen.isr):
                    needs.add(i)
        return needs

    def _partition_differences(self, i: int, raw: Observation, obs: Observation, mi: Observation,
                               m: Observation, names: list[str], bounds: tuple[int | None, int | None],
                               after: str, timing: tuple[str, str] | None) -> list[Difference]:
        """Partition ``i`` (not 0) against the model's, on every field partition 0 is held to but
        the cluster's own (``fenced``: held on partition 0): ``obs`` is the observation with its
        partition epochs as whether they moved, ``raw`` as read."""
        got, got_raw = obs.of(i), raw.of(i)
        if got is None or got_raw is None:
            return [self._difference("partitions", "not observed", f"partition {i}", after, raw, m, partition=i)]
        found = [self._difference(f, _shown(f, getattr(got, f), got_raw, self._partition_epoch_marks.get(i)),
                                  _shown(f, self._predicted(mi, f)), after, got_raw, mi,
                                  timing if f == "partition_epoch" else None, partition=i)
                 for f in names if f not in ("hwm", "fenced")
                 and _value(getattr(got, f)) != _value(self._predicted(mi, f))]
        if "hwm" in names:
            found += self._hwm_differences(got, mi, bounds, after, partition=i)
        return found

    # --- the HWM: bounds, not the model's value -------------------------------------------------
    #
    # The system appends records the model never sees (the kafka backend's background producer,
    # ``Backend.nudge``'s acks=1 ticks), so its HWM cannot equal the model's. What the model does
    # say, and the system is held to after every settle and at every step's end:
    # * frozen: KIP-966 "Additional High Watermark advancement requirement": "High Watermark can
    #   only advance if the ISR size is larger or equal to min.insync.replicas" (the ISR the
    #   controller committed: ``controller.hwm_may_advance``). When no
    #   state on the way from the last check point to now allowed it to advance -- in every state
    #   the oracle still allows (``ModelCluster.hwm_frozen_since_mark``) -- the HWM is the one seen
    #   there. A HWM that went back is caught here too (and by the invariant hwm_monotonic);
    #   where the model's own HWM went back (a loss), no freeze is required.
    # * at least: the HWM covers every acknowledged acks=all record (``_least_hwm``).
    # An HWM the system cannot tell (None: a new leader whose HWM is below its epoch's start
    # answers OFFSET_NOT_AVAILABLE) is held to nothing, and the check point stays where it was.

    def _hwm_bounds(self) -> tuple[int | None, int | None]:
        """(the HWM the system must still show, or None; the least HWM it must show, or None)."""
        assert self.alternatives is not None
        frozen = self._hwm_mark is not None and all(s.hwm_frozen_since_mark() for s in self.alternatives.states)
        return (self._hwm_mark if frozen else None), self._least_hwm()

    def _other_hwm_bounds(self) -> dict[int, tuple[int | None, int | None]]:
        """``_hwm_bounds`` of each other partition (1, 2, ...), read from the history as it is now."""
        assert self.alternatives is not None
        if len(self.alternatives.canonical.partitions) == 1:
            return {}
        for e in self.history.events[self._other_events_scanned:]:
            if e.get("type") == "produce" and e.get("op") == "ok" and e.get("acks") == "all" \
                    and e.get("offset") is not None and (e.get("partition") or 0):
                p = e["partition"]
                self._acked_all_max_of[p] = max(self._acked_all_max_of.get(p, -1), e["offset"])
        self._other_events_scanned = len(self.history.events)
        states = self.alternatives.states
        out: dict[int, tuple[int | None, int | None]] = {}
        for i in self.alternatives.canonical.partitions:
            if not i:
                continue
            mark = self._hwm_marks.get(i)
            frozen = mark if mark is not None and all(s.hwm_frozen_since_mark(i) for s in states) else None
            top = self._acked_all_max_of.get(i)
            least = None if top is None or self.expected_loss != "none" or not all(
                s.within_tolerance() and s.hwm_covers_committed(i) for s in states) else top + 1
            out[i] = (frozen, least)
        return out

    def _least_hwm(self) -> int | None:
        """One past the highest acknowledged acks=all offset in the history, while the model
        promises no acknowledged record is lost: a leader answers an acks=all produce only once its
        HWM passed the records (Kafka's delayed produce; the model's ``_finish_produce``), and a
        later leader that holds them (which the tolerance promises) tells its HWM only once that
        passed its own epoch's start, at or beyond them (else it answers OFFSET_NOT_AVAILABLE:
        None, held to nothing). Read from the history *before* the cluster is
        observed, so a record acknowledged after the observation does not count. Not on a negative
        control, nor past a loss the model counts (``ModelCluster.within_tolerance``) or makes (its
        leader's HWM no longer covers what was committed): there the record may be gone."""
        assert self.alternatives is not None
        events = self.history.events
        new = max_acked_offset(events[self._events_scanned:], acks="all")
        self._events_scanned = len(events)
        if new is not None and (self._acked_all_max is None or new > self._acked_all_max):
            self._acked_all_max = new
        if self._acked_all_max is None or self.expected_loss != "none" or \
                not all(s.within_tolerance() and s.hwm_covers_committed() for s in self.alternatives.states):
            return None
        return self._acked_all_max + 1

    def _hwm_differences(self, obs: Observation, m: Observation, bounds: tuple[int | None, int | None],
                         after: str, partition: int = 0) -> list[Difference]:
        frozen, least = bounds
        if obs.hwm is None:
            return []
        out = []
        if frozen is not None and obs.hwm != frozen:
            out.append(self._difference("hwm", obs.hwm, f"frozen at {frozen} (no state since it was read let it "
                                        "advance: committed ISR under min ISR)", after, obs, m, partition=partition))
        if least is not None and obs.hwm < least:
            out.append(self._difference("hwm", obs.hwm, f"at least {least} (acks=all records acknowledged "
                                        "below it)", after, obs, m, partition=partition))
        return out

    def _mark_hwm(self, obs: Observation) -> None:
        """The system agreed with the model here: its HWM is the next check point's (of each
        partition whose HWM it told)."""
        if self.alternatives is None:
            return
        if not obs.partitions:
            if obs.hwm is None:
                return
            self._hwm_mark = obs.hwm
            for state in self.alternatives.states:
                state.mark_hwm()
            return
        told = {i for i, o in [(0, obs), *obs.partitions.items()] if o.hwm is not None}
        if obs.hwm is not None:
            self._hwm_mark = obs.hwm
        self._hwm_marks.update({i: o.hwm for i, o in obs.partitions.items() if o.hwm is not None})
        for state in self.alternatives.states:
            state.mark_hwm(told)

    def _hold_hwm_at_step_end(self, obs: Observation, bounds: tuple[int | None, int | None],
                              ctx: StepContext, other_bounds: dict[int, tuple[int | None, int | None]]) -> None:
        """The HWM at the step's end, as after a settle; the check point moves here when the
        system shows one of the model's states (the settle holds the other fields)."""
        if not self._shadow or self.alternatives is None or "hwm" in self.backend.cannot_observe \
                or "hwm" not in STATE_FIELDS:
            return
        names = [f for f in STATE_FIELDS
                 if f not in self.backend.cannot_observe and f not in ("hwm", "partition_epoch")]
        models = [state.observe() for state in self.alternatives.states]
        found = self._hwm_differences(obs, models[0], bounds, "step end")
        for i, b in sorted(other_bounds.items()):
            got, mi = obs.of(i), models[0].of(i)
            if got is not None and mi is not None:
                found += self._hwm_differences(got, mi, b, "step end", partition=i)
        for d in found:
            self._note(d, ctx)

        def agree(o: Observation | None, m: Observation | None, fields: list[str]) -> bool:
            return o is not None and m is not None and \
                all(_value(getattr(o, f)) == _value(self._predicted(m, f)) for f in fields)
        agrees = any(agree(obs, m, names) and all(agree(obs.of(i), m.of(i), [f for f in names if f != "fenced"])
                                                    for i in m.partitions) for m in models)
        if agrees and all(d.reason is not None for d in found):
            self._mark_hwm(obs)

    def _note(self, d: Difference, ctx: StepContext) -> None:
        """Keep a difference: declared ones in the history and the result, the others fail the step."""
        if d.reason is not None:
            self.declared.append(d)
            self.history.record("declared_difference", **{k: v for k, v in d.as_dict().items() if k != "step"})
            return
        self.disagreements.append(d)
        ctx.differences.append(d)
        if d.field not in self._known_here:
            self._known_here = frozenset()  # a failure the release does not declare: wait everything out
        self.history.record("disagreement", after=d.after, field=d.field, differences=[str(d)],
                            observed_value=_plain(d.observed), model_value=_plain(d.model),
                            observed=d.observed_state, model=d.model_state,
                            **({"partition": d.partition} if d.partition else {}))

    def _hold_produce_to_model(self, got: ProduceOutcome, want: list[tuple[ModelCluster, ProduceOutcome]],
                               ctx: StepContext) -> None:
        """Every record's outcome, in the shared words, against the model's: as the client saw them
        when the produce returned (the model may complete a waiting record later; a client times out).
        ``want`` holds each allowed state with its outcome: the states whose outcome fits are kept."""
        assert self.alternatives is not None and self.model is not None
        observed = got.words()
        fitting = {id(state) for state, p in want if p.words() == observed}
        if fitting:
            self.alternatives.keep(lambda _, state: id(state) in fitting)
            self.model = self.alternatives.canonical
        else:
            self._note(self._difference("produce", observed, want[0][1].words(), "produce", self.backend.observe(),
                                        self.model.observe()), ctx)

    def _hold_refusal_to_model(self, action: Action, got: Result, want: list[tuple[ModelCluster, Result]],
                               ctx: StepContext) -> None:
        """The controller's answer to an operator request against the model's, in each allowed state:
        refused with a code, or accepted (None). The states whose answer fits are kept."""
        assert self.alternatives is not None and self.model is not None

        def code(result: Result) -> str | None:
            return result.code if isinstance(result, Refusal) else None

        fitting = {id(state) for state, answer in want if code(answer) == code(got)}
        if fitting:
            self.alternatives.keep(lambda _, state: id(state) in fitting)
            self.model = self.alternatives.canonical
            return
        self._note(self._difference("refused", _refusal_word(code(got)), _refusal_word(code(want[0][1])),
                                    action.kind, self.backend.observe(), self.model.observe()), ctx)

    def finale(self) -> None:
        """Heal every link and bring every broker back, so what survived can be read; the system is
        held to the model there too."""
        self.history.step = "finale"
        ctx = StepContext(hwm_before=self.last_hwm)
        self._line = None
        self.apply(Heal(links=None), ctx)
        for broker, state in sorted(self.lifecycle.items()):
            if state == "paused":
                self.apply(Resume(broker=broker), ctx)
        if self.controller_crashed:  # first: without a quorum no broker registers
            self.apply(RestartController(controller=ALL_CONTROLLERS), ctx)
        for broker, state in sorted(self.lifecycle.items()):
            if state == "down":
                self.apply(Restart(broker=broker), ctx)
        if not self.backend.settles_instantly:
            self._poll(lambda obs: [] if obs.leader is not None else ["no leader yet"],
                       DEFAULT_STEP_TIMEOUT_S)
        obs = self._observe_and_record()
        model_leader = self.model.observe().leader if self.model is not None else None
        if obs.leader is None and model_leader is not None and not any(d.field == "leader" for d in ctx.differences):
            # Everything healed and restarted, the model elected broker ``model_leader`` and no
            # disagreement about the leader was found after the finale's actions (that would be the
            # system's), yet no leader now: the final read would find nothing to read from, and its
            # "losses" would be the harness's.
            raise BackendError(f"the finale found no leader after {DEFAULT_STEP_TIMEOUT_S:.0f} s where the model "
                               f"has broker {model_leader}: the final read cannot be trusted (observed: "
                               f"{describe(obs)})")
        finale = Step(label="finale", line=self.scenario.line, actions=(), expect={})
        self.check_invariants(finale, obs)
        if ctx.differences:
            raise ScenarioFailure(self._report(finale, [], obs, ctx), _failures(finale.label, [], ctx))

    # --- expectations ----------------------------------------------------------------------

    def await_expectations(self, step: Step, ctx: StepContext) -> Observation:
        expected = self._expected(step)
        timeout = step.timeout_s or max(DEFAULT_STEP_TIMEOUT_S, self.backend.settle_timeout_s())
        if self.stop_at_first_failure and any(d.field not in self._known_here for d in ctx.differences):
            # The step failed already, not as a known failure, and the run ends with it (a mutant
            # campaign needs only that): one look at the expectations, not a wait for them.
            timeout = 0.0
        hwm_bounds = self._hwm_bounds() if self._shadow else (None, None)  # before the observation
        other_bounds = self._other_hwm_bounds() if self._shadow else {}
        obs, mismatches = self._poll(lambda o: compare(expected, o, ctx), timeout)
        if any(key in expected for key in ELECTION_COUNTS):
            mismatches += self._hold_election_counts(expected, obs, ctx)
        self._observe_and_record(obs)
        self.epochs_seen = {f: getattr(obs, f) for f in (*EPOCHS, "active_controller")}
        self._hold_hwm_at_step_end(obs, hwm_bounds, ctx, other_bounds)
        self._judged = {"expected": {k: _as_yaml(v) for k, v in expected.items()},
                        "observed": {k: _observed(k, obs, ctx, v) for k, v in expected.items()},
                        "mismatches": mismatches}
        if mismatches or ctx.differences:
            raise ScenarioFailure(self._report(step, mismatches, obs, ctx), _failures(step.label, mismatches, ctx))
        return obs

    # --- election counts: read on demand, against the expectation and the model ------------

    def _hold_election_counts(self, expected: Mapping[str, Any], obs: Observation, ctx: StepContext) -> list[str]:
        """The system's elections since the start (its counter now minus at the start) against the
        step's expectation and, under a shadow oracle, against the model's count (one of the states
        it still allows). Read again for a while if they differ: the controller marks its meters
        when it publishes the records the brokers already serve. A count the system does not
        expose is a mismatch (a pass would prove nothing)."""
        named = [key for key in ELECTION_COUNTS if key in expected]
        states = self.alternatives.states if self._shadow and self.alternatives is not None else []
        allowed = [state.ctx.elections.as_dict() for state in states]
        deadline = time.monotonic() + (0 if self.backend.settles_instantly else ELECTION_COUNTS_WAIT_S)
        while True:
            now = self.backend.election_counts()
            start = self._elections_at_start
            ctx.elections = {key: now[key] - start[key] if now is not None and start is not None
                             and key in now and key in start else None for key in named}
            self.history.record("election_counts", at=self.history.step, counts=now, since_start=ctx.elections)
            unequal = [key for key in named if ctx.elections[key] != expected[key]
                       or (allowed and all(ctx.elections[key] != counts[key] for counts in allowed))]
            unreadable = any(ctx.elections[key] is None for key in named)  # will not change: no more reads
            if not unequal or unreadable or time.monotonic() >= deadline:
                break
            time.sleep(POLL_INTERVAL_S)
        mismatches = []
        for key in named:
            got = ctx.elections[key]
            if got is None:
                release = f" (Kafka {self.backend.kafka_version})" if self.backend.kafka_version else ""
                mismatches.append(f"{key}: expected {expected[key]}, but the {self.backend.name} backend{release} "
                                  f"counts no such elections (a pass would prove nothing)")
                continue
            if got != expected[key]:
                mismatches.append(f"{key}: expected {expected[key]}, observed {got} since the start")
        if states:
            self._hold_election_counts_to_model(named, states, obs, ctx)
        return mismatches

    def _hold_election_counts_to_model(self, named: list[str], states: list[ModelCluster], obs: Observation,
                                       ctx: StepContext) -> None:
        """A count no state the model allows has is a difference from the model, like any field."""
        for key in named:
            got = ctx.elections[key]
            if got is not None and all(got != state.ctx.elections.as_dict()[key] for state in states):
                model = states[0].ctx.elections.as_dict()[key]
                self._note(self._difference(key, got, model, "step end", obs, self._moved(states[0])), ctx)

    def _poll(self, check: Callable[[Observation], list[Any]], timeout: float) -> tuple[Observation, list[Any]]:
        """Observe until ``check`` finds nothing, or the timeout passes. At a step where a known
        failure of the release declares what fails, a cluster that rests in a state that differs
        only there (the same state for ``Backend.rest_s``, longer than every timer of its own) is
        taken as it is: a release's known bug does not go away by waiting, and the waits were
        most of the time such a run took. A difference the release does not declare is waited
        out as anywhere else, so a known failure cannot absorb another failure."""
        deadline = time.monotonic() + timeout
        resting: tuple[Any, ...] | None = None
        since = 0.0
        while True:
            obs = self.backend.observe()
            mismatches = check(obs)
            now = time.monotonic()
            if not mismatches or self.backend.settles_instantly or now >= deadline:
                return obs, mismatches
            if self._known_here and {_failure_key(m) for m in mismatches} <= self._known_here:
                state = tuple(_value(getattr(obs, f)) for f in RESTING_FIELDS)
                if state != resting:
                    resting, since = state, now
                elif now - since >= self.backend.rest_s():
                    self.history.record("known_failure_rested", at=self.history.step, seconds=round(now - since, 1),
                                        declared=sorted(self._known_here),
                                        differs=sorted({_failure_key(m) for m in mismatches}))
                    return obs, mismatches
            else:
                resting = None
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
            if m.partitions:  # every other partition's, the same keys (a step's own override them)
                own = expected.get(PARTITIONS, {})
                expected[PARTITIONS] = {i: {"leader": o.leader, "isr": frozenset(o.isr), "elr": frozenset(o.elr),
                                            "last_known_elr": frozenset(o.last_known_elr), **own.get(i, {})}
                                        for i, o in sorted(m.partitions.items())}
        return expected

    def _report(self, step: Step, mismatches: list[str], obs: Observation, ctx: StepContext) -> str:
        """The first problem first, at its own line (pytest's short summary shows the first line):
        a difference from the model (the earliest thing that went wrong) at its action's line, else
        the first mismatch at its expectation's line; then the rest and the states."""
        where = f"on backend {self.backend.name}, profile {self.profile}"
        lines: list[str] = []
        for i, d in enumerate(ctx.differences):
            at = f"{self.scenario.path}:{d.line or step.line}"
            text = f"after {d.after}, the system differs from the model in {d}"
            lines.append(f"step {step.label} ({at}): {text}" if i == 0 else f"  {text} ({at})")
        for m in mismatches:
            key = _mismatch_key(m)
            at = f"{self.scenario.path}:{step.key_lines.get(key, step.line)}"
            lines.append(f"step {step.label} ({at}): {m}" if not lines else f"  {m}")
        lines.append(f"  {where}")
        if ctx.differences:
            first = ctx.differences[0]
            lines += [f"  observed after {first.after}: {first.observed_state}",
                      f"  model after {first.after}:    {first.model_state}"]
        if mismatches or not ctx.differences:
            lines.append(f"  observed: {describe(obs)}")
            if self.model is not None and self._shadow:
                lines.append(f"  model:    {describe(self.model.observe())}")
        return "\n".join(lines)

    def _observe_and_record(self, obs: Observation | None = None) -> Observation:
        obs = obs or self.backend.observe()
        self.history.record("observe", **obs.as_event())
        return obs

    # --- invariants --------------------------------------------------------------------------

    def check_invariants(self, step: Step, obs: Observation) -> None:
        """The cluster's own observation against the protocol's invariants, then the model's
        invariants as the oracle's self-check."""
        profile = get_profile(self.profile)
        min_isr = effective_min_isr(self.min_isr, len(self.scenario.topic.replicas), profile)
        before = self.hwm_seen[-1] if self.hwm_seen else None
        many = self.scenario.topic.partitions > 1
        #: (invariant, words, partition) of each violation, once each (partition None: one partition)
        found = [(v.invariant, str(v), 0 if many else None) for v in
                 observed_invariants(obs, elr=profile.elr, min_isr=min_isr, hwm_before=before)]
        if obs.hwm is not None:
            self.hwm_seen.append((step.label, obs.hwm))
        for i, o in sorted(obs.partitions.items()):  # the other partitions, each against its own
            replicas = self.scenario.topic.assignment[i] if i < self.scenario.topic.partitions else o.replicas or ()
            found += [(v.invariant, f"partition {i}: {v}", i) for v in observed_invariants(
                o, elr=profile.elr, min_isr=effective_min_isr(self.min_isr, len(replicas), profile),
                hwm_before=self._hwm_seen_of.get(i))]
            if o.hwm is not None:
                self._hwm_seen_of[i] = (step.label, o.hwm)
        states = self.alternatives.states if self.alternatives is not None else [self.model]
        for state in states:  # every state the oracle still allows must keep its own invariants
            if state is not None:
                found += [(v.invariant, str(v), v.partition) for v in invariants.check(state, len(state.committed))
                          if str(v) not in {text for _, text, _ in found}]
        if not found:
            return
        for name, violation, partition in found:
            where = {} if partition is None else {"partition": partition}
            self.history.record("violation", message=violation, invariant=name, **where)
        if self.expected_loss == "found":
            # A negative control must lose acknowledged records: the invariants about data (those
            # the loss ledger bounds) break by design and are kept; any other does not follow from
            # the loss and fails the step as it would anywhere.
            self.violations += [f"{step.label}: {text}" for name, text, _ in found
                                if name in invariants.DATA_INVARIANTS]
            found = [f for f in found if f[0] not in invariants.DATA_INVARIANTS]
            if not found:
                return
        raise ScenarioFailure(
            f"step {step.label} ({self.scenario.path}:{step.line}): {found[0][1]}\n"
            + "".join(f"  {text}\n" for _, text, _ in found[1:])
            + f"  on backend {self.backend.name}, profile {self.profile}",
            tuple(Failure(step.label, name) for name in dict.fromkeys(name for name, _, _ in found)),
        )

    # --- reads: before the end, and the final one -----------------------------------------------

    def read_for_presence(self, label: str, obs: Observation) -> None:
        """Read what became readable since the last read, of every partition at once: a record that
        disappears later is then proved lost by having been seen (and by whom it was served)."""
        starts = {}
        for i in range(self.scenario.topic.partitions):
            seen = obs.of(i)
            if seen is not None and seen.leader is not None and seen.hwm is not None \
                    and seen.hwm > self._read_to.get(i, 0):
                starts[i] = self._read_to.get(i, 0)
        if not starts:
            return
        for i, read in self.backend.read_partitions(starts).items():
            if read.end_offset is None:
                continue
            leader = obs.of(i).leader  # type: ignore[union-attr]
            for record in read.records:
                self.seen.setdefault(record.value, Seen(record.offset, label, leader, i))
            self._read_to[i] = max(self._read_to.get(i, 0), read.end_offset)

    def _check_final_read(self, final: Read, last: Observation, partition: int = 0) -> None:
        """The final read must reach the final HWM (``last``: observed after it): one that stops short
        (a timeout) would make records look lost. That is the harness failing, never a finding about
        the system."""
        seen = last.of(partition)
        hwm = seen.hwm if seen is not None else None
        where = f" of partition {partition}" if partition else ""
        if hwm is None and not self.scenario.finale:
            return  # left as the steps left it (finale: false): the judge says what stayed down
        if hwm is None:
            # Without the HWM nothing says where the log ends: a read that stopped short would
            # pass for one that reached the end, and missing records for lost ones.
            raise BackendError(f"the final HWM{where} is unknown (no leader to ask?): the final read, which stopped at "
                               f"offset {final.end_offset}, cannot be shown to reach the end of the log: "
                               "a harness error, not a finding")
        if final.end_offset is None or final.end_offset < hwm:
            raise BackendError(f"the final read{where} stopped at offset {final.end_offset} before the final HWM "
                               f"{hwm}: a harness error, not a loss")

    def _prove_losses(self, final: Read) -> None:
        """Acknowledged acks=all records an earlier read saw and the final read did not: named with
        where they were read and by which leader, beside the offsets the victims lost."""
        read = {r.value for r in final.records}
        acked = {e["value"] for e in self.history.events
                 if e["type"] == "produce" and e.get("op") == "ok" and e.get("acks") == "all"}
        gone = sorted(((v, s) for v, s in self.seen.items() if v in acked and v not in read),
                      key=lambda item: (item[1].partition, item[1].offset))
        by_victim: dict[int | None, list[dict[str, Any]]] = {}
        for value, seen in gone:
            victim = next((x for x in reversed(self.losses) if x.partition == seen.partition
                           and x.truncated is not None and x.truncated[0] <= seen.offset < x.truncated[1]), None)
            entry = {"value": value, "offset": seen.offset, "read_at": seen.step, "leader": seen.leader,
                     **({"partition": seen.partition} if seen.partition else {})}
            by_victim.setdefault(victim.broker if victim else None, []).append(entry)
        for victim, records in by_victim.items():
            # the offsets the victim lost, of each partition where a lost record was read
            cut = {x.partition: list(x.truncated) for x in self.losses
                   if x.broker == victim and x.truncated is not None}
            where = sorted({r.get("partition", 0) for r in records})
            truncated = {p: cut[p] for p in where if p in cut}
            leaders = sorted({r["leader"] for r in records if r["leader"] is not None})
            summary = {
                "victim": victim, "count": len(records), "records": records[:MAX_NAMED_LOSSES],
                "truncated": truncated.get(0) if where == [0] else None,
                **({"truncated_by_partition": {str(p): t for p, t in truncated.items()}} if where != [0] else {}),
                "served_by": leaders,
            }
            self.lost_by_presence.append(summary)
            self.history.record("loss_evidence", broker=victim if victim is not None else leaders[0],
                                proof="presence", **summary)


def say_difference(d: Mapping[str, Any]) -> str:
    """One difference from the model (``Difference.as_dict``) on one line, with its reason if declared."""
    why = f" -- declared: {d['reason']} [{d['source']}]" if d.get("reason") else ""
    return (f"step {d['step']} after {d['after']}: {d['field']}: model {_show(d['model'])}, "
            f"observed {_show(d['observed'])}{why}")


def _failures(label: str, mismatches: list[str], ctx: StepContext) -> tuple[Failure, ...]:
    """A step's failures: each field that differs from the model, each expectation that does not
    hold (``compare`` begins each with its key; ``produce[1]`` is a ``produce``), once each."""
    keys = [d.field for d in ctx.differences] + [_failure_key(m) for m in mismatches]
    return tuple(Failure(label, key) for key in dict.fromkeys(keys))


def _holds(want: Any, got: Any) -> bool:
    """An expected value (or ``{one_of: [...]}``, any of its values) against the one observed."""
    return want.holds(got) if isinstance(want, OneOf) else got == want


def _shown_want(want: Any, show: Callable[[Any], Any]) -> str:
    """An expected value in a mismatch's words: ``one of [3, 4] | [3]`` for a ``one_of``."""
    if isinstance(want, OneOf):
        return "one of " + " | ".join(str(show(choice)) for choice in want.choices)
    return str(show(want))


def _mismatch_key(mismatch: str) -> str:
    """The expectation a mismatch is about: its key (``leader``), or ``partition 2: leader`` for a
    partition's (``Step.key_lines`` has the line of either)."""
    head, _, rest = mismatch.partition(": ")
    if head.startswith("partition ") and rest:
        return f"{head}: {rest.split(':', 1)[0]}"
    return mismatch.split(":", 1)[0]


def _failure_key(mismatch: Difference | str) -> str:
    """What a difference from the model (its field) or an unmet expectation (its key, whatever its
    partition) fails, as a known failure names it."""
    if isinstance(mismatch, Difference):
        return mismatch.field
    return _mismatch_key(mismatch).rsplit(": ", 1)[-1].split("[", 1)[0]


def _declared_at(known: tuple[KnownFailure, ...], label: str) -> frozenset[str]:
    """What the release's known failures declare failing at step ``label``."""
    return frozenset(what for k in known if k.step == label for what in k.fails)


def compare(expected: Mapping[str, Any], obs: Observation, ctx: StepContext) -> list[str]:
    """Every way the observation differs from the expectations, in words."""
    out: list[str] = []
    for key, want in expected.items():
        if key == PARTITIONS:
            for i, sub in want.items():
                got = obs.of(i)
                if got is None:
                    out.append(f"partition {i}: {next(iter(sub))}: expected, but the partition was not observed")
                    continue
                out += [f"partition {i}: {m}" for m in compare(sub, got, ctx)]
        elif key == "leader":
            if not _holds(want, obs.leader):
                out.append(f"leader: expected {_shown_want(want, _b)}, observed {_b(obs.leader)}")
        elif key in BROKER_SET_KEYS:
            got = frozenset(getattr(obs, key) or ())
            if not _holds(want, got):
                out.append(f"{key}: expected {_shown_want(want, sorted)}, observed {sorted(got)}")
        elif key == "hwm":
            out += _compare_hwm(want, obs, ctx)
        elif key in EPOCHS:
            out += _compare_epoch(key, want, obs, ctx)
        elif key == "recovering" and obs.recovering != want:
            seen = "unknown (not read)" if obs.recovering is None else obs.recovering
            out.append(f"recovering: expected {want}, observed {seen}")
        elif key == "active_controller" and not _is_active_controller(want, obs.active_controller,
                                                                      ctx.epochs_before.get("active_controller")):
            def name(c: int | str | None) -> str:
                return "none (no quorum leader)" if c is None else str(c)
            before = ctx.epochs_before.get("active_controller")
            wanted = f"unchanged ({name(before)} at the previous step's end)" if want == UNCHANGED else name(want)
            out.append(f"active_controller: expected {wanted}, observed {name(obs.active_controller)}")
        elif key == "produce":
            out += _compare_produces(want, ctx)
        elif key == "refused" and not _refused_as(want, ctx.refusals):
            out.append(f"refused: expected {_refusal_word(want)}, observed "
                       f"{', '.join(f'{r.action} refused with {r.code}' for r in ctx.refusals) or 'accepted'}")
        elif key == "rejected" and want not in ctx.protocol_errors:
            out.append(f"rejected: expected the controller to answer {want}, "
                       f"saw {ctx.protocol_errors or 'no error'}")
        elif key == "lost":
            bit = {loss.broker for loss in ctx.losses if loss.bit}
            if bit != want:
                detail = ", ".join(f"broker {x.broker}{f' partition {x.partition}' if x.partition else ''}: "
                                   f"LEO {x.leo_before} -> {x.leo_after}" for x in ctx.losses)
                out.append(f"lost: expected brokers {sorted(want)} to lose unsynced records, "
                           f"observed {sorted(bit)} ({detail or 'no lossy shutdown'})")
    return out


def _refused_as(want: str | None, refusals: list[Refusal]) -> bool:
    """``refused: CODE``: one of the step's operator requests was refused with CODE; ``none``
    (None): the controller accepted every one."""
    return not refusals if want is None else any(r.code == want for r in refusals)


def _refusal_word(code: str | None) -> str:
    """An operator request's answer in the words of ``refused:`` (None: accepted)."""
    return "accepted" if code is None else f"refused with {code}"


def _is_active_controller(want: int | str | None, got: int | None, before: int | None = None) -> bool:
    """``active_controller: any`` is some controller; ``unchanged`` the one active at the previous
    step's end; ``none`` (None) no quorum leader."""
    if want == UNCHANGED:
        return got is not None and got == before
    return got is not None if want == ANY_CONTROLLER else got == want


def _compare_epoch(key: str, want: str, obs: Observation, ctx: StepContext) -> list[str]:
    """``unchanged``: the same epoch as at the previous step's end; ``bumped``: a higher one."""
    before, now = ctx.epochs_before.get(key), getattr(obs, key)
    if before is None or now is None:
        return [f"{key}: expected {want}, observed {now} (at the previous step's end: {before})"]
    if (now == before) if want == "unchanged" else (now > before):
        return []
    return [f"{key}: expected {want}, observed {before} -> {now}"]


def _compare_hwm(want: Any, obs: Observation, ctx: StepContext) -> list[str]:
    before, now = ctx.hwm_before, obs.hwm
    if isinstance(want, int):
        return [] if now == want else [f"hwm: expected {want}, observed {now}"]
    if want == "advanced" and not (now is not None and (before is None or now > before)):
        return [f"hwm: expected to advance past {before}, observed {now}"]
    if want == "frozen" and (now is None or before is None or now != before):
        return [f"hwm: expected frozen at {before}, observed {now}"
                + (" (went back)" if now is not None and before is not None and now < before else "")
                + (" (unknown)" if now is None or before is None else "")]
    return []


def _compare_produces(want: dict[str, Any] | list[dict[str, Any]], ctx: StepContext) -> list[str]:
    """A mapping is the step's last produce; a list names each produce in order."""
    if isinstance(want, dict):
        return _compare_produce(want, ctx.produce, "produce")
    out = []
    for i, (w, got) in enumerate(zip(want, ctx.produces + [None] * len(want), strict=False)):
        out += _compare_produce(w, got, f"produce[{i}]")
    return out


def _compare_produce(want: dict[str, Any], got: ProduceOutcome | None, what: str) -> list[str]:
    if got is None:
        return [f"{what}: expected a produce outcome, but the step sent nothing"]
    out = []
    if "acked" in want and got.acked != want["acked"]:
        out.append(f"{what}: expected {want['acked']} acknowledged, observed {got.acked} "
                   f"(failed: {got.failed or 'none'})")
    rejected = want.get("rejected")
    if rejected is not None:
        # An error code matches itself under either client's name; a word, every code it covers.
        matched = (rejected in OUTCOMES and rejected in got.words()) or any(
            error_name(e) == error_name(rejected) for e in got.errors)
        if not matched:
            out.append(f"{what}: expected rejection {rejected}, observed "
                       f"{sorted(got.errors) or 'no error'} ({got.acked} acknowledged)")
    return out


def observed_invariants(obs: Observation, elr: bool = True, min_isr: int | None = None,
                        hwm_before: tuple[str, int] | None = None) -> list[ObservedViolation]:
    """Invariants of the protocol checked on what the system itself reports, real or modelled:
    ``elr``: the profile has ELR; ``min_isr``: the effective min ISR in force; ``hwm_before``: the
    HWM the system reported last (step, value) -- the sequence, not a running maximum."""
    out: list[ObservedViolation] = []

    def broken(name: str, why: str) -> None:
        out.append(ObservedViolation(name, f"invariant {name} broken on the observed state: {why} ({describe(obs)})"))

    overlap = set(obs.isr) & set(obs.elr)
    if overlap:
        broken("elr_disjoint_from_isr", f"{sorted(overlap)} in both ISR and ELR")
    if elr and min_isr is not None and len(obs.isr) >= min_isr and obs.elr:
        broken("elr_empty_at_min_isr", f"ISR has {len(obs.isr)} >= min ISR {min_isr} but ELR is {list(obs.elr)}")
    if not elr and obs.elr:
        broken("no_elr_without_feature", f"ELR {list(obs.elr)} with the feature off")
    if obs.leader is not None and obs.leader in obs.fenced:
        broken("leader_unfenced", f"leader {obs.leader} is fenced")
    if obs.hwm is not None and hwm_before is not None and obs.hwm < hwm_before[1]:
        broken("hwm_monotonic", f"HWM went back from {hwm_before[1]} (at {hwm_before[0]}) to {obs.hwm}")
    end = obs.leo.get(obs.leader) if obs.leader is not None else None
    if end is not None and obs.hwm is not None and end < obs.hwm:
        broken("leader_log_covers_hwm", f"leader {obs.leader}'s log ends at {end}, below the HWM {obs.hwm}")
    return out


def _shown(name: str, value: Any, raw: Observation | None = None, mark: int | None = None) -> Any:
    """A field's value as a difference shows it: the partition epoch as whether it moved."""
    if name != "partition_epoch" or value is None:
        return value
    moved = "moved" if value else "unchanged"
    return moved if raw is None else f"{moved} ({mark} -> {raw.partition_epoch})"


def _value(value: Any) -> Any:
    """A field's value for comparison: sets of brokers in any order."""
    return frozenset(value) if isinstance(value, (tuple, list, set, frozenset)) else value


def _plain(value: Any) -> Any:
    """JSON-ready: broker sets as sorted lists."""
    if isinstance(value, (tuple, list, set, frozenset)):
        return sorted(value)
    return value


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, dict):
        return ", ".join(f"{n} {word}" for word, n in value.items()) or "nothing"
    return str(_plain(value))


def _flow(value: Any) -> str:
    """A YAML value on one line, as a scenario would write it (``{broker: 0, from: all}``)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False)
    return text.strip().removesuffix("...").strip()


def _as_yaml(value: Any) -> Any:
    """An expectation as the scenario writes it (``leader: none``, broker sets as lists)."""
    if value is None:
        return "none"
    if isinstance(value, dict) and all(isinstance(k, int) for k in value):  # ``partitions``
        return {i: {k: _as_yaml(v) for k, v in sub.items()} for i, sub in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, OneOf):
        return {"one_of": [_as_yaml(choice) for choice in value.choices]}
    return value


def _observed(key: str, obs: Observation, ctx: StepContext, want: Any = None) -> Any:
    """What the step observed for the expectation ``key``, in the expectation's form."""
    if key == PARTITIONS:  # each scoped partition's keys
        return {i: {k: _observed(k, got, ctx) for k in sub} if (got := obs.of(i)) is not None else None
                for i, sub in want.items()}
    if key in ("leader", *BROKER_SET_KEYS, "hwm", "recovering", "active_controller", *EPOCHS):
        return _as_yaml(getattr(obs, key, None))
    if key == "produce":
        return [{"acked": p.acked, "outcomes": p.words()} for p in ctx.produces]
    if key == "rejected":
        return list(ctx.protocol_errors)
    if key == "refused":
        return ctx.refusals[0].code if ctx.refusals else "none"
    if key == "lost":
        return sorted(loss.broker for loss in ctx.losses if loss.bit)
    if key in ELECTION_COUNTS:
        return ctx.elections.get(key)
    return None


def describe(obs: Observation, epochs: bool = False) -> str:
    """One line of the partition's state; ``epochs``: with its leader epoch and whether its partition
    epoch moved (an observation ``Executor._moved`` made: states timing allows may differ in
    nothing else, a directory assignment landed or not)."""
    recovering = "" if obs.recovering is False else f" recovering={obs.recovering}"
    moved = {None: "unknown", 0: "unchanged"}.get(obs.partition_epoch, "moved")
    epoch = f" leader_epoch={_b(obs.leader_epoch)} partition_epoch={moved}" if epochs else ""
    return (f"leader={_b(obs.leader)} isr={list(obs.isr)} elr={list(obs.elr)} "
            f"last_known_elr={list(obs.last_known_elr)} fenced={list(obs.fenced)} hwm={obs.hwm}{recovering}{epoch}")


def _b(value: int | None) -> str:
    return "none" if value is None else str(value)


def _led_by(leader: int | None) -> str:
    return "no leader" if leader is None else f"broker {leader}"


class ScenarioRun:
    """One scenario on one backend under one profile, in two phases: ``start`` brings the cluster
    up (what fails there is infrastructure: pytest reports it as an error of the test's setup),
    ``finish`` runs the steps and judges the history (what fails there is the system under test)."""

    def __init__(self, scenario: Scenario, backend: Backend, profile: str, history_root: Path | None = None,
                 checker: Checker = inline_checker, progress: Callable[[str], None] | None = None,
                 oracle: Profile | None = None) -> None:
        self.scenario, self.backend, self.profile, self.checker = scenario, backend, profile, checker
        self.started = time.monotonic()
        self.history = History.create(
            history_root, scenario=scenario.name, scenario_file=scenario.path, backend=backend.name,
            profile=profile, kafka_version=backend.kafka_version,
            known_failure=known.because if (known := scenario.known_failure(backend.kafka_version)) else None,
            topic=scenario.topic.name, min_insync_replicas=scenario.topic.min_insync_replicas,
            expected_loss=scenario.verdict.for_profile(profile),
        )
        self.executor = Executor(scenario, backend, profile, self.history, progress, oracle)
        self._closed = False
        #: the backend failed while the run finished (an error of the harness, not a finding)
        self.broken = False

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
        broken = False  # the backend failed (an error), as opposed to the system not doing what the scenario says
        failures: tuple[Failure, ...] = ()
        try:
            failed: list[ScenarioFailure] = []
            try:
                self.executor.run()
            except ScenarioFailure as exc:
                failed.append(exc)
            # judged even when steps failed: a verdict beside a known failure is a failure of its own
            history.end_events()
            verdict = self.checker(history)
            problem = judge(scenario, self.profile, self.executor, verdict) \
                if self.executor.final_read_error is None and not self.executor.stopped_early else None
            failed += [problem] if problem is not None else []
            passed = not failed
            message = "\n".join(str(f) for f in failed) or None
            failures = tuple(x for f in failed for x in f.failures)
        except BackendError as exc:
            history.record("backend_error", message=str(exc))
            passed, message, broken = False, f"{scenario.path}: backend {backend.name} failed: {exc}", True
        except ScenarioError as exc:  # a step that cannot be done when it runs (a symbolic target's)
            history.record("scenario_error", message=str(exc))
            passed, message, broken = False, str(exc), True
        finally:
            self._release()
        self.broken = broken
        history.meta["message"] = message or None
        known = scenario.known_failures_on(backend.kafka_version)
        if known and not passed and unexplained(known, failures) != []:
            # failed otherwise than its known bug (pytest fails it too): not the known failure
            history.meta["known_failure"] = None
        self.close("passed" if passed else ("error" if broken else "failed"))
        return self.result(passed, message or "", verdict, failures)

    def result(self, passed: bool, message: str, verdict: Verdict | None = None,
               failures: tuple[Failure, ...] = ()) -> RunResult:
        ex = self.executor
        return RunResult(
            scenario=self.scenario.name, path=self.scenario.path, profile=self.profile, backend=self.backend.name,
            passed=passed, message=message, verdict=verdict, expected_loss=ex.expected_loss,
            violations=ex.violations, losses=ex.losses, history_dir=self.history.directory,
            duration_s=time.monotonic() - self.started,
            disagreements=[d.as_dict() for d in ex.disagreements], declared=[d.as_dict() for d in ex.declared],
            lost_by_presence=ex.lost_by_presence, departures=ex.departures, kafka_version=self.backend.kafka_version,
            known_failure=self.history.meta.get("known_failure") or "", failures=list(failures),
        )

    def _release(self) -> None:
        try:
            self.backend.close()
        except Exception as exc:  # a cluster that cannot heal is evicted; say so, keep the verdict
            self.history.record("backend_error", message=str(exc))

    def close(self, outcome: str) -> None:
        if not self._closed:
            self._closed = True
            if outcome in ("error", "closed"):  # not finished: the backend is released here
                self._release()
            self.history.close(outcome)


#: what a partition's start may not differ in from the model's, before the first step: its
#: leader, ISR and ELR, and the fenced set (the epochs and the HWM are marked from that moment)
START_FIELDS = ("leader", "isr", "elr", "fenced")


def _start_mismatches(obs: Observation, model: Observation) -> list[str]:
    """The partitions whose state at the start is not yet the model's. A new topic's follower whose
    first fetch comes later than replica.lag.time.max.ms leaves the ISR and comes back, its partition
    epoch +2, before any fault: in the soak of 2026-11-27 under load, 13 of 50 partitions were mid-way
    at the first observation, and one of them finished the churn during the first fault and failed
    it on ``partition_epoch``. The run starts from the first observation that agrees (its epochs
    are the marks), or from the last one when none does within the settle timeout: the first step
    then reports what still differs."""
    pairs = [(0, obs, model)] + [(i, o, model.partitions[i]) for i, o in obs.partitions.items()
                                 if i in model.partitions]
    return [f"partition {i}: {f}" for i, o, m in pairs for f in START_FIELDS
            if _start_value(getattr(o, f)) != _start_value(getattr(m, f))]


def _start_value(value: Any) -> Any:
    """``_value``, with no set (a release that sends no ELR: null) the empty one."""
    return frozenset(value or ()) if value is None or isinstance(value, (tuple, list, set, frozenset)) else value


def run_scenario(
    scenario: Scenario, backend: Backend, profile: str, history_root: Path | None = None,
    checker: Checker = inline_checker, progress: Callable[[str], None] | None = None,
    oracle: Profile | None = None, stop_at_first_failure: bool = False,
) -> RunResult:
    """Start and finish one run; a system that cannot start gives a failed result, not an exception.
    ``oracle``: the shadow model's profile, when not ``profile``'s own (a planted mutant).
    ``stop_at_first_failure``: end at the first step that fails other than as a known failure."""
    run = ScenarioRun(scenario, backend, profile, history_root, checker, progress, oracle)
    run.executor.stop_at_first_failure = stop_at_first_failure
    try:
        run.start()
    except BackendError as exc:
        return run.result(False, f"{scenario.path}: backend {backend.name} could not start: {exc}")
    return run.finish()


def judge(scenario: Scenario, profile: str, ex: Executor, verdict: Verdict) -> ScenarioFailure | None:
    """None when the run's verdict is the one the scenario expects, else why not (its failure is
    the verdict's, named by what went wrong)."""
    lossy = ex.lossy_applied or any(a.lossy for s in scenario.steps for a in s.actions)
    bit = any(loss.bit for loss in ex.losses)
    head = f"{scenario.path}: verdict on backend {ex.backend.name}, profile {profile}: "

    def fails(what: str, why: str) -> ScenarioFailure:
        return ScenarioFailure(head + why, (Failure("verdict", what),))

    if lossy and not bit:
        return fails("no_bite", "the fault did not bite: no lossy shutdown took any record from its victim, so "
                                "the run proves nothing about durability")
    if ex.expected_loss == "none" and verdict.lost_count:
        down = sorted(b for b, state in ex.lifecycle.items() if state != "up")
        hint = ""
        if not scenario.finale and down:
            hint = (f" (finale: false left brokers {down} stopped or paused, so the final read could not "
                    "see what only they hold: restart them in a last step, or drop finale: false)")
        where = ", ".join(f"partition {p}: {c['lost']} of {c['acked']}" for p, c in verdict.partitions.items()
                          if c["lost"])
        return fails("acked_loss", f"{verdict.lost_count} acknowledged acks=all records lost"
                                   f"{f' ({where})' if where else ''}: {verdict.examples()}{hint}")
    if ex.expected_loss == "none" and verdict.fatal:
        return fails(next(iter(verdict.fatal)), f"the {verdict.checker} checker found {verdict.fatal}")
    if ex.expected_loss == "found" and not verdict.lost_count:
        return fails("acked_loss", "negative control: acknowledged records should have been lost, "
                                   f"but all {verdict.acked} were read back")
    if ex.expected_loss == "found":
        beside = verdict.beside_loss
        if beside:
            return fails(next(iter(beside)), f"negative control: besides the expected loss, the {verdict.checker} "
                                             f"checker found {beside}")
        problem = unproved_loss(ex, verdict)
        if problem is not None:
            return fails("unproved_loss", problem)
    return None


def unproved_loss(ex: Executor, verdict: Verdict) -> str | None:
    """Why a negative control's loss is not proved by presence: records missing from the final read
    prove nothing unless an earlier read saw them (a read that stopped short looks the same)."""
    reads = type(ex.backend).read_partitions is not Backend.read_partitions  # it reads before the end
    if reads and not ex.lost_by_presence:
        return (f"negative control: {verdict.lost_count} acknowledged records are missing from the final read, "
                "but no earlier read saw any of them: the loss is not proved by presence")
    return None
