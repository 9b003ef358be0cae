"""``elr explore`` end to end on a system that runs in milliseconds (the model as a system under
test, held to a shadow model exactly as Kafka is), and its pure parts: delta debugging, coverage.

The real-cluster exploration is a long job (docs/explore.md gives its commands and results); here
the pipeline is proved: a planted oracle defect is found, confirmed on fresh systems, shrunk and
written as a scenario that fails with the defect and passes without it; a correct oracle finds
nothing."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from fake_backend import Fake

from pytest_elr.actions import Action
from pytest_elr.core.errors import BackendError
from pytest_elr.core.nodes import controller_of
from pytest_elr.core.observation import Observation, Result
from pytest_elr.core.specs import ClusterSpec, TopicSpec
from pytest_elr.model.mutants import MUTANTS
from pytest_elr.model.profiles import get_profile
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario
from pytest_elr.schedule.coverage import state_of, states_of_events
from pytest_elr.schedule.explore import (
    LIVENESS_NO_LEADER,
    Exploration,
    Explorer,
    classify,
    schedules,
    signature,
    write_scenario,
)
from pytest_elr.schedule.shrink import shrink

CLUSTER = ClusterSpec(brokers=(0, 1, 2))
TOPIC = TopicSpec(name="explore", replicas=(0, 1, 2), min_insync_replicas=2)
MUTANT = "elr-not-cleared-at-min-isr"


def explorer(tmp_path: Path, mutant: str | None, lines: list[str]) -> Explorer:
    oracle = get_profile("kafka")
    if mutant:
        oracle = replace(oracle, rules=MUTANTS[mutant])
    return Explorer(Fake, None, "kafka", oracle, tmp_path, CLUSTER, TOPIC, confirm=2, shrink_replays=30,
                    say=lines.append, mutant=mutant)


def test_a_planted_defect_is_found_confirmed_and_shrunk(tmp_path: Path) -> None:
    lines: list[str] = []
    ex = explorer(tmp_path, MUTANT, lines)
    seen = ex.explore(itertools.islice(schedules(ex.oracle, 0, 8, None), 60), time.monotonic() + 120)
    assert seen.counts["finding"] >= 1, lines
    finding = next(iter(seen.findings.values()))
    assert finding.signature == "differs:elr" and finding.confirmed == finding.replays == 2
    assert finding.shrunk_path is not None and len(finding.shrunk_actions) <= 5
    assert len(finding.shrunk_actions) < len(finding.actions) or len(finding.actions) <= 3
    written = load_scenario(finding.shrunk_path)
    # the written scenario expects the (defective) oracle's state: the correct system fails it ...
    assert not run_scenario(written, Fake(), "kafka").passed
    # ... while the same actions expecting the correct model's states pass: the finding is the defect
    actions = [a for step in written.steps for a in step.actions]
    correct = write_scenario(tmp_path / "correct.elr.yaml", "correct", "", actions, CLUSTER, TOPIC, "kafka",
                             get_profile("kafka"), expect=True)
    assert correct is not None and run_scenario(correct, Fake(), "kafka").passed


def test_a_correct_oracle_finds_nothing(tmp_path: Path) -> None:
    lines: list[str] = []
    ex = explorer(tmp_path, None, lines)
    # 40 drawn for >= 20 run (some fail the model's own filter); the draws of seed 0 are the same in
    # any session since they depend on the seed alone (tests/test_draws.py)
    seen = ex.explore(itertools.islice(schedules(ex.oracle, 0, 8, None), 40), time.monotonic() + 120)
    assert seen.counts["finding"] == 0 and seen.counts["agrees"] + seen.counts["documented"] >= 20, lines
    summary = seen.summary()
    assert summary["states_model"] >= 5 and summary["states_only_on_cluster"] == []


def test_schedules_are_reproducible_and_respect_the_kinds() -> None:
    oracle = get_profile("kafka")
    first = list(itertools.islice(schedules(oracle, 7, 8, None), 5))
    assert first == list(itertools.islice(schedules(oracle, 7, 8, None), 5))
    only = frozenset({"cut", "power_off", "restart", "heal"})
    for schedule in itertools.islice(schedules(oracle, 7, 8, only), 5):
        assert {a.kind for a in schedule} - {"produce"} <= only



@pytest.mark.parametrize("profile", ["kafka", "kip966"])
def test_drawn_cluster_wide_min_isr_updates_are_written_loaded_and_passed(profile: str, tmp_path: Path) -> None:
    """``elr explore`` draws ``set_cluster_min_isr`` (a kind of the search's ``KINDS``): a schedule
    holding one is written with the model's state at every step, loads back to the same actions,
    and the model (``Fake``) passes it, under the profile that clears every ELR at the update and
    under the one it changes nothing for."""
    oracle = get_profile(profile)
    drawn = [s for s in itertools.islice(schedules(oracle, 0, 8, None), 40)
             if any(a.kind == "set_cluster_min_isr" for a in s)]
    assert drawn, "seed 0 draws no cluster-wide min ISR update"
    written = 0
    for n, actions in enumerate(drawn):
        scenario = write_scenario(tmp_path / f"cluster-{n}.elr.yaml", f"cluster-{n}", "drawn", actions, CLUSTER,
                                  TOPIC, profile, oracle, expect=True)
        if scenario is None:  # the model cannot pass it (a lossy fault that took nothing): explore skips it too
            continue
        written += 1
        assert [a for step in load_scenario(scenario.path).steps for a in step.actions] == actions
        assert run_scenario(scenario, Fake(), profile).passed
    assert written >= 1, drawn

def test_ddmin_finds_the_two_culprits_within_its_budget() -> None:
    calls: list[list[int]] = []

    def fails(candidate: list[int]) -> bool:
        calls.append(candidate)
        return 3 in candidate and 11 in candidate

    out = shrink(list(range(16)), fails, budget=100)
    assert out.items == [3, 11] and out.replays == len(calls)
    assert shrink(list(range(16)), fails, budget=3).replays == 3  # a budget is a budget


def test_ddmin_skips_refused_candidates_without_spending_replays() -> None:
    # a candidate without 0 is "impossible" (refused); the failure needs 5
    out = shrink(list(range(8)), lambda c: None if 0 not in c else 5 in c, budget=50)
    assert out.items == [0, 5] and out.refused > 0


def test_states_tell_the_regions_apart() -> None:
    leaderless = {"leader": None, "isr": [], "elr": [1, 2], "last_known_elr": [2], "fenced": [0]}
    assert state_of(leaderless, 2, True) == ("none", "below", 2, 1, 1, True)
    assert state_of({"leader": 0, "isr": [0, 1], "elr": [], "fenced": []}, 2, False)[:2] == ("in-isr", "at")
    events = [{"type": "observe", **leaderless}, {"type": "fault", "action": "power_off"},
              {"type": "observe", **leaderless}]
    assert states_of_events(events, 2) == {("none", "below", 2, 1, 1, False), ("none", "below", 2, 1, 1, True)}


@pytest.mark.parametrize(("args", "says"), [
    (["--budget", "soon"], "expected a duration such as 90s, 30m or 2h"),
    (["--budget", "9999h"], "between 1s and 7 days"),
    (["--kinds", "cut,teleport"], "--kinds: unknown teleport"),
    (["--steps", "1000"], "--steps: expected a whole number from 2 to 40"),
    (["--backend", "nowhere"], "unknown backend 'nowhere'"),
])
def test_bad_options_are_usage_errors(args: list[str], says: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_elr", "explore", *args, "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr


class NoLeaderAfterFailover(Fake):
    """Never elects a new leader once the first one is fenced (a liveness failure)."""

    def observe(self) -> Observation:
        obs = super().observe()
        return replace(obs, leader=None) if obs.fenced and obs.leader != 0 else obs


class LeaderWhereNoneIsAllowed(Fake):
    """Reports the last leader as leader while every replica is fenced (a safety difference)."""

    def observe(self) -> Observation:
        obs = super().observe()
        return replace(obs, leader=0) if obs.leader is None else obs


FAILOVER = """
name: failover
profiles: [kafka]
cluster: {brokers: 3}
topic: {name: t, replicas: [0, 1, 2], min_insync_replicas: 2}
steps:
  - at: setup
    do: [{produce: {count: 2, acks: all}}]
  - at: leader-crash
    do: [{crash: 0}]
  - at: all-crash
    do: [{crash: 1}, {crash: 2}]
verdict: {acked_loss: none}
"""


def test_no_leader_where_the_model_has_one_is_a_liveness_finding(tmp_path: Path) -> None:
    path = tmp_path / "failover.elr.yaml"
    path.write_text(FAILOVER)
    scenario = load_scenario(path)
    stuck = run_scenario(scenario, NoLeaderAfterFailover(), "kafka", tmp_path)
    assert classify(stuck, "failed") == "finding" and signature(stuck) == LIVENESS_NO_LEADER
    # a leader where the model has none is a safety difference, not liveness
    wrong = run_scenario(scenario, LeaderWhereNoneIsAllowed(), "kafka", tmp_path)
    assert signature(wrong) == "differs:leader"
    assert run_scenario(scenario, Fake(), "kafka", tmp_path).passed


def test_the_summary_counts_findings_by_class() -> None:
    seen = Exploration()
    seen.counts["finding"] = 3
    seen.signatures = {LIVENESS_NO_LEADER: 2, "differs:elr": 1}
    assert seen.summary()["finding_signatures"] == {"differs:elr": 1, "liveness:no-leader": 2}


class BrokenOnFlush(Fake):
    """A harness bug: the backend raises something other than a BackendError on every flush."""

    def apply(self, action: Action) -> Result:
        if action.kind == "flush":
            raise AttributeError("'KafkaError' object has no attribute 'args'")
        return super().apply(action)


def test_a_harness_bug_is_a_harness_error_and_the_exploration_goes_on(tmp_path: Path) -> None:
    lines: list[str] = []
    ex = Explorer(BrokenOnFlush, None, "kafka", get_profile("kafka"), tmp_path, CLUSTER, TOPIC, confirm=1,
                  shrink_replays=0, say=lines.append)
    flushing = [a for a in itertools.islice(schedules(ex.oracle, 0, 8, None), 60) if any(x.kind == "flush" for x in a)]
    plain = [a for a in itertools.islice(schedules(ex.oracle, 0, 8, None), 60) if all(x.kind != "flush" for x in a)
             # ones the exploration runs (it skips those the model cannot pass): they must be seen to run
             and write_scenario(tmp_path / "probe.elr.yaml", "probe", "", a, CLUSTER, TOPIC, "kafka", ex.oracle,
                                expect=False) is not None]
    assert flushing and plain
    seen = ex.explore(iter(flushing[:3] + plain[:3]), time.monotonic() + 120)
    errors = [line for line in lines if "harness error" in line and "AttributeError" in line]
    # every flushing schedule the model passes is a harness error; the ones after it still run
    assert errors and seen.counts["harness error"] == len(errors) and seen.counts["finding"] == 0, lines
    assert lines[-1].endswith(("agrees", "documented")), lines  # the exploration went on past them
    traces = sorted(tmp_path.rglob("*.traceback.txt"))  # each bug's traceback is kept for its fix
    assert len(traces) == len(errors) and all("AttributeError" in t.read_text() for t in traces), traces


# --- --parallel ------------------------------------------------------------------------------------


class Gate:
    """A session: ``closed`` is set when its owner closes it (an interrupt closes it under a run)."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()


class Tracked(Fake):
    """Counts the runs going on at once, and which sessions they ran on; the first ``meet`` runs
    wait for each other (a barrier: broken, and the test failed, unless that many run at once)."""

    lock = threading.Lock()
    active = 0
    most = 0
    started = 0
    met = False
    sessions: ClassVar[set[int]] = set()
    meet: ClassVar[threading.Barrier | None] = None
    #: when set, a run waits until its session is closed (an interrupt), then fails as Kafka would
    hold = False

    def __init__(self, session: Gate | None = None, version: str | None = None) -> None:
        super().__init__(session, version)
        self.session = session  # the model backend keeps none

    @classmethod
    def new_session(cls) -> Gate:
        return Gate()

    @classmethod
    def reset(cls, meet: int | None, hold: bool = False) -> None:
        cls.active = cls.most = cls.started = 0
        cls.met = False
        cls.sessions = set()
        cls.meet = threading.Barrier(meet, timeout=30) if meet else None
        cls.hold = hold

    def start(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        with cls.lock:
            cls.active += 1
            cls.most = max(cls.most, cls.active)
            cls.sessions.add(id(self.session))
            cls.started += 1
            meets = cls.meet is not None and cls.started <= cls.meet.parties
        if meets:
            assert cls.meet is not None
            cls.meet.wait()  # a broken barrier raises: a harness error, and ``met`` stays False
            cls.met = True
        if cls.hold:
            assert isinstance(self.session, Gate) and self.session.closed.wait(timeout=30)
            raise BackendError("the cluster was removed")
        super().start(*args, **kwargs)

    def close(self) -> None:
        with type(self).lock:
            type(self).active -= 1
        super().close()


def runnable(oracle: Any, tmp_path: Path, count: int) -> list[list[Action]]:
    """The first ``count`` schedules of seed 0 the exploration runs (it skips those the model cannot pass)."""
    return [a for a in itertools.islice(schedules(oracle, 0, 8, None), 60)
            if write_scenario(tmp_path / "probe.elr.yaml", "probe", "", a, CLUSTER, TOPIC, "kafka", oracle,
                              expect=False) is not None][:count]


def test_parallel_3_runs_three_schedules_at_once_on_three_sessions(tmp_path: Path) -> None:
    lines: list[str] = []
    ex = Explorer(Tracked, None, "kafka", get_profile("kafka"), tmp_path, CLUSTER, TOPIC, confirm=0,
                  shrink_replays=0, say=lines.append)
    drawn = runnable(ex.oracle, tmp_path, 8)
    Tracked.reset(meet=3)
    seen = ex.explore(iter(drawn), time.monotonic() + 120, parallel=3)
    assert Tracked.met and Tracked.most == 3, (Tracked.most, lines)  # 3 at once, never 4
    assert len(Tracked.sessions) == 3 and sum(seen.counts.values()) == 8 and seen.counts["finding"] == 0, lines


def test_parallel_explores_the_schedules_one_at_a_time_explores(tmp_path: Path) -> None:
    oracle = replace(get_profile("kafka"), rules=MUTANTS[MUTANT])
    drawn = list(itertools.islice(schedules(oracle, 0, 8, None), 60))  # some the model refuses: gaps in the names
    runs: dict[int, tuple[Exploration, list[str]]] = {}
    for parallel in (1, 3):
        lines: list[str] = []
        ex = Explorer(Fake, None, "kafka", oracle, tmp_path / str(parallel), CLUSTER, TOPIC, confirm=1,
                      shrink_replays=4, say=lines.append, mutant=MUTANT)
        runs[parallel] = ex.explore(iter(drawn), time.monotonic() + 300, parallel=parallel), lines
    (one, one_lines), (three, three_lines) = runs[1], runs[3]
    named = [line for line in one_lines if line.startswith("explore-")]
    assert one.counts["finding"] >= 2 and one.counts["agrees"] >= 1, one_lines  # a mix worth comparing
    # the same schedule under each name, classified the same
    assert sorted(named) == sorted(line for line in three_lines if line.startswith("explore-"))
    written = sorted(p.name for p in (tmp_path / "1" / "schedules").iterdir())
    assert len(written) == len(named) and written == sorted(p.name for p in (tmp_path / "3" / "schedules").iterdir())
    for name in written:
        assert (tmp_path / "1" / "schedules" / name).read_text() == (tmp_path / "3" / "schedules" / name).read_text()
    a, b = one.summary(), three.summary()
    for key in ("runs", "agrees", "documented", "finding", "harness error", "action_kinds", "states_model",
                "states_cluster", "finding_signatures"):
        assert a[key] == b[key], key
    # each finding followed up once, confirmed and shrunk
    assert [(f["signature"], f["confirmed"]) for f in a["findings"]] == \
        [(f["signature"], f["confirmed"]) for f in b["findings"]]
    assert all(f["shrunk"] for f in b["findings"]) and sum(line.startswith("  confirmed") for line in three_lines) \
        == len(b["findings"])


def test_an_interrupt_of_a_parallel_exploration_closes_every_session_and_ends_every_worker(tmp_path: Path) -> None:
    lines: list[str] = []
    ex = Explorer(Tracked, None, "kafka", get_profile("kafka"), tmp_path, CLUSTER, TOPIC, confirm=0,
                  shrink_replays=0, say=lines.append)
    drawn = runnable(ex.oracle, tmp_path, 3)
    opened: list[Gate] = []
    new_session = Tracked.new_session

    def recording() -> Gate:
        opened.append(new_session())
        return opened[-1]

    def ctrl_c_once_three_run() -> None:
        deadline = time.monotonic() + 30
        while Tracked.active < 3:
            if time.monotonic() > deadline:
                return  # never three at once: the test fails below (no KeyboardInterrupt)
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, while the exploration waits for a free worker

    Tracked.reset(meet=None, hold=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Tracked, "new_session", staticmethod(recording))
        threading.Thread(target=ctrl_c_once_three_run, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            ex.explore(iter(drawn + drawn), time.monotonic() + 120, parallel=3)
    assert len(opened) == 3 and all(s.closed.is_set() for s in opened)
    assert not [t for t in threading.enumerate() if t.name.startswith("explore")]  # every worker ended
    assert sum(ex.seen.counts.values()) == 0 and lines == []  # nothing recorded or said after the stop


def test_on_three_controllers_the_schedules_fault_the_quorum_and_run_on_it(tmp_path: Path) -> None:
    """``elr explore --controllers 3``: the schedules stop, restart and isolate controllers (a
    one-controller exploration draws none), each is written to run on a quorum of three, and a
    correct oracle agrees with the system on them."""
    drawn = list(itertools.islice(schedules(get_profile("kafka"), 0, 8, None, controllers=3), 200))
    assert {a.kind for s in drawn for a in s} >= {"crash_controller", "shutdown_controller", "power_off_controller",
                                                   "restart_controller", "isolate_controller"}
    assert any(controller_of(end) is not None for s in drawn for a in s if a.kind == "cut" for link in a.links
               for end in link), "no link to one controller drawn"
    one_controller = itertools.islice(schedules(get_profile("kafka"), 0, 8, None), 40)
    assert not any(a.kind.endswith("_controller") for s in one_controller for a in s)
    lines: list[str] = []
    ex = Explorer(Fake, None, "kafka", get_profile("kafka"), tmp_path, ClusterSpec(brokers=(0, 1, 2), controllers=3),
                  TOPIC, say=lines.append)
    faulting = [s for s in drawn if any(a.kind.endswith("_controller") for a in s)][:6]
    seen = ex.explore(iter(faulting), time.monotonic() + 120)
    assert seen.counts["finding"] == 0 and seen.counts["agrees"] + seen.counts["documented"] >= 4, lines
    assert {k for k in seen.kinds if k.endswith("_controller")}, seen.kinds
    written = sorted((tmp_path / "schedules").glob("*.elr.yaml"))
    assert written and all(load_scenario(path).cluster.controllers == 3 for path in written)


def test_on_three_partitions_the_schedules_aim_at_every_partitions_leader_and_run_on_them(tmp_path: Path) -> None:
    """``elr explore --partitions 3``: the schedules also draw faults aimed at the leader of any
    partition (other schedules than one partition's, seed for seed), each is written with the topic's
    three partitions, and a correct oracle agrees with the system on every partition of them."""
    topic = replace(TOPIC, more_partitions=((1, 2, 0), (2, 0, 1)))
    drawn = list(itertools.islice(schedules(get_profile("kafka"), 0, 8, None, partitions=3), 60))
    assert drawn and drawn == list(itertools.islice(schedules(get_profile("kafka"), 0, 8, None, partitions=3), 60))
    assert drawn != list(itertools.islice(schedules(get_profile("kafka"), 0, 8, None), 60))
    lines: list[str] = []
    ex = Explorer(Fake, None, "kafka", get_profile("kafka"), tmp_path, CLUSTER, topic, say=lines.append)
    seen = ex.explore(iter(drawn[:8]), time.monotonic() + 120)
    assert seen.counts["finding"] == 0 and seen.counts["agrees"] + seen.counts["documented"] >= 4, lines
    written = sorted((tmp_path / "schedules").glob("*.elr.yaml"))
    assert written and all(load_scenario(path).topic.assignment == topic.assignment for path in written)


def test_a_written_expectation_of_another_partition_is_held_to_the_system(tmp_path: Path) -> None:
    """The partition keys ``write_scenario`` writes are live: partition 2's leader crashes, the
    written scenario expects partition 2's new leader, and the same file with that leader changed
    fails on the same system at that step."""
    from pytest_elr.actions import Crash, Produce

    topic = replace(TOPIC, more_partitions=((1, 2, 0), (2, 0, 1)))
    actions = [Produce(count=3, acks="all"), Crash(broker=2), Produce(count=3, acks="all")]
    path = tmp_path / "p2.elr.yaml"
    scenario = write_scenario(path, "p2", "", actions, CLUSTER, topic, "kafka", get_profile("kafka"), expect=True)
    assert scenario is not None and run_scenario(scenario, Fake(), "kafka").passed
    doc = yaml.safe_load(path.read_text())
    assert doc["topic"]["partitions"] == 3
    crashed = doc["steps"][1]["expect"]["partitions"]
    assert crashed[2]["leader"] == 0, crashed  # partition 2 (led by 2) moves to 0, its next in the ISR
    crashed[2]["leader"] = 1
    planted = tmp_path / "p2-wrong.elr.yaml"
    planted.write_text(yaml.safe_dump(doc, sort_keys=False))
    wrong = run_scenario(load_scenario(planted), Fake(), "kafka")
    assert not wrong.passed and "S2" in wrong.message and "partition 2" in wrong.message, wrong.message
