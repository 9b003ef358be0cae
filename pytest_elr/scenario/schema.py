"""The typed form of a scenario file, as the loader builds it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_elr.actions import Action


class ScenarioError(Exception):
    """A scenario file is wrong. Carries the file and line so the message points at it."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path or "<scenario>"
        if self.line is not None:
            where += f":{self.line}"
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class ClusterSpec:
    brokers: tuple[int, ...]
    controllers: int = 1
    #: How long the controller waits for a silent broker before fencing it, on a real cluster
    #: (None: the backend's tuned default, 3 s on Kafka). The model fences at once.
    session_timeout_ms: int | None = None


@dataclass(frozen=True)
class TopicSpec:
    name: str
    replicas: tuple[int, ...]
    min_insync_replicas: int
    unclean_recovery: str | None = None  # kip966 profile only: none | balanced | aggressive


@dataclass(frozen=True)
class WorkloadSpec:
    """A background producer that runs for the whole scenario."""

    acks: str = "all"
    rate_per_s: float = 100.0
    per_step: int = 5  # records the model backend sends around each step, for the same effect


#: expectation keys and what they hold (see docs/language.md)
EXPECTATION_KEYS = (
    "leader", "isr", "elr", "last_known_elr", "fenced", "hwm", "produce", "rejected", "lost",
    "recovering", "held",
)


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

    def expectations_for(self, profile: str) -> dict[str, Any]:
        merged = dict(self.expect)
        merged.update(self.by_profile.get(profile, {}))
        return merged


@dataclass(frozen=True)
class Verdict:
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
    verdict: Verdict
    finale: bool = True  # heal every link and restart every broker before the final read
    line: int = 1
    #: Backends the scenario can be staged on (None: all), and why the others cannot.
    backends: tuple[str, ...] | None = None
    backends_reason: str = ""
