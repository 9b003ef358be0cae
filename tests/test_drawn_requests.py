"""The search and ``elr explore`` draw an operator's requests naming any partition of a topic of
several (``reassign``, ``cancel_reassignment``, ``move_log_dir``, ``elect_leaders`` with
``partition: N``) and, on a cluster with a spare broker, ``hold_metadata`` with its heal and the
``begin_shutdown`` it bites on (issue 27, item 5). Drawn from the seed alone, never refused by the
model, and each finds, by ``elr explore``, a planted system bug only it reaches."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from fake_backend import Fake, MetadataHoldIgnored

from pytest_elr.actions import (
    Action,
    CancelReassignment,
    ElectLeaders,
    HoldMetadata,
    MoveLogDir,
    Produce,
    Reassign,
    Shutdown,
)
from pytest_elr.backends.model import ModelBackend
from pytest_elr.core.observation import Result
from pytest_elr.core.specs import ClusterSpec, TopicSpec, rotated_assignment
from pytest_elr.model.cluster import ModelError
from pytest_elr.model.profiles import get_profile
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.export import scenario_yaml
from pytest_elr.scenario.loader import load_scenario
from pytest_elr.schedule.explore import Explorer, schedules
from pytest_elr.schedule.search import SearchConfig, machine_for, run_machine

#: the requests that name a partition
REQUESTS = ("reassign", "cancel_reassignment", "move_log_dir", "elect_leaders")
#: the partition rules' kinds, with a few faults that leave reassignments under way (to cancel)
REQUEST_KINDS = ("reassign", "move", "elect_leaders", "isolate", "crash", "restart", "heal")
THREE = SearchConfig(profile=get_profile("kip966"), partitions=3, kinds=REQUEST_KINDS)
SPARE = SearchConfig(profile=get_profile("kafka"), spare=True,
                     kinds=("hold", "heal", "shutdown", "crash", "restart", "isolate", "lossy"))


def drawn(cfg: SearchConfig, seeds: range, examples: int = 40, steps: int = 12) -> list[list[Action]]:
    """Every schedule the search's machine of ``cfg`` draws for ``seeds`` (the invariants not checked:
    what is drawn, not what it breaks)."""
    found: list[list[Action]] = []

    class Collect(machine_for(cfg)):  # type: ignore[misc]
        def teardown(self) -> None:
            found.append(list(self.actions))

        def protocol_invariants(self) -> None:
            return None

    for s in seeds:
        run_machine(Collect, examples, steps, seed_value=s)
    return found


def cluster_of(cfg: SearchConfig) -> tuple[ClusterSpec, TopicSpec]:
    return (ClusterSpec(brokers=cfg.cluster_brokers, log_dirs=MoveLogDir.log_dirs_needed),
            TopicSpec(name="drawn", replicas=cfg.brokers, min_insync_replicas=cfg.min_isr,
                      more_partitions=rotated_assignment(cfg.brokers, cfg.partitions)[1:]))


def refusal_on_the_model(actions: list[Action], cfg: SearchConfig, where: Path) -> str | None:
    """What the loader or the model backend refuses of ``actions`` written as a scenario, or None."""
    cluster, topic = cluster_of(cfg)
    where.write_text(scenario_yaml("drawn", "drawn", cluster, topic, actions, {}))
    scenario = load_scenario(where)  # a ScenarioError (the loader's refusal) fails the test here
    loaded = [a for step in scenario.steps for a in step.actions]
    if loaded != actions:
        return f"written {actions}, loaded {loaded}"
    try:
        result = run_scenario(scenario, ModelBackend(rules=cfg.profile.rules), cfg.profile.name)
    except ModelError as exc:  # the executor's finale after a refused step (it counts the step as done)
        return f"the model refused the finale: {exc}"
    return result.message if "the model cannot do it here" in result.message else None


# --- (a) drawn, on every partition ----------------------------------------------------------------


def test_on_three_partitions_every_request_names_partitions_other_than_0() -> None:
    requests = Counter((a.kind, a.partition) for s in drawn(THREE, range(3)) for a in s if a.kind in REQUESTS)
    for kind in REQUESTS:
        assert {p for k, p in requests if k == kind} - {0}, (kind, sorted(requests.items()))
    assert {p for _, p in requests} == {0, 1, 2}, sorted(requests.items())


def test_on_one_partition_the_partition_rules_are_hidden_and_every_request_names_partition_0() -> None:
    """Hidden, not merely never enabled, so a one-partition seed draws what it drew before them
    (``tests/test_draws.py`` compares the search's and explore's one-partition draws)."""
    one = replace(THREE, partitions=1)
    for name in ("reassign_partition", "cancel_partition_reassignment", "move_partition_log_dir",
                 "elect_partition_preferred_leader"):
        assert getattr(machine_for(one), name) is None and getattr(machine_for(THREE), name) is not None
    requests = {(a.kind, a.partition) for s in drawn(one, range(2)) for a in s if a.kind in REQUESTS}
    assert {k for k, _ in requests} >= {"reassign", "move_log_dir", "elect_leaders"}, requests
    assert {p for _, p in requests} == {0}, requests


def test_the_partition_rules_act_on_the_partition_drawn_modulo_the_topics() -> None:
    machine = machine_for(THREE)()
    machine.enabled = frozenset(REQUEST_KINDS)
    machine.elect_partition_preferred_leader(p=5)  # 5 % 3: partition 2 (its preferred leader leads: no change)
    machine.reassign_partition(p=4, order=[2, 0, 1], size=2, aim="any")  # partition 1: [1, 2, 0] -> [2, 0]
    machine.move_partition_log_dir(p=2, victim="leader", hold_assignment=False)  # partition 2's leader: 2
    assert machine.actions == [ElectLeaders(election="preferred", partition=2), Reassign(replicas=(2, 0), partition=1),
                               MoveLogDir(broker=2, partition=2)], machine.actions
    assert [machine.model.partitions[p].part.replicas for p in (0, 1)] == [[0, 1, 2], [2, 0]]


def test_with_a_spare_broker_its_metadata_is_held_healed_and_bitten_on() -> None:
    kinds = Counter(a.kind for s in drawn(SPARE, range(3)) for a in s)
    assert kinds["hold_metadata"] and kinds["begin_shutdown"], kinds
    held = [a for s in drawn(SPARE, range(3)) for a in s if isinstance(a, HoldMetadata)]
    assert {a.broker for a in held} == {3}, "only the spare, which holds no replica"
    healed = [s for s in drawn(SPARE, range(3)) if any(
        a.kind == "hold_metadata" and any(b.kind == "heal" for b in s[i + 1:]) for i, a in enumerate(s))]
    assert healed, "no hold drawn with its heal after it"
    # without a spare the rules are hidden (a search on the topic's brokers alone draws what it drew)
    bare = replace(SPARE, spare=False)
    assert machine_for(bare).hold_metadata is None and machine_for(bare).heal_spare is None
    assert not {a.kind for s in drawn(bare, range(1)) for a in s} & {"hold_metadata", "begin_shutdown"}


# --- (b) the seed alone -----------------------------------------------------------------------------


@pytest.mark.parametrize("cfg", [THREE, SPARE], ids=["three-partitions", "spare"])
def test_the_same_seed_draws_the_same_schedules(cfg: SearchConfig) -> None:
    first = drawn(cfg, range(5, 7))
    assert first == drawn(cfg, range(5, 7))
    assert first != drawn(cfg, range(7, 9)), "another seed, other schedules"


def test_explore_draws_the_same_schedules_for_the_same_seed() -> None:
    oracle = get_profile("kafka")
    for kw in ({"partitions": 3}, {"spare": True}):
        first = list(itertools.islice(schedules(oracle, 3, 8, None, **kw), 10))  # type: ignore[arg-type]
        assert first == list(itertools.islice(schedules(oracle, 3, 8, None, **kw), 10)), kw  # type: ignore[arg-type]


# --- (c) never refused by the model ----------------------------------------------------------------


@pytest.mark.parametrize("cfg", [THREE, replace(THREE, profile=get_profile("kafka")), SPARE,
                                 replace(SPARE, profile=get_profile("kip966"))],
                         ids=["three-partitions-kip966", "three-partitions-kafka", "spare-kafka", "spare-kip966"])
def test_no_drawn_schedule_is_refused_on_the_model_backend(cfg: SearchConfig, tmp_path: Path) -> None:
    shown = [s for s in drawn(cfg, range(2), examples=30)
             if any(a.kind in ("hold_metadata", "begin_shutdown") or getattr(a, "partition", 0) for a in s)]
    assert len(shown) >= 10, len(shown)
    refused = {n: r for n, s in enumerate(shown) if (r := refusal_on_the_model(s, cfg, tmp_path / f"{n}.elr.yaml"))}
    assert not refused, refused


@pytest.mark.parametrize("planted", [
    [Produce(count=2, acks="all"), HoldMetadata(broker=1)],  # a broker holding a replica
    [Produce(count=2, acks="all"), HoldMetadata(broker=3), Shutdown(broker=0)],  # a blocking shutdown while held
    [Produce(count=2, acks="all"), CancelReassignment(partition=2)],  # no reassignment under way
], ids=["replica-holder", "blocking-shutdown", "nothing-to-cancel"])
def test_the_refusal_check_fires_on_a_schedule_the_model_refuses(planted: list[Action], tmp_path: Path) -> None:
    cfg = replace(SPARE, partitions=3)
    assert refusal_on_the_model(planted, cfg, tmp_path / "planted.elr.yaml") is not None


# --- (d) a planted system bug only the new draws reach, found by elr explore ------------------------


class PartitionOfRequestIgnored(Fake):
    """Acts on partition 0 whatever partition an operator's request names (a backend that drops the
    field): only a request naming another partition tells it from the model."""

    def apply(self, action: Action) -> Result:
        if isinstance(action, (Reassign, CancelReassignment, MoveLogDir, ElectLeaders)) and action.partition:
            action = replace(action, partition=0)
        return super().apply(action)


def explored(backend: type[Fake], cfg: SearchConfig, shown: list[list[Action]], tmp_path: Path) -> dict[str, int]:
    """``shown`` run by ``elr explore``'s explorer on ``backend``, the model as the oracle: the
    finding signatures (a correct system: none)."""
    cluster, topic = cluster_of(cfg)
    lines: list[str] = []
    ex = Explorer(backend, None, "kafka", cfg.profile, tmp_path, cluster, topic, confirm=1, shrink_replays=10,
                  say=lines.append)
    seen = ex.explore(iter(shown), time.monotonic() + 300)
    assert seen.counts["harness error"] == 0 and sum(seen.counts.values()) >= len(shown) // 2, lines
    return dict(seen.signatures)


def test_explore_finds_a_system_that_ignores_the_requests_partition(tmp_path: Path) -> None:
    """Requests naming partitions 1 and 2 (drawn, none of partition 0 alone): the planted bug
    differs from the model; a correct system agrees on the same schedules."""
    three = replace(THREE, profile=get_profile("kafka"))
    shown = [s for s in drawn(three, range(4), examples=30, steps=8)
             if any(a.kind in REQUESTS and a.partition for a in s)  # type: ignore[attr-defined]
             and any(a.kind == "produce" for a in s)][:8]
    assert len(shown) >= 4, len(shown)
    assert explored(Fake, three, shown, tmp_path / "fake") == {}
    found = explored(PartitionOfRequestIgnored, three, shown, tmp_path / "planted")
    assert found and all(sig.startswith("differs:") for sig in found), found


def test_explore_finds_a_system_that_ignores_the_metadata_hold(tmp_path: Path) -> None:
    """The hold drawn with the shutdown it bites on: a system that never holds (the toxic not put
    on) fences the leader as it leaves, where the model keeps it unfenced; a correct system agrees."""
    shown = [s for s in drawn(SPARE, range(2), examples=40, steps=8)
             if any(a.kind == "begin_shutdown" for a in s) and any(a.kind == "produce" for a in s)][:6]
    assert len(shown) >= 3, len(shown)
    assert explored(Fake, SPARE, shown, tmp_path / "fake") == {}
    found = explored(MetadataHoldIgnored, SPARE, shown, tmp_path / "planted")
    assert "differs:fenced" in found, found


def test_explore_runs_schedules_of_three_partitions_and_a_spare_that_agree(tmp_path: Path) -> None:
    """Both at once, as ``elr explore --partitions 3 --spare-broker`` draws them: written, run and
    agreed with by a correct system."""
    both = SearchConfig(profile=get_profile("kafka"), partitions=3, spare=True)
    shown = list(itertools.islice(schedules(get_profile("kafka"), 0, 8, None, partitions=3, spare=True), 12))
    assert any(a.kind == "hold_metadata" for s in shown for a in s), shown
    assert explored(Fake, both, shown, tmp_path) == {}
