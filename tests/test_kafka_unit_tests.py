"""``elr kafka-mutants unit`` and ``side-by-side``: how one run of Kafka's unit tests under a mutant
is read (killed by which test, survived, not planted, timed out, the JVM dead without a report), and
the table that puts the unit tests' results beside the suite's. The last test runs Kafka 4.3.1's own
PartitionChangeBuilderTest under two real mutants (needs a JDK and Maven Central; no Docker)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from pytest_elr.schedule import kafka_mutants as km
from pytest_elr.schedule import kafka_unit_tests as ku

PCB = "org.apache.kafka.controller.PartitionChangeBuilder"
TEST = "org.apache.kafka.controller.PartitionChangeBuilderTest"
MID = f"{PCB}#build()Ljava/util/Optional;:300:NEGATE_CONDITIONALS:0"


def run(**kw: Any) -> ku.TestRun:
    return ku.TestRun(**{"seconds": 1.0, "exit_code": 0, "tests": 80, "planted": MID, **kw})


def test_a_test_that_passes_unmutated_and_fails_under_the_mutant_kills_it() -> None:
    r = ku.classify(MID, run(exit_code=1, failed={f"{TEST}#testA()": "expected: <1> but was: <2>"}), set())
    assert r["status"] == "killed" and r["grader"] == "kafka-unit-tests"
    assert r["by"]["tests"] == [f"{TEST}#testA()"]
    assert r["by"]["failures"] == ["PartitionChangeBuilderTest#testA(): expected: <1> but was: <2>"]


def test_a_test_failing_unmutated_tells_nothing() -> None:
    failing = {f"{TEST}#flaky()": "boom"}
    assert ku.classify(MID, run(exit_code=1, failed=failing), set(failing))["status"] == "survived"
    assert ku.classify(MID, run(), set())["status"] == "survived"


def test_a_mutant_the_agent_did_not_plant_is_not_graded_even_when_tests_fail() -> None:
    failed = {f"{TEST}#testA()": "x"}
    for planted in (None, f"missing: {MID}", f"failed: {MID}", MID.replace(":0", ":1")):
        r = ku.classify(MID, run(exit_code=1, failed=failed, planted=planted), set())
        assert r["status"] == "not planted", planted


def test_a_timeout_and_a_jvm_that_died_without_a_report() -> None:
    assert ku.classify(MID, run(timed_out=True, exit_code=None, tests=None), set())["status"] == "timed out"
    died = ku.classify(MID, run(exit_code=134, tests=None, output_tail="SIGSEGV"), set())
    assert died["status"] == "killed" and died["by"]["kind"] == "error" and "SIGSEGV" in died["by"]["message"]


def test_a_junit_report_gives_the_failed_and_errored_tests(tmp_path: Path) -> None:
    report = tmp_path / "TEST-junit-jupiter.xml"
    report.write_text(f"""<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="JUnit Jupiter" tests="3">
 <testcase name="testA()" classname="{TEST}" time="0.1"/>
 <testcase name="testB(short)[2]" classname="{TEST}"><failure message="expected: &lt;1&gt; but was: &lt;2&gt;&#10;more"
  type="org.opentest4j.AssertionFailedError">trace</failure></testcase>
 <testcase name="testC()" classname="{TEST}"><error type="java.lang.NullPointerException">trace</error></testcase>
</testsuite>""")
    assert ku.failed_tests(report) == (3, {f"{TEST}#testB(short)[2]": "expected: <1> but was: <2>",
                                           f"{TEST}#testC()": "java.lang.NullPointerException"})


def test_the_tests_grade_the_mutants_of_the_class_they_are_named_for() -> None:
    def m(cls: str, description: str = "jump if `x == 0` became `x != 0`") -> km.Mutant:
        return km.Mutant.parse(f"{cls}#f()V:1:VOID_METHOD_CALLS:0\t1\tVOID_METHOD_CALLS\t{description}")

    mutants = [m(PCB), m(PCB + "$ElectionResult"), m("org.apache.kafka.controller.ReplicationControlManager"),
               m(PCB, "call of Logger.info removed")]
    assert [x.class_name for x in ku.mutants_for(mutants, [TEST])] == [PCB, PCB + "$ElectionResult"]


def row(method: str, line: int, status: str, grader: str | None = None, **by: Any) -> dict[str, Any]:
    mutant = km.Mutant.parse(f"{PCB}#{method}()V:{line}:NEGATE_CONDITIONALS:0\t{line}\tNEGATE_CONDITIONALS\t"
                             f"jump if `x == 0` became `x != 0`")
    r: dict[str, Any] = {**mutant.__dict__, "status": status, "kafka_version": "4.3.1"}
    if grader:
        r["grader"] = grader
    if by:
        r["by"] = by
    return r


def by_id(*rows: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in rows}


def test_side_by_side_counts_each_mutant_once_and_names_the_lone_kills() -> None:
    unit = by_id(row("build", 1, "killed", ku.GRADER, tests=[f"{TEST}#testA()"]),
                 row("build", 2, "killed", ku.GRADER, tests=[f"{TEST}#testB()", f"{TEST}#testC()"]),
                 row("build", 3, "survived", ku.GRADER), row("build", 4, "survived", ku.GRADER),
                 row("tryElection", 5, "not planted", ku.GRADER), row("tryElection", 6, "survived", ku.GRADER))
    suite = by_id(row("build", 1, "killed", scenario="fence-leader", profile="default"),
                  row("build", 2, "survived"), row("build", 3, "killed", scenario="min-isr-change", profile="slow"),
                  row("build", 4, "survived"), row("tryElection", 5, "killed", scenario="x", profile="y"),
                  row("tryElection", 6, "uncovered"), row("tryElection", 7, "killed", scenario="z", profile="w"))
    lines = ku.side_by_side(unit, suite)
    table = {ln.split()[0]: ln.split()[1:] for ln in lines[1:4]}
    # both, unit only, suite only, neither, ungraded
    assert table["PartitionChangeBuilder.build"] == ["1", "1", "1", "1", "0"]
    # 5: not planted for the unit tests; 6: the suite never runs its line (not killed); 7: no unit result
    assert table["PartitionChangeBuilder.tryElection"] == ["0", "0", "0", "1", "2"]
    assert table["total"] == ["1", "1", "1", "2", "2"]
    text = "\n".join(lines)
    assert "of 5 mutants both graded: the unit tests kill 2, the suite kills 2, together 3" in text
    unit_only = text.split("killed by Kafka's unit tests only (1):\n")[1].splitlines()[0]
    assert unit_only == ("  `PartitionChangeBuilder.build` line 2: jump if `x == 0` became `x != 0`  "
                         "<- PartitionChangeBuilderTest#testB() (+1)")
    suite_only = text.split("killed by the suite only (1):\n")[1].splitlines()[0]
    assert suite_only.endswith("line 3: jump if `x == 0` became `x != 0`  <- min-isr-change [slow]")


def test_side_by_side_refuses_two_releases() -> None:
    other = row("build", 1, "killed")
    other["kafka_version"] = "4.4.0"
    with pytest.raises(ValueError, match="different releases"):
        ku.side_by_side(by_id(row("build", 1, "killed", ku.GRADER)), by_id(other))


def test_two_releases_compare_only_on_classes_of_identical_bytecode(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    rcm = "org.apache.kafka.controller.ReplicationControlManager"
    jars = {}
    for version, rcm_inner in (("4.3.1", b"old"), ("4.4.0", b"new")):
        jars[version] = tmp_path / f"kafka-metadata-{version}.jar"
        with zipfile.ZipFile(jars[version], "w") as z:
            z.writestr(PCB.replace(".", "/") + ".class", b"same")
            z.writestr(PCB.replace(".", "/") + "$Election.class", b"same too")
            z.writestr(rcm.replace(".", "/") + ".class", b"same")
            z.writestr(rcm.replace(".", "/") + "$1.class", rcm_inner)  # an inner class changed
    monkeypatch.setattr("pytest_elr.schedule.kafka_coverage.kafka_jars", lambda v: [jars[v]])
    assert ku.identical_classes("4.3.1", "4.4.0", {PCB, rcm, "org.Absent"}) == {PCB}

    unit = by_id(row("build", 1, "killed", ku.GRADER, tests=[f"{TEST}#testA()"]),
                 {**row("f", 2, "killed", ku.GRADER, tests=["x"]), "class_name": rcm, "id": f"{rcm}#f()V:2:N:0"})
    suite = {i: {**r, "kafka_version": "4.4.0", "status": "survived"} for i, r in unit.items()}
    lines = ku.side_by_side(unit, suite, same_code={PCB})
    table = {ln.split()[0]: ln.split()[1:] for ln in lines[1:4]}
    assert table["PartitionChangeBuilder.build"] == ["0", "1", "0", "0", "0"]
    assert table["ReplicationControlManager.f"] == ["0", "0", "0", "0", "1"]


def test_side_by_side_command_reads_two_result_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, rows in (("unit", [row("build", 1, "killed", ku.GRADER, tests=[f"{TEST}#testA()"])]),
                       ("suite", [row("build", 1, "survived")])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results-1of1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert ku.side_by_side_main([str(tmp_path / "unit"), str(tmp_path / "suite")]) == 0
    assert "killed by Kafka's unit tests only (1):" in capsys.readouterr().out
    assert ku.side_by_side_main([str(tmp_path / "unit"), str(tmp_path / "nothing")]) == 2


# ---------------------------------------------------------------------------------- on Kafka 4.3.1

# The two mutants of the suite's own CI campaign (tests/sut/test_kafka_mutants_campaign.py, on 4.4.0,
# whose PartitionChangeBuilder class files are byte-identical to 4.3.1's): the suite kills the first
# and cannot see the second.
#: the target ELR is filled only when `x != 0` holds: negated, the ELR Kafka's tests expect stays empty
KILLED = f"{PCB}#maybePopulateTargetElr()V:533:NEGATE_CONDITIONALS:0"
#: a log line removed: equivalent by construction, so no test can tell
SURVIVES = f"{PCB}#tryElection(Lorg/apache/kafka/common/metadata/PartitionChangeRecord;)V:337:VOID_METHOD_CALLS:1"


def test_kafka_4_3_1_partition_change_builder_test_under_two_mutants(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "unit"
    assert ku.unit_main(["--kafka-version", "4.3.1", "--out", str(out), "--mutant", KILLED, "--mutant", SURVIVES]) == 0
    printed = capsys.readouterr().out
    baseline = json.loads((out / "baseline.json").read_text())
    assert baseline["tests_run"] >= 50 and baseline["failing_unmutated"] == {}, baseline
    results = km.results_of([out])
    killed, survived = results[KILLED], results[SURVIVES]
    assert (killed["status"], killed["planted"], killed["grader"]) == ("killed", KILLED, "kafka-unit-tests")
    assert killed["by"]["kind"] == "check"
    # caught by Kafka's ELR tests (named in the row: which test, and its assertion's message)
    assert any("EligibleLeaderReplicas" in t for t in killed["by"]["tests"]), killed["by"]["tests"]
    assert killed["by"]["failures"][0].startswith("PartitionChangeBuilderTest#") and killed["by"]["message"]
    assert (survived["status"], survived["planted"]) == ("survived", SURVIVES)
    # the campaign's own report reads the rows
    assert "killed 1 of 2 planted and graded (50%)" in printed
    assert km.report_main([str(out)]) == 0
    assert "`PartitionChangeBuilder.tryElection` line 337: call of Logger.info removed" in capsys.readouterr().out
