"""The plugin as a user meets it: YAML collection, options, fixtures, errors, the verdict table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_default_backend_is_real_kafka(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_ELR_BACKEND", raising=False)
    assert pytester.parseconfig().getoption("elr_backend") == "kafka"
    monkeypatch.setenv("PYTEST_ELR_BACKEND", "model")
    assert pytester.parseconfig().getoption("elr_backend") == "model"


def test_scenarios_run_per_profile_with_verdict_table(pytester: pytest.Pytester) -> None:
    shutil.copy(ROOT / "scenarios" / "kip966_last_replica_standing.elr.yaml", pytester.path)
    history = pytester.path / "hist"
    # The default checker: the Spark job judges every run from its history on disk.
    result = pytester.runpytest_subprocess("--elr-backend=model", f"--elr-history-dir={history}", "--strict-markers",
                                           "--elr-report=report.html")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "*pytest-elr verdicts*",
        "*kip966-last-replica-standing*kip966*no loss*PASS*",
        "*kip966-last-replica-standing*legacy*loss found*PASS*",
        "verdicts by the spark checker",
    ])
    runs = sorted(p for p in history.iterdir())
    assert len(runs) == 3 and all((r / "events.jsonl").stat().st_size > 0 for r in runs)
    # each run's verdict is saved beside its history, and the report shows the same: never judged again
    assert all('"checker": "spark"' in (r / "verdict.json").read_text() for r in runs)
    page = (pytester.path / "report.html").read_text()
    assert page.count('<td class="checker"><span class="pill">spark</span>') == 3
    assert '<span class="pill">inline</span>' not in page


def test_profile_option_selects_one_profile(pytester: pytest.Pytester) -> None:
    shutil.copy(ROOT / "scenarios" / "kip966_last_replica_standing.elr.yaml", pytester.path)
    result = pytester.runpytest("--elr-backend=model", "--elr-profile=legacy", "--elr-checker=inline",
                                "--elr-report=report.html")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*report: *report.html"])
    page = (pytester.path / "report.html").read_text()
    assert "kip966-last-replica-standing" in page and "<svg" in page
    assert '<td class="checker"><span class="pill">inline</span>' in page


def test_unrelated_yaml_is_not_collected(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", config="key: value\n")
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_malformed_scenario_is_a_clean_collection_error(pytester: pytest.Pytester) -> None:
    bad = pytester.path / "bad.elr.yaml"
    bad.write_text("cluster: {brokers: 3}\ntopic: {replicas: [0, 1, 5], min_insync_replicas: 2}\nsteps: []\n")
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*bad.elr.yaml:2: topic.replicas: unknown broker id 5*"])
    assert "Traceback" not in result.stdout.str()


def test_wrong_expectation_fails_with_a_readable_report(pytester: pytest.Pytester) -> None:
    pytester.makefile(".elr.yaml", wrong="""\
cluster: {brokers: 3}
topic: {replicas: [0, 1, 2], min_insync_replicas: 2}
profiles: [kafka]
steps:
  - at: T0
    do: [{isolate: 0}]
    expect: {leader: 2}
""")
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*step T0 (*wrong.elr.yaml:5) on backend model, profile kafka:*",
        "*leader: expected 2, observed 1*",
    ])
    assert "Traceback" not in result.stdout.str()


def test_python_api_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.elr_profile("kip966")
        def test_last_replica_standing(elr_cluster):
            c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_isr=2)
            assert c.produce(10).acked == 10
            assert c.unsynced() == {0: 10, 1: 10, 2: 10}
            c.flush(1)
            assert c.unsynced()[1] == 0
            c.isolate(0)
            c.expect(leader=1, isr=[1, 2], elr=[])
            c.isolate(1)
            c.expect(leader=2, isr=[2], elr=[1])
            c.power_off(2)
            c.expect(leader=None, isr=[], elr=[1, 2], lost=[2])
            c.heal()
            c.restart(2)
            c.expect(leader=1)
            assert not c.verdict().lost

        @pytest.mark.elr_profile("legacy")
        def test_legacy_loses(elr_cluster):
            c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_isr=2)
            c.produce(10)
            c.isolate(0, from_="all")
            c.isolate(1)
            c.power_off(2)
            c.heal()
            c.restart(2)
            c.expect(leader=2)
    """)
    result = pytester.runpytest("--elr-backend=model", "--strict-markers")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*invariant*broken*"])
