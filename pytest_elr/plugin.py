"""The pytest plugin (entry point ``pytest11: elr``): options, markers, fixtures, YAML collection
and the verdict table at the end of the run."""

from __future__ import annotations

import importlib.util
import os
import sys
import textwrap
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from _pytest import junitxml  # the JUnit writer's stash key (no public accessor)
from packaging.version import Version

from pytest_elr.api import ClusterHandle
from pytest_elr.backends import load_backend
from pytest_elr.backends.base import Backend, Session
from pytest_elr.checker import CHECKERS, Checker, Confirmation, inline_checker
from pytest_elr.checker.verdict import ANOMALIES_DOC, explain
from pytest_elr.core.errors import BackendError, ScenarioError
from pytest_elr.core.history import slug
from pytest_elr.core.limits import MAX_BROKERS
from pytest_elr.core.observation import say_lost_offsets
from pytest_elr.core.versions import VersionError, resolve_versions
from pytest_elr.model.profiles import PROFILE_NAMES
from pytest_elr.parallel import Decision, distribute
from pytest_elr.scenario.executor import RunResult, ScenarioFailure, ScenarioRun, say_difference
from pytest_elr.scenario.loader import cluster_and_topic_from_python, load_scenario, verdict_from_python
from pytest_elr.scenario.schema import LossExpectation, Scenario, unexplained
from pytest_elr.scenario.suite import SCENARIO_SUFFIXES
from pytest_elr.settings import SETTINGS, add_options, path_setting, setting, setting_source

RESULTS = pytest.StashKey[list[RunResult]]()
#: what --elr-parallel made of this session (the header says it)
PARALLEL = pytest.StashKey[Decision]()
HISTORY_DIR = pytest.StashKey[Path]()
#: per backend name, what its runs share for the session (e.g. the kafka backend's cluster pool)
SESSIONS = pytest.StashKey[dict[str, Session | None]]()
#: set when the settings ask for the Spark checker but pyspark is not installed
SPARK_MISSING = pytest.StashKey[bool]()
#: an xdist worker's xunit2 suite properties of the run, sent with its report to the controller
JUNIT_PROPERTIES = pytest.StashKey[list[tuple[str, Any]]]()
#: the Spark confirmation of this session's inline verdicts (the ``spark`` checker under pytest)
CONFIRMATION = pytest.StashKey[Confirmation]()
#: why the session's verdicts could not be confirmed (Spark would not start or read them)
CONFIRMATION_FAILED = pytest.StashKey[str]()
#: a Python test's cluster handles, judged when its body ends; and those already in RESULTS
HANDLES = pytest.StashKey[list[ClusterHandle]]()
#: the Kafka distribution of --elr-kafka-dist (a sut.kafka_dist.KafkaDist), None when not given
KAFKA_DIST = pytest.StashKey[Any]()
KEPT = pytest.StashKey[set[int]]()
#: the key under which an xdist worker sends its runs to the controller
WORKER_RESULTS = "pytest_elr_results"
#: the key under which an xdist controller gives its workers its session id (their clusters' label)
WORKER_SESSION = "pytest_elr_session"
#: an xdist controller that started workers: True once the session ended abnormally (interrupted,
#: a worker down with an error), so workers may have died before removing their clusters
WORKERS_MAY_LEAVE = pytest.StashKey[bool]()
#: how long an xdist controller awaits its workers' end before it removes what they left
REAP_WAIT_S = 30.0


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "elr_scenario: a YAML scenario collected by pytest-elr")
    config.addinivalue_line("markers", "elr_real_cluster: needs Docker and the project's images")
    config.addinivalue_line("markers", "elr_profile(name): profile a Python-API test runs under")
    config.addinivalue_line("markers", "elr_verdict(acked_loss='found', by_profile=...): what a Python-API "
                                       "test's verdict must be, as a scenario's verdict: key")
    config.stash[RESULTS] = []
    if WORKER_SESSION in getattr(config, "workerinput", {}):
        from pytest_elr.sut import resources
        resources.use_session(config.workerinput[WORKER_SESSION])
    _check_options(config)
    config.stash[PARALLEL] = distribute(config)  # before xdist's own pytest_configure (trylast) reads -n
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_JunitRelay(config), "pytest-elr-junit-relay")


def pytest_report_header(config: pytest.Config) -> list[str]:
    decision = config.stash.get(PARALLEL, None)
    if decision is None or not decision.workers:
        return []
    return [f"pytest-elr: {decision.workers} runs at once, each worker with clusters of its own ({decision.why}); "
            "--elr-parallel 1 runs one at a time"]


def _check_options(config: pytest.Config) -> None:
    """Bad options are usage errors before any test runs, not a failure per test or at the end."""
    for s in SETTINGS:
        setting(config, s.name)  # a value outside its choices raises UsageError
    try:
        load_backend(str(setting(config, "backend")))
    except BackendError as exc:
        raise pytest.UsageError(f"{setting_source(config, 'backend')}: {exc}") from None
    try:
        _versions(config)
    except VersionError as exc:
        raise pytest.UsageError(f"--elr-kafka-version: {exc}") from None
    history = setting(config, "history_dir")
    if history:
        problem = _unwritable_dir(Path(history))
        if problem:
            raise pytest.UsageError(f"--elr-history-dir {history}: {problem}")
    cluster = _spark_cluster()
    if cluster and not history and setting(config, "checker") == "spark":
        raise pytest.UsageError(
            f"{cluster}: the Spark job reads the histories where it runs (on the executors, or on the Connect "
            "server), not in this process's temporary directory; fix: --elr-history-dir on storage they share "
            "(docs/spark.md)")
    report = setting(config, "report")
    if report:
        path = Path(report)
        problem = "is a directory, expected a file path" if path.is_dir() else _unwritable_dir(path.parent)
        if problem:
            raise pytest.UsageError(f"--elr-report {report}: {problem}")


def _spark_cluster() -> str | None:
    """The setting that sends the Spark job to a cluster (``NAME=value``), or None for local mode."""
    from pytest_elr.checker.session import ENV_MASTER, ENV_REMOTE

    for name in (ENV_REMOTE, ENV_MASTER):
        value = os.environ.get(name)
        if value and not value.startswith("local") and not _loopback_connect(value):
            return f"{name}={value}"
    return None


def _loopback_connect(url: str) -> bool:
    """A Spark Connect server on this machine (``elr spark serve``): it reads the files this process
    writes, temporary directory included."""
    return urlsplit(url).scheme == "sc" and urlsplit(url).hostname in ("127.0.0.1", "localhost", "::1")


def _unwritable_dir(path: Path) -> str | None:
    """Why files cannot be written in directory ``path`` (created if missing), or None."""
    if path.exists() and not path.is_dir():
        return "exists and is not a directory"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot be created: {exc.strerror}"
    if not os.access(path, os.W_OK | os.X_OK):
        return "is not writable"
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name.endswith(SCENARIO_SUFFIXES):
        _start_spark_early(parent.config)
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


def _start_spark_early(config: pytest.Config) -> None:
    """The first scenario file is collected: the JVM that confirms the session's verdicts starts now,
    in the background, so it overlaps the rest of collection and the runs (model runs take ~1 s in
    all, the JVM ~2-4 s: every tenth of a second counts). Not under xdist workers (the controller
    confirms), not for ``--collect-only``."""
    if (hasattr(config, "workerinput") or config.option.collectonly or setting(config, "checker") != "spark"
            or not _importable("pyspark")):
        return
    _confirmation(config).warm_up(prime=_backend_class(config).name != "model")


class ScenarioFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        scenario = load_scenario(self.path)
        backend = _backend_class(self.config)
        wanted = setting(self.config, "profile")
        versions = _versions(self.config)
        # Profiles the backend cannot run are left out, unless that leaves nothing: then they are
        # shown as skips with the reason, not as a silent "no tests collected".
        runnable = [p for p in scenario.profiles if p in backend.profiles]
        for profile in scenario.profiles:
            if (wanted is not None and profile != wanted) or (runnable and profile not in runnable):
                continue
            for version in versions:
                # The id carries the scenario's name, so `-k <name>` selects it and CI shows it;
                # and the release, when several run (`-k 4.0.2`).
                name = f"{slug(scenario.name)}[{profile}" + (f"@{version}]" if len(versions) > 1 else "]")
                item = ScenarioItem.from_parent(self, name=name, scenario=scenario, profile=profile, version=version)
                _mark(item, scenario, backend, profile, version)
                yield item

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, (ScenarioError, BackendError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


def _unrunnable(backend: type[Backend], profile: str) -> str | None:
    """Why ``profile`` is skipped on ``backend`` (a YAML run and a Python test alike), or None."""
    if profile not in backend.profiles:
        return (f"profile {profile} cannot run on the {backend.name} backend "
                f"(it runs {', '.join(sorted(backend.profiles))})")
    return None


def _mark(item: pytest.Item, scenario: Scenario, backend: type[Backend], profile: str, version: str | None) -> None:
    """Skips (shown with their reason by pytest -rs, never counted as passes) and known failures."""
    unrunnable = _unrunnable(backend, profile)
    if unrunnable is not None:
        item.add_marker(pytest.mark.skip(reason=unrunnable))
    elif scenario.backends is not None and backend.name not in scenario.backends:
        item.add_marker(pytest.mark.skip(
            reason=f"not stageable on the {backend.name} backend "
                   f"(runs on {', '.join(scenario.backends)}): {scenario.backends_reason}"))
    elif version is not None and scenario.kafka_versions is not None \
            and not scenario.kafka_versions.contains(version):
        item.add_marker(pytest.mark.skip(
            reason=f"applies to Kafka {scenario.kafka_versions}, not {version}"))
    else:
        known = scenario.known_failure(version)
        if known is not None:
            # strict: a release that should have the bug and passes is a failure (a wrong range)
            item.add_marker(pytest.mark.xfail(
                strict=True, raises=ScenarioFailure,
                reason=f"known to fail on Kafka {version}: {known.because} ({scenario.path}:{known.line})"))


def _kafka_dist(config: pytest.Config) -> Any:
    """The distribution ``--elr-kafka-dist`` names, read once (a tarball unpacked, the jars hashed);
    None when not given. Bad input is a usage error naming the path and what was expected."""
    if KAFKA_DIST in config.stash:
        return config.stash[KAFKA_DIST]
    value = setting(config, "kafka_dist")
    dist = None
    if value:
        where = setting_source(config, "kafka_dist")
        backend = _backend_class(config)
        if backend.name != "kafka":
            raise pytest.UsageError(f"{where}: a Kafka distribution runs on the kafka backend, not {backend.name}")
        if setting(config, "kafka_version"):
            raise pytest.UsageError(f"{where} and {setting_source(config, 'kafka_version')}: give one of them "
                                    "(the distribution's own version is the release under test)")
        from pytest_elr.sut.errors import SutError  # here: the images module imports Docker's client
        from pytest_elr.sut.images import load_dist

        try:
            dist = load_dist(value)
        except SutError as exc:
            raise pytest.UsageError(f"{where}: {exc}") from None
    config.stash[KAFKA_DIST] = dist
    return dist


def _versions(config: pytest.Config) -> tuple[str | None, ...]:
    """The releases each scenario runs on: the setting's list, else the backend's default; a
    backend without releases (the model) runs once; a Kafka distribution's own release."""
    dist = _kafka_dist(config)
    if dist is not None:
        return (dist.release,)
    default = _backend_class(config).default_version()
    if default is None:
        return (None,)
    spec = setting(config, "kafka_version")
    return resolve_versions(spec) if spec else (default,)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A matrix runs release by release (stable order otherwise): pooled clusters of one release
    serve every scenario before the next release's start, so none is started twice."""
    versions = _versions(config)
    if len(versions) > 1:
        rank = {v: i for i, v in enumerate(versions)}
        items.sort(key=lambda it: rank.get(getattr(it, "version", None), -1))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A Python test using ``elr_cluster`` runs once per release of the matrix, like a scenario."""
    if "elr_kafka_version" in metafunc.fixturenames:
        versions = _versions(metafunc.config)
        if len(versions) > 1:
            metafunc.parametrize("elr_kafka_version", versions, ids=[f"kafka@{v}" for v in versions])


class NotTheKnownFailure(AssertionError):
    """A release declared to fail in one way (a step, what fails there) also failed in another: a
    failure, never an xfail."""


class ScenarioItem(pytest.Item):
    def __init__(self, *, scenario: Scenario, profile: str, version: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.profile = profile
        self.version = version
        self.add_marker("elr_scenario")

    def setup(self) -> None:
        """The cluster comes up here, so infrastructure that cannot start (no engine, no image) is
        an *error* of this test -- in JUnit too -- never a failure like lost data."""
        self._run = ScenarioRun(self.scenario, _new_backend(self.config, self.version), self.profile,
                                _history_dir(self.config),
                                _checker(self.config), progress=_progress_writer(self.config))
        try:
            self._run.start()
        except BackendError as exc:
            self.config.stash[RESULTS].append(self._run.result(False, f"backend could not start: {exc}"))
            raise

    def runtest(self) -> None:
        result = self._run.finish()
        known = self.scenario.known_failures_on(self.version)
        other = unexplained(known, tuple(result.failures)) if known and not result.passed else []
        if other or other is None:
            # it failed, and not only as the known bug makes it fail: not the known failure
            result.known_failure = ""
            self.config.stash[RESULTS].append(result)
            _record_for_junit(self, result)
            declared = "; ".join(str(k) for k in known)
            how = f"also failed at {', '.join(str(f) for f in other)}" if other else "the backend or the harness failed"
            raise NotTheKnownFailure(f"expected to fail only at {declared} ({known[0].because}), but {how}:\n"
                                     f"{result.message}")
        self.config.stash[RESULTS].append(result)
        _record_for_junit(self, result)
        if not result.passed:
            raise ScenarioFailure(result.message)

    def teardown(self) -> None:
        run = getattr(self, "_run", None)
        if run is not None:
            run.close("error")  # a run interrupted before it finished (a no-op once finished)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, (ScenarioFailure, NotTheKnownFailure, ScenarioError, BackendError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def _traceback_filter(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:
        """An unforeseen error while the cluster comes up (not a BackendError): the harness's own
        frames, not pytest's and pluggy's. CI shows the start of a run's output: a page of the hook
        machinery there once hid the cause of a setup error entirely."""
        ours = excinfo.traceback.filter(
            lambda entry: not any(part in ("_pytest", "pluggy") for part in Path(str(entry.path)).parts))
        return ours or excinfo.traceback

    def reportinfo(self) -> tuple[Path, int, str]:
        where = f"{self.profile}@{self.version}" if self.version else self.profile
        return self.path, self.scenario.line - 1, f"{self.scenario.name} [{where}]"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A Python test that misuses the API, or whose expectation fails, gets the message that
    names its own line -- not pytest's traceback through the plugin."""
    report = yield
    if call.when == "call" and JUNIT_PROPERTIES in item.stash:
        report.elr_junit_properties = item.stash[JUNIT_PROPERTIES]  # to the xdist controller
    error = call.excinfo.value if call.excinfo is not None else None
    if isinstance(error, (ScenarioError, ScenarioFailure)) and not isinstance(item, ScenarioItem):
        report.longrepr = str(error)
    elif isinstance(error, BackendError):  # infrastructure: what failed and how to fix it, no traceback
        report.longrepr = f"{item.nodeid}: the {setting(item.config, 'backend')} backend could not run: {error}"
        if call.when == "call" and not isinstance(item, ScenarioItem):
            # A Python test brings its cluster up in its body: a cluster that cannot start (no
            # engine, no image) is still an error of the harness -- in JUnit too (docs/ci.md) --
            # never a failure like lost data. pytest counts errors by the phase a report names.
            report.when = "setup"
    return report


def _record_for_junit(item: pytest.Item, result: RunResult, handle: ClusterHandle | None = None) -> None:
    """The run's verdict, counts and history in the JUnit file, where its schema allows them:
    inside the test case for xunit1, as suite properties named after the test for xunit2 (whose
    schema has no properties in a test case; pytest's record_testsuite_property does the same)."""
    verdict = result.verdict
    props = {"verdict": _verdict_word(result), "acked": verdict.acked if verdict else 0,
             "read": verdict.read if verdict else 0, "lost": verdict.lost_count if verdict else 0,
             "disagreements": len(result.disagreements), "declared_differences": len(result.declared),
             "kafka_departs": "; ".join(d["summary"] for d in result.departures),
             "history": str(result.history_dir or "")}
    # A Python test with several clusters: each handle's properties under its own name (cluster-1,
    # cluster-2, ... in the order the test made them), or the second would repeat the first's names.
    handles = item.stash.get(HANDLES, [])
    which = f"cluster-{handles.index(handle) + 1}::" if handle is not None and len(handles) > 1 else ""
    if item.config.getini("junit_family") == "xunit1":
        item.user_properties += [(which + key, value) for key, value in props.items()]
        return
    named = [(f"{item.nodeid}::{which}{key}", value) for key, value in props.items()]
    if hasattr(item.config, "workerinput"):  # the controller writes the file: they go with the report
        item.stash.setdefault(JUNIT_PROPERTIES, []).extend(named)
    else:
        _add_suite_properties(item.config, named)


def _add_suite_properties(config: pytest.Config, properties: list[tuple[str, Any]]) -> None:
    xml = config.stash.get(junitxml.xml_key, None)
    if xml is not None:
        for name, value in properties:
            xml.add_global_property(name, value)


class _JunitRelay:
    """xdist controller: a worker's run brings its xunit2 suite properties with its report (the
    workers write no file; as test case properties they would break the xunit2 schema)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = getattr(report, "elr_junit_properties", None)
        if properties:
            _add_suite_properties(self.config, [(str(name), value) for name, value in properties])


def _proof(p: dict[str, Any]) -> str:
    steps = sorted({r["read_at"] for r in p["records"]})
    lost = say_lost_offsets(p)
    victim = f"; broker {p['victim']} lost {lost}" if lost else ""
    return (f"{p['count']} acknowledged records read at {', '.join(steps)} (served by leader "
            f"{', '.join(map(str, p['served_by'])) or '?'}) are absent from the final read{victim}")


def _differences(tr: Any, results: list[RunResult], kind: str, title: str) -> None:
    """Every difference from the model of one kind, with where it was seen and, if declared, why."""
    found = [(r, d) for r in results for d in getattr(r, kind)]
    if not found:
        return
    tr.write_line(f"{title} ({len(found)}):")
    for r, d in found:
        tr.write_line(f"  {r.scenario} [{_run_id(r)}] {say_difference(d)}")


def _run_id(r: RunResult) -> str:
    return f"{r.profile}@{r.kafka_version}" if r.kafka_version else r.profile


def _result_word(r: RunResult) -> str:
    if r.known_failure:
        return "fails (known)" if not r.passed else "PASS (UNEXPECTED: known to fail)"
    return "PASS" if r.passed else "FAIL"


def _known_bug(r: RunResult) -> str:
    """The bug a known failure declares (the first words of its ``because``), for its row."""
    if not (r.known_failure and not r.passed):
        return ""
    return f" · bug: {textwrap.shorten(r.known_failure, width=100, placeholder=' ...')}"


def _departs(r: RunResult) -> str:
    """The documented differences from the KIP a run relied on, for its row of the verdict table."""
    return f" · Kafka departs: {'; '.join(d['summary'] for d in r.departures)}" if r.departures else ""


MATRIX_CELL = {"PASS": "pass", "FAIL": "FAIL", "fails (known)": "known", "PASS (UNEXPECTED: known to fail)": "XPASS"}


def _matrix(tr: Any, results: list[RunResult], releases: list[str]) -> None:
    """Scenario x release: which release does what (``known``: fails as its known bug says;
    ``XPASS``: passes where a bug was declared; ``.``: not run there, e.g. skipped)."""
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for r in results:
        cells = rows.setdefault((r.scenario, r.profile), {})
        if r.kafka_version:
            cells[r.kafka_version] = MATRIX_CELL[_result_word(r)]
    width = max(7, *(len(v) for v in releases))
    tr.write_line("")
    tr.write_line("scenario x Kafka release (pass / FAIL / known: fails as declared / XPASS: passes where a "
                  "failure is declared / .: not run)")
    tr.write_line(f"{'scenario':<40} {'profile':<8} " + " ".join(f"{v:<{width}}" for v in releases))
    for (scenario, profile), cells in rows.items():
        tr.write_line(f"{scenario:<40} {profile:<8} " + " ".join(f"{cells.get(v, '.'):<{width}}" for v in releases))


def _checker(config: pytest.Config) -> Checker:
    """The checker that judges each run as it ends. ``spark`` (the default) judges inline -- the same
    checks in Python, milliseconds -- and the session ends with ONE Spark job over every run that
    confirms each verdict (:func:`_confirm`); a Spark job per run cost ~3 s each. Without pyspark
    (a plain ``pip install pytest-elr``) the inline checker judges alone, and the summary says so."""
    name = str(setting(config, "checker"))
    if _spark_missing(config):
        name = "inline"
    if name == "spark":
        if not hasattr(config, "workerinput"):  # under xdist the controller confirms: workers start no JVM
            # the JVM starts while the runs go on; runs on a real cluster also leave time for a first job
            _confirmation(config).warm_up(prime=_backend_class(config).name != "model")
        return inline_checker
    return CHECKERS[name]


def _spark_missing(config: pytest.Config) -> bool:
    """The settings ask for the Spark checker but pyspark is not installed. Asked of the process
    itself, once: an xdist controller runs no test, yet it is the one that would confirm."""
    if SPARK_MISSING not in config.stash:
        config.stash[SPARK_MISSING] = setting(config, "checker") == "spark" and not _importable("pyspark")
    return config.stash[SPARK_MISSING]


def _confirming(config: pytest.Config) -> bool:
    return setting(config, "checker") == "spark" and not _spark_missing(config)


def _confirmation(config: pytest.Config) -> Confirmation:
    return config.stash.setdefault(CONFIRMATION, Confirmation())


def _confirm(session: pytest.Session) -> None:
    """Every inline verdict of the session, confirmed by one Spark job (on the controller under xdist,
    so workers start no JVM); Spark's verdict replaces the inline one in the table, the report and
    ``verdict.json``. A run where they differ, or a Spark that cannot judge, fails the session."""
    config = session.config
    results = [r for r in config.stash.get(RESULTS, []) if r.verdict is not None and r.history_dir]
    if hasattr(config, "workerinput") or not _confirming(config) or not results:
        return
    confirmation = _confirmation(config)
    try:
        confirmed = confirmation.run({r.history_dir: r.verdict for r in results if r.history_dir and r.verdict})
    except Exception as exc:  # Java missing, a cluster unreachable: no verdict is confirmed
        config.stash[CONFIRMATION_FAILED] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return
    for r in results:
        if r.history_dir in confirmed:
            r.verdict = confirmed[r.history_dir]
    if confirmation.mismatches:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module blocked in sys.modules (None) or broken
        return False


def _progress_writer(config: pytest.Config) -> Callable[[str], None] | None:
    """Where live step lines go: the terminal, with -v (or ``--elr-progress=on``); never from an
    xdist worker unless asked (its output would interleave with the others')."""
    mode = setting(config, "progress")
    worker = hasattr(config, "workerinput")
    if mode == "off" or (mode == "auto" and (worker or config.getoption("verbose") < 1)):
        return None
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return None

    def write(line: str) -> None:
        if capture is None:
            reporter.write_line(line)
            return
        with capture.global_and_fixture_disabled():  # the run's own output stays captured
            reporter.write_line(line)

    return write


def _backend_class(config: pytest.Config) -> type[Backend]:
    return load_backend(str(setting(config, "backend")))


def _new_backend(config: pytest.Config, version: str | None) -> Backend:
    """A backend for one run of one release, sharing the session's state (the kafka backend's
    cluster pool, whose clusters are keyed by release among the rest of their shape)."""
    cls = _backend_class(config)
    sessions = config.stash.setdefault(SESSIONS, {})
    if cls.name not in sessions:
        sessions[cls.name] = cls.new_session()
    dist = _kafka_dist(config)
    if dist is not None:  # the kafka backend's own parameter (_kafka_dist refuses another backend)
        return cls(session=sessions[cls.name], version=version, dist=dist)  # type: ignore[call-arg]
    return cls(session=sessions[cls.name], version=version)


def _history_dir(config: pytest.Config) -> Path | None:
    value = path_setting(config, "history_dir")
    if value:
        return value
    if setting(config, "checker") == "spark" or setting(config, "report"):
        # The Spark job and the report read histories from disk: keep them in pytest's temporary directory.
        if HISTORY_DIR not in config.stash:
            config.stash[HISTORY_DIR] = config._tmp_path_factory.mktemp("elr-history")  # type: ignore[attr-defined]
        return config.stash[HISTORY_DIR]
    return None


def _verdict_word(result: RunResult) -> str:
    if result.verdict is None:
        return "error"
    lost = result.verdict.lost_count
    if result.expected_loss == "found":
        return f"loss found ({lost})" if lost else "loss NOT found"
    return "no loss" if not lost else f"LOST {lost}"


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture
def elr_profile(request: pytest.FixtureRequest) -> str:
    marker = request.node.get_closest_marker("elr_profile")
    if marker is not None:
        return str(marker.args[0])
    return str(setting(request.config, "profile") or "kafka")


@pytest.fixture
def elr_kafka_version(request: pytest.FixtureRequest) -> str | None:
    """The release a Python test runs on (each release of a matrix in turn); None on the model."""
    return getattr(request, "param", None) or _versions(request.config)[0]


@pytest.fixture
def elr_cluster(request: pytest.FixtureRequest, elr_profile: str,
                elr_kafka_version: str | None) -> Iterator[Callable[..., ClusterHandle]]:
    """Factory of cluster handles on the selected backend. Each run is judged as a YAML run is
    when the test ends (:func:`pytest_runtest_call`), and released afterwards."""
    unrunnable = _unrunnable(_backend_class(request.config), elr_profile)
    if unrunnable is not None:  # as the same YAML is skipped: before anything starts
        pytest.skip(unrunnable)
    handles: list[ClusterHandle] = request.node.stash.setdefault(HANDLES, [])

    def make(brokers: int | list[int] = 3, replicas: list[int] | None = None, min_insync_replicas: int | None = None,
             controllers: int = 1, profile: str | None = None, topic: str = "elr-test",
             acked_loss: str | None = None, min_isr: int | None = None, log_dirs: int = 1,
             elections: bool = False, partitions: int | None = None,
             assignment: dict[int, list[int]] | None = None) -> ClusterHandle:
        # Validated as a scenario's cluster, topic and verdict: errors name the test's own line.
        frame = sys._getframe(1)
        where = (frame.f_code.co_filename, frame.f_lineno)
        if min_isr is not None:
            if min_insync_replicas is not None:
                raise ScenarioError("elr_cluster: give min_insync_replicas only (min_isr is its old name)", *where)
            warnings.warn("elr_cluster(min_isr=...) is deprecated: use min_insync_replicas=..., the scenario "
                          "language's name", DeprecationWarning, stacklevel=2)
            min_insync_replicas = min_isr
        ids = list(range(brokers)) if isinstance(brokers, int) and 0 < brokers <= MAX_BROKERS else brokers
        topic_doc: dict[str, Any] = {"name": topic,
                                     "min_insync_replicas": 2 if min_insync_replicas is None else min_insync_replicas}
        if partitions is not None:
            topic_doc["partitions"] = partitions
        if assignment is not None:
            topic_doc["assignment"] = assignment
            if replicas is not None:
                topic_doc["replicas"] = replicas  # refused beside an assignment, as in YAML
        else:
            topic_doc["replicas"] = ids if replicas is None else replicas
        spec, topic_spec = cluster_and_topic_from_python(
            {"brokers": ids, "controllers": controllers, "log_dirs": log_dirs}, topic_doc, where)
        chosen = profile or elr_profile
        if chosen not in PROFILE_NAMES:
            raise ScenarioError(f"elr_cluster: unknown profile {chosen!r}; expected one of "
                                f"{', '.join(PROFILE_NAMES)}", *where)
        unrunnable = _unrunnable(_backend_class(request.config), chosen)
        if unrunnable is not None:
            pytest.skip(unrunnable)
        verdict = _declared_verdict(request, acked_loss, where)
        handle = ClusterHandle(_new_backend(request.config, elr_kafka_version), chosen, spec, topic_spec,
                               _history_dir(request.config), name=request.node.name, verdict=verdict,
                               checker=_checker(request.config), path=where[0], line=where[1], start=False,
                               elections=elections)
        handles.append(handle)
        handle.start()  # a BackendError here is the test's error (pytest_runtest_makereport)
        return handle

    yield make
    for handle in handles:
        handle.close()


def _declared_verdict(request: pytest.FixtureRequest, acked_loss: str | None,
                      where: tuple[str, int]) -> LossExpectation:
    """The test's ``verdict``: ``elr_cluster(acked_loss=...)``, else its ``elr_verdict`` marker,
    read as a scenario's ``verdict:`` is."""
    if acked_loss is not None:
        return verdict_from_python({"acked_loss": acked_loss}, where)
    marker = request.node.get_closest_marker("elr_verdict")
    if marker is None:
        return LossExpectation()
    if marker.args:
        raise ScenarioError("elr_verdict: give keywords, as a scenario's verdict: key "
                            "(acked_loss='found', by_profile={...})", *where)
    return verdict_from_python(dict(marker.kwargs), where)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A Python test's runs are judged when its body returns -- or raises: then the table and the
    report still get the run, and the test's own error stands -- in the call phase, so a verdict
    that fails is the test's *failure* (a loss is never an error of the harness)."""
    try:
        yield
    except (BackendError, KeyboardInterrupt, SystemExit, pytest.skip.Exception, pytest.xfail.Exception) as exc:
        _unjudged(item, exc)
        raise
    except BaseException as exc:
        _judge_handles(item, raised=exc)
        raise
    problems = _judge_handles(item)
    if problems:
        raise ScenarioFailure("\n".join(problems))


def _judge_handles(item: pytest.Item, raised: BaseException | None = None) -> list[str]:
    """Judge every run of the test (once: ``verdict()`` may have judged it already); each joins the
    verdict table, the report and JUnit once; what did not pass, in words. A test whose body
    ``raised`` failed whatever the verdict: its runs' rows say so."""
    problems: list[str] = []
    kept = item.stash.setdefault(KEPT, set())
    for handle in item.stash.get(HANDLES, []):
        if not handle.started:
            continue
        try:
            result = handle.finish()
        except BackendError:  # the backend failed while judging: the test's error, with its row
            if handle.result is not None and id(handle) not in kept:
                kept.add(id(handle))
                _keep_result(item, handle.result, handle)
            raise
        if raised is not None and result.passed:
            first = (str(raised).strip().splitlines() or [""])[0]
            result.passed = False
            result.message = f"the test failed: {type(raised).__name__}: {first}"
        if id(handle) not in kept:
            kept.add(id(handle))
            _keep_result(item, result, handle)
        if not result.passed:
            problems.append(result.message)
    return problems


def _unjudged(item: pytest.Item, exc: BaseException) -> None:
    """Runs the test left unjudged (the backend failed, or the test was skipped or interrupted):
    released; a failed backend's run still gets its row."""
    for handle in item.stash.get(HANDLES, []):
        if handle.result is None and isinstance(exc, BackendError):
            handle.run.close("error")
            _keep_result(item, handle.run.result(False, f"backend {handle.run.backend.name} failed: {exc}"), handle)


def _keep_result(item: pytest.Item, result: RunResult, handle: ClusterHandle) -> None:
    item.config.stash[RESULTS].append(result)
    _record_for_junit(item, result, handle)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if WORKERS_MAY_LEAVE in session.config.stash and exitstatus == pytest.ExitCode.INTERRUPTED:
        session.config.stash[WORKERS_MAY_LEAVE] = True
    if hasattr(session.config, "workeroutput"):  # an xdist worker: the controller reports
        session.config.workeroutput[WORKER_RESULTS] = [r.to_dict() for r in session.config.stash.get(RESULTS, [])]
    for shared in session.config.stash.get(SESSIONS, {}).values():
        if shared is not None:
            shared.close()  # pooled real clusters live until the session ends
    session.config.stash[SESSIONS] = {}
    _confirm(session)  # after the clusters are gone: the job has the cores to itself
    spark = sys.modules.get("pytest_elr.checker.session")
    if spark is not None:
        spark.stop_spark()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller, before a worker starts: the worker labels its clusters with this session.
    From the first worker on, SIGTERM unwinds the controller as Ctrl-C does (it would die at once
    and leave its workers to execnet, which ends them, cleanup or not, 15 s later), so the
    controller outlives its workers and removes what they could not (``pytest_unconfigure``)."""
    from pytest_elr.sut import resources
    node.workerinput[WORKER_SESSION] = resources.session_id()
    config = node.config
    if WORKERS_MAY_LEAVE not in config.stash:
        config.stash[WORKERS_MAY_LEAVE] = False
        # At interpreter exit too, should the controller end without unconfiguring.
        resources.register(id(config), lambda: _reap_workers_leftovers(config))


def _reap_workers_leftovers(config: pytest.Config) -> None:
    """Remove this session's clusters whose owner (a worker) has ended, after awaiting the owners."""
    import docker.errors

    from pytest_elr.sut import resources
    from pytest_elr.sut.errors import EngineNotRunningError
    try:
        n = resources.reap_session(resources.session_id(), wait_s=REAP_WAIT_S)
    except (EngineNotRunningError, docker.errors.DockerException) as exc:
        sys.stderr.write(f"pytest-elr: could not remove what ended workers left ({exc})\n")
        return
    if n:
        sys.stderr.write(f"pytest-elr: removed {n} containers, networks and volumes that workers ended "
                         f"before their cleanup left (session {resources.session_id()})\n")


def pytest_unconfigure(config: pytest.Config) -> None:
    if WORKERS_MAY_LEAVE not in config.stash:
        return
    from pytest_elr.sut import resources
    if config.stash[WORKERS_MAY_LEAVE]:
        _reap_workers_leftovers(config)  # SIGTERM still unwinds: a second one stops the wait
    resources.unregister(id(config))


# --- reporting ---------------------------------------------------------------------------------


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """xdist controller: scenarios are coming, so the JVM that confirms their verdicts starts now."""
    if _confirming(node.config) and any(".elr.y" in i for i in ids):
        _confirmation(node.config).warm_up(prime=_backend_class(node.config).name != "model")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist: a worker is done; its runs join the controller's, for one table and one report."""
    if error is not None and WORKERS_MAY_LEAVE in node.config.stash:
        node.config.stash[WORKERS_MAY_LEAVE] = True  # it crashed: its cleanup may not have run
    output = getattr(node, "workeroutput", None) or {}
    node.config.stash.setdefault(RESULTS, []).extend(
        RunResult.from_dict(data) for data in output.get(WORKER_RESULTS, []))


def _say_checker(tr: Any, config: pytest.Config, results: list[RunResult], quiet: bool = False) -> None:
    """Who gave the verdicts above: the Spark job, or the inline checker, or (loudly) nobody agreed.
    ``quiet`` (-q): only the loud lines; who judged is on the totals line."""
    checkers = sorted({r.verdict.checker for r in results if r.verdict})
    if not quiet:
        tr.write_line(f"verdicts by the {', '.join(checkers) or 'no'} checker")
        if _spark_missing(config):
            tr.write_line("(pyspark is not installed, so the inline checker judged: "
                          "pip install 'pytest-elr[spark]' for the Spark job)")
    confirmation = config.stash.get(CONFIRMATION, None)
    failed = config.stash.get(CONFIRMATION_FAILED, None)
    if failed:
        tr.write_line(f"VERDICTS NOT CONFIRMED: the Spark job could not judge the runs ({failed}); the verdicts "
                      "above are the inline checker's", red=True, bold=True)
    elif confirmation is not None and confirmation.runs:
        if not quiet:
            start = ("" if confirmation.start_s is None
                     else f", JVM start {confirmation.start_s:.1f} s in the background")
            tr.write_line(f"(each run judged inline as it ended; all {confirmation.runs} verdicts computed again by "
                          f"one Spark job in {confirmation.seconds:.1f} s{start})")
        for m in confirmation.mismatches:
            tr.write_line(f"SPARK AND INLINE VERDICTS DIFFER: {m}", red=True, bold=True)


def _totals(results: list[RunResult]) -> str:
    """The one line a quiet run (-q) keeps: how many runs gave which result, and who judged."""
    counts = Counter(_result_word(r) for r in results)
    checkers = sorted({r.verdict.checker for r in results if r.verdict})
    return (f"pytest-elr: {len(results)} runs: " + ", ".join(f"{n} {word}" for word, n in counts.items())
            + f" (verdicts by the {', '.join(checkers) or 'no'} checker)")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    results = config.stash.get(RESULTS, [])
    if not results or hasattr(config, "workerinput"):
        return  # an xdist worker hands its runs to the controller instead
    tr = terminalreporter
    # -q: the rows that did not pass, what must be loud, one line of totals; -qq: no rows either.
    verbosity = config.get_verbosity()
    if verbosity < 0:
        _quiet_summary(tr, config, results, rows=verbosity == -1)
        return
    tr.section("pytest-elr verdicts")
    releases = sorted({r.kafka_version for r in results if r.kafka_version}, key=Version)
    matrix = len(releases) > 1
    _table(tr, results, matrix)
    if matrix:
        _matrix(tr, results, releases)
    _say_checker(tr, config, results)
    for r in results:
        others = {k: n for k, n in (r.verdict.anomalies if r.verdict else {}).items()
                  if n and k not in ("lost", "unseen")}
        if others:  # in words: a raw {'acks1_uncommitted': 34} tells a user nothing
            words = "; ".join(explain(k, n) for k, n in others.items())
            tr.write_line(f"  {r.scenario} [{_run_id(r)}]: also {words} ({ANOMALIES_DOC})")
    for r in results:
        for proof in r.lost_by_presence:
            tr.write_line(f"  {r.scenario} [{_run_id(r)}]: loss proved by presence: {_proof(proof)}")
    _differences(tr, results, "declared", "declared differences from the model")
    _differences(tr, results, "disagreements", "DISAGREEMENTS with the model (each failed its step)")
    dirs = {str(r.history_dir.parent) for r in results if r.history_dir}
    for d in sorted(dirs):
        tr.write_line(f"histories: {d}")
    _write_report(tr, config, results)


def _table(tr: Any, results: list[RunResult], matrix: bool) -> None:
    """The verdict table, one row per run."""
    name = max(40, *(len(r.scenario) for r in results))  # the column fits the longest name
    header = (f"{'scenario':<{name}} {'profile':<8} {'backend':<7} " + (f"{'kafka':<7} " if matrix else "")
              + f"{'acked':>6} {'read':>6}  {'fault bit':<9} {'verdict':<18} result")
    tr.write_line(header)
    for r in results:
        acked = r.verdict.acked if r.verdict else 0
        read = r.verdict.read if r.verdict else 0
        tr.write_line(
            f"{r.scenario:<{name}} {r.profile:<8} {r.backend:<7} " + (f"{r.kafka_version or '-':<7} " if matrix else "")
            + f"{acked:>6} {read:>6}  {r.fault_bit:<9} {_verdict_word(r):<18} {_result_word(r)}{_known_bug(r)}"
            + _departs(r)
        )


def _quiet_summary(tr: Any, config: pytest.Config, results: list[RunResult], rows: bool) -> None:
    """-q: the verdict table's rows that are not a plain PASS (with ``rows``), the lines that must be
    loud (unconfirmed or differing verdicts, disagreements with the model), the totals, the report."""
    matrix = len({r.kafka_version for r in results if r.kafka_version}) > 1
    not_passed = [r for r in results if _result_word(r) != "PASS"]
    if rows and not_passed:
        _table(tr, not_passed, matrix)
    _say_checker(tr, config, results, quiet=True)
    _differences(tr, results, "disagreements", "DISAGREEMENTS with the model (each failed its step)")
    tr.write_line(_totals(results))
    _write_report(tr, config, results)


def _write_report(tr: Any, config: pytest.Config, results: list[RunResult]) -> None:
    report = setting(config, "report")
    if report:
        from pytest_elr.report import build_report

        runs = [r.history_dir for r in results if r.history_dir]
        # the verdicts this session's checker gave (a run that errored before its verdict: not judged)
        verdicts = {r.history_dir: r.verdict for r in results if r.history_dir and r.verdict}
        tr.write_line(f"report: {build_report(runs, Path(report), verdicts).resolve()}")
