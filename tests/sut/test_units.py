"""Fast tests of the SUT's pieces (no cluster started)."""

from __future__ import annotations

import pytest

from pytest_elr.sut import (
    ClusterStartError,
    EngineNotRunningError,
    ImageMissingError,
    KafkaCluster,
    UnknownKafkaVersionError,
    resources,
)
from pytest_elr.sut.config import Topology
from pytest_elr.sut.produce import crc32c, record_batch
from pytest_elr.sut.wire import Reader, Writer


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_varints_and_compact_types_round_trip() -> None:
    w = Writer().uvarint(300).compact_string("abc").compact_string(None)
    w.compact_array([1, 2], Writer.int32).tags()
    r = Reader(bytes(w.buf))
    assert r.uvarint() == 300
    assert r.compact_string() == "abc"
    assert r.compact_string() is None
    assert r.int32_array() == [1, 2]
    r.tags()


def test_record_batch_header() -> None:
    b = record_batch([b"x", b"yz"], now_ms=0)
    r = Reader(b)
    assert r.int64() == 0  # base offset
    assert r.int32() == len(b) - 12  # batch length
    r.int32()
    assert r.int8() == 2  # magic


def test_topology_ports_names_and_ids() -> None:
    t = Topology.build([1, 2, 3, 4], [1000, 1001, 1002])
    assert [n.peer_port for n in t.nodes] == list(range(19001, 19008))
    assert t.quorum_voters().startswith("1000@c1000:19005,")
    props = t.render(t.node(2), 40000)
    assert "advertised.listeners=INTERNAL://b2:19002,CLIENT://127.0.0.1:40000" in props
    assert "min.insync.replicas" not in props  # broker-level values are rejected with ELR
    assert "min.insync.replicas=1" in t.render(t.node(1000), None)
    with pytest.raises(ValueError, match="distinct"):
        Topology.build([0, 1], [1])
    with pytest.raises(ValueError, match="1 or 3"):
        Topology.build([0], [7, 8])
    with pytest.raises(ValueError, match="1-9"):
        Topology.build(list(range(10)), [100])


def test_node_proxies_cover_every_peer() -> None:
    from pytest_elr.sut.node import KafkaNode
    t = Topology.build([0, 1, 2], [1000])
    node = KafkaNode.__new__(KafkaNode)
    node.spec, node.topology = t.node(1), t
    specs = {p.name: (p.listen, p.upstream) for p in node.proxy_specs()}
    assert specs == {"to-b0": ("127.0.0.1:19001", "real-b0:19001"),
                     "to-b2": ("127.0.0.1:19003", "real-b2:19003"),
                     "to-c1000": ("127.0.0.1:19004", "real-c1000:19004")}


@pytest.mark.docker
def test_missing_image_names_the_build_command() -> None:
    with pytest.raises(ImageMissingError, match="python -m pytest_elr.sut.images build"):
        KafkaCluster(image="pytest-elr/kafka-node:no-such-tag").resolve_image()


@pytest.mark.docker
def test_unknown_kafka_version_is_a_clear_error() -> None:
    with pytest.raises(UnknownKafkaVersionError, match="4.3.1"):
        KafkaCluster(kafka_version="9.9.9").resolve_image()


def test_engine_not_running_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(EngineNotRunningError, match="images/setup-host.sh"):
        resources.docker_client()


@pytest.mark.docker
def test_start_timeout_carries_log_lines_and_leaves_nothing() -> None:
    c = KafkaCluster(brokers=[0], controllers=1, start_timeout_s=0.5)
    with pytest.raises(ClusterStartError, match="last log lines of b0") as e:
        c.start()
    assert "not ready within" in str(e.value)
    assert "b0" in e.value.node_logs and "c1000" in e.value.node_logs
    assert resources.remove_cluster(c.cluster_id) == 0  # close() removed everything


def test_partition_of_layer_paths() -> None:
    from pytest_elr.sut.cluster import _partition_of
    assert _partition_of("t-ab12-3/00000000000000000000.log") == ("t-ab12", 3)
    assert _partition_of("__cluster_metadata-0/00000000000000000000.log") is None
    assert _partition_of("meta.properties") is None
    assert _partition_of("t-0.5a1b-delete/00000000000000000000.log") is None


def test_power_off_record_counts_lost_records() -> None:
    from pytest_elr.sut.cluster import PowerOffRecord
    rec = PowerOffRecord(0, 0.1, 100, {}, {("a", 0): 60, ("b", 0): 5, ("c", 0): None},
                         {("a", 0): 10, ("b", 0): None, ("c", 0): 3})
    assert rec.records_lost == {("a", 0): 50}


def test_lazyfs_only_under_brokers_and_small_segments() -> None:
    c = KafkaCluster(brokers=[0], controllers=1)
    assert c.lazyfs == "fsyncdir" and c.proc.disk_layer is not None
    assert "log.segment.bytes=1048576" in c.topology.render(c.topology.node(0), 1)
    plain = KafkaCluster(brokers=[0], controllers=1, lazyfs=None)
    assert plain.proc.disk_layer is None
    assert "log.segment.bytes" not in plain.topology.render(plain.topology.node(0), 1)


def test_lazyfs_source_is_hashed_into_the_node_image_tag() -> None:
    from pytest_elr.sut import images
    names = [b.split(b"=", 1)[0] for b in images._recipe_bytes()]
    assert b"lazyfs/filesystem.py" in names and b"Dockerfile" in names


def test_kafka_cluster_ids_never_start_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    from pytest_elr.sut import cluster

    # 0xf8.. encodes to "-..." in url-safe base64: the first draw must be refused.
    draws = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x01" * 16)])
    monkeypatch.setattr(cluster.uuid, "uuid4", lambda: next(draws))
    assert cluster._kafka_uuid() == "AQEBAQEBAQEBAQEBAQEBAQ"  # the second draw


def test_installed_without_recipes_is_image_missing(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """A wheel carries no images/ directory: the tag cannot be computed, and the cluster falls
    back to the newest built image (KafkaCluster.resolve_image) on ImageMissingError only."""
    from pytest_elr.sut import images

    monkeypatch.setattr(images, "IMAGES_DIR", tmp_path / "images")
    monkeypatch.setattr(images, "TOXIPROXY_DIR", tmp_path / "images" / "toxiproxy")
    with pytest.raises(ImageMissingError, match="run from a source checkout"):
        images.expected_tags("4.3.1")
