"""The controller's AlterPartition refusals of ineligible replicas, read from its own log, and
whether each raced a change of that broker's registration.

The active controller logs every refusal (``ReplicationControlManager.validateAlterPartitionData``,
the same text in 4.0.2 and 4.4.0 bytecode)::

    [06:45:15,998] INFO [QuorumController id=3000] Rejecting AlterPartition request from node 2 for
    t-0 because it specified ineligible replicas [0 (fenced)] in the new ISR. ...

and every controller each registration change it replays (``ClusterControlManager.replay``)::

    [06:45:12,301] INFO [QuorumController id=3000] Replayed BrokerRegistrationChangeRecord modifying
    the registration for broker 0: ...
    ... Replayed RegisterBrokerRecord establishing a new incarnation of broker 0: ...
    ... Replayed UnregisterBrokerRecord(brokerId=0, brokerEpoch=...) ...

A partition leader proposes only followers its metadata shows eligible (KIP-841: not fenced, not
shutting down; KIP-903: at the broker epoch the controller has). Its metadata trails the
controller's by the time a record takes to reach it, so a refusal soon after that broker's
registration changed is a race the protocol allows. A refusal long after it is a leader that
proposed a follower its metadata had long shown ineligible: a bug, which the controller's check
hides (the leader falls back to its committed ISR, so the state looks right).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_elr.sut.isr_shrinks import DAY_MS, time_of_day_ms

#: how long after a broker's registration changed a refusal naming it is still a race: a metadata
#: record reaches a broker in milliseconds, seconds on a loaded machine (a Docker exec took up to
#: 14 s beside a CI run, docs/performance.md); a suite pass on Kafka 4.4.0 had no refusal at all
#: outside the forged requests' (docs/kafka-mutants.md, "Refusals held to the model")
RACE_GRACE_MS = 4000

_REFUSAL = re.compile(r"Rejecting AlterPartition request from node (?P<leader>\d+) for (?P<tp>\S+)-(?P<p>\d+) "
                      r"because it specified ineligible replicas \[(?P<ineligible>[^\]]*)\]")
_INELIGIBLE = re.compile(r"(?P<broker>\d+) \((?P<reason>[^)]*)\)")
_REGISTRATION = re.compile(r"Replayed (?:initial )?\w*Record\b[^:]*?(?:for broker |of broker |brokerId=)"
                           r"(?P<broker>\d+)")


@dataclass(frozen=True)
class IneligibleRefusal:
    """One refusal line: the leader that asked, and each replica refused with the controller's reason."""

    at_ms: int  # time of day, ms since midnight
    leader: int
    partition: int
    ineligible: tuple[tuple[int, str], ...]
    line: str


@dataclass(frozen=True)
class UnracedRefusal:
    """A replica refused long after its registration last changed (``since_change_ms`` None: not
    changed in the log read at all)."""

    refusal: IneligibleRefusal
    broker: int
    reason: str
    since_change_ms: int | None

    def __str__(self) -> str:
        since = (f"{self.since_change_ms / 1000:.1f} s after its registration last changed"
                 if self.since_change_ms is not None else "with no registration change of it in the log read")
        return (f"broker {self.refusal.leader} asked the controller to add broker {self.broker} to the ISR of "
                f"partition {self.refusal.partition}, refused ({self.reason}) {since}")


def ineligible_refusals(lines: Iterable[str], topic: str) -> list[IneligibleRefusal]:
    """The INELIGIBLE_REPLICA refusals of ``topic``'s partitions among ``lines``, in order."""
    found = []
    for line in lines:
        refusal = _REFUSAL.search(line)
        when = time_of_day_ms(line)
        if refusal is None or when is None or refusal["tp"] != topic:
            continue
        found.append(IneligibleRefusal(
            when, int(refusal["leader"]), int(refusal["p"]),
            tuple((int(m["broker"]), m["reason"]) for m in _INELIGIBLE.finditer(refusal["ineligible"])), line))
    return found


def registration_changes(lines: Iterable[str]) -> list[tuple[int, int]]:
    """(time of day in ms, broker) of each registration change replayed among ``lines``."""
    changes = []
    for line in lines:
        change = _REGISTRATION.search(line)
        when = time_of_day_ms(line)
        if change is not None and when is not None:
            changes.append((when, int(change["broker"])))
    return changes


def unraced(refusals: Iterable[IneligibleRefusal], changes: list[tuple[int, int]], since_ms: int,
            grace_ms: int = RACE_GRACE_MS) -> list[UnracedRefusal]:
    """Each replica refused at or after ``since_ms`` (time of day) more than ``grace_ms`` after the
    last change of its registration before the refusal. Times of day: within half a day of each other."""
    def ago(later: int, earlier: int) -> int:
        return (later - earlier) % DAY_MS

    out = []
    for refusal in refusals:
        if ago(refusal.at_ms, since_ms) >= DAY_MS // 2:
            continue  # before the window
        for broker, reason in refusal.ineligible:
            last = min((a for at, b in changes if b == broker and (a := ago(refusal.at_ms, at)) < DAY_MS // 2),
                       default=None)
            if last is None or last > grace_ms:
                out.append(UnracedRefusal(refusal, broker, reason, last))
    return out
