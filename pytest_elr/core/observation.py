"""What a backend reports: the partition's state, produce outcomes, records read, loss evidence."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    recovering: bool = False
    # Leaders whose AlterPartition is held on its way to the controller (a `slow` link to it).
    held: tuple[int, ...] = ()

    def as_event(self) -> dict[str, object]:
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


@dataclass(frozen=True)
class ConsumedRecord:
    offset: int
    value: str


@dataclass(frozen=True)
class LossEvidence:
    """What a lossy shutdown took from its victim.

    The model knows both log end offsets at once. A real broker's log end offset after the cut is
    only known once it restarts, so the kafka backend reports the bytes of the partition's files
    the disk layer dropped at the cut, and the offsets again at the restart.
    """

    broker: int
    leo_before: int | None
    leo_after: int | None
    bytes_lost: int | None = None

    @property
    def records_lost(self) -> int | None:
        if self.leo_before is None or self.leo_after is None:
            return None
        return self.leo_before - self.leo_after

    @property
    def bit(self) -> bool:
        """True when the fault demonstrably took data from the victim."""
        return (self.records_lost or 0) > 0 or (self.bytes_lost or 0) > 0


#: what doing an action returns: a produce's outcome, evidence of lossy shutdowns, or nothing
Result = ProduceOutcome | list[LossEvidence] | None
