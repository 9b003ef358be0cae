"""``alter_partition``: an AlterPartition the harness forges as the partition's leader would send it,
to hold the controller's own checks to the model (KIP-903's epochs, KIP-704's recovery state, the
ISR's shape). Each refusal of the model is planted and named here; each Kafka mutant the scenario
``forged_alter_partition_checks`` exists for is played by a fake system and caught at its step."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_backend import Fake, ForgedAlterPartitionMutant

from pytest_elr.actions import Cut, ForgedAlterPartition, Produce, Reassign, Restart, Shutdown, UncleanElection
from pytest_elr.core.errors import OPERATOR_ERRORS
from pytest_elr.core.observation import Refusal
from pytest_elr.model import controller
from pytest_elr.model.cluster import ModelCluster, ModelError
from pytest_elr.model.profiles import get_profile
from pytest_elr.model.state import AlterPartition, PartitionRecord
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario, parse_scenario

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "forged_alter_partition_checks.elr.yaml"
COMPLETES = SCENARIO.with_name("forged_alter_partition_completes_reassignment.elr.yaml")


def recovering_alone(profile: str = "kafka") -> ModelCluster:
    """Broker 2 elected uncleanly, alone in the ISR, RECOVERING; 0 and 1 shut down."""
    m = ModelCluster((0, 1, 2), [0, 1, 2], 2, get_profile(profile))
    m.apply(Cut(links=((2, 0), (2, 1))))
    m.apply(Produce(count=3))
    for b in (1, 0):
        m.apply(Shutdown(broker=b))
    m.apply(UncleanElection(enabled=True))
    o = m.observe()
    assert (o.leader, o.isr, o.recovering) == (2, (2,), True)
    return m


# --- the language ---------------------------------------------------------------------------------

GOOD = """
name: forged
profiles: [kafka]
cluster: {brokers: 3}
topic: {name: t, replicas: [0, 1, 2], min_insync_replicas: 2}
steps:
  - at: forged
    do: [ITEM]
verdict: {acked_loss: none}
"""


@pytest.mark.parametrize(("item", "action"), [
    ("{alter_partition: {}}", ForgedAlterPartition()),
    ("{alter_partition: {isr: [0, 2], leader_recovery_state: recovering}}",
     ForgedAlterPartition(isr=(0, 2), recovering=True)),
    ("{alter_partition: {broker_epoch: stale, partition: 0}}", ForgedAlterPartition(stale_broker_epoch=True)),
    ("{alter_partition: {isr: [], leader_recovery_state: recovered, broker_epoch: current}}",
     ForgedAlterPartition(isr=())),
])
def test_each_form_reads_and_writes_back(item: str, action: ForgedAlterPartition) -> None:
    scenario = parse_scenario(GOOD.replace("ITEM", item))
    [read] = scenario.steps[0].actions
    assert read == action
    again = parse_scenario(GOOD.replace("ITEM", str(read.to_yaml((0, 1, 2))[0])))
    assert list(again.steps[0].actions) == [action]


@pytest.mark.parametrize(("item", "says"), [
    ("{alter_partition: true}", "alter_partition: expected a mapping"),
    ("{alter_partition: {isr: 2}}", "alter_partition.isr: expected a list of broker ids"),
    ("{alter_partition: {isr: [2, 2]}}", "alter_partition.isr: broker 2 is listed twice"),
    ("{alter_partition: {isr: [0, 7]}}", "alter_partition.isr: unknown broker id 7"),
    ("{alter_partition: {leader_recovery_state: unclean}}",
     "alter_partition.leader_recovery_state: expected one of recovered, recovering"),
    ("{alter_partition: {broker_epoch: old}}", "alter_partition.broker_epoch: expected one of current, stale"),
    ("{alter_partition: {leader: 2}}", "leader"),
])
def test_bad_forms_are_refused_with_the_line(item: str, says: str) -> None:
    from pytest_elr.core.errors import ScenarioError

    with pytest.raises(ScenarioError) as raised:
        parse_scenario(GOOD.replace("ITEM", item), "forged.elr.yaml")
    message = str(raised.value)
    assert says in message and "forged.elr.yaml:8" in message, message


def test_every_answer_the_model_gives_may_be_expected() -> None:
    for code in ("STALE_BROKER_EPOCH", "NOT_CONTROLLER", "FENCED_LEADER_EPOCH", "INVALID_REQUEST",
                 "INVALID_UPDATE_VERSION", "INELIGIBLE_REPLICA", "NEW_LEADER_ELECTED"):
        assert code in OPERATOR_ERRORS


# --- the model's checks, each planted ----------------------------------------------------------------


def request(part: PartitionRecord, **changes: object) -> AlterPartition:
    fields = {"leader": part.leader, "leader_epoch": part.leader_epoch, "partition_epoch": part.partition_epoch,
              "new_isr": tuple((b, 1) for b in part.isr), "broker_epoch": 1, "recovering": part.recovering}
    fields.update(changes)
    return AlterPartition(**fields)  # type: ignore[arg-type]


def context(fenced: frozenset[int] = frozenset()) -> controller.ControllerContext:
    return controller.ControllerContext(profile=get_profile("kafka"), min_isr=2,
                                        is_unfenced=lambda b: b not in fenced, broker_epoch=lambda b: 1,
                                        log_info=lambda part, b: (0, 0))


def partition(recovering: bool = False) -> PartitionRecord:
    return PartitionRecord(replicas=[0, 1, 2], leader=0, isr=[0, 1], leader_epoch=3, partition_epoch=7,
                           recovering=recovering)


@pytest.mark.parametrize(("changes", "recovering", "fenced", "code"), [
    ({}, False, (), None),
    ({"broker_epoch": 0}, False, (), "STALE_BROKER_EPOCH"),
    ({"leader_epoch": 4}, False, (), "NOT_CONTROLLER"),
    ({"partition_epoch": 8}, False, (), "NOT_CONTROLLER"),
    ({"leader_epoch": 2}, False, (), "FENCED_LEADER_EPOCH"),
    ({"leader": 1}, False, (), "INVALID_REQUEST"),
    ({"partition_epoch": 6}, False, (), "INVALID_UPDATE_VERSION"),
    ({"new_isr": ((0, 1), (3, 1))}, False, (), "INVALID_REQUEST"),
    ({"new_isr": ((0, 1), (1, 1), (1, 1))}, False, (), "INVALID_REQUEST"),
    ({"new_isr": ((1, 1),)}, False, (), "INVALID_REQUEST"),
    ({"new_isr": ((0, 1), (1, 1)), "recovering": True}, True, (), "INVALID_REQUEST"),
    ({"new_isr": ((0, 1),), "recovering": True}, False, (), "INVALID_REQUEST"),
    ({"new_isr": ((0, 1),), "recovering": True}, True, (), None),
    ({"new_isr": ((0, 1), (2, 1))}, False, (2,), "INELIGIBLE_REPLICA"),
    ({"new_isr": ((0, 1), (2, 0))}, False, (), "INELIGIBLE_REPLICA"),
], ids=["valid", "stale-sender", "leader-epoch-ahead", "partition-epoch-ahead", "leader-epoch-behind",
        "not-the-leader", "partition-epoch-behind", "not-assigned", "listed-twice", "leader-left-out",
        "recovering-with-two", "recovered-to-recovering", "recovering-alone", "fenced-member", "stale-member"])
def test_each_check_refuses_with_its_code(changes: dict[str, object], recovering: bool,
                                          fenced: tuple[int, ...], code: str | None) -> None:
    part = partition(recovering)
    assert controller.reject_alter_partition(part, request(part, **changes), context(frozenset(fenced))) == code


def test_a_request_that_changes_nothing_writes_nothing() -> None:
    part = partition()
    assert controller.alter_partition(part, request(part), context()) is None
    assert (part.isr, part.leader_epoch, part.partition_epoch) == ([0, 1], 3, 7)
    assert controller.alter_partition(part, request(part, new_isr=((1, 1), (0, 1))), context()) is None
    assert part.partition_epoch == 7, "the same members in another order are the same ISR to the model"


def test_a_recovery_state_alone_is_one_change() -> None:
    part = PartitionRecord(replicas=[0, 1, 2], leader=0, isr=[0], leader_epoch=3, partition_epoch=7, recovering=True)
    assert controller.answer_alter_partition(part, request(part, recovering=False), context()) is None
    assert (part.recovering, part.leader_epoch, part.partition_epoch) == (False, 3, 8)


def test_a_change_that_completes_a_reassignment_away_from_the_sender_answers_new_leader_elected() -> None:
    m = ModelCluster((0, 1, 2, 3), [0, 1, 2], 2, get_profile("kafka"))
    m.apply(Produce(count=2))
    m.apply(Shutdown(broker=3))
    m.apply(Reassign(replicas=(1, 2, 3)))  # waits for 3, which is down
    m.apply(Restart(broker=3))
    # 3 caught up and joined, completing it in the model's own rounds: answered by the controller
    assert m.observe().leader == 1
    part = m.partitions[0].part
    # planted: a reassignment whose completion the forged ISR makes, from the old leader 0
    part.replicas, part.adding, part.removing = [0, 1, 2, 3], [3], [0]
    part.leader, part.isr = 0, [0, 1, 2]
    req = AlterPartition(leader=0, leader_epoch=part.leader_epoch, partition_epoch=part.partition_epoch,
                         new_isr=((0, m.brokers[0].epoch), (1, m.brokers[1].epoch), (2, m.brokers[2].epoch),
                                  (3, m.brokers[3].epoch)), broker_epoch=m.brokers[0].epoch)
    assert controller.answer_alter_partition(part, req, m.ctx) == "NEW_LEADER_ELECTED"
    assert part.leader == 1 and part.replicas == [1, 2, 3]


def test_the_model_sends_what_the_step_says() -> None:
    m = recovering_alone()
    epoch = m.observe().partition_epoch
    assert m.apply(ForgedAlterPartition(recovering=True)) is None
    assert m.apply(ForgedAlterPartition(stale_broker_epoch=True)) == Refusal("alter_partition", "STALE_BROKER_EPOCH")
    assert m.apply(ForgedAlterPartition(isr=(0, 2))) == Refusal("alter_partition", "INELIGIBLE_REPLICA")
    assert m.observe().partition_epoch == epoch
    assert m.partitions[0].quorum_shrunk_by is None
    assert m.apply(ForgedAlterPartition()) is None
    o = m.observe()
    assert (o.recovering, o.partition_epoch) == (False, epoch + 1)
    assert m.partitions[0].quorum_shrunk_by, "RECOVERED alone under min ISR: the exemption says it was forged"
    assert m.apply(ForgedAlterPartition(recovering=True)) == Refusal("alter_partition", "INVALID_REQUEST")


def test_a_leaderless_partition_has_nobody_to_send_it_as() -> None:
    m = ModelCluster((0, 1, 2), [0, 1, 2], 2, get_profile("kafka"))
    for b in (2, 1, 0):
        m.apply(Shutdown(broker=b))
    with pytest.raises(ModelError, match="no leader to send it as"):
        m.apply(ForgedAlterPartition())


# --- held to the model, each Kafka mutant caught at its step -------------------------------------------


@pytest.mark.parametrize("scenario", [SCENARIO, COMPLETES], ids=["checks", "completes-reassignment"])
def test_the_scenarios_pass_on_a_system_that_follows_the_rules(scenario: Path) -> None:
    for profile in ("kafka", "kip966"):
        result = run_scenario(load_scenario(scenario), Fake(), profile)
        assert result.passed and not result.disagreements, result.message


@pytest.mark.parametrize(("mutant", "step", "says"), [
    ("1157", "forged-completion",
     "refused: expected accepted, observed alter_partition refused with NEW_LEADER_ELECTED"),
    ("1083", "stale-sender", "refused: expected refused with STALE_BROKER_EPOCH, observed accepted"),
    ("1158", "recovered", "refused: expected accepted, observed alter_partition refused with NEW_LEADER_ELECTED"),
    ("1356", "recovering-alone", "refused: expected accepted, observed alter_partition refused with INVALID_REQUEST"),
    ("1365", "recovering-alone", "refused: expected accepted, observed alter_partition refused with INVALID_REQUEST"),
])
def test_each_kafka_mutant_is_caught_at_its_step(mutant: str, step: str, says: str) -> None:
    system = type(f"Mutant{mutant}", (ForgedAlterPartitionMutant,), {"mutant": mutant})
    result = run_scenario(load_scenario(COMPLETES if mutant == "1157" else SCENARIO), system(), "kafka")
    assert not result.passed
    assert f"step {step}" in result.message and says in result.message, result.message


def test_the_python_api_forges_and_is_held_to_the_same_answer(pytester: pytest.Pytester) -> None:
    """``c.alter_partition(...)`` reads as the YAML form does; the answer is held to the model's and
    to ``expect(refused=...)``, and a wrong expectation fails at its line."""
    pytester.makepyfile(test_forged_api="""
        import pytest

        @pytest.mark.elr_profile("kafka")
        def test_stale_sender(elr_cluster):
            c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2)
            c.alter_partition(broker_epoch="stale")
            c.expect(refused="STALE_BROKER_EPOCH", isr=[0, 1, 2], partition_epoch="unchanged")
            c.alter_partition(isr=[0, 1])
            c.expect(refused="none", isr=[0, 1, 2], partition_epoch="bumped")

        @pytest.mark.elr_profile("kafka")
        def test_wrong_answer(elr_cluster):
            c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2)
            c.alter_partition(isr=[1, 2])
            c.expect(refused="none")
    """)
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*refused: expected accepted, observed alter_partition refused with INVALID_REQUEST*"])
