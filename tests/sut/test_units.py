"""Fast tests of the SUT's pieces and of the faults' bookkeeping (no cluster started)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest
from testcontainers.core.config import testcontainers_config

from pytest_elr.faults.evidence import PowerOffRecord, partition_of
from pytest_elr.faults.network import NetworkFaults
from pytest_elr.faults.process import ProcessFaults
from pytest_elr.sut import (
    ClusterClient,
    ClusterStartError,
    EngineNotRunningError,
    ImageMissingError,
    KafkaCluster,
    KafkaProtocolError,
    UnknownKafkaVersionError,
    images,
    resources,
)
from pytest_elr.sut.config import Topology
from pytest_elr.sut.errors import NodeCommandError
from pytest_elr.sut.node import KafkaNode, without_ryuk
from pytest_elr.sut.polling import await_value, poll
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
    with pytest.raises(ImageMissingError, match="elr images build --kafka-version 4.3.1"):
        images.resolve_image("4.3.1", "pytest-elr/kafka-node:no-such-tag")


@pytest.mark.docker
def test_unknown_kafka_version_is_a_clear_error() -> None:
    with pytest.raises(UnknownKafkaVersionError, match="4.0.0, 4.0.1, .*4.4.0"):
        images.resolve_image("9.9.9")


def test_engine_not_running_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(EngineNotRunningError, match="elr images setup-host"):
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
    assert partition_of("t-ab12-3/00000000000000000000.log") == ("t-ab12", 3)
    assert partition_of("__cluster_metadata-0/00000000000000000000.log") is None
    assert partition_of("meta.properties") is None
    assert partition_of("t-0.5a1b-delete/00000000000000000000.log") is None


def test_power_off_record_counts_lost_records() -> None:
    rec = PowerOffRecord(0, 0.1, 100, {}, {("a", 0): 60, ("b", 0): 5, ("c", 0): None},
                         {("a", 0): 10, ("b", 0): None, ("c", 0): 3})
    assert rec.records_lost == {("a", 0): 50}


def test_a_power_cut_reads_the_evidence_then_kills_and_drops_in_one_command_then_reads_the_disk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``power_off``: the unsynced bytes and the broker's own LEOs are read while its JVM runs; then one
    node command (``kafka-ctl power-off``: SIGKILL, wait until gone, then the layer drops) -- no
    separate kill; then the segments of every partition come off the disk in one read, and at its
    restart the log is read once for every partition's loaded log end."""
    calls: list[tuple[object, ...]] = []
    loaded = ("[x] INFO Completed load of Log(dir=/var/lib/kafka/data/t-0, topicId=a, logEndOffset=4)",
              "[x] INFO Completed load of Log(dir=/var/lib/kafka/data/t-1, topicId=a, logEndOffset=9)")

    class Node:
        name, lazyfs = "broker-1", "fsyncdir"

        def ctl(self, *args: str, check: bool = True) -> str:
            calls.append(("ctl", *args))
            return ""

        def ctl_json(self, *args: str) -> dict[str, object]:
            calls.append(("ctl_json", *args))
            return {"dropped_bytes": 7, "invalidated_inodes": 1}

        def fs_stats(self) -> dict[str, object]:
            calls.append(("ctl_json", "fs-stats"))
            return {"files": [{"path": "t-1/0.log", "unsynced_bytes": 7}], "unsynced_bytes": 7}

        def partitions_segments(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
            calls.append(("segments", *tps))
            return {tp: [] for tp in tps}

        def log_since_start(self, *needles: str) -> list[str]:
            calls.append(("log", *needles))
            return list(loaded)

    c = KafkaCluster(brokers=[0, 1, 2], controllers=1)
    node = Node()
    monkeypatch.setattr(c, "node", lambda node_id: node)
    process = ProcessFaults(c)
    client = process.evidence.client
    monkeypatch.setattr(client, "partitions", lambda topic, via=None: [
        type("P", (), {"partition": p, "replicas": (1, 2)})() for p in (0, 1)])
    monkeypatch.setattr(client, "local_leo", lambda n, tp: calls.append(("leo", tp)) or 5)
    record = process.power_off(1, topics=["t"])
    assert calls == [("ctl_json", "fs-stats"), ("leo", ("t", 0)), ("leo", ("t", 1)), ("ctl_json", "power-off"),
                     ("segments", ("t", 0), ("t", 1))]
    assert record.leo_before == {("t", 0): 5, ("t", 1): 5} and record.leo_on_disk == {("t", 0): 0, ("t", 1): 0}
    assert record.dropped_bytes == 7 and 1 in process.down
    calls.clear()
    process.power_on(1)
    assert calls[0] == ("ctl", "start") and calls[-1] == ("log", "/t-0,", "/t-1,")
    assert record.leo_loaded == {("t", 0): 4, ("t", 1): 9} and record.leo_after == {("t", 0): 5, ("t", 1): 5}
    assert process.evidence.leos_on_disk(1, []) == {} and ("segments",) not in calls  # no partition: no read


def test_lazyfs_only_under_brokers_and_small_segments() -> None:
    c = KafkaCluster(brokers=[0], controllers=1)
    assert c.lazyfs == "fsyncdir" and ProcessFaults(c).disk_layer is not None
    assert "log.segment.bytes=1048576" in c.topology.render(c.topology.node(0), 1)
    plain = KafkaCluster(brokers=[0], controllers=1, lazyfs=None)
    assert ProcessFaults(plain).disk_layer is None
    assert "log.segment.bytes" not in plain.topology.render(plain.topology.node(0), 1)


def test_kafka_cluster_ids_never_start_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    from pytest_elr.sut import cluster

    # 0xf8.. encodes to "-..." in url-safe base64: the first draw must be refused.
    draws = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x01" * 16)])
    monkeypatch.setattr(cluster.uuid, "uuid4", lambda: next(draws))
    assert cluster._kafka_uuid() == "AQEBAQEBAQEBAQEBAQEBAQ"  # the second draw


def test_the_client_asks_brokers_with_lagging_metadata_last() -> None:
    """The faults leave which brokers' metadata may lag in the cluster; the client reads it there."""
    c = KafkaCluster(brokers=[0, 1, 2, 3], controllers=1)
    client = ClusterClient(c)
    assert client.observers() == [0, 1, 2, 3]
    c.metadata_lag["network"] = frozenset({0})
    c.metadata_lag["process"] = frozenset({2, 1000})  # a stopped controller is no broker to ask
    assert client.observers() == [1, 3, 0, 2]
    c.metadata_lag["network"] = frozenset()
    assert client.observers() == [0, 1, 3, 2]


def test_poll_retries_protocol_errors_until_the_answer_is_wanted() -> None:
    answers = iter([KafkaProtocolError("not yet"), 1, 2, 3])

    def attempt() -> int:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert poll(attempt, until=lambda n: n >= 2, timeout_s=5, interval_s=0, timed_out=AssertionError) == 2


def test_poll_stops_at_once_on_any_other_error() -> None:
    calls = []

    def attempt() -> None:
        calls.append(1)
        raise ValueError("broken")

    with pytest.raises(ValueError, match="broken"):
        poll(attempt, timeout_s=5, interval_s=0, timed_out=AssertionError)
    assert len(calls) == 1


def test_a_timed_out_wait_names_the_last_value_or_error() -> None:
    with pytest.raises(TimeoutError, match=r"isr: condition not met within 0.05s; last: \(0, 1\)"):
        await_value(lambda: (0, 1), lambda isr: isr == (0,), timeout_s=0.05, interval_s=0.01, what="isr")

    def unanswered() -> None:
        raise KafkaProtocolError("no broker answered")

    with pytest.raises(TimeoutError, match="last: error: no broker answered"):
        await_value(unanswered, lambda _: True, timeout_s=0.05, interval_s=0.01)


def test_importing_the_sut_changes_no_environment() -> None:
    code = ("import os; before = dict(os.environ); "
            "import pytest_elr.sut.cluster, pytest_elr.sut.node, pytest_elr.faults, pytest_elr.backends.kafka; "
            "print(sorted(set(os.environ.items()) ^ set(before.items())))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TESTCONTAINERS_")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_ryuk_is_off_only_while_containers_are_started(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TESTCONTAINERS_RYUK_DISABLED", raising=False)
    monkeypatch.setattr(testcontainers_config, "ryuk_disabled", False)
    with without_ryuk():
        assert testcontainers_config.ryuk_disabled
    assert not testcontainers_config.ryuk_disabled


def test_stopped_nodes_are_left_in_the_cluster_as_lagging_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process faults tell the cluster whom not to trust first; starting the JVM again clears it."""
    class Node:
        def ctl(self, *args: str) -> str:
            return ""

    c = KafkaCluster(brokers=[0, 1, 2], controllers=1)
    monkeypatch.setattr(c, "node", lambda node_id: Node())
    process = ProcessFaults(c)
    process.crash(0)
    process.pause(2)
    assert c.lagging_brokers() == {0, 2}
    assert ClusterClient(c).observers() == [1, 0, 2]
    process.start(0)
    process.resume(2)
    assert c.lagging_brokers() == set()


def test_sigterm_interrupts_only_while_resources_live() -> None:
    """SIGTERM becomes Ctrl-C (the session stops and unwinds) from the first live cluster to the
    last one closed; the handler before comes back afterwards. In a fresh interpreter, so clusters
    of this session cannot interfere."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import signal
        from pytest_elr.sut import resources
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        resources.register(1, lambda: None)
        resources.register(2, lambda: None)
        handler = signal.getsignal(signal.SIGTERM)
        try:
            handler(signal.SIGTERM, None)
            raise SystemExit("no interrupt")
        except KeyboardInterrupt:
            pass
        resources.unregister(1)
        assert signal.getsignal(signal.SIGTERM) is handler  # one still lives
        resources.unregister(2)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stdout + out.stderr


def test_a_fault_repeated_on_a_faulty_link_leaves_its_toxic_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replacing a latency toxic delivers what it delays, replacing a timeout toxic closes what it
    holds: either is a brief heal. A second slow (same latency) or cut of a link touches nothing."""
    calls: list[tuple[str, str, str]] = []

    class Toxi:
        def add_toxic(self, proxy: str, name: str, *args: object) -> None:
            calls.append(("add", proxy, name))

        def remove_toxic(self, proxy: str, name: str) -> None:
            calls.append(("remove", proxy, name))

    class Node:
        toxiproxy = Toxi()

    c = KafkaCluster(brokers=[0, 1, 2], controllers=1)
    monkeypatch.setattr(c, "node", lambda node_id: Node())
    network = NetworkFaults(c)
    network.slow(0, 1, 5000)
    assert len(calls) == 2  # upstream of 0's proxy to 1, downstream of 1's proxy to 0
    network.slow(0, 1, 5000)
    network.cut(0, 2)
    network.cut(0, 2)
    assert len(calls) == 4 and not any(op == "remove" for op, _, _ in calls)
    network.slow(0, 1, 7000)  # a new latency replaces the toxic (add answers 409 in Toxiproxy)
    assert len(calls) == 6
    network.heal(0, 1, both_ways=False)
    network.slow(0, 1, 5000)
    assert calls[-2:] == [("add", "to-b1", "slow-upstream"), ("add", "to-b0", "slow-downstream")]



def test_a_registration_miss_says_why() -> None:
    """No record of the observed state: the client says what each controller's log held, or why it
    could not be read, so a partition epoch reported as unknown can be explained from the history."""
    from pytest_elr.sut.admin import PartitionState
    from pytest_elr.sut.errors import SutError
    from pytest_elr.sut.metadata_log import Registration

    held = Registration(leader=0, leader_epoch=0, partition_epoch=0, isr=(0, 1), elr=(), last_known_elr=(),
                        recovering=False, replicas=(0, 1))

    class Log:
        def registrations(self, topic: str, partition: int) -> list[Registration]:
            return [held]

    class Broken:
        def registrations(self, topic: str, partition: int) -> list[Registration]:
            raise SutError("docker exec timed out")

    class Cluster:
        controller_ids = [1000, 1001]

        def metadata_log(self, controller: int) -> object:
            return Log() if controller == 1000 else Broken()

    client = ClusterClient(Cluster())  # type: ignore[arg-type]
    seen = PartitionState(topic="t", partition=0, leader=1, leader_epoch=1, replicas=(0, 1), isr=(1,), elr=(),
                          last_known_elr=(), offline_replicas=())
    assert client.registration(seen) is None
    assert "controller 1000's log: 1 records, none of them this state (latest: Registration(leader=0" in \
        client.registration_miss
    assert "controller 1001's log unreadable (docker exec timed out)" in client.registration_miss
    assert client.registration(PartitionState(topic="t", partition=0, leader=0, leader_epoch=0, replicas=(0, 1),
                                              isr=(0, 1), elr=(), last_known_elr=(), offline_replicas=())) == held


def test_a_stopped_controllers_stale_log_does_not_give_an_old_partition_epoch() -> None:
    """An ISR that shrank and grew again is the state of the first record too: a crashed controller's
    log, which ends before the regrowth, matches it at partition epoch 0; the others' at 2 win."""
    from pytest_elr.sut.admin import PartitionState
    from pytest_elr.sut.metadata_log import Registration

    def reg(epoch: int, isr: tuple[int, ...]) -> Registration:
        return Registration(leader=0, leader_epoch=0, partition_epoch=epoch, isr=isr, elr=(), last_known_elr=(),
                            recovering=False, replicas=(0, 1, 2))

    logs = {1000: [reg(0, (0, 1, 2)), reg(1, (0, 2))],  # crashed after the shrink
            1001: [reg(0, (0, 1, 2)), reg(1, (0, 2)), reg(2, (0, 1, 2))]}

    class Log:
        def __init__(self, records: list[Registration]) -> None:
            self.records = records

        def registrations(self, topic: str, partition: int) -> list[Registration]:
            return self.records

    class Cluster:
        controller_ids = [1000, 1001]

        def metadata_log(self, controller: int) -> object:
            return Log(logs[controller])

    client = ClusterClient(Cluster())  # type: ignore[arg-type]
    seen = PartitionState(topic="t", partition=0, leader=0, leader_epoch=0, replicas=(0, 1, 2), isr=(0, 1, 2),
                          elr=(), last_known_elr=(), offline_replicas=())
    found = client.registration(seen)
    assert found is not None and found.partition_epoch == 2


def _partition_results(results: list[tuple[int, int, str | None]], messages: bool) -> Reader:
    """A response's topics -> partitions results, as AlterReplicaLogDirs (no message) and
    AlterPartitionReassignments (with one) send them."""
    def part(w: Writer, res: tuple[int, int, str | None]) -> None:
        w.int32(res[0]).int16(res[1])
        if messages:
            w.compact_string(res[2])
        w.tags()

    body = Writer().compact_array(["t"], lambda w, name: w.compact_string(name).compact_array(results, part).tags())
    return Reader(bytes(body.buf))


@pytest.mark.parametrize("messages", [False, True])
def test_the_first_partition_error_of_a_response_is_raised_with_its_message(messages: bool) -> None:
    from pytest_elr.sut.admin import _raise_partition_error
    from pytest_elr.sut.errors import KafkaProtocolError

    _raise_partition_error(_partition_results([(0, 0, None), (1, 0, None)], messages), "move", messages=messages)
    with pytest.raises(KafkaProtocolError) as raised:
        _raise_partition_error(_partition_results([(0, 0, None), (1, 3, "gone"), (2, 39, None)], messages),
                               "reassign t-1", messages=messages)
    assert raised.value.error_code == 3
    assert str(raised.value).startswith("reassign t-1: UNKNOWN_TOPIC_OR_PARTITION")
    assert ("(gone)" in str(raised.value)) == messages


def test_begin_shutdown_signals_without_waiting_and_the_next_start_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """``begin_shutdown`` sends SIGTERM and returns (``kafka-ctl stop 0``, whose "still alive" exit is
    expected); the node's next start waits for the exit (``stop`` with the clean-shutdown timeout)
    before ``start``; a node never sent SIGTERM so starts at once."""
    calls: list[tuple[int, tuple[str, ...], bool]] = []

    class Node:
        def __init__(self, node_id: int) -> None:
            self.node_id = node_id

        def ctl(self, *args: str, check: bool = True) -> str:
            calls.append((self.node_id, args, check))
            return ""

    c = KafkaCluster(brokers=[0, 1, 2], controllers=1)
    monkeypatch.setattr(c, "node", Node)
    process = ProcessFaults(c)
    process.begin_shutdown(0)
    assert calls == [(0, ("stop", "0"), False)]
    assert c.lagging_brokers() == {0}
    process.start(0)
    assert calls[1:] == [(0, ("stop", "330"), True), (0, ("start",), True)]
    assert c.lagging_brokers() == set()
    calls.clear()
    process.start(0)  # the exit was awaited once: no second wait
    process.start(1)
    assert calls == [(0, ("start",), True), (1, ("start",), True)]


def test_healing_waits_for_a_jvm_still_exiting_before_it_starts_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that ends (or fails) while a broker sent ``begin_shutdown`` is still exiting: the heal
    that gives the cluster back to the pool waits for the exit, then starts it -- never a ``start``
    that finds the old JVM alive ("already running") and a broker that dies under the next run."""
    from pytest_elr.faults import Faults

    calls: list[tuple[int, tuple[str, ...]]] = []
    states = {0: "running", 1: "running"}

    class Node:
        def __init__(self, node_id: int) -> None:
            self.node_id = node_id

        def ctl(self, *args: str, check: bool = True) -> str:
            calls.append((self.node_id, args))
            if args[0] == "stop" and args[1] != "0":
                states[self.node_id] = "stopped"  # the wait saw the JVM exit
            elif args[0] == "start":
                states[self.node_id] = "running"
            return ""

    c = KafkaCluster(brokers=[0, 1], controllers=1)
    monkeypatch.setattr(c, "node", Node)
    monkeypatch.setattr(c, "topology_ids", lambda: [0, 1])
    monkeypatch.setattr(c, "node_state", lambda node_id: states[node_id])
    monkeypatch.setattr(c, "wait_ready", lambda timeout_s: None)
    faults = Faults(c)
    monkeypatch.setattr(faults.network, "heal_all", lambda: None)
    faults.process.begin_shutdown(0)  # the JVM is still exiting: its state reads "running"
    faults.heal_everything()
    assert calls == [(0, ("stop", "0")), (0, ("stop", "330")), (0, ("start",))]
    assert faults.process.exiting == set()


def test_every_node_s_state_is_asked_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``node_states`` (the heal at a run's end, each poll of ``wait_ready``): one Docker exec a node,
    all under way together, not one after another (each took up to 3.5 s on a loaded machine). Each
    fake exec waits for all the others: asked one at a time, the first would wait alone and fail."""
    c = KafkaCluster(brokers=[0, 1, 2, 900], controllers=[1000, 1001, 1002])
    together = threading.Barrier(7, timeout=10)
    monkeypatch.setattr(c, "node_state", lambda node_id: (together.wait(), "paused" if node_id == 1 else "running")[1])
    assert c.node_states() == {0: "running", 1: "paused", 2: "running", 900: "running",
                               1000: "running", 1001: "running", 1002: "running"}


def _state(pid: int) -> str:
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


def test_a_zombie_owner_is_dead() -> None:
    """A process that exited but was not yet waited for (an xdist worker killed by its controller)
    owns nothing any more: its clusters may be reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        await_value(lambda: _state(child.pid), lambda s: s == "Z", timeout_s=30, interval_s=0.05, what="exit")
        assert not resources._pid_alive(child.pid)
    finally:
        child.wait()
    assert not resources._pid_alive(child.pid)
    assert resources._pid_alive(os.getpid())


class _StartingNode:
    """A node of ``KafkaCluster._bring_up`` that records its steps; ``hold`` blocks its first step
    until the startup is stopping, ``interrupt`` sends SIGINT to the process in its first step."""

    def __init__(self, name: str, cluster: KafkaCluster, hold: bool = False, interrupt: bool = False) -> None:
        self.name, self.cluster, self.hold, self.interrupt = name, cluster, hold, interrupt
        self.steps: list[str] = []

    def start_container(self) -> None:
        self.steps.append("containers")
        if self.interrupt:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, or execnet's own SIGINT to a worker
        if self.hold:  # a step under way when the interrupt comes (bounded: then it goes on)
            self.cluster._startup_stopping.wait(10)

    def configure(self) -> None:
        self.steps.append("configure")

    def ctl(self, *args: str) -> None:
        self.steps.append(args[0])

    def logs(self) -> str:
        return ""


def test_an_interrupted_startup_begins_no_further_step() -> None:
    """Ctrl-C during a cluster's start: the nodes end the step under way and begin no other, so
    the cluster is closed within one step's time (an xdist worker whose controller went has 15 s
    before execnet ends it, cleanup or not), not after every node's whole startup."""
    c = KafkaCluster.__new__(KafkaCluster)
    c.kafka_cluster_id, c.timings, c._startup_stopping = "x", {}, threading.Event()
    held = _StartingNode("b0", c, hold=True)
    nodes = [held, _StartingNode("b1", c, interrupt=True)]
    with pytest.raises(KeyboardInterrupt):
        c._bring_up(nodes, "1")  # type: ignore[arg-type]
    assert held.steps == ["containers"]


def test_an_older_record_of_the_same_state_is_not_taken_for_the_partitions_epoch() -> None:
    """The partition epoch never goes back. After a cluster-wide ClearElr empties the ELR, the state
    (leader 2, ISR [2], ELR []) is also that of an earlier record (an unclean election's, RECOVERING);
    read before the log holds the new record, that old one matched: CI saw epoch 9 become 5 and
    ``recovering`` true. The backend takes it as not known yet, and reads again at the next observation."""
    from pytest_elr.backends.kafka import KafkaBackend
    from pytest_elr.sut.admin import PartitionState
    from pytest_elr.sut.metadata_log import Registration

    def reg(epoch: int, elr: tuple[int, ...], recovering: bool) -> Registration:
        return Registration(leader=2, leader_epoch=4, partition_epoch=epoch, isr=(2,), elr=elr, last_known_elr=(),
                            recovering=recovering, replicas=(0, 1, 2))

    answers = [reg(9, (1,), False), reg(5, (), True), reg(10, (), False)]

    class Client:
        registration_miss = "no record yet"

        def registration(self, state: PartitionState, refreshed: dict[int, str] | None = None) -> Registration:
            return answers.pop(0)

    backend = object.__new__(KafkaBackend)
    backend.client, backend.history = Client(), None  # type: ignore[assignment]
    backend._registration_read, backend._miss_recorded = {}, {}

    def state(elr: tuple[int, ...]) -> PartitionState:
        return PartitionState(topic="t", partition=0, leader=2, leader_epoch=4, replicas=(0, 1, 2), isr=(2,),
                              elr=elr, last_known_elr=(), offline_replicas=())

    assert backend._registration(state((1,)), {})["partition_epoch"] == 9
    assert backend._registration(state(()), {}) == {"recovering": None, "partition_epoch": None,
                                                    "adding": None, "removing": None}  # epoch 5: not yet known
    assert backend._registration(state(()), {})["partition_epoch"] == 10  # read again: the new record
    assert not answers


class _Replies:
    """A container whose ``cat`` of the reply file first loses the head of its output (as Docker's
    exec stream did at load 30), then gives it whole."""

    def __init__(self, reads: list[str]) -> None:
        self.reads = reads

    def exec_run(self, cmd: list[str], demux: bool = False, environment: object = None) -> object:
        out = self.reads.pop(0) if cmd[0] == "cat" else ""
        return type("Result", (), {"exit_code": 0, "output": out.encode()})()


def _node_with(container: _Replies) -> KafkaNode:
    node = object.__new__(KafkaNode)
    node._tc = type("Wrapper", (), {"get_wrapped_container": lambda self: container})()  # type: ignore[assignment]
    node.spec = type("Spec", (), {"name": "broker-0"})()  # type: ignore[assignment]
    return node


def test_a_ctl_reply_read_without_its_head_is_read_again() -> None:
    whole = '{"files": [{"path": "t-0/0.log", "unsynced_bytes": 7}], "total": 7}'
    assert _node_with(_Replies(["", whole[20:], whole])).ctl_json("fs-stats") == json.loads(whole)
    with pytest.raises(NodeCommandError, match="left no whole JSON"):
        _node_with(_Replies([whole[20:]] * 5)).ctl_json("fs-stats")
