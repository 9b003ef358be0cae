"""The partition leaders' AlterPartition refusals held to the model (``Executor._hold_refusals_to_model``):
recorded where they differ from every allowed state's, and a refusal of an ineligible replica that no
state has fails its step unless it raced that broker's registration change (``pytest_elr.sut.refusals``,
each rule planted below)."""

from __future__ import annotations

import json
from pathlib import Path

from fake_backend import SILENT, Fake

from pytest_elr.actions import Action, ForgedAlterPartition
from pytest_elr.core.observation import Refusal, Result
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario, parse_scenario
from pytest_elr.sut.isr_shrinks import DAY_MS
from pytest_elr.sut.refusals import (
    RACE_GRACE_MS,
    IneligibleRefusal,
    UnracedRefusal,
    ineligible_refusals,
    registration_changes,
    unraced,
)

ROOT = Path(__file__).resolve().parents[1]
#: Kafka 4.4.0's lines as its controller writes them (ReplicationControlManager, ClusterControlManager)
REFUSAL = ("[06:45:15,998] INFO [QuorumController id=3000] Rejecting AlterPartition request from node 2 for "
           "t-abc123-0 because it specified ineligible replicas [0 (fenced), 1 (shutting down)] in the new ISR "
           "[BrokerState(brokerId=2, brokerEpoch=7), BrokerState(brokerId=0, brokerEpoch=5)]. "
           "(org.apache.kafka.controller.ReplicationControlManager)")
FENCED_0 = ("[06:45:09,120] INFO [QuorumController id=3000] Replayed BrokerRegistrationChangeRecord modifying the "
            "registration for broker 0: BrokerRegistrationChangeRecord(brokerId=0, brokerEpoch=5, fenced=1) "
            "(org.apache.kafka.controller.ClusterControlManager)")
NEW_1 = ("[06:45:14,500] INFO [QuorumController id=3000] Replayed RegisterBrokerRecord establishing a new "
         "incarnation of broker 1: RegisterBrokerRecord(brokerId=1, ...) "
         "(org.apache.kafka.controller.ClusterControlManager)")
UNREGISTER_2 = ("[06:45:14,600] INFO [QuorumController id=3000] Replayed UnregisterBrokerRecord(brokerId=2, "
                "brokerEpoch=9)")


class RefusesOnce(Fake):
    """A controller that refused one AlterPartition the model's leader never sent."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def protocol_errors(self) -> list[str]:
        self.calls += 1
        return ["INELIGIBLE_REPLICA"] if self.calls == 2 else []


def _refusals(root: Path) -> list[dict[str, object]]:
    (path,) = root.rglob("events.jsonl")
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["type"] == "refusals"]


def test_a_refusal_the_model_did_not_make_is_recorded_at_its_step(tmp_path: Path) -> None:
    result = run_scenario(parse_scenario(SILENT, "s.elr.yaml"), RefusesOnce(), "kafka", tmp_path)
    assert result.passed, result.message
    (event,) = _refusals(tmp_path)
    assert (event["step"], event["system"], event["model"]) == ("follower-cut", ["INELIGIBLE_REPLICA"], [])


def test_the_same_refusals_on_both_sides_record_nothing(tmp_path: Path) -> None:
    assert run_scenario(parse_scenario(SILENT, "s.elr.yaml"), Fake(), "kafka", tmp_path).passed
    assert _refusals(tmp_path) == []


# --- reading the controller's lines ----------------------------------------------------------------

def _ms(clock: str) -> int:
    h, m, rest = clock.split(":")
    s, ms = rest.split(",")
    return ((int(h) * 60 + int(m)) * 60 + int(s)) * 1000 + int(ms)


def test_a_refusal_line_names_the_asking_leader_and_each_replica_with_its_reason() -> None:
    other = REFUSAL.replace("for t-abc123-0", "for t-abc1234-0")  # another run's topic
    (found,) = ineligible_refusals([FENCED_0, other, REFUSAL, "not a log line"], "t-abc123")
    assert (found.at_ms, found.leader, found.partition) == (_ms("06:45:15,998"), 2, 0)
    assert found.ineligible == ((0, "fenced"), (1, "shutting down"))


def test_every_kind_of_registration_change_is_read() -> None:
    lines = [FENCED_0, NEW_1, UNREGISTER_2,
             "[06:45:14,700] INFO Replayed RegisterControllerRecord containing ControllerRegistration(id=3000)",
             "[06:45:14,800] INFO Replayed PartitionChangeRecord(partitionId=0, leader=1)"]
    assert registration_changes(lines) == [(_ms("06:45:09,120"), 0), (_ms("06:45:14,500"), 1),
                                           (_ms("06:45:14,600"), 2)]


def test_a_refusal_soon_after_the_brokers_registration_changed_is_a_race() -> None:
    (refusal,) = ineligible_refusals([REFUSAL], "t-abc123")
    changes = registration_changes([FENCED_0, NEW_1])
    found = unraced([refusal], changes, since_ms=_ms("06:45:00,000"))
    # broker 1's new incarnation 1.5 s before: a race; broker 0 fenced 6.9 s before: not
    assert [(u.broker, u.reason, u.since_change_ms) for u in found] == [(0, "fenced", 6878)]
    assert "broker 2 asked the controller to add broker 0 to the ISR of partition 0, refused (fenced) 6.9 s" \
        in str(found[0])
    assert unraced([refusal], changes, _ms("06:45:00,000"), grace_ms=7000) == []


def test_a_broker_whose_registration_never_changed_in_the_log_is_not_a_race() -> None:
    (refusal,) = ineligible_refusals([REFUSAL], "t-abc123")
    found = unraced([refusal], [], since_ms=_ms("06:45:00,000"))
    assert [(u.broker, u.since_change_ms) for u in found] == [(0, None), (1, None)]
    assert "no registration change of it" in str(found[0])


def test_a_change_after_the_refusal_does_not_explain_it_and_a_refusal_before_the_window_is_not_read() -> None:
    (refusal,) = ineligible_refusals([REFUSAL], "t-abc123")
    later = [(_ms("06:45:16,500"), 0), (_ms("06:45:16,500"), 1)]
    assert len(unraced([refusal], later, since_ms=_ms("06:45:00,000"))) == 2
    assert unraced([refusal], later, since_ms=_ms("06:45:16,000")) == []


def test_times_of_day_across_midnight() -> None:
    refusal = IneligibleRefusal(at_ms=500, leader=2, partition=0, ineligible=((0, "fenced"),), line="")
    assert unraced([refusal], [(DAY_MS - 1000, 0)], since_ms=DAY_MS - 2000) == []  # 1.5 s before, over midnight
    assert len(unraced([refusal], [(DAY_MS - RACE_GRACE_MS - 1000, 0)], since_ms=DAY_MS - 2000)) == 1


# --- held to the model ------------------------------------------------------------------------------

def _unraced(broker: int = 1) -> UnracedRefusal:
    refusal = IneligibleRefusal(at_ms=0, leader=0, partition=0, ineligible=((broker, "fenced"),), line="")
    return UnracedRefusal(refusal, broker, "fenced", 6000)


class LeaderProposesIneligible(RefusesOnce):
    """Kafka 4.4.0 with the leader's eligibility check mutated (``Partition.isReplicaIsrEligible``
    line 931 ``returns true``): it asks to add a follower long fenced; the controller refuses it and
    the leader falls back to its committed ISR, so only the refusal tells. ``found``: what the
    controllers' logs show (``Backend.unraced_refusals``)."""

    def __init__(self, found: list[UnracedRefusal] | None) -> None:
        super().__init__()
        self.found, self.asked = found, []

    def unraced_refusals(self, since: float) -> list[UnracedRefusal] | None:
        self.asked.append(since)
        return self.found


def test_a_refusal_no_state_has_and_no_race_explains_fails_its_step(tmp_path: Path) -> None:
    backend = LeaderProposesIneligible([_unraced()])
    result = run_scenario(parse_scenario(SILENT, "s.elr.yaml"), backend, "kafka", tmp_path)
    assert not result.passed
    assert [(f.step, f.what) for f in result.failures] == [("follower-cut", "refused")], result.message
    assert "broker 0 asked the controller to add broker 1 to the ISR of partition 0, refused (fenced)" \
        in (result.message or "")
    assert len(backend.asked) == 1


def test_a_refusal_that_raced_a_registration_change_is_recorded_only(tmp_path: Path) -> None:
    for found in ([], None):  # every refused replica had just changed; the logs could not be read
        backend = LeaderProposesIneligible(found)
        result = run_scenario(parse_scenario(SILENT, "s.elr.yaml"), backend, "kafka", tmp_path / str(found))
        assert result.passed, result.message
        assert len(backend.asked) == 1 and len(_refusals(tmp_path / str(found))) == 1


class StaleRequestArrives(Fake):
    """The model as the system (it refuses KIP-903's stale request at T3 as the model does), whose
    controllers' logs would show the refusal long after broker 1's registration changed: only the
    model's own refusal of it may excuse it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[float] = []

    def unraced_refusals(self, since: float) -> list[UnracedRefusal] | None:
        self.asked.append(since)
        return [_unraced()]


def test_a_refusal_the_model_makes_too_is_not_read_from_the_logs(tmp_path: Path) -> None:
    scenario = load_scenario(ROOT / "scenarios" / "kip903_stale_broker_epoch.elr.yaml")
    backend = StaleRequestArrives()
    result = run_scenario(scenario, backend, "kip966", tmp_path)
    assert result.passed, result.message
    assert backend.asked == []


class ForgedRefusalLogged(Fake):
    """A forged request refused as Kafka's controller logs it (the forged answer's refusal counted
    among the controllers' refusals too), with the logs showing it long after the refused broker's
    change: the forged request's answer is held to the model where it is made, not here."""

    def __init__(self) -> None:
        super().__init__()
        self.logged: list[str] = []

    def apply(self, action: Action) -> Result:
        result = super().apply(action)
        if isinstance(action, ForgedAlterPartition) and isinstance(result, Refusal):
            self.logged.append(result.code)
        return result

    def protocol_errors(self) -> list[str]:
        logged, self.logged = self.logged, []
        return super().protocol_errors() + logged

    def unraced_refusals(self, since: float) -> list[UnracedRefusal] | None:
        return [_unraced(0)]


def test_a_forged_requests_refusal_is_not_taken_for_a_leaders(tmp_path: Path) -> None:
    scenario = load_scenario(ROOT / "scenarios" / "forged_alter_partition_checks.elr.yaml")
    result = run_scenario(scenario, ForgedRefusalLogged(), "kafka", tmp_path)
    assert result.passed, result.message
    assert any("INELIGIBLE_REPLICA" in step for step in _forged_refusal_steps(tmp_path)), "nothing was forged"


def _forged_refusal_steps(root: Path) -> list[str]:
    (path,) = root.rglob("events.jsonl")
    return [e["code"] for e in map(json.loads, path.read_text().splitlines()) if e["type"] == "refused"]


class RefusalLoggedLate(StaleRequestArrives):
    """The controllers' log shows the model's own refusal a step late: logged while T3 settled, read
    after T4's actions."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[str] = []

    def protocol_errors(self) -> list[str]:
        late, self.pending = self.pending, super().protocol_errors()
        return late


def test_a_refusal_the_model_made_in_the_step_before_is_not_read_from_the_logs(tmp_path: Path) -> None:
    text = (ROOT / "scenarios" / "kip903_stale_broker_epoch.elr.yaml").read_text()
    for expectation in ("      rejected: INELIGIBLE_REPLICA\n",
                        "      by_profile:\n        kafka: {rejected: INVALID_UPDATE_VERSION}\n"):
        assert expectation in text
        text = text.replace(expectation, "")  # the step's own `rejected:` reads the refusal in time
    backend = RefusalLoggedLate()
    result = run_scenario(parse_scenario(text, "late.elr.yaml"), backend, "kip966", tmp_path)
    assert result.passed, result.message
    assert backend.asked == [] and any(e["step"] == "T4" for e in _refusals(tmp_path))
