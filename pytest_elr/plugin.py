"""The pytest plugin (entry point ``pytest11: elr``): options, markers, fixtures, YAML collection
and the verdict table at the end of the run."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_elr.api import ClusterHandle
from pytest_elr.backends import load_backend
from pytest_elr.checker import CHECKERS
from pytest_elr.core.errors import BackendError, ScenarioError
from pytest_elr.core.specs import ClusterSpec, TopicSpec
from pytest_elr.model.profiles import PROFILE_NAMES
from pytest_elr.scenario.executor import RunResult, ScenarioFailure, run_scenario
from pytest_elr.scenario.loader import load_scenario
from pytest_elr.scenario.schema import Scenario

SCENARIO_SUFFIXES = (".elr.yaml", ".elr.yml")
RESULTS = pytest.StashKey[list[RunResult]]()
HISTORY_DIR = pytest.StashKey[Path]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("elr", "pytest-elr: chaos tests of Kafka's replication protocol")
    group.addoption("--elr-backend", default=os.environ.get("PYTEST_ELR_BACKEND", "kafka"),
                    help="where scenarios run: kafka (real cluster in containers, the default) or "
                         "model (the in-process oracle, milliseconds); env PYTEST_ELR_BACKEND")
    group.addoption("--elr-profile", default=None, choices=PROFILE_NAMES,
                    help="run only this behaviour profile (default: every profile a scenario "
                         "declares that the backend supports)")
    group.addoption("--elr-history-dir", default=None,
                    help="write each run's history (JSON Lines) under this directory")
    group.addoption("--elr-checker", default="spark", choices=("spark", "inline"),
                    help="who judges each run's history: the Spark job (default) or an in-process "
                         "check of acknowledged-but-unread records only")
    group.addoption("--elr-report", default=None, metavar="PATH",
                    help="write an offline HTML report (timelines and verdicts) of the session's runs")
    group.addoption("--elr-kafka-version", default=None,
                    help="Kafka release for the kafka backend (default 4.3.1; env PYTEST_ELR_KAFKA_VERSION)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "elr_scenario: a YAML scenario collected by pytest-elr")
    config.addinivalue_line("markers", "elr_real_cluster: needs Docker and the project's images")
    config.addinivalue_line("markers", "elr_profile(name): profile a Python-API test runs under")
    config.stash[RESULTS] = []
    version = config.getoption("elr_kafka_version", None)
    if version:
        os.environ["PYTEST_ELR_KAFKA_VERSION"] = version  # read by the kafka backend (and xdist workers)
    _stop_on_sigterm()


def _stop_on_sigterm() -> None:
    """SIGTERM (a CI job's timeout, `kill`) ends the session as Ctrl-C does.

    pytest reports any other exception raised in a test, SystemExit included, as that test's
    failure and goes on with the next one, starting clusters while it is being stopped.
    KeyboardInterrupt stops the session and unwinds fixtures; clusters close at exit.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        return  # someone else decided (e.g. an xdist worker's own handling)

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name.endswith(SCENARIO_SUFFIXES):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


class ScenarioFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        scenario = load_scenario(self.path)
        backend = _backend_class(self.config)
        wanted = self.config.getoption("elr_profile")
        for profile in scenario.profiles:
            if profile in backend.profiles and (wanted is None or profile == wanted):
                item = ScenarioItem.from_parent(self, name=profile, scenario=scenario, profile=profile)
                if scenario.backends is not None and backend.name not in scenario.backends:
                    # Shown as a skip with the scenario's own reason: never counted as a pass.
                    item.add_marker(pytest.mark.skip(
                        reason=f"not stageable on the {backend.name} backend "
                               f"(runs on {', '.join(scenario.backends)}): {scenario.backends_reason}"))
                yield item

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, (ScenarioError, BackendError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class ScenarioItem(pytest.Item):
    def __init__(self, *, scenario: Scenario, profile: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.profile = profile
        self.add_marker("elr_scenario")

    def runtest(self) -> None:
        backend = _backend_class(self.config)()
        checker = CHECKERS[self.config.getoption("elr_checker")]
        result = run_scenario(self.scenario, backend, self.profile, _history_dir(self.config), checker)
        self.config.stash[RESULTS].append(result)
        self.user_properties.append(("verdict", _verdict_word(result)))
        if not result.passed:
            raise ScenarioFailure(result.message)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, (ScenarioFailure, ScenarioError, BackendError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.scenario.line - 1, f"{self.scenario.name} [{self.profile}]"


def _backend_class(config: pytest.Config) -> Any:
    return load_backend(config.getoption("elr_backend"))


def _history_dir(config: pytest.Config) -> Path | None:
    value = config.getoption("elr_history_dir")
    if value:
        return Path(value)
    if config.getoption("elr_checker") == "spark" or config.getoption("elr_report"):
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
def elr_backend_name(request: pytest.FixtureRequest) -> str:
    return str(request.config.getoption("elr_backend"))


@pytest.fixture
def elr_profile(request: pytest.FixtureRequest) -> str:
    marker = request.node.get_closest_marker("elr_profile")
    if marker is not None:
        return str(marker.args[0])
    return str(request.config.getoption("elr_profile") or "kafka")


@pytest.fixture
def elr_cluster(request: pytest.FixtureRequest, elr_profile: str) -> Iterator[Callable[..., ClusterHandle]]:
    """Factory of cluster handles on the selected backend; every handle is closed afterwards."""
    handles: list[ClusterHandle] = []
    backend_cls = _backend_class(request.config)

    def make(brokers: int | list[int] = 3, replicas: list[int] | None = None, min_isr: int = 2,
             controllers: int = 1, profile: str | None = None, topic: str = "elr-test") -> ClusterHandle:
        ids = tuple(range(brokers)) if isinstance(brokers, int) else tuple(brokers)
        spec = ClusterSpec(brokers=ids, controllers=controllers)
        topic_spec = TopicSpec(name=topic, replicas=tuple(replicas or ids), min_insync_replicas=min_isr)
        handle = ClusterHandle(backend_cls(), profile or elr_profile, spec, topic_spec,
                               _history_dir(request.config), name=request.node.name)
        handles.append(handle)
        return handle

    yield make
    for handle in handles:
        handle.close()


def pytest_sessionfinish(session: pytest.Session) -> None:
    kafka = sys.modules.get("pytest_elr.backends.kafka")
    if kafka is not None:
        kafka.close_pool()  # pooled real clusters live until the session ends
    spark = sys.modules.get("pytest_elr.checker.session")
    if spark is not None:
        spark.stop_spark()


# --- reporting ---------------------------------------------------------------------------------


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    results = config.stash.get(RESULTS, [])
    if not results:
        return
    tr = terminalreporter
    tr.section("pytest-elr verdicts")
    header = (f"{'scenario':<40} {'profile':<8} {'backend':<7} {'acked':>6} {'read':>6}  "
              f"{'fault bit':<9} {'verdict':<18} result")
    tr.write_line(header)
    for r in results:
        acked = r.verdict.acked if r.verdict else 0
        read = r.verdict.read if r.verdict else 0
        tr.write_line(
            f"{r.scenario:<40} {r.profile:<8} {r.backend:<7} {acked:>6} {read:>6}  {r.fault_bit:<9} "
            f"{_verdict_word(r):<18} {'PASS' if r.passed else 'FAIL'}"
        )
    checkers = sorted({r.verdict.checker for r in results if r.verdict})
    tr.write_line(f"verdicts by the {', '.join(checkers) or 'no'} checker")
    for r in results:
        others = {k: n for k, n in (r.verdict.anomalies if r.verdict else {}).items()
                  if n and k not in ("lost", "unseen")}
        if others:
            tr.write_line(f"  {r.scenario} [{r.profile}]: also {others}")
    dirs = {str(r.history_dir.parent) for r in results if r.history_dir}
    for d in sorted(dirs):
        tr.write_line(f"histories: {d}")
    report = config.getoption("elr_report")
    if report:
        from pytest_elr.report import build_report

        runs = [r.history_dir for r in results if r.history_dir]
        # the verdicts this session's checker gave (a run that errored before its verdict: not judged)
        verdicts = {r.history_dir: r.verdict for r in results if r.history_dir and r.verdict}
        tr.write_line(f"report: {build_report(runs, Path(report), verdicts).resolve()}")
