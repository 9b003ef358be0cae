"""Protocol states reached, as small tuples that tell the interesting regions apart.

A state is (leader role, |ISR| against min ISR, |ELR|, |LastKnownELR|, fenced replicas, lossy
history): e.g. ``("none", "below", 2, 1, 1, True)`` is a leaderless partition whose ISR is under
min ISR, with two ELR members, one last known leader, one fenced replica, after a lossy shutdown.
The same function reads the model's states and the cluster's observations, so the two sets compare.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

State = tuple[str, str, int, int, int, bool]


def state_of(obs: Mapping[str, Any], min_isr: int, lossy: bool) -> State:
    """The state of one observation (an ``observe`` event, or an Observation's ``as_event()``)."""
    isr = list(obs.get("isr") or [])
    leader = obs.get("leader")
    role = "none" if leader is None or leader < 0 else ("in-isr" if leader in isr else "outside-isr")
    size = "below" if len(isr) < min_isr else ("at" if len(isr) == min_isr else "above")
    return (role, size, len(obs.get("elr") or []), len(obs.get("last_known_elr") or []),
            len(obs.get("fenced") or []), lossy)


def states_of_events(events: Iterable[Mapping[str, Any]], min_isr: int) -> set[State]:
    """Every state a run's history shows, its lossy flag set from the first lossy shutdown on."""
    lossy = False
    out: set[State] = set()
    for e in events:
        if e.get("type") == "fault" and e.get("action") in ("power_off", "replace_disk"):
            lossy = True
        elif e.get("type") == "observe":
            out.add(state_of(e, min_isr, lossy))
    return out


def describe(state: State) -> str:
    role, size, elr, lke, fenced, lossy = state
    return (f"leader {role}, ISR {size} min ISR, ELR {elr}, LastKnownELR {lke}, fenced {fenced}"
            + (", after a lossy shutdown" if lossy else ""))
