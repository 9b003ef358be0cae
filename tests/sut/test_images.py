"""The image build's settings and checks: Kafka versions, the Debian mirror, the recipe hash that an
image must carry, and a build on a given base image (``$PYTEST_ELR_BASE_IMAGE``)."""

from __future__ import annotations

import io
import os
import secrets
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_elr.sut import images, resources
from pytest_elr.sut.errors import BuildStepError, ImageMissingError
from pytest_elr.sut.images import ImageMismatchError
from pytest_elr.sut.record_batches import batches, record_values


def test_elr_images_reads_a_list_or_a_named_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert images.main(["tag", "--kafka-version", "ci", "--kafka-version", "4.0.2,4.1.0"]) == 0
    tags = capsys.readouterr().out.split()
    assert [t.split(":")[1].split("-")[0] for t in tags] == [images.NEWEST_KAFKA_VERSION, "4.0.2", "4.1.0"]
    assert images.NEWEST_KAFKA_VERSION == "4.4.0" and len(images.KNOWN_KAFKA_VERSIONS) == 12
    assert images.main(["tag", "--kafka-version", "all"]) == 1
    assert "known releases: 4.0.0, 4.0.1" in capsys.readouterr().err


def _sources(tmp_path: Path, files: dict[str, str]) -> list[str]:
    d = tmp_path / "sources.list.d"
    d.mkdir()
    for name, text in files.items():
        (d / name).write_text(text)
    return [str(tmp_path / "sources.list"), str(d)]


def test_mirror_from_a_deb822_source_serving_bookworm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(images.MIRROR_ENV, raising=False)
    sources = _sources(tmp_path, {"debian.sources": (
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n\n"
        "Types: deb\nURIs: http://vendor.example/linux/debian\nSuites: bookworm\nComponents: stable\n\n"
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n")})
    assert images.debian_mirror(sources) == "http://mirror.example/debian"


def test_mirror_from_a_one_line_source_with_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(images.MIRROR_ENV, raising=False)
    (tmp_path / "sources.list").write_text(
        "deb http://mirror.example/debian-security bookworm-security main\n"
        "deb [arch=amd64] https://vendor.example/linux/debian bookworm stable\n"
        "# deb http://old.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main\n")
    assert images.debian_mirror(_sources(tmp_path, {})) == "http://mirror.example/debian"


def test_an_ubuntu_host_names_no_debian_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(images.MIRROR_ENV, raising=False)
    sources = _sources(tmp_path, {
        "ubuntu.sources": "Types: deb\nURIs: http://archive.example/ubuntu\nSuites: noble noble-updates\n"
                          "Components: main universe\n",
        "docker.list": "deb [arch=amd64] https://packages.example/linux/ubuntu noble stable\n"})
    with pytest.raises(BuildStepError, match="no Debian mirror serving bookworm") as e:
        images.debian_mirror(sources)
    assert images.MIRROR_ENV in str(e.value) and images.BASE_IMAGE_ENV in str(e.value)


def test_the_mirror_setting_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(images.MIRROR_ENV, "http://set.example/debian")
    assert images.debian_mirror(_sources(tmp_path, {})) == "http://set.example/debian"


def test_the_recipe_hash_covers_every_recipe_file_but_the_tests(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    with images.recipe_path(".") as src:
        shutil.copytree(src, tmp_path / "recipes")
    monkeypatch.setattr(images, "RECIPES", tmp_path / "recipes")
    before = images.recipe_hash()
    (tmp_path / "recipes/toxiproxy/kafka_hold_test.go").write_text("// a test changes no image\n")
    assert images.recipe_hash() == before
    for changed in ("kafka-node/kafka-ctl", "kafka-node/pom.xml.in", "toxiproxy/kafka_hold.go"):
        with (tmp_path / "recipes" / changed).open("a") as f:
            f.write("\n")
        assert images.recipe_hash() != before, changed
        before = images.recipe_hash()
    assert images.node_tag("4.0.0").endswith(f"/kafka-node:4.0.0-{before}")


def test_an_image_from_other_recipes_is_refused_with_the_fix() -> None:
    ok = {images.RECIPE_HASH_LABEL: images.recipe_hash(), "pytest-elr.kafka-version": "4.1.0"}
    images.verify_image("x/kafka-node:4.1.0-h", ok, "4.1.0")
    for labels, what in (({**ok, images.RECIPE_HASH_LABEL: "0123456789ab"}, "recipe hash 0123456789ab"),
                         ({}, "not a pytest-elr node image"),
                         (ok | {"pytest-elr.kafka-version": "4.0.0"}, "Kafka 4.0.0, not 4.1.0")):
        with pytest.raises(ImageMismatchError, match=what) as e:
            images.verify_image("x/kafka-node:4.1.0-h", labels, "4.1.0")
        assert "image x/kafka-node:4.1.0-h" in str(e.value)
        assert "fix: `elr images build --kafka-version 4.1.0`" in str(e.value)


def test_a_namespace_must_be_a_repository_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(images.NAMESPACE_ENV, "Bad Name")
    with pytest.raises(ImageMissingError, match="not a Docker repository name"):
        images.node_tag("4.3.1")
    monkeypatch.setenv(images.NAMESPACE_ENV, "elr-test/ns1")
    assert images.node_tag("4.3.1").startswith("elr-test/ns1/kafka-node:4.3.1-")


# ------------------------------------------------------------------ with a Docker engine


def _docker(*args: str) -> str:
    p = subprocess.run(["docker", *args], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


@pytest.fixture
def fresh_namespace(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A namespace of this test's own; every image tagged in it is removed afterwards (by name)."""
    ns = f"elr-test-{secrets.token_hex(4)}"
    monkeypatch.setenv(images.NAMESPACE_ENV, ns)
    yield ns
    tags = _docker("images", "--format", "{{.Repository}}:{{.Tag}}").split()
    for tag in [t for t in tags if t.startswith(ns + "/")]:
        subprocess.run(["docker", "rmi", tag], capture_output=True)


@pytest.mark.docker
def test_a_node_image_built_on_a_given_base_image(fresh_namespace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """$PYTEST_ELR_BASE_IMAGE: no debootstrap and no mirror needed (this host's apt sources are not
    even read), the node is built on the given image and carries it and the recipe hash as labels."""
    monkeypatch.delenv(images.BASE_IMAGE_ENV, raising=False)
    with monkeypatch.context() as default:  # the set-up's own base, as a user's local slim Debian
        default.setenv(images.NAMESPACE_ENV, images.DEFAULT_NAMESPACE)
        debootstrapped = images.build_base()
    given = f"{fresh_namespace}/slim:bookworm"
    _docker("tag", debootstrapped, given)
    monkeypatch.setenv(images.BASE_IMAGE_ENV, given)

    def no_mirror(*_: object) -> str:
        raise AssertionError("the mirror was looked up although a base image is given")

    monkeypatch.setattr(images, "debian_mirror", no_mirror)
    # The set-up's own base and default release: Docker's cache (keyed on the base's image id and each
    # step's inputs) spares the minutes of a debootstrap, another release's download and prepare-node;
    # what is under test -- the given base, no mirror looked up, the labels -- is the same.
    version = images.DEFAULT_KAFKA_VERSION
    built = images.build(version)
    assert built.node == images.node_tag(version) and built.base == given
    labels = images.resources.docker_client().images.get(built.node).labels
    assert labels["pytest-elr.base"] == given
    assert labels[images.RECIPE_HASH_LABEL] == images.recipe_hash()
    assert images.resolve_image(version) == built.node


@pytest.mark.docker
def test_resolving_refuses_an_image_whose_label_is_another_recipes(fresh_namespace: str, tmp_path: Path) -> None:
    """Under the very tag the installed recipes give, an image built from other recipes is refused.
    It starts from the default release's image: the one image every set-up builds (``./elr``)."""
    version = images.DEFAULT_KAFKA_VERSION
    real = images.resolve_image(version, images.node_tag(version).replace(fresh_namespace, images.DEFAULT_NAMESPACE))
    (tmp_path / "Dockerfile").write_text(f"FROM {real}\nLABEL {images.RECIPE_HASH_LABEL}=0123456789ab\n")
    _docker("build", "-q", "-t", images.node_tag(version), str(tmp_path))
    with pytest.raises(ImageMismatchError, match=r"recipe hash 0123456789ab.*\nfix: `elr images build"):
        images.resolve_image(version)


def _files_in(container: Any, directory: str) -> dict[str, bytes]:
    """Every file under ``directory``, through Docker's archive API (an exec's output can be cut
    under load)."""
    stream, _ = container.get_archive(directory)
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read()  # type: ignore[union-attr]
                for m in tar.getmembers() if m.isfile()}


def _records(data: bytes) -> list[tuple[int, int, bool, list[bytes] | int]]:
    """Each batch's offsets and records; a control batch (snapshot header/footer: they hold the
    time of writing) by its record count."""
    return [(b.base_offset, b.last_offset, b.control, b.count if b.control else list(record_values(b)))
            for b in batches(data)]


@pytest.mark.docker
@pytest.mark.parametrize("role", ["broker", "controller"])
def test_the_node_format_writes_what_storagetool_writes(role: str) -> None:
    """``kafka-ctl format`` copies StorageTool's output made at image build: the same files, the
    same meta.properties but a fresh directory id, the same bootstrap records."""
    image = images.resolve_image(images.DEFAULT_KAFKA_VERSION)
    cid = resources.new_cluster_id()
    client = resources.docker_client()
    c = client.containers.run(image, detach=True, name=f"pytest-elr-{cid}-format", labels=resources.labels(cid))
    try:
        listeners = ("listeners=INTERNAL://0.0.0.0:19001\nadvertised.listeners=INTERNAL://b0:19001\n"
                     "listener.security.protocol.map=INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
                     "inter.broker.listener.name=INTERNAL\n" if role == "broker" else
                     "listeners=CONTROLLER://0.0.0.0:19002\nadvertised.listeners=CONTROLLER://c7:19002\n")
        node = 7 if role == "controller" else 0  # a broker is never a voter
        conf = (f"process.roles={role}\nnode.id={node}\ncontroller.quorum.voters=7@c7:19002\n"
                f"controller.listener.names=CONTROLLER\n{listeners}log.dirs=/var/lib/kafka/data\n")
        c.exec_run(["sh", "-c", f"printf '%s' '{conf}' > /etc/kafka/server.properties"])
        fmt = c.exec_run(["/opt/elr/bin/kafka-ctl", "format", "ClusterIdForTheTest001", "1"])
        assert fmt.exit_code == 0 and b"template" in fmt.output, fmt.output
        tool = c.exec_run(["sh", "-c", "sed 's#^log.dirs=.*#log.dirs=/tmp/by-tool#' /etc/kafka/server.properties"
                           " > /tmp/tool.properties && java -Xmx128m -cp '/opt/kafka/libs/*' "
                           "-Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties kafka.tools.StorageTool"
                           " format -t ClusterIdForTheTest001 -c /tmp/tool.properties"
                           " --feature eligible.leader.replicas.version=1"])
        assert tool.exit_code == 0, tool.output[-2000:]
        ours, theirs = _files_in(c, "/var/lib/kafka/data"), _files_in(c, "/tmp/by-tool")
    finally:
        resources.remove_cluster(cid, client)
    assert sorted(ours) == sorted(theirs) and "meta.properties" in ours
    props = [dict(line.split("=", 1) for line in f["meta.properties"].decode().splitlines() if "=" in line)
             for f in (ours, theirs)]
    assert props[0]["directory.id"] != props[1]["directory.id"]
    assert {**props[0], "directory.id": ""} == {**props[1], "directory.id": ""}
    assert props[0]["node.id"] == str(node) and props[0]["cluster.id"] == "ClusterIdForTheTest001"
    for name in set(ours) - {"meta.properties"}:
        assert _records(ours[name]) == _records(theirs[name]) and _records(ours[name]), name


@pytest.mark.docker
def test_prune_keeps_only_the_named_releases_node_images(fresh_namespace: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """What CI runs first (``PYTEST_ELR_PRUNE_IMAGES=1``): another release's node image and one of
    older recipes go; the kept release's image and images outside the node repository stay."""
    (tmp_path / "Dockerfile").write_text("FROM scratch\nLABEL pytest-elr.test=prune\n")
    kept, other = images.node_tag(images.DEFAULT_KAFKA_VERSION), images.node_tag("4.3.1")
    stale = f"{fresh_namespace}/kafka-node:{images.DEFAULT_KAFKA_VERSION}-0123456789ab"
    unrelated = f"{fresh_namespace}/base:bookworm-test"
    for tag in (kept, other, stale, unrelated):
        _docker("build", "-q", "-t", tag, str(tmp_path))
    assert images.main(["prune", "--kafka-version", images.DEFAULT_KAFKA_VERSION]) == 0
    assert f"removed {other}" in capsys.readouterr().err
    left = set(_docker("images", "--format", "{{.Repository}}:{{.Tag}}").split())
    assert kept in left and unrelated in left
    assert other not in left and stale not in left


# ------------------------------------------------------------------ a Kafka build of one's own

ROOT = Path(__file__).resolve().parents[2]


def apache_layout_tarball(libs: Path, version: str, out: Path) -> Path:
    """``kafka_2.13-<version>.tgz`` as ``./gradlew releaseTarGz`` lays it out (one top directory with
    bin/ config/ libs/), its libs/ the jars Maven Central gave the release's own image."""
    top = f"kafka_2.13-{version}"
    with tarfile.open(out, "w:gz") as tar:
        for d in ("bin", "config", "libs"):
            info = tarfile.TarInfo(f"{top}/{d}")
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name, text in ((f"{top}/bin/kafka-server-start.sh", "#!/bin/sh\nexec java kafka.Kafka \"$@\"\n"),
                           (f"{top}/config/server.properties", "process.roles=broker,controller\n")):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(text), 0o755
            tar.addfile(info, io.BytesIO(text.encode()))
        for jar in sorted(libs.glob("*.jar")):
            tar.add(jar, arcname=f"{top}/libs/{jar.name}")
    return out


@pytest.mark.docker
def test_a_kafka_dist_tarball_builds_its_image_and_runs_a_scenario(
        fresh_namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A contributor's ``releaseTarGz`` (assembled here from the default release's Maven Central jars,
    already cached: nothing is downloaded) through ``pytest --elr-kafka-dist``: the plugin builds the
    dist's image, labelled with its hash and version, and a real scenario passes on it. The image is
    of this test's namespace, removed afterwards with its containers."""
    version = images.DEFAULT_KAFKA_VERSION
    monkeypatch.setenv(images.NAMESPACE_ENV, images.DEFAULT_NAMESPACE)  # this machine's own cache and base
    libs = images.resolve_kafka_classpath(version)
    base = images.build_base()
    toxiproxy = images.build_toxiproxy()
    monkeypatch.setenv(images.NAMESPACE_ENV, fresh_namespace)
    build = tmp_path / "build"  # the dist is unpacked here, not in the shared cache
    shutil.copytree(toxiproxy.parent, build / toxiproxy.parent.name)
    tarball = apache_layout_tarball(libs, version, tmp_path / f"kafka_2.13-{version}.tgz")
    env = {**os.environ, images.NAMESPACE_ENV: fresh_namespace, images.BASE_IMAGE_ENV: base,
           images.BUILD_DIR_ENV: str(build), "PYTEST_ELR_BACKEND": "kafka"}
    env.pop("PYTEST_ELR_KAFKA_VERSION", None)
    env.pop("PYTEST_ELR_KAFKA_IMAGE", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "scenarios/kip966_effective_min_isr.elr.yaml", "-p", "no:randomly",
         "--elr-kafka-dist", str(tarball), "--elr-profile=kafka", "--elr-checker=inline", "-q", "-rA"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "1 passed" in run.stdout, run.stdout[-2000:]
    monkeypatch.setenv(images.BUILD_DIR_ENV, str(build))
    dist = images.load_dist(tarball)
    assert dist.version == version and dist.libs.is_relative_to(build)
    tag = images.dist_tag(dist)
    labels = resources.docker_client().images.get(tag).labels
    assert labels[images.DIST_HASH_LABEL] == dist.libs_hash
    assert labels["pytest-elr.kafka-version"] == version and labels["pytest-elr.kafka-dist-version"] == version
    assert labels["pytest-elr.kafka-dist-source"] == str(tarball.resolve())
    assert labels[images.RECIPE_HASH_LABEL] == images.recipe_hash()
    assert _docker("ps", "-a", "-q", "--filter", f"ancestor={tag}") == ""  # the session closed its cluster


@pytest.mark.docker
def test_prune_keeps_the_named_kafka_dists_image_only(fresh_namespace: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A dist's image is pruned like another release's, unless the dist is named (``--kafka-dist``,
    or ``$PYTEST_ELR_KAFKA_DIST``: what the next ``pytest`` run would use)."""
    import zipfile

    from pytest_elr.sut.kafka_dist import DIST_ENV

    monkeypatch.setenv(images.BUILD_DIR_ENV, str(tmp_path / "build"))
    monkeypatch.delenv(DIST_ENV, raising=False)

    def dist(name: str) -> Path:
        (tmp_path / name / "libs").mkdir(parents=True)
        with zipfile.ZipFile(tmp_path / name / "libs" / "kafka_2.13-4.4.0.jar", "w") as z:
            z.writestr("kafka/Kafka.class", name)
        return tmp_path / name

    named, other = dist("named"), dist("other")
    (tmp_path / "Dockerfile").write_text("FROM scratch\nLABEL pytest-elr.test=prune\n")
    named_tag, other_tag = images.dist_tag(images.load_dist(named)), images.dist_tag(images.load_dist(other))
    for tag in (named_tag, other_tag):
        _docker("build", "-q", "-t", tag, str(tmp_path))
    assert images.main(["prune", "--kafka-dist", str(named)]) == 0
    assert f"removed {other_tag}" in capsys.readouterr().err
    left = set(_docker("images", "--format", "{{.Repository}}:{{.Tag}}").split())
    assert named_tag in left and other_tag not in left
    monkeypatch.setenv(DIST_ENV, str(named))
    assert images.main(["prune"]) == 0
    assert named_tag in set(_docker("images", "--format", "{{.Repository}}:{{.Tag}}").split())
    monkeypatch.delenv(DIST_ENV)
    assert images.main(["prune"]) == 0
    assert named_tag not in set(_docker("images", "--format", "{{.Repository}}:{{.Tag}}").split())
