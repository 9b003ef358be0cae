"""The kafka backend's cluster pool: reuse per shape, at most ``size`` clusters, none in use closed.

Pure logic: clusters are recorders, so no container is started here (the real clusters are
exercised by every scenario of the suite).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_elr.backends import kafka
from pytest_elr.backends.kafka_pool import ClusterPool
from pytest_elr.core.history import History
from pytest_elr.core.specs import ClusterSpec, TopicSpec


class FakeCluster:
    started: list[FakeCluster] = []

    def __init__(self, brokers: list[int] | None = None, **kwargs: Any) -> None:
        self.brokers = brokers
        self.extra = kwargs.get("extra_config", {})
        self.kwargs = kwargs
        self.instrumentation = kwargs.get("instrumentation")
        self.coverage_run = ""
        self.closed = False
        self.controller_ids = [1000]

    def planted_mutants(self) -> dict[str, str]:
        return {"c1000": self.instrumentation.mutant} if self.instrumentation and self.instrumentation.mutant else {}

    def start(self) -> FakeCluster:
        FakeCluster.started.append(self)
        return self

    def close(self) -> None:
        self.closed = True

    def logs(self, node: int, lines: int) -> str:
        return ""


def started() -> FakeCluster:
    return FakeCluster().start()


def test_same_shape_reuses_and_the_least_recently_used_idle_shape_is_closed() -> None:
    FakeCluster.started = []
    pool: ClusterPool[FakeCluster] = ClusterPool(size=2)
    for shape in ("elr", "elr", "legacy", "elr", "other"):  # touching elr leaves legacy the oldest
        pool.release(pool.acquire(shape, started))
    on, off, other = FakeCluster.started
    assert off.closed and not on.closed and not other.closed
    assert len(pool) == 2
    pool.close()
    assert on.closed and other.closed and len(pool) == 0


def test_a_cluster_in_use_is_never_closed_by_the_pool() -> None:
    pool: ClusterPool[FakeCluster] = ClusterPool(size=2)
    busy = [pool.acquire(shape, started) for shape in ("a", "bb", "ccc")]
    assert not any(c.closed for c in busy) and len(pool) == 3
    for c in busy:
        pool.release(c)
    pool.acquire("dddd", started)  # now two idle ones make room
    assert [c.closed for c in busy] == [True, True, False]


def test_two_clusters_of_one_shape_in_use_are_two_and_one_is_kept() -> None:
    pool: ClusterPool[FakeCluster] = ClusterPool(size=3)
    first, second = pool.acquire("s", started), pool.acquire("s", started)
    assert first is not second  # never shared by two users
    pool.release(first)
    pool.release(second)
    assert first.closed and not second.closed
    assert pool.acquire("s", started) is second


def test_an_evicted_cluster_is_closed_and_forgotten() -> None:
    pool: ClusterPool[FakeCluster] = ClusterPool()
    cluster = pool.acquire("s", started)
    pool.evict(cluster)
    assert cluster.closed and len(pool) == 0
    assert pool.acquire("s", started) is not cluster


def test_the_clusters_held_are_listed_idle_and_in_use_and_none_is_closed_by_asking() -> None:
    """What ``kafka-mutants`` reads the agent's last plant report from, before ``close``."""
    pool: ClusterPool[FakeCluster] = ClusterPool(size=2)
    idle, busy = pool.acquire("a", started), pool.acquire("b", started)
    pool.release(idle)
    assert pool.clusters() == [idle, busy] and not idle.closed and not busy.closed
    evicted = pool.acquire("c", started)
    pool.evict(evicted)
    assert evicted not in pool.clusters()
    pool.close()
    assert pool.clusters() == []


def test_size_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_ELR_POOL_SIZE", raising=False)
    assert ClusterPool().size == 2
    monkeypatch.setenv("PYTEST_ELR_POOL_SIZE", "5")
    assert ClusterPool().size == 5
    assert ClusterPool(size=0).size == 1


# --- the backend's side: what a shape is, and whose pool it uses -------------------------------


class FakeClient:
    def __init__(self, cluster: FakeCluster) -> None: ...
    def create_topic(self, *args: Any, **kwargs: Any) -> None: ...
    def await_partition(self, *args: Any, **kwargs: Any) -> Any: return SimpleNamespace(**kwargs)
    def refresh_metadata_logs(self) -> dict[int, str]: return {}
    def registration(self, state: Any, refreshed: Any = None) -> object: return object()


class FakeFaults:
    def __init__(self, cluster: FakeCluster) -> None: ...
    def heal_everything(self) -> None: ...


@pytest.fixture
def fake_clusters(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeCluster]]:
    FakeCluster.started = []
    import pytest_elr.sut.cluster

    monkeypatch.setattr(pytest_elr.sut.cluster, "KafkaCluster", FakeCluster)
    monkeypatch.setattr(kafka, "ClusterClient", FakeClient)
    monkeypatch.setattr(kafka, "Faults", FakeFaults)
    yield FakeCluster.started


def run(pool: ClusterPool[Any] | None, brokers: tuple[int, ...], session: int | None = None) -> kafka.KafkaBackend:
    backend = kafka.KafkaBackend(session=pool)
    backend.start(ClusterSpec(brokers=brokers, session_timeout_ms=session),
                  TopicSpec(name="t", replicas=brokers, min_insync_replicas=1), "kafka", History.create(None))
    return backend


def test_the_session_pool_serves_every_backend(fake_clusters: list[FakeCluster]) -> None:
    pool = kafka.KafkaBackend.new_session()
    run(pool, (0, 1, 2)).close()
    run(pool, (0, 1, 2)).close()
    assert len(fake_clusters) == 1 and not fake_clusters[0].closed
    pool.close()
    assert fake_clusters[0].closed


def test_without_a_session_the_backend_closes_its_own_pool(fake_clusters: list[FakeCluster]) -> None:
    run(None, (0, 1, 2)).close()
    assert len(fake_clusters) == 1 and fake_clusters[0].closed


def test_session_timeout_is_part_of_the_shape(fake_clusters: list[FakeCluster]) -> None:
    pool = kafka.KafkaBackend.new_session()
    run(pool, (0, 1, 2)).close()
    run(pool, (0, 1, 2), session=30000).close()
    assert [f.extra["broker.session.timeout.ms"] for f in fake_clusters] == ["3000", "30000"]
    pool.close()


def test_a_planted_mutant_is_part_of_the_shape(fake_clusters: list[FakeCluster],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster with a Kafka mutant in its JVMs is never handed to a run that asked for none, nor
    to one that asked for another mutant; the backend says what the agent planted."""
    from pytest_elr.sut.instrument import MUTANT_ENV

    one, two = (f"org.apache.kafka.controller.PartitionChangeBuilder#build()V:{n}:INCREMENTS:0" for n in (1, 2))
    pool = kafka.KafkaBackend.new_session()
    served: list[tuple[str | None, str | None]] = []
    for wanted in (None, one, one, two, None):
        if wanted:
            monkeypatch.setenv(MUTANT_ENV, wanted)
        else:
            monkeypatch.delenv(MUTANT_ENV, raising=False)
        backend = run(pool, (0, 1, 2))
        got = backend.cluster.instrumentation
        served.append((wanted, got.mutant if got else None))
        backend.close()
        assert backend.planted_mutants == ({"c1000": wanted} if wanted else {})
    assert all(wanted == got for wanted, got in served), served
    assert len(fake_clusters) == 4  # the second run of mutant one reused its cluster
    pool.close()


def test_two_kafka_dists_never_share_a_cluster(fake_clusters: list[FakeCluster], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Two builds of one release (``--elr-kafka-dist``) are two shapes: a run on a patched Kafka is
    never served a cluster of the unpatched one; the same dist again reuses its cluster, on its image."""
    import zipfile

    from pytest_elr.sut import images
    from pytest_elr.sut.kafka_dist import open_dist

    def dist(name: str, server_class: str) -> Any:
        libs = tmp_path / name / "libs"
        libs.mkdir(parents=True)
        with zipfile.ZipFile(libs / "kafka_2.13-4.4.0.jar", "w") as z:
            z.writestr("kafka/Kafka.class", server_class)
        return open_dist(libs.parent, tmp_path / "build")

    monkeypatch.setattr(images, "resolve_dist_image", lambda d: f"dist-image-of-{d.source.name}")
    plain, patched = dist("plain", "as released"), dist("patched", "with a fix")
    assert plain.release == patched.release == "4.4.0" and plain.libs_hash != patched.libs_hash
    pool = kafka.KafkaBackend.new_session()
    for d in (plain, patched, plain):
        backend = kafka.KafkaBackend(session=pool, dist=d)
        assert backend.kafka_version == "4.4.0"
        backend.start(ClusterSpec(brokers=(0, 1, 2)), TopicSpec(name="t", replicas=(0, 1, 2), min_insync_replicas=1),
                      "kafka", History.create(None))
        backend.close()
    assert [f.kwargs["image"] for f in fake_clusters] == ["dist-image-of-plain", "dist-image-of-patched"]
    pool.close()
