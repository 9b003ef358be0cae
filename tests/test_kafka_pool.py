"""The kafka backend's cluster pool: reuse per shape, at most POOL_SIZE idle shapes alive.

Pure logic: the cluster class is replaced by a recorder, so no container is started here (the
real clusters are exercised by every scenario of the suite).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_elr.backends import kafka
from pytest_elr.core.history import History
from pytest_elr.core.specs import ClusterSpec, TopicSpec


class FakeCluster:
    started: list[FakeCluster] = []

    def __init__(self, brokers: list[int], **kwargs: Any) -> None:
        self.brokers = brokers
        self.extra = kwargs.get("extra_config", {})
        self.closed = False
        self.controller_ids = [1000]

    def start(self) -> FakeCluster:
        FakeCluster.started.append(self)
        return self

    def close(self) -> None:
        self.closed = True

    def logs(self, node: int, lines: int) -> str:
        return ""

    def create_topic(self, *args: Any, **kwargs: Any) -> None: ...
    def await_partition(self, *args: Any, **kwargs: Any) -> None: ...
    def heal_everything(self) -> None: ...


@pytest.fixture
def fake_clusters(monkeypatch: pytest.MonkeyPatch) -> list[FakeCluster]:
    kafka.close_pool()
    FakeCluster.started = []
    import pytest_elr.sut

    monkeypatch.setattr(pytest_elr.sut, "KafkaCluster", FakeCluster)
    monkeypatch.setattr(kafka, "POOL_SIZE", 2)
    yield FakeCluster.started
    kafka.close_pool()


def run(brokers: tuple[int, ...], profile: str = "kafka", session: int | None = None) -> kafka.KafkaBackend:
    backend = kafka.KafkaBackend()
    backend.start(ClusterSpec(brokers=brokers, session_timeout_ms=session),
                  TopicSpec(name="t", replicas=brokers, min_insync_replicas=1), profile, History.create(None))
    return backend


def test_same_shape_reuses_and_lru_shape_is_closed(fake_clusters: list[FakeCluster]) -> None:
    run((0, 1, 2)).close()
    run((0, 1, 2)).close()
    assert len(fake_clusters) == 1  # reused
    run((0, 1, 2), "legacy").close()
    run((0, 1, 2)).close()  # touch: now the ELR-on cluster is the most recent
    run((1, 2, 3)).close()
    assert len(fake_clusters) == 3
    on, off, other = fake_clusters
    assert off.closed and not on.closed and not other.closed


def test_a_cluster_in_use_is_never_evicted(fake_clusters: list[FakeCluster]) -> None:
    a, b, c = run((0, 1)), run((0, 1, 2)), run((1, 2, 3))
    assert not any(f.closed for f in fake_clusters)
    for backend in (a, b, c):
        backend.close()


def test_session_timeout_is_part_of_the_shape(fake_clusters: list[FakeCluster]) -> None:
    run((0, 1, 2)).close()
    run((0, 1, 2), session=30000).close()
    assert [f.extra["broker.session.timeout.ms"] for f in fake_clusters] == ["3000", "30000"]
