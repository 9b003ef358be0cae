"""Hostile input from the Python API and the command line: a clear error naming the caller's line
(or a usage error before any test runs) -- never a traceback, never a silent acceptance."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

# (call inside a test, the error fragment the caller's line must carry)
API_MISUSE = {
    "unknown expectation key": ("c.expect(leadr=0)", "unknown key 'leadr' (did you mean 'leader'?)"),
    "misspelt hwm word": ('c.expect(hwm="frozn")', "did you mean 'frozen'?"),
    "negative produce": ("c.produce(-5)", "produce.count: expected a number from 1 to 10000, got -5"),
    "unknown broker": ("c.crash(7)", "unknown broker id 7; the cluster has brokers 0, 1, 2"),
    "unknown action": ("c.isolat(0)", "unknown action 'isolat' (did you mean 'isolate'?)"),
    "restart a running broker": ("c.restart(1)", "broker 1 is running at this point"),
    "crash twice": ("c.crash(1); c.crash(1)", "broker 1 is stopped at this point"),
    "too many brokers": ("elr_cluster(brokers=100)", "cluster.brokers: expected a number from 1 to 9, got 100"),
    "repeated replica": ("elr_cluster(brokers=3, replicas=[0, 0, 1])", "a broker can hold only one replica"),
    "min isr zero": ("elr_cluster(brokers=3, min_insync_replicas=0)", "expected a number from 1 to 99, got 0"),
    "two controllers": ("elr_cluster(brokers=3, controllers=2)", "expected 1 or 3, got 2"),
    "zero timeout": ("c.expect(timeout=0, leader=0)", "timeout must be more than 0"),
}


@pytest.mark.parametrize("case", sorted(API_MISUSE))
def test_python_api_misuse_names_the_callers_line(case: str, pytester: pytest.Pytester) -> None:
    call, fragment = API_MISUSE[case]
    pytester.makepyfile(test_misuse=f"""
        def test_it(elr_cluster):
            c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2)
            {call}
    """)
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert fragment in out, out
    assert "test_misuse.py:3:" in out, out  # the line of the call in the user's test
    assert "Traceback" not in out and "pytest_elr/" not in out, out


def test_python_api_leader_none_on_a_leaderless_partition(pytester: pytest.Pytester) -> None:
    """`leader="none"` (as YAML spells it) and `leader=None` both mean no leader."""
    pytester.makepyfile(test_none="""
        def test_it(elr_cluster):
            c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2)
            c.isolate(0); c.isolate(1); c.isolate(2)
            c.expect(leader="none")
            c.expect(leader=None)
    """)
    pytester.runpytest("--elr-backend=model", "--elr-checker=inline").assert_outcomes(passed=1)


@pytest.mark.parametrize("option, fragment", [
    ("--elr-backend=nope", "--elr-backend: unknown backend 'nope'"),
    ("--elr-history-dir={file}", "exists and is not a directory"),
    ("--elr-report={file}/report.html", "exists and is not a directory"),
    ("--elr-report={dir}", "is a directory, expected a file path"),
])
def test_bad_options_are_usage_errors_before_any_test(option: str, fragment: str, pytester: pytest.Pytester,
                                                      tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    result = pytester.runpytest(option.format(file=a_file, dir=tmp_path))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert fragment in result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_a_hostile_name_never_writes_outside_the_history_dir(pytester: pytest.Pytester, tmp_path: Path) -> None:
    history = tmp_path / "hist"
    body = "cluster: {brokers: 1}\ntopic: {replicas: [0], min_insync_replicas: 1}\nsteps: [{at: T0}]\n"
    pytester.makefile(".elr.yaml", a='name: "../../escaped"\nprofiles: [kafka]\n' + body,
                      b=f'name: "{tmp_path}/absolute"\nprofiles: [kafka]\n' + body)
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", f"--elr-history-dir={history}")
    result.assert_outcomes(passed=2)
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["hist"], written  # nothing beside the history dir
    assert len(list(history.iterdir())) == 2


def test_every_failing_step_is_reported_and_finale_false_explains_a_loss(pytester: pytest.Pytester) -> None:
    pytester.makefile(".elr.yaml", twice="""\
cluster: {brokers: 3}
topic: {replicas: [0, 1, 2], min_insync_replicas: 2}
profiles: [kafka]
steps:
  - at: T0
    do: [{isolate: 0}]
    expect: {leader: 2}
  - at: T1
    expect: {isr: [0]}
""", stopped="""\
cluster: {brokers: 1}
topic: {replicas: [0], min_insync_replicas: 1}
profiles: [kafka]
finale: false
steps:
  - {at: T0, do: [{produce: 3}, {crash: 0}]}
""")
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "step T0 (" in out and "step T1 (" in out and "(2 steps failed)" in out, out
    assert "finale: false left brokers [0] stopped or paused" in out, out
