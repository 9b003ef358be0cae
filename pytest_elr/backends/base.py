"""The backend contract: everything the scenario executor needs from a system under test.

A backend starts a cluster for one scenario, does actions, and reports what it observes. The
``model`` backend answers from the reference model in-process; the ``kafka`` backend from real
brokers. Third-party packages add backends through the ``pytest_elr.backends`` entry-point group
and subclass :class:`Backend`; the same YAML runs on every backend.

Required: ``name``, ``profiles``, ``start``, ``apply`` (one handler per action kind, listed by
``handled_actions``), ``observe``, ``drain``, ``close``. Everything else has a default here.

Unless the backend *is* the model (``own_model``), the executor holds every observation to the
model's prediction: after each fault every field of :class:`Observation` it reads (leader, ISR,
ELR, LastKnownELR, fenced, held, recovering, the leader epoch and whether the partition epoch
moved), and every produce's outcome in the words of
:mod:`pytest_elr.core.outcomes`. A field the backend cannot read goes in ``cannot_observe``: it is
then compared with nothing, and a scenario that expects it is refused (never a vacuous pass).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from pytest_elr.actions import Action
from pytest_elr.core.observation import Observation, Read, Result

if TYPE_CHECKING:
    from pytest_elr.core.history import History
    from pytest_elr.core.specs import ClusterSpec, TopicSpec, WorkloadSpec
    from pytest_elr.model.cluster import ModelCluster
    from pytest_elr.sut.refusals import UnracedRefusal

#: how long a real cluster gets, by default, to reach the model's predicted state after a fault
SETTLE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class LagChurn:
    """A partition leader's ISR shrinks over a span of time, as its own log tells them."""

    shrinks: int
    #: the shrinks whose every dropped follower was behind the leader's end and had not caught up
    #: for longer than ``replica.lag.time.max.ms``: Kafka's own cause, no fault needed
    lagged: int
    #: the lines of the shrinks without that cause (a leader that dropped a follower in sync)
    without_cause: tuple[str, ...] = ()
    #: every follower the shrinks dropped (sorted): a round trip is "on its own" only for a
    #: follower no fault slows (``Executor._lag_churn``)
    dropped: tuple[int, ...] = ()

    def explains(self, moved_by: int) -> bool:
        """Whether a partition epoch that moved by ``moved_by`` where the model's did not is these
        shrinks, each undone: every shrink a lag, one shrink and one expansion each."""
        return self.shrinks > 0 and self.lagged == self.shrinks and moved_by > 0 and moved_by % 2 == 0 \
            and moved_by <= 2 * self.shrinks


class Session(Protocol):
    """What a backend shares across the runs of one pytest session (e.g. a pool of clusters)."""

    def close(self) -> None: ...


class Backend(ABC):
    name: ClassVar[str]
    #: profiles this backend can run (the kafka backend cannot run ``kip966``)
    profiles: ClassVar[frozenset[str]]
    #: True when ``observe`` is final right after ``apply`` returns (no need to poll)
    settles_instantly: ClassVar[bool] = False
    #: the Kafka release under test, when there is one (written into each history)
    kafka_version: str | None = None
    #: fields of Observation this backend cannot read (e.g. ``recovering``)
    cannot_observe: ClassVar[frozenset[str]] = frozenset()
    #: whether the backend stages a topic of several partitions (creates them, observes each in
    #: ``Observation.partitions``, spreads produce over them, ``drain_partitions``); one that does
    #: not is refused such a topic before anything starts, never run on partition 0 alone
    many_partitions: ClassVar[bool] = False

    def __init__(self, session: Session | None = None, version: str | None = None) -> None:
        """``session``: what ``new_session`` made for this pytest session; ``version``: the release of
        the system under test to run (None: the backend's default)."""
        self.session = session

    @classmethod
    def default_version(cls) -> str | None:
        """The release run when the settings name none; None: the backend has no releases (the
        model), so a version matrix does not multiply its runs."""
        return None

    @classmethod
    def new_session(cls) -> Session | None:
        """Shared state for one pytest session; the plugin keeps it and closes it at the end."""
        return None

    @classmethod
    @abstractmethod
    def handled_actions(cls) -> set[type]:
        """The action classes ``apply`` has a handler for (a dispatch table's keys)."""

    @abstractmethod
    def start(self, cluster: ClusterSpec, topic: TopicSpec, profile: str, history: History) -> None:
        """A cluster of this shape with this topic, healthy, every event going to ``history``."""

    @abstractmethod
    def apply(self, action: Action) -> Result:
        """Do one action; returns a produce's outcome or the evidence of lossy shutdowns."""

    @abstractmethod
    def observe(self) -> Observation:
        """The partition's state, read from the system (never inferred)."""

    @abstractmethod
    def drain(self) -> Read:
        """Read the partition from the beginning up to the final HWM (what a consumer can see). A
        read that stops short of the HWM (``end_offset``) is a harness error, never a loss."""

    def drain_partitions(self) -> dict[int, Read]:
        """Every partition of the topic read as ``drain`` reads partition 0, by partition number.
        The default: a backend of one-partition topics (partition 0 only)."""
        return {0: self.drain()}

    @abstractmethod
    def close(self) -> None:
        """Release the cluster (a pooled one is healed for the next run)."""

    # --- optional: the defaults suit an in-process backend -------------------------------------

    def own_model(self) -> ModelCluster | None:
        """The oracle, when the backend *is* the model; otherwise the executor builds a shadow
        model fed the same actions and holds the backend to it."""
        return None

    def start_workload(self, spec: WorkloadSpec) -> bool:
        """Start the scenario's background producer in real time. False: the backend has none, and
        the executor sends ``spec.per_step`` records around every step instead."""
        return False

    def settle_timeout_s(self) -> float:
        """How long the cluster may take to reach the model's state after a fault."""
        return SETTLE_TIMEOUT_S

    def rest_s(self) -> float:
        """How long the system must stay in one state before nothing of its own will change it
        (no timer left to fire): a step's known failure is taken once the system rests in it
        (``Executor._poll``). A backend that cannot say waits its whole settle timeout."""
        return self.settle_timeout_s()

    def nudge(self, partitions: Sequence[int] = (0,)) -> None:
        """Make a lagging follower of each of ``partitions`` visibly lag (Kafka shrinks the ISR only
        of a follower *behind*). In-process backends have nothing to do."""
        return None

    def read_partitions(self, starts: Mapping[int, int]) -> dict[int, Read]:
        """What a consumer reads now of each partition in ``starts`` from its offset up to the HWM:
        the executor reads after each step, so a record that disappears later is proved lost by
        having been seen. A partition left out of the answer was not read (none: the backend cannot
        read before the end, and losses are then judged by absence only)."""
        return {}

    def unsynced_bytes(self) -> dict[int, int]:
        """Per broker, what a power off would lose right now."""
        return {}

    def election_counts(self) -> dict[str, int] | None:
        """The system's own counts of elections since it started, by expectation key
        (``elr_elections``, ``unclean_elections``; a key left out: this release counts none). Read
        only where a step names one (a real cluster's read costs a JVM start). None: the backend
        reads no counts, and such a step fails (a pass would prove nothing)."""
        return None

    def protocol_errors(self) -> list[str]:
        """Errors the controller answered to leaders since the last call (e.g. INELIGIBLE_REPLICA)."""
        return []

    def unraced_refusals(self, since: float) -> list[UnracedRefusal] | None:
        """The controllers' INELIGIBLE_REPLICA refusals of this run's topic logged since the wall
        time ``since``, each replica refused long after its registration last changed (a leader
        that proposed a follower its metadata showed ineligible; :mod:`pytest_elr.sut.refusals`).
        None: the backend cannot tell (an in-process backend refuses only as the model does)."""
        return None

    def lag_churn(self, partition: int, leader: int, since: float) -> LagChurn | None:
        """What ``leader`` logged of its ISR shrinks of ``partition`` since the wall time ``since``
        (``time.time()``), to tell a follower that lagged on its own (a machine's load: no fault,
        and the model has no clock) from one dropped without cause. None: the backend keeps no
        such log; an in-process backend's ISR moves only where the model's does."""
        return None
