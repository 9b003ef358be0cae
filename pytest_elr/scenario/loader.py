"""Load scenario files: safe YAML, every error with file, line and what was expected.

YAML is composed into nodes (no object construction, so no code runs) and converted by hand,
which keeps the line of every value for error messages. Duplicate keys, aliases that expand
without bound, tabs and empty documents are refused.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from pytest_elr.actions import ACTION_FORMS, FORMS, Action
from pytest_elr.core.errors import ScenarioError
from pytest_elr.core.reader import Reader
from pytest_elr.core.specs import ClusterSpec, TopicSpec, WorkloadSpec
from pytest_elr.model.profiles import PROFILE_NAMES
from pytest_elr.scenario.schema import EXPECTATION_KEYS, LossExpectation, Scenario, Step

MAX_FILE_BYTES = 1 << 20


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
    return _Builder(Reader(path)).scenario(root)


# --- the builder -------------------------------------------------------------------------------


class _Builder:
    def __init__(self, reader: Reader) -> None:
        self.r = reader

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
        self.r.brokers = cluster.brokers
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
            verdict=self.verdict(doc["verdict"]) if "verdict" in doc else LossExpectation(),
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

    def topic(self, node: yaml.Node) -> TopicSpec:
        r = self.r
        doc = r.mapping(node, "topic", ("name", "replicas", "min_insync_replicas", "unclean_recovery"))
        for required in ("replicas", "min_insync_replicas"):
            if required not in doc:
                r.fail(node, f"topic: missing required key {required!r}")
        replicas = tuple(self.r.brokers_list(doc["replicas"], "topic.replicas"))
        if len(set(replicas)) != len(replicas):
            r.fail(doc["replicas"], "topic.replicas: a broker can hold only one replica")
        if len(replicas) > len(self.r.brokers):
            r.fail(doc["replicas"], f"topic.replicas: {len(replicas)} replicas but only {len(self.r.brokers)} brokers")
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

    def verdict(self, node: yaml.Node) -> LossExpectation:
        r = self.r
        doc = r.mapping(node, "verdict", ("acked_loss", "by_profile"))
        loss = r.string(doc["acked_loss"], "verdict.acked_loss", ("none", "found")) if "acked_loss" in doc else "none"
        by_profile: dict[str, str] = {}
        if "by_profile" in doc:
            for name, sub in r.mapping(doc["by_profile"], "verdict.by_profile", PROFILE_NAMES).items():
                inner = r.mapping(sub, f"verdict.by_profile.{name}", ("acked_loss",))
                if "acked_loss" in inner:
                    by_profile[name] = r.string(inner["acked_loss"], "acked_loss", ("none", "found"))
        return LossExpectation(acked_loss=loss, by_profile=by_profile)

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
                actions += self.action(item, label)
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
                out[key] = None if no_leader else r.broker(value, f"{what}.leader")
            elif key in ("isr", "elr", "last_known_elr", "fenced", "lost", "held"):
                out[key] = frozenset(self.r.brokers_list(value, f"{what}.{key}"))
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

    def action(self, node: yaml.Node, label: str) -> list[Action]:
        r = self.r
        what = f"step {label}: action"
        if isinstance(node, yaml.ScalarNode):
            names = ", ".join(ACTION_FORMS)
            r.fail(node, f"{what}: expected '<action>: <arguments>', got {node.value!r}; actions are {names}")
        doc = r.mapping(node, what, ACTION_FORMS)
        if len(doc) != 1:
            r.fail(node, f"{what}: one action per list item, got {', '.join(doc)}")
        (name, arg), = doc.items()
        return FORMS[name].parse(name, arg, r, f"step {label}: {name}")
