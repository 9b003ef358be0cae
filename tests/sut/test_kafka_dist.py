"""``--elr-kafka-dist``: a Kafka distribution of one's own (a release tarball or a directory with
``libs/``) read without Docker -- its layout, its version, its hash -- and every bad input refused
with the path and what was expected; a tarball's members never land outside the directory it
unpacks into."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from pytest_elr.sut import images, kafka_dist
from pytest_elr.sut.errors import KafkaDistError
from pytest_elr.sut.kafka_dist import open_dist


def _jar(path: Path, files: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)


def make_dist(root: Path, version: str = "4.5.0-SNAPSHOT", properties: bool = True,
              server: str | None = None) -> Path:
    """A distribution in the Apache layout: ``root/kafka_2.13-<version>/{bin,config,libs}``."""
    top = root / f"kafka_2.13-{version}"
    libs = top / "libs"
    libs.mkdir(parents=True)
    (top / "bin").mkdir()
    (top / "bin" / "kafka-server-start.sh").write_text("#!/bin/sh\n")
    (top / "config").mkdir()
    (top / "config" / "server.properties").write_text("process.roles=broker,controller\n")
    _jar(libs / f"kafka-clients-{version}.jar",
         {"kafka/kafka-version.properties": f"commitId=abc\nversion={version}\n"} if properties else {"x": "y"})
    _jar(libs / (server or f"kafka_2.13-{version}.jar"), {"kafka/Kafka.class": "server"})
    _jar(libs / f"kafka_2.13-{version}-test.jar", {"kafka/KafkaTest.class": "test"})
    _jar(libs / "slf4j-api-2.0.17.jar", {"org/slf4j/Logger.class": "api"})
    return top


def make_tarball(top: Path, out: Path) -> Path:
    with tarfile.open(out, "w:gz") as tar:
        tar.add(top, arcname=top.name)
    return out


def test_a_tarball_its_top_directory_and_its_libs_are_one_dist(tmp_path: Path) -> None:
    top = make_dist(tmp_path / "src")
    tarball = make_tarball(top, tmp_path / "kafka_2.13-4.5.0-SNAPSHOT.tgz")
    build = tmp_path / "build"
    from_tar = open_dist(tarball, build)
    from_parent = open_dist(tmp_path / "src", build)  # a directory holding the one top directory
    from_top = open_dist(top, build)
    assert from_tar.libs.is_relative_to(build) and from_tar.libs.name == "libs"
    assert from_top.libs == top / "libs" and from_parent.libs == top / "libs"
    assert from_tar.libs_hash == from_top.libs_hash == from_parent.libs_hash
    assert from_tar.version == "4.5.0-SNAPSHOT" and from_tar.release == "4.5.0"
    assert from_tar.source == tarball.resolve()
    # unpacked once per content: a second read reuses the directory
    assert open_dist(tarball, build).libs == from_tar.libs
    assert len([p for p in build.iterdir() if p.name.startswith("dist-")]) == 1


def test_the_version_is_kafkas_own_else_the_server_jars_name(tmp_path: Path) -> None:
    with_properties = make_dist(tmp_path / "a", version="4.4.0", server="kafka_2.13-9.9.9.jar")
    assert open_dist(with_properties, tmp_path).version == "4.4.0"  # what Kafka reports wins over a file name
    by_name = make_dist(tmp_path / "b", version="4.3.1", properties=False)
    assert open_dist(by_name, tmp_path).version == "4.3.1"


def test_the_hash_is_stable_and_changes_with_any_jar(tmp_path: Path) -> None:
    one = open_dist(make_dist(tmp_path / "a"), tmp_path)
    two = open_dist(make_dist(tmp_path / "b"), tmp_path)
    assert one.libs_hash == two.libs_hash and images.dist_tag(one) == images.dist_tag(two)
    jar = two.libs / "slf4j-api-2.0.17.jar"
    _jar(jar, {"org/slf4j/Logger.class": "api, patched"})
    patched = open_dist(two.libs.parent, tmp_path)
    assert patched.libs_hash != one.libs_hash and images.dist_tag(patched) != images.dist_tag(one)
    jar.rename(jar.with_name("slf4j-api-2.0.18.jar"))  # a name is part of the classpath too
    assert open_dist(two.libs.parent, tmp_path).libs_hash not in (one.libs_hash, patched.libs_hash)
    (two.libs.parent / "config" / "server.properties").write_text("changed\n")  # not in the image
    assert open_dist(two.libs.parent, tmp_path).libs_hash == kafka_dist.libs_hash(two.libs)
    assert images.dist_tag(one).startswith(f"{images.namespace()}/kafka-node:dist-")


def _bad(tmp_path: Path, case: str) -> Path:
    if case == "missing":
        return tmp_path / "no-such.tgz"
    if case == "not a tarball":
        (tmp_path / "notes.tgz").write_text("not a tarball\n")
        return tmp_path / "notes.tgz"
    if case == "no libs":
        (tmp_path / "kafka" / "bin").mkdir(parents=True)
        return tmp_path / "kafka"
    if case == "tarball without libs":
        (tmp_path / "top" / "bin").mkdir(parents=True)
        return make_tarball(tmp_path / "top", tmp_path / "top.tgz")
    top = make_dist(tmp_path / "d")
    if case == "no server jar":
        (top / "libs" / "kafka_2.13-4.5.0-SNAPSHOT.jar").unlink()
    elif case == "two server jars":
        _jar(top / "libs" / "kafka_2.13-4.4.0.jar", {"a": "b"})
    elif case == "no version":
        (top / "libs" / "kafka_2.13-4.5.0-SNAPSHOT.jar").rename(top / "libs" / "kafka_2.13-trunk.jar")
        _jar(top / "libs" / "kafka-clients-4.5.0-SNAPSHOT.jar", {"x": "y"})
    return top


@pytest.mark.parametrize(("case", "message"), [
    ("missing", r"no-such\.tgz: no such file or directory; expected a Kafka distribution"),
    ("not a tarball", r"notes\.tgz: not a tarball nor a directory; expected a Kafka distribution: a release "
                      r"tarball such as `\./gradlew releaseTarGz` makes"),
    ("no libs", r"kafka: no libs/ directory \(at the top or under one top directory\); expected"),
    ("tarball without libs", r"top\.tgz: no libs/ directory"),
    ("no server jar", r"libs: expected exactly one Kafka server jar \(kafka_2\.13-<version>\.jar\) in libs/, "
                      r"found none"),
    ("two server jars", r"found kafka_2\.13-4\.4\.0\.jar, kafka_2\.13-4\.5\.0-SNAPSHOT\.jar"),
    ("no version", r"libs: cannot tell the Kafka version: expected kafka/kafka-version\.properties in a "
                   r"kafka-clients jar or a server jar named kafka_2\.13-X\.Y\.Z\.jar, found kafka_2\.13-trunk\.jar"),
])
def test_bad_input_names_the_path_and_what_was_expected(tmp_path: Path, case: str, message: str) -> None:
    path = _bad(tmp_path, case)
    with pytest.raises(KafkaDistError, match=message) as caught:
        open_dist(path, tmp_path / "build")
    assert str(path.name) in str(caught.value)


def _hostile(tmp_path: Path, member: tarfile.TarInfo, data: bytes = b"pwned\n") -> Path:
    """A distribution tarball with one hostile member beside a valid layout."""
    out = tmp_path / "hostile.tgz"
    top = make_dist(tmp_path / "src")
    with tarfile.open(out, "w:gz") as tar:
        tar.add(top, arcname=top.name)
        member.size = len(data) if member.isfile() else 0
        tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return out


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    m = tarfile.TarInfo(name)
    m.type, m.linkname = kind, link
    return m


@pytest.mark.parametrize(("member", "message"), [
    (_member("../escaped.txt"), r"member '\.\./escaped\.txt' escapes the directory"),
    (_member("kafka_2.13-4.5.0-SNAPSHOT/../../escaped.txt"), r"escapes the directory"),
    (_member("/tmp/escaped-abs.txt"), r"member '/tmp/escaped-abs\.txt' escapes"),
    (_member("kafka_2.13-4.5.0-SNAPSHOT/libs/out.jar", tarfile.SYMTYPE, "../../../escaped.txt"),
     r"link 'kafka_2\.13-4\.5\.0-SNAPSHOT/libs/out\.jar' -> '\.\./\.\./\.\./escaped\.txt' points outside"),
    (_member("kafka_2.13-4.5.0-SNAPSHOT/libs/abs.jar", tarfile.SYMTYPE, "/etc/passwd"), r"points outside"),
    (_member("kafka_2.13-4.5.0-SNAPSHOT/libs/hard.jar", tarfile.LNKTYPE, "../escaped.txt"), r"points outside"),
    (_member("kafka_2.13-4.5.0-SNAPSHOT/dev", tarfile.CHRTYPE), r"is not a file, directory or link"),
])
def test_a_member_escaping_the_target_is_refused_and_nothing_is_written(
        tmp_path: Path, member: tarfile.TarInfo, message: str) -> None:
    tarball = _hostile(tmp_path, member)
    build = tmp_path / "deep" / "build"
    with pytest.raises(KafkaDistError, match=message):
        open_dist(tarball, build)
    assert not build.exists()  # refused before anything was unpacked
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "deep" / "escaped.txt").exists()


def test_an_inner_symlink_is_unpacked(tmp_path: Path) -> None:
    """The checks refuse only what points out: a link inside the distribution is fine."""
    tarball = _hostile(tmp_path, _member("kafka_2.13-4.5.0-SNAPSHOT/bin/start", tarfile.SYMTYPE,
                                         "kafka-server-start.sh"))
    dist = open_dist(tarball, tmp_path / "build")
    assert (dist.libs.parent / "bin" / "start").is_symlink()


def test_a_tarball_too_large_unpacked_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tarball = make_tarball(make_dist(tmp_path / "src"), tmp_path / "k.tgz")
    monkeypatch.setattr(kafka_dist, "MAX_UNPACKED_BYTES", 100)
    with pytest.raises(KafkaDistError, match=r"k\.tgz: refused: it unpacks to \d+ bytes, more than 100"):
        open_dist(tarball, tmp_path / "build")
    monkeypatch.setattr(kafka_dist, "MAX_UNPACKED_BYTES", 10**9)
    monkeypatch.setattr(kafka_dist, "MAX_MEMBERS", 3)
    with pytest.raises(KafkaDistError, match=r"refused: \d+ members, more than 3"):
        open_dist(tarball, tmp_path / "build")


def test_elr_images_tag_names_a_dists_image_and_refuses_a_bad_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(images.BUILD_DIR_ENV, str(tmp_path / "build"))
    top = make_dist(tmp_path / "src")
    assert images.main(["tag", "--kafka-dist", str(top)]) == 0
    assert capsys.readouterr().out.split() == [images.dist_tag(open_dist(top, tmp_path))]
    assert images.main(["tag", "--kafka-dist", str(tmp_path / "nothing")]) == 1
    err = capsys.readouterr().err
    assert f"[images] FAILED: {tmp_path / 'nothing'}: no such file or directory" in err and "Traceback" not in err


# --- the plugin's setting -----------------------------------------------------------------------

SCENARIO = "cluster: {brokers: 1}\ntopic: {replicas: [0], min_insync_replicas: 1}\nsteps: [{at: T0}]\n"


@pytest.mark.parametrize("source", ["option", "ini", "env"])
def test_a_bad_dist_is_a_usage_error_naming_where_it_was_given(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, source: str) -> None:
    monkeypatch.delenv("PYTEST_ELR_KAFKA_VERSION", raising=False)
    monkeypatch.delenv(kafka_dist.DIST_ENV, raising=False)
    monkeypatch.setenv(images.BUILD_DIR_ENV, str(pytester.path / "build"))
    pytester.makefile(".elr.yaml", s=SCENARIO)
    args = ["--elr-backend=kafka"]
    if source == "option":
        args.append("--elr-kafka-dist=missing.tgz")
        where = "--elr-kafka-dist"
    elif source == "ini":
        pytester.makeini("[pytest]\nelr_kafka_dist = missing.tgz\n")
        where = f"{pytester.path / 'tox.ini'}: elr_kafka_dist"
    else:
        monkeypatch.setenv(kafka_dist.DIST_ENV, "missing.tgz")
        where = f"${kafka_dist.DIST_ENV}"
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert f"{where}: " in err and "missing.tgz: no such file or directory; expected a Kafka distribution" in err
    assert "Traceback" not in err + result.stdout.str()


def test_a_dist_sets_the_release_and_refuses_another_backend_or_version(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_ELR_KAFKA_VERSION", raising=False)
    monkeypatch.delenv(kafka_dist.DIST_ENV, raising=False)
    monkeypatch.setenv(images.BUILD_DIR_ENV, str(pytester.path / "build"))
    top = make_dist(pytester.path / "src", version="4.0.2")
    pytester.makefile(".elr.yaml", s=SCENARIO)
    listed = pytester.runpytest("--elr-backend=kafka", f"--elr-kafka-dist={top}", "--collect-only", "-q")
    assert listed.ret == 0, listed.stderr.str()
    model = pytester.runpytest("--elr-backend=model", f"--elr-kafka-dist={top}")
    assert model.ret == pytest.ExitCode.USAGE_ERROR
    assert "--elr-kafka-dist: a Kafka distribution runs on the kafka backend, not model" in model.stderr.str()
    both = pytester.runpytest("--elr-backend=kafka", f"--elr-kafka-dist={top}", "--elr-kafka-version=4.4.0")
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    assert "--elr-kafka-dist and --elr-kafka-version: give one of them" in both.stderr.str()
    config = pytester.parseconfig("--elr-backend=kafka", f"--elr-kafka-dist={top}")
    from pytest_elr.plugin import _versions

    assert _versions(config) == ("4.0.2",)  # the dist's release keys known failures and ranges
    assert os.environ.get(kafka_dist.DIST_ENV) is None  # the setting is not leaked into the environment


def test_elr_explore_kafka_dist_refuses_bad_input_as_a_usage_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_elr.schedule import explore

    monkeypatch.setenv(images.BUILD_DIR_ENV, str(tmp_path / "build"))
    monkeypatch.delenv(kafka_dist.DIST_ENV, raising=False)
    for argv, message in (
            (["--kafka-dist", str(tmp_path / "none.tgz")],
             f"--kafka-dist: {tmp_path / 'none.tgz'}: no such file or directory; expected a Kafka distribution"),
            (["--kafka-dist", str(make_dist(tmp_path / "d")), "--kafka-version", "4.4.0"],
             "--kafka-dist runs on --backend kafka, without --kafka-version")):
        with pytest.raises(SystemExit) as exited:
            explore.main([*argv, "--out", str(tmp_path / "out")])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    assert os.environ.get(kafka_dist.DIST_ENV) is None


def test_the_backend_takes_the_dist_from_the_environment_and_its_release(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``elr explore --kafka-dist`` hands every backend of its process (replays included)."""
    from pytest_elr.backends.kafka import KafkaBackend
    from pytest_elr.core.errors import BackendError

    monkeypatch.setenv(images.BUILD_DIR_ENV, str(tmp_path / "build"))
    monkeypatch.delenv("PYTEST_ELR_KAFKA_VERSION", raising=False)
    monkeypatch.setenv(kafka_dist.DIST_ENV, str(make_tarball(make_dist(tmp_path / "s", version="4.1.0-rc2"),
                                                             tmp_path / "k.tgz")))
    assert KafkaBackend.default_version() == "4.1.0"
    backend = KafkaBackend(session=object())  # type: ignore[arg-type]
    assert backend.kafka_version == "4.1.0" and backend.dist is not None and backend.dist.version == "4.1.0-rc2"
    with pytest.raises(BackendError, match=r"Kafka 4\.4\.0 was asked for, but the distribution .*k\.tgz is "
                                           r"Kafka 4\.1\.0-rc2: give one of them"):
        KafkaBackend(session=object(), version="4.4.0")  # type: ignore[arg-type]
    monkeypatch.setenv(kafka_dist.DIST_ENV, str(tmp_path / "gone"))
    with pytest.raises(BackendError, match=r"\$PYTEST_ELR_KAFKA_DIST: .*gone: no such file or directory"):
        KafkaBackend.default_version()
