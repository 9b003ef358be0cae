"""Load scenario files: safe YAML, every error with file, line and what was expected.

YAML is composed into nodes (no object construction, so no code runs) and converted by hand,
which keeps the line of every value for error messages. Duplicate keys, aliases that expand
without bound, tabs and empty documents are refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import yaml

from pytest_elr.actions import (
    BROKER_ACTIONS,
    Action,
    Cut,
    Heal,
    PowerOff,
    Produce,
    SetMinIsr,
    Slow,
    Wait,
    brokers_named,
)
from pytest_elr.core.errors import ScenarioError
from pytest_elr.core.nodes import CONTROLLER, IsolationScope, Link, Node, isolation_links
from pytest_elr.core.specs import ClusterSpec, TopicSpec, WorkloadSpec
from pytest_elr.model.profiles import PROFILE_NAMES
from pytest_elr.scenario.schema import EXPECTATION_KEYS, Scenario, Step, Verdict

MAX_FILE_BYTES = 1 << 20
MAX_NODES = 20_000  # a scenario is small; more means alias expansion (a "YAML bomb")
ACTION_NAMES = (
    "cut", "heal", "slow", "isolate", "power_off", "produce", "set_min_isr", "wait",
    *BROKER_ACTIONS,
)
_PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq")
)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$")


class _Reader:
    """Walks composed YAML nodes, counting them and raising ScenarioError with lines."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.visited = 0

    def fail(self, node: yaml.Node | None, message: str) -> NoReturn:
        line = node.start_mark.line + 1 if node is not None else None
        raise ScenarioError(message, self.path, line)

    def _count(self, node: yaml.Node) -> None:
        self.visited += 1
        if self.visited > MAX_NODES:
            self.fail(node, f"document too large: more than {MAX_NODES} values (alias bomb?)")
        if node.tag not in _PLAIN_TAGS:
            self.fail(node, f"tag {node.tag} is not allowed: scenarios are plain data")

    def mapping(self, node: yaml.Node, what: str, allowed: tuple[str, ...]) -> dict[str, yaml.Node]:
        self._count(node)
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, f"{what}: expected a mapping with keys {', '.join(allowed)}, got {_kind(node)}")
        out: dict[str, yaml.Node] = {}
        for key_node, value in node.value:
            self._count(key_node)
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, str):
                self.fail(key_node, f"{what}: keys must be plain names")
            if key in out:
                self.fail(key_node, f"{what}: duplicate key {key!r}")
            if key not in allowed:
                self.fail(key_node, f"{what}: unknown key {key!r}; expected one of {', '.join(allowed)}")
            out[key] = value
        return out

    def sequence(self, node: yaml.Node, what: str) -> list[yaml.Node]:
        self._count(node)
        if not isinstance(node, yaml.SequenceNode):
            self.fail(node, f"{what}: expected a list, got {_kind(node)}")
        for item in node.value:
            self._count(item)
        return list(node.value)

    def scalar(self, node: yaml.Node, what: str) -> str:
        self._count(node)
        if not isinstance(node, yaml.ScalarNode):
            self.fail(node, f"{what}: expected a single value, got {_kind(node)}")
        return str(node.value)

    def integer(self, node: yaml.Node, what: str, minimum: int | None = None) -> int:
        text = self.scalar(node, what)
        if node.tag != "tag:yaml.org,2002:int":
            self.fail(node, f"{what}: expected a whole number, got {text!r}")
        value = int(text, 0)
        if minimum is not None and value < minimum:
            self.fail(node, f"{what}: expected a number >= {minimum}, got {value}")
        return value

    def string(self, node: yaml.Node, what: str, choices: tuple[str, ...] | None = None) -> str:
        text = self.scalar(node, what)
        if choices is not None and text not in choices:
            self.fail(node, f"{what}: expected one of {', '.join(choices)}, got {text!r}")
        return text

    def boolean(self, node: yaml.Node, what: str) -> bool:
        text = self.scalar(node, what)
        if node.tag != "tag:yaml.org,2002:bool":
            self.fail(node, f"{what}: expected true or false, got {text!r}")
        return text.lower() in ("true", "yes", "on")

    def ints(self, node: yaml.Node, what: str) -> list[int]:
        if isinstance(node, yaml.ScalarNode):
            return [self.integer(node, what)]
        return [self.integer(item, what) for item in self.sequence(node, what)]

    def duration(self, node: yaml.Node, what: str) -> float:
        text = self.scalar(node, what)
        match = _DURATION.match(text)
        if not match:
            self.fail(node, f"{what}: expected a duration such as 30s, 500ms or 2m, got {text!r}")
        value, unit = float(match.group(1)), match.group(2) or "s"
        return value * {"ms": 0.001, "s": 1.0, "m": 60.0}[unit]


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return f"{node.value!r}"


# --- entry points ------------------------------------------------------------------------------


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"cannot read file: {exc.strerror}", path) from None
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError(f"file larger than {MAX_FILE_BYTES} bytes", path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"not UTF-8 text (byte {exc.start})", path) from None
    return parse_scenario(text, str(path))


def parse_scenario(text: str, path: str = "<scenario>") -> Scenario:
    for number, line in enumerate(text.splitlines(), 1):
        indent = line[: len(line) - len(line.lstrip())]
        if "\t" in indent:
            raise ScenarioError("tab used for indentation; indent with spaces", path, number)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise ScenarioError(f"invalid YAML: {problem}", path, line) from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"invalid YAML: {exc}", path) from None
    if root is None:
        raise ScenarioError("empty file: expected a scenario with cluster, topic and steps", path, 1)
    return _Builder(_Reader(path)).scenario(root)


# --- the builder -------------------------------------------------------------------------------


class _Builder:
    def __init__(self, reader: _Reader) -> None:
        self.r = reader
        self.brokers: tuple[int, ...] = ()

    def scenario(self, root: yaml.Node) -> Scenario:
        r = self.r
        keys = ("name", "description", "profiles", "backends", "cluster", "topic", "workload", "steps",
                "verdict", "finale")
        doc = r.mapping(root, "scenario", keys)
        for required in ("cluster", "topic", "steps"):
            if required not in doc:
                r.fail(root, f"scenario: missing required key {required!r}")
        name = r.string(doc["name"], "name") if "name" in doc else Path(r.path).name.split(".")[0]
        cluster = self.cluster(doc["cluster"])
        self.brokers = cluster.brokers
        topic = self.topic(doc["topic"])
        profiles = PROFILE_NAMES
        if "profiles" in doc:
            profiles = tuple(
                r.string(n, "profiles", PROFILE_NAMES) for n in r.sequence(doc["profiles"], "profiles")
            )
            if not profiles:
                r.fail(doc["profiles"], "profiles: expected at least one profile")
        steps = self.steps(doc["steps"], topic)
        backends, reason = self.backends(doc["backends"]) if "backends" in doc else (None, "")
        return Scenario(
            name=name,
            path=r.path,
            description=r.string(doc["description"], "description") if "description" in doc else "",
            profiles=profiles,
            cluster=cluster,
            topic=topic,
            workload=self.workload(doc["workload"]) if "workload" in doc else None,
            steps=steps,
            verdict=self.verdict(doc["verdict"]) if "verdict" in doc else Verdict(),
            finale=r.boolean(doc["finale"], "finale") if "finale" in doc else True,
            line=root.start_mark.line + 1,
            backends=backends,
            backends_reason=reason,
        )

    def backends(self, node: yaml.Node) -> tuple[tuple[str, ...], str]:
        """``backends: {only: [model], why: "..."}``: where the scenario can be staged, and why not
        elsewhere (shown when another backend is selected)."""
        from pytest_elr.backends import available_backends

        r = self.r
        doc = r.mapping(node, "backends", ("only", "why"))
        if "only" not in doc or "why" not in doc:
            r.fail(node, "backends: expected {only: [backend, ...], why: <reason the others cannot run it>}")
        names = tuple(available_backends())
        only = tuple(r.string(n, "backends.only", names) for n in r.sequence(doc["only"], "backends.only"))
        if not only:
            r.fail(doc["only"], "backends.only: expected at least one backend")
        return only, " ".join(r.string(doc["why"], "backends.why").split())

    def cluster(self, node: yaml.Node) -> ClusterSpec:
        r = self.r
        doc = r.mapping(node, "cluster", ("brokers", "controllers", "session_timeout_ms"))
        if "brokers" not in doc:
            r.fail(node, "cluster: missing required key 'brokers' (a count or a list of ids)")
        b = doc["brokers"]
        if isinstance(b, yaml.ScalarNode):
            count = r.integer(b, "cluster.brokers", minimum=1)
            brokers = tuple(range(count))
        else:
            brokers = tuple(r.integer(n, "cluster.brokers", minimum=0) for n in r.sequence(b, "cluster.brokers"))
            for n, broker in zip(b.value, brokers, strict=True):
                if broker > 99:
                    r.fail(n, f"cluster.brokers: broker ids go from 0 to 99, got {broker}")
            if len(set(brokers)) != len(brokers):
                r.fail(b, "cluster.brokers: broker ids must be unique")
        if not 1 <= len(brokers) <= 9:
            r.fail(b, f"cluster.brokers: expected 1 to 9 brokers, got {len(brokers)}")
        controllers = 1
        if "controllers" in doc:
            controllers = r.integer(doc["controllers"], "cluster.controllers")
            if controllers not in (1, 3):
                r.fail(doc["controllers"], f"cluster.controllers: expected 1 or 3, got {controllers}")
        session = None
        if "session_timeout_ms" in doc:
            session = r.integer(doc["session_timeout_ms"], "cluster.session_timeout_ms", minimum=1000)
            if session > 120_000:
                r.fail(doc["session_timeout_ms"], f"cluster.session_timeout_ms: expected 1000 to 120000, got {session}")
        return ClusterSpec(brokers=brokers, controllers=controllers, session_timeout_ms=session)

    def broker(self, node: yaml.Node, what: str) -> int:
        broker = self.r.integer(node, what)
        if broker not in self.brokers:
            known = ", ".join(map(str, self.brokers))
            self.r.fail(node, f"{what}: unknown broker id {broker}; the cluster has brokers {known}")
        return broker

    def brokers_list(self, node: yaml.Node, what: str) -> list[int]:
        if isinstance(node, yaml.ScalarNode):
            return [self.broker(node, what)]
        return [self.broker(n, what) for n in self.r.sequence(node, what)]

    def topic(self, node: yaml.Node) -> TopicSpec:
        r = self.r
        doc = r.mapping(node, "topic", ("name", "replicas", "min_insync_replicas", "unclean_recovery"))
        for required in ("replicas", "min_insync_replicas"):
            if required not in doc:
                r.fail(node, f"topic: missing required key {required!r}")
        replicas = tuple(self.brokers_list(doc["replicas"], "topic.replicas"))
        if len(set(replicas)) != len(replicas):
            r.fail(doc["replicas"], "topic.replicas: a broker can hold only one replica")
        if len(replicas) > len(self.brokers):
            r.fail(doc["replicas"], f"topic.replicas: {len(replicas)} replicas but only {len(self.brokers)} brokers")
        min_isr = r.integer(doc["min_insync_replicas"], "topic.min_insync_replicas", minimum=1)
        strategy = None
        if "unclean_recovery" in doc:
            strategy = r.string(doc["unclean_recovery"], "topic.unclean_recovery", ("none", "balanced", "aggressive"))
        name = r.string(doc["name"], "topic.name") if "name" in doc else "elr-test"
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", name):
            r.fail(doc["name"], f"topic.name: {name!r} is not a valid Kafka topic name")
        return TopicSpec(name=name, replicas=replicas, min_insync_replicas=min_isr, unclean_recovery=strategy)

    def workload(self, node: yaml.Node) -> WorkloadSpec:
        r = self.r
        doc = r.mapping(node, "workload", ("acks", "rate_per_s", "per_step"))
        acks = r.string(doc["acks"], "workload.acks", ("all", "1", "0")) if "acks" in doc else "all"
        rate = 100.0
        if "rate_per_s" in doc:
            text = r.scalar(doc["rate_per_s"], "workload.rate_per_s")
            try:
                rate = float(text)
            except ValueError:
                r.fail(doc["rate_per_s"], f"workload.rate_per_s: expected a number, got {text!r}")
            if rate <= 0:
                r.fail(doc["rate_per_s"], "workload.rate_per_s: expected a positive rate")
        per_step = r.integer(doc["per_step"], "workload.per_step", minimum=0) if "per_step" in doc else 5
        return WorkloadSpec(acks=acks, rate_per_s=rate, per_step=per_step)

    def verdict(self, node: yaml.Node) -> Verdict:
        r = self.r
        doc = r.mapping(node, "verdict", ("acked_loss", "by_profile"))
        loss = r.string(doc["acked_loss"], "verdict.acked_loss", ("none", "found")) if "acked_loss" in doc else "none"
        by_profile: dict[str, str] = {}
        if "by_profile" in doc:
            for name, sub in r.mapping(doc["by_profile"], "verdict.by_profile", PROFILE_NAMES).items():
                inner = r.mapping(sub, f"verdict.by_profile.{name}", ("acked_loss",))
                if "acked_loss" in inner:
                    by_profile[name] = r.string(inner["acked_loss"], "acked_loss", ("none", "found"))
        return Verdict(acked_loss=loss, by_profile=by_profile)

    # --- steps ---------------------------------------------------------------------------

    def steps(self, node: yaml.Node, topic: TopicSpec) -> tuple[Step, ...]:
        items = self.r.sequence(node, "steps")
        if not items:
            self.r.fail(node, "steps: expected at least one step")
        steps = [self.step(item, topic) for item in items]
        seen: dict[str, int] = {}
        for s in steps:
            if s.label in seen:
                raise ScenarioError(f"step {s.label!r} already defined at line {seen[s.label]}", self.r.path, s.line)
            seen[s.label] = s.line
        return tuple(steps)

    def step(self, node: yaml.Node, topic: TopicSpec) -> Step:
        r = self.r
        doc = r.mapping(node, "step", ("at", "note", "do", "expect", "timeout"))
        line = node.start_mark.line + 1
        if "at" not in doc:
            r.fail(node, "step: missing its label 'at' (e.g. at: T0)")
        label = r.scalar(doc["at"], "step.at").strip()
        if not label:
            r.fail(doc["at"], "step.at: the label must not be empty")
        actions: list[Action] = []
        if "do" in doc:
            do = doc["do"]
            for item in r.sequence(do, f"step {label}: do") if isinstance(do, yaml.SequenceNode) else [do]:
                actions += self.action(item, label, topic)
        expect: dict[str, Any] = {}
        by_profile: dict[str, dict[str, Any]] = {}
        from_model = False
        if "expect" in doc:
            e = doc["expect"]
            if isinstance(e, yaml.ScalarNode) and e.value == "model":
                from_model = True
            else:
                expect, by_profile = self.expectation(e, f"step {label}: expect", allow_profiles=True)
        timeout = r.duration(doc["timeout"], f"step {label}: timeout") if "timeout" in doc else None
        note = r.string(doc["note"], "note") if "note" in doc else ""
        return Step(label, line, tuple(actions), expect, by_profile, from_model, timeout, note)

    def expectation(
        self, node: yaml.Node, what: str, allow_profiles: bool
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        r = self.r
        keys = EXPECTATION_KEYS
        doc = r.mapping(node, what, (*keys, "by_profile") if allow_profiles else keys)
        out: dict[str, Any] = {}
        for key, value in doc.items():
            if key == "by_profile":
                continue
            if key == "leader":
                no_leader = r.scalar(value, f"{what}.leader") in ("none", "null", "~")
                out[key] = None if no_leader else self.broker(value, f"{what}.leader")
            elif key in ("isr", "elr", "last_known_elr", "fenced", "lost", "held"):
                out[key] = frozenset(self.brokers_list(value, f"{what}.{key}"))
            elif key == "hwm":
                text = r.scalar(value, f"{what}.hwm")
                if value.tag == "tag:yaml.org,2002:int":
                    out[key] = r.integer(value, f"{what}.hwm", minimum=0)
                elif text in ("advanced", "frozen"):
                    out[key] = text
                else:
                    r.fail(value, f"{what}.hwm: expected advanced, frozen or an offset, got {text!r}")
            elif key == "produce":
                p = r.mapping(value, f"{what}.produce", ("acked", "rejected"))
                out[key] = {}
                if "acked" in p:
                    out[key]["acked"] = r.integer(p["acked"], f"{what}.produce.acked", minimum=0)
                if "rejected" in p:
                    out[key]["rejected"] = r.string(p["rejected"], f"{what}.produce.rejected")
            elif key == "rejected":
                out[key] = r.string(value, f"{what}.rejected")
            elif key == "recovering":
                out[key] = r.boolean(value, f"{what}.recovering")
        by_profile: dict[str, dict[str, Any]] = {}
        if "by_profile" in doc:
            for name, sub in r.mapping(doc["by_profile"], f"{what}.by_profile", PROFILE_NAMES).items():
                by_profile[name], _ = self.expectation(sub, f"{what}.by_profile.{name}", allow_profiles=False)
        return out, by_profile

    # --- actions ---------------------------------------------------------------------------

    def action(self, node: yaml.Node, label: str, topic: TopicSpec) -> list[Action]:
        r = self.r
        what = f"step {label}: action"
        if isinstance(node, yaml.ScalarNode):
            names = ", ".join(ACTION_NAMES)
            r.fail(node, f"{what}: expected '<action>: <arguments>', got {node.value!r}; actions are {names}")
        doc = r.mapping(node, what, ACTION_NAMES)
        if len(doc) != 1:
            r.fail(node, f"{what}: one action per list item, got {', '.join(doc)}")
        (name, arg), = doc.items()
        what = f"step {label}: {name}"
        actions = list(self._build(name, arg, what, topic))
        for action in actions:
            for b in brokers_named(action):
                if b not in self.brokers:
                    r.fail(arg, f"{what}: unknown broker id {b}")
        return actions

    def _build(self, name: str, arg: yaml.Node, what: str, topic: TopicSpec) -> Iterator[Action]:
        r = self.r
        if name in BROKER_ACTIONS:
            for b in self.brokers_list(arg, what):
                yield BROKER_ACTIONS[name](broker=b)  # type: ignore[call-arg]
        elif name == "power_off":
            yield PowerOff(brokers=tuple(self.brokers_list(arg, what)))
        elif name == "isolate":
            yield Cut(links=self._isolation(arg, what))
        elif name == "cut":
            yield Cut(links=self._links(arg, what))
        elif name == "slow":
            links, latency = self._slow(arg, what)
            yield Slow(links=links, latency_ms=latency)
        elif name == "heal":
            yield self._heal(arg, what)
        elif name == "produce":
            if isinstance(arg, yaml.ScalarNode):
                yield Produce(count=r.integer(arg, f"{what}.count", minimum=1))
            else:
                doc = r.mapping(arg, what, ("count", "acks"))
                count = r.integer(doc["count"], f"{what}.count", minimum=1) if "count" in doc else 1
                acks = r.string(doc["acks"], f"{what}.acks", ("all", "1", "0")) if "acks" in doc else "all"
                yield Produce(count=count, acks=acks)  # type: ignore[arg-type]
        elif name == "set_min_isr":
            yield SetMinIsr(value=r.integer(arg, what, minimum=1))
        elif name == "wait":
            yield Wait(seconds=r.duration(arg, what))

    def _node(self, node: yaml.Node, what: str) -> Node:
        text = self.r.scalar(node, what)
        if text == CONTROLLER:
            return CONTROLLER
        return self.broker(node, what)

    def _nodes(self, node: yaml.Node, what: str) -> list[Node]:
        if isinstance(node, yaml.SequenceNode):
            return [self._node(n, what) for n in self.r.sequence(node, what)]
        return [self._node(node, what)]

    def _links(self, arg: yaml.Node, what: str, extra: tuple[str, ...] = ()) -> tuple[Link, ...]:
        r = self.r
        doc = r.mapping(arg, what, ("from", "to", "between", *extra))
        links: list[Link] = []
        if "between" in doc:
            if "from" in doc or "to" in doc:
                r.fail(arg, f"{what}: use either between or from/to")
            nodes = self._nodes(doc["between"], f"{what}.between")
            if len(nodes) < 2:
                r.fail(doc["between"], f"{what}.between: expected at least two nodes")
            links = [(a, b) for a in nodes for b in nodes if a != b]
        else:
            if "from" not in doc or "to" not in doc:
                r.fail(arg, f"{what}: expected from and to (one-way) or between (both ways)")
            sources = self._nodes(doc["from"], f"{what}.from")
            targets = self._nodes(doc["to"], f"{what}.to")
            links = [(a, b) for a in sources for b in targets if a != b]
        if not links:
            r.fail(arg, f"{what}: names no link between two different nodes")
        if any(a == CONTROLLER and b == CONTROLLER for a, b in links):
            r.fail(arg, f"{what}: links join a broker to a broker or to the controller")
        return tuple(links)

    def _isolation(self, arg: yaml.Node, what: str) -> tuple[Link, ...]:
        r = self.r
        scope: IsolationScope = "all"
        if isinstance(arg, yaml.MappingNode):
            doc = r.mapping(arg, what, ("broker", "from"))
            if "broker" not in doc:
                r.fail(arg, f"{what}: missing 'broker'")
            broker = self.broker(doc["broker"], f"{what}.broker")
            if "from" in doc:
                scope = r.string(doc["from"], f"{what}.from", ("all", "brokers", "controller"))  # type: ignore[assignment]
            return isolation_links(broker, scope, self.brokers)
        links: list[Link] = []
        for b in self.brokers_list(arg, what):
            links += isolation_links(b, scope, self.brokers)
        return tuple(dict.fromkeys(links))

    def _slow(self, arg: yaml.Node, what: str) -> tuple[tuple[Link, ...], int]:
        r = self.r
        if isinstance(arg, yaml.MappingNode):
            latency = 5000
            doc = r.mapping(arg, what, ("from", "to", "between", "ms"))
            if "ms" in doc:
                latency = r.integer(doc["ms"], f"{what}.ms", minimum=1)
            return self._links(arg, what, extra=("ms",)), latency
        links: list[Link] = []
        for b in self.brokers_list(arg, what):  # a slow replica: its links to every broker
            links += isolation_links(b, "brokers", self.brokers)
        return tuple(links), 5000

    def _heal(self, arg: yaml.Node, what: str) -> Heal:
        if isinstance(arg, yaml.ScalarNode) and arg.value == "all":
            return Heal(links=None)
        if isinstance(arg, yaml.MappingNode):
            return Heal(links=self._links(arg, what))
        links: list[Link] = []
        for b in self.brokers_list(arg, what):
            links += isolation_links(b, "all", self.brokers)
        return Heal(links=tuple(links))

