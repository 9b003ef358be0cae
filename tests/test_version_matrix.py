"""The version matrix as a user meets it, on a backend with releases that runs in milliseconds: a
third-party backend (registered by its own distribution's entry point, as any would be) whose
"releases" before 4.1.0 do not report LastKnownELR -- the shape of a real release's bug.

The same machinery runs the kafka backend over real releases (docs/matrix.md); these tests pin the
plugin's side: ids, ordering, skips, strict known failures, the scenario x release table."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from fake_backend import SILENT

import pytest_elr

BACKEND = '''
from dataclasses import replace
from typing import ClassVar

from pytest_elr.backends.model import ModelBackend


class Versioned(ModelBackend):
    """The model as a system with releases: before 4.1.0 it forgets LastKnownELR; 4.0.0 also
    forgets the ELR while leaderless, 4.0.1 also loses the first record it drains (bugs beside the
    known one)."""

    name: ClassVar[str] = "versioned"

    @classmethod
    def default_version(cls) -> str:
        return "4.4.0"

    def __init__(self, session=None, version=None):
        super().__init__(session, version)
        self.kafka_version = version or self.default_version()

    def own_model(self):
        return None  # held to a shadow model, as Kafka is

    def release(self):
        return tuple(int(x) for x in self.kafka_version.split("."))

    def observe(self):
        obs = super().observe()
        if self.release() < (4, 1, 0):
            obs = replace(obs, last_known_elr=())
        if self.release() == (4, 0, 0) and obs.leader is None:
            obs = replace(obs, elr=())
        return obs

    def drain(self):
        read = super().drain()
        return replace(read, records=read.records[1:]) if self.release() == (4, 0, 1) else read
'''


@pytest.fixture
def matrix(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester dir where the ``versioned`` backend is installed (module + dist-info on PYTHONPATH)."""
    site = pytester.path / "site"
    (site / "versioned_backend-0.dist-info").mkdir(parents=True)
    (site / "versioned_backend.py").write_text(BACKEND)
    (site / "versioned_backend-0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: versioned-backend\n"
                                                                     "Version: 0\n")
    (site / "versioned_backend-0.dist-info" / "entry_points.txt").write_text(
        "[pytest_elr.backends]\nversioned = versioned_backend:Versioned\n")
    # this checkout's package first (not an editable install's), then the backend's distribution
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(pytest_elr.__file__).parents[1]), str(site)]))
    monkeypatch.delenv("PYTEST_ELR_KAFKA_VERSION", raising=False)
    return pytester


def scenario(extra: str) -> str:
    return textwrap.dedent(extra) + SILENT


ARGS = ("--elr-backend=versioned", "--elr-checker=inline", "-p", "no:randomly", "-p", "no:cacheprovider", "-rsxX")


def test_each_release_is_one_test_with_its_id_in_release_order(matrix: pytest.Pytester) -> None:
    matrix.makefile(".elr.yaml", a=scenario(""), b=scenario(""))
    result = matrix.runpytest_subprocess(*ARGS, "--elr-kafka-version=4.4.0,4.0.2", "--collect-only", "-q")
    ids = [line for line in result.outlines if "::" in line]
    # release by release (pooled clusters of one release serve every scenario before the next)
    assert ids == ["a.elr.yaml::harness-mutants[kafka@4.4.0]", "b.elr.yaml::harness-mutants[kafka@4.4.0]",
                   "a.elr.yaml::harness-mutants[kafka@4.0.2]", "b.elr.yaml::harness-mutants[kafka@4.0.2]"]
    one = matrix.runpytest_subprocess(*ARGS, "--elr-kafka-version=4.4.0", "--collect-only", "-q")
    assert [line for line in one.outlines if "::" in line] == ["a.elr.yaml::harness-mutants[kafka]",
                                                               "b.elr.yaml::harness-mutants[kafka]"]


#: what the planted bug fails with: LastKnownELR, at the crash and (carried on) at the restart after it
KNOWN = """
    known_failures:
      - versions: "<4.1.0"
        because: "LastKnownELR not reported (the planted bug)"
        step: both-crash
        fails: last_known_elr
      - {versions: "<4.1.0", because: "carried on", step: follower-back, fails: [last_known_elr]}
"""


def test_a_known_failure_fails_where_declared_and_the_table_shows_the_matrix(matrix: pytest.Pytester) -> None:
    matrix.makefile(".elr.yaml", s=scenario(KNOWN))
    result = matrix.runpytest_subprocess(*ARGS, "--elr-kafka-version=4.0.2,4.1.0")
    result.assert_outcomes(passed=1, xfailed=1)
    result.stdout.fnmatch_lines(["scenario x Kafka release*", "harness-mutants*kafka*known*pass*",
                                 "*known to fail on Kafka 4.0.2: LastKnownELR not reported*"])
    out = result.stdout.str()
    assert "[kafka@4.0.2] step both-crash after crash: last_known_elr: model [0], observed []" in out
    assert "fails (known) · bug: LastKnownELR not reported" in out  # the row names the declared bug


def test_the_report_shows_the_matrix(matrix: pytest.Pytester) -> None:
    matrix.makefile(".elr.yaml", s=scenario("""
        known_failures:
          - {versions: "<4.1.0", because: "LastKnownELR not reported", step: both-crash, fails: last_known_elr}
          - {versions: "<4.1.0", because: "carried on", step: follower-back, fails: last_known_elr}
    """))
    result = matrix.runpytest_subprocess(*ARGS, "--elr-kafka-version=4.0.2,4.1.0", "--elr-report=r.html")
    result.assert_outcomes(passed=1, xfailed=1)
    page = (matrix.path / "r.html").read_text()
    matrix_table = page[page.index('id="matrix"'):page.index('id="verdicts"')]
    assert "<th>4.0.2</th><th>4.1.0</th>" in matrix_table
    assert 'title="LastKnownELR not reported"><span class="pill known">known</span>' in matrix_table
    assert '<span class="pill passed">pass</span>' in matrix_table


def test_a_known_failure_that_passes_is_a_failure(matrix: pytest.Pytester) -> None:
    matrix.makefile(".elr.yaml", s=scenario(KNOWN.replace('"<4.1.0"', '"<4.5.0"')))
    result = matrix.runpytest_subprocess(*ARGS, "--elr-kafka-version=4.0.2,4.1.0")
    result.assert_outcomes(failed=1, xfailed=1)
    result.stdout.fnmatch_lines(["*harness-mutants ?kafka@4.1.0?*", "?XPASS(strict)? known to fail on Kafka 4.1.0*",
                                 "harness-mutants*kafka*known*XPASS*"])


def test_an_undeclared_release_failure_fails(matrix: pytest.Pytester) -> None:
    matrix.makefile(".elr.yaml", s=scenario("""
        known_failures: [{versions: "<4.0.0", because: "declared too narrow", step: both-crash, fails: leader}]
    """))
    result = matrix.runpytest_subprocess(*ARGS, "--elr-kafka-version=4.0.2,4.1.0")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*last_known_elr*", "harness-mutants*kafka*FAIL*pass*"])


def test_a_failure_at_another_step_is_not_the_known_one(matrix: pytest.Pytester) -> None:
    matrix.makefile(".elr.yaml", s=scenario("""
        known_failures: [{versions: "<4.1.0", because: "shows at setup", step: setup, fails: last_known_elr}]
    """))
    result = matrix.runpytest_subprocess(*ARGS, "--elr-kafka-version=4.0.2")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*expected to fail only at step setup in last_known_elr (shows at setup), but "
                                 "also failed at step both-crash: last_known_elr, step follower-back: last_known_elr*"])


def test_a_known_failure_with_a_regression_at_another_step_fails(matrix: pytest.Pytester) -> None:
    """The declared step fails as declared; the bug's consequence at the next step is not declared."""
    matrix.makefile(".elr.yaml", s=scenario("""
        known_failures: [{versions: "<4.1.0", because: "the planted bug", step: both-crash, fails: last_known_elr}]
    """))
    result = matrix.runpytest_subprocess(*ARGS, "--elr-kafka-version=4.0.2")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*expected to fail only at step both-crash in last_known_elr (the planted bug), "
                                 "but also failed at step follower-back: last_known_elr:*"])


def test_another_field_at_the_declared_step_is_not_the_known_failure(matrix: pytest.Pytester) -> None:
    """4.0.0 has the known bug and also forgets the ELR while leaderless: at the declared step too."""
    matrix.makefile(".elr.yaml", s=scenario(KNOWN))
    result = matrix.runpytest_subprocess(*ARGS, "--elr-kafka-version=4.0.0,4.0.2")
    result.assert_outcomes(failed=1, xfailed=1)
    result.stdout.fnmatch_lines(["*harness-mutants ?kafka@4.0.0?*",
                                 "*but also failed at step both-crash: elr, step follower-back: elr*"])


def test_a_verdict_failure_beside_the_known_one_fails(matrix: pytest.Pytester) -> None:
    """4.0.1 has the known bug and also loses an acknowledged record: the verdict is not declared."""
    matrix.makefile(".elr.yaml", s=scenario(KNOWN))
    result = matrix.runpytest_subprocess(*ARGS, "--elr-kafka-version=4.0.1")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*but also failed at verdict: acked_loss*"])


def test_a_run_failing_only_as_declared_is_xfail() -> None:
    """The rule itself: every failure of the run must be a declared (step, field or invariant)."""
    from pytest_elr.core.versions import version_range
    from pytest_elr.scenario.schema import Failure, KnownFailure, unexplained

    known = (KnownFailure(version_range("<4.1.0"), "bug", 1, "T3", ("leader", "no_acked_loss")),)
    assert unexplained(known, (Failure("T3", "leader"), Failure("T3", "no_acked_loss"))) == []
    assert unexplained(known, (Failure("T3", "leader"), Failure("T4", "leader"))) == [Failure("T4", "leader")]
    assert unexplained(known, (Failure("T3", "isr"),)) == [Failure("T3", "isr")]
    assert unexplained(known, (Failure("verdict", "acked_loss"),)) == [Failure("verdict", "acked_loss")]
    assert unexplained(known, ()) is None  # failed without a structured failure: a backend error


def test_a_scenario_applies_to_the_releases_it_names(matrix: pytest.Pytester) -> None:
    matrix.makefile(".elr.yaml", s=scenario('kafka_versions: ">=4.1.0"\n'))
    result = matrix.runpytest_subprocess(*ARGS, "--elr-kafka-version=4.0.2,4.3.1", "-k", "4.0.2 or 4.3.1")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*applies to Kafka >=4.1.0, not 4.0.2*"])


def test_a_python_test_runs_once_per_release(matrix: pytest.Pytester) -> None:
    matrix.makepyfile(test_api="""
        def test_versions(elr_kafka_version):
            assert elr_kafka_version in ("4.0.2", "4.4.0")
    """)
    result = matrix.runpytest_subprocess(*ARGS, "--elr-kafka-version=ci", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_versions?kafka@4.4.0?*PASSED*", "*test_versions?kafka@4.0.2?*PASSED*"])


@pytest.mark.parametrize(("value", "says"), [
    ("3.9.0", "'3.9.0' is not a Kafka 4.x release"),
    ("4.4.0,,4.0.2", "empty entry"),
    ("every", "nor a set (all-4x, ci, newest)"),
])
def test_a_bad_version_setting_is_a_usage_error(matrix: pytest.Pytester, value: str, says: str) -> None:
    matrix.makefile(".elr.yaml", s=SILENT)
    result = matrix.runpytest_subprocess(*ARGS, f"--elr-kafka-version={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--elr-kafka-version: *{says}*"])


@pytest.mark.parametrize(("extra", "says"), [
    ('kafka_versions: "4.1"\n', "kafka_versions: '4.1' is not a version range"),
    ("known_failures: [{versions: '<4.1.0'}]\n", "known_failures: expected {versions:"),
    ("known_failures: [{versions: '<4.1.0', because: x, step: setup}]\n", "*fails: <what fails there*"),
    ("known_failures: [{versions: '<4.1.0', because: x, step: both-crsh, fails: isr}]\n",
     "known_failures: no step 'both-crsh' in this scenario*did you mean 'both-crash'*"),
    ("known_failures: [{versions: '<4.1.0', because: x, step: setup, fails: [isr, lader]}]\n",
     "known_failures.fails: expected one of*got 'lader'*did you mean 'leader'*"),
    ("known_failures: [{versions: '<4.1.0', because: x, step: setup, fails: [isr, isr]}]\n",
     "known_failures.fails: 'isr' is listed twice"),
])
def test_bad_version_keys_name_their_line(matrix: pytest.Pytester, extra: str, says: str) -> None:
    matrix.makefile(".elr.yaml", s=extra + SILENT)
    result = matrix.runpytest_subprocess(*ARGS)
    result.stdout.fnmatch_lines([f"*s.elr.yaml:1*{says}*"])
    assert "Traceback" not in result.stdout.str()


def test_the_model_backend_runs_once_whatever_the_matrix(pytester: pytest.Pytester) -> None:
    pytester.makefile(".elr.yaml", s=SILENT)
    result = pytester.runpytest_subprocess("--elr-backend=model", "--elr-checker=inline", "--elr-kafka-version=all-4x",
                                           "--collect-only", "-q")
    assert [line for line in result.outlines if "::" in line] == ["s.elr.yaml::harness-mutants[kafka]"]


def test_versions_resolve() -> None:
    from pytest_elr.core.versions import KNOWN_KAFKA_VERSIONS, NEWEST, resolve_versions

    assert resolve_versions("all-4x") == KNOWN_KAFKA_VERSIONS and len(KNOWN_KAFKA_VERSIONS) == 12
    assert resolve_versions("ci,4.0.2, 4.9.1") == (NEWEST, "4.0.2", "4.9.1")  # once each; a newer release is fine
