"""Java agents in the Kafka JVMs: JaCoCo's coverage, and one planted mutant of Kafka's own code.

A cluster started with an :class:`Instrumentation` runs, in the JVMs it names, through the JVM's
``JAVA_TOOL_OPTIONS`` (so neither the image nor its control script changes, and a cluster without
one runs exactly as before -- coverage off costs nothing):

- JaCoCo's agent (``org.jacoco.agent`` runtime) in every controller and broker, listening on the
  container's loopback; :meth:`KafkaNode.dump_coverage` asks it (``org.jacoco.cli dump --reset``)
  for what ran since the last dump, so each scenario run's lines are its own;
- pytest-elr's mutation agent (``agents/ElrMutants.java``, compiled here against ASM), given one
  mutant id, on the controllers for a controller class and on the brokers for a broker class.

The jars come from Maven Central and are built once per agent source and versions into
``$PYTEST_ELR_BUILD_DIR/agents-<hash>``, copied into each node before its JVM starts; the coverage
directory is mounted into the nodes.

The environment names what a cluster of the ``kafka`` backend runs with, so pytest, ``elr explore``
and a campaign's child runs share one switch: ``PYTEST_ELR_KAFKA_COVERAGE`` (a directory for the
coverage files) and ``PYTEST_ELR_KAFKA_MUTANT`` (a mutant id).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
import zipfile
from dataclasses import dataclass
from importlib import resources as importlib_resources
from importlib.abc import Traversable
from pathlib import Path

from pytest_elr.sut.errors import BuildStepError

COVERAGE_ENV = "PYTEST_ELR_KAFKA_COVERAGE"
MUTANT_ENV = "PYTEST_ELR_KAFKA_MUTANT"

JACOCO_VERSION = "0.8.15"  # the newest whose agent runtime Maven Central serves
ASM_VERSION = "9.8"
AGENT_SOURCE: Traversable = importlib_resources.files("pytest_elr.sut") / "agents" / "ElrMutants.java"

#: where the agents' jars and the coverage directory are mounted in a node
AGENTS_IN_NODE = "/opt/elr/agents"
COVERAGE_IN_NODE = "/opt/elr/coverage"
JACOCO_PORT = 6300
#: what JaCoCo records: the KIP-966 code's packages (the controller and its metadata, the partition
#: leader); other classes stay uninstrumented, which keeps a covered start close to a plain one
COVERAGE_INCLUDES = ("org.apache.kafka.controller.*", "org.apache.kafka.metadata.*", "kafka.cluster.*")
#: Kafka's classes that run on brokers (every other mutant is planted on the controllers)
BROKER_PACKAGES = ("kafka.cluster.", "kafka.server.", "kafka.log.", "org.apache.kafka.storage.")
#: the file the mutation agent writes when it plants (its source says so)
PLANTED_FILE = "/run/kafka/elr-mutant.planted"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>pytest-elr</groupId><artifactId>agents</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.jacoco</groupId><artifactId>org.jacoco.agent</artifactId>
      <version>@JACOCO@</version><classifier>runtime</classifier></dependency>
    <dependency><groupId>org.jacoco</groupId><artifactId>org.jacoco.cli</artifactId>
      <version>@JACOCO@</version><classifier>nodeps</classifier></dependency>
    <dependency><groupId>org.ow2.asm</groupId><artifactId>asm</artifactId><version>@ASM@</version></dependency>
    <dependency><groupId>org.ow2.asm</groupId><artifactId>asm-tree</artifactId><version>@ASM@</version></dependency>
  </dependencies>
</project>
"""


@dataclass(frozen=True)
class Agents:
    """The built jars, on the host; each also at ``AGENTS_IN_NODE/<name>`` in a node."""

    directory: Path

    @property
    def jacoco_agent(self) -> Path:
        return self.directory / "jacocoagent.jar"

    @property
    def jacoco_cli(self) -> Path:
        return self.directory / "jacococli.jar"

    @property
    def mutants(self) -> Path:
        return self.directory / "elr-mutants.jar"

    def jars(self) -> list[Path]:
        """What a node needs: the agents and what they load (JaCoCo's CLI dumps coverage in the node)."""
        return [self.directory / n for n in ("jacocoagent.jar", "jacococli.jar", "elr-mutants.jar", "asm.jar",
                                             "asm-tree.jar")]

    def classpath(self) -> str:
        """The mutation tool with ASM, for ``java -cp`` on the host (listing mutants)."""
        return os.pathsep.join(str(self.directory / n) for n in ("elr-mutants.jar", "asm.jar", "asm-tree.jar"))


def _run(step: str, cmd: list[str], hint: str = "") -> None:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise BuildStepError(step, f"{cmd[0]} is not installed", hint) from exc
    if p.returncode != 0:
        tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-25:])
        raise BuildStepError(step, f"`{' '.join(cmd[:3])} ...` exited {p.returncode}:\n{tail}", hint)


def build_agents(force: bool = False) -> Agents:
    """JaCoCo's agent and CLI and the mutation agent, built once per source and versions."""
    from pytest_elr.sut.images import _hash, build_dir  # here: the images module imports Docker's client

    source = AGENT_SOURCE.read_bytes()
    pom = _POM.replace("@JACOCO@", JACOCO_VERSION).replace("@ASM@", ASM_VERSION)
    out = build_dir() / f"agents-{_hash(source, pom)}"
    done = out / ".complete"
    if done.exists() and not force:
        return Agents(out)
    t0 = time.monotonic()
    # Built aside and renamed into place: concurrent builds (xdist workers, a campaign beside a test)
    # never see a half-built directory, and the first complete one wins.
    work = out.with_name(f"{out.name}.tmp-{os.getpid()}-{secrets.token_hex(3)}")
    try:
        _build_into(work, source, pom)
        (work / ".complete").write_text(f"jacoco {JACOCO_VERSION}, asm {ASM_VERSION}, {time.monotonic() - t0:.0f}s\n")
        if force or (out.exists() and not done.exists()):  # forced, or a build that died half-way
            shutil.rmtree(out, ignore_errors=True)
        try:
            work.rename(out)
        except OSError:  # another build finished first
            if not done.exists():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Agents(out)


def _build_into(out: Path, source: bytes, pom: str) -> None:
    (out / "classes").mkdir(parents=True)
    (out / "pom.xml").write_text(pom)
    libs = out / "maven"
    _run("agents", ["mvn", "-q", "-B", "-f", str(out / "pom.xml"), "dependency:copy-dependencies",
                    "-DexcludeTransitive=true", f"-DoutputDirectory={libs}"],
         "Maven Central must be reachable and mvn installed")
    for pattern, name in (("org.jacoco.agent-*-runtime.jar", "jacocoagent.jar"),
                          ("org.jacoco.cli-*-nodeps.jar", "jacococli.jar"),
                          (f"asm-{ASM_VERSION}.jar", "asm.jar"), (f"asm-tree-{ASM_VERSION}.jar", "asm-tree.jar")):
        found = sorted(libs.glob(pattern))
        if not found:
            raise BuildStepError("agents", f"{pattern} did not resolve",
                                 "check the versions in pytest_elr/sut/instrument.py")
        shutil.copy(found[0], out / name)
    (out / "ElrMutants.java").write_bytes(source)
    # Release 11: the agent runs in every Kafka 4 JVM (the node image's JRE is 17).
    asm = f"{out / 'asm.jar'}{os.pathsep}{out / 'asm-tree.jar'}"
    _run("agents", ["javac", "--release", "11", "-nowarn", "-cp", asm,
                    "-d", str(out / "classes"), str(out / "ElrMutants.java")], "a JDK (javac) must be installed")
    manifest = ("Manifest-Version: 1.0\nPremain-Class: ElrMutants\nMain-Class: ElrMutants\n"
                "Class-Path: asm.jar asm-tree.jar\n\n")
    with zipfile.ZipFile(out / "elr-mutants.jar", "w", zipfile.ZIP_DEFLATED) as jar:
        jar.writestr("META-INF/MANIFEST.MF", manifest)
        classes = sorted((out / "classes").glob("*.class"))
        if not classes:
            raise BuildStepError("agents", "javac wrote no class", "")
        for cls in classes:
            jar.write(cls, cls.name)


def mutant_class(mutant: str) -> str:
    """The dotted class name a mutant id starts with (``CLASS#METHOD(ARGS)RETURN:LINE:OPERATOR:INDEX``)."""
    name, sep, _ = mutant.partition("#")
    if not sep or not name:
        raise ValueError(f"not a mutant id (CLASS#METHODDESCRIPTOR:LINE:OPERATOR:INDEX): {mutant!r}")
    return name


def runs_on_brokers(class_name: str) -> bool:
    return class_name.startswith(BROKER_PACKAGES)


@dataclass(frozen=True)
class Instrumentation:
    """What the JVMs of one cluster run besides Kafka: coverage into ``coverage_dir`` (host), and
    ``mutant`` planted in the JVMs of its role."""

    coverage_dir: Path | None = None
    mutant: str | None = None

    def __post_init__(self) -> None:
        if self.mutant is not None:
            mutant_class(self.mutant)  # a malformed id fails here, not inside a JVM

    @classmethod
    def from_env(cls) -> Instrumentation | None:
        coverage = os.environ.get(COVERAGE_ENV) or None
        mutant = os.environ.get(MUTANT_ENV) or None
        if coverage is None and mutant is None:
            return None
        return cls(Path(coverage).resolve() if coverage else None, mutant)

    @property
    def key(self) -> tuple[str, str]:
        """Part of a pooled cluster's shape: a cluster runs one instrumentation all its life."""
        return (str(self.coverage_dir or ""), self.mutant or "")

    def mutant_here(self, is_broker: bool) -> bool:
        return self.mutant is not None and runs_on_brokers(mutant_class(self.mutant)) == is_broker

    def jvm_options(self, is_broker: bool) -> str:
        """``JAVA_TOOL_OPTIONS`` of a node (no spaces inside an option: the JVM splits on them)."""
        options = []
        if self.coverage_dir is not None:
            options.append(f"-javaagent:{AGENTS_IN_NODE}/jacocoagent.jar=output=tcpserver,address=127.0.0.1,"
                           f"port={JACOCO_PORT},includes={':'.join(COVERAGE_INCLUDES)}")
        if self.mutant_here(is_broker):
            options.append(f"-javaagent:{AGENTS_IN_NODE}/elr-mutants.jar={self.mutant}")
        return " ".join(options)
