"""What a backend reports: the partition's state, produce outcomes, records read, loss evidence."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_elr.core.outcomes import INDETERMINATE, SENT, UNAVAILABLE, classify


@dataclass(frozen=True)
class Observation:
    """The partition's state as read from the system (never inferred)."""

    leader: int | None
    leader_epoch: int | None
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    fenced: tuple[int, ...]
    hwm: int | None
    leo: dict[int, int] = field(default_factory=dict)
    #: LeaderRecoveryState RECOVERING (after an unclean election); None: not read (yet)
    recovering: bool | None = False
    # Leaders whose AlterPartition is held on its way to the controller (a `slow` link to it).
    held: tuple[int, ...] = ()
    #: bumped by every change of the controller's partition record (no client API returns it)
    partition_epoch: int | None = None
    #: the assigned replicas (during a reassignment the target's and those being removed); None: not read
    replicas: tuple[int, ...] | None = None
    #: the replicas a reassignment under way adds and removes (both empty: none under way; no client
    #: API but ListPartitionReassignments returns them); None: not read
    adding: tuple[int, ...] | None = None
    removing: tuple[int, ...] | None = None
    #: the controller (0 .. controllers - 1) leading the metadata quorum; None: no leader (no
    #: majority of the controllers runs), or a backend that does not read it
    active_controller: int | None = None
    #: the topic's other partitions (1, 2, ...) as observed in the same read, each its own
    #: observation; empty for a one-partition topic (this observation is partition 0's)
    partitions: Mapping[int, Observation] = field(default_factory=dict)

    def of(self, partition: int) -> Observation | None:
        """Partition ``partition``'s observation (None: not observed)."""
        return self if partition == 0 else self.partitions.get(partition)

    def as_event(self) -> dict[str, object]:
        event = self._event()
        if self.partitions:  # a one-partition topic's event stays as it was
            event["partitions"] = {str(i): o._event() for i, o in sorted(self.partitions.items())}
        return event

    def _event(self) -> dict[str, object]:
        return {
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
            "elr": list(self.elr),
            "last_known_elr": list(self.last_known_elr),
            "fenced": list(self.fenced),
            "hwm": self.hwm,
            "leo": {str(k): v for k, v in sorted(self.leo.items())},
            "recovering": self.recovering,
            "held": list(self.held),
            "partition_epoch": self.partition_epoch,
            "replicas": None if self.replicas is None else list(self.replicas),
            "adding": None if self.adding is None else list(self.adding),
            "removing": None if self.removing is None else list(self.removing),
        }


@dataclass
class ProduceOutcome:
    """What happened to the records one produce action sent."""

    acks: str
    sent: int = 0
    acked: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    pending: int = 0

    @property
    def errors(self) -> set[str]:
        return set(self.failed)

    def words(self) -> dict[str, int]:
        """Records per outcome word (:mod:`pytest_elr.core.outcomes`), as the client saw them when
        the produce returned: a record still waiting for its answer then is one a client times out on."""
        out: Counter[str] = Counter()
        out[classify(None, self.acks)] += self.acked
        for error, n in self.failed.items():
            out[classify(error, self.acks)] += n
        out[UNAVAILABLE] += self.pending
        out[SENT if self.acks == "0" else INDETERMINATE] += self.sent - sum(out.values())
        return {word: n for word, n in sorted(out.items()) if n > 0}


@dataclass(frozen=True)
class ConsumedRecord:
    offset: int
    value: str


@dataclass(frozen=True)
class LossEvidence:
    """What a lossy shutdown took from its victim, measured on the partition's records.

    ``leo_before``: the victim's log end offset just before the cut; ``leo_after``: the log end its
    surviving records make right after the cut (the model knows it; the kafka backend reads the
    partition's segment files on the victim's disk, as Kafka's log recovery will); ``leo_restart``:
    the log end the victim itself reports once restarted, before it fetches anything (None until
    then). ``bytes_lost``: bytes of the partition's segment files the disk layer dropped, for the
    record only: the fault bit is measured in records.
    """

    broker: int
    leo_before: int | None
    leo_after: int | None
    bytes_lost: int | None = None
    leo_restart: int | None = None
    #: the topic's partition measured (a power off measures each partition the victim holds)
    partition: int = 0

    @property
    def records_lost(self) -> int | None:
        if self.leo_before is None or self.leo_after is None:
            return None
        return self.leo_before - self.leo_after

    @property
    def truncated(self) -> tuple[int, int] | None:
        """The offsets the victim lost, ``[first, end)`` (None: unmeasured or none lost)."""
        if not (self.records_lost or 0) > 0:
            return None
        return self.leo_after, self.leo_before  # type: ignore[return-value]

    @property
    def bit(self) -> bool:
        """True when the fault demonstrably took records from the victim."""
        return (self.records_lost or 0) > 0

    def as_event(self) -> dict[str, int | None]:
        """The fields of the history's ``loss_evidence`` event (``partition`` only when not 0, as
        in a one-partition topic's history)."""
        return {"broker": self.broker, "leo_before": self.leo_before, "leo_after": self.leo_after,
                "leo_restart": self.leo_restart, "records_lost": self.records_lost, "bytes_lost": self.bytes_lost,
                **({"partition": self.partition} if self.partition else {})}

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> LossEvidence:
        """Back from a ``loss_evidence`` event (``records_lost`` follows from the two offsets)."""
        return cls(broker=event["broker"], leo_before=event.get("leo_before"), leo_after=event.get("leo_after"),
                   bytes_lost=event.get("bytes_lost"), leo_restart=event.get("leo_restart"),
                   partition=event.get("partition") or 0)


def say_lost_offsets(proof: Mapping[str, Any]) -> str:
    """The offsets a proof by presence's victim lost, in words ("offsets 5-7", or per partition on a
    topic of several: "partition 3 offsets 5-7, partition 8 offsets 4-4"); "" when unmeasured."""
    if proof.get("truncated"):
        first, end = proof["truncated"]
        return f"offsets {first}-{end - 1}"
    spans = sorted((proof.get("truncated_by_partition") or {}).items(), key=lambda kv: int(kv[0]))
    return ", ".join(f"partition {p} offsets {first}-{end - 1}" for p, (first, end) in spans)


@dataclass(frozen=True)
class Read:
    """Records a consumer read from the partition, and how far the read got."""

    records: list[ConsumedRecord]
    #: one past the last offset the read reached (tick records skipped included); None: no leader to read
    end_offset: int | None


FaultBit = Literal["yes", "NO", "-"]


def fault_bit(losses: Iterable[LossEvidence]) -> FaultBit:
    """Did the run's lossy faults bite? ``yes``: one took data from its victim; ``NO``: a lossy
    fault took none (the run proves nothing about durability); ``-``: no lossy fault."""
    losses = list(losses)
    if any(loss.bit for loss in losses):
        return "yes"
    return "NO" if losses else "-"

@dataclass(frozen=True)
class Refusal:
    """An operator request (``reassign``, ``cancel_reassignment``) the controller refused: an
    answer of the cluster, not an error of the run; nothing changed. ``code``: Kafka's error name
    (``pytest_elr.core.errors.OPERATOR_ERRORS``)."""

    action: str
    code: str
    #: the controller's words, when it sent some (not compared: the model has none)
    message: str = field(default="", compare=False)


#: what doing an action returns: a produce's outcome, evidence of lossy shutdowns, an operator
#: request's refusal, or nothing
Result = ProduceOutcome | list[LossEvidence] | Refusal | None
