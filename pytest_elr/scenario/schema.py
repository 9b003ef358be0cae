"""The typed form of a scenario file, as the loader builds it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.specifiers import SpecifierSet

from pytest_elr.actions import Action
from pytest_elr.core.specs import ClusterSpec, TopicSpec, WorkloadSpec

#: expectation keys and what they hold (see docs/language.md)
EXPECTATION_KEYS = (
    "leader", "isr", "elr", "last_known_elr", "fenced", "hwm", "produce", "rejected", "lost",
    "recovering", "held", "leader_epoch", "partition_epoch", "replicas",
    "adding", "removing", "elr_elections", "unclean_elections", "active_controller", "refused",
)
#: the expectations that name a set of brokers, each an ``Observation`` field of that name: a new
#: one is a name here (and a word in docs/language.md) once the model and the backends observe it
BROKER_SET_KEYS = ("isr", "elr", "last_known_elr", "fenced", "held", "replicas", "adding", "removing")
#: the expectations one partition answers on its own: ``expect: {partitions: {<scope>: {...}}}``
#: holds them for a partition, a set of partitions or all (the keys outside it are partition 0's;
#: ``fenced`` is the cluster's)
PARTITION_KEYS = ("leader", *(k for k in BROKER_SET_KEYS if k != "fenced"), "recovering")
#: ``expect: {partitions: ...}``: the scoped expectations, by partition number
PARTITIONS = "partitions"
#: the scope ``all`` of ``expect: {partitions: {all: {...}}}``
ALL_PARTITIONS = "all"
#: the scope ``preferred 2`` (or ``preferred 0,1``): every partition whose assignment lists that
#: broker first (its preferred leader), read off the topic's assignment when the scenario loads
PREFERRED_SCOPE = "preferred"
#: ``leader: preferred``: the partition's preferred leader (its assignment's first replica)
PREFERRED_LEADER = "preferred"
#: ``isr: assigned`` (or ``replicas: assigned``): every replica of the partition's assignment
ASSIGNED = "assigned"
#: the expectations read from the system's counters (``Backend.election_counts``): elections since
#: the scenario's start, counted as Kafka's controller meters count them (docs/model.md, "Metrics")
ELECTION_COUNTS = ("elr_elections", "unclean_elections")
#: ``active_controller: any``: some controller leads the metadata quorum
ANY_CONTROLLER = "any"
#: ``active_controller: unchanged``: the controller that led at the previous step's end still leads
UNCHANGED = "unchanged"
#: ``elr: {one_of: [[3, 4], [3]]}``: the expectation holds when the value is any of these
ONE_OF = "one_of"
#: the keys that take ``{one_of: [...]}``: the leader and the broker sets
ONE_OF_KEYS = ("leader", *BROKER_SET_KEYS)
#: at most this many choices in one ``one_of`` (a choice between histories, not an enumeration)
MAX_ONE_OF = 16


@dataclass(frozen=True)
class OneOf:
    """``{one_of: [...]}``: the value is any of ``choices`` -- for a step whose outcome timing
    chooses among states the protocol allows (KIP-966's Case F: lagging followers leave the ISR
    together or one at a time), each written out so that no other value passes."""

    choices: tuple[Any, ...]

    def holds(self, value: Any) -> bool:
        return value in self.choices


#: what the executor holds a system to the model on (the state after every fault, caught-up
#: followers, each produce's outcome): the keys of a step's ``differs``
DIFFERABLE = ("leader", "isr", "elr", "last_known_elr", "fenced", "held", "recovering", "leader_epoch",
              "partition_epoch", "hwm", "replicas", "adding", "removing", "caught_up",
              "produce", "refused", *ELECTION_COUNTS)

#: what the verdict (the known-failure "step" ``verdict``) fails with: the judge's problems
VERDICT_FAILURES = ("acked_loss", "no_bite", "unproved_loss", "lost", "unseen", "duplicate", "inconsistent_offset")


@dataclass(frozen=True)
class Step:
    label: str
    line: int
    actions: tuple[Action, ...]
    expect: Mapping[str, Any]
    by_profile: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    from_model: bool = False
    timeout_s: float | None = None
    note: str = ""
    #: the line of each action (for errors found while running it) and of each expectation key
    action_lines: tuple[int, ...] = ()
    key_lines: Mapping[str, int] = field(default_factory=dict)
    #: fields where the system may differ from the model in this step, with the measured reason
    differs: Mapping[str, str] = field(default_factory=dict)
    differs_by_profile: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    differs_line: int | None = None

    def expectations_for(self, profile: str) -> dict[str, Any]:
        """The step's expectations under ``profile``: its ``by_profile`` entry merged over the rest,
        key by key -- and partition by partition, key by key, inside ``partitions`` (a profile that
        overrides partition 0's leader leaves every other partition's expectations, and partition
        0's other keys, in force). A plain key and partition 0's scoped one are the same expectation:
        the profile's replaces the other form too."""
        merged = dict(self.expect)
        scoped = {p: dict(sub) for p, sub in self.expect.get(PARTITIONS, {}).items()}
        for key, value in self.by_profile.get(profile, {}).items():
            if key == PARTITIONS:
                for p, sub in value.items():
                    scoped.setdefault(p, {}).update(sub)
                    if p == 0:
                        for k in sub:
                            merged.pop(k, None)
                continue
            merged[key] = value
            if key in PARTITION_KEYS and key in scoped.get(0, {}):
                del scoped[0][key]
        merged.pop(PARTITIONS, None)
        if any(scoped.values()):
            merged[PARTITIONS] = {p: sub for p, sub in sorted(scoped.items()) if sub}
        return merged

    def differences_for(self, profile: str) -> dict[str, str]:
        """The declared differences of this step under ``profile``: field -> reason."""
        merged = dict(self.differs)
        merged.update(self.differs_by_profile.get(profile, {}))
        return merged

    def produces(self) -> int:
        """How many produce actions the step does (a list of ``produce`` expectations names each)."""
        return sum(a.kind == "produce" for a in self.actions)

    def operator_requests(self) -> int:
        """How many operator requests (``reassign``, ``cancel_reassignment``, ``elect_leaders``,
        ``unclean_election``) the step makes."""
        return sum(a.operator for a in self.actions)


@dataclass(frozen=True)
class Failure:
    """One thing that failed in a run: where (a step's label, ``finale``, or ``verdict``) and what
    (the field that differs from the model or the expectation, the invariant broken, or the
    verdict's problem). A run keeps its failures in this form, so a known failure is matched
    against them, never against the words of the report."""

    step: str
    what: str

    def __str__(self) -> str:
        return f"step {self.step}: {self.what}" if self.step != "verdict" else f"verdict: {self.what}"


@dataclass(frozen=True)
class KnownFailure:
    """Releases on which the scenario is known to fail, and why (a Kafka bug fixed later): a run
    there must fail (strict, like ``xfail(strict=True)``): an unexpected pass is a failure. The
    entry names the one failure the bug makes: the step and what fails there (fields,
    invariants); any other failure of the same run is not the known one."""

    versions: SpecifierSet
    because: str
    line: int
    step: str
    fails: tuple[str, ...]

    def covers(self, failure: Failure) -> bool:
        return failure.step == self.step and failure.what in self.fails

    def __str__(self) -> str:
        return f"step {self.step} in {', '.join(self.fails)}"


def unexplained(known: tuple[KnownFailure, ...], failures: tuple[Failure, ...]) -> list[Failure] | None:
    """The failures of a run that no entry of ``known`` declares; None when the run failed without
    a structured failure (a backend error, a harness refusal): never a known failure."""
    if not failures:
        return None
    return [f for f in failures if not any(k.covers(f) for k in known)]


@dataclass(frozen=True)
class LossExpectation:
    """What the scenario expects the checker to find about acks=all records (its ``verdict:`` key)."""

    acked_loss: str = "none"  # "none" or "found" (a negative control)
    by_profile: Mapping[str, str] = field(default_factory=dict)

    def for_profile(self, profile: str) -> str:
        return self.by_profile.get(profile, self.acked_loss)


@dataclass(frozen=True)
class Scenario:
    name: str
    path: str
    description: str
    profiles: tuple[str, ...]
    cluster: ClusterSpec
    topic: TopicSpec
    workload: WorkloadSpec | None
    steps: tuple[Step, ...]
    verdict: LossExpectation
    finale: bool = True  # heal every link and restart every broker before the final read
    line: int = 1
    #: Backends the scenario can be staged on (None: all), and why the others cannot.
    backends: tuple[str, ...] | None = None
    backends_reason: str = ""
    #: the Kafka releases the scenario applies to (None: all); others are skipped, saying why
    kafka_versions: SpecifierSet | None = None
    known_failures: tuple[KnownFailure, ...] = ()

    def runs_on(self, backend: str) -> bool:
        """Whether the scenario can be staged on ``backend`` (``backends: {only: [...]}``)."""
        return self.backends is None or backend in self.backends

    def known_failure(self, version: str | None) -> KnownFailure | None:
        """The first declared failure that covers this release, if any (its ``because`` is the reason)."""
        return next(iter(self.known_failures_on(version)), None)

    def known_failures_on(self, version: str | None) -> tuple[KnownFailure, ...]:
        """Every entry that covers this release: a bug whose consequences show at later steps has one
        entry per step, and the run may fail only at what they declare together."""
        if version is None:
            return ()
        return tuple(k for k in self.known_failures if k.versions.contains(version))
