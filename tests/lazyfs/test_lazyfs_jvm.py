"""Kafka's own I/O patterns, issued by a real JVM, lose exactly the unflushed part."""

from __future__ import annotations

import os
import signal
import struct
import subprocess

SOURCE = os.path.join(os.path.dirname(__file__), "java", "KafkaLikeIO.java")


def test_kafka_io_patterns_under_power_cut(lazyfs, power_cut) -> None:
    proc = subprocess.Popen(["java", SOURCE, lazyfs.mountpoint], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "READY", line + proc.stdout.read()
        before = lazyfs.stats()
    finally:
        proc.send_signal(signal.SIGKILL)  # the broker dies first
        proc.wait()
    part = os.path.join(lazyfs.mountpoint, "topic-0")
    assert os.path.getsize(os.path.join(part, "00000000000000000000.log")) == 2000
    ops = before["ops"]
    assert ops["fsyncdir"] >= 3 and ops["truncate"] >= 1 and ops["rename"] == 2

    power_cut(lazyfs)

    with open(os.path.join(part, "00000000000000000000.log"), "rb") as f:
        assert f.read() == b"A" * 1000
    with open(os.path.join(part, "00000000000000000000.index"), "rb") as f:
        index = f.read()
    assert len(index) == 1 << 20
    assert struct.unpack(">4i", index[:16]) == (1, 0, 0, 0)  # the unforced entry is gone
    assert index[16:] == bytes(len(index) - 16)
    with open(os.path.join(lazyfs.mountpoint, "recovery-point-offset-checkpoint")) as f:
        assert f.read() == "v1"  # the second move was never made durable
    assert sorted(os.listdir(lazyfs.mountpoint)) == ["recovery-point-offset-checkpoint",
                                                     "topic-0"]
