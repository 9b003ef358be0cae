"""A follower that lags on its own (a loaded machine, no fault) leaves the ISR and comes back: the
partition epoch moves by two where the model's does not. The executor declares it only when the
leader's own log shows each shrink was Kafka's lag rule (behind the leader's end, not caught up for
longer than replica.lag.time.max.ms), and fails the step otherwise: each case below plants one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_backend import Clock, Fake, StarvedFollowerChurns

from pytest_elr.backends.base import LagChurn
from pytest_elr.backends.kafka import KafkaBackend
from pytest_elr.scenario import executor
from pytest_elr.scenario.executor import LAG_CHURN, RunResult, run_scenario
from pytest_elr.scenario.loader import parse_scenario
from pytest_elr.scenario.schema import Scenario
from pytest_elr.sut.isr_shrinks import DAY_MS, isr_shrinks

#: 03:07:35,505 UTC on 2026-11-28, and the same day's epoch milliseconds of 03:07:31,000 and 03:07:34,000
AT = "[03:07:35,505]"
CAUGHT_4505_MS_BEFORE = 1_795_835_251_000
CAUGHT_1505_MS_BEFORE = 1_795_835_254_000


def shrink_line(topic: str = "t", partition: int = 0, follower_end: str = "8", leader_end: int = 10,
                caught: int | str = CAUGHT_4505_MS_BEFORE, at: str = AT) -> str:
    """Kafka's line, as ``Partition.maybeShrinkIsr`` writes it in 4.0.2 and 4.4.0 (their bytecode's
    format string) under the node image's log4j pattern."""
    return (f"{at} INFO [Partition {topic}-{partition} broker=1] Shrinking ISR from 1,2,3 to 1,2. Leader: "
            f"(highWatermark: 8, endOffset: {leader_end}). Out of sync replicas: (brokerId: 3, endOffset: "
            f"{follower_end}, lastCaughtUpTimeMs: {caught}). (Partition)")


# --- the leader's line ------------------------------------------------------------------------


def test_a_shrink_line_reads_as_the_leader_decided_it() -> None:
    (shrink,) = isr_shrinks([shrink_line(), "[03:07:35,600] INFO unrelated (Partition)"], "t", 0)
    assert (shrink.broker, shrink.before, shrink.after, shrink.leader_end) == (1, (1, 2, 3), (1, 2), 10)
    ((dropped),) = shrink.dropped
    assert (dropped.broker, dropped.log_end, dropped.lag_ms) == (3, 8, 4505)
    assert shrink.lagged(3000)


def test_a_follower_behind_and_silent_past_the_lag_time_lagged() -> None:
    assert isr_shrinks([shrink_line()], "t", 0)[0].lagged(3000)


def test_a_follower_caught_up_within_the_lag_time_had_no_cause_to_go() -> None:
    """A leader that drops a follower it heard from 1.5 s ago (the lag time is 3 s): not a lag."""
    (shrink,) = isr_shrinks([shrink_line(caught=CAUGHT_1505_MS_BEFORE)], "t", 0)
    assert shrink.dropped[0].lag_ms == 1505
    assert not shrink.lagged(3000)


def test_a_follower_at_the_leaders_end_had_no_cause_to_go() -> None:
    """Kafka keeps a follower at its leader's end in sync however long ago it last fetched."""
    assert not isr_shrinks([shrink_line(follower_end="10", leader_end=10)], "t", 0)[0].lagged(3000)


def test_a_follower_the_leader_knew_nothing_of_is_no_lag() -> None:
    assert not isr_shrinks([shrink_line(follower_end="unknown")], "t", 0)[0].lagged(3000)
    assert not isr_shrinks([shrink_line(caught="unknown")], "t", 0)[0].lagged(3000)


def test_only_the_partition_asked_for_counts() -> None:
    """``t-1`` is not ``t-10``, nor topic ``u``'s partition 1."""
    lines = [shrink_line(partition=10), shrink_line(topic="u", partition=1), shrink_line(partition=1)]
    assert len(isr_shrinks(lines, "t", 1)) == 1
    assert isr_shrinks(lines, "t", 2) == []


def test_a_line_since_a_wall_time_by_its_time_of_day_across_midnight() -> None:
    (shrink,) = isr_shrinks([shrink_line(at="[00:00:01,000]", caught=1_795_823_999_000)], "t", 0)
    assert shrink.dropped[0].lag_ms == 2000  # 23:59:59 the day before
    midnight = 1_795_824_000.0  # 2026-11-28 00:00:00 UTC
    assert shrink.since(midnight - 5) and shrink.since(midnight + 1)
    assert not shrink.since(midnight + 2)
    assert (shrink.at_ms - int((midnight - 5) * 1000)) % DAY_MS == 6000


# --- what the shrinks explain ---------------------------------------------------------------------


@pytest.mark.parametrize(("churn", "moved_by", "explained"), [
    (LagChurn(1, 1), 2, True),
    (LagChurn(2, 2), 4, True),
    (LagChurn(2, 2), 2, True),  # a shrink whose AlterPartition lost to another change: no epoch
    (LagChurn(1, 1), 1, False),  # out and not back: the ISR differs, and the epoch is no round trip
    (LagChurn(1, 1), 4, False),  # more changes than the shrinks and their take-backs
    (LagChurn(2, 1, ("line",)), 2, False),  # one shrink without cause
    (LagChurn(0, 0), 2, False),  # no shrink at all: the controller moved it
])
def test_lag_churn_explains_only_round_trips_of_lagging_followers(churn: LagChurn, moved_by: int,
                                                                  explained: bool) -> None:
    assert churn.explains(moved_by) is explained


# --- the executor ---------------------------------------------------------------------------------

FLUSHED = parse_scenario("""
name: starved-follower
profiles: [kafka]
cluster: {brokers: [1, 2, 3]}
topic: {name: t, replicas: [1, 2, 3], min_insync_replicas: 2}
steps:
  - at: initial
    do: [{produce: 10}, {flush: 2}]
    expect: {leader: 1, isr: [1, 2, 3], produce: {acked: 10}}
verdict: {acked_loss: none}
""", "starved.elr.yaml")


#: follower 3 behind a slow link while the ISR [1, 2] meets min ISR: the HWM passes its end, and
#: Kafka's leader never takes it back (``Partition.isFollowerInSync``) -- the flush after the wait
#: holds the partition epoch to the model
SLOWED = parse_scenario("""
name: passed-follower
profiles: [kafka]
cluster: {brokers: [1, 2, 3]}
topic: {name: t, replicas: [1, 2, 3], min_insync_replicas: 2}
steps:
  - at: shrink
    do: [{slow: 3}, {produce: 10}]
    expect: {leader: 1, isr: [1, 2], produce: {acked: 10}}
  - at: stays-out
    do: [{wait: 8s}, {flush: 2}]
    expect: {leader: 1, isr: [1, 2]}
verdict: {acked_loss: none}
""", "slowed.elr.yaml")


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, churn: LagChurn | None,
         scenario: Scenario = FLUSHED) -> tuple[RunResult, Fake]:
    monkeypatch.setattr(executor, "time", Clock())
    system = StarvedFollowerChurns(churn)
    return run_scenario(scenario, system, "kafka", tmp_path), system


def _events(tmp_path: Path, kind: str) -> list[dict[str, object]]:
    (path,) = tmp_path.rglob("events.jsonl")
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["type"] == kind]


def test_a_churn_the_leader_logged_as_lag_is_declared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result, system = _run(tmp_path, monkeypatch, LagChurn(1, 1))
    assert result.passed, result.message
    assert isinstance(system, StarvedFollowerChurns)
    (partition, leader, since), *_ = system.asked
    assert (partition, leader) == (0, 1)
    assert since == pytest.approx(1_800_000_000.0 - executor.MARK_SLACK_S, abs=60)
    declared = [d for d in result.declared if d["field"] == "partition_epoch"]
    assert declared and all(LAG_CHURN[0] in d["reason"] and d["source"] == LAG_CHURN[1] for d in declared)
    (asked,) = _events(tmp_path, "lag_churn")  # the log read once for the epoch seen
    assert asked["moved_by"] == 2 and asked["slowed"] == []
    assert asked["churn"] == {"shrinks": 1, "lagged": 1, "without_cause": [], "dropped": []}


def test_a_shrink_without_cause_fails_the_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: a leader that drops a follower in sync (the line shows it caught up 1.5 s ago)."""
    result, _ = _run(tmp_path, monkeypatch, LagChurn(1, 0, (shrink_line(caught=CAUGHT_1505_MS_BEFORE),)))
    assert not result.passed
    assert "partition_epoch: model unchanged, observed moved (0 -> 2)" in result.message


def test_an_epoch_moved_with_no_shrink_logged_fails_the_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: the controller writes two changes nobody asked for (no shrink in the leader's log)."""
    result, _ = _run(tmp_path, monkeypatch, LagChurn(0, 0))
    assert not result.passed
    assert "partition_epoch: model unchanged, observed moved" in result.message


def test_a_round_trip_of_a_follower_behind_a_slow_link_fails_the_step(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: Kafka 4.4.0's ``Partition.needsExpandIsr`` returning true (mutant 897): the leader
    takes back the slowed follower 3 at a late fetch behind its HWM and drops it for lag again. The
    leader's lines read as a lag like any other; only the slow link tells them apart."""
    result, _ = _run(tmp_path, monkeypatch, LagChurn(1, 1, dropped=(3,)), SLOWED)
    assert not result.passed
    assert "partition_epoch: model unchanged, observed moved" in result.message
    (asked,) = _events(tmp_path, "lag_churn")
    assert asked["slowed"] == [3] and asked["churn"]["dropped"] == [3]


def test_a_round_trip_of_another_follower_beside_a_slow_one_is_declared(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Follower 2, no fault on its links, starved of CPU: the same exemption as without a slow link."""
    result, _ = _run(tmp_path, monkeypatch, LagChurn(1, 1, dropped=(2,)), SLOWED)
    assert result.passed, result.message
    assert any(d["field"] == "partition_epoch" and d["source"] == LAG_CHURN[1] for d in result.declared)


def test_a_backend_without_a_log_declares_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result, _ = _run(tmp_path, monkeypatch, None)
    assert not result.passed
    assert "partition_epoch: model unchanged, observed moved" in result.message


# --- the kafka backend --------------------------------------------------------------------------


class _Node:
    def __init__(self, lines: list[str]) -> None:
        self.lines, self.asked = lines, []  # type: ignore[var-annotated]

    def log_since_start(self, *needles: str) -> list[str]:
        self.asked.append(needles)
        return self.lines


class _Cluster:
    broker_ids = (1, 2, 3)

    def __init__(self, node: _Node) -> None:
        self._node = node

    def node(self, node_id: int) -> _Node:
        assert node_id == 1
        return self._node


def test_the_kafka_backend_judges_the_leaders_lines_since_the_mark() -> None:
    """Broker 1's log: a lag before the mark (not counted), then one lag and one shrink without
    cause of partition 0, and a lag of partition 1."""
    node = _Node([shrink_line(at="[03:07:20,000]", caught=CAUGHT_4505_MS_BEFORE - 20_000),
                  shrink_line(), shrink_line(caught=CAUGHT_1505_MS_BEFORE), shrink_line(partition=1)])
    backend = object.__new__(KafkaBackend)
    backend.cluster, backend.topic = _Cluster(node), "t"  # type: ignore[assignment]
    mark = 1_795_835_250.0  # 03:07:30 UTC
    churn = backend.lag_churn(0, 1, mark)
    assert (churn.shrinks, churn.lagged) == (2, 1) and len(churn.without_cause) == 1  # type: ignore[union-attr]
    assert churn.dropped == (3,)  # type: ignore[union-attr]
    assert "lastCaughtUpTimeMs: 1795835254000" in churn.without_cause[0]  # type: ignore[union-attr]
    assert node.asked == [("Shrinking ISR",)]
    assert backend.lag_churn(0, 7, mark) is None  # not a broker of the cluster
