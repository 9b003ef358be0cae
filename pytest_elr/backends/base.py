"""The Backend protocol: what the scenario executor needs from a system under test.

A backend starts a cluster for one scenario, applies actions, and reports what it observes.
The ``model`` backend answers from the reference model in-process; the ``kafka`` backend from
real brokers. Third-party packages add backends through the ``pytest_elr.backends`` entry-point
group; the same YAML runs on every backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from pytest_elr.actions import Action
from pytest_elr.core.observation import ConsumedRecord, LossEvidence, Observation, ProduceOutcome

if TYPE_CHECKING:
    from pytest_elr.core.history import History
    from pytest_elr.core.specs import ClusterSpec, TopicSpec


@runtime_checkable
class Backend(Protocol):
    name: ClassVar[str]
    #: profiles this backend can run (the kafka backend cannot run ``kip966``)
    profiles: ClassVar[frozenset[str]]
    #: True when ``observe`` is final right after ``apply`` returns (no need to poll)
    settles_instantly: ClassVar[bool]

    def start(self, cluster: ClusterSpec, topic: TopicSpec, profile: str, history: History) -> None:
        ...

    def apply(self, action: Action) -> ProduceOutcome | list[LossEvidence] | None:
        ...

    def observe(self) -> Observation:
        ...

    def unsynced_bytes(self) -> dict[int, int]:
        """Per broker, what a power off would lose right now."""
        ...

    def protocol_errors(self) -> list[str]:
        """Errors the controller answered to leaders since the last call (e.g. INELIGIBLE_REPLICA)."""
        ...

    def drain(self) -> list[ConsumedRecord]:
        """Read the partition from the beginning up to the HWM (what a consumer can see)."""
        ...

    def close(self) -> None:
        ...
