"""Reading a node's files through the FUSE layer (``KafkaNode.read_file``, ``segment_files``): base64
over ``docker exec``, where the standard error is read apart and a stream that is not base64 is a
``NodeCommandError`` (a caller's "not readable right now"), never a crash of the run. Seen in a
three-controller exploration under load: an exec that exited 0 with output that was not ASCII."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_elr.sut.errors import NodeCommandError
from pytest_elr.sut.node import KafkaNode


@dataclass
class Answer:
    exit_code: int
    output: Any


class FakeContainer:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.calls: list[dict[str, Any]] = []

    def exec_run(self, cmd: list[str], **kwargs: Any) -> Answer:
        self.calls.append(kwargs)
        return self.answer


def node_answering(answer: Answer) -> KafkaNode:
    node = KafkaNode.__new__(KafkaNode)  # the reads need only the container and the name
    node.lazyfs = "fsyncdir"
    node.spec = type("Spec", (), {"name": "controller-1"})()
    fake = FakeContainer(answer)
    node._tc = type("Tc", (), {"get_wrapped_container": staticmethod(lambda: fake)})()
    return node


def test_a_file_is_read_from_the_standard_output_alone() -> None:
    data = bytes(range(256))
    node = node_answering(Answer(0, (base64.b64encode(data) + b"\n", b"a warning \xe2\x80\x98beside\xe2\x80\x99 it")))
    assert node.read_file("/var/lib/kafka/meta/00000.log") == data
    assert node.container.calls[0].get("demux") is True


@pytest.mark.parametrize(("answer", "says"), [
    (Answer(0, (b"\xef\xbf\xbd\xef\xbf\xbdQUJD", None)), "its output is not base64"),
    (Answer(0, (b"QUJD!!", b"")), "cannot read /f"),
    (Answer(1, (b"", b"base64: /f: No such file or directory")), "exit 1: base64: /f: No such file"),
])
def test_output_that_is_not_the_files_base64_is_a_node_command_error(answer: Answer, says: str) -> None:
    with pytest.raises(NodeCommandError, match=says) as raised:
        node_answering(answer).read_file("/f")
    assert "controller-1" in str(raised.value)


def test_segments_are_read_the_same_way() -> None:
    listing = b"00000000000000000000.log\n" + base64.b64encode(b"batch") + b"\n"
    assert node_answering(Answer(0, (listing, None))).segment_files("/d") == [(0, b"batch")]
    with pytest.raises(NodeCommandError, match="the segments of /d"):
        node_answering(Answer(0, (b"\xff" + listing, None))).segment_files("/d")
