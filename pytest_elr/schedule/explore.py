"""``elr explore``: random fault schedules on a real cluster, the model as the oracle at every step;
what differs is confirmed by replay on a fresh cluster and shrunk by replay to a runnable scenario.

    elr explore --budget 30m [--kafka-version 4.4.0 | --kafka-dist kafka_2.13-X.tgz] [--seed 1] [--profile kafka]
                [--kinds isolate,power_off,...] [--steps 8] [--out .elr-explore]
                [--mutant NAME]    # plant a defect in the oracle: the exploration must find it
                [--kafka-mutant ID]  # plant a bug in Kafka's own code (elr kafka-mutants list)

Each schedule comes from the property search's state machine (every action of the language,
Hypothesis-seeded), is written as a scenario with the model's verdict and run with the executor's
own check: every observed field after every fault and every produce's outcome held to the model,
the invariants on the cluster's observations, acknowledged records by presence. A run is

* ``agrees``: nothing differs;
* ``documented``: it differs only where the profile or the step declares it (with the reason);
* ``finding``: an undeclared difference (``liveness:no-leader`` when the model has a leader and the
  cluster still has none once the settle timeout ran out), an invariant broken, or acknowledged
  records lost where the profile promises none -- replayed ``--confirm`` times on a fresh cluster (a finding no replay
  reproduces is reported as flaky, with its evidence), then shrunk by replay (delta debugging) and
  written under ``<out>/findings/`` as a ``*.elr.yaml`` expecting the model's state at every step;
* ``harness error``: the backend broke (never counted as a finding).

At the end: counts, schedules per hour, findings, and the protocol states reached on the model and
on the cluster (``coverage.py``), in ``<out>/summary.json`` and on the terminal; the findings' runs
are in ``<out>/report.html``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from pytest_elr.actions import ACTIONS, Action, Heal, Lifecycle, MoveLogDir, Restart, Resume
from pytest_elr.backends import load_backend
from pytest_elr.backends.base import Backend
from pytest_elr.backends.model import ModelBackend
from pytest_elr.core.commandline import command_parser
from pytest_elr.core.concurrency import parallel_count, sigterm_interrupts, whole_lines
from pytest_elr.core.errors import BackendError, ScenarioError
from pytest_elr.core.history import Run
from pytest_elr.core.limits import MAX_PARTITIONS
from pytest_elr.core.specs import ClusterSpec, TopicSpec, rotated_assignment
from pytest_elr.model import build_model
from pytest_elr.model.alternatives import Alternatives
from pytest_elr.model.cluster import ModelError
from pytest_elr.model.mutants import MUTANTS
from pytest_elr.model.profiles import PROFILE_NAMES, Profile, get_profile
from pytest_elr.scenario.executor import RunResult, run_scenario
from pytest_elr.scenario.export import expectation_of, scenario_yaml
from pytest_elr.scenario.loader import load_scenario
from pytest_elr.scenario.schema import Scenario
from pytest_elr.schedule.coverage import State, describe, state_of, states_of_events
from pytest_elr.schedule.search import (
    BROKERS,
    MIN_ISR,
    QUORUM,
    SearchConfig,
    default_kinds,
    machine_for,
    run_machine,
)
from pytest_elr.schedule.shrink import shrink
from pytest_elr.sut.capacity import cluster_slots

T = TypeVar("T")

MAX_BUDGET_S = 7 * 24 * 3600.0
MAX_STEPS = 40
MAX_CONFIRM = 10
MAX_SHRINK_REPLAYS = 200


@dataclass
class Finding:
    signature: str
    first: RunResult
    scenario_path: Path
    actions: list[Action]
    confirmed: int = 0
    replays: int = 0
    shrunk_path: Path | None = None
    shrunk_actions: list[Action] = field(default_factory=list)
    shrink_replays: int = 0
    #: seconds spent confirming, and shrinking and writing (the time from finding to shrunk YAML)
    confirm_s: float = 0.0
    shrink_s: float = 0.0

    @property
    def flaky(self) -> bool:
        return self.replays > 0 and self.confirmed == 0

    def as_dict(self) -> dict[str, Any]:
        return {"signature": self.signature, "scenario": str(self.scenario_path), "actions": len(self.actions),
                "confirmed": f"{self.confirmed}/{self.replays}", "flaky": self.flaky,
                "shrunk": str(self.shrunk_path) if self.shrunk_path else None,
                "shrunk_actions": len(self.shrunk_actions), "shrink_replays": self.shrink_replays,
                "confirm_s": round(self.confirm_s, 1), "shrink_s": round(self.shrink_s, 1),
                "message": self.first.message.splitlines()[:12], "history": str(self.first.history_dir)}


@dataclass
class Exploration:
    """What one exploration saw; ``summary()`` is what it prints and saves."""

    started: float = field(default_factory=time.monotonic)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("agrees", "documented", "finding", "harness error"), 0))
    findings: dict[str, Finding] = field(default_factory=dict)
    model_states: set[State] = field(default_factory=set)
    cluster_states: set[State] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)
    #: every finding run by signature (``findings`` keeps the first of each)
    signatures: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        hours = max(time.monotonic() - self.started, 1e-9) / 3600
        runs = sum(self.counts.values())
        return {
            "runs": runs, **self.counts, "schedules_per_hour": round(runs / hours, 1),
            "action_kinds": sorted(self.kinds),
            "states_model": len(self.model_states), "states_cluster": len(self.cluster_states),
            "states_only_on_model": sorted(describe(s) for s in self.model_states - self.cluster_states),
            "states_only_on_cluster": sorted(describe(s) for s in self.cluster_states - self.model_states),
            "finding_signatures": dict(sorted(self.signatures.items())),
            "findings": [f.as_dict() for f in self.findings.values()],
        }


def classify(result: RunResult, outcome: str) -> str:
    if outcome == "error":
        return "harness error"
    if not result.passed:
        return "finding"
    return "documented" if result.declared else "agrees"


#: the model has a leader once it settled (every timeout of the protocol fired: the broker session
#: timeout, the replica lag time, the controller's election) and the cluster still has none when
#: the settle timeout ran out (on Kafka 30 s + 2 session timeouts: 36 s where the protocol needs
#: about 3 s): no leader for longer than the protocol allows
LIVENESS_NO_LEADER = "liveness:no-leader"


def signature(result: RunResult) -> str:
    """What kind of difference a failed run shows: the same finding twice has the same signature.
    The first difference decides (a later one is often its consequence)."""
    if result.disagreements:
        d = result.disagreements[0]
        if d["field"] == "leader" and d["model"] is not None and d["observed"] is None:
            return LIVENESS_NO_LEADER
        return f"differs:{d['field']}"
    for v in result.violations:
        m = re.search(r"invariant (\w+)", v)
        return f"invariant:{m.group(1) if m else v[:40]}"
    m = re.search(r"step \S+ \([^)]*\): (\w+)", result.message)
    if m:
        return f"expectation:{m.group(1)}"
    return "verdict:" + ("loss" if "LOST" in result.message or "lost" in result.message else "other")


# --- schedules ----------------------------------------------------------------------------------


def schedules(profile: Profile, seed_value: int, steps: int, kinds: frozenset[str] | None,
              brokers: tuple[int, ...] = BROKERS, min_isr: int = MIN_ISR,
              controllers: int = 1, partitions: int = 1, spare: bool = False) -> Iterator[list[Action]]:
    """Schedules the property search's machine draws, seed by seed: each with acks=all records at
    stake and at least two kinds of fault, only ``kinds`` when given, each schedule once; on
    ``controllers`` > 1, controller faults too; on ``partitions`` > 1, faults aimed at the leader
    of any partition and operator requests naming any partition; with a ``spare`` broker (one
    more, holding no replica), its metadata held (``hold_metadata``) and leaders' clean shutdowns
    begun during the hold."""
    seen: set[tuple[Action, ...]] = set()
    batch: list[list[Action]] = []

    config = SearchConfig(profile=profile, brokers=brokers, min_isr=min_isr, controllers=controllers,
                          partitions=partitions, spare=spare, kinds=default_kinds(controllers, partitions))

    class Collect(machine_for(config)):  # type: ignore[misc]
        def teardown(self) -> None:
            actions = list(self.actions)
            used = {a.kind for a in actions}
            acked = any(a.kind == "produce" and getattr(a, "acks", None) == "all" for a in actions)
            faults = used - {"produce", "heal", "flush", "wait"}
            if acked and len(faults) >= 2 and (kinds is None or used - {"produce"} <= kinds) \
                    and tuple(actions) not in seen:
                seen.add(tuple(actions))
                batch.append(actions)

        def protocol_invariants(self) -> None:  # the oracle's own check does not stop the drawing
            return None

    for s in range(seed_value, seed_value + 1_000_000):
        batch.clear()
        run_machine(Collect, 100, steps, seed_value=s)
        # the longest first: the machine tries small examples first, exploration wants depth
        yield from sorted(batch, key=len, reverse=True)


def finale_actions(actions: list[Action]) -> list[Action]:
    """The executor's finale as explicit actions (heal every link, resume, restart), so a written
    finding expects the state there too: a difference often shows only once everything is back."""
    life: dict[int, Lifecycle] = {}
    for action in actions:
        life.update(action.transitions())
    return [Heal(links=None), *(Resume(broker=b) for b, s in sorted(life.items()) if s == "paused"),
            *(Restart(broker=b) for b, s in sorted(life.items()) if s == "down")]


def model_trace(actions: list[Action], cluster: ClusterSpec, topic: TopicSpec,
                oracle: Profile) -> list[dict[str, Any]] | None:
    """The model's state after each action, as a step's expectations: the fields on which every
    state the model allows there agrees (where timing decides, e.g. which of two lagging followers
    left the ISR first, the field is left to the executor's hold on the set); None: the model
    refuses one."""
    states = Alternatives([build_model(cluster, topic, oracle)])
    out = []
    for action in actions:
        try:
            states.apply(action)
        except ModelError:
            return None
        each = [expectation_of(state.observe()) for state in states.states]
        agreed = {k: v for k, v in each[0].items() if k != "partitions" and all(_same(e[k], v) for e in each)}
        if "partitions" in each[0]:  # field by field within each partition, likewise
            agreed["partitions"] = {p: {k: v for k, v in fields.items()
                                        if all(_same(e["partitions"][p][k], v) for e in each)}
                                    for p, fields in each[0]["partitions"].items()}
            agreed["partitions"] = {p: f for p, f in agreed["partitions"].items() if f}
        out.append(agreed)
    return out


def _same(a: Any, b: Any) -> bool:
    return sorted(a) == sorted(b) if isinstance(a, list) and isinstance(b, list) else a == b


def write_scenario(path: Path, name: str, description: str, actions: list[Action], cluster: ClusterSpec,
                   topic: TopicSpec, profile: str, oracle: Profile, expect: bool,
                   model_must_pass: bool = True) -> Scenario | None:
    """``actions`` as a scenario whose verdict is the model's; None when the model refuses the
    schedule, or (``model_must_pass``) cannot pass it whatever the verdict (a lossy fault that took
    nothing). A finding is written whether or not its oracle passes it: a planted defect breaks the
    invariants checked on the observed state, which is how the finding shows."""
    trace = model_trace(actions, cluster, topic, oracle)
    if trace is None:
        return None
    expectations = trace if expect else None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(scenario_yaml(name, description, cluster, topic, actions, {profile: "none"}, expectations,
                                  profiles=[profile]))
    try:
        model_run = run_scenario(load_scenario(path), ModelBackend(rules=oracle.rules), profile)
        verdict = "found" if model_run.verdict is not None and model_run.verdict.lost_count else "none"
        path.write_text(scenario_yaml(name, description, cluster, topic, actions, {profile: verdict}, expectations,
                                      profiles=[profile]))
        scenario = load_scenario(path)
    except ScenarioError:
        path.unlink(missing_ok=True)
        return None
    if model_must_pass and not run_scenario(scenario, ModelBackend(rules=oracle.rules), profile).passed:
        path.unlink(missing_ok=True)
        return None
    return scenario


# --- the exploration ------------------------------------------------------------------------------


@dataclass
class Explorer:
    backend: type[Backend]
    version: str | None
    profile: str
    oracle: Profile
    out: Path
    cluster: ClusterSpec
    topic: TopicSpec
    confirm: int = 2
    shrink_replays: int = 30
    say: Callable[[str], None] = print
    seen: Exploration = field(default_factory=Exploration)
    mutant: str | None = None
    kafka_mutant: str | None = None

    @property
    def planted(self) -> str:
        model = f" with the planted defect {self.mutant} (elr explore --mutant)" if self.mutant else ""
        kafka = f" with Kafka mutant {self.kafka_mutant} (elr explore --kafka-mutant)" if self.kafka_mutant else ""
        return model + kafka

    def run(self, scenario: Scenario, session: Any, where: Path) -> tuple[RunResult, str]:
        result = run_scenario(scenario, self.backend(session=session, version=self.version), self.profile, where,
                              oracle=self.oracle)
        outcome = Run.read(result.history_dir).outcome if result.history_dir else "error"
        return result, outcome

    def guarded(self, name: str, where: Path, run: Callable[[], T]) -> T | None:
        """``run()``, or None after saying why it failed: the harness (a ``BackendError``) or a bug of
        pytest-elr (any other exception, its traceback kept in ``where``). Either way not a verdict,
        and never the end of a long exploration."""
        try:
            return run()
        except BackendError as exc:
            if not self._stop.is_set():  # else its cluster was closed under it by the interrupt
                self.say(f"{name}: harness error: {exc}")
        except Exception as exc:  # noqa: BLE001 - a bug of the harness must not end the exploration
            if not self._stop.is_set():
                where.mkdir(parents=True, exist_ok=True)
                trace = where / f"{re.sub(r'[^A-Za-z0-9._-]+', '-', name.strip())}.traceback.txt"
                trace.write_text(traceback.format_exc())
                self.say(f"{name}: harness error (a bug of pytest-elr, traceback in {trace}): "
                         f"{type(exc).__name__}: {exc}")
        return None

    def fresh_run(self, scenario: Scenario, where: Path) -> tuple[RunResult, str]:
        """On a cluster of its own (a fresh pool), closed afterwards: a replay shares nothing."""
        if self._stop.is_set():
            raise KeyboardInterrupt("the exploration was interrupted")
        session = self._open(self.backend.new_session())
        try:
            return self.run(scenario, session, where)
        finally:
            self._close(session)

    def __post_init__(self) -> None:
        self.say = whole_lines(self.say)  # several schedules at once: each line whole
        self._lock = threading.RLock()  # guards ``seen`` and the findings being followed up
        self._following: set[str] = set()
        self._stop = threading.Event()  # set on an interrupt: the workers record nothing more
        self._live: set[Any] = set()  # every session open now, closed by an interrupt

    def explore(self, stream: Iterator[list[Action]], deadline: float, parallel: int = 1) -> Exploration:
        """Schedules from ``stream`` until it ends or the deadline passes, ``parallel`` at once, each
        worker on a session of its own. They are drawn here, in order (the schedules, and their names
        ``explore-<n>``, depend on the seed alone), each when a worker is free."""
        free: list[Any] = []  # sessions no worker uses now
        slots = threading.Semaphore(parallel)

        def one(n: int, actions: list[Action]) -> None:
            with self._lock:
                session = free.pop() if free else self._open(self.backend.new_session())
            try:
                self._explore_one(f"explore-{n}", actions, session)
            finally:
                with self._lock:
                    free.append(session)
                slots.release()

        self._stop.clear()
        futures: list[Future[None]] = []
        pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="explore")
        try:
            with sigterm_interrupts():
                for n in itertools.count(1):
                    slots.acquire()
                    actions = next(stream, None) if time.monotonic() < deadline else None
                    if actions is None:
                        break
                    futures.append(pool.submit(one, n, actions))
                for future in futures:
                    future.result()
        except BaseException:
            # Ctrl-C or SIGTERM: every cluster goes now (a worker's next call fails and it ends)
            self._stop.set()
            self._close_all()
            raise
        finally:
            pool.shutdown(wait=True)
            self._close_all()
        return self.seen

    def _open(self, session: Any) -> Any:
        if session is not None:
            with self._lock:
                self._live.add(session)
        return session

    def _close(self, session: Any) -> None:
        if session is not None:
            with self._lock:
                self._live.discard(session)
            session.close()

    def _close_all(self) -> None:
        with self._lock:
            sessions = list(self._live)
        for session in sessions:
            with contextlib.suppress(Exception):
                self._close(session)

    def _explore_one(self, name: str, actions: list[Action], session: Any) -> None:
        """One drawn schedule on ``session``: run, classified, counted; a new finding followed up."""
        scenario = write_scenario(self.out / "schedules" / f"{name}.elr.yaml", name,
                                  "a schedule drawn by elr explore", actions, self.cluster, self.topic,
                                  self.profile, self.oracle, expect=False)
        if scenario is None:
            return
        model_states = self._model_states(actions)
        ran = self.guarded(name, self.out / "runs", partial(self.run, scenario, session, self.out / "runs"))
        if self._stop.is_set():
            return
        with self._lock:
            self.seen.kinds |= {a.kind for a in actions}
            self.seen.model_states |= model_states
            if ran is None:
                self.seen.counts["harness error"] += 1
                return
            result, outcome = ran
            kind = classify(result, outcome)
            self.seen.counts[kind] += 1
            if result.history_dir:
                self.seen.cluster_states |= states_of_events(Run.read(result.history_dir).events,
                                                             self.topic.min_insync_replicas)
            line = f"{name} ({len(actions)} actions): {kind}"
            sig = signature(result) if kind == "finding" else None
            follow = False
            if sig is not None:
                self.seen.signatures[sig] = self.seen.signatures.get(sig, 0) + 1
                line += f" [{sig}]"
                follow = sig not in self.seen.findings and sig not in self._following
                self._following.add(sig)
            self.say(line)
        if sig is not None and follow:
            found = self._follow_up(sig, result, actions, scenario)
            with self._lock:
                self.seen.findings[sig] = found

    def _model_states(self, actions: list[Action]) -> set[State]:
        """The states the oracle passes through, the finale's included (the cluster's are read from
        its history, which has the finale's observations too)."""
        model = build_model(self.cluster, self.topic, self.oracle)
        lossy = False
        states: set[State] = set()
        for action in actions + finale_actions(actions):
            try:
                model.apply(action)
            except ModelError:
                break
            lossy = lossy or action.lossy
            states.add(state_of(model.observe().as_event(), self.topic.min_insync_replicas, lossy))
        return states

    def _follow_up(self, sig: str, result: RunResult, actions: list[Action], scenario: Scenario) -> Finding:
        """Confirm on fresh clusters, then shrink by replay, then write the minimal scenario."""
        found = Finding(sig, result, Path(scenario.path), actions)
        where = self.out / "findings" / re.sub(r"[^A-Za-z0-9._-]+", "-", sig)
        started = time.monotonic()
        for _ in range(self.confirm):
            found.replays += 1
            ran = self.guarded(f"  replay {found.replays}", where / "confirm",
                               partial(self.fresh_run, scenario, where / "confirm"))
            if ran is None:  # not a reproduction
                continue
            again, outcome = ran
            found.confirmed += classify(again, outcome) == "finding" and signature(again) == sig
        found.confirm_s = time.monotonic() - started
        self.say(f"  confirmed {found.confirmed}/{found.replays} on fresh clusters ({found.confirm_s:.0f} s)")
        if found.replays and not found.confirmed:
            self.say("  FLAKY: no replay reproduced it (kept, with its history)")
            return found
        counter = [0]

        def still_fails(candidate: list[Action]) -> bool | None:
            counter[0] += 1
            path = where / "shrink" / f"candidate-{counter[0]}.elr.yaml"
            cand = write_scenario(path, f"{sig}-candidate-{counter[0]}", "a shrink candidate", candidate,
                                  self.cluster, self.topic, self.profile, self.oracle, expect=False)
            if cand is None:
                return None
            ran = self.guarded(f"  shrink candidate {counter[0]}", where / "shrink",
                               partial(self.fresh_run, cand, where / "shrink"))
            if ran is None:  # not the same finding
                return False
            again, outcome = ran
            return classify(again, outcome) == "finding" and signature(again) == sig

        shrunk = shrink(actions, still_fails, self.shrink_replays)
        found.shrunk_actions, found.shrink_replays = shrunk.items, shrunk.replays
        final = where / "finding.elr.yaml"
        written = write_scenario(final, re.sub(r"[^A-Za-z0-9-]+", "-", f"finding-{sig}").strip("-"),
                                 f"found by elr explore ({sig}); shrunk from {len(actions)} to "
                                 f"{len(shrunk.items)} actions in {shrunk.replays} replays; the expectations "
                                 f"are the oracle's{self.planted}",
                                 shrunk.items + finale_actions(shrunk.items), self.cluster, self.topic, self.profile,
                                 self.oracle, expect=True, model_must_pass=False)
        found.shrunk_path = final if written is not None else None
        found.shrink_s = time.monotonic() - started - found.confirm_s
        self.say(f"  shrunk {len(actions)} -> {len(shrunk.items)} actions ({shrunk.replays} replays, "
                 f"{found.shrink_s:.0f} s): {final}")
        return found


def parse_budget(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(s|m|h)?", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a duration such as 90s, 30m or 2h")
    seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
    if not 0 < seconds <= MAX_BUDGET_S:
        raise argparse.ArgumentTypeError(f"{text!r}: between 1s and {MAX_BUDGET_S / 86400:.0f} days")
    return seconds


def bounded(name: str, low: int, high: int) -> Callable[[str], int]:
    def read(text: str) -> int:
        if not re.fullmatch(r"\d{1,6}", text) or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"{name}: expected a whole number from {low} to {high}, got {text!r}")
        return int(text)
    return read


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("explore", __doc__)
    parser.add_argument("--budget", type=parse_budget, default=parse_budget("30m"),
                        help="time for exploring (confirming and shrinking a finding may run past it)")
    parser.add_argument("--backend", default="kafka", help="the system under test (default: kafka)")
    parser.add_argument("--kafka-version", default=None, help="the release under test (default: the backend's)")
    parser.add_argument("--kafka-dist", default=None, metavar="PATH",
                        help="a Kafka distribution of your own to explore (a release tarball such as `./gradlew "
                             "releaseTarGz` makes, or a directory with libs/); its version is the release under test")
    parser.add_argument("--seed", type=bounded("--seed", 0, 999_999), default=0)
    parser.add_argument("--profile", choices=PROFILE_NAMES, default="kafka")
    parser.add_argument("--kinds", default=None, help="action kinds to draw from, comma separated (default: all)")
    parser.add_argument("--steps", type=bounded("--steps", 2, MAX_STEPS), default=8, help="actions per schedule")
    parser.add_argument("--confirm", type=bounded("--confirm", 0, MAX_CONFIRM), default=2,
                        help="replays of a finding on fresh clusters")
    parser.add_argument("--shrink-replays", type=bounded("--shrink-replays", 0, MAX_SHRINK_REPLAYS), default=30)
    parser.add_argument("--mutant", choices=sorted(MUTANTS), default=None,
                        help="plant this defect in the oracle (proves the exploration finds a planted bug)")
    parser.add_argument("--kafka-mutant", default=None, metavar="ID",
                        help="plant this mutant of Kafka's code in every cluster (an id of `elr kafka-mutants list`): "
                             "hunt a mutant the suite does not kill, the model as the oracle")
    parser.add_argument("--controllers", type=int, choices=(1, QUORUM), default=1,
                        help=f"KRaft controllers of the cluster; with {QUORUM}, schedules stop, restart and isolate "
                             "controllers too (default: 1)")
    parser.add_argument("--partitions", type=bounded("--partitions", 1, MAX_PARTITIONS), default=1,
                        help="partitions of the topic, leaders spread over the brokers; with more than one, "
                             "faults are aimed at any partition's leader too (default: 1)")
    parser.add_argument("--spare-broker", action="store_true",
                        help="a fourth broker, holding no replica of the topic: schedules hold its metadata "
                             "(hold_metadata) and begin leaders' shutdowns during the hold")
    parser.add_argument("--out", type=Path, default=Path(".elr-explore"))
    parser.add_argument("--parallel", type=parallel_count, default=None,
                        help="schedules at once, each on a session (cluster pool) of its own (default: the clusters "
                             "this machine carries, pytest_elr.sut.capacity.cluster_slots)")
    args = parser.parse_args(argv)
    if args.kafka_mutant:
        from pytest_elr.sut.instrument import MUTANT_ENV, mutant_class

        try:
            mutant_class(args.kafka_mutant)
        except ValueError as exc:
            parser.error(f"--kafka-mutant: {exc}")
        if args.backend != "kafka":
            parser.error("--kafka-mutant plants a bug in Kafka: it needs --backend kafka")
        os.environ[MUTANT_ENV] = args.kafka_mutant  # every cluster of this process, replays included
    if args.kafka_dist:
        from pytest_elr.sut.errors import SutError
        from pytest_elr.sut.images import load_dist
        from pytest_elr.sut.kafka_dist import DIST_ENV

        if args.backend != "kafka" or args.kafka_version:
            parser.error("--kafka-dist runs on --backend kafka, without --kafka-version (its version is the release)")
        try:
            dist = load_dist(args.kafka_dist)
        except SutError as exc:
            parser.error(f"--kafka-dist: {exc}")
        os.environ[DIST_ENV] = str(dist.source)  # every cluster of this process, replays included
        args.kafka_version = dist.release
    try:
        backend = load_backend(args.backend)
    except BackendError as exc:
        parser.error(str(exc))
    kinds = frozenset(args.kinds.split(",")) if args.kinds else None
    if kinds is not None and kinds - set(ACTIONS):
        parser.error(f"--kinds: unknown {', '.join(sorted(kinds - set(ACTIONS)))}; known: {', '.join(ACTIONS)}")
    if args.profile not in backend.profiles:
        parser.error(f"--profile {args.profile}: the {backend.name} backend runs {', '.join(sorted(backend.profiles))}")
    oracle = get_profile(args.profile)
    if args.mutant:
        oracle = replace(oracle, rules=MUTANTS[args.mutant])
    args.out.mkdir(parents=True, exist_ok=True)
    # two log dirs a broker, so that a drawn move between them runs, and every schedule on one cluster shape
    explorer = Explorer(backend, args.kafka_version, args.profile, oracle, args.out,
                        ClusterSpec(brokers=SearchConfig(oracle, spare=args.spare_broker).cluster_brokers,
                                    log_dirs=MoveLogDir.log_dirs_needed,
                                    controllers=args.controllers),
                        TopicSpec(name="explore", replicas=BROKERS, min_insync_replicas=MIN_ISR,
                                  more_partitions=rotated_assignment(BROKERS, args.partitions)[1:]),
                        confirm=args.confirm, shrink_replays=args.shrink_replays, mutant=args.mutant,
                        kafka_mutant=args.kafka_mutant)
    parallel = args.parallel or cluster_slots()
    print(f"exploring {args.backend} {args.kafka_version or ''} under {args.profile}{explorer.planted} "
          f"for {args.budget:.0f} s (seed {args.seed}, {parallel} at once)", flush=True)
    interrupted = False
    try:
        explorer.explore(schedules(oracle, args.seed, args.steps, kinds, controllers=args.controllers,
                                   partitions=args.partitions, spare=args.spare_broker),
                         time.monotonic() + args.budget,
                         parallel=parallel)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the clusters are gone; keep what was seen
        interrupted = True
        print("interrupted: the summary of what ran", flush=True)
    summary = {**explorer.seen.summary(), "interrupted": interrupted}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    _print(summary)
    histories = [Path(f["history"]) for f in summary["findings"] if f["history"] != "None"]
    if histories:
        from pytest_elr.report import build_report

        print(f"report: {build_report(histories, args.out / 'report.html').resolve()}")
    if interrupted:
        return 130
    return 1 if any(not f["flaky"] for f in summary["findings"]) else 0


def _print(summary: dict[str, Any]) -> None:
    print(f"\n{summary['runs']} schedules ({summary['schedules_per_hour']}/h): {summary['agrees']} agree, "
          f"{summary['documented']} differ only as documented, {summary['finding']} findings, "
          f"{summary['harness error']} harness errors")
    print(f"states reached: {summary['states_model']} on the model, {summary['states_cluster']} on the cluster; "
          f"action kinds drawn: {', '.join(summary['action_kinds'])}")
    if summary["finding_signatures"]:
        print("findings by class: " + ", ".join(f"{sig} {n}" for sig, n in summary["finding_signatures"].items()))
    for f in summary["findings"]:
        print(f"finding {f['signature']}: confirmed {f['confirmed']}{' FLAKY' if f['flaky'] else ''}, "
              f"shrunk to {f['shrunk_actions']} actions: {f['shrunk']}")


if __name__ == "__main__":
    sys.exit(main())
