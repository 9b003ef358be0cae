"""``elr kafka-mutants`` without a cluster: ids, shards, what a run's outcome says about a mutant,
resuming, the merged table of shards, and the executor's stop at the first failure a campaign uses.
(The end-to-end campaign on real Kafka is tests/sut/test_kafka_mutants_campaign.py.)"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_elr.backends.model import ModelBackend
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import parse_scenario
from pytest_elr.scenario.schema import Failure
from pytest_elr.schedule import kafka_mutants as km

PCB = "org.apache.kafka.controller.PartitionChangeBuilder"


def mutant(method: str, line: int, operator: str = "NEGATE_CONDITIONALS", index: int = 0,
           description: str = "jump if `a < b` became `a >= b`", cls: str = PCB) -> km.Mutant:
    return km.Mutant.parse(f"{cls}#{method}()V:{line}:{operator}:{index}\t{line}\t{operator}\t{description}")


def test_an_id_names_its_class_method_line_operator_and_index() -> None:
    m = km.Mutant.parse("kafka.cluster.Partition#maybeIncrementLeaderHW(Lkafka/log/UnifiedLog;J)Z:1022:"
                        "CONDITIONALS_BOUNDARY:2\t1022\tCONDITIONALS_BOUNDARY\t`a < b` became `a <= b`")
    assert (m.class_name, m.method, m.desc, m.line, m.operator, m.index) == (
        "kafka.cluster.Partition", "maybeIncrementLeaderHW", "(Lkafka/log/UnifiedLog;J)Z", 1022,
        "CONDITIONALS_BOUNDARY", 2)
    assert m.in_words() == "`Partition.maybeIncrementLeaderHW` line 1022: `a < b` became `a <= b`"
    # a method without line numbers (-1) still parses
    assert km.Mutant.parse(f"{PCB}#x()V:-1:INCREMENTS:0\t-1\tINCREMENTS\tlocal += 1 removed").line == -1
    with pytest.raises(ValueError, match="not a mutant id"):
        km.Mutant.parse("PartitionChangeBuilder.build:12\t12\tX\ty")


def test_logging_calls_are_equivalent_by_construction_and_nothing_else_is() -> None:
    assert mutant("build", 10, "VOID_METHOD_CALLS", description="call of Logger.info removed").equivalent
    assert mutant("build", 10, "VOID_METHOD_CALLS", description="call of Partition.debug removed").equivalent
    assert mutant("build", 10, "VOID_METHOD_CALLS",
                  description="call of PartitionChangeBuilder.maybePopulateTargetElr removed").equivalent is None
    assert mutant("build", 10).equivalent is None


def test_shards_split_every_mutant_exactly_once() -> None:
    ids = [mutant("m", line, index=i).id for line in range(1, 60) for i in range(3)]
    for n in (1, 2, 3, 8):
        owners = [[k for k in range(1, n + 1) if km.in_shard(i, (k, n))] for i in ids]
        assert all(len(o) == 1 for o in owners)
    assert {tuple(km.in_shard(i, (k, 3)) for k in (1, 2, 3)) for i in ids} != {(True, False, False)}
    with pytest.raises(Exception, match="K/N"):
        km.parse_shard("4/3")
    assert km.parse_duration("2h") == 7200 and km.parse_duration("90s") == 90 and km.parse_duration("30m") == 1800


def scenario_with(known: str = "") -> Any:
    return parse_scenario(f"""
name: s
profiles: [kafka]
cluster: {{brokers: 2}}
topic: {{name: t, replicas: [0, 1], min_insync_replicas: 1}}
steps:
  - at: a
    do: [{{produce: 1}}]
  - at: b
    do: [{{produce: 1}}]
{known}
""")


KNOWN_AT_A = """known_failures:
  - versions: "<9"
    because: a bug
    step: a
    fails: [leader]
"""


def result(passed: bool, failures: tuple[Failure, ...] = (), message: str = "") -> Any:
    return SimpleNamespace(passed=passed, failures=list(failures), message=message)


def test_a_run_tells_only_when_it_ends_otherwise_than_on_the_real_release() -> None:
    plain, known = scenario_with(), scenario_with(KNOWN_AT_A)
    assert km.run_outcome(plain, "4.4.0", result(True))[0] == "pass"
    status, by = km.run_outcome(plain, "4.4.0", result(False, (Failure("b", "elr"),), "step b: elr"))
    assert (status, by["kind"], by["failures"]) == ("killed", "check", ["step b: elr"])
    # the known failure and nothing else: the run ends as on the release
    assert km.run_outcome(known, "4.4.0", result(False, (Failure("a", "leader"),)))[0] == "pass"
    # the known failure and another one: killed by the other
    status, by = km.run_outcome(known, "4.4.0", result(False, (Failure("a", "leader"), Failure("b", "hwm"))))
    assert (status, by["failures"]) == ("killed", ["step b: hwm"])
    # a known failure that no longer fails: the mutant changed what the release does
    assert km.run_outcome(known, "4.4.0", result(True))[0] == "killed"
    # the harness could not finish the run: killed, said as an error
    status, by = km.run_outcome(plain, "4.4.0", result(False, (), "backend kafka failed: no leader"))
    assert (status, by["kind"]) == ("killed", "error")
    assert km.run_outcome(plain, "4.4.0", result(False, (), "backend kafka could not start: the cluster did not "
                                                             "start: not ready"))[0] == "no-start"


def fake_child(mutant: km.Mutant, runs: Any, version: str, history: Path, timeout_s: float) -> dict[str, Any]:
    """What a child would report, as a function of the id alone."""
    status = ("killed", "survived", "no-start")[mutant.line % 3]
    by = {"scenario": runs[0]["scenario_file"], "scenario_file": runs[0]["scenario_file"], "profile": "kafka",
          "at": "a", "failures": ["step a: elr"]} if status == "killed" else None
    return {"status": status, "runs_tried": len(runs), **({"by": by} if by else {})}


def passing_control(run: dict[str, Any], version: str, history: Path, timeout_s: float) -> dict[str, Any]:
    """The unmutated run of any scenario ends as on the release."""
    return {"passed": True, "at": None, "failures": [], "seconds": 30.0}


def slow_fails_unmutated(run: dict[str, Any], version: str, history: Path, timeout_s: float) -> dict[str, Any]:
    """slow.elr.yaml fails without any mutant (at the step its kills name); fast.elr.yaml passes."""
    if run["scenario_file"] == "slow.elr.yaml":
        return {"passed": False, "at": "a", "kind": "check", "failures": ["step a: elr"], "message": "step a: elr",
                "seconds": 90.0}
    return passing_control(run, version, history, timeout_s)


@pytest.fixture(autouse=True)
def no_real_control(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill's control is a real cluster run: here every unmutated run passes unless a test says otherwise."""
    monkeypatch.setattr(km, "_control", passing_control)


@pytest.fixture
def index(tmp_path: Path) -> km.CoverageIndex:
    source = "org/apache/kafka/controller/PartitionChangeBuilder.java"
    runs = {"slow": {"scenario_file": "slow.elr.yaml", "profile": "kafka", "seconds": 90.0,
                     "covered": {source: list(range(1, 40))}},
            "fast": {"scenario_file": "fast.elr.yaml", "profile": "kafka", "seconds": 30.0,
                     "covered": {source: list(range(20, 40))}}}
    (tmp_path / "lines.json").write_text(json.dumps({"kafka_version": "4.4.0", "source_of": {PCB: source},
                                                     "runs": runs}))
    return km.CoverageIndex(tmp_path / "lines.json")


def test_covering_runs_fastest_first(index: km.CoverageIndex) -> None:
    assert [r["scenario_file"] for r in index.covering_runs(mutant("m", 25))] == ["fast.elr.yaml", "slow.elr.yaml"]
    assert [r["scenario_file"] for r in index.covering_runs(mutant("m", 5))] == ["slow.elr.yaml"]
    assert index.covering_runs(mutant("m", 45)) == []


def test_two_shards_merge_into_the_table_of_one_unsharded_run(tmp_path: Path, index: km.CoverageIndex,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(km, "_child", fake_child)
    monkeypatch.setattr(km, "_control", slow_fails_unmutated)  # some kills stand, some are "control failed"
    mutants = [mutant("m", line, index=i) for line in range(1, 40) for i in range(2)]
    km.run_campaign(mutants, index, tmp_path / "one", budget_s=1e9, shard=(1, 1), mutant_timeout_s=60)
    km.run_campaign(mutants, index, tmp_path / "a", budget_s=1e9, shard=(1, 2), mutant_timeout_s=60)
    km.run_campaign(mutants, index, tmp_path / "b", budget_s=1e9, shard=(2, 2), mutant_timeout_s=60)
    one = km.results_of([tmp_path / "one"])
    merged = km.results_of([tmp_path / "a", tmp_path / "b"])
    assert len(one) == len(mutants) and set(one) == set(merged)
    assert km.summary(one)[0] == km.summary(merged)[0]
    counts = km.summary(merged)[1]
    # kills by slow.elr.yaml (lines 3..18, which fast.elr.yaml does not cover) are not kills
    assert counts["control failed"] == 2 * 6 and counts["killed"] == 2 * 7
    assert f"killed 14 of {14 + counts['survived']} planted and graded" in "\n".join(km.summary(merged)[0])
    # each shard ran its own controls, once per scenario
    assert [c["scenario"] for c in km.controls_of([tmp_path / "one"])] == ["slow.elr.yaml", "fast.elr.yaml"]
    assert sorted(c["scenario"] for c in km.controls_of([tmp_path / "a", tmp_path / "b"])) == \
        ["fast.elr.yaml", "fast.elr.yaml", "slow.elr.yaml", "slow.elr.yaml"]
    strip = ("seconds", "shard")
    assert [{k: v for k, v in one[i].items() if k not in strip} for i in sorted(one)] == \
        [{k: v for k, v in merged[i].items() if k not in strip} for i in sorted(merged)]


def test_a_campaign_resumes_where_it_stopped(tmp_path: Path, index: km.CoverageIndex,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    def counting(m: km.Mutant, *args: Any) -> dict[str, Any]:
        ran.append(m.id)
        return fake_child(m, *args)

    monkeypatch.setattr(km, "_child", counting)
    mutants = [mutant("m", line) for line in range(1, 11)]
    km.run_campaign(mutants, index, tmp_path, budget_s=0, shard=(1, 1), mutant_timeout_s=60)
    assert ran == []  # no budget: nothing starts
    km.run_campaign(mutants[:4], index, tmp_path, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60)
    km.run_campaign(mutants, index, tmp_path, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60)
    assert sorted(ran) == sorted(m.id for m in mutants)  # each exactly once
    assert len(km.results_of([tmp_path])) == 10
    # --retry: those that ended so run again, and their new result replaces the old one
    km.run_campaign(mutants, index, tmp_path, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60,
                    retry=frozenset({"no-start"}))
    again = [m.id for m in mutants if m.line % 3 == 2]
    assert ran[10:] == again and len(km.results_of([tmp_path])) == 10


def test_the_report_names_each_survivor_in_words(tmp_path: Path, index: km.CoverageIndex,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(km, "_child", fake_child)
    km.run_campaign([mutant("maybePopulateTargetElr", 34), mutant("build", 35), mutant("build", 36)], index,
                    tmp_path, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60)
    lines, counts = km.summary(km.results_of([tmp_path]))
    assert counts == {"survived": 1, "killed": 1, "no-start": 1}
    assert "killed 1 of 2 planted and graded (50%)" in "\n".join(lines)
    # line 34 survived (fake_child: line % 3 == 1), named in words under "survivors:"
    assert lines[lines.index("survivors:") + 1].startswith(
        "  `PartitionChangeBuilder.maybePopulateTargetElr` line 34: jump if `a < b` became `a >= b`")
    page = km.html_page(km.results_of([tmp_path]), "t")
    assert "<tr class='survived'><td>PartitionChangeBuilder.maybePopulateTargetElr</td><td>34</td>" in page
    assert km.report_main([str(tmp_path), "--html", str(tmp_path / "c.html")]) == 0
    assert "jump if `a &lt; b` became `a &gt;= b`" in (tmp_path / "c.html").read_text()
    assert km.report_main([str(tmp_path / "nothing-here")]) == 2


WRONG_TWICE = """
name: wrong-twice
profiles: [kafka]
cluster: {brokers: 2}
topic: {name: t, replicas: [0, 1], min_insync_replicas: 1}
steps:
  - at: a
    do: [{produce: 1}]
    expect: {leader: 1}
  - at: b
    do: [{produce: 1}]
    expect: {leader: 1}
"""


class VersionedModel(ModelBackend):
    """The model backend, claiming a release so known failures apply."""

    def __init__(self) -> None:
        super().__init__()
        self.kafka_version = "4.4.0"


def test_the_executor_stops_at_the_first_failure_no_known_failure_declares() -> None:
    every = run_scenario(parse_scenario(WRONG_TWICE), VersionedModel(), "kafka")
    assert [f.step for f in every.failures] == ["a", "b"]
    first = run_scenario(parse_scenario(WRONG_TWICE), VersionedModel(), "kafka", stop_at_first_failure=True)
    assert [f.step for f in first.failures] == ["a"] and "stopped at its first failure" in first.message
    # a's failure is the release's known one: the run goes on, and stops at b's
    known = WRONG_TWICE + 'known_failures:\n  - {versions: "<9", because: a bug, step: a, fails: [leader]}\n'
    past_known = run_scenario(parse_scenario(known), VersionedModel(), "kafka", stop_at_first_failure=True)
    assert [f.step for f in past_known.failures] == ["a", "b"]


# ---------------------------------------------------------------------------------- --parallel


def test_parallel_3_runs_three_children_at_once_and_never_more(tmp_path: Path, index: km.CoverageIndex,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    lock = threading.Lock()
    active, most = [0], [0]
    first_three = threading.Barrier(3, timeout=30)  # broken (and the test failed) unless 3 run at once

    def overlapping(m: km.Mutant, *args: Any) -> dict[str, Any]:
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
            waits = m.line <= 3
        try:
            if waits:
                first_three.wait()
            return fake_child(m, *args)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(km, "_child", overlapping)
    mutants = [mutant("m", line) for line in range(1, 10)]
    km.run_campaign(mutants, index, tmp_path, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60, parallel=3)
    assert most[0] == 3 and len(km.results_of([tmp_path])) == 9


def test_parallel_results_equal_one_at_a_time(tmp_path: Path, index: km.CoverageIndex,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    histories: list[Path] = []

    def child(m: km.Mutant, runs: Any, version: str, history: Path, timeout_s: float) -> dict[str, Any]:
        histories.append(history)
        return fake_child(m, runs, version, history, timeout_s)

    monkeypatch.setattr(km, "_child", child)
    mutants = [mutant("m", line, index=i) for line in range(1, 45) for i in range(2)]  # some uncovered
    km.run_campaign(mutants, index, tmp_path / "one", budget_s=1e9, shard=(1, 1), mutant_timeout_s=60, parallel=1)
    serial_lines = capsys.readouterr().out.splitlines()
    km.run_campaign(mutants, index, tmp_path / "three", budget_s=1e9, shard=(1, 1), mutant_timeout_s=60, parallel=3)
    parallel_lines = capsys.readouterr().out.splitlines()
    one, three = km.results_of([tmp_path / "one"]), km.results_of([tmp_path / "three"])
    assert {i: r["status"] for i, r in one.items()} == {i: r["status"] for i, r in three.items()}
    assert {r["status"] for r in one.values()} == {"killed", "survived", "no-start", "uncovered"}
    assert [{k: v for k, v in one[i].items() if k != "seconds"} for i in sorted(one)] == \
        [{k: v for k, v in three[i].items() if k != "seconds"} for i in sorted(three)]
    # the same progress lines, in the order the mutants ended: their counters and time column aside

    def strip(line: str) -> str:
        return re.sub(r"^\[\d+/(\d+)\] (\S+(?: \S+)?)\s+\d+s", r"[/\1] \2", line)
    assert sorted(map(strip, serial_lines)) == sorted(map(strip, parallel_lines))
    assert [line.split("/")[0] for line in parallel_lines[1:]] == [f"[{n}" for n in range(1, len(three) + 1)]
    # every child had a history directory of its own
    assert len(set(histories)) == len(histories) == 2 * sum(1 for r in one.values() if r["status"] != "uncovered")


def test_an_interrupted_parallel_campaign_resumes_without_running_graded_mutants_again(
        tmp_path: Path, index: km.CoverageIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    lock = threading.Lock()

    def stopping_at_line_9(m: km.Mutant, *args: Any) -> dict[str, Any]:
        with lock:
            ran.append(m.id)
        if m.line == 9:  # Ctrl-C arrives while this one runs, once the parent wrote two results
            deadline = time.monotonic() + 30
            while len(km.results_of([tmp_path])) < 2:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            raise KeyboardInterrupt
        return fake_child(m, *args)

    monkeypatch.setattr(km, "_child", stopping_at_line_9)
    mutants = [mutant("m", line) for line in (9, *range(1, 9), *range(10, 13))]
    with pytest.raises(KeyboardInterrupt):
        km.run_campaign(mutants, index, tmp_path, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60, parallel=3)
    graded = set(km.results_of([tmp_path]))
    assert len(graded) >= 2 and mutants[0].id not in graded and len(graded) < len(mutants)

    ran.clear()
    monkeypatch.setattr(km, "_child", lambda m, *args: ran.append(m.id) or fake_child(m, *args))
    km.run_campaign(mutants, index, tmp_path, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60, parallel=3)
    assert sorted(ran) == sorted(m.id for m in mutants if m.id not in graded)  # each ungraded once, no graded one
    assert set(km.results_of([tmp_path])) == {m.id for m in mutants}


CAMPAIGN_OF_SLEEPERS = """
import sys
from pathlib import Path
from pytest_elr.schedule import kafka_mutants as km

pids = Path(sys.argv[1])
# each "child" writes its pid and sleeps until it is stopped
km.child_command = lambda spec: [sys.executable, "-c",
    "import os, sys, time; open(sys.argv[1] + '/' + str(os.getpid()), 'w').close(); time.sleep(3600)", str(pids)]
index = km.CoverageIndex(Path(sys.argv[2]))
mutants = [km.Mutant.parse(f"P#m()V:{line}:X:0\\t{line}\\tX\\td") for line in range(1, 7)]
km.run_campaign(mutants, index, Path(sys.argv[3]), budget_s=1e9, shard=(1, 1), mutant_timeout_s=3600, parallel=3)
"""


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_stopping_a_parallel_campaign_leaves_no_child_running(tmp_path: Path, stop: signal.Signals) -> None:
    pids, campaign = tmp_path / "pids", tmp_path / "campaign"
    pids.mkdir()
    run = {"scenario_file": "r.elr.yaml", "profile": "kafka", "seconds": 1.0, "covered": {"P.java": list(range(1, 7))}}
    (tmp_path / "lines.json").write_text(json.dumps({"kafka_version": "4.4.0", "source_of": {"P": "P.java"},
                                                     "runs": {"r": run}}))
    script = tmp_path / "campaign.py"
    script.write_text(CAMPAIGN_OF_SLEEPERS)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    parent = subprocess.Popen([sys.executable, str(script), str(pids), str(tmp_path / "lines.json"), str(campaign)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(list(pids.iterdir())) < 3:  # three children started (and no more: parallel=3)
            assert time.monotonic() < deadline and parent.poll() is None, parent.communicate()
            time.sleep(0.05)
        children = [int(p.name) for p in pids.iterdir()]
        parent.send_signal(stop)
        _, err = parent.communicate(timeout=60)
    finally:
        if parent.poll() is None:
            parent.kill()
    assert parent.returncode != 0 and "KeyboardInterrupt" in err
    assert len(children) == 3
    for pid in children:  # the parent waited for each (no zombie left either)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert km.results_of([campaign]) == {}  # the stopped mutants are not graded: a later run runs them


def test_a_mutant_cut_off_says_how_many_covering_runs_it_got_through(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A child stopped at its time limit reports the runs it finished (each ended as on the real
    release), and the report lists it with them: a late cut-off is most likely a survivor."""
    script = ("import json, time\n"
              "for i in (1, 2):\n"
              "    print(json.dumps({'progress': i, 'of': 3}), flush=True)\n"
              "time.sleep(60)\n")
    monkeypatch.setattr(km, "child_command", lambda spec: [sys.executable, "-c", script])
    runs = [{"scenario_file": f"s{i}.elr.yaml", "profile": "kafka"} for i in range(3)]
    result = km._child(mutant("build", 35), runs, "4.4.0", tmp_path, timeout_s=3)
    assert result == {"status": "timed out", "runs_tried": 2, "runs_total": 3}
    row = {**dataclasses.asdict(mutant("build", 35)), **result}
    lines, counts = km.summary({row["id"]: row})
    assert counts == {"timed out": 1}
    assert lines[-1].endswith(": 2 of 3 covering runs as on the real release") and "build` line 35" in lines[-1]


#: the real child entry point, its covering runs replaced by one that holds a "cluster" until stopped
CHILD_HOLDING_A_CLUSTER = """
import sys, time
from pathlib import Path
from pytest_elr.schedule import kafka_mutants as km

state = Path(sys.argv[2])

def run_one(mutant_id, runs, version, history_root):
    (state / "started").touch()
    try:
        time.sleep(3600)
    finally:  # what run_one's pool.close() does: remove the cluster
        (state / "removed").touch()

km.run_one = run_one
sys.exit(km._child_main(sys.argv[1]))
"""


def test_a_stopped_mutant_child_removes_its_cluster(tmp_path: Path) -> None:
    """Found by the HWM campaign (stop 38): SIGTERM to the campaign stopped the child by the signal's
    default action, and the child's cluster (five containers and a network) outlived it."""
    script = tmp_path / "child.py"
    script.write_text(CHILD_HOLDING_A_CLUSTER)
    spec = json.dumps({"mutant": "P#m()V:1:X:0", "runs": [], "version": "4.4.0", "history": str(tmp_path)})
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    child = subprocess.Popen([sys.executable, str(script), spec, str(tmp_path)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists():
            assert time.monotonic() < deadline and child.poll() is None, child.communicate()
            time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert (tmp_path / "removed").exists()
    assert child.returncode != 0  # stopped, not graded


def test_a_run_that_breaks_under_the_mutant_kills_it_with_the_error(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    """A covering run that raises instead of ending (the harness could not finish it) is a kill of
    kind ``error`` with the exception, when the mutant was planted -- never ``not planted``."""
    import pytest_elr.backends.kafka as kafka_backend
    import pytest_elr.scenario.executor as executor
    import pytest_elr.scenario.loader as loader
    from pytest_elr.sut.instrument import COVERAGE_ENV, MUTANT_ENV

    the_id = "org.example.P#m()V:1:NEGATE_CONDITIONALS:0"

    class Pool:
        def clusters(self) -> list[Any]:
            return []

        def close(self) -> None:
            pass

    class Backend:
        @staticmethod
        def new_session() -> Pool:
            return Pool()

        def __init__(self, **kwargs: Any) -> None:
            self.planted_mutants = {"controller-0": the_id}

    def breaks(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ElectLeaders request failed: Unknown broker error")

    monkeypatch.setattr(kafka_backend, "KafkaBackend", Backend)
    monkeypatch.setattr(executor, "run_scenario", breaks)
    monkeypatch.setattr(loader, "load_scenario", lambda path: SimpleNamespace(name="s"))
    for env in (MUTANT_ENV, COVERAGE_ENV, kafka_backend.START_TIMEOUT_ENV):  # run_one sets them: restored after
        monkeypatch.setenv(env, "")
    out = km.run_one(the_id, [{"scenario_file": "s.elr.yaml", "profile": "kafka"}], "4.4.0", tmp_path)
    assert out["status"] == "killed" and out["by"]["kind"] == "error", out
    assert "RuntimeError: ElectLeaders request failed" in out["by"]["message"]


def _lines_json(path: Path, scenario_files: list[str]) -> Path:
    source = "org/apache/kafka/controller/PartitionChangeBuilder.java"
    runs = {f"run{i}": {"scenario_file": f, "profile": "kafka", "seconds": 10.0 + i, "covered": {source: [25]}}
            for i, f in enumerate(scenario_files)}
    path.write_text(json.dumps({"kafka_version": "4.4.0", "source_of": {PCB: source}, "runs": runs}))
    return path


def test_a_coverage_taken_in_another_checkout_runs_this_checkouts_scenarios(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A campaign resumes from a committed ``lines.json`` (docs/campaigns/): the paths it names,
    absolute in the worktree that took the coverage or relative to the repository, are this
    checkout's scenario files."""
    (tmp_path / "scenarios" / "sub").mkdir(parents=True)
    for name in ("a.elr.yaml", "sub/b.elr.yaml"):
        (tmp_path / "scenarios" / name).write_text("name: x\n")
    lines = _lines_json(tmp_path / "lines.json", ["/work/wt-gone/scenarios/a.elr.yaml", "scenarios/sub/b.elr.yaml"])
    monkeypatch.chdir(tmp_path)
    index = km.CoverageIndex(lines)
    assert sorted(r["scenario_file"] for r in index.covering_runs(mutant("m", 25))) == [
        str(tmp_path / "scenarios" / "a.elr.yaml"), str(tmp_path / "scenarios" / "sub" / "b.elr.yaml")]


def test_run_refuses_a_coverage_whose_scenario_files_are_not_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Each mutant's child would end in an error (not a grade): nothing starts, the error names
    the index and the file."""
    lines = _lines_json(tmp_path / "lines.json", ["/work/wt-gone/scenarios/gone.elr.yaml"])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(km, "enumerate_mutants", lambda version: [mutant("m", 25)])
    monkeypatch.setattr(km, "run_campaign", lambda *a, **k: pytest.fail("a campaign started"))
    assert km.run_main(["--coverage", str(tmp_path), "--out", str(tmp_path / "c"), "--parallel", "1"]) == 2
    err = capsys.readouterr().err
    assert str(lines) in err and "/work/wt-gone/scenarios/gone.elr.yaml" in err


# ---------------------------------------------------------------------------------- the plant report


THE_ID = "org.example.P#m()V:1:NEGATE_CONDITIONALS:0"


def fake_run_one(monkeypatch: pytest.MonkeyPatch, read_at_run_end: dict[str, str],
                 read_after: dict[str, str] | None, passed: bool = False) -> None:
    """``run_one``'s collaborators: a run that fails at step ``b`` (or passes), a backend whose read at
    the run's end found ``read_at_run_end``, and a pool whose cluster answers ``read_after`` later
    (None: the cluster was evicted, the pool is empty)."""
    import pytest_elr.backends.kafka as kafka_backend
    import pytest_elr.scenario.executor as executor
    import pytest_elr.scenario.loader as loader
    from pytest_elr.sut.instrument import COVERAGE_ENV, MUTANT_ENV

    class Cluster:
        def planted_mutants(self) -> dict[str, str]:
            assert read_after is not None
            return read_after

    class Pool:
        closed = False

        def clusters(self) -> list[Any]:
            assert not self.closed, "read after the pool removed its clusters"
            return [Cluster()] if read_after is not None else []

        def close(self) -> None:
            self.closed = True

    class Backend:
        @staticmethod
        def new_session() -> Pool:
            return Pool()

        def __init__(self, **kwargs: Any) -> None:
            self.planted_mutants = dict(read_at_run_end)

    monkeypatch.setattr(kafka_backend, "KafkaBackend", Backend)
    monkeypatch.setattr(executor, "run_scenario",
                        lambda *a, **k: result(passed, () if passed else (Failure("b", "isr"),), "step b: isr"))
    monkeypatch.setattr(loader, "load_scenario", lambda path: scenario_with())
    for env in (MUTANT_ENV, COVERAGE_ENV, kafka_backend.START_TIMEOUT_ENV):  # run_one sets them: restored after
        monkeypatch.setenv(env, "")


def test_a_plant_report_read_only_after_the_runs_still_counts(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    """Stop 41's ``validateAlterPartitionData`` 1298 row: its run failed at the step and fields of
    its planted neighbours, but the read at the run's end found no report (``c1000: ""``), and the
    mutant was "not planted". The final read, after the runs, decides: it finds the report."""
    fake_run_one(monkeypatch, {"c1000": ""}, {"c1000": THE_ID})
    out = km.run_one(THE_ID, [{"scenario_file": "s.elr.yaml", "profile": "kafka"}], "4.4.0", tmp_path)
    assert out["status"] == "killed" and out["by"]["at"] == "b", out
    assert out["planted"] == {"c1000": THE_ID} and out["planted_final"] == {"c1000": THE_ID}
    # a survivor too
    fake_run_one(monkeypatch, {}, {"c1000": THE_ID}, passed=True)
    assert km.run_one(THE_ID, [{"scenario_file": "s.elr.yaml", "profile": "kafka"}], "4.4.0",
                      tmp_path)["status"] == "survived"


def test_not_planted_only_when_no_read_names_the_mutant(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    runs = [{"scenario_file": "s.elr.yaml", "profile": "kafka"}]
    # the agent said the site is missing, at the run's end and after: not planted, its words kept
    fake_run_one(monkeypatch, {"c1000": f"missing: {THE_ID}"}, {"c1000": f"missing: {THE_ID}"})
    out = km.run_one(THE_ID, runs, "4.4.0", tmp_path)
    assert out["status"] == "not planted" and out["planted"] == {"c1000": f"missing: {THE_ID}"}
    # no cluster left for a final read (evicted): the run's own read stands, either way
    fake_run_one(monkeypatch, {"c1000": THE_ID}, None)
    assert km.run_one(THE_ID, runs, "4.4.0", tmp_path)["status"] == "killed"
    fake_run_one(monkeypatch, {"c1000": ""}, None)
    assert km.run_one(THE_ID, runs, "4.4.0", tmp_path)["status"] == "not planted"
    # the classification itself
    assert km.plant_status(THE_ID, "killed", {}, {"c1001": THE_ID}) == "killed"
    assert km.plant_status(THE_ID, "survived", {"b0": "", "c1000": "failed: x"}, {}) == "not planted"
    assert km.plant_status(THE_ID, "no-start", {}, {}) == "no-start"


def test_a_nodes_plant_report_survives_a_lost_exec_output_and_a_paused_container(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Docker can lose a short exec's output under load (exit 0, nothing): read again, not taken as
    "no report". A paused container cannot be asked (the final read, after healing, asks again).
    The node's command runs for real here (a local shell, the report file in ``tmp_path``)."""
    import docker.errors

    import pytest_elr.sut.node as node_module
    from pytest_elr.sut.node import KafkaNode

    report = tmp_path / "elr-mutant.planted"
    monkeypatch.setattr(node_module, "PLANTED_FILE", str(report))

    def node(replies: list[Any]) -> Any:
        """``replies``: per exec, "run" (the command, in a local shell), "lost" (exit 0, no output)
        or an exception."""
        n = KafkaNode.__new__(KafkaNode)
        asked: list[list[str]] = []

        def exec_run(cmd: list[str], demux: bool = False, environment: Any = None) -> Any:
            asked.append(cmd)
            reply = replies.pop(0)
            if isinstance(reply, Exception):
                raise reply
            if reply == "lost":
                return SimpleNamespace(exit_code=0, output=b"")
            p = subprocess.run(cmd, capture_output=True)
            return SimpleNamespace(exit_code=p.returncode, output=p.stdout + p.stderr)

        container = SimpleNamespace(exec_run=exec_run)
        n._tc = SimpleNamespace(get_wrapped_container=lambda: container)
        n.spec = SimpleNamespace(name="c1000")
        n.asked = asked
        return n

    assert node(["run"]).planted_mutant() is None  # no report: the class never loaded there
    report.write_text(THE_ID + "\n")  # what the agent writes
    assert node(["run"]).planted_mutant() == THE_ID
    lost_once = node(["lost", "run"])
    assert lost_once.planted_mutant() == THE_ID and len(lost_once.asked) == 2
    assert node([docker.errors.APIError("409 Conflict: container is paused")]).planted_mutant() is None
    assert node(["lost"] * 5).planted_mutant() is None  # nothing readable: not a report


# ---------------------------------------------------------------------------------- controls


def test_a_kill_whose_control_fails_is_no_kill() -> None:
    killed = {"status": "killed", "by": {"scenario": "s", "profile": "kafka", "at": "heartbeats-delivered",
                                         "failures": ["step heartbeats-delivered: isr"]}}
    control = {"scenario": "s", "profile": "kafka", "passed": True, "at": None, "failures": [], "seconds": 31.5}
    row = km.judged_by_control(killed, control)
    assert row["status"] == "killed"
    assert row["control"] == {"scenario": "s", "profile": "kafka", "passed": True, "at": None, "seconds": 31.5,
                              "same_step": False}
    # failed at the kill's step: the same failure with or without the mutant
    same = km.judged_by_control(killed, {**control, "passed": False, "at": "heartbeats-delivered",
                                         "failures": ["step heartbeats-delivered: isr"], "message": "isr"})
    assert same["status"] == "control failed" and same["control"]["same_step"] is True
    assert same["control"]["failures"] == ["step heartbeats-delivered: isr"]
    # failed elsewhere (or could not finish): not a kill either
    elsewhere = km.judged_by_control(killed, {**control, "passed": False, "at": "T1", "message": "T1: leader"})
    assert elsewhere["status"] == "control failed" and elsewhere["control"]["same_step"] is False
    error = km.judged_by_control(killed, {**control, "passed": False, "at": None, "message": "no leader"})
    assert error["status"] == "control failed"
    assert km.control_words(same["control"]) == "control failed at heartbeats-delivered, the kill's step"
    assert km.control_words(row["control"]) == "control passed (32 s)"


def test_a_control_runs_once_per_scenario_in_a_campaign_and_a_resume_reuses_it(
        tmp_path: Path, index: km.CoverageIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    def counting(run: dict[str, Any], *args: Any) -> dict[str, Any]:
        ran.append(run["scenario_file"])
        return slow_fails_unmutated(run, *args)

    monkeypatch.setattr(km, "_child", fake_child)
    monkeypatch.setattr(km, "_control", counting)
    kills = [mutant("m", line) for line in (3, 6, 9, 21, 24, 27)]  # 3-9 by slow, 21-27 by fast
    km.run_campaign(kills[:4], index, tmp_path, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60)
    assert ran == ["slow.elr.yaml", "fast.elr.yaml"]
    km.run_campaign(kills, index, tmp_path, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60)  # resumed
    assert ran == ["slow.elr.yaml", "fast.elr.yaml"]  # the campaign's controls, from its state
    rows = km.results_of([tmp_path])
    assert {rows[m.id]["status"] for m in kills[:3]} == {"control failed"}
    assert {rows[m.id]["status"] for m in kills[3:]} == {"killed"}
    assert rows[kills[0].id]["control"]["same_step"] is True and rows[kills[0].id]["control"]["seconds"] == 90.0
    # survivors and no-starts have no control
    km.run_campaign([mutant("m", 22), mutant("m", 23)], index, tmp_path, budget_s=1e9, shard=(1, 1),
                    mutant_timeout_s=60)
    assert ran == ["slow.elr.yaml", "fast.elr.yaml"]
    assert not any(r.get("control") for r in km.results_of([tmp_path]).values() if r["status"] != "killed"
                   and r["status"] != "control failed")
    # --retry 'control failed': those mutants again, and their failed control with them (once)
    km.run_campaign(kills, index, tmp_path, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60,
                    retry=frozenset({"control failed"}))
    assert ran == ["slow.elr.yaml", "fast.elr.yaml", "slow.elr.yaml"]
    assert km.control_cost(km.results_of([tmp_path]), km.controls_of([tmp_path])) == \
        "controls: 3 unmutated runs, 210 s in all, judged 6 kills (35.0 s a kill)"


def test_mutants_at_once_killed_by_one_scenario_share_one_control(
        tmp_path: Path, index: km.CoverageIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    all_in = threading.Barrier(3, timeout=30)  # the three kills reach the control together

    def together(m: km.Mutant, *args: Any) -> dict[str, Any]:
        all_in.wait()
        return fake_child(m, *args)

    def counting(run: dict[str, Any], *args: Any) -> dict[str, Any]:
        ran.append(run["scenario_file"])
        time.sleep(0.2)  # the others arrive while it runs: they wait for it, not run their own
        return passing_control(run, *args)

    monkeypatch.setattr(km, "_child", together)
    monkeypatch.setattr(km, "_control", counting)
    km.run_campaign([mutant("m", line) for line in (21, 24, 27)], index, tmp_path, budget_s=1e9, shard=(1, 1),
                    mutant_timeout_s=60, parallel=3)
    assert ran == ["fast.elr.yaml"]
    assert {r["status"] for r in km.results_of([tmp_path]).values()} == {"killed"}


def test_the_table_and_page_count_control_failures_apart(tmp_path: Path, index: km.CoverageIndex,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(km, "_child", fake_child)
    monkeypatch.setattr(km, "_control", slow_fails_unmutated)
    km.run_campaign([mutant("build", 3), mutant("build", 21), mutant("build", 22)], index, tmp_path,
                    budget_s=1e9, shard=(1, 1), mutant_timeout_s=60)
    results = km.results_of([tmp_path])
    lines, counts = km.summary(results)
    assert counts == {"control failed": 1, "killed": 1, "survived": 1}
    assert lines[0].split() == ["method", "killed", "survived", "equivalent", "control-failed", "no-start",
                                "timed-out", "not-planted", "uncovered"]
    assert lines[1].split() == ["PartitionChangeBuilder.build", "1", "1", "0", "1", "0", "0", "0", "0"]
    assert "killed 1 of 2 planted and graded (50%); argued equivalent 0; no-start 0, control failed 1," in lines[2]
    assert lines[lines.index(next(ln for ln in lines if ln.startswith("control failed ("))) + 1].endswith(
        "slow.elr.yaml at a; control failed at a, the kill's step")
    page = km.html_page(results, "t", km.controls_of([tmp_path]))
    assert "<tr class='control-failed'><td>PartitionChangeBuilder.build</td><td>3</td>" in page
    assert "<td>control failed</td><td>slow.elr.yaml [kafka]: step a: elr -- control failed at a, " in page
    assert "controls: 2 unmutated runs, 120 s in all, judged 2 kills (60.0 s a kill)" in page
    assert km.report_main([str(tmp_path), "--html", str(tmp_path / "c.html")]) == 0
    assert "control-failed" in (tmp_path / "c.html").read_text()


def test_a_control_child_that_fails_or_hangs_is_a_failed_control(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # the real _control, its child a stand-in
    run = {"scenario_file": "s.elr.yaml", "profile": "kafka"}
    script = "import json, sys; spec = json.loads(sys.argv[1]); print(json.dumps({'passed': True, 'at': None, " \
             "'failures': [], 'run': spec['control']}))"
    monkeypatch.setattr(km, "child_command", lambda spec: [sys.executable, "-c", script, spec])
    ok = km._control(run, "4.4.0", tmp_path, timeout_s=60)
    assert ok is not None and ok["passed"] is True and ok["run"] == run and ok["seconds"] >= 0
    monkeypatch.setattr(km, "child_command", lambda spec: [sys.executable, "-c", "raise SystemExit('boom')"])
    broke = km._control(run, "4.4.0", tmp_path, timeout_s=60)
    assert broke is not None and broke["passed"] is False and "boom" in broke["message"]
    monkeypatch.setattr(km, "child_command", lambda spec: [sys.executable, "-c", "import time; time.sleep(60)"])
    hung = km._control(run, "4.4.0", tmp_path, timeout_s=1)
    assert hung is not None and (hung["passed"], hung["kind"]) == (False, "timed out")


def no_start_child(mutant: km.Mutant, runs: Any, version: str, history: Path, timeout_s: float) -> dict[str, Any]:
    """Every mutant's cluster fails to start (as run_one reports it: the run that could not start)."""
    return {"status": "no-start", "runs_tried": 1,
            "by": {"scenario": "fast", "scenario_file": runs[0]["scenario_file"], "profile": "kafka",
                   "message": "backend kafka could not start: the cluster did not start: JVM exited"}}


@pytest.mark.parametrize("unmutated_starts", [True, False], ids=["mutant's", "machine's"])
def test_a_no_start_is_judged_by_an_unmutated_start_now(tmp_path: Path, index: km.CoverageIndex,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        unmutated_starts: bool) -> None:
    """Stop 44: a no-start at load 25 was killed in 51 s when run again alone. A no-start now stands
    only when the same scenario, unmutated, starts a cluster right after; else the machine could not
    start one and it is counted apart as ``control failed``, and run again with ``--retry``."""
    starts: list[str] = []

    def unmutated(run: dict[str, Any], version: str, history: Path, timeout_s: float) -> dict[str, Any]:
        starts.append(run["scenario_file"])
        if unmutated_starts:
            return {"passed": True, "at": None, "failures": [], "seconds": 20.0}
        return {"passed": False, "at": None, "kind": "no-start", "failures": [], "seconds": 61.0,
                "message": "backend kafka could not start: the cluster did not start: not ready"}

    monkeypatch.setattr(km, "_child", no_start_child)
    monkeypatch.setattr(km, "_control", unmutated)
    mutants = [mutant("m", 25), mutant("m", 26)]
    km.run_campaign(mutants, index, tmp_path, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60)
    rows = km.results_of([tmp_path])
    assert starts == ["fast.elr.yaml", "fast.elr.yaml"]  # one start each: never a cached control
    assert "judged 0 kills" in km.control_cost(rows, km.controls_of([tmp_path]))  # no kill was judged
    if unmutated_starts:
        assert {r["status"] for r in rows.values()} == {"no-start"}
        assert km.control_words(rows[mutants[0].id]["control"]) == "an unmutated start succeeded (20 s)"
    else:
        assert {r["status"] for r in rows.values()} == {"control failed"}
        assert "the unmutated cluster did not start either" in rows[mutants[0].id]["control"]["message"]
        km.run_campaign(mutants, index, tmp_path, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60,
                        retry=frozenset({"control failed"}))
        assert len(starts) == 4  # run again, each with a fresh start


def test_a_timed_out_mutant_retried_goes_on_after_the_runs_it_got_through(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut off after 2 of 5 covering runs, then after 2 more, then killed by the last: each sitting
    runs only what the last one did not, the row counts every run, and the sittings' times add up."""
    source = "org/apache/kafka/controller/PartitionChangeBuilder.java"
    runs = {f"s{i}": {"scenario_file": f"s{i}.elr.yaml", "profile": "kafka", "seconds": float(i),
                      "covered": {source: [25]}} for i in range(5)}
    (tmp_path / "lines.json").write_text(json.dumps({"kafka_version": "4.4.0", "source_of": {PCB: source},
                                                     "runs": runs}))
    index = km.CoverageIndex(tmp_path / "lines.json")
    given: list[list[str]] = []

    def cut_after_two_or_killed_by_s4(m: km.Mutant, runs: Any, *args: Any) -> dict[str, Any]:
        given.append([r["scenario_file"] for r in runs])
        if runs[-1]["scenario_file"] == "s4.elr.yaml" and len(runs) == 1:
            by = {"scenario": "s4", "scenario_file": "s4.elr.yaml", "profile": "kafka", "at": "a",
                  "failures": ["step a: elr"]}
            return {"status": "killed", "runs_tried": 1, "by": by}
        return {"status": "timed out", "runs_tried": 2, "runs_total": len(runs)}

    monkeypatch.setattr(km, "_child", cut_after_two_or_killed_by_s4)
    campaign, m = tmp_path / "c", mutant("m", 25)
    km.run_campaign([m], index, campaign, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60)
    km.run_campaign([m], index, campaign, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60,
                    retry=frozenset({"timed out"}))
    second = km.results_of([campaign])[m.id]
    assert (second["status"], second["runs_tried"], second["runs_total"], second["resumed_after"]) == \
        ("timed out", 4, 5, 2)
    km.run_campaign([m], index, campaign, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60,
                    retry=frozenset({"timed out"}))
    third = km.results_of([campaign])[m.id]
    assert given == [[f"s{i}.elr.yaml" for i in range(5)], ["s2.elr.yaml", "s3.elr.yaml", "s4.elr.yaml"],
                     ["s4.elr.yaml"]]
    assert (third["status"], third["runs_tried"], third["resumed_after"]) == ("killed", 5, 4)
    assert third["earlier_seconds"] == round(second["seconds"] + second["earlier_seconds"], 1)
    # --from-start runs every covering run again
    km.run_campaign([m], index, campaign, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60,
                    retry=frozenset({"killed"}), from_start=True)
    assert given[-1] == [f"s{i}.elr.yaml" for i in range(5)]


def test_a_timed_out_row_resumes_only_on_the_same_covering_runs() -> None:
    runs = [{"scenario_file": f"s{i}.elr.yaml", "profile": "kafka"} for i in range(4)]
    cut = {"status": "timed out", "runs_tried": 3, "runs_total": 4}
    assert km.resume_point(cut, runs) == 3
    assert km.resume_point({**cut, "runs_digest": km.runs_digest(runs)}, runs) == 3
    # another order, another set, another status: from the start
    assert km.resume_point({**cut, "runs_digest": km.runs_digest(runs[::-1])}, runs) == 0
    assert km.resume_point({**cut, "runs_total": 5}, runs) == 0
    assert km.resume_point({**cut, "status": "survived"}, runs) == 0
    assert km.resume_point(None, runs) == 0
    # every run got through before the cut (the plant read was cut off): the last runs again
    assert km.resume_point({**cut, "runs_tried": 4}, runs) == 3


def test_a_mutant_argued_equivalent_is_counted_apart_not_run_and_a_kill_refutes_the_argument(
        tmp_path: Path, index: km.CoverageIndex, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    survivor, cut_off, killed, never_run = (mutant("m", 1), mutant("m", 2), mutant("m", 3), mutant("m", 4))
    rows = [{**dataclasses.asdict(survivor), "status": "survived", "runs_tried": 2},
            {**dataclasses.asdict(cut_off), "status": "timed out", "runs_tried": 1, "runs_total": 2},
            {**dataclasses.asdict(killed), "status": "killed", "runs_tried": 1,
             "by": {"scenario": "slow", "profile": "kafka", "failures": ["step a: elr"]}}]
    (tmp_path / "results-1of1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / km.ARGUMENTS_FILE).write_text(
        "# argued in docs/kafka-mutants.md\n"
        + "".join(f"{m.id}\tonly a log line reads it\n" for m in (survivor, cut_off, killed, never_run)))
    results = km.results_of([tmp_path])
    assert [results[m.id]["status"] for m in (survivor, cut_off, killed, never_run)] == \
        ["equivalent", "equivalent", "killed", "equivalent"]
    assert results[cut_off.id]["graded_as"] == "timed out"
    # argued before it ever ran: classified all the same, its place in the table read off its id
    assert (results[never_run.id]["graded_as"], results[never_run.id]["line"]) == ("not run", 4)
    assert (results[never_run.id]["class_name"], results[never_run.id]["method"]) == (never_run.class_name,
                                                                                       never_run.method)
    lines, counts = km.summary(results)
    assert (counts["equivalent"], counts["killed"], counts.get("survived", 0)) == (3, 1, 0)
    assert "killed 1 of 1 planted and graded (100%); argued equivalent 3" in "\n".join(lines)
    refuted = lines.index("argued equivalent, yet killed (the argument is wrong: take it out of equivalent.tsv):")
    assert killed.id in lines[refuted + 1]
    assert "argued: only a log line reads it" in km.html_page(results, "t")
    # a campaign does not run a mutant argued equivalent, unless asked to
    ran: list[str] = []
    monkeypatch.setattr(km, "_child", lambda m, *args: ran.append(m.id) or fake_child(m, *args))
    km.run_campaign([never_run, mutant("m", 5)], index, tmp_path, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60)
    assert ran == [mutant("m", 5).id]
    km.run_campaign([never_run], index, tmp_path, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60,
                    retry=frozenset({"equivalent"}))
    assert ran[-1] == never_run.id
    # a line without its reason: the file, the line and what was expected, no traceback
    (tmp_path / km.ARGUMENTS_FILE).write_text(f"{survivor.id}\tfine\n{killed.id}\n")
    assert km.report_main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / km.ARGUMENTS_FILE}:2: expected a mutant id" in err and "Traceback" not in err


def test_retried_only_runs_the_rows_of_that_status_and_none_never_graded(
        tmp_path: Path, index: km.CoverageIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run --retry 'timed out'`` alone also starts every covered mutant not graded yet (437 of them
    in the fourth campaign's directory, where 11 time-outs were meant); ``--retried-only`` runs the
    time-outs and nothing else."""
    cut_off, survivor, never_run = mutant("m", 1), mutant("m", 2), mutant("m", 3)
    rows = [{**dataclasses.asdict(cut_off), "status": "timed out", "runs_tried": 1, "runs_total": 2},
            {**dataclasses.asdict(survivor), "status": "survived", "runs_tried": 2}]
    campaign = tmp_path / "c"
    campaign.mkdir()
    (campaign / "results-1of1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    started: list[str] = []

    def survive(m: km.Mutant, runs: Any, *args: Any) -> dict[str, Any]:
        started.append(m.id)
        return {"status": "survived", "runs_tried": len(runs)}

    monkeypatch.setattr(km, "_child", survive)
    every = [cut_off, survivor, never_run]
    km.run_campaign(every, index, campaign, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60,
                    retry=frozenset({"timed out"}), retried_only=True)
    assert started == [cut_off.id]
    km.run_campaign(every, index, campaign, budget_s=1e9, shard=(1, 1), mutant_timeout_s=60,
                    retry=frozenset({"survived"}))
    assert sorted(started[1:]) == sorted([cut_off.id, survivor.id, never_run.id])
    with pytest.raises(SystemExit):
        km.run_main(["--coverage", str(tmp_path), "--out", str(campaign), "--retried-only"])
