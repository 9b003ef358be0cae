"""Kafka's own unit tests graded by the same mutants as the suite, and the two side by side.

    elr kafka-mutants unit --kafka-version 4.3.1 --out DIR [--tests CLASS,...] [--method REGEX] [--budget 30m]
    elr kafka-mutants side-by-side UNIT_DIR SUITE_CAMPAIGN...

Kafka publishes the compiled tests of some releases on Maven Central (``kafka-metadata`` with the
classifier ``test``: 4.3.1 has it, 4.4.0 does not). ``unit`` resolves them with their test-scope
needs (JUnit's console launcher, Mockito, the test utilities of ``kafka-clients`` and
``kafka-server-common``) beside the release's own classpath, runs the chosen test classes once
unmutated (a test that fails there is excluded from grading and reported), then once per mutant of
the classes those tests exercise (``PartitionChangeBuilderTest`` exercises ``PartitionChangeBuilder``),
with pytest-elr's agent planting it (:mod:`pytest_elr.sut.instrument`). A mutant is

- **killed** when a test that passes unmutated fails (which tests, and the first message), or when
  the test JVM died without a report (kind ``error``);
- **survived** when every such test passes with the mutant planted;
- **not planted** when the agent's planted file does not name it (its class never loaded, or the
  agent found no such site);
- **timed out** when the tests did not end within ``--mutant-timeout``.

Results are rows of :func:`pytest_elr.schedule.kafka_mutants.run_campaign`'s format (``grader``
says ``kafka-unit-tests``) in ``DIR/results-1of1.jsonl``, so ``elr kafka-mutants report`` reads them
and a stopped run resumes. ``side-by-side`` puts them beside a suite campaign of the same release:
per method, the mutants both kill, only the unit tests kill, only the suite kills, and neither.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
import zipfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_elr.core.commandline import command_parser
from pytest_elr.schedule.kafka_mutants import (
    Mutant,
    enumerate_mutants,
    parse_duration,
    results_of,
    summary,
)

GRADER = "kafka-unit-tests"
#: JUnit's console launcher (Jupiter 5.14 inside: Kafka 4.3's tests are written for Jupiter 5)
JUNIT_CONSOLE_VERSION = "1.14.1"
MOCKITO_VERSION = "5.20.0"
#: the release's compiled tests: kafka-metadata's own, and the test utilities they import
TEST_JAR_ARTIFACTS = ("kafka-metadata", "kafka-clients", "kafka-server-common")
DEFAULT_TESTS = ("org.apache.kafka.controller.PartitionChangeBuilderTest",)
#: a mutant's tests get this many times the unmutated run's time (a removed increment can loop)
TIMEOUT_FACTOR = 10.0
MIN_MUTANT_TIMEOUT_S = 60.0

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>pytest-elr</groupId><artifactId>kafka-unit-tests</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
@TEST_JARS@
    <dependency><groupId>org.junit.platform</groupId><artifactId>junit-platform-console-standalone</artifactId>
      <version>@JUNIT@</version></dependency>
    <dependency><groupId>org.mockito</groupId><artifactId>mockito-core</artifactId><version>@MOCKITO@</version></dependency>
  </dependencies>
</project>
"""
# Each test jar alone: the main jars and their runtime needs are the release's classpath already.
_TEST_JAR = """    <dependency><groupId>org.apache.kafka</groupId><artifactId>{}</artifactId><version>@KAFKA@</version>
      <classifier>test</classifier><exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion>
      </exclusions></dependency>"""


def test_pom(kafka_version: str) -> str:
    jars = "\n".join(_TEST_JAR.format(a) for a in TEST_JAR_ARTIFACTS)
    return (_POM.replace("@TEST_JARS@", jars).replace("@KAFKA@", kafka_version)
            .replace("@JUNIT@", JUNIT_CONSOLE_VERSION).replace("@MOCKITO@", MOCKITO_VERSION))


def resolve_test_classpath(kafka_version: str) -> list[Path]:
    """The release's compiled tests, JUnit and Mockito, then Kafka's own classpath: cached per pom."""
    from pytest_elr.sut.errors import BuildStepError
    from pytest_elr.sut.images import _hash, _run, build_dir, resolve_kafka_classpath

    pom = test_pom(kafka_version)
    out = build_dir() / f"kafka-tests-{kafka_version}-{_hash(pom)}"
    libs, done = out / "libs", out / ".complete"
    if not done.exists():
        out.mkdir(parents=True, exist_ok=True)
        (out / "pom.xml").write_text(pom)
        try:
            _run("kafka-tests", ["mvn", "-q", "-B", "-f", str(out / "pom.xml"), "dependency:copy-dependencies",
                                 f"-DoutputDirectory={libs}"], hint="Maven Central must be reachable")
        except BuildStepError as e:
            if "test" in e.cause and ("Could not find artifact" in e.cause or "could not be resolved" in e.cause):
                raise BuildStepError("kafka-tests", f"Kafka {kafka_version}'s compiled tests are not on Maven "
                                     f"Central (kafka-metadata:{kafka_version}:test)",
                                     "pick a release that publishes them (4.3.1 does, 4.4.0 does not)") from e
            raise
        done.write_text(f"junit-console {JUNIT_CONSOLE_VERSION}, mockito {MOCKITO_VERSION}\n")
    return sorted(libs.glob("*.jar")) + sorted(resolve_kafka_classpath(kafka_version).glob("*.jar"))


# ---------------------------------------------------------------------------------- one test run


@dataclass
class TestRun:
    """What one run of the test classes showed."""

    seconds: float
    timed_out: bool = False
    exit_code: int | None = None
    #: how many tests the report counts (None: no report was written)
    tests: int | None = None
    #: failed or errored test ("Class#method()" or a parameterized case's name) -> its first message line
    failed: dict[str, str] = field(default_factory=dict)
    #: what the agent wrote (the id, "missing: ID", "failed: ID"), None when it wrote nothing
    planted: str | None = None
    output_tail: str = ""


def failed_tests(report: Path) -> tuple[int, dict[str, str]]:
    """A JUnit XML report: how many tests ran, and the failed ones with their first message line."""
    root = ET.parse(report).getroot()
    failed: dict[str, str] = {}
    count = 0
    for case in root.iter("testcase"):
        count += 1
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            message = (bad.get("message") or bad.get("type") or (bad.text or "").strip() or "failed").splitlines()
            failed[f"{case.get('classname', '')}#{case.get('name', '')}"] = (message[0] if message else "")[:300]
    return count, failed


def run_tests(classpath: Sequence[Path], tests: Sequence[str], *, timeout_s: float, agent: Path | None = None,
              mutant: str | None = None) -> TestRun:
    """The test classes in one JVM (JUnit's console launcher), ``mutant`` planted by ``agent``."""
    with tempfile.TemporaryDirectory(prefix="elr-unit-") as tmp:
        planted_file = Path(tmp) / "planted"
        reports = Path(tmp) / "reports"
        cmd = ["java"]
        if mutant is not None:
            if agent is None:
                raise ValueError("a mutant needs the agent's jar")
            cmd.append(f"-javaagent:{agent}={mutant}")
        cmd += ["-cp", os.pathsep.join(map(str, classpath)), "org.junit.platform.console.ConsoleLauncher",
                "execute", "--disable-banner", "--details=none", f"--reports-dir={reports}"]
        cmd += [f"--select-class={t}" for t in tests]
        # The agent reports its plant here; no other agent rides along (JAVA_TOOL_OPTIONS is the nodes').
        env = {**{k: v for k, v in os.environ.items() if k != "JAVA_TOOL_OPTIONS"},
               "ELR_MUTANT_PLANTED_FILE": str(planted_file)}
        t0 = time.monotonic()
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                 cwd=tmp, start_new_session=True)
        try:
            output, _ = child.communicate(timeout=timeout_s)
            run = TestRun(round(time.monotonic() - t0, 1), exit_code=child.returncode)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)  # its own session: the JVM and nothing of ours
            output, _ = child.communicate()
            run = TestRun(round(time.monotonic() - t0, 1), timed_out=True)
        finally:
            if child.poll() is None:  # interrupted (Ctrl-C): the JVM is in its own session, end it too
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        run.output_tail = "\n".join((output or "").strip().splitlines()[-15:])
        report = reports / "TEST-junit-jupiter.xml"
        if report.exists() and not run.timed_out:
            run.tests, run.failed = failed_tests(report)
        if planted_file.exists():
            run.planted = planted_file.read_text().strip() or None
        return run


def classify(mutant_id: str, run: TestRun, failing_unmutated: set[str]) -> dict[str, Any]:
    """The mutant's status from one run of the tests under it (a test that fails unmutated tells nothing)."""
    out: dict[str, Any] = {"grader": GRADER, "planted": run.planted}
    if run.timed_out:
        return {**out, "status": "timed out"}
    if run.planted != mutant_id:
        # Killed or not, a mutant whose code never ran proves nothing about the tests.
        return {**out, "status": "not planted", "error": run.planted or "the agent wrote nothing: class never loaded"}
    new = {t: m for t, m in run.failed.items() if t not in failing_unmutated}
    if new:
        names = sorted(new)
        return {**out, "status": "killed", "by": {
            "kind": "check", "tests": names, "failures": [f"{short_test(t)}: {new[t]}" for t in names[:10]],
            "message": new[names[0]]}}
    if run.tests is None:
        # The JVM ended without a report: the mutant broke the launcher's run itself.
        return {**out, "status": "killed", "by": {"kind": "error", "tests": [], "failures": [],
                                                  "message": f"exit {run.exit_code}, no report: {run.output_tail}"}}
    return {**out, "status": "survived"}


def short_test(test: str) -> str:
    """``org.apache.kafka.controller.XTest#testY()`` -> ``XTest#testY()``."""
    cls, sep, case = test.partition("#")
    return cls.rsplit(".", 1)[-1] + sep + case


# ---------------------------------------------------------------------------------- the campaign


def tested_class(test: str) -> str:
    """The class a test class exercises, by Kafka's naming (``XTest`` tests ``X``)."""
    return test.removesuffix("Test")


def mutants_for(mutants: Sequence[Mutant], tests: Sequence[str]) -> list[Mutant]:
    """The mutants of the classes (and their inner classes) the tests exercise, not equivalent by construction."""
    classes = {tested_class(t) for t in tests}
    return [m for m in mutants if m.class_name.split("$")[0] in classes and m.equivalent is None]


def run_unit_campaign(mutants: Sequence[Mutant], tests: Sequence[str], kafka_version: str, out: Path, *,
                      budget_s: float = float("inf"), mutant_timeout_s: float | None = None) -> list[dict[str, Any]]:
    """The tests unmutated (``DIR/baseline.json``), then under each mutant not graded before."""
    from pytest_elr.sut.instrument import build_agents

    out.mkdir(parents=True, exist_ok=True)
    classpath = resolve_test_classpath(kafka_version)
    agent = build_agents().mutants
    baseline = run_tests(classpath, tests, timeout_s=mutant_timeout_s or 600.0)
    if not baseline.tests:
        raise RuntimeError(f"the tests {', '.join(tests)} ran no test unmutated (exit {baseline.exit_code}):\n"
                           f"{baseline.output_tail}")
    failing_unmutated = set(baseline.failed)
    (out / "baseline.json").write_text(json.dumps(
        {"kafka_version": kafka_version, "tests": list(tests), "tests_run": baseline.tests,
         "failing_unmutated": baseline.failed, "seconds": baseline.seconds}, indent=1))
    print(f"elr kafka-mutants unit: {baseline.tests} tests of {', '.join(map(short_test, tests))} on Kafka "
          f"{kafka_version}, unmutated in {baseline.seconds:.1f}s; {len(failing_unmutated)} fail there (excluded)"
          + "".join(f"\n  excluded: {short_test(t)}: {m}" for t, m in sorted(baseline.failed.items())), flush=True)
    timeout_s = mutant_timeout_s or max(MIN_MUTANT_TIMEOUT_S, TIMEOUT_FACTOR * baseline.seconds)
    done = results_of([out])
    todo = [m for m in mutants if m.id not in done]
    started = time.monotonic()
    new: list[dict[str, Any]] = []
    for i, mutant in enumerate(todo):
        if time.monotonic() - started > budget_s:
            print(f"budget spent: {len(todo) - i} mutants left for a later run (it resumes)", flush=True)
            break
        run = run_tests(classpath, tests, timeout_s=timeout_s, agent=agent, mutant=mutant.id)
        row = {**asdict(mutant), **classify(mutant.id, run, failing_unmutated), "tests": list(tests),
               "runs_tried": 1, "seconds": run.seconds, "shard": "1/1", "kafka_version": kafka_version}
        with (out / "results-1of1.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")
        new.append(row)
        by = row.get("by") or {}
        how = f"  <- {', '.join(short_test(t) for t in (by.get('tests') or [])[:3]) or by.get('kind')}" if by else ""
        print(f"[{i + 1}/{len(todo)}] {row['status']:<11} {row['seconds']:>5.1f}s  {mutant.in_words()}{how}",
              flush=True)
    return new


# ---------------------------------------------------------------------------------- side by side


def _killed(row: dict[str, Any] | None) -> bool | None:
    """True killed, False not (survived; or uncovered: the suite never runs the line), None ungraded."""
    if row is None:
        return None
    return {"killed": True, "survived": False, "uncovered": False}.get(row["status"])


def _mutant_of(row: dict[str, Any]) -> Mutant:
    return Mutant(**{k: row[k] for k in Mutant.__dataclass_fields__})


def _killer(row: dict[str, Any]) -> str:
    by = row.get("by") or {}
    if row.get("grader") == GRADER:
        tests = by.get("tests") or []
        return (short_test(tests[0]) + (f" (+{len(tests) - 1})" if len(tests) > 1 else "")) if tests else \
            by.get("kind", "")
    if by.get("scenario"):
        return f"{by['scenario']} [{by.get('profile')}]"
    return by.get("kind", "")


def releases_of(results: dict[str, dict[str, Any]]) -> set[str]:
    return {str(r.get("kafka_version")) for r in results.values()}


def identical_classes(version_a: str, version_b: str, classes: set[str]) -> set[str]:
    """The classes (dotted, outer) whose class files, inner classes included, are byte for byte the
    same in both releases: a mutant id of one names the very same instruction in the other."""
    from pytest_elr.schedule.kafka_coverage import kafka_jars

    def outer(entry: str) -> str:
        return entry.removesuffix(".class").split("$")[0].replace("/", ".")

    def files(version: str) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for jar in kafka_jars(version):
            with zipfile.ZipFile(jar) as z:
                found.update({n: z.read(n) for n in z.namelist() if n.endswith(".class") and outer(n) in classes})
        return found

    a, b = files(version_a), files(version_b)
    return {c for c in classes if any(outer(n) == c for n in a)
            and all(a.get(n) == b.get(n) for n in a.keys() | b.keys() if outer(n) == c)}


def side_by_side(unit: dict[str, dict[str, Any]], suite: dict[str, dict[str, Any]],
                 same_code: set[str] | None = None) -> list[str]:
    """Per method: killed by both, by the unit tests only, by the suite only, by neither (of the
    mutants both graded), and ungraded by one or the other; then each side's lone kills in words.

    Results of two releases compare only on the classes of ``same_code`` (byte-identical class files
    in both: :func:`identical_classes`); the other classes' mutants count as ungraded."""
    if len(releases_of(unit) | releases_of(suite)) > 1 and same_code is None:
        raise ValueError(f"the results are of different releases "
                         f"({', '.join(sorted(releases_of(unit) | releases_of(suite)))}): a mutant id names an "
                         "instruction of one release's class files")
    rows: dict[str, Counter[str]] = {}
    only: dict[str, list[tuple[Mutant, str]]] = {"unit": [], "suite": []}
    for mid in sorted(set(unit) | set(suite)):
        row = unit.get(mid) or suite[mid]
        mutant = _mutant_of(row)
        by_unit, by_suite = _killed(unit.get(mid)), _killed(suite.get(mid))
        if by_unit is None or by_suite is None or (same_code is not None and
                                                   mutant.class_name.split("$")[0] not in same_code):
            column = "ungraded"
        else:
            column = {(True, True): "both", (True, False): "unit only", (False, True): "suite only",
                      (False, False): "neither"}[(by_unit, by_suite)]
        rows.setdefault(mutant.short_method, Counter())[column] += 1
        if column == "unit only":
            only["unit"].append((mutant, _killer(unit[mid])))
        elif column == "suite only":
            only["suite"].append((mutant, _killer(suite[mid])))
    width = max((len(k) for k in rows), default=10)
    columns = ("both", "unit only", "suite only", "neither", "ungraded")
    lines = [f"{'method':<{width}}  " + "  ".join(columns)]
    total: Counter[str] = Counter()
    for method in sorted(rows):
        c = rows[method]
        total.update(c)
        lines.append(f"{method:<{width}}  " + "  ".join(f"{c[k]:>{len(k)}}" for k in columns))
    lines.append(f"{'total':<{width}}  " + "  ".join(f"{total[k]:>{len(k)}}" for k in columns))
    compared = sum(total[k] for k in columns[:4])
    if compared:
        lines.append(f"of {compared} mutants both graded: the unit tests kill {total['both'] + total['unit only']}, "
                     f"the suite kills {total['both'] + total['suite only']}, together "
                     f"{compared - total['neither']}")
    for side, title in (("unit", "killed by Kafka's unit tests only"), ("suite", "killed by the suite only")):
        if only[side]:
            lines.append(f"{title} ({len(only[side])}):")
            lines += [f"  {m.in_words()}  <- {killer}" for m, killer in
                      sorted(only[side], key=lambda mk: (mk[0].class_name, mk[0].line, mk[0].id))]
    return lines


# ---------------------------------------------------------------------------------- commands


def unit_main(argv: list[str] | None = None) -> int:
    parser = command_parser("kafka-mutants unit", __doc__)
    parser.add_argument("--kafka-version", required=True, help="a release whose compiled tests are published")
    parser.add_argument("--out", type=Path, required=True, help="the results' directory (resumes)")
    parser.add_argument("--tests", default=",".join(DEFAULT_TESTS),
                        help="test classes, comma-separated (their classes' mutants are graded)")
    parser.add_argument("--method", default=None, help="only mutants of methods matching this regex")
    parser.add_argument("--mutant", action="append", default=[], help="only this mutant id (repeatable)")
    parser.add_argument("--budget", type=parse_duration, default=float("inf"), help="stop starting mutants after this")
    parser.add_argument("--mutant-timeout", type=parse_duration, default=None,
                        help=f"per mutant (default: {TIMEOUT_FACTOR:.0f}x the unmutated run, at least "
                             f"{MIN_MUTANT_TIMEOUT_S:.0f}s)")
    args = parser.parse_args(argv)
    tests = [t.strip() for t in args.tests.split(",") if t.strip()]
    every = enumerate_mutants(args.kafka_version)
    if args.mutant:
        known = {m.id: m for m in every}
        unknown = [i for i in args.mutant if i not in known]
        if unknown:
            print(f"elr kafka-mutants unit: no such mutant in Kafka {args.kafka_version}: {unknown[0]}",
                  file=sys.stderr)
            return 2
        mutants = [known[i] for i in args.mutant]
    else:
        mutants = mutants_for(every, tests)
    if args.method:
        mutants = [m for m in mutants if re.search(args.method, m.short_method)]
    if not mutants:
        print("elr kafka-mutants unit: no mutant to run (no target class is tested by these tests, or the filters "
              "left none)", file=sys.stderr)
        return 2
    run_unit_campaign(mutants, tests, args.kafka_version, args.out, budget_s=args.budget,
                      mutant_timeout_s=args.mutant_timeout)
    results = results_of([args.out])
    lines, _ = summary(results)
    seconds = [r["seconds"] for r in results.values()]
    print("\n".join(lines))
    if seconds:
        print(f"per mutant: {sum(seconds) / len(seconds):.1f}s mean, {max(seconds):.1f}s max, "
              f"{sum(seconds) / 60:.1f} min in all")
    return 0


def side_by_side_main(argv: list[str] | None = None) -> int:
    parser = command_parser("kafka-mutants side-by-side", __doc__)
    parser.add_argument("unit", type=Path, help="an `elr kafka-mutants unit --out` directory")
    parser.add_argument("suite", nargs="+", type=Path, help="the suite's campaign directories or results files")
    args = parser.parse_args(argv)
    unit, suite = results_of([args.unit]), results_of(args.suite)
    if not unit or not suite:
        empty = args.unit if not unit else ", ".join(map(str, args.suite))
        print(f"elr kafka-mutants side-by-side: no results in {empty}", file=sys.stderr)
        return 2
    same_code = None
    (unit_release, *more), suite_releases = sorted(releases_of(unit)), releases_of(suite)
    if more or len(suite_releases) > 1:
        print("elr kafka-mutants side-by-side: each side must be of one release", file=sys.stderr)
        return 2
    if suite_releases != {unit_release}:
        # Two releases: only the classes whose bytecode did not change between them compare.
        (suite_release,) = suite_releases
        classes = {r["class_name"].split("$")[0] for r in (*unit.values(), *suite.values())}
        same_code = identical_classes(unit_release, suite_release, classes)
        print(f"unit tests of Kafka {unit_release}, the suite on Kafka {suite_release}: compared on the classes "
              f"whose class files are identical in both: {', '.join(sorted(same_code)) or 'none'}")
    print("\n".join(side_by_side(unit, suite, same_code)))
    return 0
