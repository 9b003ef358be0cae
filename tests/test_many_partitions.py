"""Topics with many partitions (issue 27, item 3): the language, the model backend and the
executor. Each check is shown catching the violation it is for: a wrong expectation on one
partition, a system that differs from the model on one partition only, bad input, a final read or
a verdict that misses one partition; and a one-partition topic stays as it was."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fake_backend import Clock, Fake, FollowersLagOnlyWhenTicked

import pytest_elr
from pytest_elr.actions import Crash, PowerOff, Produce, Restart
from pytest_elr.api import ClusterHandle
from pytest_elr.backends.model import ModelBackend
from pytest_elr.core.errors import ScenarioError
from pytest_elr.core.history import History
from pytest_elr.core.observation import LossEvidence, Observation, Read
from pytest_elr.model import build_model
from pytest_elr.scenario import executor
from pytest_elr.scenario.executor import Executor, StepContext, run_scenario
from pytest_elr.scenario.loader import cluster_and_topic_from_python, load_scenario, parse_scenario

#: three brokers, three partitions led by 0, 1 and 2 (generated: [0,1,2], [1,2,0], [2,0,1]); the
#: leader of partition 1 crashes and comes back
THREE = """
name: three-partitions
profiles: [kafka]
cluster: {brokers: 3}
topic: {partitions: 3, replicas: [0, 1, 2], min_insync_replicas: 2}
steps:
  - at: T0
    do: [{produce: 9}]
    expect:
      leader: 0
      partitions: {1: {leader: 1}, 2: {leader: 2}, all: {isr: [0, 1, 2], elr: []}}
  - at: T1
    do: [{crash: 1}]
    expect:
      fenced: [1]
      partitions: {1: {leader: 2}, all: {isr: [0, 2]}}
  - at: T2
    do: [{produce: 6}, {restart: 1}]
    expect:
      partitions: {all: {isr: [0, 1, 2]}, "1,2": {leader: 2}}
verdict: {acked_loss: none}
"""


def _events(result: Any) -> list[dict[str, Any]]:
    assert result.history_dir is not None
    return [json.loads(line) for line in (result.history_dir / "events.jsonl").read_text().splitlines()]


# --- the language ---------------------------------------------------------------------------------

def _topic(topic: str, brokers: str = "3", expect: str = "{}") -> Any:
    return parse_scenario(f"cluster: {{brokers: {brokers}}}\ntopic: {topic}\nsteps:\n  - at: T0\n"
                          f"    expect: {expect}\n", "t.elr.yaml")


def test_a_generated_assignment_rotates_so_the_preferred_leaders_spread() -> None:
    """``replicas: [list]`` rotates the list by one per partition; ``replicas: N`` beside
    ``partitions`` is the replication factor, partition p on the cluster's brokers from the p-th on."""
    assert _topic("{partitions: 4, replicas: [2, 0, 1], min_insync_replicas: 2}").topic.assignment == (
        (2, 0, 1), (0, 1, 2), (1, 2, 0), (2, 0, 1))
    assert _topic("{partitions: 5, replicas: 3, min_insync_replicas: 2}", "[1, 3, 5, 7]").topic.assignment == (
        (1, 3, 5), (3, 5, 7), (5, 7, 1), (7, 1, 3), (1, 3, 5))
    explicit = _topic("{assignment: {1: [1, 2], 0: [0, 1]}, min_insync_replicas: 1}").topic
    assert explicit.assignment == ((0, 1), (1, 2)) and explicit.partitions == 2 and explicit.replicas == (0, 1)
    one = _topic("{replicas: [0, 1, 2], min_insync_replicas: 2}").topic
    assert one.partitions == 1 and one.more_partitions == ()
    m = build_model(_topic("{partitions: 3, replicas: 3, min_insync_replicas: 2}").cluster,
                    _topic("{partitions: 3, replicas: 3, min_insync_replicas: 2}").topic, "kafka")
    assert [m.partitions[i].part.leader for i in range(3)] == [0, 1, 2]


@pytest.mark.parametrize(("topic", "expect", "line", "error"), [
    ("{partitions: 0, replicas: 3, min_insync_replicas: 2}", "{}", 2,
     "topic.partitions: expected a number from 1 to 1000, got 0"),
    ("{partitions: 1001, replicas: 3, min_insync_replicas: 2}", "{}", 2, "from 1 to 1000, got 1001"),
    ("{partitions: 2, replicas: 4, min_insync_replicas: 2}", "{}", 2, "topic.replicas: expected a number from 1 to 3"),
    ("{assignment: {0: [0, 1], 1: [1, 7]}, min_insync_replicas: 2}", "{}", 2,
     "topic.assignment.1: unknown broker id 7; the cluster has brokers 0, 1, 2"),
    ("{assignment: {0: [0, 1], 1: [1, 1]}, min_insync_replicas: 2}", "{}", 2,
     "topic.assignment.1: a broker can hold only one replica"),
    ("{assignment: {0: [0, 1], 1: [1, 2, 0]}, min_insync_replicas: 2}", "{}", 2,
     "topic.assignment.1: 3 replicas, but the partitions before have 2"),
    ("{assignment: {0: [0, 1], 2: [1, 2]}, min_insync_replicas: 2}", "{}", 2, "partition 1 is missing"),
    ("{assignment: {0: [0, 1], 0: [1, 2]}, min_insync_replicas: 2}", "{}", 2, "partition 0 is assigned twice"),
    ("{assignment: {0: [0, 1]}, partitions: 2, min_insync_replicas: 2}", "{}", 2,
     "assigns 1 partitions, but topic.partitions is 2"),
    ("{assignment: {0: [0, 1]}, replicas: [0, 1], min_insync_replicas: 2}", "{}", 2,
     "give replicas (generated assignment) or assignment (explicit), not both"),
    ("{partitions: 3, replicas: 3, min_insync_replicas: 2}", "{partitions: {3: {leader: 1}}}", 5,
     "expect.partitions: no partition 3: the topic has 3 partitions (0..2)"),
    ("{replicas: [0, 1, 2], min_insync_replicas: 2}", "{partitions: {1: {leader: 1}}}", 5,
     "no partition 1: the topic has 1 partition (0..0)"),
    ("{partitions: 3, replicas: 3, min_insync_replicas: 2}", "{leader: 0, partitions: {0: {leader: 1}}}", 5,
     "partition 0's leader is already expected as a plain key (partition 0's)"),
    ("{partitions: 3, replicas: 3, min_insync_replicas: 2}", "{partitions: {all: {elr: []}, '1,2': {elr: [0]}}}", 5,
     "partition 1's elr is already expected at line 5"),
    ("{partitions: 3, replicas: 3, min_insync_replicas: 2}", "{partitions: {'1,1': {leader: 1}}}", 5,
     "names a partition twice"),
    ("{partitions: 3, replicas: 3, min_insync_replicas: 2}", "{partitions: {leaders: {leader: 1}}}", 5,
     "expected a partition number, a comma-separated set"),
    ("{partitions: 3, replicas: 3, min_insync_replicas: 2}", "{partitions: {1: {fenced: [1]}}}", 5,
     "expect.partitions.1: unknown key 'fenced'"),
    ("{partitions: 3, replicas: 3, min_insync_replicas: 2}", "{partitions: {1: {leader: 9}}}", 5,
     "expect.partitions.1.leader: unknown broker id 9"),
    ("{partitions: 3, replicas: 3, min_insync_replicas: 2}", "{partitions: []}", 5,
     "expect.partitions: expected a mapping of partition scope"),
    ("{partitions: 3, replicas: 3, min_insync_replicas: 2}", "{partitions: {preferred 7: {leader: 1}}}", 5,
     "expect.partitions: 'preferred 7': unknown broker id 7; the cluster has brokers 0, 1, 2"),
    ("{partitions: 2, replicas: 3, min_insync_replicas: 2}", "{partitions: {preferred 2: {leader: 1}}}", 5,
     "expect.partitions: broker 2 is no partition's preferred leader (the first replica of an assignment): "
     "preferred 2 would name no partition; the preferred leaders are 0, 1"),
    ("{partitions: 3, replicas: 3, min_insync_replicas: 2}", "{partitions: {preferred: {leader: 1}}}", 5,
     "expected preferred followed by a broker id or a comma-separated set of them"),
    ("{partitions: 3, replicas: 3, min_insync_replicas: 2}", "{partitions: {preferred one: {leader: 1}}}", 5,
     "got 'preferred one'"),
    ("{partitions: 3, replicas: 3, min_insync_replicas: 2}", "{partitions: {'preferred 1,1': {leader: 1}}}", 5,
     "'preferred 1,1' names a broker twice"),
    ("{partitions: 6, replicas: 3, min_insync_replicas: 2}",
     "{partitions: {all: {elr: []}, preferred 1: {elr: [0]}}}", 5, "partition 1's elr is already expected at line 5"),
    ("{partitions: 3, replicas: 3, min_insync_replicas: 2}", "{partitions: {all: {leader: preferd}}}", 5,
     "expect.partitions.all.leader: expected a broker id, none (no leader) or preferred (the partition's first "
     "replica), got 'preferd'"),
    ("{partitions: 3, replicas: 3, min_insync_replicas: 2}", "{partitions: {all: {isr: everyone}}}", 5,
     "expect.partitions.all.isr: expected a broker id, a list of them or assigned (every replica of the "
     "partition's assignment), got 'everyone'"),
    ("{partitions: 3, replicas: 3, min_insync_replicas: 2}", "{partitions: {all: {elr: assigned}}}", 5,
     "expect.partitions.all.elr: expected a broker id, got 'assigned'"),
    ("{partitions: 6, replicas: 3, min_insync_replicas: 2}",
     "{partitions: {4: {leader: 1}, preferred 1: {leader: 1}}}", 5,
     "expect.partitions.preferred 1.leader: partition 4's leader is already expected at line 5"),
])
def test_bad_partitions_are_refused_with_file_and_line(topic: str, expect: str, line: int, error: str) -> None:
    with pytest.raises(ScenarioError) as info:
        _topic(topic, expect=expect)
    assert str(info.value).startswith(f"t.elr.yaml:{line}: ") and error in str(info.value), str(info.value)


def test_scoped_expectations_expand_per_partition_with_their_lines() -> None:
    step = _topic("{partitions: 3, replicas: 3, min_insync_replicas: 2}",
                  expect="{leader: 0, partitions: {2: {leader: 2}, all: {elr: []}, '0,1': {isr: [0, 1, 2]}}}").steps[0]
    assert step.expect["leader"] == 0
    assert step.expect["partitions"] == {0: {"elr": frozenset(), "isr": frozenset({0, 1, 2})},
                                         1: {"elr": frozenset(), "isr": frozenset({0, 1, 2})},
                                         2: {"leader": 2, "elr": frozenset()}}
    assert step.key_lines["partition 2: leader"] == 5


def test_preferred_names_the_partitions_whose_assignment_lists_the_broker_first() -> None:
    """``preferred B`` is every partition whose first replica is B, from the topic's assignment
    (generated or explicit); ``preferred 0,2`` the union; it mixes with numbers and ``all``."""
    rf3 = "{partitions: 7, replicas: 3, min_insync_replicas: 2}"  # [0,1,2], [1,2,0], [2,0,1], [0,1,2], ...
    assert _topic(rf3, expect="{partitions: {preferred 1: {leader: 1}}}").steps[0].expect["partitions"] == {
        1: {"leader": 1}, 4: {"leader": 1}}
    both = _topic(rf3, expect="{partitions: {'preferred 0,2': {elr: []}, 1: {elr: [0]}, all: {leader: 0}}}")
    assert {p: sub.get("elr") for p, sub in both.steps[0].expect["partitions"].items()} == {
        0: frozenset(), 1: frozenset({0}), 2: frozenset(), 3: frozenset(), 4: None, 5: frozenset(), 6: frozenset()}
    explicit = "{assignment: {0: [2, 0, 1], 1: [0, 1, 2], 2: [2, 1, 0]}, min_insync_replicas: 2}"
    assert set(_topic(explicit, expect="{partitions: {preferred 2: {isr: [0, 1, 2]}}}").steps[0]
               .expect["partitions"]) == {0, 2}


def test_preferred_and_assigned_read_each_partition_s_assignment() -> None:
    """``leader: preferred`` is each partition's first replica and ``isr: assigned`` (``replicas:
    assigned``) its whole assignment, as a plain key (partition 0's) or scoped."""
    step = _topic("{assignment: {0: [2, 0, 1], 1: [0, 1, 2], 2: [1, 0, 2]}, min_insync_replicas: 2}",
                  expect="{leader: preferred, partitions: {'1,2': {leader: preferred, isr: assigned}, "
                         "all: {replicas: assigned}}}").steps[0]
    assert step.expect["leader"] == 2
    assert step.expect["partitions"] == {
        0: {"replicas": frozenset({0, 1, 2})},
        1: {"leader": 0, "isr": frozenset({0, 1, 2}), "replicas": frozenset({0, 1, 2})},
        2: {"leader": 1, "isr": frozenset({0, 1, 2}), "replicas": frozenset({0, 1, 2})}}
    two = _topic("{partitions: 3, replicas: 2, min_insync_replicas: 1}", expect="{partitions: {all: {isr: assigned}}}")
    assert [two.steps[0].expect["partitions"][p]["isr"] for p in range(3)] == [
        frozenset({0, 1}), frozenset({1, 2}), frozenset({2, 0})]


#: five partitions on three brokers, partition p led first by p mod 3: broker 1 prefers 1 and 4
PREFERRED = """
name: preferred-scope
profiles: [kafka]
cluster: {brokers: 3}
topic: {partitions: 5, replicas: 3, min_insync_replicas: 2}
steps:
  - at: T0
    do: [{produce: 10}]
    expect: {partitions: {preferred 1: {leader: 1}, "preferred 0,2": {isr: [0, 1, 2]}}}
  - at: T1
    do: [{crash: 1}]
    expect:
      fenced: [1]
      partitions: {preferred 1: {leader: 2, isr: [0, 2]}, preferred 0: {leader: 0}, preferred 2: {leader: 2}}
verdict: {acked_loss: none}
"""


def test_a_preferred_scope_holds_each_of_its_partitions_and_keeps_them_after_an_election() -> None:
    """``preferred 1`` names partitions 1 and 4 at every step -- also once broker 1 crashed and 2
    leads them: the set is the assignment's, not the leadership of the moment. A system that
    reports partition 4's leader wrong after the crash (a planted violation on one partition of the
    set; the backend is its own oracle, so only the expectation can catch it) fails there, naming
    partition 4 and the step's line; partition 1 of the same set passes."""
    class Partition4LeaderWrong(ModelBackend):
        def observe(self) -> Observation:
            obs = super().observe()
            if obs.fenced:
                return replace(obs, partitions={**obs.partitions, 4: replace(obs.partitions[4], leader=0)})
            return obs

    assert run_scenario(parse_scenario(PREFERRED, "p.elr.yaml"), ModelBackend(), "kafka").passed
    result = run_scenario(parse_scenario(PREFERRED, "p.elr.yaml"), Partition4LeaderWrong(), "kafka")
    assert not result.passed
    assert "step T1 (p.elr.yaml:14): partition 4: leader: expected 2, observed 0" in result.message
    assert "partition 1:" not in result.message


#: all partitions at their preferred leaders with full ISRs; under legacy an override of partition
#: 0's ISR alone (the same set, spelled out)
ASSIGNED_ISR = """
name: assigned
profiles: [kafka, legacy]
cluster: {brokers: 3}
topic: {partitions: 4, replicas: 2, min_insync_replicas: 1}
steps:
  - at: T0
    do: [{produce: 8}]
    expect:
      partitions: {all: {leader: preferred, isr: assigned}}
      by_profile:
        legacy: {partitions: {0: {isr: [0, 1]}}}
verdict: {acked_loss: none}
"""


class Partition3FollowerMissing(ModelBackend):
    """Its own oracle, but reports partition 3 ([0, 1]) with its follower out of the ISR."""

    def observe(self) -> Observation:
        obs = super().observe()
        return replace(obs, partitions={**obs.partitions, 3: replace(obs.partitions[3], isr=(0,))})


def test_isr_assigned_catches_one_partition_short_of_its_assignment() -> None:
    assert run_scenario(parse_scenario(ASSIGNED_ISR, "a.elr.yaml"), ModelBackend(), "kafka").passed
    result = run_scenario(parse_scenario(ASSIGNED_ISR, "a.elr.yaml"), Partition3FollowerMissing(), "kafka")
    assert not result.passed
    assert "partition 3: isr: expected [0, 1], observed [0]" in result.message


def test_a_profile_s_partition_override_leaves_the_other_partitions_expected() -> None:
    """``by_profile: {legacy: {partitions: {0: {isr: ...}}}}`` overrides partition 0's ISR only:
    under legacy, partition 3's ``isr: assigned`` (and every leader) is still expected, so the
    planted violation there is caught; a whole-key replacement would have dropped it."""
    step = parse_scenario(ASSIGNED_ISR, "a.elr.yaml").steps[0]
    legacy = step.expectations_for("legacy")["partitions"]
    assert set(legacy) == {0, 1, 2, 3} and legacy[0] == {"leader": 0, "isr": frozenset({0, 1})}
    assert legacy[3] == {"leader": 0, "isr": frozenset({0, 1})}
    result = run_scenario(parse_scenario(ASSIGNED_ISR, "a.elr.yaml"), Partition3FollowerMissing(), "legacy")
    assert not result.passed and "partition 3: isr: expected [0, 1], observed [0]" in result.message
    plain = _topic("{partitions: 2, replicas: 2, min_insync_replicas: 1}",
                   expect="{partitions: {all: {leader: preferred}}, by_profile: {legacy: {leader: 1}}}").steps[0]
    assert plain.expectations_for("legacy") == {"leader": 1, "partitions": {1: {"leader": 1}}}
    assert plain.expectations_for("kafka") == {"partitions": {0: {"leader": 0}, 1: {"leader": 1}}}


# --- the model backend and the executor --------------------------------------------------------------

def test_three_partitions_pass_on_the_model_with_records_round_robin(tmp_path: Path) -> None:
    result = run_scenario(parse_scenario(THREE, "three.elr.yaml"), ModelBackend(), "kafka", tmp_path)
    assert result.passed, result.message
    events = _events(result)
    sent = [(e["value"], e["partition"]) for e in events if e["type"] == "produce" and e["op"] == "invoke"]
    assert len(sent) == 15 and all(p == int(v[1:]) % 3 for v, p in sent)  # v<k> to partition k mod 3
    drained = {(e["partition"], e["value"]) for e in events if e["type"] == "consume" and e.get("reader") == "drain"}
    assert {p for p, _ in drained} == {0, 1, 2} and len(drained) == 15
    assert set(next(e for e in events if e["type"] == "observe")["partitions"]) == {"1", "2"}
    assert result.verdict is not None
    assert result.verdict.partitions == {p: {"acked": 5, "read": 5, "lost": 0} for p in range(3)}


def test_a_wrong_leader_expected_on_partition_2_fails_naming_partition_2() -> None:
    text = THREE.replace('"1,2": {leader: 2}', '"1": {leader: 2}, 2: {leader: 0}')
    result = run_scenario(parse_scenario(text, "three.elr.yaml"), ModelBackend(), "kafka")
    assert not result.passed
    line = text.splitlines().index('      partitions: {all: {isr: [0, 1, 2]}, "1": {leader: 2}, 2: {leader: 0}}') + 1
    assert f"step T2 (three.elr.yaml:{line}): partition 2: leader: expected 0, observed 2" in result.message
    assert [(f.step, f.what) for f in result.failures] == [("T2", "leader")]


def test_a_produce_outcome_counts_every_partition() -> None:
    """One produce of 6 records over 3 partitions (v<k> to partition k mod 3) whose partition 1 has
    no live replica: its share (v1, v4) is refused, the others' acknowledged, in one outcome."""
    m = build_model(*cluster_and_topic_from_python(
        {"brokers": [0, 1, 2]}, {"assignment": {0: [0, 1], 1: [2, 1], 2: [0, 2]}, "min_insync_replicas": 1},
        ("x", 1)), "kafka")
    m.apply(Crash(broker=1))
    m.apply(Crash(broker=2))
    assert [m.partitions[i].part.leader for i in range(3)] == [0, None, 0]
    out = m.apply(Produce(count=6))
    assert (out.sent, out.acked, out.failed, out.pending) == (6, 4, {"NOT_LEADER_OR_FOLLOWER": 2}, 0)
    assert [(p, s.value, s.status) for p, s in m.send_log] == [
        (0, "v0", "ok"), (0, "v3", "ok"), (1, "v1", "fail"), (1, "v4", "fail"), (2, "v2", "ok"), (2, "v5", "ok")]


class Partition1ElrIgnored(Fake):
    """Differs from the model on partition 1 only: reports its ELR empty."""

    def observe(self) -> Observation:
        obs = super().observe()
        one = obs.partitions[1]
        return replace(obs, partitions={**obs.partitions, 1: replace(one, elr=())})


class Partition1HwmStuck(Fake):
    """Differs on partition 1 only: reports its HWM at 0 (acknowledged acks=all records above)."""

    def observe(self) -> Observation:
        obs = super().observe()
        return replace(obs, partitions={**obs.partitions, 1: replace(obs.partitions[1], hwm=0)})


class Partition2NotRead(Fake):
    """Drains every partition but partition 2."""

    def drain_partitions(self) -> dict[int, Read]:
        return {i: r for i, r in super().drain_partitions().items() if i != 2}


class Partition1Dropped(Fake):
    """Partition 1's final read loses its records (yet reaches its HWM): acknowledged records lost."""

    def drain_partitions(self) -> dict[int, Read]:
        reads = super().drain_partitions()
        return {**reads, 1: Read([], reads[1].end_offset)}


#: min ISR 2 of 2 replicas per partition: a follower's crash puts it into its partitions' ELR
TWO = """
name: two-replicas
profiles: [kafka]
cluster: {brokers: 3}
topic: {partitions: 3, replicas: 2, min_insync_replicas: 2}
steps:
  - at: T0
    do: [{produce: 6}]
  - at: T1
    do: [{crash: 2}]
verdict: {acked_loss: none}
"""


def test_a_difference_from_the_model_on_partition_1_only_is_caught_naming_it(tmp_path: Path) -> None:
    """Partitions [0,1], [1,2], [2,0]: broker 2's crash puts it into partition 1's ELR (the
    follower) and moves partition 2 to 0 with 2 in its ELR; the fake hides partition 1's."""
    ok = run_scenario(parse_scenario(TWO, "two.elr.yaml"), Fake(), "kafka")
    assert ok.passed, ok.message
    result = run_scenario(parse_scenario(TWO, "two.elr.yaml"), Partition1ElrIgnored(), "kafka", tmp_path)
    assert not result.passed
    assert "after crash, the system differs from the model in partition 1: elr: model [2], observed []" \
        in result.message
    # at the crash, and again at the finale's heal (the ELR stays until 2 is back)
    assert [(d["step"], d["field"], d["partition"]) for d in result.disagreements] == [("T1", "elr", 1),
                                                                                      ("finale", "elr", 1)]
    assert [(f.step, f.what) for f in result.failures] == [("T1", "elr"), ("finale", "elr")]
    assert [e.get("partition") for e in _events(result) if e["type"] == "disagreement"] == [1, 1]


def test_the_hwm_bounds_hold_on_each_partition() -> None:
    result = run_scenario(parse_scenario(TWO, "two.elr.yaml"), Partition1HwmStuck(), "kafka")
    assert not result.passed
    assert "partition 1: hwm: model at least 2 (acks=all records acknowledged below it), observed 0" \
        in result.message
    assert {d["partition"] for d in result.disagreements} == {1}


def test_the_final_read_must_read_every_partition() -> None:
    result = run_scenario(parse_scenario(TWO, "two.elr.yaml"), Partition2NotRead(), "kafka")
    assert not result.passed and "the final read did not read partition 2" in result.message


def test_the_verdict_names_the_partition_that_lost_records() -> None:
    result = run_scenario(parse_scenario(TWO, "two.elr.yaml"), Partition1Dropped(), "kafka")
    assert not result.passed
    assert "2 acknowledged acks=all records lost (partition 1: 2 of 2)" in result.message
    assert result.verdict is not None and result.verdict.partitions[1] == {"acked": 2, "read": 0, "lost": 2}
    assert result.verdict.partitions[0]["lost"] == 0 and result.verdict.partitions[2]["lost"] == 0


def test_an_invariant_broken_on_partition_2_names_it(tmp_path: Path) -> None:
    class LeaderOutsideIsr(Fake):
        def observe(self) -> Observation:
            obs = super().observe()
            return replace(obs, partitions={**obs.partitions, 2: replace(obs.partitions[2], elr=(1,))})

    text = TWO.replace("  - at: T1\n    do: [{crash: 2}]\n", "")
    result = run_scenario(parse_scenario(text, "two.elr.yaml"), LeaderOutsideIsr(), "kafka", tmp_path)
    assert not result.passed
    assert "partition 2: invariant elr_empty_at_min_isr broken on the observed state" in result.message
    # the history says which partition, as a field (the report's grid puts it in that row)
    assert result.history_dir is not None
    events = [json.loads(line) for line in (result.history_dir / "events.jsonl").read_text().splitlines()]
    broken = [e for e in events if e["type"] == "violation"]
    assert broken and {e["partition"] for e in broken} == {2}, broken


def test_the_models_own_invariants_name_the_partition_that_breaks_them() -> None:
    """The oracle's self-check (``invariants.check``) on a topic of three partitions: a state planted
    in partition 1 breaks an invariant of partition 1, and the violation says so as a field."""
    from pytest_elr.model import invariants
    from pytest_elr.model.profiles import get_profile

    m = build_model(*cluster_and_topic_from_python({"brokers": [0, 1, 2]},
                                                   {"partitions": 3, "replicas": 3, "min_insync_replicas": 2},
                                                   ("x", 1)), get_profile("kafka"))
    assert invariants.check(m, len(m.committed)) == []
    m.partitions[1].part.elr = list(m.partitions[1].part.isr[:1])  # an ELR member also in the ISR
    found = invariants.check(m, len(m.committed))
    assert found and {v.partition for v in found} == {1}, found


# --- one partition: as it was --------------------------------------------------------------------------

ONE = """
name: one
profiles: [kafka]
cluster: {brokers: 3}
topic: TOPIC
workload: {acks: all, per_step: 3}
steps:
  - at: T0
    do: [{produce: 4}, {crash: 0}]
    expect: {leader: 1, elr: []}
  - at: T1
    do: [{restart: 0}]
verdict: {acked_loss: none}
"""


def test_a_one_partition_topic_written_either_way_gives_the_same_history(tmp_path: Path) -> None:
    """``replicas: [0, 1, 2]`` and ``partitions: 1`` with the same explicit assignment make the same
    events (times aside) with no partition key beyond ``partition: 0``, and the verdict has no
    per-partition counts: a one-partition topic's history and verdict are as before."""
    runs = []
    for i, topic in enumerate(("{replicas: [0, 1, 2], min_insync_replicas: 2}",
                               "{partitions: 1, assignment: {0: [0, 1, 2]}, min_insync_replicas: 2}")):
        result = run_scenario(parse_scenario(ONE.replace("TOPIC", topic), "one.elr.yaml"), ModelBackend(), "kafka",
                              tmp_path / str(i))
        assert result.passed, result.message
        events = _events(result)
        assert not any("partitions" in e for e in events)
        assert {e["partition"] for e in events if "partition" in e} == {0}
        assert result.history_dir is not None
        assert "partitions" not in json.loads((result.history_dir / "verdict.json").read_text())
        runs.append([{k: v for k, v in e.items() if k != "t"} for e in events])
    assert runs[0] == runs[1]


# --- the Python API ---------------------------------------------------------------------------------------

def _handle(tmp_path: Path, **topic: Any) -> ClusterHandle:
    spec, topic_spec = cluster_and_topic_from_python({"brokers": [0, 1, 2]}, {"min_insync_replicas": 2, **topic},
                                                     ("test.py", 7))
    return ClusterHandle(ModelBackend(), "kafka", spec, topic_spec, tmp_path)


def test_the_python_api_scopes_expectations_to_partitions(tmp_path: Path) -> None:
    c = _handle(tmp_path, partitions=3, replicas=3)
    c.produce(6)
    c.crash(1)
    c.expect(leader=0, partitions={1: {"leader": 2}, (0, 2): {"isr": [0, 2]}, "all": {"elr": []}})
    with pytest.raises(AssertionError, match=r"partition 2: leader: expected 1, observed 2"):
        c.expect(partitions={2: {"leader": 1}})
    with pytest.raises(ScenarioError, match=r"test_many_partitions.py:\d+: expect.partitions: no partition 3"):
        c.expect(partitions={3: {"leader": 1}})
    c.close()


def test_the_python_api_scopes_expectations_by_preferred_leader(tmp_path: Path) -> None:
    c = _handle(tmp_path, partitions=6, replicas=3)  # broker 1 prefers partitions 1 and 4
    c.produce(6)
    c.crash(1)
    c.expect(partitions={"preferred 1": {"leader": 2, "isr": [0, 2]}, "preferred 0,2": {"elr": []}})
    with pytest.raises(AssertionError, match=r"partition 4: leader: expected 1, observed 2"):
        c.expect(partitions={"preferred 1": {"leader": 1}})
    with pytest.raises(ScenarioError, match=r"test_many_partitions.py:\d+: expect.partitions: 'preferred 5': "
                                            r"unknown broker id 5"):
        c.expect(partitions={"preferred 5": {"leader": 1}})
    c.close()


def test_the_python_api_checks_the_topic_as_yaml_does() -> None:
    with pytest.raises(ScenarioError, match=r"test.py:7: topic.assignment.1: a broker can hold only one replica"):
        cluster_and_topic_from_python({"brokers": [0, 1, 2]},
                                      {"assignment": {0: [0, 1], 1: [2, 2]}, "min_insync_replicas": 1}, ("test.py", 7))


def test_a_backend_of_one_partition_is_refused_a_topic_of_several_before_it_starts(tmp_path: Path) -> None:
    """A backend that does not declare ``many_partitions`` (a third-party one written for one
    partition) would observe partition 0 alone: the run is an error, and nothing was started."""
    started: list[bool] = []

    class OnePartition(Fake):
        many_partitions = False

        def start(self, *args: Any, **kwargs: Any) -> None:
            started.append(True)
            super().start(*args, **kwargs)

    result = run_scenario(parse_scenario(TWO, "two.elr.yaml"), OnePartition(), "kafka", tmp_path)
    assert not result.passed and not started
    assert "the fake backend stages topics of one partition: a topic of 3 partitions cannot run on it" \
        in result.message


# --- the kafka backend's read of every partition: DescribeTopicPartitions, paged ------------------------

def _page(partitions: list[int], cursor: int | None) -> bytes:
    """A DescribeTopicPartitions v0 answer for topic ``t`` (each partition led by its number)."""
    from pytest_elr.sut.wire import Writer

    def partition(w: Writer, i: int) -> None:
        w.int16(0).int32(i).int32(i).int32(1)
        for xs in ([i, i + 1], [i, i + 1], [], []):  # replicas, ISR, ELR, LastKnownELR
            w.compact_array(xs, lambda w, b: w.int32(b))
        w.compact_array([], lambda w, b: w.int32(b)).tags()  # offline

    w = Writer().int32(0)
    w.compact_array(["t"], lambda w, name: (w.int16(0).compact_string(name).raw(bytes(16)).boolean(False)
                                            .compact_array(partitions, partition).int32(0).tags()))
    if cursor is None:
        w.int8(-1)
    else:
        w.int8(1).compact_string("t").int32(cursor).tags()
    return bytes(w.tags().buf)


def test_every_partition_is_read_in_pages_that_follow_the_cursor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Five partitions two per page: three requests, the second and third from the cursor the answer
    before gave; every partition once, in order. One page when they fit (the default 2000)."""
    from pytest_elr.sut import admin
    from pytest_elr.sut.wire import Reader
    asked: list[bytes] = []
    pages = {None: ([0, 1], 2), 2: ([2, 3], 4), 4: ([4], None)}

    def request(host: str, port: int, key: int, version: int, body: bytes, timeout_s: float) -> Reader:
        assert (key, version) == (75, 0)
        asked.append(body)
        cursor = None if body[-2:] == b"\xff\x00" else int.from_bytes(body[-6:-2], "big")
        return Reader(_page(*pages[cursor]))

    monkeypatch.setattr(admin, "request", request)
    got = admin.describe_topic_partitions("h", 1, "t", page=2)
    assert [(p.partition, p.leader, p.isr) for p in got] == [(i, i, (i, i + 1)) for i in range(5)]
    assert len(asked) == 3 and all(int.from_bytes(b[4:8], "big") == 2 for b in asked)  # the page size
    asked.clear()
    pages = {None: ([0, 1, 2], None)}
    assert len(admin.describe_topic_partitions("h", 1, "t")) == 3 and len(asked) == 1


def test_expect_model_covers_every_partition() -> None:
    """``expect: model`` takes every partition's leader and sets from the model: a backend that is
    its own oracle (no shadow to differ from) but reports partition 2's leader wrong fails there."""
    class Partition2LeaderWrong(ModelBackend):
        def observe(self) -> Observation:
            obs = super().observe()
            return replace(obs, partitions={**obs.partitions, 2: replace(obs.partitions[2], leader=1)})

    text = TWO.replace("    do: [{crash: 2}]\n", "    do: [{crash: 2}]\n    expect: model\n")
    assert run_scenario(parse_scenario(text, "two.elr.yaml"), ModelBackend(), "kafka").passed
    result = run_scenario(parse_scenario(text, "two.elr.yaml"), Partition2LeaderWrong(), "kafka")
    assert not result.passed
    assert "step T1 (two.elr.yaml:" in result.message and "partition 2: leader: expected 0, observed 1" \
        in result.message


def test_elr_cluster_takes_partitions_and_an_assignment(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_parts="""
        import pytest

        @pytest.mark.elr_profile("kafka")
        def test_parts(elr_cluster):
            c = elr_cluster(brokers=3, partitions=3, replicas=3)
            c.produce(6)
            c.crash(1)
            c.expect(fenced=[1], partitions={1: {"leader": 2}, "all": {"isr": [0, 2]}})
            c.restart(1)

        def test_assigned(elr_cluster):
            elr_cluster(brokers=3, assignment={0: [0, 1], 1: [1, 2]}, min_insync_replicas=1).expect(
                leader=0, partitions={1: {"leader": 1}})

        def test_bad(elr_cluster):
            elr_cluster(brokers=3, assignment={0: [0, 1], 1: [1, 2, 0]})
    """)
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_parts.py:16: topic.assignment.1: 3 replicas, but the partitions before "
                                 "have 2*"])


# --- losses on a topic of several partitions -----------------------------------------------------

def _outage_2018() -> Any:
    return load_scenario(Path(pytest_elr.__file__).parent / "scenarios" / "outage_2018_leader_cut_then_lost.elr.yaml")


class Partition0ReadOnly(ModelBackend):
    """Reads before the end see partition 0 only (as the executor read before issue 27's item 3)."""

    def read_partitions(self, starts: Any) -> dict[int, Read]:
        return {i: read for i, read in super().read_partitions(starts).items() if i == 0}


def test_a_loss_on_every_partition_of_the_victim_is_proved_by_presence(tmp_path: Path) -> None:
    """The 2018 outage under legacy: broker 0 leads ten partitions and loses two acknowledged records
    of each. Reads before the end read every partition, so the proof names all ten with the offsets
    the victim lost in each; reading partition 0 alone proves two."""
    result = run_scenario(_outage_2018(), ModelBackend(), "legacy", tmp_path / "all")
    assert result.passed, result.message
    [proof] = result.lost_by_presence
    led = [str(p) for p in range(0, 50, 5)]
    assert proof["victim"] == 0 and proof["count"] == 20
    assert sorted(proof["truncated_by_partition"], key=int) == led
    assert {r.get("partition", 0) for r in proof["records"]} == {int(p) for p in led}
    for record in proof["records"]:  # each read record lies in the span its partition lost
        first, end = proof["truncated_by_partition"][str(record.get("partition", 0))]
        assert first <= record["offset"] < end
    narrow = run_scenario(_outage_2018(), Partition0ReadOnly(), "legacy", tmp_path / "p0")
    assert [p["count"] for p in narrow.lost_by_presence] == [2]


def test_a_power_off_measures_each_partition_the_victim_holds(tmp_path: Path) -> None:
    text = THREE.replace("do: [{crash: 1}]", "do: [{power_off: 1}]")
    result = run_scenario(parse_scenario(text, "three.elr.yaml"), ModelBackend(), "kafka", tmp_path)
    assert result.passed, result.message
    assert sorted((x.broker, x.partition) for x in result.losses) == [(1, 0), (1, 1), (1, 2)]
    cuts = [e for e in _events(result) if e["type"] == "loss_evidence" and e.get("after") == "power_off"]
    assert sorted(e.get("partition", 0) for e in cuts) == [0, 1, 2]


def test_a_restart_s_evidence_completes_the_cut_of_its_own_partition(tmp_path: Path) -> None:
    """Kafka's restart reports each partition's reloaded log end: it replaces the cut's evidence of
    the same broker AND partition, never another partition's."""
    ex = Executor(parse_scenario(THREE, "three.elr.yaml"), ModelBackend(), "kafka",
                  History.create(tmp_path, scenario="t"))
    ctx = StepContext(None)
    for p in (0, 1, 2):
        ex._keep_loss(LossEvidence(1, 9, 7, partition=p), PowerOff(brokers=(1,)), ctx)
    ex._keep_loss(LossEvidence(1, 9, 7, leo_restart=7, partition=2), Restart(broker=1), ctx)
    ex._keep_loss(LossEvidence(1, 9, 7, leo_restart=6, partition=0), Restart(broker=1), ctx)
    assert [(x.partition, x.leo_restart) for x in ex.losses] == [(0, 6), (1, None), (2, 7)]
    assert len(ctx.losses) == 3  # the step's lossy faults: the cuts only


def test_rejections_are_counted_on_every_partition_of_the_topic_and_no_other_topic() -> None:
    """``rejected:`` on Kafka reads the controllers' log lines; the model counts the rejections of
    every partition, so the lines of partition 3 count too -- and those of a topic whose name only
    begins like this one's do not."""
    from pytest_elr.backends.kafka import count_rejections
    line = ("[2026-11-27 07:40:00,000] INFO [QuorumController id=3000] Rejecting AlterPartition request from node 1 "
            "for {tp} because it specified ineligible replicas [2] in the new ISR [...]")
    epoch = ("[2026-11-27 07:40:00,000] INFO [QuorumController id=3000] Rejecting AlterPartition request from node 1 "
             "for {tp} because the current partition epoch is 7, not 6.")
    lines = [line.format(tp="elr-t-0"), line.format(tp="elr-t-3"), epoch.format(tp="elr-t-12"),
             line.format(tp="elr-t-x-0"), "Rejecting nothing for elr-t-1 because"]
    assert count_rejections(lines, "elr-t") == {"INELIGIBLE_REPLICA": 2, "INVALID_UPDATE_VERSION": 1}


def test_the_controllers_logs_are_read_at_once_for_the_rejections() -> None:
    """After every step the controllers' logs are read for rejections: all three Docker execs under way
    together (each waits here for the others: read one after another, the first would wait alone and
    fail), and every controller's lines counted."""
    import threading

    from pytest_elr.backends.kafka import KafkaBackend

    line = ("[2026-11-27 07:40:00,000] INFO [QuorumController id={c}] Rejecting AlterPartition request from "
            "node 1 for elr-t-0 because it specified ineligible replicas [2] in the new ISR [...]")
    together = threading.Barrier(3, timeout=10)

    class Cluster:
        def logs(self, node_id: int, lines: int = 40) -> str:
            together.wait()
            return line.format(c=node_id) if node_id != 1001 else "nothing"

    backend = KafkaBackend.__new__(KafkaBackend)  # the read needs only the cluster, its controllers, the topic
    backend.cluster, backend._controllers, backend.topic = Cluster(), [1000, 1001, 1002], "elr-t"
    assert backend._rejection_count() == {"INELIGIBLE_REPLICA": 2, "INVALID_UPDATE_VERSION": 0}


#: four brokers; only partition 1 has broker 0, which is cut from the brokers: its follower must lag
#: out, and partitions 0 and 2 are touched by no fault
ONE_PARTITION_LAGS = """
name: one-partition-of-three-lags
profiles: [kafka]
cluster: {brokers: 4}
topic: {assignment: {0: [2, 3], 1: [0, 1], 2: [3, 2]}, min_insync_replicas: 2}
steps:
  - at: steady
    do: [{produce: 6}]
  - at: cut
    do: [{isolate: {broker: 0, from: brokers}}]
    expect:
      partitions: {1: {leader: 0, isr: [0], elr: [1]}, "0,2": {isr: assigned, elr: []}}
verdict: {acked_loss: none}
"""


def test_records_go_only_to_the_partition_whose_follower_must_lag_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The nudge is aimed: partition 1 (not partition 0, which the old check alone looked at) gets the
    records its cut follower needs to leave the ISR, and partitions 0 and 2 none."""
    monkeypatch.setattr(executor, "time", Clock())
    system = FollowersLagOnlyWhenTicked()
    result = run_scenario(parse_scenario(ONE_PARTITION_LAGS, "lags.elr.yaml"), system, "kafka", tmp_path)
    assert result.passed, result.message
    assert system.nudged and set().union(*system.nudged) == {1}


def test_records_to_every_partition_churn_the_untouched_ones_and_fail_the_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: the nudge of stop 44 and before, records to every partition. A starved follower of a
    partition no fault touches falls out and back in: the comparison catches its partition epoch."""
    monkeypatch.setattr(executor, "time", Clock())
    monkeypatch.setattr(Executor, "_must_fall_behind",
                        staticmethod(lambda obs, models: {0, *obs.partitions}))
    lags = parse_scenario(ONE_PARTITION_LAGS, "lags.elr.yaml")
    result = run_scenario(lags, FollowersLagOnlyWhenTicked(), "kafka", tmp_path)
    assert not result.passed
    assert "step cut" in result.message
    assert "partition_epoch: model unchanged, observed moved" in result.message


def test_a_follower_that_must_lag_out_of_another_partition_than_0_gets_no_records_without_the_aim(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: the old check, which looked at partition 0's ISR alone. Partition 1's cut follower
    never falls behind, never leaves, and the step fails on partition 1's ISR."""
    monkeypatch.setattr(executor, "time", Clock())
    monkeypatch.setattr(Executor, "_must_fall_behind", staticmethod(
        lambda obs, models: {0} if any(set(obs.isr) - set(m.isr) - set(m.fenced) for m in models) else set()))
    lags = parse_scenario(ONE_PARTITION_LAGS, "lags.elr.yaml")
    result = run_scenario(lags, FollowersLagOnlyWhenTicked(), "kafka", tmp_path)
    assert not result.passed
    assert "step cut" in result.message
    assert "partition 1" in result.message and "isr" in result.message
