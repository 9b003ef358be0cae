"""A Kafka distribution of one's own (``--elr-kafka-dist PATH``): the node image is built from its jars.

A distribution is what ``./gradlew releaseTarGz`` makes (``kafka_2.13-X.tgz``, one top directory
holding ``bin/ config/ libs/``), that tarball unpacked, or any directory with a ``libs/`` of jars.
Only ``libs/`` goes into the image: the node is driven by the recipe's ``kafka-ctl`` with the
recipe's configuration (they must be the ones this plugin talks to), so a dist's ``bin/`` and
``config/`` are not used, and a dist of ``libs/`` alone is enough.

The image is content-addressed (:func:`pytest_elr.sut.images.dist_tag`): the hash of every jar in
``libs/`` (:attr:`KafkaDist.libs_hash`) with the recipes' hash, so a rebuilt patch gets its own
image and an unchanged one is not built again. Nothing is downloaded. A tarball is unpacked once
into ``$PYTEST_ELR_BUILD_DIR/dist-<hash of the file>/``, refusing members that would land outside
it (``..``, absolute paths, links pointing out, devices) and tarballs past :data:`MAX_UNPACKED_BYTES`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pytest_elr.sut.errors import KafkaDistError

DIST_ENV = "PYTEST_ELR_KAFKA_DIST"
#: a release tarball of Kafka 4.x unpacks to ~130 MB; a bound keeps a wrong file from filling the disk
MAX_UNPACKED_BYTES = 2 * 1024**3
MAX_MEMBERS = 20_000
#: the server jar, which holds ``kafka.Kafka`` and the StorageTool the node runs (not -test, -sources, ...)
_SERVER_JAR = re.compile(r"kafka_2\.1[23]-(?P<version>.+)\.jar")
_NOT_THE_SERVER = ("-test", "-sources", "-javadoc", "-test-sources")
_CLIENTS_JAR = re.compile(r"kafka-clients-.+\.jar")
_VERSION_PROPERTIES = "kafka/kafka-version.properties"
_RELEASE = re.compile(r"\d+\.\d+\.\d+")
EXPECTED = ("a Kafka distribution: a release tarball such as `./gradlew releaseTarGz` makes "
            "(kafka_2.13-X.tgz, one top directory with libs/), or a directory with libs/")


@dataclass(frozen=True)
class KafkaDist:
    source: Path  # what the user named (the tarball or the directory), resolved
    libs: Path  # the directory of jars that goes into the image
    version: str  # as the build says it (``4.5.0-SNAPSHOT``)
    libs_hash: str  # of every jar's name and content

    @property
    def release(self) -> str:
        """The release the harness keys release-sensitive behaviour by (known failures, ranges): ``X.Y.Z``."""
        m = _RELEASE.match(self.version)
        assert m is not None  # open_dist refuses a version without one
        return m.group(0)


def _hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def libs_hash(libs: Path) -> str:
    """The hash of every jar of ``libs`` by name and content: stable across copies and unpackings."""
    h = hashlib.sha256()
    for jar in sorted(libs.glob("*.jar")):
        h.update(f"{jar.name}={_hash_file(jar)}\0".encode())
    return h.hexdigest()[:16]


def server_jar(libs: Path) -> Path:
    found = [p for p in sorted(libs.glob("kafka_2.1*.jar"))
             if _SERVER_JAR.fullmatch(p.name) and not p.stem.endswith(_NOT_THE_SERVER)]
    if len(found) != 1:
        what = "none" if not found else ", ".join(p.name for p in found)
        raise KafkaDistError(f"{libs}: expected exactly one Kafka server jar (kafka_2.13-<version>.jar) "
                             f"in libs/, found {what}")
    return found[0]


def read_version(libs: Path) -> str:
    """The Kafka version of ``libs``: ``kafka/kafka-version.properties`` inside kafka-clients (what
    Kafka itself reports), else the server jar's name."""
    jar = server_jar(libs)
    for clients in sorted(p for p in libs.glob("kafka-clients-*.jar") if _CLIENTS_JAR.fullmatch(p.name)):
        try:
            with zipfile.ZipFile(clients) as z:
                text = z.read(_VERSION_PROPERTIES).decode("utf-8", "replace")
        except (zipfile.BadZipFile, KeyError, OSError):
            continue
        m = re.search(r"^version=(\S+)", text, re.M)
        if m and _RELEASE.match(m.group(1)):
            return m.group(1)
    m = _SERVER_JAR.fullmatch(jar.name)
    assert m is not None  # server_jar matched it
    version = m.group("version")
    if not _RELEASE.match(version):
        raise KafkaDistError(f"{libs}: cannot tell the Kafka version: expected {_VERSION_PROPERTIES} in a "
                             f"kafka-clients jar or a server jar named kafka_2.13-X.Y.Z.jar, found {jar.name}")
    return version


def _libs_of(root: Path, shown: Path) -> Path:
    """``root/libs``, or ``<the one top directory>/libs`` (a tarball's layout)."""
    if (root / "libs").is_dir():
        return root / "libs"
    tops = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    if len(tops) == 1 and (tops[0] / "libs").is_dir():
        return tops[0] / "libs"
    raise KafkaDistError(f"{shown}: no libs/ directory (at the top or under one top directory); expected {EXPECTED}")


def _check_member(member: tarfile.TarInfo, shown: Path) -> None:
    """Refuse what would land outside the target directory, and anything but files, dirs and inner links."""
    name = PurePosixPath(member.name)
    if name.is_absolute() or ".." in name.parts:
        raise KafkaDistError(f"{shown}: refused: member {member.name!r} escapes the directory it unpacks into")
    if member.issym() or member.islnk():
        target = PurePosixPath(member.linkname)
        inside = target if member.islnk() else name.parent / target
        if target.is_absolute() or _escapes(inside):
            raise KafkaDistError(f"{shown}: refused: link {member.name!r} -> {member.linkname!r} points "
                                 "outside the directory it unpacks into")
    elif not (member.isfile() or member.isdir()):
        raise KafkaDistError(f"{shown}: refused: member {member.name!r} is not a file, directory or link")


def _escapes(path: PurePosixPath) -> bool:
    depth = 0
    for part in path.parts:
        depth += -1 if part == ".." else 0 if part in (".", "") else 1
        if depth < 0:
            return True
    return False


def unpack(tarball: Path, into: Path) -> Path:
    """``tarball`` unpacked under ``into`` (once per content: the directory is named by its hash)."""
    out = into / f"dist-{_hash_file(tarball)[:16]}"
    if (out / ".complete").exists():
        return out
    try:
        with tarfile.open(tarball) as tar:
            members = tar.getmembers()
            if len(members) > MAX_MEMBERS:
                raise KafkaDistError(f"{tarball}: refused: {len(members)} members, more than {MAX_MEMBERS}")
            total = sum(m.size for m in members if m.isfile())
            if total > MAX_UNPACKED_BYTES:
                raise KafkaDistError(f"{tarball}: refused: it unpacks to {total} bytes, more than "
                                     f"{MAX_UNPACKED_BYTES}")
            for m in members:
                _check_member(m, tarball)
            into.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix="dist-unpacking-", dir=into))
            try:
                tar.extractall(tmp, members=members, filter="data")  # the checks above, and the stdlib's own
                (tmp / ".complete").write_text(str(tarball) + "\n")
                try:
                    tmp.rename(out)  # atomic: a concurrent unpacking (xdist) of the same file wins or loses whole
                except OSError:
                    if not (out / ".complete").exists():
                        raise
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    except (tarfile.TarError, EOFError, OSError) as e:
        raise KafkaDistError(f"{tarball}: not a readable tarball ({e}); expected {EXPECTED}") from None
    return out


def open_dist(path: str | os.PathLike[str], build_dir: Path) -> KafkaDist:
    """The distribution at ``path`` (a tarball is unpacked under ``build_dir``), its version and hash.

    Raises :class:`KafkaDistError` naming the path and what was expected.
    """
    given = Path(path).expanduser()
    if not given.exists():
        raise KafkaDistError(f"{given}: no such file or directory; expected {EXPECTED}")
    source = given.resolve()
    if source.is_dir():
        libs = _libs_of(source, given)
    elif source.is_file():
        if not tarfile.is_tarfile(source):
            raise KafkaDistError(f"{given}: not a tarball nor a directory; expected {EXPECTED}")
        libs = _libs_of(unpack(source, build_dir), given)
    else:
        raise KafkaDistError(f"{given}: not a file nor a directory; expected {EXPECTED}")
    version = read_version(libs)
    return KafkaDist(source=source, libs=libs, version=version, libs_hash=libs_hash(libs))
