"""Build the container images without a registry, idempotently, from the recipes in the package.

    elr images build [--kafka-version 4.3.1|4.0.2,4.4.0|all-4x|ci]... [--force]
    elr images tag   [--kafka-version ...]      # print the tag the installed recipes give
    elr images prune [--kafka-version ...]      # remove every node image but the default's and these
    elr images build --kafka-dist kafka_2.13-4.5.0-SNAPSHOT.tgz   # a Kafka build of your own (kafka_dist)

The recipes (``pytest_elr/sut/recipes/``: ``kafka-node/``, ``toxiproxy/``) are package data, read
with :mod:`importlib.resources`, so an installed wheel builds its own images. Steps (each named in
a :class:`BuildStepError` when it fails):

1. ``base``: ``$PYTEST_ELR_BASE_IMAGE`` (a Debian bookworm image the engine has or can pull), or
   ``debootstrap --variant=minbase bookworm`` from ``$PYTEST_ELR_DEBIAN_MIRROR`` (default: the
   host's apt sources, when they name a Debian mirror serving bookworm) and ``docker import``.
2. ``toxiproxy``: ``go build`` of ``recipes/toxiproxy`` (Toxiproxy as a library plus our toxics),
   ``CGO_ENABLED=0``, through the Go module proxy, on the host.
3. ``kafka-classpath``: ``mvn dependency:copy-dependencies`` on ``recipes/kafka-node/pom.xml.in``
   plus the SLF4J->log4j2 binding that Kafka's tarball ships but its POM lacks.
4. ``kafka-node``: ``docker build`` of ``recipes/kafka-node/Dockerfile`` with the FUSE layer's
   source (``pytest_elr/lazyfs/*.py``) in the context.

Every node image carries the label ``pytest-elr.recipe-hash``: a hash of every recipe file and the
FUSE layer's source, also in its tag ``<namespace>/kafka-node:<kafka>-<hash>``. The plugin runs
only an image whose hash is the installed recipes' own (:func:`verify_image`): the control script
and the disk layer inside must be the ones this plugin talks to. An image whose tag exists is not
rebuilt. Host tool outputs (Go binary, jars) are cached in ``$PYTEST_ELR_BUILD_DIR`` (default
``~/.cache/pytest-elr/build``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources as importlib_resources
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

import docker.errors

from pytest_elr.core.versions import KNOWN_KAFKA_VERSIONS, NEWEST, VERSION_SETS, VersionError, resolve_versions
from pytest_elr.sut import resources
from pytest_elr.sut.errors import BuildStepError, ImageMissingError, KafkaDistError, UnknownKafkaVersionError
from pytest_elr.sut.kafka_dist import DIST_ENV, KafkaDist, open_dist

# Which releases exist and the named sets (all-4x, ci, ...) live in core.versions, one place for
# the plugin's --elr-kafka-version and for this build; every listed release builds and starts.
NEWEST_KAFKA_VERSION = NEWEST
# The default is the newest release: the whole suite passes on it (2026-11-23, docs/matrix.md).
DEFAULT_KAFKA_VERSION = NEWEST
SUITE = "bookworm"
LABEL_PREFIX = "pytest-elr"
RECIPE_HASH_LABEL = f"{LABEL_PREFIX}.recipe-hash"
DIST_HASH_LABEL = f"{LABEL_PREFIX}.kafka-dist-hash"
# Bump to force rebuilds when the build logic in this module changes what an image holds.
RECIPE_VERSION = "2"
BASE_RECIPE_VERSION = "1"  # the debootstrap'ed base's own (it changes far less often)

NAMESPACE_ENV = "PYTEST_ELR_IMAGE_NAMESPACE"
BASE_IMAGE_ENV = "PYTEST_ELR_BASE_IMAGE"
MIRROR_ENV = "PYTEST_ELR_DEBIAN_MIRROR"
BUILD_DIR_ENV = "PYTEST_ELR_BUILD_DIR"
DEFAULT_NAMESPACE = "pytest-elr"

RECIPES: Traversable = importlib_resources.files("pytest_elr.sut") / "recipes"
# The FUSE layer's source, copied into the node image (and hashed with the recipes).
LAZYFS: Traversable = importlib_resources.files("pytest_elr.lazyfs")


# ---------------------------------------------------------------- settings


def build_dir() -> Path:
    return Path(os.environ.get(BUILD_DIR_ENV) or Path.home() / ".cache/pytest-elr/build")


def namespace() -> str:
    """The repository prefix of our images (a fresh one never reuses another install's images)."""
    ns = os.environ.get(NAMESPACE_ENV) or DEFAULT_NAMESPACE
    if not re.fullmatch(r"[a-z0-9]+(?:[._/-][a-z0-9]+)*", ns):
        raise ImageMissingError(f"${NAMESPACE_ENV}={ns!r} is not a Docker repository name.\n"
                                "fix: lower-case letters, digits and . _ - / between them")
    return ns


_DEBIAN_SOURCES = ("/etc/apt/sources.list", "/etc/apt/sources.list.d")


def debian_mirror(sources: Sequence[str] = _DEBIAN_SOURCES) -> str:
    """``$PYTEST_ELR_DEBIAN_MIRROR``, else the mirror the host's apt sources use for Debian bookworm.

    Only a source of bookworm's ``main`` component counts (not ``bookworm-security``, not a vendor's
    ``bookworm stable``): an Ubuntu host names no Debian mirror, and guessing from an unrelated
    list made debootstrap fail obscurely.
    """
    if os.environ.get(MIRROR_ENV):
        return os.environ[MIRROR_ENV]
    files: list[Path] = []
    for s in sources:
        p = Path(s)
        files += sorted(p.glob("*.sources")) + sorted(p.glob("*.list")) if p.is_dir() else [p]
    for f in (f for f in files if f.is_file()):
        text = f.read_text(errors="replace")
        if f.suffix == ".sources":  # deb822 stanzas
            for stanza in re.split(r"\n\s*\n", text):
                uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
                suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
                components = re.search(r"^Components:\s*(.+)$", stanza, re.M)
                if (uris and suites and components and SUITE in suites.group(1).split()
                        and "main" in components.group(1).split()):
                    return uris.group(1)
        else:  # one-line form: deb [options] URI SUITE COMPONENT...
            for line in text.splitlines():
                words = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
                if len(words) >= 4 and words[0] == "deb" and words[2] == SUITE and "main" in words[3:]:
                    return words[1]
    raise BuildStepError(
        "base", f"no Debian mirror serving {SUITE} in the host's apt sources ({', '.join(sources)})",
        f"set {MIRROR_ENV} to a Debian mirror's URL (for debootstrap, as root), or {BASE_IMAGE_ENV} "
        f"to a Debian {SUITE} image the Docker engine has or can pull (no root needed)")


# ---------------------------------------------------------------- recipes and tags


@contextlib.contextmanager
def recipe_path(name: str) -> Iterator[Path]:
    """A recipe file or directory on the file system (extracted if the package is zipped)."""
    with importlib_resources.as_file(RECIPES / name) as p:
        yield Path(p)


def _files(d: Traversable) -> list[Traversable]:
    return sorted((p for p in d.iterdir() if p.is_file()), key=lambda p: p.name)


def _toxiproxy_sources() -> list[Traversable]:
    """The server's source (its tests do not change the binary)."""
    return [p for p in _files(RECIPES / "toxiproxy")
            if p.name in ("go.mod", "go.sum") or (p.name.endswith(".go") and not p.name.endswith("_test.go"))]


def _lazyfs_sources() -> list[Traversable]:
    return [p for p in _files(LAZYFS) if p.name.endswith(".py")]


def _recipe_files() -> list[tuple[str, Traversable]]:
    """Every file an image is made from, by the name it is hashed under."""
    node = [(f"kafka-node/{p.name}", p) for p in _files(RECIPES / "kafka-node")]
    tox = [(f"toxiproxy/{p.name}", p) for p in _toxiproxy_sources()]
    lazy = [(f"lazyfs/{p.name}", p) for p in _lazyfs_sources()]
    found = node + tox + lazy
    if not node or not tox or not lazy:
        raise ImageMissingError(f"the image recipes are incomplete in {RECIPES} (a broken install?)")
    return found


def _hash(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else p.encode())
        h.update(b"\0")
    return h.hexdigest()[:12]


def recipe_hash() -> str:
    """The hash of the installed recipes: every file of the node image and the FUSE layer."""
    return _hash(RECIPE_VERSION, *(n.encode() + b"=" + p.read_bytes() for n, p in _recipe_files()))


def toxiproxy_version() -> str:
    """The Toxiproxy release the server is built on, as ``recipes/toxiproxy/go.mod`` requires it."""
    m = re.search(r"github\.com/Shopify/toxiproxy/v2\s+(v\S+)", (RECIPES / "toxiproxy" / "go.mod").read_text())
    if not m:
        raise ImageMissingError("recipes/toxiproxy/go.mod does not require Toxiproxy")
    return m.group(1)


def node_tag(kafka_version: str) -> str:
    return f"{namespace()}/kafka-node:{kafka_version}-{recipe_hash()}"


def dist_tag(dist: KafkaDist) -> str:
    """A distribution's node image: named by its jars and the recipes, so a changed patch or
    changed recipes get an image of their own."""
    return f"{namespace()}/kafka-node:dist-{_hash(recipe_hash(), dist.libs_hash)}"


def load_dist(path: str | os.PathLike[str]) -> KafkaDist:
    """The distribution at ``path`` (a tarball is unpacked in the build directory)."""
    return open_dist(path, build_dir())


def base_ref() -> str:
    """The base image: ``$PYTEST_ELR_BASE_IMAGE``, or our debootstrap'ed one for the mirror."""
    given = os.environ.get(BASE_IMAGE_ENV)
    if given:
        return given
    return f"{namespace()}/base:{SUITE}-{_hash(BASE_RECIPE_VERSION, SUITE, 'minbase', debian_mirror())}"


def build_command(kafka_version: str) -> str:
    return f"elr images build --kafka-version {kafka_version}"


class ImageMismatchError(ImageMissingError):
    """An image exists under the name but was not built from the installed recipes."""


def verify_image(ref: str, labels: dict[str, str] | None, kafka_version: str) -> None:
    """Refuse a node image not built from the installed recipes for ``kafka_version``."""
    labels = labels or {}
    want = recipe_hash()
    got = labels.get(RECIPE_HASH_LABEL, "")
    got_version = labels.get(f"{LABEL_PREFIX}.kafka-version", "")
    if got == want and got_version == kafka_version:
        return
    what = (f"Kafka {got_version or '?'}, not {kafka_version}" if got == want else
            f"recipe hash {got or '(none: not a pytest-elr node image)'}, the installed plugin's is {want}")
    raise ImageMismatchError(
        f"image {ref} was not built from this plugin's recipes ({what}): the control script and "
        f"disk layer inside may not match.\nfix: `{build_command(kafka_version)}`")


def resolve_image(kafka_version: str, image: str | None = None) -> str:
    """The node image to run: ``image`` if given, else the tag the installed recipes build.

    Raises :class:`ImageMissingError` naming the build command when it is not built, or
    :class:`ImageMismatchError` when it was built from other recipes (or for another version).
    """
    client = resources.docker_client()
    tag = image or node_tag(kafka_version)
    try:
        found = client.images.get(tag)
    except docker.errors.ImageNotFound:
        cmd = build_command(kafka_version)
        if kafka_version not in KNOWN_KAFKA_VERSIONS:
            raise UnknownKafkaVersionError(
                f"no image for Kafka {kafka_version}; versions this plugin builds: "
                f"{', '.join(KNOWN_KAFKA_VERSIONS)}") from None
        raise ImageMissingError(f"image {tag} is missing (not built from the installed recipes yet).\n"
                                f"fix: `{cmd}`") from None
    verify_image(tag, found.labels, kafka_version)
    return tag


# ---------------------------------------------------------------- helpers


def _run(step: str, cmd: Sequence[str], *, hint: str = "", **kw: Any) -> str:
    """Run a command; on failure raise BuildStepError with its last output lines."""
    try:
        p = subprocess.run(list(cmd), capture_output=True, text=True, **kw)
    except FileNotFoundError as e:
        raise BuildStepError(step, f"{cmd[0]} is not installed", hint) from e
    if p.returncode != 0:
        tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-25:])
        raise BuildStepError(step, f"`{' '.join(cmd[:4])} ...` exited {p.returncode}:\n{tail}", hint)
    return p.stdout


def _image_exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0


def _log(msg: str) -> None:
    print(f"[images] {msg}", file=sys.stderr, flush=True)


SETUP_HINT = "run `elr images setup-host` as root (installs docker.io and debootstrap, starts dockerd)"


def _check_engine() -> None:
    p = subprocess.run(["docker", "info"], capture_output=True, text=True)
    if p.returncode != 0:
        raise BuildStepError("engine", "no Docker engine answers: " + p.stderr.strip()[-300:], SETUP_HINT)


# ---------------------------------------------------------------- steps


def build_base(force: bool = False) -> str:
    """The base image's reference, debootstrap'ed and imported unless given or present."""
    ref = base_ref()
    if os.environ.get(BASE_IMAGE_ENV):
        if not _image_exists(ref):
            _run("base", ["docker", "pull", ref],
                 hint=f"{BASE_IMAGE_ENV} must name a Debian {SUITE} image the engine has or can pull")
        _log(f"base: {ref} (from ${BASE_IMAGE_ENV})")
        return ref
    if _image_exists(ref) and not force:
        _log(f"base: {ref} exists")
        return ref
    mirror = debian_mirror()
    if os.geteuid() != 0:
        raise BuildStepError("base", "debootstrap needs root",
                             f"run the build as root, or set {BASE_IMAGE_ENV} to a Debian {SUITE} image")
    if not shutil.which("debootstrap"):
        raise BuildStepError("base", "debootstrap is not installed", f"{SETUP_HINT}, or apt-get install debootstrap")
    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="elr-rootfs-", dir=build_dir()))
    try:
        _run("base", ["debootstrap", "--variant=minbase", SUITE, str(root), mirror],
             hint=f"check {MIRROR_ENV} ({mirror}) and free disk space")
        # Keep the image small: apt lists and caches are rebuilt by `apt-get update`.
        for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for f in (root / sub).glob("*"):
                if f.is_file():
                    f.unlink()
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        changes = ["-c", 'CMD ["/bin/bash"]', "-c", f"LABEL {LABEL_PREFIX}.image=base"]
        imp = subprocess.run(["docker", "import", *changes, "-", ref],
                             stdin=tar.stdout, capture_output=True, text=True)
        tar.wait()
        if imp.returncode != 0 or tar.returncode != 0:
            raise BuildStepError("base", "docker import failed: " + imp.stderr.strip()[-500:], SETUP_HINT)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    _log(f"base: built {ref} in {time.monotonic() - t0:.0f}s")
    return ref


def build_toxiproxy(force: bool = False) -> Path:
    """Toxiproxy's server with our toxics, cached by a hash of its source."""
    src_h = _hash(*(p.name.encode() + b"=" + p.read_bytes() for p in _toxiproxy_sources()))
    out = build_dir() / f"toxiproxy-{toxiproxy_version()}-{src_h}"
    binary = out / "server"
    if binary.exists() and not force:
        return binary
    if not shutil.which("go"):
        raise BuildStepError("toxiproxy", "go is not installed", "install Go >= 1.23")
    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-trimpath -mod=readonly"}
    with recipe_path("toxiproxy") as src:
        _run("toxiproxy", ["go", "build", "-ldflags=-s -w", "-o", str(binary), "."],
             cwd=src, env=env, hint="the Go module proxy must be reachable (GOPROXY)")
    _log(f"toxiproxy: built {binary} in {time.monotonic() - t0:.0f}s")
    return binary


def resolve_kafka_classpath(kafka_version: str, force: bool = False) -> Path:
    """Kafka's server classpath from Maven Central, cached per version and pom template."""
    pom = (RECIPES / "kafka-node" / "pom.xml.in").read_text().replace("@KAFKA_VERSION@", kafka_version)
    out = build_dir() / f"kafka-{kafka_version}-{_hash(pom)}"
    libs, done = out / "libs", out / ".complete"
    if done.exists() and not force:
        return libs
    if not shutil.which("mvn"):
        raise BuildStepError("kafka-classpath", "mvn is not installed", "apt-get install maven")
    t0 = time.monotonic()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / "pom.xml").write_text(pom)
    # The release line selects the pom's profile for what that line's POM lacks (4.0: log4j2).
    line = ".".join(kafka_version.split(".")[:2])
    mvn = ["mvn", "-q", "-B", "-f", str(out / "pom.xml"), f"-Dkafka.line={line}"]
    try:
        _run("kafka-classpath", [*mvn, "dependency:copy-dependencies", "-DincludeScope=runtime",
                                 f"-DoutputDirectory={libs}"], hint="Maven Central must be reachable")
    except BuildStepError as e:
        if "Could not find artifact" in e.cause or "could not be resolved" in e.cause:
            raise UnknownKafkaVersionError(
                f"Kafka {kafka_version} does not resolve from Maven Central "
                f"(org.apache.kafka:kafka_2.13:{kafka_version})\n{e.cause}") from e
        raise
    # The binding: match the SLF4J API major version and the log4j-core version.
    slf4j = sorted(libs.glob("slf4j-api-*.jar"))
    core = sorted(libs.glob("log4j-core-*.jar"))
    if not slf4j or not core:
        raise BuildStepError("kafka-classpath",
                             f"slf4j-api or log4j-core missing from Kafka {kafka_version}'s classpath",
                             "the Kafka POM changed; add a profile for its line to recipes/kafka-node/pom.xml.in")
    log4j_ver = core[-1].name[len("log4j-core-"):-len(".jar")]
    binding = "log4j-slf4j2-impl" if slf4j[-1].name.startswith("slf4j-api-2.") else "log4j-slf4j-impl"
    _run("kafka-classpath", [*mvn, "dependency:copy", "-Dtransitive=false",
                             f"-Dartifact=org.apache.logging.log4j:{binding}:{log4j_ver}",
                             f"-DoutputDirectory={libs}"])
    done.write_text(f"{binding}:{log4j_ver}\n")
    _log(f"kafka-classpath: {kafka_version} resolved in {time.monotonic() - t0:.0f}s (+{binding}:{log4j_ver})")
    return libs


@dataclass(frozen=True)
class Built:
    node: str
    base: str
    seconds: float


def build_node(kafka_version: str, force: bool = False) -> Built:
    t_start = time.monotonic()
    tag = node_tag(kafka_version)
    if _image_exists(tag) and not force:
        _log(f"kafka-node: {tag} exists")
        return Built(tag, "", time.monotonic() - t_start)
    base = _docker_build_node(tag, resolve_kafka_classpath(kafka_version), kafka_version, {})
    return Built(tag, base, time.monotonic() - t_start)


def build_dist_node(dist: KafkaDist, force: bool = False) -> Built:
    """The node image of a distribution: the release's build, with the dist's ``libs/`` for the
    jars Maven Central would give. Nothing is downloaded for the jars."""
    t_start = time.monotonic()
    tag = dist_tag(dist)
    if _image_exists(tag) and not force:
        _log(f"kafka-node: {tag} exists ({dist.source})")
        return Built(tag, "", time.monotonic() - t_start)
    labels = {DIST_HASH_LABEL: dist.libs_hash, f"{LABEL_PREFIX}.kafka-dist-version": dist.version,
              f"{LABEL_PREFIX}.kafka-dist-source": str(dist.source)}
    base = _docker_build_node(tag, dist.libs, dist.release, labels)
    return Built(tag, base, time.monotonic() - t_start)


def _docker_build_node(tag: str, libs: Path, kafka_version: str, extra_labels: dict[str, str]) -> str:
    """``docker build`` of the node recipe with ``libs`` as Kafka's classpath; returns the base used."""
    base = build_base()
    toxiproxy = build_toxiproxy()
    t0 = time.monotonic()
    ctx = Path(tempfile.mkdtemp(prefix="elr-ctx-", dir=build_dir()))
    try:
        for p in _files(RECIPES / "kafka-node"):
            (ctx / p.name).write_bytes(p.read_bytes())
        shutil.copy2(toxiproxy, ctx / "toxiproxy-server")
        (ctx / "lazyfs").mkdir()
        for p in _lazyfs_sources():
            (ctx / "lazyfs" / p.name).write_bytes(p.read_bytes())
        (ctx / "kafka-libs").mkdir()
        for jar in sorted(libs.glob("*.jar")):  # the classpath is libs/*.jar: nothing else goes in
            shutil.copy2(jar, ctx / "kafka-libs" / jar.name)
        labels = {
            f"{LABEL_PREFIX}.image": "kafka-node",
            RECIPE_HASH_LABEL: recipe_hash(),
            f"{LABEL_PREFIX}.kafka-version": kafka_version,
            f"{LABEL_PREFIX}.toxiproxy-version": toxiproxy_version(),
            f"{LABEL_PREFIX}.base": base,
            **extra_labels,
        }
        # --force-rm: the legacy builder otherwise leaves a failed step's container behind.
        cmd = ["docker", "build", "-q", "--force-rm", "-t", tag, "--build-arg", f"BASE_IMAGE={base}",
               "--build-arg", f"KAFKA_VERSION={kafka_version}"]
        for k, v in labels.items():
            cmd += ["--label", f"{k}={v}"]
        # Legacy builder: no buildx/BuildKit needed on Debian's docker.io.
        _run("kafka-node", [*cmd, str(ctx)], env={**os.environ, "DOCKER_BUILDKIT": "0"},
             hint="see the build's output above (apt-get needs Debian's packages; prepare-node runs Kafka)")
    finally:
        shutil.rmtree(ctx, ignore_errors=True)
    _log(f"kafka-node: built {tag} in {time.monotonic() - t0:.0f}s")
    return base


def build(kafka_version: str = DEFAULT_KAFKA_VERSION, force: bool = False) -> Built:
    build_dir().mkdir(parents=True, exist_ok=True)
    _check_engine()
    return build_node(kafka_version, force)


def build_dist(dist: KafkaDist, force: bool = False) -> Built:
    build_dir().mkdir(parents=True, exist_ok=True)
    _check_engine()
    return build_dist_node(dist, force)


def resolve_dist_image(dist: KafkaDist) -> str:
    """The node image of ``dist``, built first when missing (minutes; then it is reused), and
    refused unless its labels say it holds these jars and the installed recipes."""
    tag = dist_tag(dist)
    if not _image_exists(tag):
        build_dist(dist)
    found = resources.docker_client().images.get(tag)
    verify_image(tag, found.labels, dist.release)
    if (found.labels or {}).get(DIST_HASH_LABEL) != dist.libs_hash:
        raise ImageMismatchError(f"image {tag} does not hold the jars of {dist.source} "
                                 f"(label {DIST_HASH_LABEL} is not {dist.libs_hash}).\n"
                                 f"fix: `elr images build --force --kafka-dist {dist.source}`")
    return tag


def prune(keep: Sequence[str], keep_tags: Sequence[str] = ()) -> list[str]:
    """Remove every node image of this namespace but the installed recipes' own for ``keep``, and
    ``keep_tags`` (the images of the distributions named: others' are removed like old releases').

    CI calls it before the tests (``PYTEST_ELR_PRUNE_IMAGES=1 ./elr test``) so that a machine which
    built other releases by hand runs the tests with exactly what a new machine's set-up builds: a
    test that leans on another image then fails here as it would there. Returns the removed tags.
    """
    _check_engine()
    wanted = {node_tag(v) for v in keep} | set(keep_tags)
    repository = f"{namespace()}/kafka-node"
    client = resources.docker_client()
    removed = []
    for image in client.images.list(name=repository):
        for tag in image.tags:
            if tag.startswith(repository + ":") and tag not in wanted:
                try:
                    client.images.remove(tag)
                except docker.errors.APIError as e:  # a container of a running session holds it
                    _log(f"kept {tag}: {e.explanation or e}")
                    continue
                removed.append(tag)
    return sorted(removed)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="elr images",
        epilog="prune: remove every node image but the default release's and the given releases'")
    ap.add_argument("command", choices=["build", "tag", "prune", "setup-host"],
                    help="setup-host: make a Docker engine answer, install debootstrap (root; recipes/setup-host.sh)")
    ap.add_argument("--kafka-version", action="append",
                    help=f"a version, a comma list or a set ({', '.join(VERSION_SETS)}); repeatable; "
                         f"default {DEFAULT_KAFKA_VERSION}")
    ap.add_argument("--kafka-dist", action="append", metavar="PATH",
                    help="a Kafka distribution of your own (a release tarball such as ./gradlew releaseTarGz "
                         "makes, or a directory with libs/): build/tag its image, or keep it when pruning; "
                         f"repeatable; default ${DIST_ENV} (for prune)")
    ap.add_argument("--force", action="store_true", help="rebuild even if the tags exist")
    a = ap.parse_args(argv)
    if a.command == "setup-host":
        with recipe_path("setup-host.sh") as script:
            return subprocess.run(["bash", str(script)]).returncode
    try:
        dist_paths = a.kafka_dist or ([os.environ[DIST_ENV]] if a.command == "prune" and os.environ.get(DIST_ENV)
                                      else [])
        dists = [load_dist(path) for path in dist_paths]
        versions = resolve_versions(",".join(a.kafka_version or [DEFAULT_KAFKA_VERSION]))  # each once
        if a.command == "prune":  # the default release is always kept: every set-up builds it
            for tag in prune((DEFAULT_KAFKA_VERSION, *versions), [dist_tag(d) for d in dists]):
                _log(f"removed {tag}")
            return 0
        for dist in dists:
            if a.command == "tag":
                print(dist_tag(dist))
                continue
            built = build_dist(dist, a.force)
            _log(f"ready: {built.node} (Kafka {dist.version} from {dist.source}, {built.seconds:.0f}s)")
            print(built.node)
        if dists and not a.kafka_version:  # a dist alone builds only its image
            return 0
        for v in versions:
            if a.command == "tag":
                print(node_tag(v))
                continue
            built = build(v, a.force)
            _log(f"ready: {built.node} ({built.seconds:.0f}s)")
            print(built.node)
    except (BuildStepError, ImageMissingError, KafkaDistError, UnknownKafkaVersionError, VersionError) as e:
        print(f"[images] FAILED: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
