"""The actions that act on one partition name it (issue 27, item 3): ``reassign``,
``cancel_reassignment``, ``move_log_dir`` and ``elect_leaders`` take ``partition: N`` (left out:
partition 0, as before). Each is shown acting on the partition it names and not on partition 0,
on the model and on a system held to it (a planted one that does the action on partition 0 is
caught); the kafka backend sends the partition named to Kafka; bad input is refused with file
and line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from fake_backend import Fake

from pytest_elr.actions import (
    ACTIONS,
    Action,
    CancelReassignment,
    Crash,
    ElectLeaders,
    MoveLogDir,
    Reassign,
    UncleanElection,
    action_from_event,
)
from pytest_elr.api import ClusterHandle
from pytest_elr.backends import kafka as kafka_backend
from pytest_elr.backends.kafka import KafkaBackend
from pytest_elr.backends.model import ModelBackend
from pytest_elr.core.errors import ScenarioError
from pytest_elr.core.nodes import leader_of
from pytest_elr.core.observation import Result
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import cluster_and_topic_from_python, load_scenario, parse_scenario

#: the actions that act on one partition, by kind
PARTITIONED = ("reassign", "cancel_reassignment", "move_log_dir", "elect_leaders", "alter_partition")

#: partition 2 moves off brokers 0 and 1 to 3; partition 0, on the same brokers, keeps them
REASSIGN = """
name: reassign-partition-2
profiles: [kafka, kip966]
cluster: {brokers: 4}
topic: {partitions: 3, replicas: [0, 1, 2], min_insync_replicas: 1}
steps:
  - at: setup
    do: [{produce: 6}]
  - at: moved
    do: [{reassign: {replicas: [3, 2], partition: 2}}]
    expect:
      partition_epoch: unchanged
      partitions:
        0: {leader: 0, replicas: [0, 1, 2], adding: [], removing: []}
        2: {leader: 2, replicas: [2, 3], isr: [2, 3], adding: [], removing: []}
verdict: {acked_loss: none}
"""

#: partitions 1 and 0 both wait for broker 3 (down); the cancel of partition 1's leaves partition 0's
CANCEL = """
name: cancel-partition-1
profiles: [kafka, kip966]
cluster: {brokers: 4}
topic: {partitions: 3, replicas: [0, 1], min_insync_replicas: 1}
steps:
  - at: moves-wait
    do: [{produce: 6}, {crash: 3}, {reassign: [0, 1, 3]}, {reassign: {replicas: [1, 0, 3], partition: 1}}]
    expect:
      adding: [3]
      partitions: {1: {adding: [3]}}
  - at: cancelled
    do: [{cancel_reassignment: {partition: 1}}]
    expect:
      partitions:
        0: {replicas: [0, 1, 3], adding: [3]}
        1: {replicas: [0, 1], adding: [], removing: []}
  - at: back
    do: [{restart: 3}]
    expect:
      partitions:
        0: {replicas: [0, 1, 3], adding: [], isr: [0, 1, 3]}
        1: {replicas: [0, 1], adding: []}
verdict: {acked_loss: none}
"""

#: broker 1 moves its replica of partition 2 between its log dirs: partition 2's record changes
#: (AssignReplicasToDirs), partition 0's does not
MOVE = """
name: move-partition-2
profiles: [kafka]
cluster: {brokers: 3, log_dirs: 2}
topic: {partitions: 3, replicas: [0, 1, 2], min_insync_replicas: 2}
steps:
  - at: setup
    do: [{produce: 6}]
  - at: moved
    do: [{move_log_dir: {broker: 1, partition: 2}}]
    expect:
      partition_epoch: unchanged
      partitions: {all: {leader: preferred, isr: assigned}}
verdict: {acked_loss: none}
"""

#: partitions 0 and 2 both led by broker 1, not their preferred leaders (0, 2); the election of
#: partition 2's gives it back to broker 2 and leaves partition 0 to broker 1
ELECT = """
name: elect-partition-2
profiles: [kafka, kip966]
cluster: {brokers: 3}
topic: {partitions: 3, replicas: [0, 1, 2], min_insync_replicas: 1}
steps:
  - at: setup
    do: [{produce: 6}, {crash: 0}, {crash: 2}, {restart: 0}, {restart: 2}]
    expect:
      partitions: {all: {leader: 1, isr: assigned}}
  - at: elected
    do: [{elect_leaders: {election: preferred, partition: 2}}]
    expect:
      refused: none
      leader_epoch: unchanged
      partitions: {0: {leader: 1}, 1: {leader: 1}, 2: {leader: 2}}
verdict: {acked_loss: none}
"""

#: partition 2 (led by broker 2) forged a shrink to [2, 0]: taken, and its leader lets 1 back in (two
#: changes of partition 2 alone); partition 0, led by broker 0, is not touched
ALTER = """
name: alter-partition-2
profiles: [kafka, kip966]
cluster: {brokers: 3}
topic: {partitions: 3, replicas: [0, 1, 2], min_insync_replicas: 1}
steps:
  - at: setup
    do: [{produce: 6}]
  - at: forged
    do: [{alter_partition: {isr: [2, 0], partition: 2}}]
    expect:
      refused: none
      partitions: {all: {leader: preferred, isr: assigned}}
verdict: {acked_loss: none}
"""

SCENARIOS = {"reassign": REASSIGN, "cancel_reassignment": CANCEL, "move_log_dir": MOVE, "elect_leaders": ELECT,
             "alter_partition": ALTER}
#: the partition each scenario's action names
NAMED = {"reassign": 2, "cancel_reassignment": 1, "move_log_dir": 2, "elect_leaders": 2, "alter_partition": 2}


class PartitionIgnored(Fake):
    """Does one kind of action on partition 0 whatever partition it names: what both backends did
    before the actions could name one."""

    kind: ClassVar[str] = ""

    def apply(self, action: Action) -> Result:
        if action.kind == self.kind:
            action = replace(action, partition=0)  # type: ignore[call-arg]
        return super().apply(action)


class EveryPartition(Fake):
    """Does one kind of action on every partition of the topic: what the model's ``elect_leaders``
    did before it could name one (Kafka's backend asked for partition 0 alone)."""

    kind: ClassVar[str] = ""

    def apply(self, action: Action) -> Result:
        if action.kind != self.kind:
            return super().apply(action)
        result: Result = None
        for p in sorted(self._model().partitions):
            result = super().apply(replace(action, partition=p))  # type: ignore[call-arg]
        return result


def _planted(base: type[Fake], kind: str) -> Fake:
    return type(f"{base.__name__}_{kind}", (base,), {"kind": kind})()


def _run(text: str, backend: Any, profile: str = "kafka") -> Any:
    return run_scenario(parse_scenario(text, "parts.elr.yaml"), backend, profile)


# --- the language ---------------------------------------------------------------------------------

def test_these_are_the_actions_that_act_on_one_partition() -> None:
    """Every action with a ``partition`` field is one of these (a new one is added here, with a test)."""
    assert sorted(k for k, cls in ACTIONS.items() if "partition" in cls.__dataclass_fields__) == sorted(PARTITIONED)


@pytest.mark.parametrize(("item", "action"), [
    ("{reassign: [1, 0]}", Reassign(replicas=(1, 0))),
    ("{reassign: {replicas: [1, 0], partition: 2}}", Reassign(replicas=(1, 0), partition=2)),
    ("{reassign: {replicas: [1, 0], partition: 0}}", Reassign(replicas=(1, 0))),
    ("{cancel_reassignment: true}", CancelReassignment()),
    ("{cancel_reassignment: {partition: 1}}", CancelReassignment(partition=1)),
    ("{move_log_dir: 1}", MoveLogDir(broker=1)),
    ("{move_log_dir: {broker: 1, partition: 2}}", MoveLogDir(broker=1, partition=2)),
    ("{move_log_dir: {broker: {leader_of: 1}, partition: 2}}", MoveLogDir(broker=leader_of(1), partition=2)),
    ("{move_log_dir: {leader_of: 1}}", MoveLogDir(broker=leader_of(1))),
    ("{elect_leaders: preferred}", ElectLeaders(election="preferred")),
    ("{elect_leaders: {election: preferred, partition: 2}}", ElectLeaders(election="preferred", partition=2)),
])
def test_partition_is_read_and_written_back_and_kept_in_histories(item: str, action: Action) -> None:
    text = MOVE.replace("{move_log_dir: {broker: 1, partition: 2}}", item)
    step = parse_scenario(text, "parts.elr.yaml").steps[1]
    assert step.actions == (action,)
    again = parse_scenario(text.replace(item, yaml.safe_dump(action.to_yaml((0, 1, 2))[0], default_flow_style=True)
                                        .strip()), "parts.elr.yaml").steps[1]
    assert again.actions == (action,)  # to_yaml (a shrunk counterexample) names the partition again
    event = action.describe()
    assert event["args"]["partition"] == action.partition  # type: ignore[attr-defined]
    assert action_from_event(event) == action
    old = {"action": action.kind, "args": {k: v for k, v in event["args"].items() if k != "partition"}}
    assert action_from_event(old).partition == 0  # type: ignore[union-attr]  # a history before: partition 0


@pytest.mark.parametrize(("item", "error"), [
    ("{reassign: {replicas: [1, 0], partition: 3}}",
     "step moved: reassign.partition: no partition 3: the topic has 3 partitions (0..2; topic: {partitions: 4} "
     "for more)"),
    ("{reassign: {replicas: [1, 0], partition: two}}", "step moved: reassign.partition: expected a partition number, "
                                                        "got 'two'"),
    ("{reassign: {replicas: [1, 0], partition: 1.5}}", "step moved: reassign.partition: expected a partition number"),
    ("{reassign: {replicas: [1, 0], partition: -1}}", "step moved: reassign.partition: expected a number >= 0, got -1"),
    ("{reassign: {replicas: [1, 0], partition: true}}", "step moved: reassign.partition: expected a partition number"),
    ("{reassign: {replicas: [1, 0], partition: [2]}}", "step moved: reassign.partition: expected a partition number"),
    ("{reassign: {partition: 2}}", "step moved: reassign: missing 'replicas'"),
    ("{reassign: {replicas: 1, partition: 2}}", "step moved: reassign.replicas: expected the target replica list"),
    ("{reassign: {replica: [1], partition: 2}}", "step moved: reassign: unknown key 'replica' (did you mean "
                                                  "'replicas'?)"),
    ("{cancel_reassignment: {partition: 5}}", "step moved: cancel_reassignment.partition: no partition 5"),
    ("{cancel_reassignment: {}}", "step moved: cancel_reassignment: expected true or {partition: N}"),
    ("{cancel_reassignment: 2}", "step moved: cancel_reassignment: expected true (partition 0's) or {partition: N}, "
                                 "got '2'"),
    ("{move_log_dir: {broker: 1, partition: 3}}", "step moved: move_log_dir.partition: no partition 3"),
    ("{move_log_dir: {broker: 1, partition: x}}", "step moved: move_log_dir.partition: expected a partition number, "
                                                   "got 'x'"),
    ("{move_log_dir: {partition: 1}}", "step moved: move_log_dir: missing 'broker'"),
    ("{move_log_dir: {brokr: 1, partition: 1}}", "step moved: move_log_dir: unknown key 'brokr' (did you mean "
                                                 "'broker'?)"),
    ("{move_log_dir: {leader_of: 1, partition: 1}}", "step moved: move_log_dir: name the broker in broker, e.g. "
                                                     "{broker: {leader_of: 1}, partition: 2}"),
    ("{move_log_dir: {leader_of: 3}}", "step moved: move_log_dir.leader_of: no partition 3"),
    ("{move_log_dir: {broker: 7, partition: 1}}", "step moved: move_log_dir.broker: unknown broker id 7"),
    ("{elect_leaders: {election: preferred, partition: 9}}", "step moved: elect_leaders.partition: no partition 9"),
    ("{elect_leaders: {partition: 1}}", "step moved: elect_leaders: missing 'election' (preferred)"),
    ("{elect_leaders: {election: unclean, partition: 1}}", "step moved: elect_leaders.election: expected one of "
                                                           "preferred, got 'unclean'"),
])
def test_a_bad_partition_is_refused_with_file_line_and_what_was_expected(item: str, error: str) -> None:
    text = MOVE.replace("{move_log_dir: {broker: 1, partition: 2}}", item)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if item in row)
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, "parts.elr.yaml")
    assert f"parts.elr.yaml:{line}" in str(caught.value)
    assert error in str(caught.value)


def test_a_one_partition_topic_has_partition_0_only() -> None:
    text = MOVE.replace("partitions: 3, ", "").replace("partitions: {all: {leader: preferred, isr: assigned}}",
                                                       "leader: 0").replace("partition: 2", "partition: 1")
    with pytest.raises(ScenarioError, match="move_log_dir.partition: no partition 1: the topic has 1 partition "
                                            r"\(0..0; topic: \{partitions: 2\} for more\)"):
        parse_scenario(text, "parts.elr.yaml")


def test_a_symbolic_target_may_name_a_broker_a_reassignment_of_its_partition_added() -> None:
    """The loader's check of ``{leader_of: N}`` follows the brokers a reassignment of partition N
    named: broker 3, added to partition 2 only, may lead partition 2 and not partition 0."""
    head = """
name: leader-of-moved
profiles: [kafka]
cluster: {brokers: 4}
topic: {partitions: 3, replicas: [0, 1, 2], min_insync_replicas: 1}
steps:
  - at: moved
    do: [{reassign: {replicas: [3], partition: P}}, {crash: 0}, {crash: 1}, {crash: 2}]
  - at: leaderless
    do: [{crash: {leader_of: 2}}]
verdict: {acked_loss: none}
"""
    parse_scenario(head.replace("P", "2"), "m.elr.yaml")  # broker 3 may lead partition 2
    with pytest.raises(ScenarioError, match="leader_of: 2} would name no broker"):
        parse_scenario(head.replace("P", "1"), "m.elr.yaml")  # it joined partition 1, not 2


# --- the model and a system held to it ----------------------------------------------------------

@pytest.mark.parametrize("kind", PARTITIONED)
def test_the_action_acts_on_the_partition_it_names_on_the_model_and_on_a_system_held_to_it(kind: str) -> None:
    text = SCENARIOS[kind]
    for profile in parse_scenario(text, "parts.elr.yaml").profiles:
        for backend in (ModelBackend(), Fake()):
            result = _run(text, backend, profile)
            assert result.passed, (kind, profile, type(backend).__name__, result.message)


@pytest.mark.parametrize("kind", PARTITIONED)
def test_a_system_that_does_the_action_on_partition_0_is_caught(kind: str) -> None:
    result = _run(SCENARIOS[kind], _planted(PartitionIgnored, kind))
    assert not result.passed
    named = NAMED[kind]
    # held to the model, it differs on the partition named, and on partition 0 (which it changed)
    differs = {d.get("partition", 0) for d in result.disagreements}
    assert {0, named} <= differs, (result.message, result.disagreements)
    assert f"partition {named}:" in result.message


@pytest.mark.parametrize("kind", ["elect_leaders", "reassign", "move_log_dir"])
def test_a_system_that_does_the_action_on_every_partition_is_caught(kind: str) -> None:
    result = _run(SCENARIOS[kind], _planted(EveryPartition, kind))
    assert not result.passed
    assert 0 in {d.get("partition", 0) for d in result.disagreements}, result.message


def test_the_model_acts_on_the_partition_named_alone() -> None:
    """The model's own state, action by action (what the scenarios above observe)."""
    from pytest_elr.model import build_model
    from pytest_elr.model.profiles import get_profile

    scenario = parse_scenario(CANCEL, "parts.elr.yaml")
    m = build_model(scenario.cluster, scenario.topic, get_profile("kafka"))
    m.apply(Reassign(replicas=(1, 0, 2), partition=1))  # completes: broker 2 catches up at once
    assert [m.partitions[i].part.replicas for i in range(3)] == [[0, 1], [1, 0, 2], [0, 1]]
    m.apply(Crash(broker=3))
    m.apply(Reassign(replicas=(0, 1, 3), partition=2))  # waits for broker 3
    assert [m.partitions[i].part.adding for i in range(3)] == [[], [], [3]]
    m.apply(CancelReassignment(partition=2))
    assert [m.partitions[i].part.replicas for i in range(3)] == [[0, 1], [1, 0, 2], [0, 1]]
    assert [m.partitions[i].part.adding for i in range(3)] == [[], [], []]


def test_the_shipped_scenario_passes_on_the_model() -> None:
    path = Path(__file__).parent.parent / "scenarios" / "operator_requests_name_a_partition.elr.yaml"
    scenario = load_scenario(path)
    for profile in scenario.profiles:
        result = run_scenario(scenario, ModelBackend(), profile)
        assert result.passed, (profile, result.message)
        planted = run_scenario(scenario, _planted(PartitionIgnored, "reassign"), profile)
        assert not planted.passed


def test_the_python_api_names_the_partition_as_yaml_does(tmp_path: Path) -> None:
    spec, topic = cluster_and_topic_from_python({"brokers": [0, 1, 2, 3]}, {"partitions": 3, "replicas": [0, 1, 2],
                                                                            "min_insync_replicas": 1}, ("test.py", 7))
    c = ClusterHandle(ModelBackend(), "kafka", spec, topic, tmp_path)
    c.produce(6)
    c.reassign([3, 2], partition=2)
    c.expect(partitions={0: {"replicas": [0, 1, 2]}, 2: {"replicas": [2, 3], "leader": 2}})
    c.elect_leaders("preferred", partition=2)
    c.expect(leader=0, partitions={2: {"leader": 3}})
    with pytest.raises(ScenarioError, match=r"test_action_partitions.py:\d+: reassign.partition: no partition 3"):
        c.reassign([3, 2], partition=3)
    c.close()


# --- the kafka backend --------------------------------------------------------------------------

class _Client:
    """The kafka backend's cluster client, recording the partition of each request."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def reassign(self, topic: str, replicas: Any, partition: int = 0) -> None:
        self.calls.append(("reassign", partition))

    def cancel_reassignment(self, topic: str, partition: int = 0) -> None:
        self.calls.append(("cancel_reassignment", partition))

    def move_to_next_log_dir(self, node: int, topic: str, partition: int = 0, timeout_s: float = 30.0) -> str:
        self.calls.append(("move_log_dir", partition))
        return "/d1"


class _Answers:
    """ElectLeaders' answer: one error per partition asked (None: elected)."""

    def __init__(self, partitions: list[Any], errors: dict[int, Any] | None = None) -> None:
        self.partitions, self.errors = partitions, errors or {}

    def result(self, timeout: float) -> dict[Any, Any]:
        return {tp: self.errors.get(tp.partition) for tp in self.partitions}


@pytest.mark.parametrize("action", [Reassign(replicas=(1, 2), partition=2), CancelReassignment(partition=2),
                                    MoveLogDir(broker=1, partition=2), ElectLeaders(election="preferred", partition=2)])
def test_the_kafka_backend_asks_kafka_for_the_partition_named(action: Action,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    client = _Client()
    elected: list[Any] = []

    class Admin:
        def __init__(self, config: Any) -> None:
            pass

        def elect_leaders(self, election: Any, partitions: Any) -> _Answers:
            elected.extend(partitions)
            return _Answers(partitions)

    monkeypatch.setattr(kafka_backend, "AdminClient", Admin)
    backend = object.__new__(KafkaBackend)
    backend.client, backend.topic, backend.session_timeout_ms = client, "t", 6000  # type: ignore[assignment]
    backend._bootstrap = lambda: "localhost:9092"  # type: ignore[method-assign]
    assert backend.apply(action) is None
    asked = [(kind, p) for kind, p in client.calls] + [("elect_leaders", tp.partition) for tp in elected]
    assert asked == [(action.kind, 2)]
    assert all(tp.topic == "t" for tp in elected)


class _Admin:
    """The AdminClient of the kafka backend's unclean election: the config change, then ElectLeaders."""

    asked: list[Any] = []
    errors: dict[int, Any] = {}

    def __init__(self, config: Any) -> None:
        pass

    def incremental_alter_configs(self, resources: Any) -> dict[str, Any]:
        class Done:
            def result(self, timeout: float) -> None:
                return None
        return {"topic": Done()}

    def elect_leaders(self, election: Any, partitions: Any) -> _Answers:
        _Admin.asked = list(partitions)
        return _Answers(partitions, _Admin.errors)


def _kafka_backend(partitions: int, monkeypatch: pytest.MonkeyPatch) -> KafkaBackend:
    monkeypatch.setattr(kafka_backend, "AdminClient", _Admin)
    backend = object.__new__(KafkaBackend)
    backend.client, backend.topic, backend._partitions = _Client(), "t", partitions  # type: ignore[assignment]
    backend._bootstrap = lambda: "localhost:9092"  # type: ignore[method-assign]
    return backend


def test_the_kafka_backends_unclean_election_names_every_partition_of_the_topic(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The topic's config covers every partition, and the model elects in each: the request the
    runbook sends must name them all (it named partition 0 alone)."""
    backend = _kafka_backend(3, monkeypatch)
    assert backend.apply(UncleanElection(enabled=True)) is None
    assert sorted((tp.topic, tp.partition) for tp in _Admin.asked) == [("t", 0), ("t", 1), ("t", 2)]


def test_a_refusal_of_one_partitions_unclean_election_names_that_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    from confluent_kafka import KafkaError
    backend = _kafka_backend(3, monkeypatch)
    monkeypatch.setattr(_Admin, "errors", {1: KafkaError(KafkaError.ELECTION_NOT_NEEDED),
                                           2: KafkaError(KafkaError.INVALID_REQUEST)})
    refusal = backend.apply(UncleanElection(enabled=True))
    assert refusal is not None and "unclean election of t-2" in str(refusal)
