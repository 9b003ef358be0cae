"""The vocabulary of faults and workload: one class per action, each a self-describing unit.

An action knows everything about itself that is not how a backend does it:

* its YAML form(s) and how to read them with file:line errors (``parse``);
* how it is written back as YAML, e.g. for a shrunk counterexample (``to_yaml``);
* how it appears in a history and is read back from one (``describe`` / ``from_event``);
* the brokers it names (``named_brokers``) and what it does to their lifecycle (``transitions``);
* what the executor and the report need to know (``fault``, ``settles``, ``lossy``, ``draw``).

The loader, the exporter, the executor and the report are driven by these classes; each backend
does an action through one dispatch table (``functools.singledispatchmethod``). Adding an action
is this file plus one handler per backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar, Literal

import yaml

from pytest_elr.core.limits import MAX_LATENCY_MS, MAX_MIN_ISR, MAX_PRODUCE, MAX_WAIT_S
from pytest_elr.core.nodes import (
    ACTIVE,
    CONTROLLER,
    ISOLATION_SCOPES,
    LEADER_OF,
    BrokerRef,
    IsolationScope,
    Link,
    Node,
    controller_of,
    is_controller,
    isolation_links,
    partition_led,
)
from pytest_elr.core.reader import Reader
from pytest_elr.core.specs import ClusterSpec

Acks = Literal["all", "1", "0"]
ACKS: tuple[Acks, ...] = ("all", "1", "0")
#: what an action leaves a broker's process in
Lifecycle = Literal["up", "down", "paused"]
#: how the report draws an action: it starts a network fault, or ends some (None: a mark only)
Draw = Literal["net", "heal"]

DEFAULT_LATENCY_MS = 5000

#: every action by its history name, and by each YAML key that builds it
ACTIONS: dict[str, type[Action]] = {}
FORMS: dict[str, type[Action]] = {}


@dataclass(frozen=True)
class Action:
    """Base class of every action; subclasses are frozen dataclasses of their arguments."""

    #: the action's name in histories (and its YAML key unless ``forms`` says otherwise)
    kind: ClassVar[str] = "action"
    #: YAML keys that build this action (``isolate`` is a form of ``cut``)
    forms: ClassVar[tuple[str, ...]] = ()
    #: recorded as a ``fault`` event (a produce is recorded record by record instead)
    fault: ClassVar[bool] = True
    #: a real cluster must converge to the model's state before the next action
    settles: ClassVar[bool] = True
    #: can take unsynced data from its victims: a run with one must show the fault bit
    lossy: ClassVar[bool] = False
    #: an operator's request the controller may refuse: its answer is held to the model's (``refused``)
    operator: ClassVar[bool] = False
    draw: ClassVar[Draw | None] = None
    #: log dirs each broker must have (``cluster: {log_dirs: N}``) for the action to be done
    log_dirs_needed: ClassVar[int] = 1
    #: the state the action leaves its brokers' processes in (None: unchanged)
    leaves: ClassVar[Lifecycle | None] = None
    #: the states its brokers' processes must be in (None: any)
    needs: ClassVar[frozenset[Lifecycle] | None] = None
    #: it undoes a fault on a broker (``restart``, ``resume``, ``heal``): ``{leader_of: N}`` names the
    #: broker the symbol named when it was last resolved, not the partition's leader now
    recalls: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            ACTIONS[cls.kind] = cls
            for form in cls.__dict__.get("forms") or (cls.kind,):
                FORMS[form] = cls

    # --- the language -------------------------------------------------------------------------

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        """The actions one ``- <form>: <arg>`` item of a step's ``do`` list builds; ``what`` names the
        item in error messages (e.g. ``step T1: isolate``)."""
        raise NotImplementedError(f"{cls.__name__} has no YAML form")

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        """Items of a ``do`` list that build this action again."""
        raise NotImplementedError(f"{type(self).__name__} cannot be written as YAML")

    # --- histories ----------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        return {"action": self.kind, "args": asdict(self)}

    @classmethod
    def from_event(cls, args: Mapping[str, Any]) -> Action:
        names = {f.name for f in fields(cls)}
        return cls(**{k: _tuples(v) for k, v in args.items() if k in names})

    # --- what it touches ----------------------------------------------------------------------

    def named_brokers(self) -> tuple[int, ...]:
        """Every broker id the action names (for validation against the cluster; not the symbolic
        targets, see ``symbols``)."""
        return tuple(n for n in self._broker_refs() if isinstance(n, int))

    def symbols(self) -> tuple[str, ...]:
        """The symbolic targets the action names (``leader_of(N)``), each once, in order."""
        return tuple(dict.fromkeys(n for n in self._broker_refs() if partition_led(n) is not None))

    def _broker_refs(self) -> list[Node]:
        refs: list[Node] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "broker":
                refs.append(value)
            elif f.name == "brokers":
                refs += list(value)
            elif f.name == "links":
                refs += [n for link in value or () for n in link]
        return refs

    def resolved(self, brokers: Mapping[str, int]) -> Action:
        """The action with each symbolic target as the broker ``brokers`` gives it; a link between a
        broker and itself, which a target may come to name (``cut: {between: [{leader_of: 2}, 0]}``
        while broker 0 leads partition 2), is left out."""
        if not self.symbols():
            return self
        changes: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "broker":
                changes["broker"] = brokers.get(value, value)
            elif f.name == "brokers":
                changes["brokers"] = tuple(brokers.get(b, b) for b in value)
            elif f.name == "links" and value is not None:
                links = ((brokers.get(a, a), brokers.get(b, b)) for a, b in value)  # type: ignore[arg-type]
                changes["links"] = tuple(dict.fromkeys(link for link in links if link[0] != link[1]))
        return replace(self, **changes)

    def transitions(self) -> dict[int, Lifecycle]:
        """The state each broker's process is left in (empty: no process changes)."""
        return {}

    def refused_in(self, states: Mapping[int, Lifecycle]) -> str | None:
        """Why the action cannot be done with brokers in ``states`` (None: it can)."""
        return None

    def refused_by(self, cluster: ClusterSpec) -> str | None:
        """Why the cluster cannot do the action at all (None: it can)."""
        if cluster.log_dirs < self.log_dirs_needed:
            return (f"the brokers have {cluster.log_dirs} log dir{'s' if cluster.log_dirs > 1 else ''} each; give "
                    f"the cluster {self.log_dirs_needed} (cluster: {{log_dirs: {self.log_dirs_needed}}})")
        return None

    def records(self) -> int:
        """Records the action sends (for the scenario's bound on records)."""
        return 0


def action_from_event(event: Mapping[str, Any]) -> Action | None:
    """The action a history's ``fault`` event describes (None: a kind this version does not know)."""
    cls = ACTIONS.get(str(event.get("action")))
    if cls is None:
        return None
    try:
        return cls.from_event(event.get("args") or {})
    except TypeError:
        return None


def action_forms() -> tuple[str, ...]:
    """The YAML keys of every action defined so far, in the order they were defined."""
    return tuple(FORMS)


def unhandled(handled: Iterable[type]) -> list[str]:
    """Kinds of action that no class in ``handled`` (a dispatch table's keys) covers."""
    have = set(handled)
    return sorted(kind for kind, cls in ACTIONS.items() if cls not in have)


_RUNNING: frozenset[Lifecycle] = frozenset({"up", "paused"})
_SAYS: dict[Lifecycle, str] = {"up": "running", "down": "stopped", "paused": "paused"}


def _refused(needs: frozenset[Lifecycle] | None, brokers: list[BrokerRef],
             states: Mapping[int, Lifecycle]) -> str | None:
    for b in brokers:
        if not isinstance(b, int):
            continue  # a symbolic target: checked when the step runs (``Executor``), and by the loader
        state = states.get(b, "up")
        if needs is not None and state not in needs:
            wanted = " or ".join(sorted(_SAYS[s] for s in needs))
            return f"broker {b} is {_SAYS[state]} at this point, the action needs it {wanted}"
    return None


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


# --- links ------------------------------------------------------------------------------------


def _read_links(r: Reader, arg: yaml.Node, what: str, extra: tuple[str, ...] = ()) -> tuple[Link, ...]:
    """``{from: a, to: b}`` (one way) or ``{between: [a, b, ...]}`` (every direction)."""
    doc = r.mapping(arg, what, ("from", "to", "between", *extra))
    if "between" in doc:
        if "from" in doc or "to" in doc:
            r.fail(arg, f"{what}: use either between or from/to")
        nodes = r.nodes(doc["between"], f"{what}.between")
        if len(nodes) < 2:
            r.fail(doc["between"], f"{what}.between: expected at least two nodes")
        links = [(a, b) for a in nodes for b in nodes if a != b]
    else:
        if "from" not in doc or "to" not in doc:
            r.fail(arg, f"{what}: expected from and to (one-way) or between (both ways)")
        sources = r.nodes(doc["from"], f"{what}.from")
        targets = r.nodes(doc["to"], f"{what}.to")
        links = [(a, b) for a in sources for b in targets if a != b]
    if not links:
        r.fail(arg, f"{what}: names no link between two different nodes")
    for a, b in links:
        if not (is_controller(a) and is_controller(b)):
            continue
        if CONTROLLER in (a, b):
            r.fail(arg, f"{what}: a link between two controllers names each one, {{controller: n}} (controller is "
                        "every controller; isolate_controller cuts one from all the others)")
        if ACTIVE in (controller_of(a), controller_of(b)):
            r.fail(arg, f"{what}: a link between two controllers names both by number, {{controller: n}}: which "
                        "one is active is timing on Kafka, so {controller: active} may be the other end")
    return tuple(links)


def _links_refused(links: Iterable[Link] | None, cluster: ClusterSpec) -> str | None:
    """Why the cluster has no such link: a controller number outside it, or one controller named
    in a cluster of one (where ``controller`` says it)."""
    for link in links or ():
        for node in link:
            target = controller_of(node)
            if target is None:
                continue
            n = cluster.controllers
            if n == 1:
                return (f"the cluster has one controller: name it controller (e.g. cut: {{between: [1, controller]}}); "
                        f"{{controller: {target}}} names one of several (cluster: {{controllers: 3}})")
            if isinstance(target, int) and target >= n:
                return f"controller {target} is not in the cluster: it has {n} controllers (0..{n - 1})"
    return None


def _yaml_node(node: Node) -> Any:
    """A link end (or a broker target) as YAML writes it."""
    partition = partition_led(node)
    if partition is not None:
        return {LEADER_OF: partition}
    target = controller_of(node)
    return node if target is None else {CONTROLLER: target}


def _is_target(arg: yaml.Node) -> bool:
    """``arg`` is a mapping that names a symbolic broker target (``{leader_of: N}``)."""
    return isinstance(arg, yaml.MappingNode) and any(
        isinstance(k, yaml.ScalarNode) and k.value == LEADER_OF for k, _ in arg.value)


#: the key of an action's mapping form that names the partition it acts on (left out: partition 0)
PARTITION = "partition"


def _keys(arg: yaml.Node) -> set[str]:
    """The plain keys of a mapping node (none for anything else)."""
    if not isinstance(arg, yaml.MappingNode):
        return set()
    return {k.value for k, _ in arg.value if isinstance(k, yaml.ScalarNode)}


def _partition(doc: Mapping[str, yaml.Node], r: Reader, what: str) -> int:
    """``partition: N`` of an action's mapping form: a partition of the topic (left out: 0)."""
    return r.partition(doc[PARTITION], f"{what}.{PARTITION}") if PARTITION in doc else 0


def _scope_of(links: Iterable[Link], brokers: tuple[int, ...]) -> tuple[int, IsolationScope] | None:
    """The (broker, scope) whose isolation is exactly ``links``, if any."""
    wanted = set(links)
    for b in (*brokers, *(n for link in wanted for n in link if partition_led(n) is not None)):
        for scope in ISOLATION_SCOPES:
            if wanted == set(isolation_links(b, scope, brokers)):
                return b, scope
    return None


def _link_item(form: str, link: Link, **extra: Any) -> dict[str, Any]:
    return {form: {"from": _yaml_node(link[0]), "to": _yaml_node(link[1]), **extra}}


# --- network ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cut(Action):
    """Black-hole the given directed links (requests sent on them never arrive)."""

    links: tuple[Link, ...]
    kind: ClassVar[str] = "cut"
    forms: ClassVar[tuple[str, ...]] = ("cut", "isolate")
    draw: ClassVar[Draw | None] = "net"

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        if form == "cut":
            return [cls(links=_read_links(r, arg, what))]
        if isinstance(arg, yaml.MappingNode) and not _is_target(arg):  # {broker: b, from: all|brokers|controller}
            doc = r.mapping(arg, what, ("broker", "from"))
            if "broker" not in doc:
                r.fail(arg, f"{what}: missing 'broker'")
            broker = r.target(doc["broker"], f"{what}.broker")
            scope: IsolationScope = "all"
            if "from" in doc and isinstance(doc["from"], yaml.MappingNode):  # from: {controller: n|active}
                peer = r.node(doc["from"], f"{what}.from")
                return [cls(links=((broker, peer), (peer, broker)))]
            if "from" in doc:
                scope = r.string(doc["from"], f"{what}.from", ISOLATION_SCOPES)  # type: ignore[assignment]
            return [cls(links=isolation_links(broker, scope, r.brokers))]  # type: ignore[arg-type]
        links: list[Link] = []
        for b in r.targets(arg, what):
            links += isolation_links(b, "all", r.brokers)  # type: ignore[arg-type]
        return [cls(links=tuple(dict.fromkeys(links)))]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        scoped = _scope_of(self.links, brokers)
        if scoped is not None:
            return [{"isolate": {"broker": _yaml_node(scoped[0]), "from": scoped[1]}}]
        return [_link_item("cut", link) for link in self.links]

    def refused_by(self, cluster: ClusterSpec) -> str | None:
        return _links_refused(self.links, cluster) or super().refused_by(cluster)


@dataclass(frozen=True)
class Slow(Action):
    """Delay the links beyond ``replica.lag.time.max.ms`` but within the broker session
    timeout: a follower fetching over it falls out of the ISR; a broker's requests to the
    controller are held (delivered when healed) while it stays unfenced.

    A slow follower still fetches, late (5 s against ``replica.socket.timeout.ms`` 3 s): it gets
    no records, but Kafka's leader takes it back into the ISR on a fetch at its HWM
    (``Partition.maybeExpandIsr``) and drops it again for lagging. Under min ISR the HWM is frozen
    (KIP-966), so a follower that left there is in and out in turn until healed (measured on
    Kafka 4.4.0 and 4.0.2: back 1.5-5 s after each leave, in for 0.4-1.5 s); one that left at min
    ISR is passed by the HWM and stays out. The shadow oracle allows either moment, the model
    backend has it out (docs/model.md, "Timing: a slow follower at the frozen HWM").

    ``{from: b, to: {controller: n|active}}`` holds b's requests to that controller alone, which
    matters while it is the active one (a broker sends AlterPartition to the active controller
    only); the controller is always the ``to`` end of a broker's link. Between two controllers
    (``{from: {controller: 0}, to: {controller: 1}}``, ``ms`` >= 5000) the data is delayed, not held:
    past the quorum's fetch timeout no round trip over it comes in time, which the model holds as a
    cut between the voters (measured on Kafka 4.4.0: docs/model.md, "A slow link between
    controllers")."""

    links: tuple[Link, ...]
    latency_ms: int = DEFAULT_LATENCY_MS
    kind: ClassVar[str] = "slow"
    draw: ClassVar[Draw | None] = "net"

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        if isinstance(arg, yaml.MappingNode):
            doc = r.mapping(arg, what, ("from", "to", "between", "ms"))
            latency = DEFAULT_LATENCY_MS
            if "ms" in doc:
                latency = r.integer(doc["ms"], f"{what}.ms", minimum=1, maximum=MAX_LATENCY_MS)
            links = _read_links(r, arg, what, extra=("ms",))
            for a, b in links:
                if is_controller(a) and is_controller(b):
                    if latency < DEFAULT_LATENCY_MS:
                        r.fail(doc["ms"], f"{what}.ms: a slowed link between two controllers is measured at "
                                          f"{DEFAULT_LATENCY_MS} ms and more (beyond the quorum's fetch timeout, "
                                          f"2 s, and its leader's check, 3 s), got {latency}: a shorter delay is "
                                          "not measured")
                    continue
                if controller_of(a) is not None:
                    r.fail(arg, f"{what}: slow holds a broker's requests to a controller: name the broker in from "
                                "and the controller in to")
            return [cls(links=links, latency_ms=latency)]
        links: list[Link] = []
        for b in r.brokers_list(arg, what):  # a slow replica: its links to every broker
            links += isolation_links(b, "brokers", r.brokers)
        return [cls(links=tuple(links))]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        scoped = _scope_of(self.links, brokers)
        if scoped is not None and scoped[1] == "brokers" and self.latency_ms == DEFAULT_LATENCY_MS:
            return [{"slow": scoped[0]}]
        ms = {} if self.latency_ms == DEFAULT_LATENCY_MS else {"ms": self.latency_ms}
        return [_link_item("slow", link, **ms) for link in self.links]

    def refused_by(self, cluster: ClusterSpec) -> str | None:
        return _links_refused(self.links, cluster) or super().refused_by(cluster)


@dataclass(frozen=True)
class Heal(Action):
    """Restore the given links, or every link when ``links`` is None."""

    links: tuple[Link, ...] | None = None
    kind: ClassVar[str] = "heal"
    draw: ClassVar[Draw | None] = "heal"
    recalls: ClassVar[bool] = True

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        if isinstance(arg, yaml.ScalarNode) and arg.value == "all":
            return [cls(links=None)]
        if isinstance(arg, yaml.MappingNode) and not _is_target(arg):
            return [cls(links=_read_links(r, arg, what))]
        links: list[Link] = []
        for b in r.targets(arg, what):  # {leader_of: N}: the broker it named when last resolved
            links += isolation_links(b, "all", r.brokers)  # type: ignore[arg-type]
        return [cls(links=tuple(links))]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        if self.links is None:
            return [{"heal": "all"}]
        scoped = _scope_of(self.links, brokers)
        if scoped is not None and scoped[1] == "all":
            return [{"heal": _yaml_node(scoped[0])}]
        return [_link_item("heal", link) for link in self.links]

    def refused_by(self, cluster: ClusterSpec) -> str | None:
        return _links_refused(self.links, cluster) or super().refused_by(cluster)


# --- processes and disks ----------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerAction(Action):
    """An action on one broker's process; ``- <kind>: <id or [ids]>`` builds one per broker (an id
    or ``{leader_of: N}``, the broker leading partition N when the step runs)."""

    #: a broker id, or a symbolic target (``leader_of(N)``: resolved when the step runs)
    broker: BrokerRef

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        return [cls(broker=b) for b in r.targets(arg, what)]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        return [{self.kind: _yaml_node(self.broker)}]

    def transitions(self) -> dict[int, Lifecycle]:
        if self.leaves is None or not isinstance(self.broker, int):
            return {}  # a symbolic target's: the executor's resolved action, the loader's ``check_sequence``
        return {self.broker: self.leaves}

    def refused_in(self, states: Mapping[int, Lifecycle]) -> str | None:
        return _refused(self.needs, [self.broker], states)


@dataclass(frozen=True)
class HoldHeartbeats(BrokerAction):
    """Hold the broker's heartbeats to the controller (delivered when healed); its registration,
    metadata and AlterPartition flow. A running broker is fenced when its session expires; a
    restarted one registers and stays fenced until healed (``heal: all``, ``heal: <broker>``, or
    ``heal: {from: <broker>, to: controller}``): the window between an unclean registration and
    unfencing, where KAFKA-19522 elected a fenced replica."""

    kind: ClassVar[str] = "hold_heartbeats"
    draw: ClassVar[Draw | None] = "net"


@dataclass(frozen=True)
class HoldDirAssignments(BrokerAction):
    """Hold the broker's AssignReplicasToDirs requests to the controller (delivered when healed);
    its heartbeats, metadata and AlterPartition flow. A broker that comes back on a new disk (a new
    directory id, KIP-858) then serves and rejoins the ISR while the controller still has its
    replica in the old directory, which is not online: Kafka elects no replica there. Healed like
    ``hold_heartbeats`` (``heal: all``, ``heal: <broker>``, ``heal: {from: <broker>, to:
    controller}``); the partition moves to the new directory when the request lands."""

    kind: ClassVar[str] = "hold_dir_assignments"
    draw: ClassVar[Draw | None] = "net"


@dataclass(frozen=True)
class HoldMetadata(BrokerAction):
    """Hold the broker's metadata fetches to the controller (the KRaft Fetch, delivered when
    healed); its heartbeats, registration and AlterPartition flow. It stays unfenced with a stale
    metadata offset, so the controller lets no other broker finish a controlled shutdown (the
    lowest active metadata offset must pass the shutdown's): a leader shut down cleanly
    (``begin_shutdown``) hands its leadership and ISR over, then stays unfenced and unelectable,
    its process running, until the hold is healed (``heal: all``, ``heal: <broker>``, ``heal:
    {from: <broker>, to: controller}``). The held broker must hold no replica of the topic."""

    kind: ClassVar[str] = "hold_metadata"
    draw: ClassVar[Draw | None] = "net"


@dataclass(frozen=True)
class Shutdown(BrokerAction):
    """Clean shutdown: controlled shutdown, logs flushed, clean-shutdown marker written."""

    kind: ClassVar[str] = "shutdown"
    needs: ClassVar[frozenset[Lifecycle] | None] = _RUNNING
    leaves: ClassVar[Lifecycle | None] = "down"


@dataclass(frozen=True)
class BeginShutdown(Shutdown):
    """A clean shutdown the step does not wait out: SIGTERM, and the step goes on while the broker's
    controlled shutdown runs. It leaves the state a ``shutdown`` leaves, but the cluster has to reach
    it while the process may still be exiting: a controller that moved the broker's leadership only
    when its session expired (after the broker gave up waiting) is caught here, not after ``shutdown``.
    A later ``restart`` waits for the exit first."""

    kind: ClassVar[str] = "begin_shutdown"


@dataclass(frozen=True)
class Crash(BrokerAction):
    """The broker process dies (SIGKILL). Unclean, but nothing is lost: the page cache lives."""

    kind: ClassVar[str] = "crash"
    needs: ClassVar[frozenset[Lifecycle] | None] = _RUNNING
    leaves: ClassVar[Lifecycle | None] = "down"


@dataclass(frozen=True)
class PowerOff(Action):
    """Lossy unclean shutdown of one or more brokers at once: unsynced data is gone."""

    brokers: tuple[BrokerRef, ...]
    kind: ClassVar[str] = "power_off"
    lossy: ClassVar[bool] = True

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        return [cls(brokers=tuple(r.targets(arg, what)))]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        return [{"power_off": [_yaml_node(b) for b in self.brokers]}]

    def transitions(self) -> dict[int, Lifecycle]:
        return dict.fromkeys((b for b in self.brokers if isinstance(b, int)), "down")

    def refused_in(self, states: Mapping[int, Lifecycle]) -> str | None:
        return _refused(_RUNNING, list(self.brokers), states)


@dataclass(frozen=True)
class Restart(BrokerAction):
    """Start a stopped broker again on whatever its disk holds."""

    kind: ClassVar[str] = "restart"
    needs: ClassVar[frozenset[Lifecycle] | None] = frozenset({"down"})
    leaves: ClassVar[Lifecycle | None] = "up"
    recalls: ClassVar[bool] = True


@dataclass(frozen=True)
class ReplaceDisk(BrokerAction):
    """Stop the broker uncleanly and bring it back with an empty log dir (KIP-903)."""

    kind: ClassVar[str] = "replace_disk"
    lossy: ClassVar[bool] = True
    leaves: ClassVar[Lifecycle | None] = "up"


@dataclass(frozen=True)
class Unregister(BrokerAction):
    """Remove the broker's registration (``kafka-cluster.sh unregister --id``, UnregisterBroker):
    the operator's step for a broker gone for good. Kafka removes it from every ISR (and leadership)
    as a fencing would; a broker still running is shut out until it restarts (its heartbeats are
    answered STALE_BROKER_EPOCH) and registers anew, as after an unclean shutdown."""

    kind: ClassVar[str] = "unregister"
    operator: ClassVar[bool] = True


@dataclass(frozen=True)
class MoveLogDir(BrokerAction):
    """Move the broker's replica to the next of its log dirs while it serves (a JBOD move,
    AlterReplicaLogDirs): the broker copies it there, swaps the copies, and tells the controller
    with AssignReplicasToDirs (KIP-858), which apache/kafka PR #20716 found emptying the ELR
    before 4.3.0. Nothing fsyncs the copy (``LogManager.replaceCurrentWithFutureLog``), so the
    replica's whole log is unsynced until flushed. Needs ``cluster: {log_dirs: 2}`` or more.
    ``{broker: b, partition: N}`` moves b's replica of partition N (left out: partition 0)."""

    partition: int = 0
    kind: ClassVar[str] = "move_log_dir"
    needs: ClassVar[frozenset[Lifecycle] | None] = frozenset({"up"})
    log_dirs_needed: ClassVar[int] = 2

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        keys = _keys(arg)
        if not isinstance(arg, yaml.MappingNode) or keys == {LEADER_OF}:  # target(s): partition 0's replica
            return super().parse(form, arg, r, what)
        if LEADER_OF in keys:
            r.fail(arg, f"{what}: name the broker in broker, e.g. {{broker: {{{LEADER_OF}: 1}}, partition: 2}}")
        doc = r.mapping(arg, what, ("broker", PARTITION))
        if "broker" not in doc:
            r.fail(arg, f"{what}: missing 'broker' (a broker id or {{{LEADER_OF}: N}}), "
                        "e.g. {broker: 1, partition: 2}")
        partition = _partition(doc, r, what)
        return [cls(broker=b, partition=partition) for b in r.targets(doc["broker"], f"{what}.broker")]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        if self.partition == 0:
            return super().to_yaml(brokers)
        return [{self.kind: {"broker": _yaml_node(self.broker), PARTITION: self.partition}}]


@dataclass(frozen=True)
class Pause(BrokerAction):
    """SIGSTOP: the broker stops answering anyone but keeps its state."""

    kind: ClassVar[str] = "pause"
    needs: ClassVar[frozenset[Lifecycle] | None] = frozenset({"up"})
    leaves: ClassVar[Lifecycle | None] = "paused"


@dataclass(frozen=True)
class Resume(BrokerAction):
    """SIGCONT: a paused broker carries on where it stopped."""

    kind: ClassVar[str] = "resume"
    needs: ClassVar[frozenset[Lifecycle] | None] = frozenset({"paused"})
    leaves: ClassVar[Lifecycle | None] = "up"
    recalls: ClassVar[bool] = True


@dataclass(frozen=True)
class Flush(BrokerAction):
    """fsync everything the broker has written so far."""

    kind: ClassVar[str] = "flush"


# --- controllers ------------------------------------------------------------------------------

#: the symbolic controller target: the quorum's leader, found when the step runs
ACTIVE_CONTROLLER = "active"
#: ``restart_controller``'s target for every stopped controller
ALL_CONTROLLERS = "all"


@dataclass(frozen=True)
class ControllerAction(Action):
    """An action on one KRaft controller's process: ``- <kind>: <n>`` names controller ``n``
    (0 .. controllers - 1, in the order of ``controller.quorum.voters``); ``targets`` lists the
    words it also takes."""

    controller: int | str
    targets: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        return [cls(controller=cls._read_target(arg, r, what))]

    @classmethod
    def _read_target(cls, arg: yaml.Node, r: Reader, what: str) -> int | str:
        if isinstance(arg, yaml.ScalarNode) and arg.value in cls.targets:
            return arg.value
        if cls.targets and not (isinstance(arg, yaml.ScalarNode) and arg.tag == "tag:yaml.org,2002:int"):
            r.fail(arg, f"{what}: expected a controller number or {' or '.join(cls.targets)}, got {arg.value!r}")
        return r.integer(arg, what, minimum=0)

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        return [{self.kind: self.controller}]

    def refused_by(self, cluster: ClusterSpec) -> str | None:
        if isinstance(self.controller, int) and self.controller >= cluster.controllers:
            n = cluster.controllers
            return (f"controller {self.controller} is not in the cluster: it has {n} controller"
                    f"{'s' if n > 1 else ''} (0..{n - 1}; cluster: {{controllers: 3}} for more)")
        return super().refused_by(cluster)


@dataclass(frozen=True)
class StopController(ControllerAction):
    """Every way a controller's process stops (``restart_controller`` starts it again);
    ``active``: whichever leads the quorum when the step runs. With a majority of the controllers
    left, another becomes active; without, no metadata changes until a majority is back."""

    targets: ClassVar[tuple[str, ...]] = (ACTIVE_CONTROLLER,)


@dataclass(frozen=True)
class CrashController(StopController):
    """The controller's process dies (SIGKILL)."""

    kind: ClassVar[str] = "crash_controller"


@dataclass(frozen=True)
class ShutdownController(StopController):
    """Clean shutdown of the controller (SIGTERM: an active one resigns before it exits)."""

    kind: ClassVar[str] = "shutdown_controller"


@dataclass(frozen=True)
class PowerOffController(StopController):
    """The controller's power is cut: its JVM dies and its metadata log dir loses what it never
    fsynced (the FUSE layer the brokers' log dirs sit behind). Not ``lossy``: no acknowledged
    record is at stake, and a voter flushes before it acknowledges (docs/model.md)."""

    kind: ClassVar[str] = "power_off_controller"

    def refused_by(self, cluster: ClusterSpec) -> str | None:
        problem = super().refused_by(cluster)
        if problem is None and cluster.controllers < 3:
            # A single controller's metadata dir has no lossy layer on Kafka (sut/cluster.py).
            return "a power cut of a controller needs a quorum of three (cluster: {controllers: 3})"
        return problem


@dataclass(frozen=True)
class RestartController(ControllerAction):
    """Start a stopped controller again on its metadata log; ``all``: every stopped controller."""

    kind: ClassVar[str] = "restart_controller"
    targets: ClassVar[tuple[str, ...]] = (ALL_CONTROLLERS,)


#: whom ``isolate_controller`` cuts a controller off from
ControllerScope = Literal["brokers", "controllers", "all"]
CONTROLLER_SCOPES: tuple[ControllerScope, ...] = ("brokers", "controllers", "all")


@dataclass(frozen=True)
class IsolateController(ControllerAction):
    """Cut a controller both ways from the brokers, from the other controllers, or from both
    (``isolate_controller: {controller: n|active, from: brokers|controllers|all}``; a bare target
    is ``from: all``). Brokers reach the controllers through their own links: a broker's links to
    ``controller`` stay as they are. Only ``heal: all`` ends it. The never-faulted observer that
    reads the cluster on Kafka keeps its links."""

    scope: ControllerScope = "all"
    kind: ClassVar[str] = "isolate_controller"
    targets: ClassVar[tuple[str, ...]] = (ACTIVE_CONTROLLER,)
    draw: ClassVar[Draw | None] = "net"

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        if not isinstance(arg, yaml.MappingNode):
            return [cls(controller=cls._read_target(arg, r, what))]
        doc = r.mapping(arg, what, ("controller", "from"))
        if "controller" not in doc:
            r.fail(arg, f"{what}: missing 'controller' (a number or active)")
        scope: ControllerScope = "all"
        if "from" in doc:
            scope = r.string(doc["from"], f"{what}.from", CONTROLLER_SCOPES)  # type: ignore[assignment]
        return [cls(controller=cls._read_target(doc["controller"], r, f"{what}.controller"), scope=scope)]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        return [{self.kind: {"controller": self.controller, "from": self.scope}}]

    def refused_by(self, cluster: ClusterSpec) -> str | None:
        problem = super().refused_by(cluster)
        if problem is None and self.scope == "controllers" and cluster.controllers < 2:
            return "a single controller has no other controller to be cut from (cluster: {controllers: 3})"
        return problem


# --- workload and configuration ---------------------------------------------------------------


@dataclass(frozen=True)
class Produce(Action):
    """Send ``count`` records with the given acks and wait for their answers."""

    count: int
    acks: Acks = "all"
    kind: ClassVar[str] = "produce"
    fault: ClassVar[bool] = False
    settles: ClassVar[bool] = False

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        if isinstance(arg, yaml.ScalarNode):
            return [cls(count=r.integer(arg, f"{what}.count", minimum=1, maximum=MAX_PRODUCE))]
        doc = r.mapping(arg, what, ("count", "acks"))
        count = r.integer(doc["count"], f"{what}.count", minimum=1, maximum=MAX_PRODUCE) if "count" in doc else 1
        acks = r.string(doc["acks"], f"{what}.acks", ACKS) if "acks" in doc else "all"
        return [cls(count=count, acks=acks)]  # type: ignore[arg-type]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        return [{"produce": {"count": self.count, "acks": self.acks}}]

    def records(self) -> int:
        return self.count


@dataclass(frozen=True)
class SetMinIsr(Action):
    """Change the topic's ``min.insync.replicas``."""

    value: int
    kind: ClassVar[str] = "set_min_isr"

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        return [cls(value=r.integer(arg, what, minimum=1, maximum=MAX_MIN_ISR))]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        return [{"set_min_isr": self.value}]


@dataclass(frozen=True)
class SetClusterMinIsr(Action):
    """Change the cluster-wide default ``min.insync.replicas`` (a dynamic broker config with no
    broker named); the topic's own value still overrides it."""

    value: int
    kind: ClassVar[str] = "set_cluster_min_isr"

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        return [cls(value=r.integer(arg, what, minimum=1, maximum=MAX_MIN_ISR))]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        return [{"set_cluster_min_isr": self.value}]


@dataclass(frozen=True)
class UncleanElection(Action):
    """Set the topic's ``unclean.leader.election.enable`` and ask the controller for an election:
    the runbook of a partition left without an eligible leader (availability, at the price of what
    the elected replica lacks). ``{enabled: true, elect: false}`` sets the config alone, as
    ``kafka-configs.sh --alter`` does: the controller then elects uncleanly only where an event of
    its own (a fencing, an unfencing, an unregistration) reconsiders a leaderless partition."""

    enabled: bool
    elect: bool = True
    kind: ClassVar[str] = "unclean_election"
    operator: ClassVar[bool] = True

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        if not isinstance(arg, yaml.MappingNode):
            return [cls(enabled=r.boolean(arg, what))]
        doc = r.mapping(arg, what, ("enabled", "elect"))
        if "enabled" not in doc:
            r.fail(arg, f"{what}: missing 'enabled' (true or false), e.g. {{enabled: true, elect: false}}")
        elect = r.boolean(doc["elect"], f"{what}.elect") if "elect" in doc else True
        return [cls(enabled=r.boolean(doc["enabled"], f"{what}.enabled"), elect=elect)]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        if self.elect:
            return [{"unclean_election": self.enabled}]
        return [{"unclean_election": {"enabled": self.enabled, "elect": False}}]


@dataclass(frozen=True)
class ElectLeaders(Action):
    """Ask the controller for a preferred leader election (``kafka-leader-election.sh
    --election-type PREFERRED``) of one partition: its assignment's first replica leads again if
    it may. ``{election: preferred, partition: N}`` names the partition (left out: partition 0).
    An unclean election is ``unclean_election``, which also sets the topic's config."""

    election: Literal["preferred"]
    partition: int = 0
    kind: ClassVar[str] = "elect_leaders"
    operator: ClassVar[bool] = True

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        if not isinstance(arg, yaml.MappingNode):
            return [cls(election=r.string(arg, what, ("preferred",)))]  # type: ignore[arg-type]
        doc = r.mapping(arg, what, ("election", PARTITION))
        if "election" not in doc:
            r.fail(arg, f"{what}: missing 'election' (preferred), e.g. {{election: preferred, partition: 2}}")
        election = r.string(doc["election"], f"{what}.election", ("preferred",))
        return [cls(election=election, partition=_partition(doc, r, what))]  # type: ignore[arg-type]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        if self.partition == 0:
            return [{"elect_leaders": self.election}]
        return [{"elect_leaders": {"election": self.election, PARTITION: self.partition}}]


@dataclass(frozen=True)
class Reassign(Action):
    """Reassign the partition to ``replicas`` (AlterPartitionReassignments; in order, the first is
    the preferred leader): the controller adds the new replicas beside the old ones, and completes
    the move on its own -- drops the replicas being removed, elects a new leader if the leader
    goes -- once the ISR allows (KIP-966 "Other behaviors" 4). ``{replicas: [...], partition: N}``
    reassigns partition N (left out: partition 0)."""

    replicas: tuple[int, ...]
    partition: int = 0
    kind: ClassVar[str] = "reassign"
    operator: ClassVar[bool] = True

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        partition, listed, said = 0, arg, what
        if isinstance(arg, yaml.MappingNode):
            doc = r.mapping(arg, what, ("replicas", PARTITION))
            if "replicas" not in doc:
                r.fail(arg, f"{what}: missing 'replicas' (the target replica list), e.g. "
                            "{replicas: [1, 2, 3], partition: 2}")
            partition, listed, said = _partition(doc, r, what), doc["replicas"], f"{what}.replicas"
        if not isinstance(listed, yaml.SequenceNode):
            r.fail(listed, f"{said}: expected the target replica list, e.g. [1, 2, 3] (or {{replicas: [1, 2, 3], "
                           "partition: 2}} for a partition other than 0)")
        replicas = r.brokers_list(listed, said)
        if not replicas:
            r.fail(listed, f"{said}: expected at least one replica")
        twice = sorted({b for b in replicas if replicas.count(b) > 1})
        if twice:
            r.fail(listed, f"{said}: broker {twice[0]} is listed twice")
        return [cls(replicas=tuple(replicas), partition=partition)]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        if self.partition == 0:
            return [{"reassign": list(self.replicas)}]
        return [{"reassign": {"replicas": list(self.replicas), PARTITION: self.partition}}]

    def named_brokers(self) -> tuple[int, ...]:
        return self.replicas


@dataclass(frozen=True)
class CancelReassignment(Action):
    """Cancel the partition's reassignment under way (AlterPartitionReassignments with no target):
    the replicas it was adding leave, those it was removing stay (KIP-966 "Other behaviors" 4b).
    ``true`` cancels partition 0's; ``{partition: N}`` partition N's."""

    partition: int = 0
    kind: ClassVar[str] = "cancel_reassignment"
    operator: ClassVar[bool] = True

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        if isinstance(arg, yaml.MappingNode):
            doc = r.mapping(arg, what, (PARTITION,))
            if PARTITION not in doc:
                r.fail(arg, f"{what}: expected true or {{partition: N}}")
            return [cls(partition=_partition(doc, r, what))]
        if isinstance(arg, yaml.ScalarNode) and arg.tag != "tag:yaml.org,2002:bool":
            r.fail(arg, f"{what}: expected true (partition 0's) or {{partition: N}}, got {arg.value!r}")
        if not r.boolean(arg, what):
            r.fail(arg, f"{what}: expected true (leave the item out to cancel nothing)")
        return [cls()]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        if self.partition == 0:
            return [{"cancel_reassignment": True}]
        return [{"cancel_reassignment": {PARTITION: self.partition}}]


@dataclass(frozen=True)
class ForgedAlterPartition(Action):
    """An AlterPartition (v3) the harness sends to the active controller as the partition's leader
    would, with the leader and partition epochs the controller has now: what no broker sends, to hold
    the controller's own checks to the model (KIP-903's sender and member epochs, KIP-704's recovery
    state, the ISR's shape). ``isr`` (left out: the ISR as it stands), each member at its current
    broker epoch; ``leader_recovery_state: recovering`` (a Kafka leader always sends ``recovered``);
    ``broker_epoch: stale`` (the sender's epoch one below its registration's); ``partition: N``. The
    answer is the request's or the partition's error code (``refused:``), NEW_LEADER_ELECTED when
    the change it made moved the leader away."""

    isr: tuple[int, ...] | None = None
    recovering: bool = False
    stale_broker_epoch: bool = False
    partition: int = 0
    kind: ClassVar[str] = "alter_partition"
    operator: ClassVar[bool] = True

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        if not isinstance(arg, yaml.MappingNode):
            r.fail(arg, f"{what}: expected a mapping, e.g. {{isr: [2], leader_recovery_state: recovering}} "
                        "({} sends the partition's state as it stands)")
        doc = r.mapping(arg, what, ("isr", "leader_recovery_state", "broker_epoch", PARTITION))
        isr = None
        if "isr" in doc:
            if not isinstance(doc["isr"], yaml.SequenceNode):
                r.fail(doc["isr"], f"{what}.isr: expected a list of broker ids, e.g. [0, 2]")
            isr = r.brokers_list(doc["isr"], f"{what}.isr")
            twice = sorted({b for b in isr if isr.count(b) > 1})
            if twice:  # Kafka's controller refuses it (INVALID_REQUEST); a scenario meaning it is a typo
                r.fail(doc["isr"], f"{what}.isr: broker {twice[0]} is listed twice")
        recovery = r.string(doc["leader_recovery_state"], f"{what}.leader_recovery_state",
                            ("recovered", "recovering")) if "leader_recovery_state" in doc else "recovered"
        epoch = r.string(doc["broker_epoch"], f"{what}.broker_epoch",
                         ("current", "stale")) if "broker_epoch" in doc else "current"
        return [cls(isr=None if isr is None else tuple(isr), recovering=recovery == "recovering",
                    stale_broker_epoch=epoch == "stale", partition=_partition(doc, r, what))]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        arg: dict[str, Any] = {}
        if self.isr is not None:
            arg["isr"] = list(self.isr)
        if self.recovering:
            arg["leader_recovery_state"] = "recovering"
        if self.stale_broker_epoch:
            arg["broker_epoch"] = "stale"
        if self.partition:
            arg[PARTITION] = self.partition
        return [{"alter_partition": arg}]

    def named_brokers(self) -> tuple[int, ...]:
        return self.isr or ()


@dataclass(frozen=True)
class Wait(Action):
    """Let time pass (a real cluster's timers run; the model has no clock)."""

    seconds: float
    kind: ClassVar[str] = "wait"
    settles: ClassVar[bool] = False

    @classmethod
    def parse(cls, form: str, arg: yaml.Node, r: Reader, what: str) -> list[Action]:
        return [cls(seconds=r.duration(arg, what, MAX_WAIT_S))]

    def to_yaml(self, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        return [{"wait": f"{self.seconds}s"}]


__all__ = [
    "ACTIONS", "ACTIVE_CONTROLLER", "ALL_CONTROLLERS", "Acks", "Action", "BeginShutdown", "BrokerAction",
    "CancelReassignment", "CONTROLLER_SCOPES", "ControllerAction", "ControllerScope", "Crash", "CrashController",
    "Cut", "ElectLeaders", "Flush", "ForgedAlterPartition", "FORMS", "Heal", "HoldDirAssignments", "HoldHeartbeats",
    "HoldMetadata",
    "IsolateController",
    "Lifecycle", "Node", "Pause", "PowerOff", "PowerOffController", "Produce", "Reassign", "ReplaceDisk", "Restart",
    "RestartController", "Resume", "SetClusterMinIsr", "SetMinIsr", "Shutdown", "ShutdownController", "Slow",
    "StopController", "UncleanElection", "Wait", "action_forms", "action_from_event", "unhandled",
]

