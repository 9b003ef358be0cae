"""The vocabulary shared by the scenario language, the model and every backend.

An action is plain data. The YAML loader builds them, the Python API builds them, and each
backend interprets them (the model in-process, the kafka backend against containers).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from pytest_elr.core.nodes import Link

Acks = Literal["all", "1", "0"]


@dataclass(frozen=True)
class Action:
    """Base class; ``kind`` is the name used in the language and in histories."""

    kind = "action"

    def describe(self) -> dict[str, object]:
        return {"action": self.kind, "args": asdict(self)}


# --- network -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cut(Action):
    """Black-hole the given directed links (requests sent on them never arrive)."""

    links: tuple[Link, ...]
    kind = "cut"


@dataclass(frozen=True)
class Slow(Action):
    """Delay the links beyond ``replica.lag.time.max.ms`` but within the broker session
    timeout: a follower fetching over it falls out of the ISR; a broker's requests to the
    controller are held (delivered when healed) while it stays unfenced."""

    links: tuple[Link, ...]
    latency_ms: int = 5000
    kind = "slow"


@dataclass(frozen=True)
class Heal(Action):
    """Restore the given links, or every link when ``links`` is None."""

    links: tuple[Link, ...] | None = None
    kind = "heal"


# --- processes and disks -------------------------------------------------------------------


@dataclass(frozen=True)
class Shutdown(Action):
    """Clean shutdown: controlled shutdown, logs flushed, clean-shutdown marker written."""

    broker: int
    kind = "shutdown"


@dataclass(frozen=True)
class Crash(Action):
    """The broker process dies (SIGKILL). Unclean, but nothing is lost: the page cache lives."""

    broker: int
    kind = "crash"


@dataclass(frozen=True)
class PowerOff(Action):
    """Lossy unclean shutdown of one or more brokers at once: unsynced data is gone."""

    brokers: tuple[int, ...]
    kind = "power_off"


@dataclass(frozen=True)
class Restart(Action):
    """Start a stopped broker again on whatever its disk holds."""

    broker: int
    kind = "restart"


@dataclass(frozen=True)
class ReplaceDisk(Action):
    """Stop the broker uncleanly and bring it back with an empty log dir (KIP-903)."""

    broker: int
    kind = "replace_disk"


@dataclass(frozen=True)
class Pause(Action):
    """SIGSTOP: the broker stops answering anyone but keeps its state."""

    broker: int
    kind = "pause"


@dataclass(frozen=True)
class Resume(Action):
    broker: int
    kind = "resume"


@dataclass(frozen=True)
class Flush(Action):
    """fsync everything the broker has written so far."""

    broker: int
    kind = "flush"


# --- workload and configuration ------------------------------------------------------------


@dataclass(frozen=True)
class Produce(Action):
    count: int
    acks: Acks = "all"
    kind = "produce"


@dataclass(frozen=True)
class SetMinIsr(Action):
    value: int
    kind = "set_min_isr"


@dataclass(frozen=True)
class Wait(Action):
    seconds: float
    kind = "wait"


BROKER_ACTIONS: dict[str, type[Action]] = {
    cls.kind: cls for cls in (Shutdown, Crash, Restart, ReplaceDisk, Pause, Resume, Flush)
}


def brokers_named(action: Action) -> tuple[int, ...]:
    """Every broker id an action refers to (for validation against the cluster)."""
    ids: list[int] = []
    broker = getattr(action, "broker", None)
    if isinstance(broker, int):
        ids.append(broker)
    ids += list(getattr(action, "brokers", ()) or ())
    for link in getattr(action, "links", None) or ():
        ids += [n for n in link if isinstance(n, int)]
    return tuple(ids)
