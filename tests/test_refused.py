"""An operator request the controller refuses (``refused:``): read from the scenario, returned by
the model, held to the model by the executor (docs/language.md, "Expectations")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition

from pytest_elr.actions import Action, CancelReassignment, Crash, ElectLeaders, Reassign, UncleanElection
from pytest_elr.backends.kafka import KafkaBackend
from pytest_elr.core.errors import BackendError, ScenarioError
from pytest_elr.core.observation import Refusal, Result
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.profiles import get_profile
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import parse_scenario
from pytest_elr.sut.errors import KafkaProtocolError
from tests.fake_backend import Fake, ReportsRefusalsAsAccepted

#: Kafka 4.4.0's refusal (tests/test_reassignment_stale_elr.py): the shrink keeps 1 and 2 in the ELR,
#: the leader's unclean restart leaves the partition leaderless with ELR [1, 2], growing back is
#: refused; an unclean election of 0 is the way out. The records are written before the shrink, so 1
#: and 2 hold them (no invariant fires).
REFUSED = """
name: refused
profiles: [kafka]
cluster: {brokers: 3}
topic: {name: t, replicas: [0, 1, 2], min_insync_replicas: 2}
steps:
  - at: setup
    do: [{produce: 3}]
  - at: shrink
    do: [{reassign: [0]}]
    expect: {SHRINK}
  - at: leader-back
    do: [{crash: 0}, {restart: 0}]
    expect: {leader: none, isr: [], elr: [1, 2]}
  - at: grow
    do: [{reassign: [0, 1, 2]}]
    expect: {GROW}
  - at: way-out
    do: [{unclean_election: true}]
    expect: {leader: 0, isr: [0], elr: [], hwm: 3}
verdict: {acked_loss: none}
"""


def _scenario(shrink: str = "refused: none", grow: str = "refused: UNKNOWN_SERVER_ERROR, replicas: [0]") -> str:
    return REFUSED.replace("{SHRINK}", "{" + shrink + "}").replace("{GROW}", "{" + grow + "}")


class RefusesEveryReassign(Fake):
    """Refuses every reassignment, whatever the state (a harness that reports an error for all)."""

    def apply(self, action: Action) -> Result:
        if isinstance(action, Reassign):
            return Refusal(action.kind, "UNKNOWN_SERVER_ERROR")
        return super().apply(action)


class RefusesWithAnotherCode(Fake):
    def apply(self, action: Action) -> Result:
        result = super().apply(action)
        return Refusal(result.action, "INVALID_REQUEST") if isinstance(result, Refusal) else result


def _run(backend: Any, text: str) -> Any:
    return run_scenario(parse_scenario(text, "refused.elr.yaml"), backend, "kafka")


def test_the_loader_reads_a_code_and_none() -> None:
    scenario = parse_scenario(_scenario(), "refused.elr.yaml")
    steps = {step.label: step for step in scenario.steps}
    assert steps["shrink"].expect["refused"] is None
    assert steps["grow"].expect["refused"] == "UNKNOWN_SERVER_ERROR"


@pytest.mark.parametrize(("shrink", "grow", "error"), [
    ("refused: none", "refused: UNKNOWN_SERVER_EROR",
     r"refused.elr.yaml:17: step grow: expect.refused: expected one of .*did you mean 'UNKNOWN_SERVER_ERROR'"),
    ("refused: accepted", "replicas: [0]", r"refused.elr.yaml:11: .*expected one of .*none, got 'accepted'"),
])
def test_the_loader_refuses_an_unknown_code_at_its_line(shrink: str, grow: str, error: str) -> None:
    with pytest.raises(ScenarioError, match=error):
        parse_scenario(_scenario(shrink, grow), "refused.elr.yaml")


def test_the_loader_refuses_refused_on_a_step_without_operator_request() -> None:
    text = _scenario().replace("expect: {leader: none, isr: [], elr: [1, 2]}",
                               "expect: {leader: none, refused: none}")
    with pytest.raises(ScenarioError, match=r"refused.elr.yaml:14: step leader-back: expect.refused, but the step "
                                            r"makes no operator request"):
        parse_scenario(text, "refused.elr.yaml")


def test_both_refuse_and_the_expectation_holds(tmp_path: Any) -> None:
    result = run_scenario(parse_scenario(_scenario(), "refused.elr.yaml"), Fake(), "kafka", history_root=tmp_path)
    assert result.passed, result.message
    events = (result.history_dir / "events.jsonl").read_text()
    assert '"type":"refused"' in events and '"code":"UNKNOWN_SERVER_ERROR"' in events


def test_a_cluster_that_refuses_what_the_model_accepts_fails_naming_refused() -> None:
    result = _run(RefusesEveryReassign(), _scenario(shrink="leader: 0", grow="replicas: [0]"))
    assert not result.passed
    assert [(f.step, f.what) for f in result.failures][:1] == [("shrink", "refused")], result.message
    assert "refused: model accepted, observed refused with UNKNOWN_SERVER_ERROR" in result.message


def test_a_cluster_that_accepts_what_the_model_refuses_fails_naming_refused() -> None:
    result = _run(ReportsRefusalsAsAccepted(), _scenario(grow="replicas: [0]"))
    assert not result.passed
    assert [(f.step, f.what) for f in result.failures][:1] == [("grow", "refused")], result.message
    assert "refused: model refused with UNKNOWN_SERVER_ERROR, observed accepted" in result.message


def test_a_refusal_with_another_code_fails_naming_refused() -> None:
    result = _run(RefusesWithAnotherCode(), _scenario(grow="replicas: [0]"))
    assert not result.passed
    assert [(f.step, f.what) for f in result.failures][:1] == [("grow", "refused")], result.message


@pytest.mark.parametrize(("shrink", "grow", "step", "said"), [
    ("refused: UNKNOWN_SERVER_ERROR", "replicas: [0]", "shrink",
     "refused: expected refused with UNKNOWN_SERVER_ERROR, observed accepted"),
    ("refused: none", "refused: none", "grow",
     "refused: expected accepted, observed reassign refused with UNKNOWN_SERVER_ERROR"),
    ("refused: none", "refused: INVALID_REPLICA_ASSIGNMENT", "grow",
     "refused: expected refused with INVALID_REPLICA_ASSIGNMENT, observed reassign refused with UNKNOWN_SERVER_ERROR"),
])
def test_an_expectation_that_does_not_hold_fails(shrink: str, grow: str, step: str, said: str) -> None:
    result = _run(Fake(), _scenario(shrink, grow))
    assert not result.passed
    assert [(f.step, f.what) for f in result.failures] == [(step, "refused")], result.message
    assert said in result.message


def test_the_kafka_backend_turns_the_controllers_error_code_into_a_refusal() -> None:
    def answered(code: int | None) -> Any:
        def ask() -> None:
            raise KafkaProtocolError("reassign t-0: ...", code)
        return ask

    action = Reassign(replicas=(0, 1, 2))
    assert KafkaBackend._operator_request(action, answered(-1)) == Refusal("reassign", "UNKNOWN_SERVER_ERROR")
    assert KafkaBackend._operator_request(action, answered(85)) == Refusal("reassign", "NO_REASSIGNMENT_IN_PROGRESS")
    assert KafkaBackend._operator_request(action, lambda: None) is None
    with pytest.raises(KafkaProtocolError):  # no broker answered: an error of the run, not a refusal
        KafkaBackend._operator_request(action, answered(None))


@pytest.mark.parametrize("profile", ["kafka", "kip966"])
def test_the_model_refuses_a_cancellation_that_would_leave_no_isr(profile: str) -> None:
    # the move waits for 2 (down); the original replicas leave the ISR: Kafka's revert would be an
    # unclean election, refused with INVALID_REPLICA_ASSIGNMENT; nothing changes
    m = ModelCluster((0, 1, 2), [0, 1], 1, get_profile(profile))
    for action in [Crash(broker=2), Reassign(replicas=(2,)), Crash(broker=1), Crash(broker=0)]:
        m.apply(action)
    assert (m.part.isr, m.part.adding) == ([], [2])
    before = m.fingerprint()
    assert m.apply(CancelReassignment()) == Refusal("cancel_reassignment", "INVALID_REPLICA_ASSIGNMENT")
    assert m.fingerprint() == before


def test_the_report_shows_a_refusal_in_its_steps_row_expected_or_not(tmp_path: Path) -> None:
    """A refusal is the controller's answer, not a finding: the steps table shows it as observed at
    the step that made the request, whether the scenario expects it or not."""
    from pytest_elr.backends.model import ModelBackend
    from pytest_elr.report import build_report

    for name, grow in (("expected", "refused: UNKNOWN_SERVER_ERROR, replicas: [0]"), ("unsaid", "replicas: [0]")):
        result = run_scenario(parse_scenario(_scenario(grow=grow), "refused.elr.yaml"), ModelBackend(), "kafka",
                              tmp_path / name)
        assert result.passed, result.message
        page = build_report([Path(result.history_dir)], tmp_path / f"{name}.html").read_text()
        row = page[page.index('<tr data-step="grow"'):]
        row = row[:row.index("</tr>")]
        assert "refused: UNKNOWN_SERVER_ERROR" in row, row
        shrink = page[page.index('<tr data-step="shrink"'):]
        assert "refused:" not in shrink[:shrink.index("</tr>")].replace("<code>refused: none</code>", "")


class _Answers:
    def __init__(self, error: Any) -> None:
        self.error = error

    def result(self, timeout: float) -> dict[Any, Any]:
        if isinstance(self.error, KafkaException):  # the request as a whole failed
            raise self.error
        return {TopicPartition("t", 0): self.error}


class _Admin:
    """An AdminClient whose ElectLeaders answers the partition with ``error``."""

    def __init__(self, error: Any) -> None:
        self.error = error

    def elect_leaders(self, election: Any, partitions: Any) -> _Answers:
        return _Answers(self.error)


@pytest.mark.parametrize("action", [ElectLeaders(election="preferred"), UncleanElection(enabled=True)])
def test_an_election_the_controller_answers_with_an_error_is_a_refusal(action: Action) -> None:
    """Found by the HWM campaign (stop 38): a Kafka mutant's exception in electPreferredLeader came
    back as UNKNOWN_SERVER_ERROR, the backend raised it out of the run, and the campaign's child
    called the mutant `not planted`. An election the controller refuses is an outcome, held to the
    model's answer like a reassignment's."""
    backend = KafkaBackend.__new__(KafkaBackend)
    backend.topic = "t"
    election, no_candidate = ((ElectionType.PREFERRED, KafkaError.PREFERRED_LEADER_NOT_AVAILABLE)
                              if isinstance(action, ElectLeaders)
                              else (ElectionType.UNCLEAN, KafkaError.ELIGIBLE_LEADERS_NOT_AVAILABLE))
    # per partition, and for the request as a whole (what the mutant's exception gave)
    for answer in (KafkaError(KafkaError.UNKNOWN), KafkaException(KafkaError(KafkaError.UNKNOWN))):
        refusal = backend._elect_leaders(action, _Admin(answer), election, no_candidate, (0,))
        assert isinstance(refusal, Refusal) and (refusal.action, refusal.code) == (action.kind, "UNKNOWN_SERVER_ERROR")
    with pytest.raises(BackendError, match="no answer"):  # librdkafka's own error: nobody answered
        backend._elect_leaders(action, _Admin(KafkaException(KafkaError(KafkaError._TIMED_OUT))), election,
                               no_candidate, (0,))
    for answer in (None, KafkaError(KafkaError.ELECTION_NOT_NEEDED), KafkaError(no_candidate)):
        # what the state shows
        assert backend._elect_leaders(action, _Admin(answer), election, no_candidate, (0,)) is None


class RefusesPreferredElections(Fake):
    def apply(self, action: Action) -> Result:
        if isinstance(action, ElectLeaders):
            return Refusal(action.kind, "UNKNOWN_SERVER_ERROR")
        return super().apply(action)


PREFERRED = """
name: preferred
profiles: [kafka]
cluster: {brokers: 3}
topic: {name: t, replicas: [0, 1, 2], min_insync_replicas: 1}
steps:
  - at: setup
    do: [{produce: 3}, {crash: 0}, {restart: 0}]
  - at: preferred
    do: [{elect_leaders: preferred}]
    expect: {leader: 0}
verdict: {acked_loss: none}
"""


def test_a_refused_election_fails_its_step_as_refused_and_can_be_expected() -> None:
    assert _run(Fake(), PREFERRED).passed
    result = _run(RefusesPreferredElections(), PREFERRED)
    assert not result.passed
    assert ("preferred", "refused") in [(f.step, f.what) for f in result.failures], result.message
    said = PREFERRED.replace("expect: {leader: 0}", "expect: {refused: none, leader: 0}")
    assert _run(Fake(), said).passed
