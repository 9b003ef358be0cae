"""A run on a topic of several partitions: a grid of partitions x steps, each partition's records at
stake, and each partition's own timeline on demand (``<details>``, no script).

The grid's cell is the partition's state as the last observation of that step read it (its colour:
leaderless, ELR held, ISR under min ISR, ISR shrunk, whole; its glyph: the leader and the ISR and ELR
sizes) with a red outline where the step found something in that partition (a disagreement with the
model, a broken invariant, an expectation not met) and a red underline where acks=all records
acknowledged in that step were lost. Its tooltip is the cell's whole state. The records at stake per
partition are the checker's (``Verdict.partitions``): the report counts nothing itself.

Bounded at 1000 partitions (the language's maximum): the grid costs one small cell per partition and
step, and at most ``MAX_TIMELINES`` partitions get a drawn timeline (those with a finding first).
A one-partition run gets none of this: its section is as it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from pytest_elr.checker.verdict import Verdict
from pytest_elr.core.history import Run
from pytest_elr.report.svg import COLOURS, render
from pytest_elr.report.timeline import AxisMode, build_timeline

#: partitions whose timeline is drawn, at most (those with a finding first, then by number)
MAX_TIMELINES = 50
#: partitions linked from the summary line, at most per kind
MAX_LINKS = 20
#: a finding's partition when its words begin with one (``partition 3: ...``)
_PARTITION_PREFIX = re.compile(r"^partition (\d+): ")
#: the column of what happened before the first step
START = "start"

#: cell classes, worst first: what the colour says, and the legend's words
STATES = (("off", COLOURS["down"], "leaderless"), ("elr", COLOURS["elr"], "ELR not empty"),
          ("under", "#fdae61", "ISR under min ISR"), ("shrunk", COLOURS["isr"], "ISR short of the replicas"),
          ("whole", COLOURS["leader"], "ISR = the replicas"))

CSS = """
.partitions h3 { font-size:14px; margin:14px 0 4px; }
.partitions .psummary { margin:4px 0 6px; font-size:13px; } .partitions .psummary .bad { color:var(--bad); }
.pgrid { max-height:70vh; overflow:auto; border:1px solid var(--line); border-radius:6px; }
table.pgrid-t { border-collapse:separate; border-spacing:1px; font-size:11px; font-variant-numeric:tabular-nums; }
.pgrid-t th { position:sticky; top:0; background:#fff; color:var(--muted); font-weight:600; padding:2px 4px;
              white-space:nowrap; z-index:1; }
.pgrid-t th.p { position:sticky; left:0; z-index:2; } .pgrid-t tbody th.p { background:#fff; text-align:right; }
.pgrid-t td.num { text-align:right; padding:1px 5px; color:#374151; }
.pgrid-t td.num.lost.some { color:#fff; background:var(--bad); font-weight:700; border-radius:3px; }
.pgrid-t td.c { min-width:34px; text-align:center; padding:1px 3px; border-radius:3px; white-space:nowrap; }
.pgrid-t td.c small { font-size:9px; margin-left:1px; }
.pgrid-t td.off, .pgrid-t td.whole { color:#fff; } .pgrid-t td.none { color:var(--muted); background:#f3f4f6; }
.pgrid-t td.bad { box-shadow:inset 0 0 0 2px var(--bad); font-weight:700; }
.pgrid-t td.lostrec { border-bottom:3px solid var(--bad); }
.pgrid-t tr:target th.p { background:#fde68a; }
details.ptl { margin-top:4px; } details.ptl summary { color:#374151; }
details.ptl summary .bad { color:var(--bad); font-weight:700; }
""" + "".join(f".pgrid-t td.{cls} {{ background:{colour}; }}\n" for cls, colour, _ in STATES)


@dataclass
class Cell:
    state: dict[str, Any] | None = None
    findings: list[str] = field(default_factory=list)
    lost: int = 0


def partition_numbers(run: Run, verdict: Verdict | None) -> list[int]:
    """The topic's partitions the history and the verdict know of (``[0]``: one partition)."""
    seen = {0}
    for e in run.events:
        if e["type"] == "observe":
            seen.update(int(k) for k in e.get("partitions") or {} if str(k).isdigit())
            seen.add(_own(e))
        elif e["type"] in ("produce", "consume", "hwm_read") and isinstance(e.get("partition"), int):
            seen.add(e["partition"])
    if verdict is not None:
        seen.update(verdict.partitions)
    return sorted(seen)


def _column(step: Any) -> str:
    return START if step is None else str(step)


def _columns(events: Sequence[dict[str, Any]]) -> list[str]:
    """The grid's columns: each step (and the start, the finale) in the order the run met them."""
    cols: dict[str, None] = {}
    for e in events:
        is_column = e["type"] == "observe" or (e["type"] == "step" and e.get("phase") == "begin")
        if is_column and e.get("step") != "final":
            cols[_column(e.get("step"))] = None
    return list(cols)


def state_of(e: dict[str, Any], p: int) -> dict[str, Any] | None:
    """Partition ``p``'s fields in an observe event (the event's own are partition 0's, or those of
    the ``partition`` it names)."""
    if p == _own(e):
        return {k: v for k, v in e.items() if k != "partitions"}
    other = (e.get("partitions") or {}).get(str(p))
    return None if other is None else {**other, "t": e.get("t"), "type": "observe", "step": e.get("step")}


def _own(e: dict[str, Any]) -> int:
    """The partition an event's own fields are about (none named: 0)."""
    p = e.get("partition")
    return p if isinstance(p, int) and not isinstance(p, bool) else 0


def _partition_of(words: str, default: int | None = 0) -> tuple[int | None, str]:
    """The partition a finding's words begin with, and the words without it."""
    m = _PARTITION_PREFIX.match(words)
    return (int(m.group(1)), words[m.end():]) if m else (default, words)


def _findings(e: dict[str, Any]) -> Iterable[tuple[int | None, str]]:
    """(partition, words) of each finding an event holds; partition None: the run's, no one partition's."""
    kind = e["type"]
    if kind == "disagreement":
        for d in e.get("differences") or [e.get("field")]:
            _, words = _partition_of(str(d))
            yield int(e.get("partition") or 0), f"disagreement: {words}"
    elif kind == "violation":  # its ``partition``; a history written before it, in the words only
        p, words = _partition_of(str(e.get("message") or ""))
        yield (p if e.get("partition") is None else int(e["partition"])), f"invariant broken: {words}"
    elif kind == "step" and e.get("phase") == "end":
        for m in e.get("mismatches") or []:
            p, words = _partition_of(str(m))
            yield p, f"expected, not met: {words}"


def build_grid(run: Run, verdict: Verdict | None, parts: list[int]) -> tuple[list[str], dict[int, dict[str, Cell]]]:
    """Per partition and column, its cell: the last state observed, the findings, the lost records."""
    cols = _columns(run.events)
    grid: dict[int, dict[str, Cell]] = {p: {c: Cell() for c in cols} for p in parts}
    for e in run.events:
        col = _column(e.get("step"))
        if e["type"] == "observe" and col in cols:
            for p in parts:
                s = state_of(e, p)
                if s is not None:
                    grid[p][col].state = s
        else:
            for p, words in _findings(e):
                if p in grid and col in cols:
                    grid[p][col].findings.append(words)
    if verdict is not None and verdict.lost:
        lost = {value for value, _ in verdict.lost}
        for e in run.events:
            if e["type"] == "produce" and e.get("op") == "ok" and str(e.get("acks")) in ("all", "-1") \
                    and e.get("value") in lost:
                p, col = int(e.get("partition") or 0), _column(e.get("step"))
                if p in grid and col in cols:
                    grid[p][col].lost += 1
    return cols, grid


def cell_class(s: dict[str, Any], min_isr: int | None) -> str:
    """The state's colour class (``STATES``)."""
    isr, replicas = s.get("isr") or [], s.get("replicas")
    if s.get("leader") is None:
        return "off"
    if s.get("elr"):
        return "elr"
    if isinstance(min_isr, int) and len(isr) < min_isr:
        return "under"
    if replicas and len(isr) < len(replicas):
        return "shrunk"
    return "whole"


def _tip(p: int, col: str, cell: Cell) -> str:
    s = cell.state
    lines = [f"partition {p} · {col}: "]
    if s is None:
        lines[0] += "not observed"
    else:
        leader = s.get("leader")
        lines[0] += (f"leader {'none' if leader is None else leader} (epoch {s.get('leader_epoch')}) · "
                     f"ISR {s.get('isr')} · ELR {s.get('elr')} · LastKnownELR {s.get('last_known_elr')} · "
                     f"HWM {s.get('hwm')} · replicas {s.get('replicas')}")
        if s.get("fenced"):
            lines[0] += f" · fenced {s.get('fenced')}"
    lines += cell.findings
    if cell.lost:
        lines.append(f"{cell.lost} acks=all record{'s' * (cell.lost != 1)} acknowledged here, lost")
    return "\n".join(lines)


def _cell(p: int, col: str, cell: Cell, min_isr: int | None) -> str:
    s = cell.state
    classes = ["c", "none" if s is None else cell_class(s, min_isr)]
    if cell.findings:
        classes.append("bad")
    if cell.lost:
        classes.append("lostrec")
    if s is None:
        glyph = "·"
    else:
        leader = s.get("leader")
        sizes = str(len(s.get("isr") or [])) + (f"·{len(s['elr'])}" if s.get("elr") else "")
        glyph = f"{'–' if leader is None else escape(str(leader))}<small>{sizes}</small>"
    glyph += "!" if cell.findings else ""
    return (f'<td class="{" ".join(classes)}" data-step="{escape(col)}" title="{escape(_tip(p, col, cell))}">'
            f"{glyph}</td>")


def _counts(verdict: Verdict | None, p: int) -> tuple[str, str, str, bool]:
    c = verdict.partitions.get(p) if verdict is not None else None
    if c is None:
        return "—", "—", "—", False
    return str(c.get("acked", 0)), str(c.get("read", 0)), str(c.get("lost", 0)), bool(c.get("lost"))


def partition_events(events: Sequence[dict[str, Any]], wanted: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
    """The run as each partition of ``wanted`` saw it, in one pass: its observations (as partition
    0's fields), its records, the findings in it, and what belongs to the whole run (steps, faults,
    errors)."""
    out: dict[int, list[dict[str, Any]]] = {p: [] for p in wanted}
    for e in events:
        kind = e["type"]
        if kind == "observe":
            for p, mine in out.items():
                s = state_of(e, p)
                if s is not None:
                    mine.append(s)
            continue
        if kind in ("produce", "consume", "hwm_read", "disagreement"):
            p: int | None = int(e.get("partition") or 0)
        elif kind == "violation":  # its ``partition``; a history written before it, in the words only
            p = _partition_of(str(e.get("message") or ""))[0] if e.get("partition") is None else int(e["partition"])
        elif kind == "loss_evidence":  # a broker's log of one partition (a proof by presence: partition 0's row)
            p = int(e.get("partition") or 0)
        else:
            for mine in out.values():
                mine.append(e)
            continue
        if p in out:
            out[p].append(e)
    return out


def _anchor(anchor: str, p: int, what: str = "p") -> str:
    return f"{anchor}-{what}{p}"


def _links(anchor: str, ps: list[int]) -> str:
    shown = ", ".join(f'<a href="#{_anchor(anchor, p)}">{p}</a>' for p in ps[:MAX_LINKS])
    return shown + (f" and {len(ps) - MAX_LINKS} more" if len(ps) > MAX_LINKS else "")


def partitions_section(run: Run, verdict: Verdict | None, anchor: str, n: int, axis: AxisMode,
                       max_timelines: int = MAX_TIMELINES) -> str:
    """The grid, the records at stake and the timelines of a run of several partitions; "" for one."""
    parts = partition_numbers(run, verdict)
    if len(parts) < 2:
        return ""
    cols, grid = build_grid(run, verdict, parts)
    min_isr = run.meta.get("min_insync_replicas")
    found = [p for p in parts if any(c.findings for c in grid[p].values())]
    losing = [p for p in parts if _counts(verdict, p)[3] or any(c.lost for c in grid[p].values())]
    leaderless = [p for p in parts if any(c.state is not None and c.state.get("leader") is None
                                          for c in grid[p].values())]
    summary = [f"{len(parts)} partitions × {len(cols)} steps"]
    if found:
        summary.append(f'<span class="bad">a finding in {len(found)}</span>: {_links(anchor, found)}')
    if losing:
        summary.append(f'<span class="bad">acks=all records lost in {len(losing)}</span>: {_links(anchor, losing)}')
    if leaderless:
        summary.append(f"leaderless at some step: {len(leaderless)} ({_links(anchor, leaderless)})")
    if verdict is None:
        summary.append("not judged: no records counted")
    elif not verdict.partitions:
        summary.append("the checker's verdict has no count per partition (a verdict from before they were kept)")
    drawn = sorted(list(dict.fromkeys([*found, *losing, *leaderless, *parts]))[:max_timelines])
    drawn_set = set(drawn)
    heads = "".join(f'<th title="{escape(c)}">{escape(c)}</th>' for c in cols)
    rows = []
    for p in parts:
        acked, read, lost, some = _counts(verdict, p)
        cells = "".join(_cell(p, c, grid[p][c], min_isr) for c in cols)
        rows.append(f'<tr id="{_anchor(anchor, p)}" data-partition="{p}">'
                    + (f'<th class="p"><a href="#{_anchor(anchor, p, "tl")}">{p}</a></th>' if p in drawn_set
                       else f'<th class="p">{p}</th>') +
                    f'<td class="num acked">{acked}</td><td class="num read">{read}</td>'
                    f'<td class="num lost{" some" if some else ""}">{lost}</td>{cells}</tr>')
    legend = " ".join(f'<span><i style="background:{colour}"></i>{words}</span>' for _, colour, words in STATES)
    grid_html = (f'<p class="psummary">{" · ".join(summary)}</p>'
                 f'<div class="legend">{legend}<span><i style="background:#fff;box-shadow:inset 0 0 0 2px #d7191c">'
                 '</i>a finding at that step (!)</span><span><i style="background:#fff;border-bottom:3px solid '
                 '#d7191c"></i>acks=all records acknowledged there, lost</span><span class="axisnote">a cell: the '
                 "leader (– none) and the ISR size (·ELR size) at the step's end; hover for its whole state · "
                 "acked (acks=all), read, lost: the checker's count per partition</span></div>"
                 f'<div class="pgrid"><table class="pgrid-t"><thead><tr><th class="p">partition</th>'
                 f'<th title="acks=all records acknowledged">acked</th><th title="records read back">read</th>'
                 f'<th title="acknowledged with acks=all, never read">lost</th>{heads}</tr></thead>'
                 f'<tbody>{"".join(rows)}</tbody></table></div>')
    return ('<div class="partitions"><h3>Partitions</h3><p class="sub">the timeline above draws partition 0\'s '
            "replicas and every partition's records; below, each partition at the end of each step, and its own "
            f"timeline</p>{grid_html}"
            f"{_timelines(run, verdict, anchor, n, axis, parts, drawn, found)}</div>")


def _timelines(run: Run, verdict: Verdict | None, anchor: str, n: int, axis: AxisMode, parts: list[int],
               drawn: list[int], found: list[int]) -> str:
    lost_values = {value for value, _ in verdict.lost} if verdict is not None else set()
    out = []
    for p, events in partition_events(run.events, drawn).items():
        acked, read, lost, some = _counts(verdict, p)
        chart = render(build_timeline(events, lost_values, axis), f"r{n}p{p}") if events else "<p>no events</p>"
        flag = ' <span class="bad">finding</span>' if p in found else ""
        out.append(f'<details class="ptl" id="{_anchor(anchor, p, "tl")}" data-partition="{p}"><summary>partition '
                   f'{p} · acked {acked} · read {read} · lost <span class="{"bad" if some else ""}">{lost}</span>'
                   f'{flag}</summary><div class="chart">{chart}</div></details>')
    note = ""
    if len(drawn) < len(parts):
        note = (f'<p class="sub">timelines of {len(drawn)} of {len(parts)} partitions: those with a finding, lost '
                "records or no leader first, then by number (the grid's tooltips hold every partition's state at "
                "every step)</p>")
    return f"<h3>Timeline per partition</h3>{note}{''.join(out)}"
