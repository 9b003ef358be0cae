"""Bad scenario files: a clear error with file, line and what was expected -- never a traceback."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_elr.core.errors import ScenarioError
from pytest_elr.scenario.loader import load_scenario, parse_scenario

GOOD = """\
cluster: {brokers: 3}
topic: {replicas: [0, 1, 2], min_insync_replicas: 2}
steps:
  - at: T0
    do: [{isolate: 0}]
    expect: {leader: 1}
"""

CASES = {
    "unknown action": (GOOD.replace("isolate: 0", "explode: 0"), 5, "unknown key 'explode'"),
    "unknown field": (GOOD.replace("min_insync_replicas: 2", "min_insync_replicas: 2, colour: red"), 2, "unknown key 'colour'"),
    "wrong type": (GOOD.replace("brokers: 3", "brokers: three"), 1, "expected a whole number"),
    "unknown broker": (GOOD.replace("isolate: 0", "isolate: 7"), 5, "unknown broker id 7"),
    "unknown leader": (GOOD.replace("leader: 1", "leader: 9"), 6, "unknown broker id 9"),
    "assignment larger than cluster": (GOOD.replace("[0, 1, 2]", "[0, 1, 2, 3]"), 2, "unknown broker id 3"),
    "min isr zero": (GOOD.replace("min_insync_replicas: 2", "min_insync_replicas: 0"), 2, "expected a number from 1 to 99"),
    "duplicate key": (GOOD.replace("cluster: {brokers: 3}", "cluster: {brokers: 3, brokers: 4}"), 1, "duplicate key 'brokers'"),
    "empty file": ("", 1, "empty file"),
    "tabs": (GOOD.replace("  - at: T0", "\t- at: T0"), 4, "tab used for indentation"),
    "step without label": (GOOD.replace("  - at: T0\n    do", "  - do"), 4, "missing its label 'at'"),
    "python object tag": (GOOD.replace("brokers: 3", "brokers: !!python/object/apply:os.system ['true']"), 1, "is not allowed"),
    "duplicate step label": (GOOD + "  - at: T0\n", 7, "step 'T0' already defined at line 4"),
    "bad duration": (GOOD.replace("expect:", "timeout: soon\n    expect:"), 6, "expected a duration"),
    "one action per item": (GOOD.replace("{isolate: 0}", "{isolate: 0, crash: 1}"), 5, "one action per list item"),
    "not a mapping": ("- just\n- a list\n", 1, "expected a mapping"),
    "bad hwm": (GOOD.replace("leader: 1", "hwm: upwards"), 6, "expected advanced, frozen or an offset"),
    "negative elr_elections": (GOOD.replace("{leader: 1}", "{leader: 1,\n             elr_elections: -1}"), 7,
                               "elr_elections: expected a number from 0 to 10000, got -1"),
    "elr_elections a word": (GOOD.replace("leader: 1", "elr_elections: one"), 6,
                             "elr_elections: expected a whole number, got 'one'"),
    "unclean_election without enabled": (GOOD.replace("isolate: 0", "unclean_election: {elect: false}"), 5,
                                         "missing 'enabled' (true or false)"),
    "unclean_election elect a word": (GOOD.replace("isolate: 0", "unclean_election: {enabled: true, elect: no way}"),
                                      5, "elect: expected true or false, got 'no way'"),
    "unclean_election unknown key": (GOOD.replace("isolate: 0", "unclean_election: {enabled: true, now: false}"), 5,
                                     "unknown key 'now'"),
    "unclean_elections too many": (GOOD.replace("leader: 1", "unclean_elections: 10001"), 6,
                                   "unclean_elections: expected a number from 0 to 10000, got 10001"),
    "too many controllers": (GOOD.replace("brokers: 3", "brokers: 3, controllers: 2"), 1, "expected 1 or 3"),
    "controller to controller": (GOOD.replace("{isolate: 0}", "{cut: {from: controller, to: controller}}"), 5, "names no link"),
    "unknown election": (GOOD.replace("{isolate: 0}", "{elect_leaders: unclean}"), 5,
                         "step T0: elect_leaders: expected one of preferred, got 'unclean'"),
    "unknown profile": (GOOD + "profiles: [zookeeper]\n", 7, "expected one of kip966, kafka, legacy"),
    "session timeout too short": (GOOD.replace("brokers: 3", "brokers: 3, session_timeout_ms: 10"), 1, "expected a number from 1000 to 120000"),
    "session timeout too long": (GOOD.replace("brokers: 3", "brokers: 3, session_timeout_ms: 999999"), 1, "expected a number from 1000 to 120000"),
    "no log dirs": (GOOD.replace("brokers: 3", "brokers: 3, log_dirs: 0"), 1, "cluster.log_dirs: expected a number from 1 to 4"),
    "too many log dirs": (GOOD.replace("brokers: 3", "brokers: 3, log_dirs: 5"), 1, "cluster.log_dirs: expected a number from 1 to 4"),
    "move with one log dir": (GOOD.replace("isolate: 0", "move_log_dir: 1"), 5,
                              "step T0: move_log_dir: the brokers have 1 log dir each; give the cluster 2 (cluster: {log_dirs: 2})"),
    "move of a stopped broker": (GOOD.replace("brokers: 3", "brokers: 3, log_dirs: 2").replace(
        "{isolate: 0}", "{crash: 1}, {move_log_dir: 1}"), 5, "broker 1 is stopped at this point, the action needs it running"),
    "unknown backend": (GOOD + "backends: {only: [zookeeper], why: x}\n", 7, "backends.only: expected one of"),
    "backends without reason": (GOOD + "backends: {only: [model]}\n", 7, "backends: expected {only:"),
    "held names an unknown broker": (GOOD.replace("leader: 1", "held: [5]"), 6, "unknown broker id 5"),
    "reassign to one broker, not a list": (GOOD.replace("isolate: 0", "reassign: 1"), 5,
                                           "step T0: reassign: expected the target replica list"),
    "reassign to no replica": (GOOD.replace("isolate: 0", "reassign: []"), 5,
                               "step T0: reassign: expected at least one replica"),
    "reassign to a broker twice": (GOOD.replace("isolate: 0", "reassign: [1, 2, 1]"), 5,
                                   "step T0: reassign: broker 1 is listed twice"),
    "reassign to an unknown broker": (GOOD.replace("isolate: 0", "reassign: [1, 2, 3]"), 5, "unknown broker id 3"),
    "cancel reassignment false": (GOOD.replace("isolate: 0", "cancel_reassignment: false"), 5,
                                  "step T0: cancel_reassignment: expected true"),
    "replicas names an unknown broker": (GOOD.replace("leader: 1", "replicas: [0, 7]"), 6, "unknown broker id 7"),
    # --- hostile input (issue 13): limits, YAML 1.1 numbers, impossible sequences, helpful messages
    "huge produce": (GOOD.replace("isolate: 0", "produce: 100000000"), 5, "expected a number from 1 to 10000"),
    "too many records in all": (GOOD.replace("do: [{isolate: 0}]", "do: [" + ", ".join(["{produce: 10000}"] * 11) + "]"), 4, "more than 100000 records"),
    "huge wait": (GOOD.replace("isolate: 0", "wait: 99999999999999999999999m"), 5, "expected a duration"),
    "long wait": (GOOD.replace("isolate: 0", "wait: 11m"), 5, "at most 600s"),
    "huge latency": (GOOD.replace("isolate: 0", "slow: {from: 0, to: 1, ms: 1e30}"), 5, "expected a whole number"),
    "latency too long": (GOOD.replace("isolate: 0", "slow: {from: 0, to: 1, ms: 999999}"), 5, "from 1 to 120000"),
    "timeout zero": (GOOD.replace("expect:", "timeout: 0s\n    expect:"), 6, "expected more than 0"),
    "octal-looking count": (GOOD.replace("brokers: 3", "brokers: 010"), 1, "expected a whole number"),
    "binary count": (GOOD.replace("brokers: 3", "brokers: 0b_"), 1, "expected a whole number"),
    "underscored count": (GOOD.replace("brokers: 3", "brokers: 1__"), 1, "expected a whole number"),
    "base-60 count": (GOOD.replace("brokers: 3", "brokers: 1:30"), 1, "expected a whole number"),
    "huge broker count": (GOOD.replace("brokers: 3", "brokers: 1000000000000000000000000000000"), 1, "from 1 to 9"),
    "quoted number": (GOOD.replace("min_insync_replicas: 2", 'min_insync_replicas: "2"'), 2, "quoted: write it without quotes"),
    "deep nesting": ("cluster: " + "[" * 200 + "]" * 200 + "\n", 1, "nested more than 32 levels"),
    "null label": (GOOD.replace("at: T0", "at: ~"), 4, "expected a name"),
    "date label": (GOOD.replace("at: T0", "at: 2024-01-01"), 4, "reads as a YAML timestamp; quote it"),
    "name with a newline": ("name: \"a\\nb\"\n" + GOOD, 1, "expected one line"),
    "name with an escape code": ("name: \"a\\x1b[31mred\"\n" + GOOD, 1, "control characters are not allowed"),
    "profile listed twice": (GOOD + "profiles: [kafka, kafka]\n", 7, "'kafka' is listed twice"),
    "restart a running broker": (GOOD.replace("{isolate: 0}", "{restart: 1}"), 5, "broker 1 is running at this point"),
    "crash twice": (GOOD.replace("{isolate: 0}", "{crash: 1}, {crash: 1}"), 5, "broker 1 is stopped at this point"),
    "power off a stopped broker": (GOOD.replace("{isolate: 0}", "{shutdown: 2}, {power_off: 2}"), 5, "broker 2 is stopped"),
    "crash a broker shutting down": (GOOD.replace("{isolate: 0}", "{begin_shutdown: 2}, {crash: 2}"), 5,
                                    "broker 2 is stopped"),
    "resume a running broker": (GOOD.replace("{isolate: 0}", "{resume: 1}"), 5, "broker 1 is running at this point, the action needs it paused"),
    "pause twice": (GOOD.replace("{isolate: 0}", "{pause: 1}, {pause: 1}"), 5, "broker 1 is paused at this point"),
    "misspelt rejection": (GOOD.replace("leader: 1", "produce: {rejected: NOT_ENUGH_REPLICAS}"), 6, "did you mean 'NOT_ENOUGH_REPLICAS'"),
    "leader None": (GOOD.replace("leader: 1", "leader: None"), 6, "expected a broker id, none (no leader) or preferred"),
    "leader no": (GOOD.replace("leader: 1", "leader: no"), 6, "expected a broker id, none (no leader) or preferred"),
    "key typo": (GOOD.replace("leader: 1", "leadr: 1"), 6, "did you mean 'leader'"),
    "action typo": (GOOD.replace("isolate: 0", "isolat: 0"), 5, "did you mean 'isolate'"),
    "no replicas": (GOOD.replace("replicas: [0, 1, 2]", "replicas: []"), 2, "expected at least one replica"),
    "hwm typo": (GOOD.replace("leader: 1", "hwm: frozn"), 6, "did you mean 'frozen'"),
    "cluster min isr zero": (GOOD.replace("isolate: 0", "set_cluster_min_isr: 0"), 5, "expected a number from 1 to 99"),
    "cluster min isr too large": (GOOD.replace("isolate: 0", "set_cluster_min_isr: 100"), 5, "expected a number from 1 to 99"),
    "cluster min isr not a number": (GOOD.replace("isolate: 0", "set_cluster_min_isr: all"), 5, "expected a whole number"),
    "cluster min isr typo": (GOOD.replace("isolate: 0", "set_cluster_min_ist: 2"), 5, "did you mean 'set_cluster_min_isr'"),
    # --- controllers as fault targets (issue 27 item 2)
    "the only controller's number out of range": (GOOD.replace("isolate: 0", "crash_controller: 1"), 5,
        "step T0: crash_controller: controller 1 is not in the cluster: it has 1 controller (0..0; "
        "cluster: {controllers: 3} for more)"),
    "controller out of range": (GOOD.replace("brokers: 3", "brokers: 3, controllers: 3").replace(
        "isolate: 0", "restart_controller: 3"), 5, "controller 3 is not in the cluster: it has 3 controllers (0..2"),
    "crash a controller by a word it does not take": (GOOD.replace("isolate: 0", "crash_controller: leader"), 5,
        "step T0: crash_controller: expected a controller number or active, got 'leader'"),
    "restart the active controller": (GOOD.replace("isolate: 0", "restart_controller: active"), 5,
        "expected a controller number or all, got 'active'"),
    "negative controller": (GOOD.replace("isolate: 0", "crash_controller: -1"), 5, "expected a number"),
    "active controller out of range": (GOOD.replace("leader: 1", "active_controller: 1"), 6,
        "step T0: expect.active_controller: controller 1 is not in the cluster: it has 1 controller (0..0)"),
    "active controller word": (GOOD.replace("leader: 1", "active_controller: some"), 6,
        "expected a controller number, any, unchanged or none (no quorum), got 'some'"),
    "isolate a controller from an unknown group": (GOOD.replace(
        "isolate: 0", "isolate_controller: {controller: active, from: clients}"), 5,
        "step T0: isolate_controller.from: expected one of brokers, controllers, all, got 'clients'"),
    "isolate a controller without naming it": (GOOD.replace("isolate: 0", "isolate_controller: {from: brokers}"), 5,
        "step T0: isolate_controller: missing 'controller' (a number or active)"),
    "isolate a controller by a word it does not take": (GOOD.replace("isolate: 0", "isolate_controller: all"), 5,
        "step T0: isolate_controller: expected a controller number or active, got 'all'"),
    "isolate a controller out of range": (GOOD.replace("brokers: 3", "brokers: 3, controllers: 3").replace(
        "isolate: 0", "isolate_controller: {controller: 3, from: all}"), 5,
        "step T0: isolate_controller: controller 3 is not in the cluster: it has 3 controllers (0..2"),
    "isolate the only controller from the controllers": (GOOD.replace(
        "isolate: 0", "isolate_controller: {controller: 0, from: controllers}"), 5,
        "step T0: isolate_controller: a single controller has no other controller to be cut from"),
    "shut down the only controller's number out of range": (GOOD.replace("isolate: 0", "shutdown_controller: 1"), 5,
        "step T0: shutdown_controller: controller 1 is not in the cluster: it has 1 controller (0..0; "
        "cluster: {controllers: 3} for more)"),
    "power off the only controller's number out of range": (GOOD.replace("isolate: 0", "power_off_controller: 1"),
        5, "step T0: power_off_controller: controller 1 is not in the cluster: it has 1 controller (0..0; "
        "cluster: {controllers: 3} for more)"),
    "power off the only controller": (GOOD.replace("isolate: 0", "power_off_controller: active"), 5,
        "step T0: power_off_controller: a power cut of a controller needs a quorum of three "
        "(cluster: {controllers: 3})"),
    "power off a controller out of range": (GOOD.replace("brokers: 3", "brokers: 3, controllers: 3").replace(
        "isolate: 0", "power_off_controller: 3"), 5,
        "step T0: power_off_controller: controller 3 is not in the cluster: it has 3 controllers (0..2"),
    "shut down a controller by a word it does not take": (GOOD.replace("isolate: 0", "shutdown_controller: all"), 5,
        "step T0: shutdown_controller: expected a controller number or active, got 'all'"),
    # --- a link to one controller (issue 27 item 2)
    "cut from one controller of one": (GOOD.replace("isolate: 0", "cut: {between: [1, {controller: active}]}"), 5,
        "step T0: cut: the cluster has one controller: name it controller (e.g. cut: {between: [1, controller]}); "
        "{controller: active} names one of several (cluster: {controllers: 3})"),
    "cut from a controller out of range": (GOOD.replace("brokers: 3", "brokers: 3, controllers: 3").replace(
        "isolate: 0", "cut: {from: 1, to: {controller: 3}}"), 5,
        "step T0: cut: controller 3 is not in the cluster: it has 3 controllers (0..2)"),
    "heal a controller out of range": (GOOD.replace("brokers: 3", "brokers: 3, controllers: 3").replace(
        "isolate: 0", "heal: {between: [1, {controller: 7}]}"), 5,
        "step T0: heal: controller 7 is not in the cluster: it has 3 controllers (0..2)"),
    "isolate from a controller out of range": (GOOD.replace("brokers: 3", "brokers: 3, controllers: 3").replace(
        "isolate: 0", "isolate: {broker: 1, from: {controller: 3}}"), 5,
        "step T0: cut: controller 3 is not in the cluster: it has 3 controllers (0..2)"),
    "cut from a controller by a word it does not take": (GOOD.replace(
        "isolate: 0", "cut: {between: [1, {controller: leader}]}"), 5,
        "step T0: cut.between.controller: expected a controller number or active, got 'leader'"),
    "cut from a controller named by another key": (GOOD.replace(
        "isolate: 0", "cut: {between: [1, {contoller: 0}]}"), 5, "unknown key 'contoller'"),
    # --- a link between two controllers, slow to one controller (issue 27 item 2)
    "cut every controller from one controller": (GOOD.replace("brokers: 3", "brokers: 3, controllers: 3").replace(
        "isolate: 0", "cut: {from: controller, to: {controller: 1}}"), 5,
        "step T0: cut: a link between two controllers names each one, {controller: n} (controller is every "
        "controller; isolate_controller cuts one from all the others)"),
    "cut the active controller from a controller": (GOOD.replace("brokers: 3", "brokers: 3, controllers: 3").replace(
        "isolate: 0", "cut: {from: {controller: active}, to: {controller: 1}}"), 5,
        "step T0: cut: a link between two controllers names both by number, {controller: n}: which one is active "
        "is timing on Kafka, so {controller: active} may be the other end"),
    "cut between a controller and itself": (GOOD.replace("brokers: 3", "brokers: 3, controllers: 3").replace(
        "isolate: 0", "cut: {from: {controller: 1}, to: {controller: 1}}"), 5,
        "step T0: cut: names no link between two different nodes"),
    "cut between controllers out of range": (GOOD.replace("brokers: 3", "brokers: 3, controllers: 3").replace(
        "isolate: 0", "cut: {between: [{controller: 0}, {controller: 3}]}"), 5,
        "step T0: cut: controller 3 is not in the cluster: it has 3 controllers (0..2)"),
    "cut between controllers of one": (GOOD.replace(
        "isolate: 0", "cut: {from: {controller: 0}, to: {controller: 1}}"), 5,
        "step T0: cut: the cluster has one controller"),
    "slow between two controllers, shorter than measured": (GOOD.replace("brokers: 3", "brokers: 3, controllers: 3")
        .replace("isolate: 0", "slow: {from: {controller: 0}, to: {controller: 1}, ms: 1000}"), 5,
        "step T0: slow.ms: a slowed link between two controllers is measured at 5000 ms and more (beyond the "
        "quorum's fetch timeout, 2 s, and its leader's check, 3 s), got 1000: a shorter delay is not measured"),
    "slow between two controllers, one by its role": (GOOD.replace("brokers: 3", "brokers: 3, controllers: 3")
        .replace("isolate: 0", "slow: {from: {controller: 0}, to: {controller: active}}"), 5,
        "step T0: slow: a link between two controllers names both by number, {controller: n}: which one is active "
        "is timing on Kafka, so {controller: active} may be the other end"),
    "slow from one controller to a broker": (GOOD.replace("brokers: 3", "brokers: 3, controllers: 3").replace(
        "isolate: 0", "slow: {from: {controller: 0}, to: 1}"), 5,
        "step T0: slow: slow holds a broker's requests to a controller: name the broker in from and the controller "
        "in to"),
    "slow to a controller out of range": (GOOD.replace("brokers: 3", "brokers: 3, controllers: 3").replace(
        "isolate: 0", "slow: {from: 1, to: {controller: 5}}"), 5,
        "step T0: slow: controller 5 is not in the cluster: it has 3 controllers (0..2)"),
    "slow to one controller of one": (GOOD.replace("isolate: 0", "slow: {from: 1, to: {controller: 0}}"), 5,
        "step T0: slow: the cluster has one controller: name it controller"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_scenario_names_file_line_and_expectation(case: str, tmp_path: Path) -> None:
    text, line, fragment = CASES[case]
    path = tmp_path / "bad.elr.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    err = info.value
    assert err.path == str(path)
    assert err.line == line, str(err)
    assert fragment in err.message, str(err)
    assert str(err).startswith(f"{path}:{line}: ")


def test_yaml_bomb_is_refused_not_expanded() -> None:
    # Each level repeats the previous one 8 times: 8**7 actions if expanded.
    levels = "".join(
        f"  - at: T{i}\n    do: &l{i + 1} [" + ", ".join([f"*l{i}"] * 8) + "]\n" for i in range(1, 8)
    )
    text = (
        "cluster: {brokers: 3}\n"
        "topic: {replicas: [0, 1, 2], min_insync_replicas: 2}\n"
        "steps:\n"
        "  - at: T0\n"
        "    do: &l1 [{produce: 1}, {produce: 1}]\n" + levels
    )
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "bomb.elr.yaml")
    assert info.value.line == 5  # refused at the first nested alias, never expanded


def test_documents_with_too_many_values_are_refused() -> None:
    many = ", ".join(["{produce: 1}"] * 25_000)
    text = (
        "cluster: {brokers: 3}\ntopic: {replicas: [0, 1, 2], min_insync_replicas: 2}\n"
        f"steps:\n  - at: T0\n    do: [{many}]\n"
    )
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "wide.elr.yaml")
    assert "too large" in info.value.message


VOCAB = ["cluster", "topic", "steps", "brokers", "replicas", "min_insync_replicas", "at", "do",
         "expect", "leader", "isr", "elr", "produce", "isolate", "cut", "from", "to", "heal",
         "power_off", "verdict", "acked_loss", "by_profile", "kafka", "legacy", "count", "acks"]
scalars = st.one_of(st.integers(-3, 12), st.sampled_from(VOCAB + ["all", "none", "controller"]),
                    st.booleans(), st.none(), st.text(max_size=5))
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(VOCAB), inner, max_size=4)),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(documents)
def test_loader_raises_only_scenario_errors(doc: object) -> None:
    text = yaml.safe_dump(doc)
    with contextlib.suppress(ScenarioError):
        parse_scenario(text, "fuzz.elr.yaml")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_loader_survives_arbitrary_text(text: str) -> None:
    with contextlib.suppress(ScenarioError):
        parse_scenario(text, "fuzz.elr.yaml")
