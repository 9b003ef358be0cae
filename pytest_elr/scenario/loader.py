"""Load scenario files: safe YAML, every error with file, line and what was expected.

YAML is composed into nodes (no object construction, so no code runs) and converted by hand,
which keeps the line of every value for error messages. Duplicate keys, aliases that expand
without bound, tabs and empty documents are refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml

from pytest_elr.actions import ACKS, FORMS, Action, Lifecycle, Reassign, action_forms
from pytest_elr.backends import available_backends
from pytest_elr.core import limits as L
from pytest_elr.core.errors import ALTER_PARTITION_ERRORS, OPERATOR_ERRORS, PRODUCE_ERRORS, ScenarioError
from pytest_elr.core.nodes import partition_led
from pytest_elr.core.outcomes import OUTCOMES
from pytest_elr.core.reader import Reader, did_you_mean
from pytest_elr.core.specs import ClusterSpec, TopicSpec, WorkloadSpec, rotated_assignment
from pytest_elr.core.versions import VersionError, version_range
from pytest_elr.model.invariants import INVARIANT_NAMES
from pytest_elr.model.profiles import PROFILE_NAMES
from pytest_elr.scenario.schema import (
    ALL_PARTITIONS,
    ANY_CONTROLLER,
    ASSIGNED,
    BROKER_SET_KEYS,
    DIFFERABLE,
    ELECTION_COUNTS,
    EXPECTATION_KEYS,
    MAX_ONE_OF,
    ONE_OF,
    ONE_OF_KEYS,
    PARTITION_KEYS,
    PARTITIONS,
    PREFERRED_LEADER,
    PREFERRED_SCOPE,
    UNCHANGED,
    VERDICT_FAILURES,
    KnownFailure,
    LossExpectation,
    OneOf,
    Scenario,
    Step,
)

#: what a known failure may name as failing at its step: a field held to the model or expected, or
#: an invariant
KNOWN_FAILS = tuple(dict.fromkeys(EXPECTATION_KEYS + DIFFERABLE + INVARIANT_NAMES + VERDICT_FAILURES))

# --- entry points ------------------------------------------------------------------------------


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"cannot read file: {exc.strerror}", path) from None
    if len(data) > L.MAX_FILE_BYTES:
        raise ScenarioError(f"file larger than {L.MAX_FILE_BYTES} bytes", path)
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
        _check_depth(text, path)
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


def _check_depth(text: str, path: str) -> None:
    """Refuse deep nesting before composing: PyYAML composes recursively (RecursionError)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > L.MAX_DEPTH:
                raise ScenarioError(f"nested more than {L.MAX_DEPTH} levels deep", path,
                                    event.start_mark.line + 1)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


# --- the builder -------------------------------------------------------------------------------


class _Builder:
    def __init__(self, reader: Reader, controllers: int | None = None,
                 assignment: tuple[tuple[int, ...], ...] = ()) -> None:
        self.r = reader
        #: the cluster's controllers, once read (None: not known, e.g. a Python API expectation)
        self.controllers = controllers
        #: the topic's replicas by partition, once read (``expect: {partitions: ...}`` names the
        #: partitions, ``preferred 2`` those whose first replica is broker 2)
        self.layout = assignment

    @property
    def partitions(self) -> int:
        """The topic's partitions (1 before the topic is read)."""
        return len(self.layout) or 1

    def scenario(self, root: yaml.Node) -> Scenario:
        r = self.r
        keys = ("name", "description", "profiles", "backends", "kafka_versions", "known_failures", "cluster",
                "topic", "workload", "steps", "verdict", "finale")
        doc = r.mapping(root, "scenario", keys)
        for required in ("cluster", "topic", "steps"):
            if required not in doc:
                r.fail(root, f"scenario: missing required key {required!r}")
        name = r.name(doc["name"], "name") if "name" in doc else Path(r.path).name.split(".")[0]
        cluster = self.cluster(doc["cluster"])
        topic = self.topic(doc["topic"])
        r.partitions = topic.partitions  # ``{leader_of: N}`` names one of them
        profiles = self.profiles(doc["profiles"]) if "profiles" in doc else PROFILE_NAMES
        workload = self.workload(doc["workload"]) if "workload" in doc else None
        steps = self.steps(doc["steps"], workload, cluster)
        finale = r.boolean(doc["finale"], "finale") if "finale" in doc else True
        backends, reason = self.backends(doc["backends"]) if "backends" in doc else (None, "")
        known = self.known_failures(doc["known_failures"]) if "known_failures" in doc else ()
        labels = tuple(s.label for s in steps) + (("finale",) if finale else ()) + ("verdict",)
        for k in known:
            if k.step not in labels:
                raise ScenarioError(f"known_failures: no step {k.step!r} in this scenario (steps: "
                                    f"{', '.join(labels)}){did_you_mean(k.step, labels)}", r.path, k.line)
        return Scenario(
            name=name,
            path=r.path,
            description=r.scalar(doc["description"], "description") if "description" in doc else "",
            profiles=profiles,
            cluster=cluster,
            topic=topic,
            workload=workload,
            steps=steps,
            verdict=self.verdict(doc["verdict"]) if "verdict" in doc else LossExpectation(),
            finale=finale,
            line=root.start_mark.line + 1,
            backends=backends,
            backends_reason=reason,
            kafka_versions=self.versions(doc["kafka_versions"], "kafka_versions") if "kafka_versions" in doc else None,
            known_failures=known,
        )

    def versions(self, node: yaml.Node, what: str) -> Any:
        try:
            return version_range(self.r.scalar(node, what))
        except VersionError as exc:
            self.r.fail(node, f"{what}: {exc}")

    def known_failures(self, node: yaml.Node) -> tuple[KnownFailure, ...]:
        """``known_failures: [{versions: "<4.1.0", because: "KAFKA-19522: ...", step: T3, fails: [leader, isr]}]``."""
        r = self.r
        out = []
        for item in r.sequence(node, "known_failures"):
            doc = r.mapping(item, "known_failures[]", ("versions", "because", "step", "fails"))
            if any(key not in doc for key in ("versions", "because", "step", "fails")):
                r.fail(item, "known_failures: expected {versions: <range, e.g. '<4.1.0'>, because: <the bug and "
                             "its fix, e.g. 'KAFKA-19522, fixed in 4.1.0'>, step: <the step where it shows>, "
                             "fails: <what fails there: fields or invariants, e.g. [leader, isr]>}")
            out.append(KnownFailure(self.versions(doc["versions"], "known_failures.versions"),
                                    " ".join(r.scalar(doc["because"], "known_failures.because").split()),
                                    item.start_mark.line + 1, r.name(doc["step"], "known_failures.step"),
                                    self.known_fails(doc["fails"])))
        if len(out) > L.MAX_KNOWN_FAILURES:
            r.fail(node, f"known_failures: at most {L.MAX_KNOWN_FAILURES} entries")
        return tuple(out)

    def known_fails(self, node: yaml.Node) -> tuple[str, ...]:
        """``fails: last_known_elr`` or ``fails: [leader, isr]``: fields (DIFFERABLE, EXPECTATION_KEYS)
        or invariants (``invariants.INVARIANT_NAMES``), each once."""
        r = self.r
        items = [node] if isinstance(node, yaml.ScalarNode) else r.sequence(node, "known_failures.fails")
        if not items:
            r.fail(node, "known_failures.fails: expected at least one field or invariant")
        names: list[str] = []
        for n in items:
            name = r.string(n, "known_failures.fails", KNOWN_FAILS)
            if name in names:
                r.fail(n, f"known_failures.fails: {name!r} is listed twice")
            names.append(name)
        return tuple(names)

    def profiles(self, node: yaml.Node) -> tuple[str, ...]:
        r = self.r
        seen: dict[str, yaml.Node] = {}
        for n in r.sequence(node, "profiles"):
            name = r.string(n, "profiles", PROFILE_NAMES)
            if name in seen:
                r.fail(n, f"profiles: {name!r} is listed twice")
            seen[name] = n
        if not seen:
            r.fail(node, "profiles: expected at least one profile")
        return tuple(seen)

    def backends(self, node: yaml.Node) -> tuple[tuple[str, ...], str]:
        """``backends: {only: [model], why: "..."}``: where the scenario can be staged, and why not
        elsewhere (shown when another backend is selected)."""
        r = self.r
        doc = r.mapping(node, "backends", ("only", "why"))
        if "only" not in doc or "why" not in doc:
            r.fail(node, "backends: expected {only: [backend, ...], why: <reason the others cannot run it>}")
        names = tuple(available_backends())
        only = tuple(r.string(n, "backends.only", names) for n in r.sequence(doc["only"], "backends.only"))
        if not only:
            r.fail(doc["only"], "backends.only: expected at least one backend")
        return only, " ".join(r.scalar(doc["why"], "backends.why").split())

    def cluster(self, node: yaml.Node) -> ClusterSpec:
        r = self.r
        doc = r.mapping(node, "cluster", ("brokers", "controllers", "session_timeout_ms", "log_dirs"))
        if "brokers" not in doc:
            r.fail(node, "cluster: missing required key 'brokers' (a count or a list of ids)")
        b = doc["brokers"]
        if isinstance(b, yaml.ScalarNode):
            count = r.integer(b, "cluster.brokers", minimum=1, maximum=L.MAX_BROKERS)
            brokers = tuple(range(count))
        else:
            items = r.sequence(b, "cluster.brokers")
            brokers = tuple(r.integer(n, "cluster.brokers", minimum=0, maximum=L.MAX_BROKER_ID) for n in items)
            if len(set(brokers)) != len(brokers):
                r.fail(b, "cluster.brokers: broker ids must be unique")
            if not 1 <= len(brokers) <= L.MAX_BROKERS:
                r.fail(b, f"cluster.brokers: expected 1 to {L.MAX_BROKERS} brokers, got {len(brokers)}")
        controllers = 1
        if "controllers" in doc:
            controllers = r.integer(doc["controllers"], "cluster.controllers")
            if controllers not in (1, 3):
                r.fail(doc["controllers"], f"cluster.controllers: expected 1 or 3, got {controllers}")
        session = None
        if "session_timeout_ms" in doc:
            session = r.integer(doc["session_timeout_ms"], "cluster.session_timeout_ms",
                                minimum=L.MIN_SESSION_TIMEOUT_MS, maximum=L.MAX_SESSION_TIMEOUT_MS)
        log_dirs = 1
        if "log_dirs" in doc:
            log_dirs = r.integer(doc["log_dirs"], "cluster.log_dirs", minimum=1, maximum=L.MAX_LOG_DIRS)
        r.brokers = brokers
        self.controllers = controllers
        return ClusterSpec(brokers=brokers, controllers=controllers, session_timeout_ms=session, log_dirs=log_dirs)

    def topic(self, node: yaml.Node) -> TopicSpec:
        r = self.r
        doc = r.mapping(node, "topic", ("name", "partitions", "replicas", "assignment", "min_insync_replicas",
                                        "unclean_recovery"))
        for required in ("min_insync_replicas",) if "assignment" in doc else ("replicas", "min_insync_replicas"):
            if required not in doc:
                r.fail(node, f"topic: missing required key {required!r}")
        count = None
        if "partitions" in doc:
            count = r.integer(doc["partitions"], "topic.partitions", minimum=1, maximum=L.MAX_PARTITIONS)
        if "assignment" in doc:
            if "replicas" in doc:
                r.fail(doc["replicas"], "topic: give replicas (generated assignment) or assignment (explicit), "
                                        "not both")
            assignment = self.assignment(doc["assignment"], count)
        else:
            assignment = self.generated_assignment(doc["replicas"], count or 1, "partitions" in doc)
        min_isr = r.integer(doc["min_insync_replicas"], "topic.min_insync_replicas", minimum=1,
                            maximum=L.MAX_MIN_ISR)
        strategy = None
        if "unclean_recovery" in doc:
            strategy = r.string(doc["unclean_recovery"], "topic.unclean_recovery", ("none", "balanced", "aggressive"))
        name = r.string(doc["name"], "topic.name") if "name" in doc else "elr-test"
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", name):
            r.fail(doc["name"], f"topic.name: {name!r} is not a valid Kafka topic name "
                                "(1 to 200 of A-Z a-z 0-9 . _ -)")
        self.layout = assignment
        return TopicSpec(name=name, replicas=assignment[0], min_insync_replicas=min_isr, unclean_recovery=strategy,
                         more_partitions=assignment[1:])

    def replica_list(self, node: yaml.Node, what: str) -> tuple[int, ...]:
        """One partition's replicas: brokers of the cluster, at least one, each once."""
        r = self.r
        replicas = tuple(r.brokers_list(node, what))
        if not replicas:
            r.fail(node, f"{what}: expected at least one replica")
        if len(set(replicas)) != len(replicas):
            r.fail(node, f"{what}: a broker can hold only one replica")
        return replicas

    def generated_assignment(self, node: yaml.Node, count: int, counted: bool) -> tuple[tuple[int, ...], ...]:
        """``replicas: [0, 1, 2]``: partition p holds the list rotated by p ([1, 2, 0] for p = 1);
        ``replicas: 3`` (with ``partitions``): the replication factor, partition p on the cluster's
        brokers from the p-th on ([b[p], b[p + 1], ...], wrapping). Either way the first replica,
        the preferred leader, moves on by one broker per partition: leaders spread round-robin."""
        r = self.r
        if isinstance(node, yaml.ScalarNode) and counted and node.tag == "tag:yaml.org,2002:int":
            brokers = r.brokers
            factor = r.integer(node, "topic.replicas", minimum=1, maximum=len(brokers))
            return tuple(tuple(brokers[(p + j) % len(brokers)] for j in range(factor)) for p in range(count))
        return rotated_assignment(tuple(self.replica_list(node, "topic.replicas")), count)

    def assignment(self, node: yaml.Node, count: int | None) -> tuple[tuple[int, ...], ...]:
        """``assignment: {0: [0, 1, 2], 1: [1, 2, 0]}``: each partition's replicas, partitions 0 .. N - 1
        each once, every list as long as the first (Kafka refuses a manual assignment whose
        partitions differ in replica count: ``ReplicationControlManager.validateManualPartitionAssignment``,
        "not consistent with previous partitions")."""
        r = self.r
        if not isinstance(node, yaml.MappingNode) or not node.value:
            r.fail(node, "topic.assignment: expected a mapping of partition number to replicas, e.g. "
                         "{0: [0, 1, 2], 1: [1, 2, 0]}")
        if len(node.value) > L.MAX_PARTITIONS:
            r.fail(node, f"topic.assignment: at most {L.MAX_PARTITIONS} partitions")
        found: dict[int, tuple[int, ...]] = {}
        for key, value in node.value:
            p = r.integer(key, "topic.assignment: partition", minimum=0, maximum=L.MAX_PARTITIONS - 1)
            if p in found:
                r.fail(key, f"topic.assignment: partition {p} is assigned twice")
            replicas = self.replica_list(value, f"topic.assignment.{p}")
            first = next(iter(found.values()), None)
            if first is not None and len(replicas) != len(first):
                r.fail(value, f"topic.assignment.{p}: {len(replicas)} replicas, but the partitions before have "
                              f"{len(first)} (Kafka refuses a manual assignment whose partitions differ in "
                              "replica count)")
            found[p] = replicas
        missing = [p for p in range(len(found)) if p not in found]
        if missing:
            r.fail(node, f"topic.assignment: expected partitions 0 to {len(found) - 1}, partition {missing[0]} "
                         "is missing")
        if count is not None and count != len(found):
            r.fail(node, f"topic.assignment: assigns {len(found)} partitions, but topic.partitions is {count}")
        return tuple(found[p] for p in range(len(found)))

    def workload(self, node: yaml.Node) -> WorkloadSpec:
        r = self.r
        doc = r.mapping(node, "workload", ("acks", "rate_per_s", "per_step"))
        acks = r.string(doc["acks"], "workload.acks", ACKS) if "acks" in doc else "all"
        rate = 100.0
        if "rate_per_s" in doc:
            rate = r.number(doc["rate_per_s"], "workload.rate_per_s", 0.01, L.MAX_RATE_PER_S)
        per_step = 5
        if "per_step" in doc:
            per_step = r.integer(doc["per_step"], "workload.per_step", minimum=0, maximum=L.MAX_PER_STEP)
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

    def steps(self, node: yaml.Node, workload: WorkloadSpec | None, cluster: ClusterSpec) -> tuple[Step, ...]:
        r = self.r
        items = r.sequence(node, "steps")
        if not items:
            r.fail(node, "steps: expected at least one step")
        if len(items) > L.MAX_STEPS:
            r.fail(items[L.MAX_STEPS], f"steps: more than {L.MAX_STEPS} steps")
        steps = [self.step(item) for item in items]
        seen: dict[str, int] = {}
        for s in steps:
            if s.label in seen:
                raise ScenarioError(f"step {s.label!r} already defined at line {seen[s.label]}", r.path, s.line)
            seen[s.label] = s.line
        self._count_records(steps, workload)
        check_sequence(steps, cluster, r.path, self.layout)
        return tuple(steps)

    def _count_records(self, steps: list[Step], workload: WorkloadSpec | None) -> None:
        sent = 2 * len(steps) * (workload.per_step if workload is not None else 0)
        for step in steps:
            sent += sum(a.records() for a in step.actions)
            if sent > L.MAX_RECORDS:
                raise ScenarioError(f"step {step.label}: the scenario sends more than {L.MAX_RECORDS} records "
                                    "in all (produce actions and the workload)", self.r.path, step.line)

    def step(self, node: yaml.Node) -> Step:
        r = self.r
        doc = r.mapping(node, "step", ("at", "note", "do", "expect", "timeout", "differs"))
        line = node.start_mark.line + 1
        if "at" not in doc:
            r.fail(node, "step: missing its label 'at' (e.g. at: T0)")
        label = r.name(doc["at"], "step.at")
        actions: list[Action] = []
        lines: list[int] = []
        if "do" in doc:
            do = doc["do"]
            items = r.sequence(do, f"step {label}: do") if isinstance(do, yaml.SequenceNode) else [do]
            for item in items:
                built = self.action(item, label)
                actions += built
                lines += [item.start_mark.line + 1] * len(built)
                if len(actions) > L.MAX_ACTIONS_PER_STEP:
                    r.fail(item, f"step {label}: more than {L.MAX_ACTIONS_PER_STEP} actions in one step")
        expect: dict[str, Any] = {}
        by_profile: dict[str, dict[str, Any]] = {}
        key_lines: dict[str, int] = {}
        from_model = False
        if "expect" in doc:
            e = doc["expect"]
            if isinstance(e, yaml.ScalarNode) and e.value == "model":
                from_model = True
            else:
                expect, by_profile = self.expectation(e, f"step {label}: expect", allow_profiles=True,
                                                      lines=key_lines)
        timeout = None
        if "timeout" in doc:
            timeout = r.duration(doc["timeout"], f"step {label}: timeout", L.MAX_STEP_TIMEOUT_S)
        note = r.scalar(doc["note"], "note") if "note" in doc else ""
        differs: dict[str, str] = {}
        differs_by_profile: dict[str, dict[str, str]] = {}
        if "differs" in doc:
            differs, differs_by_profile = self.differs(doc["differs"], f"step {label}: differs")
        step = Step(label, line, tuple(actions), expect, by_profile, from_model, timeout, note,
                    action_lines=tuple(lines), key_lines=key_lines, differs=differs,
                    differs_by_profile=differs_by_profile,
                    differs_line=doc["differs"].start_mark.line + 1 if "differs" in doc else None)
        self._check_produce_lists(step, doc.get("expect"))
        self._check_refused(step)
        return step

    def differs(self, node: yaml.Node, what: str,
                allow_profiles: bool = True) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
        """``differs: {field: reason}``: where the system may differ from the model in this step and
        the measured reason why (a difference not declared fails the step)."""
        r = self.r
        doc = r.mapping(node, what, (*DIFFERABLE, "by_profile") if allow_profiles else DIFFERABLE)
        out: dict[str, str] = {}
        for key, value in doc.items():
            if key == "by_profile":
                continue
            reason = " ".join(r.scalar(value, f"{what}.{key}").split())
            if not reason:
                r.fail(value, f"{what}.{key}: say why the system differs from the model here (a reason, "
                              "with the measurement that shows it)")
            out[key] = reason
        by_profile: dict[str, dict[str, str]] = {}
        if "by_profile" in doc:
            for name, sub in r.mapping(doc["by_profile"], f"{what}.by_profile", PROFILE_NAMES).items():
                by_profile[name], _ = self.differs(sub, f"{what}.by_profile.{name}", allow_profiles=False)
        return out, by_profile

    def _check_produce_lists(self, step: Step, expect: yaml.Node | None) -> None:
        """A list of ``produce`` expectations names each produce of the step, in order."""
        for profile_expect in (step.expect, *step.by_profile.values()):
            want = profile_expect.get("produce")
            if isinstance(want, list) and len(want) != step.produces():
                self.r.fail(expect, f"step {step.label}: expect.produce lists {len(want)} outcomes, but the "
                                    f"step does {step.produces()} produce actions (one outcome per produce, in order)")

    def _check_refused(self, step: Step) -> None:
        """``refused`` speaks of the step's operator requests: a step without one has nothing to refuse."""
        named = "refused" in step.expect or any("refused" in e for e in step.by_profile.values())
        if named and not step.operator_requests():
            raise ScenarioError(f"step {step.label}: expect.refused, but the step makes no operator request "
                                f"(reassign, cancel_reassignment) for the controller to refuse",
                                self.r.path, step.key_lines.get("refused", step.line))

    def expectation(
        self, node: yaml.Node, what: str, allow_profiles: bool, lines: dict[str, int] | None = None,
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        r = self.r
        keys = (*EXPECTATION_KEYS, PARTITIONS)
        doc = r.mapping(node, what, (*keys, "by_profile") if allow_profiles else keys)
        out: dict[str, Any] = {}
        for key, value in doc.items():
            if lines is not None:
                lines.setdefault(key, value.start_mark.line + 1)
            if key in ("by_profile", PARTITIONS):
                continue
            out[key] = self.of_partition(self.expected_value(key, value, f"{what}.{key}"), 0, value)
        if PARTITIONS in doc:
            out[PARTITIONS] = self.partition_expectations(doc[PARTITIONS], f"{what}.{PARTITIONS}", out, lines)
        by_profile: dict[str, dict[str, Any]] = {}
        if "by_profile" in doc:
            for name, sub in r.mapping(doc["by_profile"], f"{what}.by_profile", PROFILE_NAMES).items():
                by_profile[name], _ = self.expectation(sub, f"{what}.by_profile.{name}", allow_profiles=False,
                                                       lines=lines)
        return out, by_profile

    def partition_expectations(self, node: yaml.Node, what: str, plain: dict[str, Any],
                               lines: dict[str, int] | None) -> dict[int, dict[str, Any]]:
        """``partitions: {2: {leader: 1}, "1,3": {elr: [0]}, all: {recovering: false}}``: expectations
        of one partition, a comma-separated set, or every partition, each (partition, key) once (the
        plain keys beside ``partitions`` are partition 0's)."""
        r = self.r
        if not isinstance(node, yaml.MappingNode) or not node.value:
            r.fail(node, f"{what}: expected a mapping of partition scope (a number, a comma-separated set "
                         f"such as \"1,3\", or {ALL_PARTITIONS}) to expectations, e.g. {{2: {{leader: 1}}}}")
        out: dict[int, dict[str, Any]] = {}
        at: dict[tuple[int, str], int] = {(0, key): 0 for key in plain}
        for key_node, value in node.value:
            scope = self.partition_scope(key_node, what)
            label = f"{what}.{key_node.value}"
            for key, v in r.mapping(value, label, PARTITION_KEYS).items():
                want = self.expected_value(key, v, f"{label}.{key}")
                line = v.start_mark.line + 1
                for p in scope:
                    if (p, key) in at:
                        before = f"at line {at[(p, key)]}" if at[(p, key)] else "as a plain key (partition 0's)"
                        r.fail(v, f"{label}.{key}: partition {p}'s {key} is already expected {before}")
                    at[(p, key)] = line
                    out.setdefault(p, {})[key] = self.of_partition(want, p, v)
                    if lines is not None:
                        lines.setdefault(f"partition {p}: {key}", line)
        return {p: out[p] for p in sorted(out)}

    def partition_scope(self, node: yaml.Node, what: str) -> list[int]:
        """A partition number, ``"1,3"`` (a set), ``all``, or ``preferred 2`` (``preferred 0,1``):
        the topic's partitions it names. ``preferred B`` is every partition whose assignment lists
        broker B first -- its preferred leader, and its first leader -- read off the topic when the
        scenario loads, so it names the same partitions at every step, on every profile and backend
        (docs/language.md, "Partitions by preferred leader")."""
        r = self.r
        n = self.partitions
        text = node.value if isinstance(node, yaml.ScalarNode) else None
        if text == ALL_PARTITIONS:
            return list(range(n))
        if isinstance(text, str) and text.split(None, 1)[:1] == [PREFERRED_SCOPE]:
            return self.preferred_scope(node, text, what)
        parts = [t.strip() for t in str(text).split(",")] if isinstance(text, str) else []
        if not parts or not all(re.fullmatch(r"[0-9]{1,4}", t) for t in parts):
            r.fail(node, f"{what}: expected a partition number, a comma-separated set (\"1,3\"), "
                         f"{ALL_PARTITIONS} or {PREFERRED_SCOPE} <broker> (\"{PREFERRED_SCOPE} 2\"), got {text!r}")
        numbers = [int(t) for t in parts]
        for p in numbers:
            if p >= n:
                r.fail(node, f"{what}: no partition {p}: the topic has {n} partition{'s' if n > 1 else ''} "
                             f"(0..{n - 1})")
        if len(set(numbers)) != len(numbers):
            r.fail(node, f"{what}: {text!r} names a partition twice")
        return numbers

    def preferred_scope(self, node: yaml.Node, text: str, what: str) -> list[int]:
        """``preferred 2`` / ``preferred 0,1``: the partitions whose preferred leader is one of
        those brokers, in partition order; a broker that is no partition's preferred leader is
        refused (the scope would name nothing and its expectations hold vacuously)."""
        r = self.r
        rest = text[len(PREFERRED_SCOPE):].strip()
        parts = [t.strip() for t in rest.split(",")]
        if not rest or not all(re.fullmatch(r"[0-9]{1,4}", t) for t in parts):
            r.fail(node, f"{what}: expected {PREFERRED_SCOPE} followed by a broker id or a comma-separated "
                         f"set of them (\"{PREFERRED_SCOPE} 2\", \"{PREFERRED_SCOPE} 0,1\"), got {text!r}")
        brokers = [int(t) for t in parts]
        if len(set(brokers)) != len(brokers):
            r.fail(node, f"{what}: {text!r} names a broker twice")
        layout = self.layout or ((),)
        leads = {b: [p for p, replicas in enumerate(layout) if replicas[:1] == (b,)] for b in brokers}
        for b in brokers:
            if r.brokers and b not in r.brokers:
                r.fail(node, f"{what}: {text!r}: unknown broker id {b}; the cluster has brokers "
                             f"{', '.join(map(str, r.brokers))}")
            if not leads[b]:
                firsts = sorted({replicas[0] for replicas in layout if replicas})
                r.fail(node, f"{what}: broker {b} is no partition's preferred leader (the first replica of "
                             f"an assignment): {PREFERRED_SCOPE} {b} would name no partition; the preferred "
                             f"leaders are {', '.join(map(str, firsts)) or 'not known'}")
        return sorted(p for b in brokers for p in leads[b])

    def of_partition(self, want: Any, p: int, node: yaml.Node) -> Any:
        """An expected value for partition ``p``: ``leader: preferred`` and ``isr: assigned`` read
        off its assignment (the topic's, as written: a reassignment does not change them)."""
        if isinstance(want, OneOf):
            return OneOf(tuple(self.of_partition(choice, p, node) for choice in want.choices))
        if not isinstance(want, _OfAssignment):
            return want
        if not self.layout:
            self.r.fail(node, f"{want.word}: the topic's assignment is not known here")
        replicas = self.layout[p]
        return replicas[0] if want.word == PREFERRED_LEADER else frozenset(replicas)

    def expected_value(self, key: str, value: yaml.Node, what: str) -> Any:
        r = self.r
        if key in ONE_OF_KEYS and isinstance(value, yaml.MappingNode):
            return self.one_of(key, value, what)
        if key == "leader":
            if isinstance(value, yaml.ScalarNode) and value.tag != "tag:yaml.org,2002:int":
                if value.value in ("none", "null", "~", ""):
                    return None
                if value.value == PREFERRED_LEADER:
                    return _OfAssignment(PREFERRED_LEADER)
                r.fail(value, f"{what}: expected a broker id, none (no leader) or {PREFERRED_LEADER} (the "
                              f"partition's first replica), got {value.value!r}")
            return r.broker(value, what)
        if key in ("isr", "replicas") and isinstance(value, yaml.ScalarNode) and value.value == ASSIGNED:
            return _OfAssignment(ASSIGNED)
        if key in (*BROKER_SET_KEYS, "lost"):
            if (isinstance(value, yaml.ScalarNode) and value.tag != "tag:yaml.org,2002:int"
                    and key in ("isr", "replicas")):
                r.fail(value, f"{what}: expected a broker id, a list of them or {ASSIGNED} (every replica of "
                              f"the partition's assignment), got {value.value!r}")
            return frozenset(r.brokers_list(value, what))
        if key == "hwm":
            if value.tag == "tag:yaml.org,2002:int":
                return r.integer(value, what, minimum=0, maximum=L.MAX_OFFSET)
            text = r.scalar(value, what)
            if text not in HWM_WORDS:
                r.fail(value, f"{what}: expected advanced, frozen or an offset, got {text!r}"
                              f"{did_you_mean(text, HWM_WORDS)}")
            return text
        if key == "produce":
            if isinstance(value, yaml.SequenceNode):  # one outcome per produce action, in order
                return [self.produce_outcome(item, f"{what}[{i}]")
                        for i, item in enumerate(r.sequence(value, what))]
            return self.produce_outcome(value, what)
        if key == "rejected":
            return r.string(value, what, ALTER_PARTITION_ERRORS)
        if key == "refused":  # the code the controller refused an operator request with; none: all accepted
            code = r.string(value, what, (*OPERATOR_ERRORS, "none"))
            return None if code == "none" else code
        if key == "recovering":
            return r.boolean(value, what)
        if key in ("leader_epoch", "partition_epoch"):
            return r.string(value, what, EPOCH_WORDS)
        if key in ELECTION_COUNTS:  # elections since the scenario's start (docs/model.md, "Metrics")
            return r.integer(value, what, minimum=0, maximum=L.MAX_ELECTIONS)
        if key == "active_controller":
            if isinstance(value, yaml.ScalarNode) and value.tag != "tag:yaml.org,2002:int":
                if value.value in ("none", "null", "~", ""):
                    return None
                if value.value in (ANY_CONTROLLER, UNCHANGED):
                    return value.value
                r.fail(value, f"{what}: expected a controller number, any, unchanged or none (no quorum), "
                              f"got {value.value!r}")
            index = r.integer(value, what, minimum=0)
            if self.controllers is not None and index >= self.controllers:
                r.fail(value, f"{what}: controller {index} is not in the cluster: it has {self.controllers} "
                              f"controller{'s' if self.controllers > 1 else ''} (0..{self.controllers - 1})")
            return index
        raise AssertionError(f"expectation key {key!r} has no reader")  # EXPECTATION_KEYS and this agree

    def one_of(self, key: str, node: yaml.Node, what: str) -> OneOf:
        """``{one_of: [[3, 4], [3]]}``: two or more values of ``key``, each read as the key reads
        one, none twice."""
        r = self.r
        doc = r.mapping(node, what, (ONE_OF,))
        if ONE_OF not in doc:
            r.fail(node, f"{what}: expected {{{ONE_OF}: [...]}}, the values any of which holds")
        items = r.sequence(doc[ONE_OF], f"{what}.{ONE_OF}")
        if not 2 <= len(items) <= MAX_ONE_OF:
            r.fail(node, f"{what}.{ONE_OF}: expected 2 to {MAX_ONE_OF} values of {key} (one value: write it "
                         f"without one_of), got {len(items)}")
        choices: list[Any] = []
        for i, item in enumerate(items):
            if isinstance(item, yaml.MappingNode):
                r.fail(item, f"{what}.{ONE_OF}[{i}]: expected a value of {key}, not a mapping (one_of does not nest)")
            choice = self.expected_value(key, item, f"{what}.{ONE_OF}[{i}]")
            if choice in choices:
                r.fail(item, f"{what}.{ONE_OF}[{i}]: names the value of [{choices.index(choice)}] again")
            choices.append(choice)
        return OneOf(tuple(choices))

    def produce_outcome(self, node: yaml.Node, what: str) -> dict[str, Any]:
        """``{acked: n, rejected: CODE}``: records acknowledged, and an error (a code Kafka answers,
        or a word of the outcome vocabulary, e.g. ``unavailable``) some record got."""
        r = self.r
        p = r.mapping(node, what, ("acked", "rejected"))
        out: dict[str, Any] = {}
        if "acked" in p:
            out["acked"] = r.integer(p["acked"], f"{what}.acked", minimum=0, maximum=L.MAX_PRODUCE)
        if "rejected" in p:
            out["rejected"] = r.string(p["rejected"], f"{what}.rejected",
                                       (*PRODUCE_ERRORS, *(w for w in OUTCOMES if w not in ("acknowledged", "sent"))))
        return out

    # --- actions ---------------------------------------------------------------------------

    def action(self, node: yaml.Node, label: str) -> list[Action]:
        r = self.r
        what = f"step {label}: action"
        if isinstance(node, yaml.ScalarNode):
            names = ", ".join(action_forms())
            r.fail(node, f"{what}: expected '<action>: <arguments>', got {node.value!r}"
                         f"{did_you_mean(str(node.value), action_forms())}; actions are {names}")
        doc = r.mapping(node, what, action_forms())
        if len(doc) != 1:
            r.fail(node, f"{what}: one action per list item, got {', '.join(doc)}")
        (name, arg), = doc.items()
        return FORMS[name].parse(name, arg, r, f"step {label}: {name}")


@dataclass(frozen=True)
class _OfAssignment:
    """``leader: preferred`` or ``isr: assigned`` before it is read off a partition's assignment."""

    word: str


HWM_WORDS = ("advanced", "frozen")
#: an epoch against the previous step's end
EPOCH_WORDS = ("unchanged", "bumped")


def check_sequence(steps: list[Step], cluster: ClusterSpec, path: str,
                   assignment: tuple[tuple[int, ...], ...] = ()) -> None:
    """Refuse a step whose action the cluster cannot do (a move between log dirs with one dir per
    broker), or cannot do in the state the steps before leave a broker in (restart a running
    broker, crash one twice, resume one that is not paused...). A symbolic target
    (``{leader_of: N}``) leaves which broker an action hits open: the check follows every broker
    it may name (``_Worlds``) and refuses an action it can tell only in some of them."""
    recalled = {s for step in steps for a in step.actions if a.recalls for s in a.symbols()}
    worlds = _Worlds(cluster.brokers, assignment or (tuple(cluster.brokers),), recalled)
    for step in steps:
        for action, line in zip(step.actions, step.action_lines or [step.line] * len(step.actions), strict=True):
            problem = action.refused_by(cluster) or worlds.apply(action, line)
            if problem is not None:
                raise ScenarioError(f"step {step.label}: {action.kind}: {problem}", path, line)


#: a partition's leader runs (a paused one leads until its session expires)
_LEADS: frozenset[Lifecycle] = frozenset({"up", "paused"})
_SAID: dict[Lifecycle, str] = {"up": "running", "down": "stopped", "paused": "paused"}
#: most ways the symbols may have named brokers that the check follows at once
_MAX_WORLDS = 512


@dataclass(frozen=True)
class _World:
    """One way the steps so far may have gone: each broker's process state, and the broker each
    symbol named when it was last resolved."""

    states: tuple[tuple[int, Lifecycle], ...]
    named: tuple[tuple[str, int], ...]  # only the symbols some action recalls
    #: a way the symbols resolved to reach it, to say so: (symbol, line, broker) (not part of the world)
    how: tuple[tuple[str, int, int], ...] = field(default=(), compare=False)


class _Worlds:
    """Each broker's process state through the steps, in every world the symbolic targets allow
    (one world while every action names its brokers by id): a symbol resolved when its step runs
    may name any replica of its partition that may lead then (or any broker a ``reassign`` of it
    named); one recalled (``restart: {leader_of: N}``) names what it named last."""

    def __init__(self, brokers: tuple[int, ...], assignment: tuple[tuple[int, ...], ...],
                 recalled: set[str]) -> None:
        self.worlds = {_World(tuple((b, "up") for b in brokers), ())}
        self.assignment = assignment
        self.recalled = recalled  # the symbols some action recalls: the only ones whose broker is kept
        self.moved_to: dict[int, set[int]] = {}  # by partition: the brokers a ``reassign`` named
        self.lines: dict[str, int] = {}  # where each symbol was last resolved

    def apply(self, action: Action, line: int) -> str | None:
        """Why the action is refused here (None: done in every world it can be done in)."""
        symbols = action.symbols()
        recalled = [s for s in symbols if action.recalls]
        for s in recalled:
            if s not in self.lines:
                p = partition_led(s)
                return (f"{{leader_of: {p}}} names, in {action.kind}, the broker it named when last resolved (the "
                        f"one a fault hit), and no action before resolves it: name the broker by its id, or aim a "
                        f"fault at {{leader_of: {p}}} first (e.g. crash: {{leader_of: {p}}})")
        for s in recalled:  # the broker it named, in the state it is in whichever it is
            problem = self._recalled_in(action, s)
            if problem is not None:
                return problem
        fresh = [s for s in symbols if s not in recalled]
        after: set[_World] = set()
        failed: list[tuple[_World, str]] = []
        for world in sorted(self.worlds, key=repr):
            states, named = dict(world.states), dict(world.named)
            choices: list[dict[str, int]] = [{s: named[s] for s in recalled}]
            for s in fresh:
                leaders = self._leaders(partition_led(s), states)  # type: ignore[arg-type]
                choices = [{**c, s: b} for c in choices for b in leaders]
            problems: list[str] = []
            for choice in choices:
                done = action.resolved(choice)
                problem = _duplicate(done) or done.refused_in(states)
                if problem is not None:
                    problems.append(self._said(choice, recalled) + problem)
                    continue
                kept = {**named, **{s: choice[s] for s in fresh if s in self.recalled}}
                how = {**{s: (at, b) for s, at, b in world.how}, **{s: (line, choice[s]) for s in fresh}}
                after.add(_World(tuple(sorted({**states, **done.transitions()}.items())), tuple(sorted(kept.items())),
                                 tuple((s, at, b) for s, (at, b) in sorted(how.items()))))
            if not choices:
                problems.append(self._no_leader(action, states))
            if problems and len(problems) == len(choices or [None]):
                failed.append((world, problems[0]))
        if failed and len(failed) == len(self.worlds):
            return failed[0][1]
        if failed:
            world, problem = failed[0]
            return (f"the loader cannot check it: if {self._how(world)}, then {problem}, and not otherwise; "
                    "name the broker the same way in both actions ({leader_of: N}), or by its id in both")
        if len(after) > _MAX_WORLDS:
            return (f"the symbolic targets ({{leader_of: N}}) so far leave more than {_MAX_WORLDS} ways the brokers "
                    "may be: too many to check; name some brokers by their ids")
        if isinstance(action, Reassign):
            self.moved_to.setdefault(action.partition, set()).update(action.replicas)
        for s in fresh:
            self.lines[s] = line
        self.worlds = after
        return None

    def _recalled_in(self, action: Action, symbol: str) -> str | None:
        """Why the broker ``symbol`` last named cannot take the action: the same state in every world."""
        named = {(dict(w.named)[symbol], dict(w.states)[dict(w.named)[symbol]]) for w in self.worlds}
        states = {state for _, state in named}
        if action.needs is None or len(states) != 1 or states <= action.needs:
            return None
        brokers = sorted(b for b, _ in named)
        which = f"broker {brokers[0]}" if len(brokers) == 1 else \
            f"broker {', '.join(map(str, brokers[:-1]))} or {brokers[-1]}, whichever it is"
        state, = states
        return (f"{{leader_of: {partition_led(symbol)}}} names the broker it named at line {self.lines[symbol]} "
                f"({which}), which is {_SAID[state]} at this point; the action needs it "
                f"{' or '.join(_SAID[s] for s in sorted(action.needs))}")

    def _leaders(self, partition: int, states: dict[int, Lifecycle]) -> list[int]:
        replicas = dict.fromkeys((*self.assignment[partition], *sorted(self.moved_to.get(partition, ()))))
        return [b for b in replicas if states.get(b, "up") in _LEADS]

    def _no_leader(self, action: Action, states: dict[int, Lifecycle]) -> str:
        for s in action.symbols():
            p = partition_led(s)
            assert p is not None
            if not self._leaders(p, states):
                replicas = ", ".join(map(str, self.assignment[p]))
                return (f"{{leader_of: {p}}} would name no broker: every replica of partition {p} ({replicas}) is "
                        "stopped at this point, so it has no leader")
        return "no broker to name"

    def _said(self, choice: dict[str, int], recalled: list[str]) -> str:
        """Which broker each symbol names in the world at hand."""
        return "".join(f"{{leader_of: {partition_led(s)}}} names broker {b}, the one it named at line "
                       f"{self.lines[s]}: " if s in recalled else
                       f"{{leader_of: {partition_led(s)}}} may name broker {b}, partition {partition_led(s)}'s "
                       "leader: " for s, b in choice.items())

    def _how(self, world: _World) -> str:
        """The world as the symbols name brokers in it."""
        return " and ".join(f"{{leader_of: {partition_led(s)}}} at line {at} named broker {b}"
                            for s, at, b in world.how)


def _duplicate(action: Action) -> str | None:
    brokers = list(getattr(action, "brokers", ()))
    twice = sorted({b for b in brokers if brokers.count(b) > 1}, key=str)
    return f"it names broker {twice[0]} twice" if twice else None


# --- the Python API reads its arguments with the same builder ----------------------------------


class PythonReader(Reader):
    """Reads Python values (turned into YAML nodes) for the Python API; every error names the
    caller's file and line instead of a line of the YAML made from them."""

    def __init__(self, where: tuple[str, int], brokers: tuple[int, ...] = ()) -> None:
        super().__init__(where[0], brokers)
        self.line = where[1]

    def fail(self, node: yaml.Node | None, message: str) -> NoReturn:
        raise ScenarioError(message, self.path, self.line)


def python_node(value: Any) -> yaml.Node:
    """The YAML node a Python value would be written as (sets and tuples as lists)."""
    def plain(v: Any) -> Any:
        if isinstance(v, (set, frozenset, tuple, list)):
            return [plain(x) for x in (sorted(v) if isinstance(v, (set, frozenset)) else v)]
        if isinstance(v, dict):  # a set of partitions as a key: ``{(1, 3): ...}`` is ``"1,3"``
            return {",".join(map(str, sorted(k))) if isinstance(k, (set, frozenset, tuple))
                    else k if isinstance(k, int) and not isinstance(k, bool) else str(k): plain(x)
                    for k, x in v.items()}
        return v
    try:
        node = yaml.compose(yaml.safe_dump(plain(value)), Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"cannot be written as a scenario value: {exc}") from None
    assert node is not None
    return node


def cluster_and_topic_from_python(cluster: dict[str, Any], topic: dict[str, Any],
                                  where: tuple[str, int]) -> tuple[ClusterSpec, TopicSpec]:
    """``elr_cluster(...)``'s arguments, validated exactly as a scenario's ``cluster`` and ``topic``."""
    builder = _Builder(PythonReader(where))
    spec = builder.cluster(python_node(cluster))
    return spec, builder.topic(python_node(topic))


def expectation_from_python(expected: dict[str, Any], brokers: tuple[int, ...],
                            where: tuple[str, int], controllers: int | None = None,
                            assignment: tuple[tuple[int, ...], ...] = ()) -> dict[str, Any]:
    """``expect(...)``'s keyword arguments, validated exactly as a step's ``expect`` (``assignment``:
    the topic's replicas by partition, which ``partitions=`` scopes name)."""
    out, _ = _Builder(PythonReader(where, brokers), controllers, assignment).expectation(
        python_node(expected), "expect", allow_profiles=False)
    return out


def actions_from_python(form: str, value: Any, brokers: tuple[int, ...], where: tuple[str, int],
                        partitions: int | None = None) -> list[Action]:
    """One action call of the Python API, validated exactly as a ``- <form>: <value>`` item
    (``partitions``: the topic's, which ``{leader_of: N}`` names)."""
    reader = PythonReader(where, brokers)
    reader.partitions = partitions
    if form not in FORMS:
        reader.fail(None, f"unknown action {form!r}{did_you_mean(form, action_forms())}; "
                          f"actions are {', '.join(action_forms())}")
    return FORMS[form].parse(form, python_node(value), reader, form)


def verdict_from_python(verdict: dict[str, Any], where: tuple[str, int]) -> LossExpectation:
    """``elr_cluster(acked_loss=...)`` or ``@pytest.mark.elr_verdict(...)``, validated exactly as a
    scenario's ``verdict``."""
    return _Builder(PythonReader(where)).verdict(python_node(verdict))
