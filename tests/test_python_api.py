"""The Python API is judged as a YAML run is (issue 28 item 1): a user's test file, run by pytester,
fails when it loses acknowledged records without ever calling ``verdict()``, passes with the loss
declared, fails when a declared loss does not happen or a fault does not bite, is skipped where the
same YAML is skipped, errors (never fails) when the infrastructure is missing, and gets its row
in the verdict table, the HTML report and JUnit."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

#: legacy (no ELR): the last ISR member loses its unsynced records and is elected again -- the
#: acknowledged records are gone. No expect() call: only the judge at the test's end can see it.
LOSSY_BODY = """
    c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2{extra})
    assert c.produce(10).acked == 10
    c.isolate(0, from_="all")
    c.isolate(1)
    c.power_off(2)
    c.heal()
    c.restart(2)
"""


def _test_file(pytester: pytest.Pytester, name: str, decorators: str, extra: str = "") -> None:
    body = "".join(f"    {line.strip()}\n" for line in LOSSY_BODY.format(extra=extra).strip().splitlines())
    pytester.makepyfile(**{name: f"import pytest\n\n{decorators}\ndef {name}(elr_cluster):\n{body}"})


def test_a_python_test_that_loses_acknowledged_records_fails_without_calling_verdict(
        pytester: pytest.Pytester) -> None:
    _test_file(pytester, "test_lossy", '@pytest.mark.elr_profile("legacy")')
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly",
                                "--strict-markers", "--junitxml=out.xml", "--elr-report=report.html")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*test_lossy.py: verdict on backend model, profile legacy: 10 acknowledged acks=all records lost*",
        "*test_lossy*legacy*model*10*LOST 10*FAIL",  # its row in the verdict table
        "verdicts by the inline checker",
    ])
    # JUnit: a failure (lost data), with the run's properties as a YAML run has them
    root = ET.parse(pytester.path / "out.xml").getroot()
    case = root.find("testsuite/testcase")
    assert case is not None and case.find("failure") is not None and case.find("error") is None
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["test_lossy.py::test_lossy::verdict"] == "LOST 10", props
    assert props["test_lossy.py::test_lossy::acked"] == "10"
    assert "test_lossy" in (pytester.path / "report.html").read_text()


def test_a_python_test_with_the_loss_declared_passes_and_the_loss_is_proved_by_presence(
        pytester: pytest.Pytester) -> None:
    _test_file(pytester, "test_declared_by_argument", '@pytest.mark.elr_profile("legacy")',
               extra=', acked_loss="found"')
    _test_file(pytester, "test_declared_by_marker",
               '@pytest.mark.elr_profile("legacy")\n@pytest.mark.elr_verdict(acked_loss="found")')
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly",
                                "--strict-markers")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*test_declared_by_argument*legacy*loss found (10)*PASS",
        "*test_declared_by_marker*legacy*loss found (10)*PASS",
        "*test_declared_by_argument*: loss proved by presence: 10 acknowledged records read at line *",
    ])


def test_a_declared_loss_that_does_not_happen_fails(pytester: pytest.Pytester) -> None:
    """The negative-control rule of the YAML path: the same actions under kip966 lose nothing."""
    _test_file(pytester, "test_no_loss", '@pytest.mark.elr_profile("kip966")', extra=', acked_loss="found"')
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*negative control: acknowledged records should have been lost, but all 10 were read back*",
        "*test_no_loss*kip966*loss NOT found*FAIL",
    ])


def test_a_lossy_fault_that_does_not_bite_fails(pytester: pytest.Pytester) -> None:
    """Every broker flushed before the power cut: it takes nothing, so the run proves nothing."""
    pytester.makepyfile(test_no_bite="""
        import pytest

        @pytest.mark.elr_profile("kip966")
        def test_no_bite(elr_cluster):
            c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2)
            c.produce(10)
            c.flush(0, 1, 2)
            c.power_off(2)
            c.restart(2)
    """)
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the fault did not bite: no lossy shutdown took any record from its victim*"])


def test_verdict_judges_once_and_the_run_is_closed_after_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_after="""
        import pytest
        from pytest_elr.core.errors import ScenarioError

        @pytest.mark.elr_profile("legacy")
        @pytest.mark.elr_verdict(acked_loss="found")
        def test_after(elr_cluster):
            c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2)
            c.produce(10)
            c.isolate(0, from_="all")
            c.isolate(1)
            c.power_off(2)
            c.heal()
            c.restart(2)
            assert c.verdict().lost_count == 10
            assert c.result.passed
            with pytest.raises(ScenarioError, match="already judged"):
                c.produce(1)
    """)
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    rows = [line for line in result.stdout.lines if line.startswith("test_after ")]
    assert len(rows) == 1, rows  # one row, not one per judgement


def test_a_profile_the_backend_cannot_run_is_skipped_with_the_yaml_reason_before_anything_starts(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{pytester.path}/no-engine.sock")  # a start would error
    pytester.makepyfile(test_kip="""
        import pytest

        @pytest.mark.elr_profile("kip966")
        def test_marker(elr_cluster):
            elr_cluster(brokers=3)

        def test_argument(elr_cluster):
            elr_cluster(brokers=3, profile="kip966")
    """)
    result = pytester.runpytest("--elr-backend=kafka", "--elr-checker=inline", "-p", "no:randomly", "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*profile kip966 cannot run on the kafka backend (it runs kafka, legacy)*"])


def test_infrastructure_missing_is_an_error_not_a_failure(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{pytester.path}/no-engine.sock")
    pytester.makepyfile(test_infra="""
        import pytest

        @pytest.mark.elr_profile("kafka")
        def test_infra(elr_cluster):
            elr_cluster(brokers=3).produce(1)
    """)
    result = pytester.runpytest_subprocess("--elr-backend=kafka", "--elr-checker=inline", "-p", "no:randomly",
                                           "--junitxml=out.xml")
    result.assert_outcomes(errors=1)
    case = ET.parse(pytester.path / "out.xml").getroot().find("testsuite/testcase")
    assert case is not None and case.find("error") is not None and case.find("failure") is None
    result.stdout.fnmatch_lines(["*the kafka backend could not run: no Docker engine answers*",
                                 "*test_infra*kafka*error*FAIL"])


def test_min_isr_is_a_deprecated_alias_of_min_insync_replicas(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_alias="""
        import pytest

        def test_alias(elr_cluster):
            with pytest.deprecated_call(match="min_insync_replicas"):
                c = elr_cluster(brokers=3, min_isr=3, profile="kip966")
            assert c.run.scenario.topic.min_insync_replicas == 3

        def test_both(elr_cluster):
            elr_cluster(brokers=3, min_isr=2, min_insync_replicas=2)
    """)
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*give min_insync_replicas only*"])


def test_a_test_that_fails_by_itself_gets_a_failed_row_though_its_verdict_is_clean(
        pytester: pytest.Pytester) -> None:
    """The row never says PASS for a test pytest reports as failed (here: an expectation)."""
    pytester.makepyfile(test_wrong="""
        def test_wrong(elr_cluster):
            c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2, profile="kip966")
            c.produce(5)
            c.expect(leader=2)
    """)
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*leader: expected 2, observed 0*", "test_wrong *kip966*no loss*FAIL"])


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_several_clusters_in_one_test_have_properties_of_their_own(pytester: pytest.Pytester,
                                                                   xdist: list[str]) -> None:
    """Two handles in one test: a legacy cluster that loses (declared) and a kip966 one that does
    not; each handle's JUnit properties under its own name, neither overwriting the other."""
    body = "".join(f"    {line.strip()}\n" for line in LOSSY_BODY.format(extra=', acked_loss="found"').strip()
                   .splitlines())
    pytester.makepyfile(test_two=(
        "import pytest\n\n@pytest.mark.elr_profile('legacy')\ndef test_two(elr_cluster):\n" + body
        + "    safe = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2, profile='kip966')\n"
          "    assert safe.produce(5).acked == 5\n"))
    result = pytester.runpytest_subprocess(*xdist, "--elr-backend=model", "--elr-checker=inline", "-p",
                                           "no:randomly", "--junitxml=out.xml")
    result.assert_outcomes(passed=1)
    props = [(p.get("name"), p.get("value")) for p in ET.parse(pytester.path / "out.xml").getroot().iter("property")]
    names = [name for name, _ in props]
    assert len(names) == len(set(names)), names
    values = dict(props)
    assert values["test_two.py::test_two::cluster-1::verdict"] == "loss found (10)", values
    assert values["test_two.py::test_two::cluster-2::verdict"] == "no loss", values
    assert values["test_two.py::test_two::cluster-2::acked"] == "5", values


def test_an_epoch_expectation_compares_with_the_previous_expect(pytester: pytest.Pytester) -> None:
    """A follower crash changes the ISR alone: the partition epoch moves, the leader epoch does not;
    the leader's crash then bumps the leader epoch -- and a wrong expectation fails."""
    # not test_epochs.py: that module name is taken by tests/test_epochs.py when run in one process
    pytester.makepyfile(test_epoch_expectations="""
        import pytest

        @pytest.mark.elr_profile("kafka")
        def test_epochs(elr_cluster):
            c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2)
            c.crash(2)
            c.expect(isr=[0, 1], leader_epoch="unchanged", partition_epoch="bumped")
            c.crash(0)
            c.expect(leader=1, leader_epoch="unchanged")
    """)
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*leader_epoch: expected unchanged, observed 1 -> 2*"])


def test_elections_since_the_start_are_expected_only_on_a_cluster_made_to_count_them(
        pytester: pytest.Pytester) -> None:
    """The ELR election of test_fenced_elr_member_is_not_elected_until_unfenced, through the API:
    counted on a handle made with elections=True, refused (at the call's line) on one without."""
    pytester.makepyfile(test_counts="""
        import pytest

        @pytest.mark.elr_profile("kafka")
        def test_counted(elr_cluster):
            c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2, elections=True)
            c.isolate(1)
            c.isolate(2)
            c.crash(0)
            c.expect(leader=None, elr_elections=0)
            c.heal(2)
            c.expect(leader=2, elr_elections=1, unclean_elections=0)

        @pytest.mark.elr_profile("kafka")
        def test_miscounted(elr_cluster):
            c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2, elections=True)
            c.expect(elr_elections=1)

        @pytest.mark.elr_profile("kafka")
        def test_not_read(elr_cluster):
            c = elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2)
            c.expect(elr_elections=0)
    """)
    result = pytester.runpytest("--elr-backend=model", "--elr-checker=inline", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines_random([
        "*elr_elections: expected 1, observed 0 since the start*",
        "*test_counts.py:21*elr_elections counts elections since the start, which were not read there: "
        "make the cluster with elr_cluster(..., elections=True)*",
    ])
