"""The report's view across runs: how often each (scenario, profile, backend, Kafka version) lost
acknowledged records, as a dot at the rate and a whisker over its 95 % Wilson interval, drawn from the
verdicts the checker gave (the report judges nothing itself)."""

from __future__ import annotations

from html import escape

from pytest_elr.checker.rates import LossRate, loss_rates
from pytest_elr.checker.verdict import Verdict
from pytest_elr.core.history import Run

ROW, LABEL_W, PLOT_W, PAD = 22, 240, 420, 10
FONT = 12
#: a sans-serif character's width at FONT, on the wide side: a label's room is measured with it
CHAR_W = FONT * 0.62


def rates_of(runs: list[Run], verdicts: list[Verdict | None]) -> list[LossRate]:
    """Loss rates of the judged runs, per group."""
    return loss_rates(((run.meta.get("scenario"), run.meta.get("backend"), run.meta.get("kafka_version"),
                        run.meta.get("profile")), verdict.lost_count > 0)
                      for run, verdict in zip(runs, verdicts, strict=True) if verdict is not None)


def loss_rate_chart(rates: list[LossRate]) -> str:
    """An inline SVG: one row per group, the axis from 0 to 100 %."""
    height = PAD * 2 + ROW * len(rates) + 18
    # the gutter fits the longest label (a scenario's name is the user's: no fixed width holds them all)
    label_w = max(LABEL_W, round(max(len(r.label) for r in rates) * CHAR_W) + 16)
    width = label_w + PLOT_W + 70

    def x(p: float) -> float:
        return label_w + p * PLOT_W

    parts = [f'<svg class="rates" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-size="{FONT}" viewBox="0 0 {width} {height}" role="img" '
             'aria-label="loss rate per group with 95% intervals">']
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts.append(f'<line x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{PAD}" y2="{height - 18}" stroke="#e3e6ea"/>'
                     f'<text class="axislabel" x="{x(tick):.1f}" y="{height - 4}" text-anchor="middle">'
                     f"{tick:.0%}</text>")
    for i, r in enumerate(rates):
        y = PAD + ROW * i + ROW / 2
        low, high = r.interval
        colour = "#d7191c" if r.with_loss else "#1b7837"
        parts.append(
            f'<g class="rate" data-group="{escape(r.label)}"><title>{escape(r.label)}: {r.with_loss} of {r.runs} runs '
            f"lost records ({r.rate:.0%}; 95% interval {low:.0%}-{high:.0%})</title>"
            f'<text x="{label_w - 8}" y="{y + 4:.1f}" text-anchor="end">{escape(r.label)}</text>'
            f'<line x1="{x(low):.1f}" x2="{x(high):.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{colour}" stroke-width="2"/>'
            f'<line x1="{x(low):.1f}" x2="{x(low):.1f}" y1="{y - 5:.1f}" y2="{y + 5:.1f}" stroke="{colour}"/>'
            f'<line x1="{x(high):.1f}" x2="{x(high):.1f}" y1="{y - 5:.1f}" y2="{y + 5:.1f}" stroke="{colour}"/>'
            f'<circle cx="{x(r.rate):.1f}" cy="{y:.1f}" r="4.5" fill="{colour}"/>'
            f'<text x="{x(1) + 10:.1f}" y="{y + 4:.1f}">{r.with_loss}/{r.runs}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def rates_section(runs: list[Run], verdicts: list[Verdict | None]) -> str:
    rates = rates_of(runs, verdicts)
    if not rates:
        return ""
    return ('<section class="card" id="rates"><h2>Loss rate across runs</h2><p class="sub">runs that lost '
            "acknowledged acks=all records, per scenario, profile, backend and Kafka version: the dot is the "
            "rate, the whisker its 95% Wilson interval</p>"
            f'<div class="chart">{loss_rate_chart(rates)}</div></section>')
