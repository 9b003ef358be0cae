"""One partition of the model: its record, its replicas' logs and what its leader does.

``ModelCluster`` holds the cluster (brokers, links, controllers, fencing, epochs) and one
``ModelPartition`` per partition, as Kafka's controller holds one ``PartitionRegistration`` per
partition beside its cluster state and builds each partition's change on its own
(``PartitionChangeBuilder``): a broker event (fencing, an unclean registration, a cluster-wide min
ISR change) applies the rules of ``model/controller.py`` to every partition it touches, in one step.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pytest_elr.core.observation import ProduceOutcome
from pytest_elr.model.ledger import LossLedger
from pytest_elr.model.state import AlterPartition, PartitionRecord, PartitionView, Record, Replica

#: what ``admitted`` holds for a change that added nobody to the ISR (shared: most changes)
_NO_ADMISSION: frozenset[int] = frozenset()


@dataclass
class Send:
    """One record a client sent, as the history needs it."""

    value: str
    acks: str
    offset: int | None = None
    status: str = "pending"  # pending | ok | fail
    error: str | None = None


@dataclass
class ProduceRequest:
    first_offset: int
    records: list[Record]
    outcome: ProduceOutcome
    sends: list[Send]


@dataclass
class ModelPartition:
    id: int
    #: the replicas the brokers hold (the assignment the brokers follow: ``_follow_assignment``)
    replicas: list[int]
    #: what the controller stores for the partition (its metadata log's committed state)
    part: PartitionRecord = field(init=False)
    logs: dict[int, Replica] = field(default_factory=dict)
    #: per broker, (leader, leader epoch) of this partition as it last heard from the controller
    heard: dict[int, tuple[int | None, int]] = field(default_factory=dict)
    pending_alter: AlterPartition | None = None
    rejected_alter: AlterPartition | None = None
    rejected_view: tuple[frozenset[int], tuple[int, ...]] | None = None  # ``_brokers_view`` at the refusal
    pending_produce: list[ProduceRequest] = field(default_factory=list)
    acked: list[Record] = field(default_factory=list)  # acknowledged acks=all records
    sends: list[Send] = field(default_factory=list)
    committed: list[Record] = field(default_factory=list)  # every record ever below the HWM
    follower_leo: dict[int, int] = field(default_factory=dict)  # the leader's view
    follower_fetch_epoch: dict[int, int] = field(default_factory=dict)  # KIP-903
    #: lossy shutdowns of replicas relied on that have not caught up since (model/ledger.py)
    ledger: LossLedger = field(default_factory=LossLedger)
    frozen_min_isr: int = 0  # min ISR in force when the ISR last fell below it
    #: why ISR + ELR may be under min ISR since the ISR last met it (an ELR member's unclean
    #: registration, a min ISR change that cleared the ELR), or None: the seeds' exceptions
    quorum_shrunk_by: str | None = None
    #: brokers that registered after an unclean shutdown and have not caught up since
    unclean_restarted: set[int] = field(default_factory=set)
    #: ISR members the controller accepted with a broker epoch older than their registration's
    stale_in_isr: set[int] = field(default_factory=set)
    #: partition epoch at a min ISR change whose HWM re-evaluation waits for the next event
    #: (``controller.hwm_reevaluated``), or None
    hwm_waits_since: int | None = None
    #: whether the leader's HWM was allowed to advance (``ModelCluster.hwm_may_advance_now``) in
    #: some leader round since the executor last held the system's HWM to this state (``mark_hwm``):
    #: only without such a window may the executor require the system's HWM to have stayed put
    hwm_window_open: bool = True
    #: this state's HWM when the executor last held the system's HWM to it (``mark_hwm``)
    hwm_at_mark: int | None = None
    #: this state's partition epoch when the executor last held the system's to it
    partition_epoch_at_mark: int = 0
    #: the partition's history the state alone does not show, for the invariants of that history
    #: (``model/invariants.py``): each change of leader, ISR, ELR or RECOVERING as (before, after),
    #: seen after every action and every controller round (no change is made elsewhere) ...
    changes: list[tuple[PartitionView, PartitionView]] = field(default_factory=list)
    #: ... beside each change, the members a leader's AlterPartition added to the ISR in it (caught
    #: up, as the leader vouched: Kafka elects from that ISR when the same change moves the leader
    #: away, a reassignment completing) ...
    admitted: list[frozenset[int]] = field(default_factory=list)
    #: ... each move of the leader's HWM (from, to, committed ISR size, effective min ISR) ...
    hwm_moves: list[tuple[int, int, int, int]] = field(default_factory=list)
    #: ... each replica the controller added to the ISR (broker, records it held below the
    #: leader's HWM, the HWM) ...
    isr_joins: list[tuple[int, int, int]] = field(default_factory=list)
    #: ... and each acks=all request acknowledged (first value, replicas holding it, effective min ISR)
    acks: list[tuple[str, int, int]] = field(default_factory=list)
    #: slow followers whose late fetches the leader counts as in sync at this moment (a timing
    #: choice per action, ``ModelCluster._choose_late_in_sync``; the canonical state has none)
    late_in_sync: set[int] = field(default_factory=set)
    #: followers out of the ISR while the HWM was free to move past their log end: records the
    #: model does not see (the executor's acks=1 ticks) may be committed beyond them
    outrun: set[int] = field(default_factory=set)
    _view_epoch: int = -1
    _seen: PartitionView = field(init=False)  # the partition as ``changes`` last saw it
    _admitted_since_seen: set[int] = field(default_factory=set)
    #: what ``ModelCluster._settle`` last saw of this partition: its fingerprint
    #: (``ModelCluster._partition_key``); None before the first settle
    _key: tuple[object, ...] | None = \
        field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for r in self.replicas:
            self.logs[r] = Replica(broker=r)
        self.part = PartitionRecord(replicas=list(self.replicas), leader=self.replicas[0],
                                    isr=list(self.replicas), id=self.id)
        self.part.leader_epoch = 1
        self._seen = self.part.view()

    def leader_replica(self) -> Replica | None:
        leader = self.part.leader
        return self.logs[leader] if leader is not None else None

    def hwm(self) -> int | None:
        leader = self.leader_replica()
        return leader.hwm if leader is not None else None

    def trusted(self) -> set[int]:
        """Replicas the protocol relies on as complete, or may still elect: leader, ISR, ELR and
        LastKnownELR."""
        trusted = set(self.part.isr) | set(self.part.elr) | set(self.part.last_known_elr)
        if self.part.leader is not None:
            trusted.add(self.part.leader)
        return trusted

    def fork(self, shared: dict[int, object]) -> ModelPartition:
        """An independent copy for ``ModelCluster.fork``: every container copied, the immutable
        objects (records, requests, views) shared. ``shared``: the copies made so far of what
        several partitions hold (a produce's ``ProduceOutcome`` spans one request per partition),
        by the id of the original, so the fork keeps that sharing as ``copy.deepcopy`` did.

        A finished ``Send`` (not in ``pending_produce``) is shared as well: only a pending
        request's sends are written again (``ModelCluster._complete``)."""
        new = object.__new__(ModelPartition)
        d = new.__dict__
        d.update(self.__dict__)
        part = object.__new__(PartitionRecord)
        part.__dict__.update(self.part.__dict__)
        part.replicas, part.isr, part.elr = list(part.replicas), list(part.isr), list(part.elr)
        part.last_known_elr, part.adding, part.removing = \
            list(part.last_known_elr), list(part.adding), list(part.removing)
        d["part"] = part
        d["replicas"] = list(self.replicas)
        d["logs"] = {b: Replica(r.broker, list(r.log), r.flushed, r.hwm) for b, r in self.logs.items()}
        d["heard"] = self.heard.copy()
        pending = []
        for req in self.pending_produce:
            sends = []
            for send in req.sends:
                twin = shared.get(id(send))
                if twin is None:
                    twin = shared[id(send)] = Send(send.value, send.acks, send.offset, send.status, send.error)
                sends.append(twin)
            outcome = shared.get(id(req.outcome))
            if outcome is None:
                outcome = shared[id(req.outcome)] = replace(req.outcome, failed=req.outcome.failed.copy())
            pending.append(ProduceRequest(req.first_offset, list(req.records), outcome, sends))  # type: ignore[arg-type]
        d["pending_produce"] = pending
        d["sends"] = [shared.get(id(s), s) for s in self.sends] if pending else list(self.sends)
        d["acked"], d["committed"] = list(self.acked), list(self.committed)
        d["follower_leo"], d["follower_fetch_epoch"] = self.follower_leo.copy(), self.follower_fetch_epoch.copy()
        d["ledger"] = LossLedger(set(self.ledger.suspects))
        d["unclean_restarted"], d["stale_in_isr"] = set(self.unclean_restarted), set(self.stale_in_isr)
        d["changes"], d["admitted"] = list(self.changes), list(self.admitted)
        d["hwm_moves"], d["isr_joins"], d["acks"] = list(self.hwm_moves), list(self.isr_joins), list(self.acks)
        d["late_in_sync"], d["outrun"] = set(self.late_in_sync), set(self.outrun)
        d["_admitted_since_seen"] = set(self._admitted_since_seen)
        # ``_key`` is shared: a tuple only ever compared, and replaced whole (``ModelCluster._settle``)
        return new

    def note_change(self) -> None:
        part, seen = self.part, self._seen
        # ``part.view() != seen`` field by field: the view is built only for a change (run for every
        # partition in every round of a settle)
        if part.leader != seen.leader or part.leader_epoch != seen.leader_epoch or part.recovering != seen.recovering \
                or tuple(part.isr) != seen.isr or tuple(part.elr) != seen.elr:
            now = part.view()
            change = (seen, now)
            admitted = frozenset(self._admitted_since_seen) if self._admitted_since_seen else _NO_ADMISSION
            changes, admissions = self.changes, self.admitted
            if len(changes) > 1 and changes[-2] == change:
                # The same change as two changes ago (an ISR that shrinks and grows back, again): its
                # entries are shared (immutable). A history of many partitions is most of the heap,
                # and every full collection of the garbage collector walks all of it (issue 27, speed).
                change = changes[-2]
                now = change[1]
                if admissions[-2] == admitted:
                    admitted = admissions[-2]
            changes.append(change)
            admissions.append(admitted)
            self._seen = now
        self._admitted_since_seen.clear()
