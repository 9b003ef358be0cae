"""The structured scenario fuzzer (run by tests/test_fuzz_scenarios.py under memory and time caps).

Hypothesis writes scenario documents of the right shape with hostile values -- huge, negative,
of the wrong type, unicode and control characters, impossible sequences -- and each one is
loaded and, when it loads, run on the model backend under every profile it names. Every outcome
must be a pass, a scenario failure, or a ScenarioError naming file and line: never another
exception, never over the caps.
"""

from __future__ import annotations

import os
import time
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_elr.backends.model import ModelBackend
from pytest_elr.checker import inline_checker
from pytest_elr.core.errors import ScenarioError
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import parse_scenario

EXAMPLES = int(os.environ.get("ELR_FUZZ_EXAMPLES", "2000"))
MAX_SECONDS_PER_EXAMPLE = 10.0

HUGE = st.sampled_from([10**30, -(10**30), 2**63, -1, 0, 1e30, float("inf"), float("nan"), 99999999999999999999])
WEIRD_TEXT = st.sampled_from(["", "~", "none", "None", "no", "010", "0b_", "1__", "1:30", "2024-01-01", "1e30",
                              "\x1b[31mred", "a\nb", "../../etc", "/abs/path", "ζ∆√", "x" * 300, "!!python/none"])
HOSTILE = st.one_of(HUGE, WEIRD_TEXT, st.text(max_size=20), st.booleans(), st.none(),
                    st.lists(st.integers(), max_size=3),
                    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))


PRINTABLE = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=30)


def mostly(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The valid value nine times in ten, a hostile one otherwise: scenarios get far enough to run."""
    return st.sampled_from(range(12)).flatmap(lambda i: HOSTILE if i == 7 else valid)


BROKER = mostly(st.integers(0, 2))
BROKERS = st.one_of(BROKER, st.lists(BROKER, min_size=1, max_size=3))
NODE = st.one_of(BROKER, st.just("controller"))
LINKS = mostly(st.one_of(
    st.fixed_dictionaries({"from": NODE, "to": NODE}),
    st.fixed_dictionaries({"between": st.lists(NODE, min_size=2, max_size=3)}),
))
DURATION = mostly(st.sampled_from(["1s", "500ms", "2m", "0s", "11m", "99999999999999999999999m", "-1s", "1h"]))
BROKER_KINDS = ["shutdown", "crash", "restart", "replace_disk", "pause", "resume", "flush", "power_off"]
ACTION = st.one_of(
    st.fixed_dictionaries({"isolate": st.one_of(BROKERS, st.fixed_dictionaries(
        {"broker": BROKER, "from": mostly(st.sampled_from(["all", "brokers", "controller"]))}))}),
    st.fixed_dictionaries({"cut": LINKS}),
    st.fixed_dictionaries({"slow": st.one_of(BROKERS, LINKS)}),
    st.fixed_dictionaries({"heal": st.one_of(st.just("all"), BROKERS, LINKS)}),
    st.dictionaries(st.sampled_from(BROKER_KINDS), BROKERS, min_size=1, max_size=1),
    st.fixed_dictionaries({"produce": mostly(st.one_of(st.integers(1, 50), st.fixed_dictionaries(
        {"count": mostly(st.integers(1, 50)), "acks": mostly(st.sampled_from(["all", "1", "0"]))})))}),
    st.fixed_dictionaries({"set_min_isr": mostly(st.integers(1, 4))}),
    st.fixed_dictionaries({"wait": DURATION}),
    mostly(st.dictionaries(st.text(max_size=8), HOSTILE, min_size=1, max_size=1)),
)
BROKER_SET = st.lists(BROKER, max_size=3, unique_by=str)
EXPECT = st.fixed_dictionaries({}, optional={
    "leader": mostly(st.one_of(st.integers(0, 2), st.just("none"))),
    "isr": BROKER_SET, "elr": BROKER_SET, "last_known_elr": BROKER_SET, "fenced": BROKER_SET,
    "hwm": mostly(st.one_of(st.integers(0, 100), st.sampled_from(["advanced", "frozen"]))),
    "produce": mostly(st.fixed_dictionaries({}, optional={
        "acked": mostly(st.integers(0, 50)), "rejected": mostly(st.just("NOT_ENOUGH_REPLICAS"))})),
    "recovering": mostly(st.booleans()),
    "lost": BROKER_SET,
})
STEP = st.fixed_dictionaries(
    {"at": mostly(st.from_regex(r"T[0-9]{1,3}", fullmatch=True))},
    optional={"do": st.lists(ACTION, max_size=4), "expect": st.one_of(EXPECT, st.just("model")),
              "timeout": DURATION, "note": mostly(PRINTABLE)},
)
DOC = st.fixed_dictionaries(
    {
        "cluster": st.fixed_dictionaries({"brokers": mostly(st.just(3))},
                                         optional={"controllers": mostly(st.just(1)),
                                                   "session_timeout_ms": mostly(st.integers(1000, 120000))}),
        "topic": st.fixed_dictionaries({"replicas": mostly(st.just([0, 1, 2])),
                                        "min_insync_replicas": mostly(st.integers(1, 3))},
                                       optional={"name": mostly(st.from_regex(r"[a-z]{1,8}", fullmatch=True)),
                                                 "unclean_recovery": mostly(st.sampled_from(["none", "balanced"]))}),
        "steps": st.lists(STEP, min_size=1, max_size=6, unique_by=lambda s: str(s.get("at"))),
    },
    optional={
        "name": mostly(PRINTABLE),
        "profiles": mostly(st.lists(st.sampled_from(["kip966", "kafka", "legacy"]), min_size=1, max_size=3,
                                    unique=True)),
        "workload": st.fixed_dictionaries({}, optional={"acks": mostly(st.just("all")),
                                                        "rate_per_s": mostly(st.floats(1, 1000)),
                                                        "per_step": mostly(st.integers(0, 20))}),
        "verdict": st.fixed_dictionaries({}, optional={"acked_loss": mostly(st.sampled_from(["none", "found"]))}),
        "finale": mostly(st.booleans()),
    },
)


def outcome(doc: dict[str, Any]) -> str:
    text = yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)
    try:
        scenario = parse_scenario(text, "fuzz.elr.yaml")
    except ScenarioError as exc:
        assert exc.path == "fuzz.elr.yaml", exc
        assert exc.line is not None and exc.line >= 1, f"no line: {exc}"
        return "refused"
    for profile in scenario.profiles:
        run_scenario(scenario, ModelBackend(), profile, None, inline_checker)  # passes or fails, cleanly
    return "ran"


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(DOC)
def test_every_hostile_scenario_is_refused_or_runs_cleanly(doc: dict[str, Any]) -> None:
    started = time.monotonic()
    outcome(doc)
    assert time.monotonic() - started < MAX_SECONDS_PER_EXAMPLE, "over the time cap"
