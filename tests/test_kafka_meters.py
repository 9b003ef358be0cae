"""The kafka backend's election counts across a controller crash: every controller counts the same
elections, each since its own JVM started, so a crashed controller's meters start from zero again.
Pure logic: the cluster is a recorder of meters (real reads: tests/sut/test_controller_meters.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_elr.actions import CrashController, RestartController
from pytest_elr.backends.kafka import KafkaBackend
from pytest_elr.core.errors import BackendError

CONTROLLERS = [1000, 1001, 1002]


class Meters:
    """Three controllers' meters; each started at another time, so their counts differ."""

    def __init__(self) -> None:
        self.counts = {c: {"unclean_elections": 7 * i, "elr_elections": 3 * i} for i, c in enumerate(CONTROLLERS)}

    def election(self, key: str) -> None:
        for counts in self.counts.values():
            counts[key] += 1

    def election_counts(self, controller: int) -> dict[str, int]:
        return dict(self.counts[controller])

    def crash(self, controller: int) -> None:
        self.counts[controller] = {key: 0 for key in self.counts[controller]}


def backend(monkeypatch: pytest.MonkeyPatch) -> tuple[KafkaBackend, Meters]:
    meters = Meters()
    b = KafkaBackend(version="4.4.0")
    b.cluster, b._controllers = meters, list(CONTROLLERS)
    b.faults = SimpleNamespace(process=SimpleNamespace(crash=meters.crash, start=lambda node: None))  # type: ignore[assignment]
    monkeypatch.setattr(b, "_delete_other_topics", lambda: None)
    return b, meters


def test_elections_are_counted_from_the_first_read_across_a_controller_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    b, meters = backend(monkeypatch)
    assert b.election_counts() == {"unclean_elections": 0, "elr_elections": 0}
    meters.election("elr_elections")
    assert b.election_counts() == {"unclean_elections": 0, "elr_elections": 1}
    b.apply(CrashController(controller=0))  # its meters start from zero: it is counted no more
    b.apply(RestartController(controller=0))
    meters.election("unclean_elections")
    assert b.election_counts() == {"unclean_elections": 1, "elr_elections": 1}


def test_with_every_counted_controller_crashed_the_count_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    b, _ = backend(monkeypatch)
    b.election_counts()
    for controller in range(len(CONTROLLERS)):
        b.apply(CrashController(controller=controller))
    with pytest.raises(BackendError, match="every controller whose meters were read at the start has been crashed"):
        b.election_counts()
