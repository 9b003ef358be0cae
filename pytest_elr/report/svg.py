"""Draw a :class:`~.timeline.Timeline` as one inline SVG.

Hand-written SVG, not matplotlib: the picture is a handful of rectangles, lines and labels, which
string formatting makes in well under a millisecond per run, with no dependency (matplotlib pulls
numpy and pillow and costs ~1 s to import plus ~0.1-0.3 s per figure), and the result keeps what
a figure library flattens: text that can be selected and searched, a tooltip (``<title>``) on
every band, tick and fault, and colours shared with the page's CSS legend.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from html import escape

from pytest_elr.report.timeline import Band, Interval, Mark, Tick, Timeline

WIDTH = 1160
GUTTER = 112  # the row names
RIGHT = 16
PLOT = WIDTH - GUTTER - RIGHT
FONT = 11
CHAR_W = FONT * 0.6  # a sans-serif character's width, near enough to pack labels

COLOURS = {
    "leader": "#1b7837", "isr": "#7fbf7b", "elr": "#f1a340", "lkelr": "#998ec3", "out": "#e8e8e8",
    "ok": "#2166ac", "weak": "#6baed6", "fail": "#c51b7d", "info": "#9e9e9e", "lost": "#d7191c",
    "read": "#35978f", "fault": "#8c2d04", "net": "#fdd0a2", "down": "#404040", "paused": "#8a8a8a",
    "violation": "#d7191c", "disagreement": "#e66101", "error": "#d7191c", "loss": "#d7191c", "hwm": "#253494",
}
SHORT_NAMES = {"leader": "L", "isr": "", "elr": "E", "lkelr": "K", "out": ""}
ROLE_NAMES = {"leader": "leader", "isr": "ISR", "elr": "ELR", "lkelr": "LastKnownELR", "out": "out"}


class _Canvas:
    def __init__(self, tl: Timeline, uid: str):
        self.tl, self.uid = tl, uid
        self.parts: list[str] = []

    def x(self, value: float) -> float:
        tl = self.tl
        return round(GUTTER + (value - tl.lo) / (tl.hi - tl.lo) * PLOT, 2)

    def add(self, text: str) -> None:
        self.parts.append(text)

    def text(self, x: float, y: float, s: str, cls: str = "", anchor: str = "start") -> None:
        a = "" if anchor == "start" else f' text-anchor="{anchor}"'
        c = f' class="{cls}"' if cls else ""
        self.add(f'<text x="{x:.1f}" y="{y:.1f}"{a}{c}>{escape(s)}</text>')

    def rect(self, x0: float, y: float, x1: float, h: float, fill: str, tip: str = "", extra: str = "") -> None:
        title = f"<title>{escape(tip)}</title>" if tip else ""
        w = max(x1 - x0, 0.8)
        self.add(f'<rect x="{x0:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}"{extra}>{title}</rect>')

    def row_name(self, y: float, h: float, name: str) -> None:
        self.text(GUTTER - 8, y + h / 2 + FONT * 0.35, name, "rowname", "end")


def _label_x(x: float, label: str, pad: float = 2) -> float:
    """Where a label starting at ``x`` goes so that it ends inside the plot."""
    return min(x + pad, GUTTER + PLOT - len(label) * CHAR_W)


def _pack(spans: Iterable[tuple[float, float]], rows: int) -> list[int | None]:
    """Greedy lanes for labels sorted by start: the first row where it fits, None when none does."""
    ends: list[float] = []
    placed: list[int | None] = []
    for x0, x1 in spans:
        row = next((r for r, end in enumerate(ends) if x0 >= end), None)
        if row is None and len(ends) < rows:
            ends.append(0.0)
            row = len(ends) - 1
        if row is not None:
            ends[row] = x1 + 6
        placed.append(row)
    return placed


def _nice_step(span: float, target: int = 10) -> float:
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def render(tl: Timeline, uid: str) -> str:
    c = _Canvas(tl, uid)
    y = 4.0
    y_top = y
    # -- steps: alternating shade behind everything, names staggered over two rows
    step_spans = [(_label_x(c.x(s.x0), s.name), _label_x(c.x(s.x0), s.name) + len(s.name) * CHAR_W + 4)
                  for s in tl.steps]
    step_rows = _pack(step_spans, 2)
    steps_h = 16.0 * (max((r for r in step_rows if r is not None), default=0) + 1) + 4
    shade_at = len(c.parts)  # the shading goes in once the chart's height is known
    c.row_name(y, steps_h, "step")
    for s, row in zip(tl.steps, step_rows, strict=True):
        note = f" — {s.note}" if s.note else ""
        if row is not None:
            c.add(f'<g class="step"><title>{escape(s.name + note)}</title>')
            c.text(_label_x(c.x(s.x0), s.name), y + 12 + 16 * row, s.name, "steplabel")
            c.add("</g>")
    y += steps_h
    # -- faults and findings: a marker, a dashed line down through the lanes, a packed label
    marks = [m for m in tl.marks if m.kind != "loss"]
    mark_rows = _pack(((_label_x(c.x(m.x), m.label), _label_x(c.x(m.x), m.label) + len(m.label) * CHAR_W + 8)
                       for m in marks), 3)
    faults_h = 15.0 * (max((r for r in mark_rows if r is not None), default=0) + 1) + 8
    if marks:
        c.row_name(y, faults_h, "faults")
    y_faults = y
    y += faults_h if marks else 0
    # -- network faults as intervals, stacked when they overlap
    net = [i for i in tl.intervals if i.kind == "net"]
    net_rows = _pack(((c.x(i.x0), c.x(i.x1)) for i in net), 4)
    net_h = 14.0 * (max((r for r in net_rows if r is not None), default=0) + 1) + 4 if net else 0.0
    if net:
        c.row_name(y, net_h, "network")
        for i, row in zip(net, net_rows, strict=True):
            _net_interval(c, i, y + 2 + 14 * (row or 0))
    y += net_h
    # -- one lane per broker
    lane_h, lane_gap = 22.0, 5.0
    lane_y = {b: y + n * (lane_h + lane_gap) for n, b in enumerate(tl.brokers)}
    for b, ly in lane_y.items():
        c.row_name(ly, lane_h, f"broker {b}")
        c.rect(GUTTER, ly, GUTTER + PLOT, lane_h, "#f6f6f6")
    losses = [(m.broker, c.x(m.x), len(m.label) * CHAR_W + 16) for m in tl.marks if m.kind == "loss"]
    for band in tl.bands:
        x0 = c.x(band.x0)
        skip = max((w + x - x0 for b, x, w in losses if b == band.broker and -6 <= x - x0 <= 40), default=0.0)
        _band(c, band, lane_y[band.broker], lane_h, skip)
    for i in tl.intervals:
        if i.broker is not None and i.broker in lane_y:
            _down(c, i, lane_y[i.broker], lane_h)
    y += len(tl.brokers) * (lane_h + lane_gap)
    lanes_bottom = y - lane_gap
    for m in tl.marks:
        if m.kind == "loss" and m.broker in lane_y:
            _loss(c, m, lane_y[m.broker], lane_h)
    # the faults' markers go over the lanes, their labels in the faults row
    for m, row in zip(marks, mark_rows, strict=True):
        _mark(c, m, row, y_faults, faults_h, lanes_bottom)
    # -- records: acknowledgements and failures, then reads
    y += 2
    c.row_name(y, 24, "produce")
    c.rect(GUTTER, y + 12, GUTTER + PLOT, 0.6, "#bbb")
    _ticks(c, [t for t in tl.ticks if t.kind != "read"], y, 24)
    y += 28
    reads = [t for t in tl.ticks if t.kind == "read"]
    c.row_name(y, 12, "read")
    _ticks(c, reads, y, 12)
    y += 18
    # -- high watermark
    hwm_h = 56.0
    c.row_name(y, hwm_h, "HWM")
    _hwm(c, tl, y, hwm_h)
    y += hwm_h + 4
    chart_bottom = y
    # -- axis
    _axis(c, tl, y)
    y += 30
    shade = [f'<rect x="{GUTTER}" y="{y_top:.1f}" width="{PLOT}" height="{chart_bottom - y_top:.1f}" fill="#fff"/>']
    for n, s in enumerate(tl.steps):
        if n % 2 == 0:
            shade.append(f'<rect x="{c.x(s.x0):.1f}" y="{y_top:.1f}" width="{max(c.x(s.x1) - c.x(s.x0), 0.5):.1f}" '
                         f'height="{chart_bottom - y_top:.1f}" fill="#eef2f7"/>')
    c.parts[shade_at:shade_at] = shade
    defs = (f'<defs><pattern id="fenced-{uid}" width="6" height="6" patternUnits="userSpaceOnUse" '
            f'patternTransform="rotate(45)"><rect width="2.2" height="6" fill="#222" fill-opacity="0.55"/></pattern>'
            f'</defs>')
    return (f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {y:.0f}" '
            f'width="{WIDTH}" height="{y:.0f}" role="img" font-size="{FONT}" data-mode="{tl.mode}">'
            + defs + "".join(c.parts) + "</svg>")


def _band(c: _Canvas, band: Band, y: float, h: float, skip: float = 0.0) -> None:
    x0, x1 = c.x(band.x0), c.x(band.x1)
    c.add(f'<g class="band role-{band.role}">')
    c.rect(x0, y, x1, h, COLOURS[band.role], band.tip)
    if band.fenced:
        c.rect(x0, y, x1, h, f"url(#fenced-{c.uid})", band.tip)
    label = ROLE_NAMES[band.role] + (" · fenced" if band.fenced else "")
    if band.role == "out" and not band.fenced:
        label = ""
    elif (x1 - x0 - skip) < len(label) * CHAR_W + 6:
        label = SHORT_NAMES[band.role] if (x1 - x0 - skip) > 12 else ""  # a narrow band keeps an initial
    if label:
        c.text(x0 + 4 + skip, y + h / 2 + 4, label, "bandlabel" + (" dark" if band.role == "leader" else ""))
    c.add("</g>")


def _down(c: _Canvas, i: Interval, y: float, h: float) -> None:
    x0, x1 = c.x(i.x0), c.x(i.x1)
    c.rect(x0, y + h - 5, x1, 5, COLOURS[i.kind], f"broker {i.broker} {i.kind} ({i.label})", ' class="down"')


def _net_interval(c: _Canvas, i: Interval, y: float) -> None:
    x0, x1 = c.x(i.x0), c.x(i.x1)
    c.add('<g class="net">')
    c.rect(x0, y, x1, 12, COLOURS["net"], i.label, ' stroke="#e6550d" stroke-width="0.8"')
    if x1 - x0 > len(i.label) * (CHAR_W - 0.5) + 6:
        c.text(x0 + 3, y + 9.5, i.label, "small")
    c.add("</g>")


def _mark(c: _Canvas, m: Mark, row: int | None, y: float, h: float, bottom: float) -> None:
    x = c.x(m.x)
    colour = COLOURS.get(m.kind, COLOURS["fault"])
    c.add(f'<g class="mark {m.kind}"><title>{escape(m.tip)}</title>')
    c.add(f'<line x1="{x}" y1="{y + h - 4:.1f}" x2="{x}" y2="{bottom:.1f}" stroke="{colour}" stroke-width="1" '
          f'stroke-dasharray="3 2" stroke-opacity="0.7"/>')
    c.add(f'<path d="M{x - 4:.1f},{y + h - 8:.1f} h8 l-4,5 z" fill="{colour}"/>')
    if row is not None:
        c.text(_label_x(x, m.label, 1), y + 11 + 15 * row, m.label, f"marklabel {m.kind}")
    c.add("</g>")


def _loss(c: _Canvas, m: Mark, y: float, h: float) -> None:
    x = c.x(m.x)
    c.add(f'<g class="mark loss"><title>{escape(m.tip)}</title>')
    colour = "#9e9e9e" if m.label == "−0" else COLOURS["loss"]  # a lossy fault that took nothing
    c.add(f'<circle cx="{x}" cy="{y + h / 2:.1f}" r="4.5" fill="{colour}" stroke="#fff"/>')
    c.text(x + 7, y + h / 2 + 4, m.label, "losslabel")
    c.add("</g>")


def _ticks(c: _Canvas, ticks: list[Tick], y: float, h: float) -> None:
    # one tick per pixel column and kind: a 90 s run with 10^5 sends still draws ~10^3 lines
    seen: dict[tuple[int, str], int] = {}
    drawn: list[tuple[float, Tick]] = []
    for t in ticks:
        key = (round(c.x(t.x)), t.kind)
        if key in seen:
            seen[key] += 1
            continue
        seen[key] = 1
        drawn.append((c.x(t.x), t))
    geometry = {"ok": (0, h / 2), "weak": (h / 6, h / 3), "fail": (h / 2, h / 2), "info": (h / 2, h / 3),
                "lost": (-3, h + 3), "read": (0, h)}
    order = {"read": 0, "weak": 1, "ok": 2, "info": 3, "fail": 4, "lost": 5}  # lost drawn last: on top
    for x, t in sorted(drawn, key=lambda d: order[d[1].kind]):
        dy, th = geometry[t.kind]
        n = seen[(round(x), t.kind)]
        tip = t.tip + (f" (+{n - 1} more here)" if n > 1 else "")
        w = 2.2 if t.kind == "lost" else 1.2
        c.add(f'<rect class="tick {t.kind}" x="{x - w / 2:.1f}" y="{y + dy:.1f}" width="{w}" height="{th:.1f}" '
              f'fill="{COLOURS[t.kind]}"><title>{escape(tip)}</title></rect>')


def _hwm(c: _Canvas, tl: Timeline, y: float, h: float) -> None:
    c.rect(GUTTER, y, GUTTER + PLOT, h, "#fafafa", "", ' stroke="#ddd" stroke-width="0.6"')
    values = [v for _, v in tl.hwm if v is not None]
    if not values:
        c.text(GUTTER + 6, y + h / 2 + 4, "no high watermark observed", "small")
        return
    top = max(values) or 1

    def vy(v: int) -> float:
        return round(y + h - 3 - v / top * (h - 8), 2)

    points: list[str] = []
    segments: list[str] = []
    for n, (x, v) in enumerate(tl.hwm):
        x_next = tl.hwm[n + 1][0] if n + 1 < len(tl.hwm) else tl.hi
        if v is None:  # leaderless: no watermark; break the line
            if points:
                segments.append(" ".join(points))
            points = []
            c.rect(c.x(x), y, c.x(x_next), h, "#d7191c", "leaderless: no high watermark", ' fill-opacity="0.08"')
            continue
        points += [f"{c.x(x)},{vy(v)}", f"{c.x(x_next)},{vy(v)}"]
        c.add(f'<circle cx="{c.x(x)}" cy="{vy(v)}" r="2" fill="{COLOURS["hwm"]}"><title>HWM {v}</title></circle>')
    if points:
        segments.append(" ".join(points))
    for seg in segments:
        c.add(f'<polyline class="hwm" points="{seg}" fill="none" stroke="{COLOURS["hwm"]}" stroke-width="1.6"/>')
    c.text(GUTTER - 8, y + 10, str(top), "axislabel", "end")
    c.text(GUTTER - 8, y + h - 2, "0", "axislabel", "end")


def _axis(c: _Canvas, tl: Timeline, y: float) -> None:
    c.rect(GUTTER, y, GUTTER + PLOT, 0.8, "#666")
    step = _nice_step(tl.hi - tl.lo)
    v = math.ceil(tl.lo / step) * step
    while v <= tl.hi + 1e-9:
        x = c.x(v)
        c.rect(x - 0.4, y, x + 0.4, 4, "#666")
        c.text(x, y + 15, f"{v:g}", "axislabel", "middle")
        v += step
    c.text(GUTTER - 12, y + 15, "events" if tl.mode == "events" else "seconds", "axislabel", "end")
