"""The run history: every step, fault, observation, produce and read, as data.

Written as JSON Lines (schema ``pytest-elr/history/1``, see docs/history.md) when a directory
is given, and always kept in memory so the verdict can be computed without touching disk.
:class:`History` writes a run directory, :class:`Run` reads one back.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from pytest_elr.core import columnar
from pytest_elr.core.observation import LossEvidence

SCHEMA = "pytest-elr/history/1"
#: a run directory holds these files (docs/history.md); the verdict only once a checker judged the run
EVENTS_FILE = "events.jsonl"
META_FILE = "meta.json"
VERDICT_FILE = "verdict.json"

#: every event type a history holds, and what one records (docs/history.md)
EVENT_TYPES: dict[str, str] = {
    "step": "a scenario step begins or ends",
    "fault": "a fault injected (any action but produce)",
    "observe": "the partition's state as the system reports it",
    "loss_evidence": "what a lossy shutdown took from its victim",
    "disagreement": "a real cluster did not reach the model's state after a fault",
    "declared_difference": "a difference from the model that the step or the profile declares, with its reason",
    "start_settled": "the run's start waited (over a second) for the system to agree with the model's start, "
                     "or never did within the settle timeout (differs)",
    "known_failure_rested": "at a step its release's known failure declares, the system rested in a state that "
                            "differs only as declared, and the wait for the model's state ended",
    "kip_departure": "the profile's rules did what KIP-966 would not (a documented difference), first time in the run",
    "alternatives": "the model allowed several states after a fault (timing decides) and kept those the system fits",
    "violation": "an invariant broken after a step",
    "model_error": "the shadow model could not apply an action the real cluster took",
    "refused": "the controller refused an operator request (reassign, cancel_reassignment), with its error code",
    "backend_error": "the backend failed to close (a cluster that could not heal)",
    "scenario_error": "a step the scenario wrote could not be done when it ran (a symbolic target naming no "
                      "broker, or one in the wrong state): an error of the scenario, not a finding",
    "registration_miss": "no controller's metadata log held a record of the observed state, and why "
                         "(the partition epoch and LeaderRecoveryState are then unknown)",
    "election_counts": "the system's election counters (Kafka's controller meters), read at the start and "
                       "where a step names elr_elections or unclean_elections",
    "lag_churn": "where a partition epoch moved and the model's did not: the leader's logged ISR shrinks since "
                 "the last settle, each judged by Kafka's lag rule (read once per epoch seen)",
    "refusals": "a step's AlterPartition refusals, the system's beside the model's, where they differ "
                "(measured, not judged)",
    "produce": "a send, and its completion",
    "consume": "a record read",
    "hwm_read": "a reader's view of the high watermark",
}
#: fields an event of a type must carry (beyond ``t`` and ``type``) to be usable
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "step": ("phase",),
    "fault": ("action",),
    "loss_evidence": ("broker",),
    "produce": ("op", "id", "value"),
    "consume": ("partition", "offset", "value", "reader"),
    "hwm_read": ("partition", "hwm", "reader"),
}


@dataclass
class History:
    meta: dict[str, Any]
    directory: Path | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    step: str | None = None
    _t0: float = field(default_factory=time.monotonic)
    _out: IO[str] | None = None
    _next_id: int = 0
    # A background producer records from its own thread: clock, list and file move together.
    _lock: threading.RLock = field(default_factory=threading.RLock)

    @classmethod
    def create(cls, root: Path | None, **meta: Any) -> History:
        run_id = f"{slug(meta.get('scenario', 'run'))}-{slug(meta.get('profile', ''))}-{uuid.uuid4().hex[:8]}"
        meta = {"schema": SCHEMA, "run_id": run_id, "started_at": _now(), "finished_at": None,
                "outcome": None, **meta}
        history = cls(meta=meta)
        if root is not None:
            history.directory = Path(root) / run_id  # a slug: never outside root, whatever the name
            history.directory.mkdir(parents=True, exist_ok=True)
            history._out = (history.directory / EVENTS_FILE).open("w", encoding="utf-8")
            history._write_meta()
        return history

    def record(self, type_: str, **fields: Any) -> dict[str, Any]:
        with self._lock:
            event = {"t": round(time.monotonic() - self._t0, 6), "type": type_, "step": self.step, **fields}
            self.events.append(event)
            if self._out is not None:
                self._out.write(json.dumps(event, separators=(",", ":")) + "\n")
            return event

    def new_id(self) -> int:
        with self._lock:
            self._next_id += 1
            return self._next_id

    def end_events(self) -> None:
        """Close the events file so a checker can read it whole; ``record`` still keeps events."""
        with self._lock:
            self._end_events()

    def _end_events(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
            self._write_meta()

    def close(self, outcome: str) -> None:
        self.meta["finished_at"] = _now()
        self.meta["outcome"] = outcome
        self.end_events()
        if self.directory is not None:
            self._write_meta()
            # a large history also gets its columnar copy, which the checker reads faster; made
            # while the next run goes on (a soak's 1 M records take ~8 s of pyarrow)
            columnar.write_later(self.directory / EVENTS_FILE)

    def _write_meta(self) -> None:
        assert self.directory is not None
        (self.directory / META_FILE).write_text(json.dumps(self.meta, indent=2) + "\n")


def slug(text: object, limit: int = 60) -> str:
    """A safe file-name part: letters, digits, ``.``, ``_``, ``-`` only, never ``.`` or ``..``."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip(".-")[:limit]
    return slug or "run"
@dataclass
class Run:
    """A run directory read back: its meta.json and its events.

    Lenient on purpose: a report is most wanted for the run that crashed mid-write, so a line that
    is not a usable event (not JSON, an unknown type, a required field missing) is counted in
    ``malformed`` and skipped, and a missing or broken meta.json leaves ``meta`` empty.
    """

    path: Path
    meta: dict[str, Any]
    events: list[dict[str, Any]]
    malformed: int = 0

    @classmethod
    def read(cls, path: Path) -> Run:
        path = Path(path)
        events, malformed = _read_events(path / EVENTS_FILE)
        return cls(path=path, meta=read_meta(path), events=events, malformed=malformed)

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.path.name)

    @property
    def outcome(self) -> str:
        """passed | failed | error, or unfinished: no outcome written (still running, or crashed)."""
        return str(self.meta.get("outcome") or "unfinished")

    @property
    def duration_s(self) -> float:
        return float(self.events[-1]["t"]) if self.events else 0.0

    @property
    def losses(self) -> list[LossEvidence]:
        # A proof of loss by presence is an event of the same type about records, not a fault's victim.
        return [LossEvidence.from_event(e) for e in self.events
                if e["type"] == "loss_evidence" and not e.get("proof")]


def read_meta(path: Path) -> dict[str, Any]:
    """A run directory's meta.json, or ``{}`` when it is missing or broken."""
    try:
        meta = json.loads((Path(path) / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _read_events(file: Path) -> tuple[list[dict[str, Any]], int]:
    events: list[dict[str, Any]] = []
    malformed = 0
    with file.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                malformed += 1
                continue
            kind = event.get("type") if isinstance(event, dict) else None
            if not isinstance(kind, str) or kind not in EVENT_TYPES or any(
                    event.get(key) is None for key in REQUIRED_FIELDS.get(kind, ())):
                malformed += 1
                continue
            if not isinstance(event.get("t"), (int, float)):
                event["t"] = events[-1]["t"] if events else 0.0  # keep order: a timeline needs a number
            events.append(event)
    return events, malformed


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
