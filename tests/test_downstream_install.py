"""The plugin as another repo meets it: built as a wheel (and an sdist), installed into a virtual
environment that does not see this machine's site-packages, in a directory with no checkout.

From there the installed ``elr images build`` builds the node image from the wheel's own recipes
under a fresh tag namespace (so nothing built from the checkout is reused), and an example project
(a YAML suite and a Python test) runs on real Kafka with ``-n 2``. Before any of that, right after
the bare ``pip install`` (no extras), the same project passes on the model. The KIP suite the wheel
ships runs from the install too, on the model (``pytest --pyargs pytest_elr.scenarios``, ``elr mutants``,
``elr bench suite``), in a directory with no scenarios of its own.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import xmlschema

from pytest_elr.scenario.loader import load_scenario
from pytest_elr.sut import images

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "pytest_elr" / "sut" / "recipes"
XUNIT2 = xmlschema.XMLSchema(Path(__file__).with_name("xunit2.xsd"))


def run(*cmd: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", out, ROOT)
    assert built.returncode == 0, built.stderr
    return out


def test_the_wheel_and_the_sdist_carry_the_recipes_the_kip_suite_and_the_licence(dist: Path, tmp_path: Path) -> None:
    recipes = sorted(str(p.relative_to(ROOT)) for p in RECIPES.rglob("*") if p.is_file())
    # the KIP suite, under the package (in the checkout a link to scenarios/)
    recipes += [f"pytest_elr/scenarios/{p.name}" for p in (ROOT / "scenarios").iterdir() if p.is_file()]
    assert "pytest_elr/scenarios/kip966_last_replica_standing.elr.yaml" in recipes
    assert "pytest_elr/sut/recipes/kafka-node/Dockerfile" in recipes
    with zipfile.ZipFile(next(dist.glob("pytest_elr-*.whl"))) as whl:
        names = set(whl.namelist())
        metadata = whl.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert set(recipes) <= names, set(recipes) - names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: Apache-2.0" in metadata

    sdist = run(sys.executable, "-m", "build", "--sdist", "-o", tmp_path, ROOT)
    assert sdist.returncode == 0, sdist.stdout[-2000:] + sdist.stderr[-2000:]
    with tarfile.open(next(tmp_path.glob("pytest_elr-*.tar.gz"))) as tar:
        members = {m.split("/", 1)[1] for m in tar.getnames() if "/" in m}
    assert set(recipes) <= members, set(recipes) - members
    assert "LICENSE" in members


@pytest.fixture
def fresh_namespace() -> Iterator[str]:
    """A tag namespace of this test's own; its images are removed afterwards, by name."""
    ns = f"elr-downstream-{secrets.token_hex(4)}"
    yield ns
    tags = [t for t in run("docker", "images", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
            if t.startswith(ns + "/")]
    # A container made from this namespace's images would keep them: a leak of the run under test,
    # removed and then reported. Matched by the name it was made from, never by `ancestor=`: these
    # images share their IDs with the set-up's own (one build cache), so `ancestor=` also matched the
    # clusters another xdist worker was running, and removed them mid-run (CI, 2026-11-28).
    made = [line.split(" ", 1) for line in
            run("docker", "ps", "-a", "--format", "{{.ID}} {{.Image}}").stdout.splitlines() if " " in line]
    leaked = [(cid, image) for cid, image in made if image.startswith(ns + "/")]
    for cid, _ in leaked:
        run("docker", "rm", "-f", cid)
    removed = run("docker", "rmi", *tags) if tags else None
    assert not leaked, f"containers of the test's images were left running: {leaked}"
    assert removed is None or removed.returncode == 0, f"the test's images stay: {removed.stderr}"


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The wheel in a bare virtual environment: its bin directory, and only what a user's shell has
    (no PYTHONPATH into the checkout, the venv first on PATH)."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    wheel = next(dist.glob("pytest_elr-*.whl"))
    done = run(env_dir / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel)
    assert done.returncode == 0, done.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_ELR_", "PYTHON"))}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env_dir / "bin", env


#: a user's Python tests: the legacy profile loses acknowledged records (its last ISR member comes
#: back from a power cut and is elected again); undeclared that fails the test, declared it passes
LOSSY_TESTS = """
import pytest

def lose(c):
    assert c.produce(10).acked == 10
    c.isolate(0, from_="all")
    c.isolate(1)
    c.power_off(2)
    c.heal()
    c.restart(2)

@pytest.mark.elr_profile("legacy")
def test_undeclared_loss(elr_cluster):
    lose(elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2))

@pytest.mark.elr_profile("legacy")
@pytest.mark.elr_verdict(acked_loss="found")
def test_declared_loss(elr_cluster):
    lose(elr_cluster(brokers=3, replicas=[0, 1, 2], min_insync_replicas=2))
"""


def test_from_the_wheel_a_python_test_is_judged_as_a_scenario(installed: tuple[Path, dict[str, str]],
                                                              tmp_path: Path) -> None:
    bin_dir, env = installed
    (tmp_path / "test_lossy.py").write_text(LOSSY_TESTS)
    model = run(bin_dir / "python", "-m", "pytest", "-p", "no:cacheprovider", "--strict-markers",
                "--rootdir", tmp_path, tmp_path, "--elr-backend=model", "-rA", cwd=tmp_path, env=env)
    out = model.stdout + model.stderr
    assert model.returncode == 1, out[-3000:]
    assert "1 failed, 1 passed" in model.stdout, out[-3000:]
    assert "FAILED test_lossy.py::test_undeclared_loss" in model.stdout, out[-3000:]
    assert "10 acknowledged acks=all records lost" in model.stdout, out[-3000:]
    assert "Traceback" not in out


def test_from_the_wheel_xdist_exits_as_one_process_does_with_schema_valid_junit(
        installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """``-n 2`` on the model with nothing but the wheel and pytest-xdist (no pyspark: the inline
    checker judges, and the controller, which runs no test, must know that too): exit 0 as without
    ``-n``, one verdict table, and a JUnit file that is valid xunit2 -- a YAML suite, a Python test
    and a Python test with its loss declared."""
    bin_dir, env = installed
    project = tmp_path / "downstream"
    shutil.copytree(ROOT / "examples" / "downstream", project)
    (project / "test_lossy.py").write_text(LOSSY_TESTS)
    xdist = run(bin_dir / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", "pytest-xdist>=3.5",
                env=env)
    assert xdist.returncode == 0, xdist.stderr[-3000:]
    cmd = [bin_dir / "python", "-m", "pytest", "-p", "no:cacheprovider", "--strict-markers", "--rootdir", project,
           project, "--elr-backend=model", "-k", "not test_undeclared_loss"]  # the one that fails by design
    alone = run(*cmd, "--junitxml", tmp_path / "alone.xml", cwd=project, env=env)
    spread = run(*cmd, "-n", "2", "--junitxml", tmp_path / "spread.xml", cwd=project, env=env)
    for done in (alone, spread):
        out = done.stdout + done.stderr
        assert done.returncode == 0, out[-4000:]
        assert "4 passed" in done.stdout and "VERDICTS NOT CONFIRMED" not in out, out[-4000:]
        assert done.stdout.count("pytest-elr verdicts") == 1 and "loss found (10)" in done.stdout, out[-4000:]
        assert "Traceback" not in out
    for xml in ("alone.xml", "spread.xml"):
        XUNIT2.validate(tmp_path / xml)


def test_the_shipped_kip_suite_runs_from_the_install(installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """In an empty directory: the KIP suite under pytest (``--pyargs``) on the model, and the commands
    that default to it; a path with no scenarios is an error, not an empty suite."""
    bin_dir, env = installed
    suite = run(bin_dir / "python", "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", tmp_path,
                "--pyargs", "pytest_elr.scenarios", "--elr-backend=model", "--elr-checker=inline",
                cwd=tmp_path, env=env)
    assert suite.returncode == 0, suite.stdout[-3000:] + suite.stderr[-3000:]
    shipped = [load_scenario(p) for p in sorted((ROOT / "scenarios").glob("*.elr.yaml"))]
    runs = sum(len(s.profiles) for s in shipped if s.runs_on("model"))
    real_only = sum(not s.runs_on("model") for s in shipped)  # skipped on the model, with their reason
    summary = f"{runs} passed, {real_only} skipped" if real_only else f"{runs} passed"
    assert summary in suite.stdout, suite.stdout[-3000:]
    assert "kip966-last-replica-standing" in suite.stdout, suite.stdout[-3000:]  # the verdict table's row

    bench = run(bin_dir / "elr", "bench", "suite", cwd=tmp_path, env=env)
    assert bench.returncode == 0 and f"on the model: {runs} runs" in bench.stdout, bench.stdout + bench.stderr
    mutants = run(bin_dir / "elr", "mutants", "--examples", "0", cwd=tmp_path, env=env)
    killed = mutants.stdout.strip().splitlines()[-1]
    assert killed.startswith("killed ") and int(killed.split()[1]) >= 12, mutants.stdout[-2000:] + mutants.stderr
    (tmp_path / "empty").mkdir()
    empty = run(bin_dir / "elr", "mutants", "--scenarios", tmp_path / "empty", cwd=tmp_path, env=env)
    assert empty.returncode == 2 and "no scenario files" in empty.stderr, empty.stdout + empty.stderr


@pytest.mark.docker
def test_from_the_wheel_alone_model_then_images_then_kafka_with_xdist(installed: tuple[Path, dict[str, str]],
                                                                     tmp_path: Path, fresh_namespace: str) -> None:
    bin_dir, env = installed
    python, env = bin_dir / "python", dict(env)
    env_dir = bin_dir.parent
    project = tmp_path / "downstream"  # no checkout anywhere above it
    shutil.copytree(ROOT / "examples" / "downstream", project)
    pytest_cmd = [python, "-m", "pytest", "-p", "no:cacheprovider", "--strict-markers", "--rootdir",
                  project, project]  # not -q: it would keep only the rows of runs that did not pass

    where = run(python, "-c", "import pytest_elr; print(pytest_elr.__file__)", cwd=project, env=env)
    assert str(env_dir) in where.stdout, f"plugin not loaded from the wheel: {where.stdout}{where.stderr}"

    # 1. Right after the bare install: the model backend and the default checker (no pyspark).
    model = run(*pytest_cmd, "--elr-backend=model", cwd=project, env=env)
    assert model.returncode == 0, model.stdout[-3000:] + model.stderr[-3000:]
    assert "3 passed" in model.stdout, model.stdout[-3000:]
    assert "Traceback" not in model.stdout + model.stderr

    # 2. The node image from the wheel's recipes, under a namespace nothing else uses. The host's
    # build cache (jars, the Toxiproxy binary) and this machine's base image keep it short.
    env |= {images.NAMESPACE_ENV: fresh_namespace, images.BASE_IMAGE_ENV: images.build_base()}
    for k in (images.BUILD_DIR_ENV,):
        if os.environ.get(k):
            env[k] = os.environ[k]
    tag = run(bin_dir / "elr", "images", "tag", cwd=project, env=env).stdout.strip()
    assert tag.startswith(f"{fresh_namespace}/kafka-node:{images.DEFAULT_KAFKA_VERSION}-"), tag
    assert run("docker", "image", "inspect", tag).returncode != 0, "a fresh namespace has no image yet"
    built = run(bin_dir / "elr", "images", "build", cwd=project, env=env)
    assert built.returncode == 0, built.stderr[-3000:]
    assert built.stdout.strip() == tag

    # 3. Real Kafka with two xdist workers: the YAML suite (two profiles) and the Python test.
    xdist = run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "pytest-xdist>=3.5")
    assert xdist.returncode == 0, xdist.stderr[-3000:]
    kafka = run(*pytest_cmd, "-n", "2", "--elr-checker=inline", cwd=project, env=env, timeout=900)
    out = kafka.stdout + kafka.stderr
    assert kafka.returncode == 0, out[-5000:]
    assert "3 passed" in kafka.stdout, out[-5000:]
    assert "downstream-last-replica-standing" in kafka.stdout and "loss found" in kafka.stdout, out[-5000:]
