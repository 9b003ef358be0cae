"""The run history: every step, fault, observation, produce and read, as data.

Written as JSON Lines (schema ``pytest-elr/history/1``, see docs/history.md) when a directory
is given, and always kept in memory so the verdict can be computed without touching disk.
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

SCHEMA = "pytest-elr/history/1"
#: one run directory holds these two files (docs/history.md)
EVENTS_FILE = "events.jsonl"
META_FILE = "meta.json"


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

    def _write_meta(self) -> None:
        assert self.directory is not None
        (self.directory / META_FILE).write_text(json.dumps(self.meta, indent=2) + "\n")


def slug(text: object, limit: int = 60) -> str:
    """A safe file-name part: letters, digits, ``.``, ``_``, ``-`` only, never ``.`` or ``..``."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip(".-")[:limit]
    return slug or "run"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
