"""A three-mutant campaign of Kafka's own code, end to end on real Kafka: coverage of one scenario
(``elr kafka-coverage``), then ``elr kafka-mutants run`` plants each mutant in a fresh cluster and
runs the scenario that covers its line. One mutant is killed (the ELR is never populated: the
scenario's ELR expectations fail), one is a change no client can see (a log line removed) and is
reported as survived, one stops the cluster from starting (brokers refused at registration).

This also proves the agent plants in the real controller: a survivor counts only when the agent
reported its plant (else it is "not planted"), read at each run's end and once more after the
mutant's runs. And the kill's control: its scenario, run once unmutated on the same release, passes,
so the kill stands (else it would be "control failed")."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_elr.schedule import kafka_coverage, kafka_mutants

pytestmark = pytest.mark.docker

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "min_isr_change_same_value.elr.yaml"
PCB = "org.apache.kafka.controller.PartitionChangeBuilder"
KILLED = f"{PCB}#maybePopulateTargetElr()V:533:NEGATE_CONDITIONALS:0"
SURVIVES = f"{PCB}#tryElection(Lorg/apache/kafka/common/metadata/PartitionChangeRecord;)V:337:VOID_METHOD_CALLS:1"
NO_START = ("org.apache.kafka.controller.ClusterControlManager#registerBroker(Lorg/apache/kafka/common/message/"
            "BrokerRegistrationRequestData;JLorg/apache/kafka/metadata/FinalizedControllerFeatures;Z)"
            "Lorg/apache/kafka/controller/ControllerResult;:357:NEGATE_CONDITIONALS:0")


def test_a_three_mutant_campaign_killed_survived_no_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cov, campaign = tmp_path / "coverage", tmp_path / "campaign"
    assert kafka_coverage.main([str(SCENARIO), "--out", str(cov), "--kafka-version", "4.4.0"]) == 0
    index = kafka_mutants.CoverageIndex(cov / "lines.json")
    listed = {m.id: m for m in kafka_mutants.enumerate_mutants("4.4.0")}
    for mutant_id in (KILLED, SURVIVES, NO_START):  # the ids are the agent's own, on covered lines
        assert index.covering_runs(listed[mutant_id]), mutant_id

    argv = ["--coverage", str(cov), "--out", str(campaign)]
    for mutant_id in (KILLED, SURVIVES, NO_START):
        argv += ["--mutant", mutant_id]
    assert kafka_mutants.run_main(argv) == 0
    results = kafka_mutants.results_of([campaign])

    killed = results[KILLED]
    assert killed["status"] == "killed"
    assert killed["by"]["scenario"] == "min-isr-change-same-value" and killed["by"]["kind"] == "check"
    assert any(f.endswith(": elr") for f in killed["by"]["failures"]), killed["by"]
    assert KILLED in killed["planted"].values() and KILLED in killed["planted_final"].values()
    # the kill stands: the same scenario, unmutated on the same release, passed (its control)
    control = killed["control"]
    assert (control["scenario"], control["profile"], control["passed"], control["at"]) == (
        "min-isr-change-same-value", "kafka", True, None), control
    [ran] = kafka_mutants.controls_of([campaign])  # one control: the only kill's scenario
    assert ran["passed"] and ran["kafka_version"] == "4.4.0" and ran["seconds"] == control["seconds"]

    survived = results[SURVIVES]
    assert survived["status"] == "survived" and survived["runs_tried"] == 1
    assert SURVIVES in survived["planted"].values()  # it ran in the controller, and nobody could tell
    assert "control" not in survived  # a kill is checked against its scenario unmutated, a no-start below

    # the no-start stands: the same scenario, unmutated, started a cluster right after (not the machine's)
    no_start = results[NO_START]
    assert no_start["status"] == "no-start" and no_start["control"]["started"] is True, no_start.get("control")
    assert "the cluster did not start" in no_start["by"]["message"]

    out = capsys.readouterr().out
    assert "killed 1 of 2 planted and graded (50%); argued equivalent 0; no-start 1, control failed 0" in out
    assert "controls: 1 unmutated runs" in out and "judged 1 kills" in out
    assert "`PartitionChangeBuilder.tryElection` line 337: call of Logger.info removed" in out
