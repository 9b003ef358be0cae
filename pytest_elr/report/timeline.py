"""A run's events turned into drawable things on one x axis: bands, intervals, marks, ticks.

The x axis is wall time when the run lasted long enough for time to mean something (a real
cluster: tens of seconds), else the event's index in the history: a model run does everything
in about a millisecond, so wall time would only show the interpreter's jitter, while the index
spreads the steps out in the order the checker reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_elr.actions import action_from_event

#: runs shorter than this are drawn by event index
TIME_AXIS_MIN_SPAN_S = 1.0

AxisMode = Literal["auto", "time", "events"]


@dataclass
class Step:
    name: str
    x0: float
    x1: float
    note: str = ""


@dataclass
class Band:
    broker: int
    x0: float
    x1: float
    role: str  # leader | isr | elr | lkelr | out
    fenced: bool
    tip: str


@dataclass
class Interval:
    x0: float
    x1: float
    kind: str  # down | paused | net
    label: str
    broker: int | None = None


@dataclass
class Mark:
    x: float
    kind: str  # fault | violation | disagreement | loss | error
    label: str
    tip: str
    broker: int | None = None


@dataclass
class Tick:
    x: float
    kind: str  # ok | weak | fail | info | lost | read
    tip: str


@dataclass
class Timeline:
    mode: Literal["time", "events"]
    lo: float
    hi: float
    brokers: list[int]
    steps: list[Step] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    intervals: list[Interval] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)
    hwm: list[tuple[float, int | None]] = field(default_factory=list)


def build_timeline(events: Sequence[dict[str, Any]], lost_values: set[str], mode: AxisMode = "auto") -> Timeline:
    span = float(events[-1]["t"]) - float(events[0]["t"]) if events else 0.0
    if mode == "auto":
        mode = "time" if span >= TIME_AXIS_MIN_SPAN_S else "events"
    xs = [float(e["t"]) for e in events] if mode == "time" else _event_positions(events)
    lo = 0.0 if mode == "time" else -0.5
    hi = max(xs[-1] if xs else 1.0, lo + 1.0) + (0.0 if mode == "time" else 0.5)  # room for the last event
    tl = Timeline(mode=mode, lo=lo, hi=hi, brokers=_brokers(events))
    _steps(tl, events, xs)
    _membership(tl, events, xs)
    _faults(tl, events, xs)
    _records(tl, events, xs, lost_values)
    return tl


def _event_positions(events: Sequence[dict[str, Any]]) -> list[float]:
    """Event index, skipping sends that are answered later: their answer is the tick that counts,
    and a burst of a thousand sends would otherwise take half the width."""
    answered = _answered(events)
    xs, k = [], 0
    for e in events:
        xs.append(float(k))
        k += not (e["type"] == "produce" and e.get("op") == "invoke" and e.get("id") in answered)
    return xs


def _answered(events: Sequence[dict[str, Any]]) -> set[Any]:
    return {e.get("id") for e in events if e["type"] == "produce" and e.get("op") != "invoke"}


def _ints(values: Iterable[Any]) -> list[int]:
    return [v for v in values if isinstance(v, int) and not isinstance(v, bool)]


def _brokers(events: Sequence[dict[str, Any]]) -> list[int]:
    ids: set[int] = set()
    for e in events:
        if e["type"] == "observe":
            ids.update(_ints([e.get("leader")]))
            for key in ("isr", "elr", "last_known_elr", "fenced"):
                ids.update(_ints(e.get(key) or []))
            ids.update(int(k) for k in (e.get("leo") or {}) if str(k).lstrip("-").isdigit())
        elif e["type"] == "fault":
            ids.update(_targets(e.get("args") or {}))
    return sorted(ids)


def _targets(args: dict[str, Any]) -> list[int]:
    ids = _ints([args.get("broker")]) + _ints(args.get("brokers") or [])
    for link in args.get("links") or []:
        ids += _ints(link)
    return ids


def _steps(tl: Timeline, events: Sequence[dict[str, Any]], xs: list[float]) -> None:
    open_steps: dict[str, Step] = {}
    for e, x in zip(events, xs, strict=True):
        if e["type"] != "step" or not e.get("step"):
            continue
        name = str(e["step"])
        if e.get("phase") == "begin":
            open_steps[name] = Step(name, x, tl.hi, str(e.get("note") or ""))
            tl.steps.append(open_steps[name])
        elif name in open_steps:
            open_steps.pop(name).x1 = x


def _role(broker: int, e: dict[str, Any]) -> str:
    if e.get("leader") == broker:
        return "leader"
    for key, role in (("isr", "isr"), ("elr", "elr"), ("last_known_elr", "lkelr")):
        if broker in (e.get(key) or []):
            return role
    return "out"


def _membership(tl: Timeline, events: Sequence[dict[str, Any]], xs: list[float]) -> None:
    observed = [(x, e) for e, x in zip(events, xs, strict=True) if e["type"] == "observe"]
    current: dict[int, Band] = {}
    for i, (x, e) in enumerate(observed):
        x1 = observed[i + 1][0] if i + 1 < len(observed) else tl.hi
        tl.hwm.append((x, e.get("hwm") if isinstance(e.get("hwm"), int) else None))
        leo = e.get("leo") or {}
        for b in tl.brokers:
            role, fenced = _role(b, e), b in (e.get("fenced") or [])
            band = current.get(b)
            if band is not None and (band.role, band.fenced) == (role, fenced):
                band.x1 = x1  # one band per state change, not per observation
                continue
            tip = (f"broker {b}: {role}{', fenced' if fenced else ''} · epoch {e.get('leader_epoch')} · "
                   f"LEO {leo.get(str(b), '?')} · HWM {e.get('hwm')} · ISR {e.get('isr')} ELR {e.get('elr')}")
            current[b] = Band(b, x, x1, role, fenced, tip)
            tl.bands.append(current[b])


def _link_label(links: Iterable[Any]) -> str:
    pairs: dict[tuple[str, str], None] = {}
    for link in links:
        a, b = (("ctl" if n == "controller" else str(n).replace("controller:", "ctl ")) for n in link)
        pairs[(min(a, b), max(a, b))] = None
    return " ".join(f"{a}↔{b}" for a, b in pairs)


def _fault_label(action: str, args: dict[str, Any]) -> str:
    if "links" in args:
        return f"{action} {_link_label(args['links'] or [])}" if args["links"] else f"{action} all"
    ids = _targets(args)
    return f"{action} {','.join(map(str, ids))}" if ids else action


def _faults(tl: Timeline, events: Sequence[dict[str, Any]], xs: list[float]) -> None:
    stopped: dict[int, Interval] = {}  # open down/paused intervals; closed ones stay in tl.intervals
    net: list[tuple[Interval, set[tuple[Any, Any]]]] = []
    for e, x in zip(events, xs, strict=True):
        kind = e["type"]
        if kind == "fault":
            action, args = str(e.get("action")), e.get("args") or {}
            label = _fault_label(action, args)
            tl.marks.append(Mark(x, "fault", label, f"{e.get('step')}: {action} {args}"))
            what = action_from_event(e)  # None: an action this version does not know (a mark only)
            for b, state in (what.transitions() if what is not None else {}).items():
                if state == "up" and b in stopped:
                    stopped.pop(b).x1 = x
                elif state != "up" and b not in stopped:
                    stopped[b] = Interval(x, tl.hi, state, f"{action} {b}", b)
                    tl.intervals.append(stopped[b])
            if what is not None and what.draw == "net":
                links = {tuple(link) for link in args.get("links") or []}
                net.append((Interval(x, tl.hi, "net", label), links))
            elif what is not None and what.draw == "heal":
                healed = {tuple(link) for link in args.get("links") or []}
                for interval, links in net:
                    if interval.x1 == tl.hi and links:
                        links -= healed if args.get("links") else set(links)
                        if not links:
                            interval.x1 = x
        elif kind == "loss_evidence" and not e.get("proof"):  # (a proof by presence is listed, not drawn)
            n, broker = e.get("records_lost"), _ints([e.get("broker")])
            tip = (f"broker {e.get('broker')} log shrank: LEO {e.get('leo_before')} → {e.get('leo_after')}"
                   + (f", {e.get('leo_restart')} at restart" if e.get("leo_restart") is not None else ""))
            label = f"−{n}" if n else ("−0" if n == 0 else "lost ?")
            tl.marks.append(Mark(x, "loss", label, tip, broker[0] if broker else None))
        elif kind in ("violation", "disagreement", "model_error", "backend_error", "scenario_error"):
            text = e.get("message") or e.get("differences") or kind
            tl.marks.append(Mark(x, "error" if kind.endswith("error") else kind, kind.replace("_", " "),
                                 f"{e.get('step')}: {text}"))
    tl.intervals += [interval for interval, _ in net]
    tl.intervals.sort(key=lambda i: i.x0)


def _records(tl: Timeline, events: Sequence[dict[str, Any]], xs: list[float], lost_values: set[str]) -> None:
    answered = _answered(events)
    for e, x in zip(events, xs, strict=True):
        if e["type"] == "produce" and e.get("op") == "invoke" and e.get("id") not in answered:
            # acks=0 never hears back, and a crash cuts sends short: they show as sent, outcome unknown
            tl.ticks.append(Tick(x, "info", f"{e.get('value')} acks={e.get('acks')} sent, no answer"))
        elif e["type"] == "produce" and e.get("op") != "invoke":
            op, value = e.get("op"), e.get("value")
            if op == "ok":
                strong = e.get("acks") in ("all", "-1")
                kind = "lost" if strong and value in lost_values else ("ok" if strong else "weak")
            else:
                kind = "fail" if op == "fail" else "info"
            tip = f"{value}" + (f"@{e['offset']}" if e.get("offset") is not None else "")
            tip += f" acks={e.get('acks')} {op}" + (f" {e['error']}" if e.get("error") else "")
            tl.ticks.append(Tick(x, kind, tip + (" · LOST: acknowledged, never read" if kind == "lost" else "")))
        elif e["type"] == "consume":
            tl.ticks.append(Tick(x, "read", f"{e.get('value')}@{e.get('offset')} read by {e.get('reader')}"))
