"""``elr explore`` end to end on a system that runs in milliseconds (the model as a system under
test, held to a shadow model exactly as Kafka is), and its pure parts: delta debugging, coverage.

The real-cluster exploration is a long job (docs/explore.md gives its commands and results); here
the pipeline is proved: a planted oracle defect is found, confirmed on fresh systems, shrunk and
written as a scenario that fails with the defect and passes without it; a correct oracle finds
nothing."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from fake_backend import Fake

from pytest_elr.core.specs import ClusterSpec, TopicSpec
from pytest_elr.model.mutants import MUTANTS
from pytest_elr.model.profiles import get_profile
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario
from pytest_elr.schedule.coverage import state_of, states_of_events
from pytest_elr.schedule.explore import Explorer, schedules, write_scenario
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
    seen = ex.explore(itertools.islice(schedules(ex.oracle, 0, 8, None), 40), time.monotonic() + 120)
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
    # 40 candidates: the model refuses some (a lossy fault that took nothing); at least 20 must run
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
