"""Build the container images without a registry, idempotently.

    elr images build [--kafka-version 4.3.1] [--force]
    elr images tag   [--kafka-version 4.3.1]   # print the expected tag

Steps (each named in a :class:`BuildStepError` when it fails):

1. ``base``: ``debootstrap --variant=minbase bookworm`` from the host's own apt
   mirror (read from ``/etc/apt/sources.list*``; no host name is written into
   the project) and ``docker import`` with ``CMD ["/bin/bash"]``.
2. ``toxiproxy``: ``go build`` of ``images/toxiproxy`` (Toxiproxy <ver> as a library plus
   our ``kafka_hold`` toxic) with ``CGO_ENABLED=0`` (static), through the Go module proxy,
   on the host.
3. ``kafka-classpath``: ``mvn dependency:copy-dependencies`` on a generated pom
   (``images/kafka-node/pom.xml.in``), plus the SLF4J->log4j2 binding that the
   Kafka tarball ships but the POM lacks (``log4j-slf4j-impl`` for SLF4J 1.x,
   ``log4j-slf4j2-impl`` for 2.x, at the resolved log4j-core version).
4. ``kafka-node``: ``docker build`` of ``images/kafka-node/Dockerfile``, with the
   FUSE layer's source (``pytest_elr/lazyfs/*.py``) in the context.

Each image tag carries a hash of its inputs (recipe files, the lazyfs source,
versions, mirror, parent tag), also stored as the label ``pytest-elr.inputs``; an image whose
tag exists is not rebuilt. Host tool outputs (Go binary, jars) are cached in
``$PYTEST_ELR_BUILD_DIR`` (default ``~/.cache/pytest-elr/build``).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import docker.errors

from pytest_elr.sut import resources
from pytest_elr.sut.errors import BuildStepError, ImageMissingError, UnknownKafkaVersionError

DEFAULT_KAFKA_VERSION = "4.3.1"
# Versions built and tested here. Any other version that Maven Central has
# may be built too; 4.4.0 is listed there but its kafka-tools artifacts are
# missing, so it does not resolve.
KNOWN_KAFKA_VERSIONS = ("4.3.1", "4.1.2")
SUITE = "bookworm"
BASE_REPO = "pytest-elr/base"
NODE_REPO = "pytest-elr/kafka-node"
LABEL_PREFIX = "pytest-elr"
# Bump to force rebuilds when the build logic itself changes.
RECIPE_VERSION = "1"

IMAGES_DIR = Path(__file__).resolve().parents[2] / "images"
TOXIPROXY_DIR = IMAGES_DIR / "toxiproxy"


def toxiproxy_version() -> str:
    """The Toxiproxy release the server is built on, as images/toxiproxy/go.mod requires it."""
    go_mod = TOXIPROXY_DIR / "go.mod"
    if not go_mod.is_file():
        raise ImageMissingError(f"image recipes not found at {TOXIPROXY_DIR} (run from a source checkout)")
    m = re.search(r"github\.com/Shopify/toxiproxy/v2\s+(v\S+)", go_mod.read_text())
    if not m:
        raise ImageMissingError(f"{TOXIPROXY_DIR / 'go.mod'} does not require Toxiproxy")
    return m.group(1)
# The FUSE layer's source, copied into the node image (and hashed into its tag).
LAZYFS_DIR = Path(__file__).resolve().parents[1] / "lazyfs"


def build_dir() -> Path:
    d = os.environ.get("PYTEST_ELR_BUILD_DIR") or str(Path.home() / ".cache/pytest-elr/build")
    return Path(d)


def apt_mirror() -> str:
    """The host's Debian mirror, from deb822 ``URIs:`` or one-line ``deb`` sources."""
    files = sorted(glob.glob("/etc/apt/sources.list.d/*.sources"))
    for f in files:
        text = Path(f).read_text()
        # Pick the stanza for the main archive (not -security).
        for stanza in text.split("\n\n"):
            m = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
            if m and suites and SUITE in suites.group(1).split():
                return m.group(1)
    for f in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
        if not os.path.exists(f):
            continue
        for line in Path(f).read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and "security" not in line:
                return next(p for p in parts[1:] if "://" in p)
    raise BuildStepError("base", "no Debian mirror found in /etc/apt/sources.list*",
                         "configure apt sources on this host")


def _hash(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else p.encode())
        h.update(b"\0")
    return h.hexdigest()[:12]


def _recipe_bytes() -> list[bytes]:
    node = IMAGES_DIR / "kafka-node"
    if not node.is_dir():
        raise ImageMissingError(f"image recipes not found at {node} (run from a source checkout)")
    files = [p.name.encode() + b"=" + p.read_bytes() for p in sorted(node.iterdir()) if p.is_file()]
    files += [b"toxiproxy/" + p.name.encode() + b"=" + p.read_bytes() for p in _toxiproxy_files()]
    return files + [b"lazyfs/" + p.name.encode() + b"=" + p.read_bytes() for p in _lazyfs_files()]


def _toxiproxy_files() -> list[Path]:
    """The server's source (tests excluded: they do not change the binary)."""
    found = [p for p in sorted(TOXIPROXY_DIR.glob("*"))
             if p.name in ("go.mod", "go.sum") or (p.suffix == ".go" and not p.name.endswith("_test.go"))]
    if not found:
        raise ImageMissingError(f"the Toxiproxy server's source is missing at {TOXIPROXY_DIR}")
    return found


def _lazyfs_files() -> list[Path]:
    found = sorted(LAZYFS_DIR.glob("*.py"))
    if not found:
        raise ImageMissingError(f"the FUSE layer's source is missing at {LAZYFS_DIR}")
    return found


@dataclass(frozen=True)
class ImageTags:
    base: str
    node: str
    base_inputs: str
    node_inputs: str


def expected_tags(kafka_version: str = DEFAULT_KAFKA_VERSION) -> ImageTags:
    """Tags the current recipe produces; computed without building anything."""
    mirror = apt_mirror()
    base_h = _hash(RECIPE_VERSION, SUITE, "minbase", mirror)
    base = f"{BASE_REPO}:{SUITE}-{base_h}"
    node_h = _hash(RECIPE_VERSION, base, kafka_version, toxiproxy_version(), *_recipe_bytes())
    node = f"{NODE_REPO}:{kafka_version}-{node_h}"
    return ImageTags(base, node, base_h, node_h)


def build_command(kafka_version: str) -> str:
    return f"python -m pytest_elr.sut.images build --kafka-version {kafka_version}"


def resolve_image(kafka_version: str, image: str | None = None) -> str:
    """The node image to run: ``image`` if given, else the tag the current recipe builds.

    Raises :class:`ImageMissingError` (or :class:`UnknownKafkaVersionError`) naming the build command
    when that image is not built. Installed without the recipes (a wheel), the tag cannot be
    computed: the newest image built for the version is used.
    """
    client = resources.docker_client()
    if image:
        tag = image
    else:
        try:
            tag = expected_tags(kafka_version).node
        except ImageMissingError:
            found = client.images.list(filters={"label": [
                f"{LABEL_PREFIX}.image=kafka-node", f"{LABEL_PREFIX}.kafka-version={kafka_version}"]})
            if not found:
                raise
            return str(found[0].id)
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        cmd = build_command(kafka_version)
        if kafka_version not in KNOWN_KAFKA_VERSIONS:
            raise UnknownKafkaVersionError(
                f"no image for Kafka {kafka_version}; versions built and tested here: "
                f"{', '.join(KNOWN_KAFKA_VERSIONS)}.\nfix: `{cmd}` (it fails with the "
                "cause if Maven Central has no such version)") from None
        raise ImageMissingError(f"image {tag} is missing (or outdated).\nfix: `{cmd}`") from None
    return tag


# ---------------------------------------------------------------- helpers


def _run(step: str, cmd: Sequence[str], *, hint: str = "", **kw: object) -> str:
    """Run a command; on failure raise BuildStepError with its last output lines."""
    try:
        p = subprocess.run(list(cmd), capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    except FileNotFoundError as e:
        raise BuildStepError(step, f"{cmd[0]} is not installed", hint) from e
    if p.returncode != 0:
        tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-25:])
        what = " ".join(cmd[:4])
        raise BuildStepError(step, f"`{what} ...` exited {p.returncode}:\n{tail}", hint)
    return p.stdout


def _image_exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0


def _log(msg: str) -> None:
    print(f"[images] {msg}", file=sys.stderr, flush=True)


def _check_engine() -> None:
    p = subprocess.run(["docker", "info"], capture_output=True, text=True)
    if p.returncode != 0:
        raise BuildStepError("engine", "no Docker engine answers: " + p.stderr.strip()[-300:],
                             "run `bash images/setup-host.sh` (as root)")


# ---------------------------------------------------------------- steps


def build_base(tags: ImageTags, force: bool = False) -> None:
    if _image_exists(tags.base) and not force:
        _log(f"base: {tags.base} exists")
        return
    if os.geteuid() != 0:
        raise BuildStepError("base", "debootstrap needs root", "run the build as root")
    if not shutil.which("debootstrap"):
        raise BuildStepError("base", "debootstrap is not installed",
                             "run `bash images/setup-host.sh` or `apt-get install debootstrap`")
    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="elr-rootfs-", dir=build_dir()))
    try:
        _run("base", ["debootstrap", "--variant=minbase", SUITE, str(root), apt_mirror()],
             hint="check the apt mirror in /etc/apt/sources.list.d and free disk space")
        # Keep the image small: apt lists and caches are rebuilt by `apt-get update`.
        for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for f in (root / sub).glob("*"):
                if f.is_file():
                    f.unlink()
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        changes = [
            "-c", 'CMD ["/bin/bash"]',
            "-c", f"LABEL {LABEL_PREFIX}.image=base {LABEL_PREFIX}.inputs={tags.base_inputs}",
        ]
        imp = subprocess.run(["docker", "import", *changes, "-", tags.base],
                             stdin=tar.stdout, capture_output=True, text=True)
        tar.wait()
        if imp.returncode != 0 or tar.returncode != 0:
            raise BuildStepError("base", "docker import failed: " + imp.stderr.strip()[-500:],
                                 "is the Docker engine running? (images/setup-host.sh)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    _log(f"base: built {tags.base} in {time.monotonic() - t0:.0f}s")


def build_toxiproxy(force: bool = False) -> Path:
    """Toxiproxy's server with our kafka_hold toxic, cached by a hash of its source."""
    src_h = _hash(*(p.name.encode() + b"=" + p.read_bytes() for p in _toxiproxy_files()))
    out = build_dir() / f"toxiproxy-{toxiproxy_version()}-{src_h}"
    binary = out / "server"
    if binary.exists() and not force:
        return binary
    if not shutil.which("go"):
        raise BuildStepError("toxiproxy", "go is not installed", "install Go >= 1.23")
    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-trimpath -mod=readonly"}
    _run("toxiproxy", ["go", "build", "-ldflags=-s -w", "-o", str(binary), "."],
         cwd=TOXIPROXY_DIR, env=env, hint="the Go module proxy must be reachable (GOPROXY)")
    _log(f"toxiproxy: built {binary} in {time.monotonic() - t0:.0f}s")
    return binary


def resolve_kafka_classpath(kafka_version: str, force: bool = False) -> Path:
    out = build_dir() / f"kafka-{kafka_version}"
    libs, done = out / "libs", out / ".complete"
    if done.exists() and not force:
        return libs
    if not shutil.which("mvn"):
        raise BuildStepError("kafka-classpath", "mvn is not installed", "apt-get install maven")
    t0 = time.monotonic()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    pom = (IMAGES_DIR / "kafka-node" / "pom.xml.in").read_text()
    (out / "pom.xml").write_text(pom.replace("@KAFKA_VERSION@", kafka_version))
    mvn = ["mvn", "-q", "-B", "-f", str(out / "pom.xml")]
    try:
        _run("kafka-classpath", [*mvn, "dependency:copy-dependencies", "-DincludeScope=runtime",
                                 f"-DoutputDirectory={libs}"],
             hint="Maven Central must be reachable")
    except BuildStepError as e:
        if "Could not find artifact" in e.cause or "could not be resolved" in e.cause:
            raise UnknownKafkaVersionError(
                f"Kafka {kafka_version} does not resolve from Maven Central "
                f"(org.apache.kafka:kafka_2.13:{kafka_version} and kafka-tools); "
                f"versions built here: {', '.join(KNOWN_KAFKA_VERSIONS)}\n{e.cause}"
            ) from e
        raise
    # The binding: match the SLF4J API major version and the log4j-core version.
    slf4j = sorted(libs.glob("slf4j-api-*.jar"))
    core = sorted(libs.glob("log4j-core-*.jar"))
    if not slf4j or not core:
        raise BuildStepError("kafka-classpath",
                             "slf4j-api or log4j-core missing from the classpath",
                             "the Kafka POM changed; adjust images/kafka-node/pom.xml.in")
    log4j_ver = core[-1].name[len("log4j-core-"):-len(".jar")]
    slf4j2 = slf4j[-1].name.startswith("slf4j-api-2.")
    binding = "log4j-slf4j2-impl" if slf4j2 else "log4j-slf4j-impl"
    _run("kafka-classpath", [*mvn, "dependency:copy", "-Dtransitive=false",
                             f"-Dartifact=org.apache.logging.log4j:{binding}:{log4j_ver}",
                             f"-DoutputDirectory={libs}"])
    done.write_text(f"{binding}:{log4j_ver}\n")
    _log(f"kafka-classpath: {kafka_version} resolved in {time.monotonic() - t0:.0f}s "
         f"(+{binding}:{log4j_ver})")
    return libs


def build_node(tags: ImageTags, kafka_version: str, force: bool = False) -> None:
    if _image_exists(tags.node) and not force:
        _log(f"kafka-node: {tags.node} exists")
        return
    toxiproxy = build_toxiproxy()
    libs = resolve_kafka_classpath(kafka_version)
    t0 = time.monotonic()
    ctx = Path(tempfile.mkdtemp(prefix="elr-ctx-", dir=build_dir()))
    try:
        for p in (IMAGES_DIR / "kafka-node").iterdir():
            if p.is_file():
                shutil.copy2(p, ctx / p.name)
        shutil.copy2(toxiproxy, ctx / "toxiproxy-server")
        (ctx / "lazyfs").mkdir()
        for p in _lazyfs_files():
            shutil.copy2(p, ctx / "lazyfs" / p.name)
        shutil.copytree(libs, ctx / "kafka-libs")
        labels = {
            f"{LABEL_PREFIX}.image": "kafka-node",
            f"{LABEL_PREFIX}.inputs": tags.node_inputs,
            f"{LABEL_PREFIX}.kafka-version": kafka_version,
            f"{LABEL_PREFIX}.toxiproxy-version": toxiproxy_version(),
        }
        cmd = ["docker", "build", "-q", "-t", tags.node,
               "--build-arg", f"BASE_IMAGE={tags.base}",
               "--build-arg", f"KAFKA_VERSION={kafka_version}"]
        for k, v in labels.items():
            cmd += ["--label", f"{k}={v}"]
        # Legacy builder: no buildx/BuildKit needed on Debian's docker.io.
        _run("kafka-node", [*cmd, str(ctx)], env={**os.environ, "DOCKER_BUILDKIT": "0"},
             hint="apt-get inside the build needs the Debian mirror; see the output above")
    finally:
        shutil.rmtree(ctx, ignore_errors=True)
    _log(f"kafka-node: built {tags.node} in {time.monotonic() - t0:.0f}s")


def build(kafka_version: str = DEFAULT_KAFKA_VERSION, force: bool = False) -> ImageTags:
    build_dir().mkdir(parents=True, exist_ok=True)
    _check_engine()
    tags = expected_tags(kafka_version)
    build_base(tags, force)
    build_node(tags, kafka_version, force)
    return tags


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="elr images")
    ap.add_argument("command", choices=["build", "tag"])
    ap.add_argument("--kafka-version", action="append",
                    help=f"repeatable; default {DEFAULT_KAFKA_VERSION}")
    ap.add_argument("--force", action="store_true", help="rebuild even if the tags exist")
    a = ap.parse_args(argv)
    versions = a.kafka_version or [DEFAULT_KAFKA_VERSION]
    try:
        for v in versions:
            if a.command == "tag":
                print(expected_tags(v).node)
                continue
            t0 = time.monotonic()
            tags = build(v, a.force)
            _log(f"ready: {tags.node} ({time.monotonic() - t0:.0f}s)")
            print(tags.node)
    except (BuildStepError, UnknownKafkaVersionError, ImageMissingError) as e:
        print(f"[images] FAILED: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
