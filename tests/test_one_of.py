"""``{one_of: [...]}``: an expectation that names every state timing may choose (KIP-966's Case F:
lagging followers leave the ISR together or one at a time). It passes each value it names and
fails any other; the walkthrough's T1 uses it under the ``kafka`` profile only, where a Kafka
leader removed b4 first in a CI run (ELR [3]), and stays as the KIP draws it under ``kip966``."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_backend import Fake, OneAtATime

from pytest_elr.core.errors import ScenarioError
from pytest_elr.core.observation import Observation
from pytest_elr.scenario.executor import StepContext, compare, run_scenario
from pytest_elr.scenario.loader import expectation_from_python, load_scenario
from pytest_elr.scenario.schema import OneOf

ROOT = Path(__file__).resolve().parents[1]
WALKTHROUGH = ROOT / "scenarios" / "kip966_t0_t7_walkthrough.elr.yaml"
T1_KAFKA = "        kafka: {elr: {one_of: [[3, 4], [3], [4]]}}\n"


def walkthrough(tmp_path: Path, t1_kafka: str = T1_KAFKA) -> Path:
    """The shipped walkthrough, its T1 override for the kafka profile replaced by ``t1_kafka``."""
    text = WALKTHROUGH.read_text()
    assert T1_KAFKA in text
    path = tmp_path / "walkthrough.elr.yaml"
    path.write_text(text.replace(T1_KAFKA, t1_kafka))
    return path


def test_the_walkthrough_passes_a_leader_that_removes_the_laggards_one_at_a_time(tmp_path: Path) -> None:
    scenario = load_scenario(walkthrough(tmp_path))
    result = run_scenario(scenario, OneAtATime(), "kafka", tmp_path)
    assert result.passed, result.message
    assert run_scenario(scenario, Fake(), "kafka", tmp_path).passed  # and the KIP's own timing


def test_without_one_of_the_same_leader_fails_t1_on_the_expectation(tmp_path: Path) -> None:
    """What a loaded CI runner hit on 4.0.2: the expectation alone fails (the oracle agrees)."""
    scenario = load_scenario(walkthrough(tmp_path, "        kafka: {}\n"))
    result = run_scenario(scenario, OneAtATime(), "kafka", tmp_path)
    assert not result.passed
    assert "step T1" in result.message and "elr: expected [3, 4], observed [4]" in result.message, result.message
    assert not result.disagreements


def test_a_value_one_of_does_not_name_fails(tmp_path: Path) -> None:
    scenario = load_scenario(walkthrough(tmp_path, "        kafka: {elr: {one_of: [[3, 4], [3]]}}\n"))
    result = run_scenario(scenario, OneAtATime(), "kafka", tmp_path)
    assert not result.passed
    assert "elr: expected one of [3, 4] | [3], observed [4]" in result.message, result.message


def test_the_kip966_profile_keeps_the_kips_drawing(tmp_path: Path) -> None:
    scenario = load_scenario(walkthrough(tmp_path))
    result = run_scenario(scenario, OneAtATime(), "kip966", tmp_path)
    assert not result.passed and "elr: expected [3, 4], observed [4]" in result.message, result.message
    assert run_scenario(scenario, Fake(), "kip966", tmp_path).passed


def test_compare_holds_leader_and_sets_to_any_choice() -> None:
    obs = Observation(leader=2, isr=(1, 2), elr=(3,), last_known_elr=(), fenced=(), leader_epoch=1, hwm=0)
    ctx = StepContext(hwm_before=None)
    assert compare({"leader": OneOf((1, 2)), "elr": OneOf((frozenset({3, 4}), frozenset({3})))}, obs, ctx) == []
    assert compare({"leader": OneOf((1, None))}, obs, ctx) == ["leader: expected one of 1 | none, observed 2"]
    assert compare({"isr": OneOf((frozenset({1}), frozenset()))}, obs, ctx) == [
        "isr: expected one of [1] | [], observed [1, 2]"]


SCENARIO = """\
name: s
cluster: {{brokers: 3}}
topic: {{name: t, replicas: [0, 1, 2], min_insync_replicas: 2, partitions: 2}}
steps:
  - at: one
    expect:
      {expect}
verdict: {{acked_loss: none}}
"""


def load(tmp_path: Path, expect: str) -> object:
    path = tmp_path / "s.elr.yaml"
    path.write_text(SCENARIO.format(expect=expect))
    return load_scenario(path)


def test_one_of_reads_every_form_and_resolves_words_per_partition(tmp_path: Path) -> None:
    scenario = load(tmp_path, "{leader: {one_of: [0, none]}, partitions: {1: {isr: {one_of: [assigned, [1]]}}}}")
    step = scenario.steps[0]  # type: ignore[attr-defined]
    assert step.expect["leader"] == OneOf((0, None))
    assert step.expect["partitions"][1]["isr"] == OneOf((frozenset({0, 1, 2}), frozenset({1})))


@pytest.mark.parametrize(("expect", "says"), [
    ("{elr: {one_of: [[1]]}}", "expect.elr.one_of: expected 2 to 16 values of elr"),
    ("{elr: {one_of: [[1], [1]]}}", "expect.elr.one_of[1]: names the value of [0] again"),
    ("{elr: {one_of: [[1], {one_of: [[2], [1]]}]}}", "one_of does not nest"),
    ("{elr: {one_of: [[1], [7]]}}", "unknown broker id 7"),
    ("{elr: {anyof: [[1], [2]]}}", "expect.elr"),
    ("{elr: {one_of: 3}}", "expect.elr.one_of"),
    ("{hwm: {one_of: [1, 2]}}", "expect.hwm"),
    ("{leader: {one_of: [0, nobody]}}", "expect.leader.one_of[1]: expected a broker id"),
])
def test_bad_one_of_is_refused_with_file_and_line(tmp_path: Path, expect: str, says: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load(tmp_path, expect)
    text = str(info.value)
    assert says in text and "s.elr.yaml:7" in text, text


def test_the_python_api_takes_one_of_as_yaml_does() -> None:
    where = ("test.py", 1)
    assert expectation_from_python({"elr": {"one_of": [[1], [2]]}}, (0, 1, 2), where) == {
        "elr": OneOf((frozenset({1}), frozenset({2})))}
    with pytest.raises(ScenarioError, match="names the value of"):
        expectation_from_python({"elr": {"one_of": [[1], [1]]}}, (0, 1, 2), where)
