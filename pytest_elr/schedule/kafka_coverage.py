"""``elr kafka-coverage``: which lines of Kafka's own ELR code the suite runs, on a real cluster.

    elr kafka-coverage [scenarios/...] --out DIR [--kafka-version V] [pytest arguments after --]
    elr kafka-coverage --report-only --out DIR

Runs the scenarios under pytest with JaCoCo's agent in every controller and broker JVM
(``PYTEST_ELR_KAFKA_COVERAGE``: :mod:`pytest_elr.sut.instrument`), each run's coverage dumped and
reset at its end (and before a fault ends a JVM) into ``DIR/exec/<run id>/``. Then writes JaCoCo's own
HTML and XML report (``org.jacoco.cli report``), restricted to the ELR code (:data:`TARGETS`), into
``DIR/report/``, prints a per-method table, and indexes which runs cover which lines
(``DIR/lines.json``): the mutant campaign (``elr kafka-mutants``) runs only the runs that cover a
mutant's line, fastest first.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_elr.core.commandline import command_parser

#: The ELR code: per class, a pattern its methods' ``name + descriptor`` must match (a lambda's name
#: carries its method's, so ``maybeShrinkIsr`` also takes ``$anonfun$maybeShrinkIsr$1``).
TARGETS: dict[str, str] = {
    # every election, ISR and ELR change (KIP-966 "Leader election", "ELR invariants")
    "org.apache.kafka.controller.PartitionChangeBuilder": ".",
    # fencing, unclean and controlled shutdown, ClearElr, AlterPartition (KIP-903's epoch checks),
    # directory assignment and the unclean election of leaderless partitions
    "org.apache.kafka.controller.ReplicationControlManager":
        r"handleBroker|replay\(Lorg/apache/kafka/common/metadata/(PartitionChange|ClearElr)Record;|Elr|"
        r"alterPartition\(|validateAlterPartitionData|ineligibleReplicasForIsr|generateLeaderAndIsrUpdates|"
        r"handleDirectories|handleAssignReplicasToDirs|updatePartitionDirectories|getTopicEffectiveMinIsr|"
        r"UncleanLeader|maybeFenceOneStaleBroker|processBrokerHeartbeat|electLeader\(",
    # the min ISR change that clears the ELR (KIP-966 "min ISR config change")
    "org.apache.kafka.controller.ConfigurationControlManager": r"ClearElr|MinIsr|ElrSafety",
    # broker registration: the unclean shutdown a new incarnation reveals (KIP-966 "broker registration")
    "org.apache.kafka.controller.ClusterControlManager":
        r"registerBroker|RegisterBrokerRecord|FenceBrokerRecord|UnfenceBrokerRecord|BrokerRegistrationChange|"
        r"replayRegistrationChange|checkBrokerEpoch|isUnfenced",
    "org.apache.kafka.controller.BrokerHeartbeatManager": ".",
    # the partition leader: HWM advance, ISR shrink and expand, min ISR on produce (KIP-966
    # "Additional High Watermark advancement requirement"), KIP-903's broker epoch in the ISR
    "kafka.cluster.Partition":
        r"IsUnderMinIsr|isUnderMinIsr|isAtMinIsr|effectiveMinIsr|makeLeader|makeFollower|updateFollowerFetchState|"
        r"ExpandIsr|ShrinkIsr|canAddReplicaToIsr|isReplicaIsrEligible|isBrokerEpochIsrEligible|"
        r"maybeIncrementLeaderHW|appendRecordsToLeader|handleAlterPartitionUpdate|checkEnoughReplicasReachOffset",
}
#: the jars of Kafka's classpath that hold the target classes
TARGET_JARS = ("kafka-metadata-", "kafka_2.13-")


def target_method(class_name: str, method: str, desc: str) -> bool:
    pattern = TARGETS.get(class_name.split("$")[0])
    return pattern is not None and re.search(pattern, method + desc) is not None


def kafka_jars(kafka_version: str) -> list[Path]:
    """Kafka's jars that hold the ELR code (resolved on the host, as the node image's build does)."""
    from pytest_elr.sut.images import resolve_kafka_classpath

    libs = resolve_kafka_classpath(kafka_version)
    return sorted(p for p in libs.glob("*.jar") if p.name.startswith(TARGET_JARS) and "-sources" not in p.name)


def target_classfiles(jars: Iterable[Path], into: Path) -> Path:
    """The target classes and their inner classes, extracted (JaCoCo reports exactly these)."""
    prefixes = tuple(c.replace(".", "/") for c in TARGETS)
    for jar in jars:
        with zipfile.ZipFile(jar) as z:
            for name in z.namelist():
                stem = name.removesuffix(".class")
                if name.endswith(".class") and (stem in prefixes or stem.split("$")[0] in prefixes):
                    z.extract(name, into)
    return into


def jacoco_report(execs: Sequence[Path], classfiles: Path, xml: Path, html: Path | None = None) -> None:
    from pytest_elr.sut.instrument import build_agents

    cli = build_agents().jacoco_cli
    cmd = ["java", "-jar", str(cli), "report", *map(str, execs), "--classfiles", str(classfiles),
           "--xml", str(xml), "--quiet"]
    if html is not None:
        cmd += ["--html", str(html), "--name", "pytest-elr: Kafka's ELR code"]
    xml.parent.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_TOOL_OPTIONS"}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"jacoco report failed: {(p.stdout + p.stderr).strip()[-2000:]}")


@dataclass(frozen=True)
class MethodCoverage:
    class_name: str
    method: str
    desc: str
    first_line: int
    lines_covered: int
    lines_missed: int

    @property
    def lines(self) -> int:
        return self.lines_covered + self.lines_missed


@dataclass
class Coverage:
    """One JaCoCo XML report read: covered lines per source file, and per method counters."""

    #: "package/SourceFile.java" -> lines with at least one instruction run
    covered: dict[str, set[int]]
    #: "package/SourceFile.java" -> lines with instructions
    lines: dict[str, set[int]]
    #: class (dotted) -> its source file key
    source_of: dict[str, str]
    methods: list[MethodCoverage]

    @classmethod
    def read(cls, xml: Path) -> Coverage:
        root = ET.parse(xml).getroot()
        covered: dict[str, set[int]] = {}
        lines: dict[str, set[int]] = {}
        source_of: dict[str, str] = {}
        methods: list[MethodCoverage] = []
        for package in root.iter("package"):
            pname = package.get("name", "")
            for klass in package.findall("class"):
                dotted = klass.get("name", "").replace("/", ".")
                source_of[dotted] = f"{pname}/{klass.get('sourcefilename', '')}"
                for m in klass.findall("method"):
                    counter = next((c for c in m.findall("counter") if c.get("type") == "LINE"), None)
                    if counter is None:
                        continue
                    methods.append(MethodCoverage(dotted, m.get("name", ""), m.get("desc", ""), int(m.get("line", 0)),
                                                  int(counter.get("covered", 0)), int(counter.get("missed", 0))))
            for source in package.findall("sourcefile"):
                key = f"{pname}/{source.get('name')}"
                for line in source.findall("line"):
                    nr = int(line.get("nr", 0))
                    if int(line.get("ci", 0)) + int(line.get("mi", 0)):
                        lines.setdefault(key, set()).add(nr)
                    if int(line.get("ci", 0)):
                        covered.setdefault(key, set()).add(nr)
        return cls(covered, lines, source_of, methods)

    def covers(self, class_name: str, line: int) -> bool:
        return line in self.covered.get(self.source_of.get(class_name, ""), set())

    def target_methods(self) -> list[MethodCoverage]:
        return [m for m in self.methods if target_method(m.class_name, m.method, m.desc)]


def line_rate(methods: Sequence[MethodCoverage]) -> tuple[int, int]:
    return sum(m.lines_covered for m in methods), sum(m.lines for m in methods)


def method_table(coverage: Coverage) -> list[str]:
    """Per class, its target methods' line coverage, then the class's total."""
    out: list[str] = []
    by_class: dict[str, list[MethodCoverage]] = {}
    for m in coverage.target_methods():
        by_class.setdefault(m.class_name.split("$")[0], []).append(m)
    for name in sorted(by_class):
        methods = by_class[name]
        got, total = line_rate(methods)
        out.append(f"{name}: {got}/{total} lines ({100 * got / max(total, 1):.0f}%) in {len(methods)} methods")
        for m in sorted(methods, key=lambda m: m.first_line):
            short = m.class_name.rsplit(".", 1)[-1]
            out.append(f"  {short}.{m.method:<44} line {m.first_line:>5}  {m.lines_covered:>3}/{m.lines:<3}")
    return out


def index_runs(exec_root: Path, classfiles: Path) -> dict[str, dict[str, object]]:
    """Per run directory (one scenario run): its run.json plus the lines it covered."""
    runs: dict[str, dict[str, object]] = {}
    for run_dir in sorted(p for p in exec_root.iterdir() if (p / "run.json").exists()):
        execs = sorted(run_dir.glob("*.exec"))
        meta = json.loads((run_dir / "run.json").read_text())
        if not execs:
            continue
        xml = run_dir / "coverage.xml"
        if not xml.exists():
            jacoco_report(execs, classfiles, xml)
        cov = Coverage.read(xml)
        meta["covered"] = {src: sorted(lines) for src, lines in cov.covered.items()}
        runs[run_dir.name] = meta
    return runs


def build_report(out: Path, kafka_version: str) -> Coverage:
    """JaCoCo's report of every run merged, the per-run line index, and the method table."""
    exec_root = out / "exec"
    execs = sorted(exec_root.glob("*/*.exec"))
    if not execs:
        raise SystemExit(f"elr kafka-coverage: no coverage files under {exec_root}: run the scenarios first")
    with tempfile.TemporaryDirectory() as tmp:
        classfiles = target_classfiles(kafka_jars(kafka_version), Path(tmp))
        jacoco_report(execs, classfiles, out / "report" / "coverage.xml", out / "report" / "html")
        runs = index_runs(exec_root, classfiles)
    coverage = Coverage.read(out / "report" / "coverage.xml")
    (out / "lines.json").write_text(json.dumps(
        {"kafka_version": kafka_version, "source_of": coverage.source_of, "runs": runs}, indent=0))
    return coverage


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("kafka-coverage", __doc__)
    parser.add_argument("paths", nargs="*", default=["scenarios"], help="scenario files or directories")
    parser.add_argument("--out", type=Path, required=True, help="directory for coverage files and the report")
    parser.add_argument("--kafka-version", default=None, help="the release (default: the plugin's default)")
    parser.add_argument("--report-only", action="store_true", help="only (re)build the report from DIR/exec")
    args, pytest_args = parser.parse_known_args(argv)
    from pytest_elr.sut.images import DEFAULT_KAFKA_VERSION
    from pytest_elr.sut.instrument import COVERAGE_ENV

    version = args.kafka_version or os.environ.get("PYTEST_ELR_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION
    out = args.out.resolve()
    if not args.report_only:
        env = {**os.environ, COVERAGE_ENV: str(out / "exec"), "PYTEST_ELR_KAFKA_VERSION": version}
        cmd = [sys.executable, "-m", "pytest", *args.paths, "-q", "-p", "no:randomly", "--elr-backend=kafka",
               "--elr-checker=inline", f"--elr-history-dir={out / 'history'}",
               *[a for a in pytest_args if a != "--"]]
        print(f"elr kafka-coverage: {' '.join(cmd[2:])}", flush=True)
        subprocess.run(cmd, env=env)  # a failing scenario still covers its lines
    coverage = build_report(out, version)
    print("\n".join(method_table(coverage)))
    print(f"report: {out / 'report' / 'html' / 'index.html'}; line index: {out / 'lines.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
