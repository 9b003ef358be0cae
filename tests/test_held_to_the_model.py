"""The executor holds a system to the model: declared differences, refused expectations, produce
outcomes in one vocabulary, invariants on the system's own observations."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from fake_backend import SILENT, Fake, LastKnownElrIgnored

from pytest_elr.core.errors import ScenarioError
from pytest_elr.core.observation import Observation, ProduceOutcome
from pytest_elr.core.outcomes import classify
from pytest_elr.report import build_report
from pytest_elr.scenario.executor import StepContext, compare, observed_invariants, run_scenario
from pytest_elr.scenario.loader import load_scenario, parse_scenario


def _declaring(reason: str) -> str:
    """SILENT, with a difference in LastKnownELR declared in the steps where the model has it non-empty."""
    out = SILENT
    for step in ("both-crash\n    do: [{crash: 1}, {crash: 0}]\n", "follower-back\n    do: [{restart: 1}]\n"):
        assert f"  - at: {step}" in out
        out = out.replace(f"  - at: {step}", f"  - at: {step}    differs: {{last_known_elr: \"{reason}\"}}\n")
    return out


def test_a_declared_difference_passes_and_is_listed_everywhere(tmp_path: Path) -> None:
    result = run_scenario(parse_scenario(_declaring("measured: the fake never reads it"), "s.elr.yaml"),
                          LastKnownElrIgnored(), "kafka", tmp_path)
    assert result.passed, result.message
    assert not result.disagreements
    d, later = result.declared
    assert later["step"] == "follower-back"
    assert (d["step"], d["after"], d["field"], d["model"], d["observed"]) == ("both-crash", "crash",
                                                                             "last_known_elr", [0], [])
    assert d["reason"] == "measured: the fake never reads it" and d["source"].startswith("step both-crash (s.elr.yaml:")
    assert result.history_dir is not None
    events = (result.history_dir / "events.jsonl").read_text()
    assert '"type":"declared_difference"' in events
    page = build_report([result.history_dir], tmp_path / "report.html").read_text()
    assert "declared difference" in page and "measured: the fake never reads it" in page


def test_a_difference_in_a_field_not_declared_fails_with_both_states() -> None:
    text = _declaring("x").replace('last_known_elr: "x"', 'held: "another field"')
    result = run_scenario(parse_scenario(text), LastKnownElrIgnored(), "kafka")
    assert not result.passed
    assert "step both-crash (<scenario>:" in result.message
    assert "after crash, the system differs from the model in last_known_elr: model [0], observed []" in result.message
    assert "observed after crash:" in result.message and "model after crash:" in result.message
    assert [d["field"] for d in result.disagreements][:1] == ["last_known_elr"] and not result.declared


@pytest.mark.parametrize(("text", "error"), [
    ("differs: {leadr: x}", "unknown key 'leadr'"),
    ("differs: {leader: ''}", "say why the system differs from the model"),
    ("differs: {by_profile: {kafka: {leo: x}}}", "unknown key 'leo'"),
    ("expect: {produce: [{acked: 1}]}", "expect.produce lists 1 outcomes, but the step does 2 produce actions"),
    ("expect: {produce: {rejected: unavailabel}}", "did you mean 'unavailable'"),
])
def test_differs_and_produce_lists_are_validated(text: str, error: str) -> None:
    scenario = ("cluster: {brokers: 1}\ntopic: {replicas: [0], min_insync_replicas: 1}\n"
                f"steps:\n  - at: T0\n    do: [{{produce: 1}}, {{produce: 2}}]\n    {text}\n")
    with pytest.raises(ScenarioError, match=error):
        parse_scenario(scenario)


class Blind(Fake):
    name: ClassVar[str] = "blind"
    cannot_observe: ClassVar[frozenset[str]] = frozenset({"recovering"})


def test_an_expectation_the_backend_cannot_observe_is_refused() -> None:
    text = SILENT.replace("  - at: follower-rejoins\n", "  - at: follower-rejoins\n    expect: {recovering: false}\n")
    result = run_scenario(parse_scenario(text), Blind(), "kafka")
    assert not result.passed
    assert "expects recovering, which the blind backend cannot observe" in result.message
    assert run_scenario(parse_scenario(text), Fake(), "kafka").passed


def test_produce_outcomes_in_one_vocabulary() -> None:
    assert classify(None, "all") == "acknowledged" and classify(None, "0") == "sent"
    assert classify("NOT_ENOUGH_REPLICAS", "all") == "not_enough_replicas"
    assert classify("_MSG_TIMED_OUT", "all") == classify("NOT_LEADER_FOR_PARTITION", "1") == "unavailable"
    assert classify("NOT_ENOUGH_REPLICAS_AFTER_APPEND", "all") == "indeterminate"
    outcome = ProduceOutcome(acks="all", sent=10, acked=4, failed={"_MSG_TIMED_OUT": 3}, pending=2)
    assert outcome.words() == {"acknowledged": 4, "indeterminate": 1, "unavailable": 5}
    assert ProduceOutcome(acks="0", sent=3).words() == {"sent": 3}


def test_every_produce_of_a_step_is_expected_in_order() -> None:
    first = ProduceOutcome(acks="all", sent=10, failed={"NOT_ENOUGH_REPLICAS": 10})
    second = ProduceOutcome(acks="1", sent=10, acked=10)
    ctx = StepContext(hwm_before=None, produce=second, produces=[first, second])
    obs = Observation(leader=0, leader_epoch=0, isr=(0,), elr=(), last_known_elr=(), fenced=(), hwm=1)
    assert compare({"produce": {"acked": 10}}, obs, ctx) == []  # a mapping: the last produce
    assert compare({"produce": [{"rejected": "not_enough_replicas"}, {"acked": 10}]}, obs, ctx) == []
    assert compare({"produce": [{"acked": 10}, {"acked": 10}]}, obs, ctx) == [
        "produce[0]: expected 10 acknowledged, observed 0 (failed: {'NOT_ENOUGH_REPLICAS': 10})"]
    timed_out = ProduceOutcome(acks="all", sent=1, failed={"NOT_LEADER_FOR_PARTITION": 1})
    ctx = StepContext(hwm_before=None, produce=timed_out, produces=[timed_out])
    assert compare({"produce": {"rejected": "NOT_LEADER_OR_FOLLOWER"}}, obs, ctx) == []  # either client's name


def _obs(**fields: object) -> Observation:
    base: dict[str, object] = {"leader": 0, "leader_epoch": 1, "isr": (0, 1), "elr": (), "last_known_elr": (),
                               "fenced": (), "hwm": 10, "leo": {0: 10, 1: 10}}
    return Observation(**{**base, **fields})  # type: ignore[arg-type]


def test_hwm_frozen_fails_when_it_went_back_or_is_unknown() -> None:
    ctx = StepContext(hwm_before=10)
    assert compare({"hwm": "frozen"}, _obs(hwm=10), ctx) == []
    assert compare({"hwm": "frozen"}, _obs(hwm=8), ctx) == ["hwm: expected frozen at 10, observed 8 (went back)"]
    assert compare({"hwm": "frozen"}, _obs(hwm=None), ctx) == ["hwm: expected frozen at 10, observed None (unknown)"]
    assert compare({"hwm": "frozen"}, _obs(hwm=12), ctx) == ["hwm: expected frozen at 10, observed 12"]


@pytest.mark.parametrize(("obs", "invariant"), [
    (_obs(isr=(0,), elr=(0,)), "elr_disjoint_from_isr"),
    (_obs(isr=(0,), elr=(1,)), None),
    (_obs(isr=(0, 1), elr=(2,)), "elr_empty_at_min_isr"),
    (_obs(fenced=(0,)), "leader_unfenced"),
    (_obs(hwm=4), "hwm_monotonic"),
    (_obs(leo={0: 9, 1: 10}), "leader_log_covers_hwm"),
])
def test_invariants_on_the_observed_state(obs: Observation, invariant: str | None) -> None:
    found = observed_invariants(obs, elr=True, min_isr=2, hwm_before=("T0", 5))
    assert [v.split()[1] for v in found] == ([invariant] if invariant else [])


def test_no_elr_with_the_feature_off() -> None:
    [found] = observed_invariants(_obs(isr=(0,), elr=(1,)), elr=False, min_isr=2)
    assert "no_elr_without_feature" in found


# --- negative controls check the rest (issue 24 item 7) -------------------------------------------

_NEGATIVE = """
name: negative
profiles: [legacy]
cluster: {brokers: 3}
topic: {name: t, replicas: [0, 1, 2], min_insync_replicas: 2}
steps:
  - at: acked
    do: [{produce: 5}]
  - at: followers-crash
    do: [{crash: 1}, {crash: 2}]
  - at: leader-loses
    do: [{power_off: [0]}, {restart: 0}]
verdict: {acked_loss: found}
"""


def test_a_negative_control_tolerates_only_the_invariants_about_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """A structural invariant (leader_unfenced) planted in a negative control fails its step."""
    from pytest_elr.backends.model import ModelBackend
    from pytest_elr.scenario import executor

    scenario = parse_scenario(_NEGATIVE, "n.elr.yaml")
    clean = run_scenario(scenario, ModelBackend(), "legacy")
    assert clean.passed, clean.message
    real = executor.observed_invariants

    def planted(obs, *args, **kwargs):  # type: ignore[no-untyped-def]
        out = real(obs, *args, **kwargs)
        return out + [executor.ObservedViolation("leader_unfenced", "invariant leader_unfenced broken: planted")]

    monkeypatch.setattr(executor, "observed_invariants", planted)
    result = run_scenario(scenario, ModelBackend(), "legacy")
    assert not result.passed
    assert "invariant leader_unfenced broken: planted" in result.message
    assert "leader_unfenced" in {f.what for f in result.failures}


def test_existing_negative_controls_still_pass_on_the_model() -> None:
    from pathlib import Path

    from pytest_elr.backends.model import ModelBackend
    from pytest_elr.scenario.loader import load_scenario

    ran = 0
    for path in sorted(Path(__file__).parents[1].glob("scenarios/*.elr.yaml")):
        scenario = load_scenario(path)
        for profile in scenario.profiles:
            if scenario.verdict.for_profile(profile) == "found" and scenario.runs_on("model"):
                result = run_scenario(scenario, ModelBackend(), profile)
                assert result.passed, result.message
                ran += 1
    assert ran >= 3


def test_a_final_read_without_a_known_hwm_is_a_harness_error() -> None:
    from dataclasses import replace

    from fake_backend import SILENT, Fake

    class HwmNeverKnown(Fake):
        def observe(self):  # type: ignore[no-untyped-def]
            return replace(super().observe(), hwm=None)

    result = run_scenario(parse_scenario(SILENT, "s.elr.yaml"), HwmNeverKnown(), "kafka")
    assert not result.passed and not result.failures
    assert "backend fake failed: the final HWM is unknown" in result.message


def test_a_finale_without_the_leader_the_model_has_is_a_harness_error() -> None:
    """The finale's wait for a leader ends with none where the model elected one (here a backend
    whose leader the settle cannot compare, lost after the finale's heal): the final read would
    judge nothing, so the run is a harness error, not a verdict."""
    from dataclasses import replace

    from fake_backend import SILENT, Fake

    from pytest_elr.actions import Heal

    class LeaderGoneAtTheFinale(Fake):
        cannot_observe: ClassVar[frozenset[str]] = frozenset({"leader"})
        heals = 0

        def apply(self, action):  # type: ignore[no-untyped-def]
            self.heals += isinstance(action, Heal)
            return super().apply(action)

        def observe(self):  # type: ignore[no-untyped-def]
            obs = super().observe()
            return replace(obs, leader=None) if self.heals >= 2 else obs  # SILENT heals once, the finale again

    result = run_scenario(parse_scenario(SILENT, "s.elr.yaml"), LeaderGoneAtTheFinale(), "kafka")
    assert not result.passed and not result.failures
    assert "the finale found no leader" in result.message and "where the model has broker" in result.message


class NoElrMeter(Fake):
    """A release without ElectionFromEligibleLeaderReplicasPerSec (Kafka 4.0.2): the key is left out."""

    def election_counts(self) -> dict[str, int]:
        return {k: v for k, v in super().election_counts().items() if k != "elr_elections"}


def test_an_election_count_the_system_does_not_expose_fails_the_step_it_is_expected_at() -> None:
    scenario = load_scenario(Path(__file__).resolve().parents[1] / "scenarios" / "kip966_t0_t7_walkthrough.elr.yaml")
    assert run_scenario(scenario, Fake(), "kafka").passed
    result = run_scenario(scenario, NoElrMeter(), "kafka")
    assert not result.passed
    assert "step T6 (" in result.message and \
        "elr_elections: expected 1, but the fake backend counts no such elections" in result.message, result.message
    assert "unclean_elections" not in result.message  # the meter it has is still read and agrees
