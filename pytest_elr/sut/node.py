"""One Kafka node = one container (testcontainers ``DockerContainer``).

The container's main process runs the node's Toxiproxy server and idles; the
JVM is controlled with ``kafka-ctl`` through ``docker exec`` (see
``pytest_elr/sut/recipes/kafka-node/kafka-ctl``), so it can be stopped, killed, paused and
relaunched while the container, its network identity and its data dir stay.

With ``lazyfs`` (a metadata mode of :mod:`pytest_elr.lazyfs`), the data dir is a
FUSE mount of the write-cache layer over ``/var/lib/kafka/backing`` in the
container; ``kafka-ctl`` mounts it before the JVM starts and it outlives the
JVM. The container then needs ``/dev/fuse`` and ``CAP_SYS_ADMIN`` (never
``--privileged``). The mount lives in the container's mount namespace: removing
the container leaves nothing mounted on the host.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import shlex
import tarfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import docker.errors
from docker.models.containers import Container
from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from pytest_elr.sut.config import (
    BROKER_HEAP,
    CLIENT_PORT,
    CONTROLLER_HEAP,
    SERVER_LOG,
    START_MARKER,
    TOXIPROXY_PORT,
    NodeSpec,
    Topology,
)
from pytest_elr.sut.errors import NodeCommandError, PortClashError, ToxiproxyError
from pytest_elr.sut.instrument import (
    AGENTS_IN_NODE,
    COVERAGE_IN_NODE,
    JACOCO_PORT,
    PLANTED_FILE,
    Agents,
    Instrumentation,
)
from pytest_elr.sut.polling import poll
from pytest_elr.sut.toxiproxy import ProxySpec, ToxiproxyClient

RYUK_ENV = "TESTCONTAINERS_RYUK_DISABLED"
#: the end of a reply to "what did the mutation agent plant" (``KafkaNode.planted_mutant``)
PLANTED_END = "ELR-PLANTED-END"
#: where a read copies a node's files before Docker's archive API reads them (``_copied_out``)
READS_IN_NODE = "/run/kafka"
#: log segments (``*.log``) by base offset: (base offset, bytes)
Segments = list[tuple[int, bytes]]
_ryuk_setting = threading.RLock()  # one scope at a time changes testcontainers' global setting


@contextlib.contextmanager
def without_ryuk() -> Iterator[None]:
    """Containers started inside run without Ryuk; testcontainers' setting is restored afterwards.

    Ryuk, testcontainers' reaper, is an image we cannot pull: cleanup is ours
    (:mod:`pytest_elr.sut.resources`). A ``$TESTCONTAINERS_RYUK_DISABLED`` of the user's wins.
    (Container hosts and ports are read from Docker here, never through testcontainers, so its
    connection mode does not matter.)
    """
    if RYUK_ENV in os.environ:
        yield
        return
    with _ryuk_setting:
        before = testcontainers_config.ryuk_disabled
        testcontainers_config.ryuk_disabled = True
        try:
            yield
        finally:
            testcontainers_config.ryuk_disabled = before


class KafkaNode:
    #: What the node's earlier reads left in the container (reply files, staging directories): the
    #: node's next read removes them in its own exec (``_removing_leftovers``), as a removal of their
    #: own was one more Docker call on each read's path (up to 1.9 s at load 18, 2026-11-27). They
    #: are on the container's root filesystem, gone with the container.
    _leftovers: tuple[str, ...] = ()
    _leftovers_lock = threading.Lock()  # held only to swap a node's tuple

    def __init__(self, spec: NodeSpec, topology: Topology, image: str, network: Network,
                 cluster_id: str, labels: dict[str, str], lazyfs: str | None = None,
                 instrumentation: Instrumentation | None = None, agents: Agents | None = None) -> None:
        self.spec = spec
        self.instrumentation = instrumentation
        self.lazyfs = lazyfs  # metadata mode of the FUSE layer under the data dir, or None
        self.topology = topology
        self.container_name = f"pytest-elr-{cluster_id}-{spec.name}"
        self.client_port: int | None = None  # host port of the CLIENT listener
        self.controller_port: int | None = None  # host port of a controller's CONTROLLER listener
        self.toxiproxy_port: int | None = None
        self._tc = DockerContainer(
            image,
            name=self.container_name,
            network=network,
            network_aliases=[spec.real_host],
            env={"KAFKA_HEAP_OPTS": BROKER_HEAP if spec.is_broker else CONTROLLER_HEAP,
                 "TOXIPROXY_PORT": str(TOXIPROXY_PORT), "ELR_LAZYFS": lazyfs or "",
                 **({"JAVA_TOOL_OPTIONS": instrumentation.jvm_options(spec.is_broker)} if instrumentation else {})},
            labels=labels,
            # Not the advertised name: Docker maps the hostname to the container
            # IP in /etc/hosts, which would bypass the local proxy.
            hostname=f"node-{spec.name}",
            extra_hosts=topology.extra_hosts(),
            # FUSE inside the node: the device and SYS_ADMIN (not --privileged); Docker's default
            # AppArmor profile (Ubuntu hosts) denies mount, so the node runs unconfined by it.
            **({"devices": ["/dev/fuse:/dev/fuse:rwm"], "cap_add": ["SYS_ADMIN"],
                "security_opt": ["apparmor=unconfined"]} if lazyfs else {}),
        )
        # Publish on loopback only, random host port (so no clashes between
        # clusters). testcontainers' API takes only int ports, hence the tuple.
        self._tc.ports[f"{TOXIPROXY_PORT}/tcp"] = ("127.0.0.1",)  # type: ignore[assignment]
        if spec.is_broker:
            self._tc.ports[f"{CLIENT_PORT}/tcp"] = ("127.0.0.1",)  # type: ignore[assignment]
        else:  # the CONTROLLER listener, for the harness's own requests (a forged AlterPartition)
            self._tc.ports[f"{spec.peer_port}/tcp"] = ("127.0.0.1",)  # type: ignore[assignment]
        self._agents = agents
        if instrumentation is not None and instrumentation.coverage_dir is not None:
            instrumentation.coverage_dir.mkdir(parents=True, exist_ok=True)
            self._tc.with_volume_mapping(str(instrumentation.coverage_dir), COVERAGE_IN_NODE, "rw")
        self.toxiproxy: ToxiproxyClient | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def container(self) -> Container:
        c = self._tc.get_wrapped_container()
        if c is None:
            raise NodeCommandError(f"{self.name}: container not started")
        return c

    # ------------------------------------------------------------ lifecycle

    def start_container(self) -> None:
        try:
            self._tc.start()
        except docker.errors.APIError as e:
            text = str(e)
            if "port is already allocated" in text or "address already in use" in text:
                raise PortClashError(f"{self.name}: a published port is taken ({text}).\n"
                                     "fix: free the port or let Docker choose (the default)") from e
            raise
        c = self.container
        c.reload()
        ports = c.attrs["NetworkSettings"]["Ports"]
        self.toxiproxy_port = int(ports[f"{TOXIPROXY_PORT}/tcp"][0]["HostPort"])
        if self.spec.is_broker:
            self.client_port = int(ports[f"{CLIENT_PORT}/tcp"][0]["HostPort"])
        else:
            self.controller_port = int(ports[f"{self.spec.peer_port}/tcp"][0]["HostPort"])
        self.toxiproxy = ToxiproxyClient("127.0.0.1", self.toxiproxy_port)

    def wait_toxiproxy(self, timeout_s: float = 30.0) -> None:
        """Until the node's Toxiproxy server answers; on timeout its last error."""
        toxiproxy = self.toxiproxy
        assert toxiproxy is not None, "container not started"
        poll(toxiproxy.version, timeout_s=timeout_s, interval_s=0.1, retry_on=ToxiproxyError,
             timed_out=lambda last: ToxiproxyError(f"{self.name}: Toxiproxy silent for {timeout_s:.0f}s: {last}"))

    def proxy_specs(self) -> list[ProxySpec]:
        """One proxy per peer: ``to-<peer>`` on 127.0.0.1:<peer port> -> peer's real address."""
        return [ProxySpec(f"to-{p.name}", f"127.0.0.1:{p.peer_port}",
                          f"{p.real_host}:{p.peer_port}")
                for p in self.topology.nodes if p != self.spec]

    def configure(self) -> None:
        self.wait_toxiproxy()
        assert self.toxiproxy is not None
        self.toxiproxy.populate(self.proxy_specs())
        self.put_file("/etc/kafka/server.properties",
                      self.topology.render(self.spec, self.client_port))
        if self.instrumentation is not None and self._agents is not None:
            # Copied in, not mounted: a JVM restarted later needs them even if the host's cache is gone.
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                for jar in self._agents.jars():
                    tar.add(str(jar), arcname=f"{AGENTS_IN_NODE.rsplit('/', 1)[1]}/{jar.name}")
            self.container.put_archive(AGENTS_IN_NODE.rsplit("/", 1)[0], buf.getvalue())

    def put_file(self, path: str, content: str) -> None:
        directory, _, fname = path.rpartition("/")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            data = content.encode()
            info = tarfile.TarInfo(fname)
            info.size = len(data)
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
        self.container.put_archive(directory, buf.getvalue())

    def exec(self, *cmd: str, check: bool = True, env: dict[str, str] | None = None) -> tuple[int, str]:
        res = self.container.exec_run(list(cmd), demux=False, environment=env)
        out = (res.output or b"").decode(errors="replace")
        if check and res.exit_code != 0:
            raise NodeCommandError(f"{self.name}: `{' '.join(cmd)}` exited {res.exit_code}: "
                                   f"{out.strip()[-2000:]}")
        return res.exit_code, out

    def ctl(self, *args: str, check: bool = True) -> str:
        return self.exec("/opt/elr/bin/kafka-ctl", *args, check=check)[1].strip()

    def ctl_json(self, *args: str) -> dict[str, Any]:
        """A ``kafka-ctl`` command that answers JSON, its reply kept in a file in the container.

        Docker can lose the output of a short exec under load (seen: exit 0, empty output, on a
        power off that had happened; and, at load 30, a 50-partition ``fs-stats`` reply whose head
        was missing), so the reply is read back from the file, which is idempotent, instead of
        trusting the exec's stream, and read again until it is whole JSON.
        """
        path = f"/run/kafka/reply-{secrets.token_hex(4)}.json"
        self.exec("bash", "-c", self._removing_leftovers(f'/opt/elr/bin/kafka-ctl "$@" > {path}'), "kafka-ctl", *args)
        try:
            reply = self._reply_in(path, args)
        except BaseException:
            self.exec("rm", "-f", path, check=False)
            raise
        self._leave(path)
        return reply

    def _reply_in(self, path: str, args: tuple[str, ...]) -> dict[str, Any]:
        """The whole JSON reply ``kafka-ctl`` left in ``path``, read up to five times."""
        seen = "no reply"
        for _ in range(5):
            out = self.exec("cat", path)[1].strip()
            if not out:
                continue
            try:
                reply: dict[str, Any] = json.loads(out)
                return reply
            except json.JSONDecodeError as exc:
                seen = f"no whole JSON ({exc}; {len(out)} characters read)"
        raise NodeCommandError(f"{self.name}: `kafka-ctl {' '.join(args)}` left {seen} in {path}")

    def _leave(self, path: str) -> None:
        """``path``, read, is removed by the node's next read (``_leftovers``)."""
        with self._leftovers_lock:
            self._leftovers = (*self._leftovers, path)

    def _removing_leftovers(self, script: str) -> str:
        """The shell ``script`` preceded by the removal of what the node's earlier reads left."""
        with self._leftovers_lock:
            paths, self._leftovers = self._leftovers, ()
        return f"rm -rf -- {' '.join(map(shlex.quote, paths))}; {script}" if paths else script

    def partition_dir(self, topic: str, partition: int) -> str:
        """The partition's directory in whichever of the node's log dirs holds it (a JBOD replica
        moves between them; a future or deleted copy is named otherwise and is not it). With no
        copy anywhere, the first log dir's path, which holds no segment."""
        held = self.dirs_holding(topic, partition)
        return f"{held[0] if held else self.spec.log_dirs[0]}/{topic}-{partition}"

    def dirs_holding(self, topic: str, partition: int) -> list[str]:
        """The log dirs that hold a directory named for the partition, in the node's order. Right
        after a JBOD move both can, for a moment: Kafka renames the copy into place before it
        renames the old directory for deletion (``LogManager.replaceCurrentWithFutureLog``)."""
        dirs = self.spec.log_dirs
        if len(dirs) == 1:
            return [dirs[0]]
        found = self.exec("sh", "-c", 'for d in "$@"; do [ -d "$d/$0" ] && echo "$d"; done; true',
                          f"{topic}-{partition}", *dirs)[1]
        return [line.strip() for line in found.splitlines() if line.strip()]

    def segment_files(self, directory: str) -> Segments:
        """The log segments (``*.log``) of a partition directory, by base offset, as the node's disk
        holds them now (copied inside the container: through the FUSE layer when there is one).
        A missing directory has none."""
        script = 'mkdir -p "$0" && for f in "$1"/*.log; do [ -f "$f" ] && cp "$f" "$0"/; done; true'
        files = self._copied_out(f"the segments of {directory}", script, directory)
        return sorted((int(name.split(".")[0]), data) for name, data in files.items() if name.endswith(".log"))

    def partitions_segments(self, partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], Segments]:
        """``segment_files`` of each partition's ``partition_dir``, all copied out in one exec and one
        archive read: a read per partition was three Docker calls (one more to find its directory on
        a JBOD node), each up to 1.9 s at load 18 (2026-11-27). Kafka topic names hold no space or
        glob character, so the partitions travel as one word-split argument."""
        script = ('mkdir -p "$0" && tps="$1" && shift && for tp in $tps; do for d in "$@"; do '
                  '[ -d "$d/$tp" ] || continue; mkdir -p "$0/$tp" && '
                  'for f in "$d/$tp"/*.log; do [ -f "$f" ] && cp "$f" "$0/$tp"/; done; break; done; done; true')
        names = " ".join(f"{topic}-{p}" for topic, p in partitions)
        files = self._copied_out("the segments of " + names, script, names, *self.spec.log_dirs, tree=True)
        return {(topic, p): sorted((int(path.rpartition("/")[2].split(".")[0]), data) for path, data in files.items()
                                   if path.startswith(f"{topic}-{p}/") and path.endswith(".log"))
                for topic, p in partitions}

    def read_tails(self, directory: str, suffix: str, starts: Mapping[str, int], staging: str) -> dict[str, bytes]:
        """What each file of ``directory`` named ``*suffix`` holds from byte ``starts[name]`` on (0
        for a file not named there): name -> those bytes, copied inside the container (through the
        FUSE layer) and read through Docker's archive API as ``read_file`` does, in two calls to
        Docker instead of four (a listing, the copy, the archive, the removal): each Docker call
        took up to 3.5 s on a loaded machine (2026-11-27). ``staging``: a directory of the caller's
        own, emptied at the next read (the container's root filesystem; gone with the container)."""
        script = ('rm -rf "$0" && mkdir -p "$0" && d="$1" && x="$2" && shift 2 && '
                  'for f in "$d"/*"$x"; do [ -f "$f" ] || continue; n="${f##*/}"; o=0; '
                  'for a in "$@"; do [ "${a%:*}" = "$n" ] && o="${a##*:}"; done; '
                  'tail -c +"$((o + 1))" "$f" > "$0/$n" || exit 1; done; true')
        what = f"the {suffix} files of {directory}"
        code, out = self.exec("sh", "-c", script, staging, directory, suffix,
                              *(f"{name}:{start}" for name, start in sorted(starts.items())), check=False)
        if code != 0:
            raise NodeCommandError(f"{self.name}: cannot read {what}: exit {code}: {out.strip()[-500:]}")
        return self._archive_files(what, staging)

    def read_file(self, path: str) -> bytes:
        """A file of the container, binary (through the FUSE layer when it is under one)."""
        if not self.lazyfs:
            return self._archive_file(path)
        files = self._copied_out(path, 'mkdir -p "$0" && cp "$1" "$0"/', path, one_file=True)
        return next(iter(files.values()))

    def _copied_out(self, what: str, script: str, *args: str, tree: bool = False,
                    one_file: bool = False) -> dict[str, bytes]:
        """The files ``script`` copies into the directory ``$0`` (made fresh on the container's root
        filesystem), read through Docker's archive API: name -> bytes. Docker's
        archive API does not see the FUSE layer's mount (it reads the root filesystem), hence the
        copy made inside; and the exec streams do not carry the data (they did, base64 encoded:
        under load ``docker exec``'s output came back cut short or out of frame -- "Incorrect
        padding", "73 is not a valid stream" -- 5 harness errors in 27 schedules of a 3-controller
        exploration), the archive's HTTP body and tar headers are checked. Any failure is a
        ``NodeCommandError`` naming ``what``: a caller's "not readable right now". ``tree``: the files
        named by their path under ``$0`` (else by their name); ``one_file``: anything but one file is a
        failure. The copy is removed by the node's next read, or at once when this one failed."""
        staging = f"{READS_IN_NODE}/read-{secrets.token_hex(4)}"
        try:
            code, out = self.exec("sh", "-c", self._removing_leftovers(script), staging, *args, check=False)
            if code != 0:
                raise NodeCommandError(f"{self.name}: cannot read {what}: exit {code}: {out.strip()[-500:]}")
            files = self._archive_files(what, staging, tree)
            if one_file and len(files) != 1:
                raise NodeCommandError(f"{self.name}: cannot read {what}: not a regular file")
        except BaseException:
            self.exec("rm", "-rf", staging, check=False)
            raise
        self._leave(staging)
        return files

    def _archive_files(self, what: str, path: str, tree: bool = False) -> dict[str, bytes]:
        """The regular files of the archive of ``path``: by name, or (``tree``) by their path under it."""
        def key(member: tarfile.TarInfo) -> str:
            return member.name.partition("/")[2] if tree else os.path.basename(member.name)

        try:
            stream, _ = self.container.get_archive(path)
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                return {key(m): self._member(tar, m) for m in tar.getmembers() if m.isfile()}
        except (docker.errors.DockerException, tarfile.TarError, OSError) as exc:
            raise NodeCommandError(f"{self.name}: cannot read {what}: {exc}") from None

    @staticmethod
    def _member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
        extracted = tar.extractfile(member)
        assert extracted is not None  # a regular file (``isfile``) always extracts
        return extracted.read()

    def _archive_file(self, path: str) -> bytes:
        files = self._archive_files(path, path)
        if len(files) != 1:
            raise NodeCommandError(f"{self.name}: {path} is not a regular file")
        return next(iter(files.values()))

    def log_since_start(self, *needles: str) -> list[str]:
        """Lines of the JVM's log since its latest start that contain any of ``needles`` (one exec)."""
        if not needles:
            return []
        script = f"tac {SERVER_LOG} | sed '/^{START_MARKER}/q' | grep -F \"$@\" | tac"
        patterns = [arg for needle in needles for arg in ("-e", needle)]
        return self.exec("sh", "-c", script, "log", *patterns, check=False)[1].splitlines()

    def dump_coverage(self, relative: str) -> bool:
        """JaCoCo's coverage since the last dump into ``<coverage dir>/<relative>``, then reset: False
        when there is nothing to ask (no coverage, or no JVM listening)."""
        if self.instrumentation is None or self.instrumentation.coverage_dir is None:
            return False
        code, _ = self.exec(
            "java", "-Xmx64m", "-XX:TieredStopAtLevel=1", "-jar", f"{AGENTS_IN_NODE}/jacococli.jar", "dump",
            "--address", "127.0.0.1", "--port", str(JACOCO_PORT), "--retry", "0", "--reset", "--quiet",
            "--destfile", f"{COVERAGE_IN_NODE}/{relative}", check=False, env={"JAVA_TOOL_OPTIONS": ""})
        return code == 0

    def planted_mutant(self) -> str | None:
        """What the mutation agent wrote when its class loaded (the id; ``missing: ...``), or None:
        no report there, or none readable now (a paused or removed container; ``kafka-mutants``
        reads again at the mutant's end). Docker can lose a short exec's output under load (exit 0,
        nothing: ``ctl_json``), which read as "never planted": the reply ends with a marker, and a
        reply without it is asked again."""
        for _ in range(5):
            try:
                _, out = self.exec("sh", "-c", f'cat "$1" 2>/dev/null; echo {PLANTED_END}', "planted", PLANTED_FILE,
                                   check=False)
            except docker.errors.APIError:
                return None
            if PLANTED_END in out:
                report = out.split(PLANTED_END, 1)[0].strip()
                return report or None
        return None

    def state(self) -> str:
        """``running`` | ``paused`` | ``stopped`` (of the JVM, not the container)."""
        try:
            return self.ctl("status")
        except (NodeCommandError, docker.errors.APIError):
            return "stopped"

    def fs_stats(self) -> dict[str, object]:
        """The FUSE layer's ``stats`` (unsynced bytes per file and in total)."""
        if not self.lazyfs:
            raise NodeCommandError(f"{self.name}: no lazyfs layer under its data dir")
        return self.ctl_json("fs-stats")

    def logs(self, lines: int = 40) -> str:
        try:
            return self.ctl("logs", str(lines), check=False)
        except Exception as e:  # container gone: say so rather than fail the report
            return f"<no logs: {e}>"

    def remove(self) -> None:
        with contextlib.suppress(docker.errors.NotFound):
            self._tc.stop(force=True, delete_volume=True)
