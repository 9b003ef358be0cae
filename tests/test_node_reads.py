"""Reading a node's files (``KafkaNode.read_file``, ``segment_files``): copied inside the container
(through the FUSE layer when there is one) to a fresh directory, then read through Docker's archive
API, whose tar headers are checked; never through the exec streams, which under load came back cut
short or out of frame. Any failure is a ``NodeCommandError`` (a caller's "not readable right now"),
never a crash of the run."""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass
from typing import Any

import docker.errors
import pytest

from pytest_elr.sut.errors import NodeCommandError
from pytest_elr.sut.node import KafkaNode


@dataclass
class Answer:
    exit_code: int
    output: bytes


def tar_of(files: dict[str, bytes], cut: int | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"staging/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()[:cut]


class FakeContainer:
    """Runs nothing: every exec answers ``answer``; the archive of the staging directory is ``archive``."""

    def __init__(self, answer: Answer, archive: bytes | Exception) -> None:
        self.answer, self.archive = answer, archive
        self.execs: list[list[str]] = []

    def exec_run(self, cmd: list[str], **kwargs: Any) -> Answer:
        self.execs.append(cmd)
        return self.answer if cmd[0] == "sh" else Answer(0, b"")

    def get_archive(self, path: str) -> tuple[list[bytes], dict[str, Any]]:
        if isinstance(self.archive, Exception):
            raise self.archive
        return [self.archive[:7], self.archive[7:]], {}


def node_with(container: FakeContainer, lazyfs: str | None = "fsyncdir") -> KafkaNode:
    node = KafkaNode.__new__(KafkaNode)  # the reads need only the container and the name
    node.lazyfs = lazyfs
    node.spec = type("Spec", (), {"name": "controller-1"})()
    node._tc = type("Tc", (), {"get_wrapped_container": staticmethod(lambda: container)})()
    return node


def test_a_file_under_the_fuse_layer_is_copied_out_read_whole_and_the_copy_removed_by_the_next_read() -> None:
    """One exec and one archive read per file: the copy is removed in the exec of the node's next read
    (a removal of its own was a third Docker call on the read's path)."""
    data = bytes(range(256)) * 100
    container = FakeContainer(Answer(0, b""), tar_of({"00000000000000000000.log": data}))
    node = node_with(container)
    assert node.read_file("/var/lib/kafka/meta/00000000000000000000.log") == data
    (copy,) = container.execs
    staging = copy[3]
    assert copy[:2] == ["sh", "-c"] and staging.startswith("/run/kafka/read-") and copy[4].endswith(".log")
    assert not copy[2].startswith("rm")
    assert node.read_file("/var/lib/kafka/meta/00000000000000000000.log") == data
    _, again = container.execs
    assert again[2].startswith(f"rm -rf -- {staging}; ") and again[3] != staging


def test_segments_are_read_by_base_offset() -> None:
    segments = {"00000000000000000005.log": b"b", "00000000000000000000.log": b"a", "00000000000000000000.index": b"i"}
    container = FakeContainer(Answer(0, b""), tar_of(segments))
    assert node_with(container, lazyfs=None).segment_files("/d") == [(0, b"a"), (5, b"b")]


@pytest.mark.parametrize(("container", "says"), [
    (FakeContainer(Answer(1, b"cp: cannot stat '/f': No such file or directory"), b""), "exit 1: cp: cannot stat"),
    (FakeContainer(Answer(0, b""), tar_of({"f": b"x" * 5000}, cut=700)), "cannot read /f: "),  # cut short
    (FakeContainer(Answer(0, b""), b"\x49" * 1024), "cannot read /f: "),  # not a tar at all
    (FakeContainer(Answer(0, b""), docker.errors.NotFound("no such path")), "no such path"),
    (FakeContainer(Answer(0, b""), tar_of({})), "not a regular file"),
])
def test_a_read_that_fails_or_comes_back_damaged_is_a_node_command_error(container: FakeContainer, says: str) -> None:
    with pytest.raises(NodeCommandError, match=says) as raised:
        node_with(container).read_file("/f")
    assert "controller-1" in str(raised.value)
    assert container.execs[-1][:2] == ["rm", "-rf"]  # the copy goes whatever happened


def test_tails_are_copied_from_where_each_file_was_read_to_in_two_docker_calls() -> None:
    """``read_tails`` (the metadata log's refresh): one exec lists and copies from each file's offset on,
    one archive read; the staging directory is emptied by the next read, not by a third call."""
    container = FakeContainer(Answer(0, b""), tar_of({"00000000000000000000.log": b"new"}))
    node = node_with(container)
    got = node.read_tails("/d", ".log", {"00000000000000000000.log": 7}, "/run/kafka/metadata-read-x")
    assert got == {"00000000000000000000.log": b"new"}
    (copy,) = container.execs
    assert copy[:2] == ["sh", "-c"] and copy[3:] == ["/run/kafka/metadata-read-x", "/d", ".log",
                                                     "00000000000000000000.log:7"]
    assert copy[2].startswith('rm -rf "$0"')


def test_the_tail_script_copies_each_file_from_its_offset(tmp_path: Any) -> None:
    """The script itself, run by this machine's ``sh``: a file read to byte 4 gives the rest, a file
    not read yet whole, a file of another suffix nothing; a second read empties the staging first."""
    import subprocess

    src = tmp_path / "d"
    src.mkdir()
    (src / "0.log").write_bytes(b"abcdefghij")
    (src / "5.log").write_bytes(b"XYZ")
    (src / "0.index").write_bytes(b"no")
    staging = tmp_path / "s"
    calls: list[list[str]] = []

    class Local(FakeContainer):
        def exec_run(self, cmd: list[str], **kwargs: Any) -> Answer:
            calls.append(cmd)
            done = subprocess.run(cmd, capture_output=True, check=False)
            return Answer(done.returncode, done.stdout + done.stderr)

        def get_archive(self, path: str) -> tuple[list[bytes], dict[str, Any]]:
            files = {p.name: p.read_bytes() for p in staging.iterdir()}
            return [tar_of(files)], {}

    node = node_with(Local(Answer(0, b""), b""))
    assert node.read_tails(str(src), ".log", {"0.log": 4}, str(staging)) == {"0.log": b"efghij", "5.log": b"XYZ"}
    (src / "5.log").unlink()
    assert node.read_tails(str(src), ".log", {"0.log": 10}, str(staging)) == {"0.log": b""}
    assert len(calls) == 2


class LocalContainer(FakeContainer):
    """Runs each exec on this machine's ``sh``; the archive is of the local directory asked for."""

    def exec_run(self, cmd: list[str], **kwargs: Any) -> Answer:
        import subprocess

        self.execs.append(cmd)
        done = subprocess.run(cmd, capture_output=True, check=False)
        return Answer(done.returncode, done.stdout + done.stderr)

    def get_archive(self, path: str) -> tuple[list[bytes], dict[str, Any]]:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(path, arcname=path.rstrip("/").rpartition("/")[2])
        return [buf.getvalue()], {}


def test_the_segments_of_every_partition_come_from_the_first_log_dir_holding_it_in_one_read(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``partitions_segments`` (the evidence right after a power cut): one exec copies each partition's
    segments from the first of the node's log dirs that holds its directory (as ``partition_dir``), one
    archive read returns them; a partition no dir holds has none, and no other file is taken."""
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    for directory, files in {d0 / "t-0": {"0.log": b"a", "0.index": b"i"}, d1 / "t-0": {"0.log": b"stale"},
                             d1 / "t-1": {"5.log": b"c", "0.log": b"b"}, d0 / "u-1": {"0.log": b"u"}}.items():
        directory.mkdir(parents=True)
        for name, data in files.items():
            (directory / name).write_bytes(data)
    container = LocalContainer(Answer(0, b""), b"")
    node = node_with(container)
    node.spec = type("Spec", (), {"name": "broker-1", "log_dirs": (str(d0), str(d1))})()
    monkeypatch.setattr("pytest_elr.sut.node.READS_IN_NODE", str(tmp_path))
    got = node.partitions_segments([("t", 0), ("t", 1), ("t", 2)])
    assert got == {("t", 0): [(0, b"a")], ("t", 1): [(0, b"b"), (5, b"c")], ("t", 2): []}
    (copy,) = container.execs  # and one archive read; the copy is left to the next read
    assert copy[:2] == ["sh", "-c"] and copy[4:] == ["t-0 t-1 t-2", str(d0), str(d1)]
