"""A symbolic broker target, ``{leader_of: N}``: the broker leading partition N when the step runs
(issue 27, item 2). Each check is shown catching what it is for: bad input and sequences the loader
cannot check refused at load with file and line; a system and a model that name different leaders
failing the step with both named; a partition with no leader, a resolved broker in the wrong state
and a partition the topic lacks failing as errors of the scenario when the step runs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fake_backend import Fake

from pytest_elr.actions import Crash, Cut, Heal, PowerOff, Restart
from pytest_elr.api import ClusterHandle
from pytest_elr.backends.model import ModelBackend
from pytest_elr.core.errors import ScenarioError
from pytest_elr.core.nodes import leader_of
from pytest_elr.core.observation import Observation
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import cluster_and_topic_from_python, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "pytest_elr" / "scenarios" / "leader_of_partition_crashes.elr.yaml"

#: three partitions [0,1,2], [1,2,0], [2,0,1]; the steps start at line 5
HEAD = """name: t
cluster: {brokers: 3}
topic: {name: t, partitions: 3, replicas: [0, 1, 2], min_insync_replicas: 2}
steps:
"""


def _steps(*steps: str) -> str:
    """One step per action list, labelled s1, s2, ...: step k's ``do`` is at line 5 + 2k - 1."""
    return HEAD + "".join(f"  - at: s{i}\n    do: {do}\n" for i, do in enumerate(steps, 1))


def _events(result: Any) -> list[dict[str, Any]]:
    assert result.history_dir is not None
    return [json.loads(line) for line in (result.history_dir / "events.jsonl").read_text().splitlines()]


# --- the language ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("item", "action"), [
    ("{crash: {leader_of: 2}}", Crash(broker=leader_of(2))),
    ("{power_off: [{leader_of: 2}, 1]}", PowerOff(brokers=(leader_of(2), 1))),
    ("{isolate: {leader_of: 1}}", Cut(links=((leader_of(1), 0), (0, leader_of(1)), (leader_of(1), 1),
                                             (1, leader_of(1)), (leader_of(1), 2), (2, leader_of(1)),
                                             (leader_of(1), "controller"), ("controller", leader_of(1))))),
    ("{cut: {from: {leader_of: 0}, to: controller}}", Cut(links=((leader_of(0), "controller"),))),
])
def test_the_forms_read_and_write_back(item: str, action: Any) -> None:
    do = [action] if not isinstance(action, Cut) or "isolate" in item else [action]
    scenario = parse_scenario(_steps(f"[{item}]"), "t.elr.yaml")
    assert list(scenario.steps[0].actions) == do
    written = action.to_yaml((0, 1, 2))
    again = parse_scenario(_steps(json.dumps(written)), "t.elr.yaml")
    assert list(again.steps[0].actions) == do


def test_a_resolved_action_names_brokers_and_drops_a_link_to_itself() -> None:
    sym = leader_of(2)
    assert Crash(broker=sym).symbols() == (sym,) and Crash(broker=sym).named_brokers() == ()
    assert Crash(broker=sym).resolved({sym: 0}) == Crash(broker=0)
    assert Cut(links=((sym, 0), (0, sym), (sym, 1))).resolved({sym: 0}) == Cut(links=((0, 1),))
    assert Heal().resolved({}) == Heal()


@pytest.mark.parametrize(("do", "error"), [
    ("[{crash: {leader_of: 3}}]", "step s1: crash.leader_of: no partition 3: the topic has 3 partitions (0..2"),
    ("[{crash: {leader_of: two}}]", "step s1: crash.leader_of: expected a partition number, got 'two'"),
    ("[{crash: {leader_of: -1}}]", "step s1: crash.leader_of: expected a number >= 0, got -1"),
    ("[{crash: {leader: 2}}]", "step s1: crash: unknown key 'leader' (did you mean 'leader_of'?)"),
    ("[{cut: {between: [{leader_of: 5}, 0]}}]", "cut.between.leader_of: no partition 5"),
    ("[{isolate: {broker: {leader_of: 1, controller: 0}}}]", "step s1: isolate.broker: unknown key 'controller'"),
])
def test_bad_targets_are_refused_with_file_and_line(do: str, error: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(_steps(do), "t.elr.yaml")
    assert str(info.value).startswith("t.elr.yaml:6: "), str(info.value)
    assert error in str(info.value)


# --- the loader's lifecycle checks ----------------------------------------------------------------

@pytest.mark.parametrize(("steps", "line", "error"), [
    # a recall with nothing to recall
    (["[{restart: {leader_of: 2}}]"], 6,
     "restart: {leader_of: 2} names, in restart, the broker it named when last resolved (the one a fault hit), "
     "and no action before resolves it"),
    (["[{heal: {leader_of: 1}}]"], 6, "heal: {leader_of: 1} names, in heal, the broker it named when last resolved"),
    # the recalled broker is in the wrong state
    (["[{crash: {leader_of: 2}}]", "[{restart: {leader_of: 2}}]", "[{restart: {leader_of: 2}}]"], 10,
     "restart: {leader_of: 2} names the broker it named at line 6 (broker 0, 1 or 2, whichever it is), which is "
     "running at this point; the action needs it stopped"),
    (["[{pause: {leader_of: 0}}]", "[{restart: {leader_of: 0}}]"], 8, "which is paused at this point; the action "
                                                                      "needs it stopped"),
    # which broker an id names is known, which one the symbol named is not: cannot check
    (["[{crash: {leader_of: 2}}]", "[{crash: 0}]"], 8,
     "crash: the loader cannot check it: if {leader_of: 2} at line 6 named broker 0, then broker 0 is stopped at "
     "this point, the action needs it paused or running, and not otherwise; name the broker the same way in both "
     "actions ({leader_of: N}), or by its id in both"),
    (["[{crash: {leader_of: 2}}]", "[{restart: 1}]"], 8, "restart: the loader cannot check it: if {leader_of: 2} at "
                                                         "line 6 named broker 0, then broker 1 is running"),
    # a broker named by its id in an action any state takes (replace_disk starts it) may be the one recalled
    (["[{crash: {leader_of: 2}}]", "[{replace_disk: 0}]", "[{restart: {leader_of: 2}}]"], 10,
     "restart: the loader cannot check it: if {leader_of: 2} at line 6 named broker 0, then {leader_of: 2} names "
     "broker 0, the one it named at line 6: broker 0 is running at this point, the action needs it stopped, and not "
     "otherwise"),
    # every replica stopped: no leader to name
    (["[{crash: [0, 1]}]", "[{shutdown: 2}]", "[{crash: {leader_of: 1}}]"], 10,
     "crash: {leader_of: 1} would name no broker: every replica of partition 1 (1, 2, 0) is stopped at this point, "
     "so it has no leader"),
])
def test_sequences_the_loader_cannot_check_are_refused_with_the_line(steps: list[str], line: int, error: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(_steps(*steps), "t.elr.yaml")
    assert str(info.value).startswith(f"t.elr.yaml:{line}: "), str(info.value)
    assert error in str(info.value)


@pytest.mark.parametrize("steps", [
    ["[{crash: {leader_of: 2}}]", "[{restart: {leader_of: 2}}]", "[{crash: 0}]"],  # every broker back: known
    ["[{crash: 2}]", "[{crash: {leader_of: 2}}]", "[{restart: 2}]", "[{restart: {leader_of: 2}}]", "[{crash: 2}]"],
    ["[{isolate: {leader_of: 2}}]", "[{heal: {leader_of: 2}}]", "[{pause: {leader_of: 0}}, {resume: {leader_of: 0}}]"],
    ["[{crash: {leader_of: 1}}, {crash: {leader_of: 2}}]", "[{restart: {leader_of: 2}}, {restart: {leader_of: 1}}]",
     "[{shutdown: [0, 1, 2]}]"],
])
def test_sequences_the_loader_can_follow_are_accepted(steps: list[str]) -> None:
    parse_scenario(_steps(*steps), "t.elr.yaml")


# --- when the step runs ---------------------------------------------------------------------------

def test_the_shipped_scenario_crashes_the_broker_leading_partition_2_then_restarts_it(tmp_path: Path) -> None:
    """Partition 2's leader is broker 0 (not its preferred leader 2) when the crash runs; the
    history keeps the broker hit and the symbol that named it."""
    for backend in (ModelBackend(), Fake()):  # the model as the system; the fake held to a shadow model
        result = run_scenario(load_scenario(SHIPPED), backend, "kafka", tmp_path)
        assert result.passed, result.message
        faults = [e for e in _events(result) if e["type"] == "fault" and e.get("targets")]
        assert [(e["action"], e["args"], e["targets"]) for e in faults] == [
            ("crash", {"broker": 0}, [{"leader_of": 2, "broker": 0, "recalled": False}]),
            ("restart", {"broker": 0}, [{"leader_of": 2, "broker": 0, "recalled": True}]),
        ]
        begins = [e["do"] for e in _events(result) if e["type"] == "step" and e["phase"] == "begin"]
        assert begins[2] == [{"crash": {"leader_of": 2}}, {"produce": {"count": 6, "acks": "all"}}]


class LeaderOf2Misreported(Fake):
    """Reports broker 0 as partition 2's leader, whoever leads it."""

    def observe(self) -> Observation:
        obs = super().observe()
        return replace(obs, partitions={**obs.partitions, 2: replace(obs.partitions[2], leader=0)})


MISREPORTED = _steps("[{crash: {leader_of: 2}}]", "[{produce: 3}]")


def test_a_system_and_a_model_naming_different_leaders_fail_the_step_naming_both(tmp_path: Path) -> None:
    ok = run_scenario(parse_scenario(MISREPORTED, "m.elr.yaml"), Fake(), "kafka")
    assert ok.passed, ok.message
    result = run_scenario(parse_scenario(MISREPORTED, "m.elr.yaml"), LeaderOf2Misreported(), "kafka", tmp_path)
    assert not result.passed
    assert result.message.startswith(
        "step s1 (m.elr.yaml:6): crash: {leader_of: 2}: the system and the model name different leaders of "
        "partition 2: the system broker 0, the model broker 2; the action is not done (it would hit a different "
        "broker on each) and the run stops here"), result.message
    assert [(f.step, f.what) for f in result.failures] == [("s1", "leader")]
    events = _events(result)
    assert not [e for e in events if e["type"] == "fault"]  # neither broker was crashed
    assert [e["step"] for e in events if e["type"] == "step" and e["phase"] == "begin"] == ["s1"]  # it stopped
    split = [e for e in events if e["type"] == "disagreement"]
    assert [(e["partition"], e["observed_value"], e["model_value"], e["target"]) for e in split] == [(2, 0, 2, True)]


LEADERLESS = _steps("[{isolate: {broker: 0, from: controller}}, {isolate: {broker: 1, from: controller}}, "
                    "{isolate: {broker: 2, from: controller}}]", "[{crash: {leader_of: 2}}]")


@pytest.mark.parametrize("backend", [ModelBackend, Fake])
def test_a_partition_with_no_leader_when_the_step_runs_is_an_error_of_the_scenario(backend: type, tmp_path: Path) \
        -> None:
    """Every broker cut from the controller is fenced: no partition has a leader (the loader cannot
    know it: every broker runs)."""
    result = run_scenario(parse_scenario(LEADERLESS, "l.elr.yaml"), backend(), "kip966", tmp_path)
    assert not result.passed
    assert result.message == ("l.elr.yaml:8: step s2: crash: {leader_of: 2}: partition 2 has no leader when the step "
                              "runs, so {leader_of: 2} names no broker (an error of the scenario, not a finding)")
    events = _events(result)
    assert [e["type"] for e in events if e["type"] in ("scenario_error", "disagreement")] == ["scenario_error"]
    assert json.loads((result.history_dir / "meta.json").read_text())["outcome"] == "error"


def _handle(tmp_path: Path) -> ClusterHandle:
    spec, topic = cluster_and_topic_from_python({"brokers": [0, 1, 2]},
                                                {"partitions": 3, "replicas": [0, 1, 2], "min_insync_replicas": 2},
                                                ("test.py", 7))
    return ClusterHandle(ModelBackend(), "kafka", spec, topic, tmp_path)


def test_a_resolved_broker_in_the_wrong_state_is_an_error_when_the_step_runs(tmp_path: Path) -> None:
    """The Python API has no loader to follow the symbol: the executor checks the broker it names."""
    c = _handle(tmp_path)
    c.crash(leader_of=2)  # broker 2
    c.restart(2)
    with pytest.raises(ScenarioError, match=r"^.*test_leader_of.py:\d+: restart: \{leader_of: 2\}: \{leader_of: 2\} "
                                            r"named broker 2, and the "
                                            r"action cannot be done: broker 2 is running at this point, the action "
                                            r"needs it stopped \(an error of the scenario, not a finding\)"):
        c.restart(leader_of=2)
    c.shutdown(2)
    c.restart(2)  # partition 2 is led by broker 0 now
    with pytest.raises(ScenarioError, match=r"\{leader_of: 2\} named broker 0, and the action cannot be done: it "
                                            r"names no link between two different brokers"):
        c.cut(between=[{"leader_of": 2}, 0])
    with pytest.raises(ScenarioError, match=r"\{leader_of: 2\} named broker 0, and the action cannot be done: it "
                                            r"names one broker twice"):
        c.power_off({"leader_of": 2}, 0)
    c.close()


def test_a_partition_the_topic_lacks_is_refused_from_python_and_when_the_step_runs(tmp_path: Path) -> None:
    c = _handle(tmp_path)
    with pytest.raises(ScenarioError, match=r"test_leader_of.py:\d+: crash.leader_of: no partition 3: the topic "
                                            r"has 3 partitions"):
        c.crash(leader_of=3)
    with pytest.raises(ScenarioError, match=r"crash: \{leader_of: 7\}: no partition 7: the topic has 3"):
        c.do(Crash(broker=leader_of(7)))
    with pytest.raises(ScenarioError, match=r"\{leader_of: 1\} names the broker it named when last resolved, "
                                            r"and nothing resolved it before"):
        c.do(Restart(broker=leader_of(1)))
    c.close()


def test_too_many_ways_the_symbols_may_have_named_brokers_are_refused_with_the_line() -> None:
    """Four symbols on nine brokers, each partition on all nine, each recalled later: the brokers
    paused may be any four, in any order; the check stops rather than follow thousands of them."""
    pauses = ", ".join(f"{{pause: {{leader_of: {p}}}}}" for p in range(4))
    resumes = ", ".join(f"{{resume: {{leader_of: {p}}}}}" for p in range(4))
    text = ("cluster: {brokers: 9}\ntopic: {partitions: 4, replicas: 9, min_insync_replicas: 1}\nsteps:\n"
            f"  - at: s1\n    do: [{pauses}]\n  - at: s2\n    do: [{resumes}]\n")
    with pytest.raises(ScenarioError, match=r"^w.elr.yaml:5: step s1: pause: the symbolic targets \(\{leader_of: N\}\) "
                                            r"so far leave more than 512 ways the brokers may be: too many to check"):
        parse_scenario(text, "w.elr.yaml")
    parse_scenario(text.replace("replicas: 9", "replicas: 2"), "w.elr.yaml")  # two candidates each: few ways
