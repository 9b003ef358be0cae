"""A topic on brokers with several log dirs starts once every replica's directory is assigned
(``KafkaBackend._await_directory_assignments``): one partition change a broker, so N replicas put
the partition at epoch N. The last assignment landing after the start moved every epoch before any
fault (a CI rehearsal, 2026-11-27)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_elr.backends import kafka
from pytest_elr.core.specs import TopicSpec


class Log:
    """The controllers' record: partition epochs that move on at each read, as assignments land."""

    def __init__(self, epochs: list[int]) -> None:
        self.epochs, self.reads = epochs, 0

    def refresh_metadata_logs(self) -> dict[int, str]:
        self.reads += 1
        return {}

    def registration(self, state: Any, refreshed: Any) -> Any:
        return SimpleNamespace(partition_epoch=self.epochs[min(self.reads, len(self.epochs)) - 1])


def backend(log: Log) -> Any:
    return SimpleNamespace(client=log, topic="t")


def test_the_start_waits_for_the_last_assignment(monkeypatch: pytest.MonkeyPatch) -> None:
    log = Log([1, 2, 2, 3])
    topic = TopicSpec(name="t", replicas=(0, 1, 2), min_insync_replicas=2)
    kafka.KafkaBackend._await_directory_assignments(backend(log), [SimpleNamespace(partition=0)], topic)
    assert log.reads == 4, "it let the start go before the third broker's assignment"


def test_a_release_that_assigns_otherwise_is_let_go_after_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka, "DIRECTORY_ASSIGNMENT_WAIT_S", 0.5)
    log = Log([0])
    topic = TopicSpec(name="t", replicas=(0, 1, 2), min_insync_replicas=2)
    kafka.KafkaBackend._await_directory_assignments(backend(log), [SimpleNamespace(partition=0)], topic)
    assert log.reads >= 2
