"""The plugin as a user meets it: YAML collection, options, fixtures, errors, the verdict table."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from pytest_elr.settings import setting

ROOT = Path(__file__).resolve().parents[1]
XUNIT2 = xmlschema.XMLSchema(Path(__file__).with_name("xunit2.xsd"))


def test_the_xunit2_schema_refuses_properties_inside_a_test_case(tmp_path: Path) -> None:
    """What the JUnit tests below rely on: the schema catches what xdist's workers used to write."""
    suite = ('<testsuites><testsuite name="pytest" tests="1">{}<testcase classname="c" name="t">{}</testcase>'
             '</testsuite></testsuites>')
    prop = '<properties><property name="verdict" value="no loss"/></properties>'
    assert XUNIT2.is_valid(suite.format(prop, ""))
    assert not XUNIT2.is_valid(suite.format("", prop))


def test_the_default_backend_is_real_kafka(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_ELR_BACKEND", raising=False)
    assert setting(pytester.parseconfig(), "backend") == "kafka"
    monkeypatch.setenv("PYTEST_ELR_BACKEND", "model")
    assert setting(pytester.parseconfig(), "backend") == "model"


def test_settings_command_line_over_environment_over_ini_over_default(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_ELR_BACKEND", raising=False)
    pytester.makeini("[pytest]\nelr_backend = model\nelr_checker = inline\nelr_history_dir = hist\n")
    config = pytester.parseconfig()
    assert setting(config, "backend") == "model" and setting(config, "checker") == "inline"
    assert setting(config, "history_dir") == str(pytester.path / "hist")  # relative to the ini file
    assert setting(config, "report") is None and setting(config, "progress") == "auto"
    monkeypatch.setenv("PYTEST_ELR_BACKEND", "kafka")
    assert setting(pytester.parseconfig(), "backend") == "kafka"
    assert setting(pytester.parseconfig("--elr-backend=model"), "backend") == "model"


def test_a_bad_ini_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nelr_checker = sparky\n")
    pytester.makefile(".elr.yaml", s="cluster: {brokers: 1}\ntopic: {replicas: [0], min_insync_replicas: 1}\n"
                                     "steps: [{at: T0}]\n")
    result = pytester.runpytest("--elr-backend=model")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    ini = pytester.path / "tox.ini"
    assert (f"{ini}: elr_checker: expected one of spark, inline, got 'sparky' (did you mean 'spark'?)"
            in result.stderr.str())


def test_option_values_get_did_you_mean_and_booleans_their_usual_words(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_ELR_BACKEND", raising=False)
    typo = pytester.runpytest("--elr-backend=modle")
    assert typo.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown backend 'modle' (did you mean 'model'?)" in typo.stderr.str()
    for word, value in (("true", "on"), ("YES", "on"), ("1", "on"), ("false", "off"), ("no", "off"), ("0", "off")):
        pytester.makeini(f"[pytest]\nelr_progress = {word}\n")
        assert setting(pytester.parseconfig(), "progress") == value, word
    monkeypatch.setenv("PYTEST_ELR_BACKEND", "kafak")
    env = pytester.runpytest()
    assert "$PYTEST_ELR_BACKEND: unknown backend 'kafak' (did you mean 'kafka'?)" in env.stderr.str()


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
    # the loss rate across runs: legacy lost in its one run, the others never
    assert 'id="rates"' in page and page.count('<g class="rate"') == 3
    assert "kip966-last-replica-standing [legacy] model: 1 of 1 runs lost records (100%" in page


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
    # The mismatch comes first, at the failing key's own line (what pytest's short summary shows).
    result.stdout.fnmatch_lines([
        "*step T0 (*wrong.elr.yaml:7): leader: expected 2, observed 1*",
        "*on backend model, profile kafka*",
    ])
    assert "Traceback" not in result.stdout.str()


def test_python_api_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.elr_profile("kip966")
        def test_last_replica_standing(elr_cluster):
            c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2)
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
            c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2)
            c.produce(10)
            c.isolate(0, from_="all")
            c.isolate(1)
            c.power_off(2)
            c.heal()
            c.restart(2)
            c.expect(leader=2)
    """)
    # inline: a Spark job confirming the two runs would only slow this test of the API down
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "--strict-markers")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*invariant*broken*"])


def test_the_plugin_leaves_the_host_sessions_signal_handling_alone(pytester: pytest.Pytester) -> None:
    """A repo that has the plugin installed keeps its own SIGTERM handling: the plugin installs
    none (the real cluster's resources guard themselves only while containers live: see
    tests/sut/test_units.py and tests/sut/test_interrupt.py)."""
    pytester.makeconftest("""
        import signal
        def pytest_unconfigure(config):
            open("after.txt", "w").write(str(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL))
    """)
    pytester.makepyfile(test_sig="""
        import signal
        def test_a_plain_test():
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        def test_an_elr_test_on_the_model(elr_cluster):
            elr_cluster(brokers=1, replicas=[0], min_insync_replicas=1)
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    """)
    result = pytester.runpytest_subprocess("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    assert (pytester.path / "after.txt").read_text() == "True"


def test_ids_carry_the_scenario_name_and_a_profile_no_backend_runs_is_a_reasoned_skip(
        pytester: pytest.Pytester) -> None:
    body = "cluster: {brokers: 1}\ntopic: {replicas: [0], min_insync_replicas: 1}\nsteps: [{at: T0}]\n"
    pytester.makefile(".elr.yaml", first="name: lonely-broker\n" + body,
                      second="name: full-kip-only\nprofiles: [kip966]\n" + body)
    result = pytester.runpytest("--elr-backend=kafka", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["first.elr.yaml::lonely-broker[[]kafka[]]",
                                 "first.elr.yaml::lonely-broker[[]legacy[]]",
                                 "second.elr.yaml::full-kip-only[[]kip966[]]"])
    result = pytester.runpytest("--elr-backend=kafka", "-k", "full-kip", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*profile kip966 cannot run on the kafka backend (it runs kafka, legacy)*"])


def test_live_progress_with_verbose_only(pytester: pytest.Pytester) -> None:
    shutil.copy(ROOT / "scenarios" / "kip966_last_replica_standing.elr.yaml", pytester.path)
    line = "*T2*power_off [[]2[]] -> leader=none isr=[[][]] elr=[[]1, 2[]]*"
    quiet = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "--elr-profile=kafka")
    assert "power_off [2] ->" not in quiet.stdout.str()
    loud = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "--elr-profile=kafka", "-v")
    loud.stdout.fnmatch_lines(["*T0 * isolate {broker: 0, from: all}*", line])
    forced = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "--elr-profile=kafka",
                                "--elr-progress=on")
    forced.stdout.fnmatch_lines([line])


def test_quiet_keeps_the_runs_that_did_not_pass_and_one_line_of_totals(pytester: pytest.Pytester) -> None:
    """-q: no row for a run that passed, no checker lines, no anomalies or proofs; the failing
    run's row and the totals stay. -qq: the totals alone."""
    shutil.copy(ROOT / "scenarios" / "kip966_last_replica_standing.elr.yaml", pytester.path)
    pytester.makefile(".elr.yaml", wrong="cluster: {brokers: 3}\n"
                                         "topic: {replicas: [0, 1, 2], min_insync_replicas: 2}\n"
                                         "profiles: [kafka]\n"
                                         "steps: [{at: T0, do: [{isolate: 0}], expect: {leader: 2}}]\n")
    args = ("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly")
    totals = "pytest-elr: 4 runs: 3 PASS, 1 FAIL (verdicts by the inline checker)"
    loud = pytester.runpytest(*args).stdout.str()
    assert "kip966-last-replica-standing" in loud and ": also " in loud and "loss proved by presence" in loud
    quiet = pytester.runpytest("-q", *args)
    quiet.assert_outcomes(passed=3, failed=1)
    out = quiet.stdout.str()
    quiet.stdout.fnmatch_lines(["wrong * kafka * model * FAIL", totals])
    for noise in ("pytest-elr verdicts", "kip966-last-replica-standing  ", "verdicts by the inline checker\n",
                  "histories:", ": also ", "loss proved by presence"):
        assert noise not in out, noise
    very = pytester.runpytest("-qq", *args)
    very.stdout.fnmatch_lines([totals])
    assert "wrong * kafka" not in very.stdout.str() and " FAIL\n" not in very.stdout.str()


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_junit_is_schema_valid_xunit2_and_tells_errors_from_failures(pytester: pytest.Pytester,
                                                                     xdist: list[str]) -> None:
    """xunit2: no properties inside a test case (the schema has none there); the verdict and
    counts are suite properties -- under xdist too, where the workers' runs bring them to the
    controller that writes the file; a scenario Kafka got wrong is a <failure>."""
    shutil.copy(ROOT / "scenarios" / "kip966_last_replica_standing.elr.yaml", pytester.path)
    pytester.makefile(".elr.yaml", wrong="cluster: {brokers: 3}\n"
                                         "topic: {replicas: [0, 1, 2], min_insync_replicas: 2}\n"
                                         "profiles: [kafka]\n"
                                         "steps: [{at: T0, do: [{isolate: 0}], expect: {leader: 2}}]\n")
    pytester.makepyfile(test_api="def test_api(elr_cluster):\n"
                                 "    elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2).produce(5)\n")
    result = pytester.runpytest_subprocess(*xdist, "--elr-backend=model", "--elr-checker=inline",
                                           "--junitxml=out.xml", "-p", "no:randomly")
    result.assert_outcomes(passed=4, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the same with and without xdist
    XUNIT2.validate(pytester.path / "out.xml")
    root = ET.parse(pytester.path / "out.xml").getroot()
    suite = root.find("testsuite")
    assert suite is not None
    allowed = {"skipped", "error", "failure", "system-out", "system-err"}  # xunit2's test case children
    for case in suite.iter("testcase"):
        assert {child.tag for child in case} <= allowed, ET.tostring(case)
        assert set(case.attrib) <= {"classname", "name", "time", "file", "line"}
    props = {p.get("name"): p.get("value") for p in suite.iterfind("properties/property")}
    name = "kip966_last_replica_standing.elr.yaml::kip966-last-replica-standing[legacy]"
    assert props[f"{name}::verdict"] == "loss found (40)" and props[f"{name}::acked"] == "40"
    assert props["test_api.py::test_api::verdict"] == "no loss"  # a Python test's run, from a worker too
    failed = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["wrong[kafka]"]


def test_xdist_one_table_and_one_complete_report(pytester: pytest.Pytester) -> None:
    """With -n 2 the controller gathers every worker's runs: one verdict table, one report."""
    for name in ("kip966_last_replica_standing", "design_clean_elr_recovery"):
        shutil.copy(ROOT / "scenarios" / f"{name}.elr.yaml", pytester.path)
    report = pytester.path / "report.html"
    result = pytester.runpytest_subprocess("-n", "2", "--elr-backend=model", "--elr-checker=inline",
                                           f"--elr-report={report}", "-p", "no:randomly")
    result.assert_outcomes(passed=6)
    out = result.stdout.str()
    assert out.count("pytest-elr verdicts") == 1
    assert out.count(" PASS") == 6, out
    page = report.read_text()
    for scenario in ("kip966-last-replica-standing", "design-5.2.2-clean-elr-recovery"):
        assert page.count(scenario) >= 3, scenario  # one run per profile


def test_infrastructure_that_cannot_start_is_an_error_not_a_failure(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """No Docker engine: the scenario errors in its setup (JUnit <error>), unlike lost data."""
    shutil.copy(ROOT / "scenarios" / "kip966_last_replica_standing.elr.yaml", pytester.path)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{pytester.path}/no-engine.sock")
    result = pytester.runpytest_subprocess("--elr-backend=kafka", "--elr-checker=inline", "--elr-profile=kafka",
                                           "--junitxml=out.xml", "-p", "no:randomly")
    result.assert_outcomes(errors=1)
    case = ET.parse(pytester.path / "out.xml").getroot().find("testsuite/testcase")
    assert case is not None and case.find("error") is not None and case.find("failure") is None
    result.stdout.fnmatch_lines(["*the kafka backend could not run: no Docker engine answers*"])
    assert "Traceback" not in result.stdout.str() and "raise BackendError" not in result.stdout.str()


def test_an_unforeseen_setup_error_shows_the_harness_frames_not_pluggy(pytester: pytest.Pytester) -> None:
    """Planted: the backend's start raises something no one foresaw. The error names it with the
    harness's frames; pytest's and pluggy's hook machinery (a page of it hid a CI failure) is cut."""
    shutil.copy(ROOT / "scenarios" / "kip966_last_replica_standing.elr.yaml", pytester.path)
    pytester.makeconftest(
        "from pytest_elr.backends.model import ModelBackend\n"
        "def planted(self, *args):\n"
        "    raise RuntimeError('planted: the engine answered nonsense')\n"
        "ModelBackend.start = planted\n")
    result = pytester.runpytest_subprocess("--elr-backend=model", "--elr-checker=inline", "--elr-profile=kafka",
                                           "-p", "no:randomly")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(["*pytest_elr/scenario/executor.py:*",
                                 "*RuntimeError: planted: the engine answered nonsense*"])
    error = out.split("ERROR at setup", 1)[1]
    assert "pluggy" not in error and "_pytest" not in error and "def from_call" not in error, out


def test_without_pyspark_the_inline_checker_judges_and_says_so(pytester: pytest.Pytester) -> None:
    """A plain `pip install pytest-elr` has no pyspark: no traceback, the summary names the checker."""
    shutil.copy(ROOT / "scenarios" / "kip966_last_replica_standing.elr.yaml", pytester.path)
    pytester.makeconftest("import sys\nsys.modules['pyspark'] = None  # as if not installed\n")
    result = pytester.runpytest_subprocess("--elr-backend=model", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["verdicts by the inline checker",
                                 "*pyspark is not installed*pip install 'pytest-elr[[]spark[]]'*"])
    assert result.ret == 0
    # Under xdist the controller runs no test, yet it is the one that would confirm: it must know
    # pyspark is missing too, and exit as the same run without xdist does.
    spread = pytester.runpytest_subprocess("-n", "2", "--elr-backend=model", "-p", "no:randomly")
    spread.assert_outcomes(passed=3)
    assert spread.ret == 0, spread.stdout.str()
    assert "VERDICTS NOT CONFIRMED" not in spread.stdout.str()
    spread.stdout.fnmatch_lines(["*pyspark is not installed*"])


def test_default_checker_judges_inline_and_one_spark_job_confirms(pytester: pytest.Pytester) -> None:
    """Every run judged inline as it ends, every verdict computed again by one Spark job at the end of
    the session; a history that no longer gives the verdict shown (here: a read appended after the run
    was judged) fails the session, naming the run and the difference."""
    shutil.copy(ROOT / "scenarios" / "kip966_last_replica_standing.elr.yaml", pytester.path)
    pytester.makeconftest('''
import pathlib

import pytest

def pytest_runtest_teardown(item):
    if "legacy" not in item.name:
        return
    for events in pathlib.Path("hist").glob("*legacy*/events.jsonl"):
        with events.open("a") as f:
            f.write('{"t": 99.0, "type": "consume", "step": null, "partition": 0, "offset": 7, '
                    '"value": "late", "reader": "late"}\\n')

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    from pyspark import SparkContext
    from pytest_elr.plugin import CONFIRMATION

    session.config.stash[CONFIRMATION]._thread.join()  # started when the first scenario file was collected
    pathlib.Path("jvm.pid").write_text(str(SparkContext._gateway.proc.pid))
''')
    result = pytester.runpytest_subprocess("--elr-backend=model", "--elr-history-dir=hist", "-p", "no:randomly")
    result.assert_outcomes(passed=3)  # each test passed on its inline verdict ...
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # ... and the session fails on Spark's
    result.stdout.fnmatch_lines([
        "verdicts by the spark checker",
        "(each run judged inline as it ended; all 3 verdicts computed again by one Spark job in * s*)",
        "SPARK AND INLINE VERDICTS DIFFER: *hist/kip966-last-replica-standing-legacy-*: read: inline 0, spark 1*",
    ])
    assert "DIFFER" not in "".join(line for line in result.stdout.lines if "-kip966-" in line or "-kafka-" in line)
    runs = sorted((pytester.path / "hist").iterdir())
    assert all('"checker": "spark"' in (r / "verdict.json").read_text() for r in runs)
    # the session's JVM exited before the session did: nothing outlives pytest
    pid = int((pytester.path / "jvm.pid").read_text())
    assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"


def test_a_spark_cluster_needs_a_shared_history_dir(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_ELR_SPARK_MASTER", "spark://127.0.0.1:7077")
    result = pytester.runpytest("--elr-backend=model")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "PYTEST_ELR_SPARK_MASTER=spark://127.0.0.1:7077: the Spark job reads the histories" in result.stderr.str()
    assert "fix: --elr-history-dir on storage they share" in result.stderr.str()


@pytest.mark.parametrize("url, refused", [("sc://127.0.0.1:15002", False), ("sc://localhost:15002", False),
                                          ("sc://spark-connect:15002", True), ("sc://10.0.0.7:15002", True)])
def test_a_connect_server_on_loopback_reads_the_temporary_directory(url: str, refused: bool) -> None:
    from pytest_elr.plugin import _spark_cluster

    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("PYTEST_ELR_SPARK_MASTER", raising=False)
        mp.setenv("PYTEST_ELR_SPARK_REMOTE", url)
        assert (_spark_cluster() is not None) == refused


def test_xdist_workers_label_their_clusters_with_the_controllers_session(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """No session id given: the controller makes one and its workers label with it, so the
    controller can remove what a worker that died before its cleanup left."""
    monkeypatch.delenv("PYTEST_ELR_SESSION", raising=False)
    pytester.makeconftest("""
        from pathlib import Path
        from pytest_elr.sut import resources

        def pytest_unconfigure(config):
            if not hasattr(config, "workerinput"):
                Path("controller").write_text(resources.session_id())
    """)
    pytester.makepyfile(test_ids="""
        import os
        from pathlib import Path
        import pytest
        from pytest_elr.sut import resources

        @pytest.mark.parametrize("n", range(4))
        def test_id(n):
            Path(f"worker-{os.getpid()}-{n}").write_text(resources.labels("c")[resources.SESSION_LABEL])
    """)
    result = pytester.runpytest_subprocess("-n", "2", "--elr-backend=model", "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    controller = (pytester.path / "controller").read_text()
    seen = {p.read_text() for p in pytester.path.glob("worker-*")}
    assert seen == {controller}, (controller, seen)
    assert len({p.name.split("-")[1] for p in pytester.path.glob("worker-*")}) == 2  # both workers ran
