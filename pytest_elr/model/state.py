"""Plain data of the model: records, replicas, brokers and the controller's partition record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


@dataclass(frozen=True)
class Record:
    value: str
    epoch: int  # leader epoch the record was appended in (what divergence checks compare)
    acks: str = "all"


@dataclass
class Replica:
    """One broker's copy of the partition log."""

    broker: int
    log: list[Record] = field(default_factory=list)
    flushed: int = 0  # prefix of ``log`` that is on stable storage
    hwm: int = 0  # this replica's local high watermark

    @property
    def leo(self) -> int:
        return len(self.log)

    def last_epoch(self) -> int:
        return self.log[-1].epoch if self.log else -1


@dataclass
class Broker:
    id: int
    running: bool = True
    paused: bool = False
    registered: bool = True
    epoch: int = 0  # broker epoch from the last registration
    clean_marker: int | None = None  # epoch written by a clean shutdown, else None
    new_disk: bool = False  # registers a log directory the controller has not seen


class PartitionView(NamedTuple):
    """The parts of the partition record the invariants of its history compare, before and after."""

    leader: int | None
    leader_epoch: int
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    recovering: bool


@dataclass
class PartitionRecord:
    """What the controller stores for the partition (PartitionRecord + PartitionChangeRecords)."""

    replicas: list[int]
    leader: int | None
    leader_epoch: int = 0
    partition_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)
    recovering: bool = False  # LeaderRecoveryState=RECOVERING after an unclean election
    #: a reassignment under way: the replicas it adds and removes (``replicas`` is then the target
    #: followed by the replicas being removed, as Kafka lists it)
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)
    id: int = 0  # the partition's number (Kafka's PartitionRecord.partitionId)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    def view(self) -> PartitionView:
        return PartitionView(self.leader, self.leader_epoch, tuple(self.isr), tuple(self.elr), self.recovering)

    def ordered(self, members: set[int] | list[int]) -> list[int]:
        """Members in replica-assignment order (how Kafka lists them and elects); members no longer
        assigned (kept in the ELR by Kafka's reassignment) after them, in id order."""
        wanted = set(members)
        assigned = [r for r in self.replicas if r in wanted]
        if wanted.issubset(self.replicas):
            return assigned  # every member assigned (the usual case): none after them
        return assigned + sorted(wanted - set(self.replicas))


@dataclass(frozen=True)
class AlterPartition:
    """An ISR change a leader sent to the controller, with the broker epochs it saw (KIP-903)."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[tuple[int, int], ...]  # (broker, broker epoch as seen in its fetches)
    #: the sender's own broker epoch (KIP-903); None: its registration's, as a running leader sends
    broker_epoch: int | None = None
    #: the LeaderRecoveryState asked for (KIP-704): a Kafka leader always sends RECOVERED
    recovering: bool = False

    @property
    def isr(self) -> list[int]:
        return [b for b, _ in self.new_isr]
