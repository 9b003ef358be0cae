"""The HWM at every step (issue 24 item 1): a system that advances its HWM while the committed ISR is
under min ISR -- KIP-966's central rule broken -- is caught by the executor's own comparison with
the model, in the field ``hwm``, without any ``expect: {hwm: ...}``: on the scenario with no
expectation at all, on the YAML suite, and by ``elr explore`` held to a correct oracle. A correct
system passes everywhere: the check raises no false difference where the model allows the HWM to
move."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
from fake_backend import SILENT, Fake, HwmAdvancesUnderMinIsr

from pytest_elr.actions import Cut, Produce, SetMinIsr
from pytest_elr.core.nodes import isolation_links
from pytest_elr.core.specs import ClusterSpec, TopicSpec
from pytest_elr.model.cluster import ModelCluster
from pytest_elr.model.profiles import get_profile
from pytest_elr.scenario.executor import RunResult, run_scenario
from pytest_elr.scenario.loader import load_scenario, parse_scenario
from pytest_elr.schedule.explore import Explorer, schedules

ROOT = Path(__file__).resolve().parents[1]
SUITE = sorted((ROOT / "scenarios").glob("*.elr.yaml"))


def _suite(backend: type[Fake]) -> dict[str, RunResult]:
    out = {}
    for path in SUITE:
        scenario = load_scenario(path)
        if not scenario.runs_on("model"):
            continue
        for profile in scenario.profiles:
            out[f"{path.name}[{profile}]"] = run_scenario(scenario, backend(), profile)
    return out


def _hwm_caught(result: RunResult) -> bool:
    return not result.passed and any(d["field"] == "hwm" for d in result.disagreements) \
        and "the system differs from the model in hwm" in result.message


def test_the_silent_scenario_catches_a_hwm_advancing_under_min_isr() -> None:
    assert run_scenario(parse_scenario(SILENT), Fake(), "kafka").passed
    result = run_scenario(parse_scenario(SILENT), HwmAdvancesUnderMinIsr(), "kafka")
    assert _hwm_caught(result), result.message
    first = result.disagreements[0]
    assert (first["step"], first["field"], first["observed"]) == ("follower-cut", "hwm", 7)
    assert first["model"].startswith("frozen at 5")
    assert result.history_dir is None or '"field":"hwm"' in (result.history_dir / "events.jsonl").read_text()


def test_the_suite_passes_a_correct_system_and_fails_the_broken_rule_in_hwm() -> None:
    correct = _suite(Fake)
    assert correct and all(r.passed for r in correct.values()), {k: r.message for k, r in correct.items()
                                                                   if not r.passed}
    broken = _suite(HwmAdvancesUnderMinIsr)
    caught = sorted(k for k, r in broken.items() if _hwm_caught(r))
    assert len(caught) >= 10, caught
    # caught at steps that expect nothing of the HWM: the comparison, not the expectations
    blind = []
    for key in caught:
        name, profile = key.removesuffix("]").split("[")
        steps = {s.label: s for s in load_scenario(ROOT / "scenarios" / name).steps}
        blind += [(key, d["step"]) for d in broken[key].disagreements if d["field"] == "hwm"
                  and d["step"] in steps and "hwm" not in steps[d["step"]].expectations_for(profile)]
    assert len({key for key, _ in blind}) >= 3, blind


def test_elr_explore_finds_a_hwm_advancing_under_min_isr(tmp_path: Path) -> None:
    lines: list[str] = []
    cluster, topic = ClusterSpec(brokers=(0, 1, 2)), TopicSpec(name="explore", replicas=(0, 1, 2),
                                                              min_insync_replicas=2)
    ex = Explorer(HwmAdvancesUnderMinIsr, None, "kafka", get_profile("kafka"), tmp_path, cluster, topic,
                  confirm=2, shrink_replays=30, say=lines.append)
    # 80 schedules of seed 0: each kind added to the search dilutes the swarm's draws (with
    # reassignments drawn, the first finding is past the 40th schedule)
    seen = ex.explore(itertools.islice(schedules(ex.oracle, 0, 8, None), 80), time.monotonic() + 240)
    assert seen.signatures.get("differs:hwm", 0) >= 1, lines
    finding = seen.findings["differs:hwm"]
    assert finding.confirmed == finding.replays == 2 and finding.shrunk_path is not None
    shrunk = load_scenario(finding.shrunk_path)
    assert not run_scenario(shrunk, HwmAdvancesUnderMinIsr(), "kafka").passed
    assert run_scenario(shrunk, Fake(), "kafka").passed


@pytest.mark.parametrize("profile", ["kip966", "kafka", "legacy"])
def test_the_model_says_when_the_hwm_is_frozen(profile: str) -> None:
    model = ModelCluster((0, 1, 2), [0, 1, 2], 2, get_profile(profile))
    model.apply(Produce(count=3))
    model.mark_hwm()
    assert not model.hwm_frozen_since_mark()  # ISR [0, 1, 2]: the HWM may advance
    model.apply(Cut(links=isolation_links(1, "all", (0, 1, 2))))
    model.apply(Cut(links=isolation_links(2, "all", (0, 1, 2))))
    assert not model.hwm_frozen_since_mark()  # it could advance before the ISR shrank
    model.mark_hwm()
    model.apply(Produce(count=2, acks="1"))
    assert model.part.isr == [0] and model.hwm_frozen_since_mark()  # ISR [0] < min ISR 2
    model.apply(SetMinIsr(value=1))
    model.apply(Produce(count=1, acks="1"))  # an append: every profile evaluates the HWM again
    assert not model.hwm_frozen_since_mark()


def test_a_declared_hwm_difference_passes_and_is_kept() -> None:
    step = "  - at: follower-cut\n"
    assert step in SILENT
    text = SILENT.replace(step, step + '    differs: {hwm: "measured: the fake advances under min ISR"}\n')
    result = run_scenario(parse_scenario(text), HwmAdvancesUnderMinIsr(), "kafka")
    assert result.passed, result.message
    assert [(d["step"], d["field"], d["observed"]) for d in result.declared] == [("follower-cut", "hwm", 7)]
    assert result.declared[0]["reason"] == "measured: the fake advances under min ISR"


def test_a_state_that_stands_for_another_keeps_its_hwm_window() -> None:
    model = ModelCluster((0, 1, 2), [0, 1, 2], 2, get_profile("kafka"))
    model.apply(Cut(links=isolation_links(1, "all", (0, 1, 2))))
    model.apply(Cut(links=isolation_links(2, "all", (0, 1, 2))))
    model.mark_hwm()
    frozen, twin = model.fork(), model.fork()
    twin.partition.hwm_window_open = True  # another history to the same state let the HWM advance
    frozen.absorb_hwm_window(model.fork())
    assert frozen.hwm_frozen_since_mark()
    frozen.absorb_hwm_window(twin)
    assert not frozen.hwm_frozen_since_mark()
