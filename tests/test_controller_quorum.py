"""Controllers as fault targets (issue 27 item 2): the model's quorum rules, the Python API, and
the planted violations the failover scenario's expectations and the executor's comparison catch."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
import yaml
from fake_backend import (
    AsksToDropOnlyABehindFollower,
    Clock,
    ControllerLinkCutLosesTheQuorum,
    ControllerLinkCutMovesTheLeader,
    ElrLostOnControllerPowerOff,
    ElrLostOnFailover,
    Fake,
    IsolatedControllerFencesNobody,
    IsolatedControllerKeepsLeading,
    NoFailover,
    OneControllerCutCutsThemAll,
    OneControllerCutIgnored,
    SlowBetweenControllersIgnored,
    SlowToOneControllerSlowsThemAll,
)

from pytest_elr.actions import (
    Crash,
    CrashController,
    Cut,
    Heal,
    IsolateController,
    PowerOffController,
    Produce,
    RestartController,
    ShutdownController,
    Slow,
    StopController,
)
from pytest_elr.api import ClusterHandle
from pytest_elr.backends.model import ModelBackend
from pytest_elr.core.errors import ScenarioError
from pytest_elr.core.nodes import isolation_links, one_controller
from pytest_elr.core.specs import ClusterSpec, TopicSpec
from pytest_elr.model.cluster import ModelCluster, ModelError
from pytest_elr.model.profiles import get_profile
from pytest_elr.scenario import executor
from pytest_elr.scenario.executor import Executor, run_scenario
from pytest_elr.scenario.loader import load_scenario

BROKERS = (0, 1, 2)
FAILOVER = Path(__file__).parent.parent / "scenarios" / "kip966_active_controller_fails_mid_timeline.elr.yaml"
ISOLATED = Path(__file__).parent.parent / "scenarios" / "kip966_active_controller_isolated.elr.yaml"
POWER_OFF = Path(__file__).parent.parent / "scenarios" / "kip966_controller_power_off_mid_timeline.elr.yaml"
CUT_FROM_ACTIVE = Path(__file__).parent.parent / "scenarios" / "broker_cut_from_active_controller.elr.yaml"
CONTROLLER_LINK = Path(__file__).parent.parent / "scenarios" / "kip966_controller_link_cut_one_way.elr.yaml"
SLOW_TO_ONE = Path(__file__).parent.parent / "scenarios" / "slow_to_the_active_controller_only.elr.yaml"
HELD_SHRINK = Path(__file__).parent.parent / "scenarios" / "slow_to_the_active_controller_holds_a_shrink.elr.yaml"
SLOWED_FROM_QUORUM = Path(__file__).parent.parent / "scenarios" / "controller_slowed_from_the_quorum.elr.yaml"


def _model(controllers: int = 3) -> ModelCluster:
    return ModelCluster(BROKERS, [0, 1, 2], 2, get_profile("kafka"), controllers=controllers)


def _below_min_isr(m: ModelCluster) -> None:
    """ISR [2], ELR [1], broker 0 and 1 fenced: a state the ELR matters in."""
    m.apply(Produce(count=5))
    m.apply(Cut(links=isolation_links(0, "all", BROKERS)))
    m.apply(Cut(links=isolation_links(1, "all", BROKERS)))
    assert (m.part.leader, m.part.isr, m.part.elr) == (2, [2], [1])


def test_a_failover_keeps_the_partition_and_elects_a_live_controller() -> None:
    m = _model()
    _below_min_isr(m)
    before, epochs = m.part.view(), (m.part.leader_epoch, m.part.partition_epoch)
    m.apply(CrashController(controller="active"))
    assert m.has_quorum() and m.active_controller not in (None, 0)
    assert m.part.view() == before and (m.part.leader_epoch, m.part.partition_epoch) == epochs
    assert m.observe().active_controller == m.active_controller
    # the new controller still acts on the ELR: broker 2 gone, healed, broker 1 is elected from it
    m.apply(Crash(broker=2))
    m.apply(Heal(links=None))
    assert m.part.leader == 1


def test_without_a_majority_no_metadata_changes_until_one_is_back() -> None:
    m = _model()
    m.apply(Produce(count=5))
    m.apply(CrashController(controller=0))
    m.apply(CrashController(controller="active"))
    assert not m.has_quorum() and m.active_controller is None
    before, fenced = m.part.view(), set(m.fenced)
    m.apply(Cut(links=isolation_links(0, "all", BROKERS)))  # the leader cut off: nobody fences it
    assert m.part.view() == before and m.fenced == fenced
    m.apply(RestartController(controller=0))  # two of three: a leader again, and the fencing happens
    assert m.active_controller == 0 and 0 in m.fenced and m.part.leader != 0


def test_one_controller_crashed_is_no_quorum_and_its_restart_brings_it_back() -> None:
    m = _model(controllers=1)
    assert m.has_quorum() and m.active_controller == 0
    m.apply(CrashController(controller="active"))
    assert not m.has_quorum() and m.active_controller is None
    m.apply(Crash(broker=0))
    assert 0 not in m.fenced and m.part.leader == 0
    m.apply(RestartController(controller="all"))
    assert m.active_controller == 0 and 0 in m.fenced and m.part.leader == 1


@pytest.mark.parametrize(("actions", "error"), [
    ([CrashController(controller=1), CrashController(controller=1)], "controller 1 is not running"),
    ([RestartController(controller=2)], "controller 2 is already running"),
    ([CrashController(controller=0), CrashController(controller=1), CrashController(controller="active")],
     "no controller is active"),
])
def test_the_model_refuses_what_the_controllers_state_forbids(actions: list, error: str) -> None:
    m = _model()
    with pytest.raises(ModelError, match=error):
        for action in actions:
            m.apply(action)


def test_the_python_api_crashes_the_active_controller() -> None:
    c = ClusterHandle(ModelBackend(), "kafka", ClusterSpec(BROKERS, controllers=3), TopicSpec("t", BROKERS, 2))
    c.expect(active_controller=0)
    c.crash_controller("active")
    c.expect(active_controller="any", leader=0)
    with pytest.raises(ScenarioError, match="controller 3 is not in the cluster: it has 3 controllers"):
        c.crash_controller(3)
    with pytest.raises(ScenarioError, match="expected a controller number, any, unchanged or none"):
        c.expect(active_controller="some")
    c.restart_controller("all")
    assert c.verdict().lost_count == 0
    assert c.result is not None and c.result.passed, c.result.message


def test_the_failover_scenario_passes_on_a_faithful_system(tmp_path: Path) -> None:
    result = run_scenario(load_scenario(FAILOVER), Fake(), "kafka", tmp_path)
    assert result.passed, result.message


@pytest.mark.parametrize(("scenario", "backend", "step", "after"), [
    (FAILOVER, ElrLostOnFailover, "failover", "crash_controller"),
    (POWER_OFF, partial(ElrLostOnControllerPowerOff, at="power_off"), "controller-power-off", "power_off_controller"),
    (POWER_OFF, partial(ElrLostOnControllerPowerOff, at="rejoin"), "controller-rejoins", "restart_controller"),
], ids=["failover", "power-cut", "lossy-rejoin"])
def test_an_elr_lost_by_the_controllers_is_caught_by_the_comparison_and_the_expectation(
        scenario: Path, backend: Callable[[], Fake], step: str, after: str) -> None:
    """A committed ELR lost in a failover, at a controller's power cut, or when the lossy controller
    rejoins: each step expects ``elr: [1, 2]``, and the model holds the system to it as well."""
    result = run_scenario(load_scenario(scenario), backend(), "kafka")
    assert not result.passed
    assert f"step {step}" in result.message
    assert f"after {after}, the system differs from the model in elr: model [1, 2], observed []" in result.message
    assert "elr: expected [1, 2], observed []" in result.message


def test_no_new_active_controller_is_caught_by_the_expectation() -> None:
    result = run_scenario(load_scenario(FAILOVER), NoFailover(), "kafka")
    assert not result.passed
    assert "step failover" in result.message
    assert "active_controller: expected any, observed none (no quorum leader)" in result.message


# --- isolate_controller ---------------------------------------------------------------------


def test_an_active_controller_cut_from_the_brokers_keeps_the_quorum_and_fences_them_all() -> None:
    m = _model()
    m.apply(Produce(count=5))
    m.apply(IsolateController(controller="active", scope="brokers"))
    assert m.active_controller == 0 and m.has_quorum()
    assert m.fenced == {0, 1, 2}
    assert (m.part.leader, m.part.isr, sorted(m.part.elr)) == (None, [], [1, 2])


def test_a_controller_that_is_not_active_cut_from_the_brokers_changes_nothing() -> None:
    m = _model()
    m.apply(Produce(count=5))
    before = m.part.view()
    m.apply(IsolateController(controller=1, scope="brokers"))
    assert m.active_controller == 0 and not m.fenced and m.part.view() == before


@pytest.mark.parametrize(("target", "scope"), [("active", "controllers"), ("active", "all"), (1, "controllers")])
def test_isolating_a_controller_from_the_controllers_with_brokers_unfenced_is_refused(target: int | str,
                                                                                     scope: str) -> None:
    m = _model()
    with pytest.raises(ModelError, match=r"while brokers \[0, 1, 2\] are unfenced"):
        m.apply(IsolateController(controller=target, scope=scope))  # type: ignore[arg-type]


def test_the_brokers_reach_the_new_controller_once_the_isolated_one_resigns() -> None:
    m = _model()
    m.apply(Produce(count=5))
    m.apply(Cut(links=isolation_links(0, "all", BROKERS)))
    m.apply(IsolateController(controller="active", scope="brokers"))
    assert m.fenced == {0, 1, 2} and m.part.leader is None
    m.apply(IsolateController(controller="active", scope="controllers"))
    assert m.active_controller == 1 and m.fenced == {0}
    assert m.part.leader == 1 and sorted(m.part.isr) == [1, 2] and m.part.elr == []


def test_two_controllers_cut_from_each_other_leave_no_quorum_and_freeze_the_metadata() -> None:
    m = _model()
    m.apply(Produce(count=5))
    m.apply(Cut(links=isolation_links(0, "all", BROKERS)))
    m.apply(IsolateController(controller="active", scope="brokers"))  # every broker fenced: no timing left
    m.apply(IsolateController(controller=1, scope="controllers"))
    assert m.active_controller == 0
    m.apply(IsolateController(controller=2, scope="controllers"))
    assert not m.has_quorum() and m.active_controller is None
    before = m.part.view()
    m.apply(Heal(links=((0, 1), (1, 0))))  # broker 0 back in touch with broker 1: nobody to unfence it
    assert m.part.view() == before and m.fenced == {0, 1, 2}
    m.apply(Heal(links=None))
    assert m.active_controller == 0 and not m.fenced and m.part.leader == 1


def test_a_partial_heal_of_the_controller_links_is_refused_while_a_controller_is_cut_from_the_brokers() -> None:
    m = _model()
    m.apply(IsolateController(controller="active", scope="brokers"))
    with pytest.raises(ModelError, match="heal: all ends its isolation"):
        m.apply(Heal(links=((0, "controller"), ("controller", 0))))


def test_the_python_api_isolates_the_active_controller() -> None:
    c = ClusterHandle(ModelBackend(), "kafka", ClusterSpec(BROKERS, controllers=3), TopicSpec("t", BROKERS, 2))
    c.isolate_controller(controller="active", from_="brokers")
    c.expect(active_controller=0, fenced=[0, 1, 2], leader=None)
    with pytest.raises(ScenarioError, match="expected one of brokers, controllers, all, got 'clients'"):
        c.isolate_controller(controller=1, from_="clients")


def test_the_isolation_scenario_passes_on_a_faithful_system(tmp_path: Path) -> None:
    result = run_scenario(load_scenario(ISOLATED), Fake(), "kafka", tmp_path)
    assert result.passed, result.message


def test_brokers_left_unfenced_by_an_isolated_controller_are_caught_by_the_comparison_and_the_expectation() -> None:
    result = run_scenario(load_scenario(ISOLATED), IsolatedControllerFencesNobody(), "kafka")
    assert not result.passed
    assert "step T1" in result.message
    assert "after isolate_controller, the system differs from the model in fenced: model [0, 1, 2], observed [0]" \
        in result.message
    assert "fenced: expected [0, 1, 2], observed [0]" in result.message


def test_an_isolated_controller_that_keeps_leading_is_caught_by_the_comparison_and_the_expectation() -> None:
    result = run_scenario(load_scenario(ISOLATED), IsolatedControllerKeepsLeading(), "kafka")
    assert not result.passed
    assert "step T2" in result.message
    assert "after isolate_controller, the system differs from the model in fenced: model [0], observed [0, 1, 2]" \
        in result.message
    assert "fenced: expected [0], observed [0, 1, 2]" in result.message


# --- shutdown_controller, power_off_controller ------------------------------------------------


@pytest.mark.parametrize("stop", [CrashController, ShutdownController, PowerOffController])
def test_a_stopped_active_controller_keeps_the_partition_and_its_restart_too(stop: type[StopController]) -> None:
    """The rule beside ``ModelCluster``'s handler: a clean stop, a crash and a power cut of one
    controller out of three change nothing committed -- a voter flushes before it acknowledges."""
    m = _model()
    _below_min_isr(m)
    before, epochs = m.part.view(), (m.part.leader_epoch, m.part.partition_epoch)
    m.apply(stop(controller="active"))
    assert m.has_quorum() and m.active_controller not in (None, 0) and m.controllers_down == {0}
    m.apply(RestartController(controller=0))
    assert m.controllers_down == set() and m.active_controller not in (None, 0)
    assert m.part.view() == before and (m.part.leader_epoch, m.part.partition_epoch) == epochs
    m.apply(Crash(broker=2))
    m.apply(Heal(links=None))
    assert m.part.leader == 1  # the ELR decision survived


@pytest.mark.parametrize("stop", [ShutdownController, PowerOffController])
def test_two_controllers_stopped_are_no_quorum(stop: type[StopController]) -> None:
    m = _model()
    m.apply(Produce(count=5))
    m.apply(stop(controller="active"))
    m.apply(stop(controller="active"))
    assert not m.has_quorum() and m.active_controller is None
    with pytest.raises(ModelError, match="no controller is active"):
        m.apply(stop(controller="active"))


def test_the_power_off_scenario_passes_on_a_faithful_system(tmp_path: Path) -> None:
    result = run_scenario(load_scenario(POWER_OFF), Fake(), "kafka", tmp_path)
    assert result.passed, result.message


def test_the_python_api_shuts_down_and_powers_off_controllers() -> None:
    c = ClusterHandle(ModelBackend(), "kafka", ClusterSpec(BROKERS, controllers=3), TopicSpec("t", BROKERS, 2))
    c.shutdown_controller("active")
    c.expect(active_controller="any", leader=0)
    c.power_off_controller(2)
    c.expect(active_controller="none")
    c.restart_controller("all")
    c.expect(active_controller="any", leader=0)
    assert c.verdict().lost_count == 0
    one = ClusterHandle(ModelBackend(), "kafka", ClusterSpec(BROKERS), TopicSpec("t", BROKERS, 2))
    with pytest.raises(ScenarioError, match="a power cut of a controller needs a quorum of three"):
        one.power_off_controller(0)


# --- a broker's links to one controller -------------------------------------------------------


def _between(broker: int, target: int | str) -> tuple[tuple[int | str, int | str], ...]:
    return ((broker, one_controller(target)), (one_controller(target), broker))


def test_a_broker_cut_from_the_active_controller_alone_is_fenced_and_the_next_one_unfences_it() -> None:
    m = _model()
    m.apply(Produce(count=5))
    m.apply(Cut(links=_between(1, "active")))
    assert m.active_controller == 0 and (1, "controller:0") in m.cut  # resolved when the step ran
    assert m.fenced == {1} and (m.part.leader, m.part.isr, m.part.elr) == (0, [0, 2], [])
    m.apply(CrashController(controller="active"))
    assert m.active_controller == 1 and (1, "controller:0") in m.cut  # the cut stays
    assert not m.fenced and (m.part.leader, sorted(m.part.isr), m.part.elr) == (0, [0, 1, 2], [])


@pytest.mark.parametrize("link", [(1, "controller:active"), ("controller:active", 1)], ids=["to", "from"])
def test_either_direction_of_the_link_to_the_active_controller_fences_the_broker(link: tuple) -> None:
    m = _model()
    m.apply(Cut(links=(link,)))
    assert m.fenced == {1}
    m.apply(Heal(links=(link,)))
    assert not m.fenced and sorted(m.part.isr) == [0, 1, 2]


@pytest.mark.parametrize("target", [1, 2])
def test_a_cut_from_a_controller_that_is_not_active_changes_nothing(target: int) -> None:
    m = _model()
    m.apply(Produce(count=5))
    before = m.part.view()
    m.apply(Cut(links=_between(1, target)))
    assert m.active_controller == 0 and not m.fenced and m.part.view() == before


def test_which_controller_leads_next_is_timing_when_one_is_cut_from_a_broker() -> None:
    """Broker 1 cut from controller 1, the active one (0) crashes: 1 or 2 may lead, and broker 1 is
    fenced under the first only; the oracle keeps both."""
    from pytest_elr.model.alternatives import outcomes
    m = _model()
    m.apply(Cut(links=_between(1, 1)))
    states = {(s.active_controller, tuple(sorted(s.fenced))) for s, _ in outcomes(m, CrashController(controller=0))}
    assert states == {(1, (1,)), (2, ())}


def test_a_heal_of_a_link_to_an_isolated_controller_is_refused() -> None:
    m = _model()
    m.apply(IsolateController(controller=1, scope="brokers"))
    with pytest.raises(ModelError, match="heal: all ends its isolation"):
        m.apply(Heal(links=_between(1, 1)))


def test_a_cut_from_one_controller_is_written_back_and_read_again(tmp_path: Path) -> None:
    cut = Cut(links=_between(1, "active"))
    assert cut.to_yaml(BROKERS) == [{"cut": {"from": 1, "to": {"controller": "active"}}},
                                    {"cut": {"from": {"controller": "active"}, "to": 1}}]
    scenario = load_scenario(CUT_FROM_ACTIVE)
    assert scenario.steps[1].actions[0] == cut


def test_the_python_api_cuts_a_broker_from_the_active_controller() -> None:
    c = ClusterHandle(ModelBackend(), "kafka", ClusterSpec(BROKERS, controllers=3), TopicSpec("t", BROKERS, 2))
    c.cut(between=[1, {"controller": "active"}])
    c.expect(fenced=[1], isr=[0, 2], elr=[])
    c.isolate(broker=2, from_={"controller": 1})  # not the active one: nothing changes
    c.expect(fenced=[1], isr=[0, 2])
    c.crash_controller("active")
    c.expect(fenced=[2], isr=[0, 1], active_controller=1)  # 1 leads, and broker 2 is cut from it
    with pytest.raises(ScenarioError, match="controller 3 is not in the cluster"):
        c.cut(between=[1, {"controller": 3}])
    assert c.verdict().lost_count == 0


def test_the_cut_from_the_active_controller_scenario_passes_on_a_faithful_system(tmp_path: Path) -> None:
    result = run_scenario(load_scenario(CUT_FROM_ACTIVE), Fake(), "kafka", tmp_path)
    assert result.passed, result.message


def test_a_cut_from_one_controller_that_never_bites_is_caught_by_the_comparison_and_the_expectation() -> None:
    result = run_scenario(load_scenario(CUT_FROM_ACTIVE), OneControllerCutIgnored(), "kafka")
    assert not result.passed
    assert "step cut" in result.message
    assert "after cut, the system differs from the model in fenced: model [1], observed []" in result.message
    assert "fenced: expected [1], observed []" in result.message


def test_a_cut_from_one_controller_that_cuts_every_controller_is_caught_after_the_failover() -> None:
    result = run_scenario(load_scenario(CUT_FROM_ACTIVE), OneControllerCutCutsThemAll(), "kafka")
    assert not result.passed
    assert "step failover" in result.message
    assert "after crash_controller, the system differs from the model in fenced: model [], observed [1]" \
        in result.message
    assert "fenced: expected [], observed [1]" in result.message


def test_a_heal_of_every_controller_heals_the_links_to_one_and_a_partial_heal_is_refused() -> None:
    m = _model()
    m.apply(Cut(links=_between(1, "active")))
    m.apply(Heal(links=isolation_links(1, "all", BROKERS)))  # heal: 1, as Kafka heals it: every controller's link
    assert not m.fenced and not m.cut
    m.apply(Cut(links=isolation_links(1, "controller", BROKERS)))
    with pytest.raises(ModelError, match="part of a cut from every controller"):
        m.apply(Heal(links=_between(1, 0)))


def test_the_report_names_a_link_to_one_controller() -> None:
    from pytest_elr.report.timeline import _link_label
    assert _link_label([[1, "controller:active"], ["controller:active", 1]]) == "1↔ctl active"
    assert _link_label([[1, "controller:0"]]) == "1↔ctl 0"
    assert _link_label([[1, "controller"]]) == "1↔ctl"


# --- a link between two controllers, slow to one controller ----------------------------------


def _voters(a: int, b: int) -> tuple[str, str]:
    return one_controller(a), one_controller(b)


def _quorum_unmoved_by(action: Cut | Slow) -> ModelCluster:
    """The model below min ISR after ``action`` on links between controllers, held to have kept
    controller 0 leading and the partition (its state and both epochs) untouched."""
    m = _model()
    _below_min_isr(m)
    before, epochs = m.part.view(), (m.part.leader_epoch, m.part.partition_epoch)
    m.apply(action)
    assert m.active_controller == 0 and m.has_quorum()
    assert m.part.view() == before and (m.part.leader_epoch, m.part.partition_epoch) == epochs
    return m


@pytest.mark.parametrize("links", [(_voters(0, 1),), (_voters(1, 0),), (_voters(0, 1), _voters(1, 0)),
                                   (_voters(1, 2),), (_voters(2, 1), _voters(1, 2))],
                         ids=["leader-to-follower", "follower-to-leader", "pair", "followers", "followers-pair"])
def test_a_cut_between_controllers_that_leaves_the_leader_a_majority_changes_nothing(links: tuple) -> None:
    """KIP-996: the follower that lost the leader asks for pre-votes, the one that still fetches
    from it refuses (FollowerState.canGrantVote); the leader keeps its majority's fetches."""
    m = _quorum_unmoved_by(Cut(links=links))
    m.apply(Crash(broker=2))  # the metadata still changes: the controller elects 1 from the ELR
    m.apply(Heal(links=isolation_links(1, "all", BROKERS)))
    assert m.part.leader == 1


@pytest.mark.parametrize("links", [(_voters(0, 1), _voters(0, 2)), (_voters(1, 0), _voters(0, 2)),
                                   (_voters(1, 0), _voters(2, 0)), (_voters(0, 1), _voters(1, 0), _voters(0, 2))],
                         ids=["to-both", "one-each-way", "from-both", "pair-and-one"])
def test_a_leader_that_loses_its_round_trips_with_a_majority_is_refused(links: tuple) -> None:
    """Measured on Kafka: the failover that follows fences brokers for a moment, which ones is timing."""
    m = _model()
    with pytest.raises(ModelError, match="keeps no round trip with a majority of the voters.*briefly fences brokers"):
        m.apply(Cut(links=links))


def test_without_a_leader_a_candidate_needs_a_round_trip_with_a_majority() -> None:
    """Controller 1's data to 2 is dropped, leader 0 crashes: neither 1 nor 2 hears a majority's
    answers to its (pre-)votes, so no one leads and the metadata is frozen until the link heals."""
    m = _model()
    m.apply(Produce(count=5))
    m.apply(Cut(links=(_voters(1, 2),)))
    assert m.active_controller == 0
    m.apply(CrashController(controller=0))
    assert m.active_controller is None and not m.has_quorum()
    m.apply(Crash(broker=0))
    assert m.part.leader == 0 and not m.fenced  # no controller to fence it
    m.apply(Heal(links=(_voters(1, 2),)))
    assert m.active_controller == 1 and m.fenced == {0} and m.part.leader == 1


def test_which_voter_wins_over_cut_links_is_timing() -> None:
    from pytest_elr.model.alternatives import outcomes
    m = _model()
    m.apply(Cut(links=(_voters(0, 1),)))
    assert {s.active_controller for s, _ in outcomes(m, CrashController(controller=0))} == {1, 2}


def test_a_cut_between_controllers_is_written_back_and_read_again(tmp_path: Path) -> None:
    cut = Cut(links=(_voters(0, 1),))
    assert cut.to_yaml(BROKERS) == [{"cut": {"from": {"controller": 0}, "to": {"controller": 1}}}]
    slow = Slow(links=((0, one_controller("active")),))
    assert slow.to_yaml(BROKERS) == [{"slow": {"from": 0, "to": {"controller": "active"}}}]
    doc = {"cluster": {"brokers": 3, "controllers": 3}, "topic": {"replicas": [0, 1, 2], "min_insync_replicas": 2},
           "steps": [{"at": "T0", "do": cut.to_yaml(BROKERS) + slow.to_yaml(BROKERS)}]}
    path = tmp_path / "back.elr.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert list(load_scenario(path).steps[0].actions) == [cut, slow]
    assert load_scenario(CONTROLLER_LINK).steps[2].actions[0] == cut


def test_slow_to_the_active_controller_holds_the_isr_change_and_to_another_nothing() -> None:
    """A broker sends AlterPartition to the active controller alone: a slow link to it holds the
    request, one to a follower holds nothing, and after a failover the request goes to the new one."""
    m = _model()
    m.apply(Slow(links=((0, one_controller(1)),)))
    m.apply(Cut(links=isolation_links(2, "brokers", BROKERS)))
    assert sorted(m.part.isr) == [0, 1] and m.held_alter(m.partition) == ()
    m = _model()
    m.apply(Slow(links=((0, one_controller("active")),)))
    assert (0, one_controller(0)) in m.slow  # resolved when the step ran
    m.apply(Cut(links=isolation_links(2, "brokers", BROKERS)))
    assert sorted(m.part.isr) == [0, 1, 2] and m.held_alter(m.partition) == (0,)
    m.apply(CrashController(controller="active"))
    assert m.active_controller == 1 and sorted(m.part.isr) == [0, 1] and m.held_alter(m.partition) == ()


@pytest.mark.parametrize("path", [CONTROLLER_LINK, SLOW_TO_ONE, HELD_SHRINK],
                         ids=["controller-link", "slow-to-one", "held-shrink"])
def test_the_controller_link_scenarios_pass_on_a_faithful_system(path: Path, tmp_path: Path) -> None:
    result = run_scenario(load_scenario(path), Fake(), "kafka", tmp_path)
    assert result.passed, result.message


def test_a_controller_link_cut_that_loses_the_quorum_is_caught_by_the_expectation() -> None:
    result = run_scenario(load_scenario(CONTROLLER_LINK), ControllerLinkCutLosesTheQuorum(), "kafka")
    assert not result.passed
    assert "step Q1" in result.message
    assert "active_controller: expected unchanged (0 at the previous step's end), observed none (no quorum leader)" \
        in result.message


def test_a_slow_link_to_one_controller_that_slows_them_all_is_caught_after_the_failover() -> None:
    result = run_scenario(load_scenario(SLOW_TO_ONE), SlowToOneControllerSlowsThemAll(), "kafka")
    assert not result.passed
    assert "step failover" in result.message
    assert "isr: expected [0, 1, 2], observed [0, 1]" in result.message


def test_a_controller_link_cut_that_moves_the_leader_is_caught_by_the_expectation() -> None:
    result = run_scenario(load_scenario(CONTROLLER_LINK), ControllerLinkCutMovesTheLeader(), "kafka")
    assert not result.passed
    assert "step Q1" in result.message
    assert "active_controller: expected unchanged (0 at the previous step's end), observed 1" in result.message


def test_a_held_shrink_is_staged_on_a_leader_that_drops_only_a_follower_behind_it(tmp_path: Path) -> None:
    """The executor nudges records while the model holds a leader's request to drop a follower the
    system still has in sync: a Kafka leader sends that request only once the follower is behind."""
    system = AsksToDropOnlyABehindFollower()
    result = run_scenario(load_scenario(HELD_SHRINK), system, "kafka", tmp_path)
    assert result.passed, result.message
    assert system.nudges > 0


def test_without_the_nudge_for_a_held_drop_the_held_shrink_is_never_sent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted executor: no records while the model holds the drop (the nudge's second reason
    removed). The request is never sent, and the step's ``held`` tells."""
    monkeypatch.setattr(Executor, "_drop_needs_records", lambda self, obs: set())
    monkeypatch.setattr(executor, "time", Clock())  # the step's wait for the held request is counted, not timed
    result = run_scenario(load_scenario(HELD_SHRINK), AsksToDropOnlyABehindFollower(), "kafka", tmp_path)
    assert not result.passed
    assert "step held" in result.message
    assert "held: model [0], observed []" in result.message


# --- a slowed link between two controllers: a cut to the quorum's timers -----------------------


@pytest.mark.parametrize("links", [(_voters(0, 1),), (_voters(1, 0),), (_voters(1, 2), _voters(2, 1)),
                                   (_voters(2, 0), _voters(0, 2), _voters(2, 1), _voters(1, 2))],
                         ids=["leader-to-follower", "follower-to-leader", "followers-pair", "one-slowed-from-both"])
def test_a_slowed_link_that_leaves_the_leader_a_majority_changes_nothing(links: tuple) -> None:
    """Measured on Kafka 4.4.0 (docs/probes/slow_between_controllers.py): A->B, B->A and B<->C at
    5000 ms, 20 s each: the same leader, no broker fenced, the partition untouched."""
    _quorum_unmoved_by(Slow(links=links))


def test_a_leader_slowed_from_its_majority_is_refused_as_over_cuts() -> None:
    """Measured: A->B and A->C slowed, five rounds: another leads 4.9-7.0 s later, and in three of
    them brokers were fenced for a moment on the way (epoch 0 -> 2, ISR [0] -> [0, 1, 2])."""
    m = _model()
    with pytest.raises(ModelError, match="majority of the voters over the links between controllers .cut or slowed."):
        m.apply(Slow(links=(_voters(0, 1), _voters(0, 2))))


def test_two_voters_with_only_a_slowed_link_between_them_elect_no_one_until_it_heals() -> None:
    """Measured: B<->C slowed, A crashed: no quorum leader for 20 s (two rounds)."""
    m = _model()
    m.apply(Slow(links=(_voters(1, 2), _voters(2, 1))))
    m.apply(CrashController(controller=0))
    assert m.active_controller is None and not m.has_quorum()
    m.apply(Crash(broker=2))
    assert not m.fenced and m.part.isr == [0, 1, 2]
    m.apply(Heal(links=(_voters(1, 2), _voters(2, 1))))
    assert m.active_controller in (1, 2) and m.fenced == {2} and m.part.isr == [0, 1]


def test_the_slowed_quorum_scenario_passes_a_faithful_system_and_catches_a_slow_taken_as_in_time(
        tmp_path: Path) -> None:
    scenario = load_scenario(SLOWED_FROM_QUORUM)
    assert run_scenario(scenario, Fake(), "kafka", tmp_path).passed
    result = run_scenario(scenario, SlowBetweenControllersIgnored(), "kafka", tmp_path)
    assert not result.passed
    assert "step active-crashes" in result.message
    assert "active_controller: expected none (no quorum leader), observed 1" in result.message, result.message
