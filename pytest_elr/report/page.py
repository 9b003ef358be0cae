"""The HTML page: verdict table, legend, and a section per run around its timeline.

Everything is inline (CSS, SVG; no script, fonts or network) so the file can be mailed, attached
to a CI run, or opened from an archive years later and still look the same.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any

import yaml
from packaging.version import Version

from pytest_elr.actions import ACTIONS
from pytest_elr.checker.verdict import ANOMALIES_DOC, FATAL, Verdict, explain
from pytest_elr.core.history import Run
from pytest_elr.core.observation import fault_bit, say_lost_offsets
from pytest_elr.model.invariants import DATA_INVARIANTS
from pytest_elr.report.partitions import CSS as PARTITIONS_CSS
from pytest_elr.report.partitions import partition_numbers, partitions_section
from pytest_elr.report.rollup import rates_section
from pytest_elr.report.svg import COLOURS, render
from pytest_elr.report.timeline import AxisMode, build_timeline

CSS = """
:root { --ink:#1f2933; --muted:#6b7280; --line:#e3e6ea; --bad:#d7191c; --warn:#b45309; --good:#1b7837; }
* { box-sizing: border-box; }
body { margin:0; background:#f3f4f6; color:var(--ink);
       font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif; }
main { max-width:1220px; margin:0 auto; padding:20px 24px 60px; }
h1 { font-size:22px; margin:0 0 2px; } h2 { font-size:17px; margin:0; }
a { color:#1d4ed8; text-decoration:none; } a:hover { text-decoration:underline; }
.sub { color:var(--muted); margin:0 0 14px; }
.card { background:#fff; border:1px solid var(--line); border-radius:10px; padding:14px 18px; margin:14px 0;
        box-shadow:0 1px 2px rgba(0,0,0,.04); }
.chips span { display:inline-block; margin:0 6px 4px 0; padding:3px 10px; border-radius:999px; background:#eef2f7;
              font-weight:600; }
.chips .bad { background:#fde2e2; color:var(--bad); } .chips .known { background:#fff3d6; color:#8a5a00; }
.chips .good { background:#e3f2e1; color:var(--good); }
table.verdicts { border-collapse:collapse; width:100%; font-size:13px; }
.verdicts th, .verdicts td { padding:4px 8px; border-bottom:1px solid var(--line); text-align:left;
                             white-space:nowrap; }
.verdicts th { color:var(--muted); font-weight:600; position:sticky; top:0; background:#fff; }
.verdicts td.num, .verdicts th.num { text-align:right; font-variant-numeric:tabular-nums; }
.verdicts tr:hover td { background:#f8fafc; } .verdicts tr.group td { border-top:2px solid #cfd5dd; }
td.lost.some, dd.lost.some { color:#fff; background:var(--bad); font-weight:700; border-radius:4px; }
td.lost.expected, dd.lost.expected { background:#fff3d6; color:#8a5a00; font-weight:700; border-radius:4px; }
.pill { display:inline-block; padding:1px 8px; border-radius:999px; font-size:12px; font-weight:600;
        background:#eef2f7; color:#374151; margin-left:4px; vertical-align:2px; }
.pill.passed { background:#e3f2e1; color:var(--good); }
.pill.failed, .pill.error { background:#fde2e2; color:var(--bad); }
.pill.known { background:#fff3d6; color:#8a5a00; }
.verdicts td.checker { white-space:normal; font-size:12px; min-width:160px; }
p.checker { margin:0 0 6px; font-size:13px; } p.checker .pill { margin:0 4px; }
.checker .found { color:var(--bad); } .checker .counted { color:var(--muted); }
.bit-yes { font-weight:700; } .bit-NO { color:var(--warn); font-weight:700; }
.legend { display:flex; flex-wrap:wrap; gap:6px 16px; font-size:12.5px; color:#374151; }
.legend i { display:inline-block; width:16px; height:11px; border-radius:2px; margin-right:5px; vertical-align:-1px; }
.legend i.tick { width:3px; height:13px; border-radius:0; }
.legend .axisnote { flex-basis:100%; color:var(--muted); }
.run h2 .id { color:var(--muted); font-weight:400; font-size:12px; margin-left:6px; }
dl.facts { display:flex; flex-wrap:wrap; gap:4px 22px; margin:10px 0 8px; }
dl.facts div { display:flex; flex-direction:column; } dt { color:var(--muted); font-size:11.5px; }
dd { margin:0; font-weight:650; font-size:16px; font-variant-numeric:tabular-nums; padding:0 2px; }
dd.small { font-size:13px; font-weight:500; }
.chart { overflow-x:auto; margin:6px -6px 0; }
svg.timeline, svg.rates { display:block; max-width:100%; height:auto; }
svg text { font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif; fill:#333; }
svg .rowname { fill:#4b5563; font-weight:600; } svg .steplabel { font-weight:700; fill:#1f2d3d; }
svg .marklabel { fill:#8c2d04; font-weight:600; stroke:#fff; stroke-width:3px; paint-order:stroke; }
svg .marklabel.violation, svg .marklabel.error { fill:#d7191c; }
svg .marklabel.disagreement { fill:#b45309; }
svg .bandlabel { font-size:10px; fill:#1f2933; font-weight:600; } svg .bandlabel.dark { fill:#fff; }
svg .small { font-size:9.5px; fill:#7c2d12; } svg .axislabel { font-size:10px; fill:#6b7280; }
svg .losslabel { fill:#d7191c; font-weight:700; stroke:#fff; stroke-width:3px; paint-order:stroke; }
.lostlist { color:var(--bad); font-size:13px; margin:8px 0 0; word-break:break-word; }
.findings { margin:8px 0 0; padding-left:18px; font-size:13px; } .findings li { color:var(--bad); }
details { margin-top:8px; font-size:13px; } summary { cursor:pointer; color:var(--muted); }
ol.steps { margin:6px 0 0; padding-left:22px; } ol.steps b { display:inline-block; min-width:60px; }
ol.steps .faults { color:#8c2d04; }
.back { text-align:right; margin:4px 0 0; font-size:12px; }
.why { margin:10px 0 4px; padding:8px 12px; border-radius:8px; border-left:4px solid var(--bad); background:#fff5f5; }
.why.known { border-color:#d99a00; background:#fffaf0; } .why b { display:block; margin-bottom:4px; }
pre.message { margin:0; white-space:pre-wrap; word-break:break-word; font-size:12.5px;
              font-family:ui-monospace,"DejaVu Sans Mono",monospace; }
table.steps { border-collapse:collapse; width:100%; margin-top:8px; font-size:12.5px; table-layout:fixed; }
.steps th, .steps td { padding:3px 6px; border-bottom:1px solid var(--line); text-align:left; vertical-align:top;
                       word-break:break-word; }
.steps th { color:var(--muted); font-weight:600; } .steps col.label { width:12%; } .steps col.result { width:9%; }
.steps code { font-family:ui-monospace,"DejaVu Sans Mono",monospace; font-size:12px; }
.steps .kv { display:inline-block; margin-right:8px; } .steps .kv.bad { color:var(--bad); font-weight:700; }
.steps tr.failed td { background:#fff5f5; } .steps tr.failed.known td { background:#fffaf0; }
.steps tr.message td { border-bottom:2px solid var(--line); }
.steps .none { color:var(--muted); } .steps .note { color:var(--muted); display:block; }
.expected-loss { color:#6b4e00; } .expected-loss summary { color:#6b4e00; font-weight:600; }
.expected-loss li { color:#6b4e00; }
p.also { margin:8px 0 0; font-size:13px; color:#374151; }
@media (max-width:1100px) {  /* a narrow window wraps the tables' cells instead of cutting them off */
  main { padding:12px 10px 40px; } .card { padding:10px 10px; }
  .verdicts th, .verdicts td { white-space:normal; padding:3px 4px; } .verdicts td.checker { min-width:0; }
}
"""

_LEGEND = [
    ("leader", "leader"), ("isr", "ISR"), ("elr", "ELR"), ("lkelr", "LastKnownELR"), ("out", "out of every set"),
]
_HELP = {
    "acked": "records acknowledged with acks=all", "read": "records read (consume events)",
    "lost": "acknowledged with acks=all and never read",
    "fault bit": "yes: a fault demonstrably took data from its victim; NO: a lossy fault took none; -: no lossy fault",
    "result": "the pytest outcome (a negative control passes when it loses what its scenario expects)",
    "checker": "who judged the run (spark: every anomaly kind; inline: acknowledged and never read only) "
               "and every anomaly it counted",
}
_TICKS = [("ok", "ack, acks=all"), ("weak", "ack, acks=1/0"), ("fail", "send failed"),
          ("info", "indeterminate / no answer"), ("lost", "acked, never read (lost, as the checker names it)"),
          ("read", "read (final drain)")]
#: the project's documentation beside the package, in a checkout (a link to it when it is there)
DOCS = Path(__file__).resolve().parents[2] / "docs"
#: acked, read and lost of a run no checker judged
NOT_JUDGED = "–"


def result_of(run: Run) -> tuple[str, str]:
    """The run's result as the report shows it, and its CSS class: a failure the scenario declares
    for this release (pytest's xfail) is a known failure, neither red nor counted as failed; a pass
    where a failure is declared is pytest's strict XPASS, a failure."""
    known = bool(run.meta.get("known_failure"))
    if known and run.outcome == "failed":
        return "known failure", "known"
    if known and run.outcome == "passed":
        return "XPASS", "failed"
    return run.outcome, run.outcome


def page(runs: list[Run], verdicts: list[Verdict | None], axis: AxisMode = "auto") -> str:
    """The page of ``runs``, each with its checker's verdict (None: not judged)."""
    anchors = _anchors(runs)
    body = [_summary(runs, verdicts), _matrix(runs, anchors), _table(runs, verdicts, anchors),
            rates_section(runs, verdicts), _legend()]
    pairs = zip(runs, verdicts, strict=True)
    body += [_section(run, verdict, anchors[n], n, axis) for n, (run, verdict) in enumerate(pairs)]
    title = f"pytest-elr report — {len(runs)} run{'s' * (len(runs) != 1)}"
    # the grid's rules only where a run has several partitions: a page of one-partition runs is as it was
    several = any(len(partition_numbers(run, verdict)) > 1 for run, verdict in zip(runs, verdicts, strict=True))
    css = CSS + (PARTITIONS_CSS if several else "")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{css}</style></head>\n"
            f"<body><main>\n" + "\n".join(body) + "\n</main></body></html>\n")


def _anchors(runs: list[Run]) -> list[str]:
    seen: Counter[str] = Counter()
    out = []
    for run in runs:
        base = "run-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", run.run_id)
        seen[base] += 1
        out.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return out


def _meta(run: Run, key: str) -> str:
    value = run.meta.get(key)
    return "?" if value is None else str(value)


def _summary(runs: list[Run], verdicts: list[Verdict | None]) -> str:
    outcomes = Counter(result_of(run)[0] for run in runs)
    with_loss = sum(1 for v in verdicts if v is not None and v.lost_count)
    unjudged = verdicts.count(None)
    chips = [f"<span>{len(runs)} runs</span>", f'<span class="good">{outcomes["passed"]} passed</span>']
    chips += [f'<span class="bad">{outcomes[k]} {k}</span>' for k in ("failed", "error", "unfinished", "XPASS")
              if outcomes[k]]
    if outcomes["known failure"]:
        chips.append(f'<span class="known">{outcomes["known failure"]} known failure'
                     f'{"s" * (outcomes["known failure"] != 1)}</span>')
    chips.append(f'<span class="{"bad" if with_loss else "good"}">{with_loss} with lost records</span>')
    chips += [f"<span>{unjudged} not judged</span>"] if unjudged else []
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f'<header><h1>pytest-elr · replication chaos report</h1><p class="sub">generated {now} · '
            f'a run that passes may still lose records where its scenario expects it (negative controls)</p>'
            f'<div class="chips">{"".join(chips)}</div></header>')


def _checker_html(verdict: Verdict | None) -> str:
    """Which checker judged a run and every anomaly it counted, or that none did."""
    if verdict is None:
        return '<span class="pill">not judged</span>'
    # what fails a scenario that expects no loss in red; the rest (acks=1 accounting, regressions) muted
    counted = [f'<span class="{"found" if k in verdict.fatal else "counted"}" title="{escape(explain(k, n))}">'
               f"{escape(k)} {n}</span>" for k, n in verdict.anomalies.items() if n]
    return f'<span class="pill">{escape(verdict.checker)}</span> ' + (", ".join(counted) or "no anomaly")


def _counts(verdict: Verdict | None) -> tuple[str, str, str]:
    """acked, read and lost as shown: a dash for a run no checker judged."""
    if verdict is None:
        return NOT_JUDGED, NOT_JUDGED, NOT_JUDGED
    return str(verdict.acked), str(verdict.read), str(verdict.lost_count)


def _matrix(runs: list[Run], anchors: list[str]) -> str:
    """Scenario x Kafka release, when runs cover several releases: what each release did, a known
    failure (the scenario declares the release's bug) told apart from a new one."""
    releases = sorted({str(r.meta["kafka_version"]) for r in runs if r.meta.get("kafka_version")},
                      key=Version)
    if len(releases) < 2:
        return ""
    cells: dict[tuple[str, str], dict[str, str]] = {}
    for run, anchor in zip(runs, anchors, strict=True):
        version = run.meta.get("kafka_version")
        if not version:
            continue
        known = bool(run.meta.get("known_failure"))
        word, css = {("passed", False): ("pass", "passed"), ("failed", True): ("known", "known"),
                     ("passed", True): ("XPASS", "failed")}.get((run.outcome, known), (run.outcome, run.outcome))
        title = escape(str(run.meta.get("known_failure") or ""), quote=True)
        cells.setdefault((_meta(run, "scenario"), _meta(run, "profile")), {})[str(version)] = (
            f'<td><a href="#{anchor}" title="{title}"><span class="pill {css}">{word}</span></a></td>')
    ths = "".join(f"<th>{escape(v)}</th>" for v in releases)
    rows = "".join(f"<tr><td>{escape(s)}</td><td>{escape(p)}</td>" + "".join(c.get(v, "<td>·</td>") for v in releases)
                   + "</tr>" for (s, p), c in cells.items())
    return (f'<section class="card" id="matrix"><h2>Scenario × Kafka release</h2><p class="sub">known: fails as '
            f"the scenario declares for that release (its bug); XPASS: passes where a failure is declared</p>"
            f'<table class="verdicts"><thead><tr><th>scenario</th><th>profile</th>{ths}</tr></thead>'
            f"<tbody>{rows}</tbody></table></section>")


def _table(runs: list[Run], verdicts: list[Verdict | None], anchors: list[str]) -> str:
    several = len({r.meta.get("kafka_version") for r in runs}) > 1
    head = ["scenario", "profile", "backend"] + (["kafka"] if several else []) + [
        "acked", "read", "lost", "fault bit", "result", "checker"]
    rows = []
    previous = None
    for run, verdict, anchor in zip(runs, verdicts, anchors, strict=True):
        acked, read, lost = _counts(verdict)
        bit, (word, css) = fault_bit(run.losses), result_of(run)
        some = _lost_class(run, verdict)
        cells = (f'<td><a href="#{anchor}">{escape(_meta(run, "scenario"))}</a></td>'
                 f'<td>{escape(_meta(run, "profile"))}</td><td>{escape(_meta(run, "backend"))}</td>'
                 + (f'<td>{escape(_meta(run, "kafka_version"))}</td>' if several else "") +
                 f'<td class="num acked">{acked}</td><td class="num read">{read}</td>'
                 f'<td class="num lost{some}">{lost}</td>'
                 f'<td class="bit bit-{bit}">{bit}</td>'
                 f'<td class="result"><span class="pill {css}">{escape(word)}</span></td>'
                 f'<td class="checker">{_checker_html(verdict)}</td>')
        group = ' class="group"' if previous is not None and _meta(run, "scenario") != previous else ""
        previous = _meta(run, "scenario")
        rows.append(f'<tr data-run="{escape(run.run_id)}"{group}>{cells}</tr>')
    ths = "".join(f'<th{" class=num" if h in ("acked", "read", "lost") else ""} title="{_HELP.get(h, "")}">{h}</th>'
                  for h in head)
    return (f'<section class="card" id="verdicts"><h2>Verdicts</h2>'
            f'<table class="verdicts"><thead><tr>{ths}</tr></thead><tbody>{"".join(rows)}</tbody></table></section>')


def _legend() -> str:
    items = [f'<span><i style="background:{COLOURS[k]}"></i>{name}</span>' for k, name in _LEGEND]
    items.append('<span><i style="background:repeating-linear-gradient(45deg,#666 0 2px,#e8e8e8 2px 5px)"></i>'
                 "fenced</span>")
    items.append(f'<span><i style="background:{COLOURS["down"]};height:5px"></i>broker down / paused</span>')
    items.append(f'<span><i style="background:{COLOURS["net"]};border:1px solid #e6550d"></i>network fault</span>')
    items.append(f'<span><i style="background:{COLOURS["fault"]};width:8px"></i>fault injected</span>')
    items += [f'<span><i class="tick" style="background:{COLOURS[k]}"></i>{name}</span>' for k, name in _TICKS]
    items.append(f'<span><i style="background:{COLOURS["hwm"]};height:2px"></i>high watermark</span>')
    items.append('<span class="axisnote">x axis: events in order for runs shorter than a second (the model runs '
                 "everything in about a millisecond; a send counts at its answer), seconds otherwise · "
                 "hover anything for details</span>")
    return f'<section class="card legend">{"".join(items)}</section>'


def _fact(name: str, value: object, cls: str = "") -> str:
    return f'<div><dt>{escape(name)}</dt><dd class="{cls}">{escape(str(value))}</dd></div>'


def _section(run: Run, verdict: Verdict | None, anchor: str, n: int, axis: AxisMode) -> str:
    acked, read, lost = _counts(verdict)
    bit, outcome = fault_bit(run.losses), run.outcome
    word, css = result_of(run)
    some = _lost_class(run, verdict)
    facts = [_fact("acked (acks=all)", acked, "acked"), _fact("read", read, "read"),
             _fact("lost", lost, "lost" + some), _fact("fault bit", bit, f"bit bit-{bit}"),
             _fact("duration", f"{run.duration_s * 1000:.1f} ms" if run.duration_s < 1 else f"{run.duration_s:.1f} s",
                   "duration small"),
             _fact("events", len(run.events), "events small")]
    for key, name in (("kafka_version", "kafka"), ("min_insync_replicas", "min ISR"), ("topic", "topic")):
        if run.meta.get(key) is not None:
            facts.append(_fact(name, run.meta[key], key + " small"))
    if len(parts := partition_numbers(run, verdict)) > 1:  # (a one-partition run's facts are as they were)
        facts.append(_fact("partitions", len(parts), "partitions small"))
    if run.malformed:
        facts.append(_fact("malformed lines", run.malformed, "malformed small"))
    # the records the verdict names lost are the ones marked on the timeline
    lost_values = {value for value, _ in verdict.lost} if verdict is not None else set()
    chart = render(build_timeline(run.events, lost_values, axis), f"r{n}") if run.events else "<p>no events</p>"
    parts = [f'<section class="card run" id="{anchor}" data-run-id="{escape(run.run_id)}" data-acked="{acked}" '
             f'data-read="{read}" data-lost="{lost}" data-fault-bit="{bit}" '
             f'data-outcome="{escape(outcome)}" data-result="{escape(word)}">',
             f'<h2><a href="#{anchor}">{escape(_meta(run, "scenario"))}</a>'
             f'<span class="pill">{escape(_meta(run, "profile"))}</span><span class="pill">'
             f'{escape(_meta(run, "backend"))}</span><span class="pill {css} result">{escape(word)}</span>'
             f'<span class="id">{escape(run.run_id)}</span></h2>',
             f'<dl class="facts">{"".join(facts)}</dl>',
             _why(run),
             f'<p class="checker"><b>checker</b> {_checker_html(verdict)}</p>', _also(verdict),
             f'<div class="chart">{chart}</div>']
    if verdict is not None and verdict.lost_count:
        parts.append(f'<p class="lostlist"><b>Lost</b> (acknowledged with acks=all, never read): '
                     f"{escape(verdict.examples(30))}</p>")
    parts.append(partitions_section(run, verdict, anchor, n, axis))  # "" for a topic of one partition
    parts.append(_findings(run))
    parts.append(_steps(run, word == "known failure"))
    parts.append('<p class="back"><a href="#verdicts">↑ verdicts</a></p></section>')
    return "".join(parts)


def _expected_loss(run: Run, e: dict[str, Any]) -> bool:
    """A negative control's break of a data invariant: its expected loss, not a finding. (A history
    without the invariant's name: every violation of a negative control that passed.)"""
    if e["type"] != "violation" or run.meta.get("expected_loss") != "found":
        return False
    name = e.get("invariant")
    return name in DATA_INVARIANTS if name else run.outcome == "passed"


def _findings(run: Run) -> str:
    kinds = ("violation", "disagreement", "declared_difference", "kip_departure", "loss_evidence", "model_error",
             "backend_error", "scenario_error")
    found = [e for e in run.events if e["type"] in kinds and (e["type"] != "loss_evidence" or e.get("proof"))]
    expected = [e for e in found if _expected_loss(run, e)]
    found = [e for e in found if not _expected_loss(run, e)]
    out = ""
    if found:
        items = "".join(_finding_item(e) for e in found[:20])
        more = f"<li>… and {len(found) - 20} more</li>" if len(found) > 20 else ""
        out += f'<ul class="findings">{items}{more}</ul>'
    if expected:
        items = "".join(_finding_item(e) for e in expected)
        out += (f'<details class="expected-loss"><summary>expected: loss · {len(expected)} break'
                f'{"s" * (len(expected) != 1)} of the data invariants, which this negative control exists to '
                f'show</summary><ul>{items}</ul></details>')
    return out


def _finding_item(e: dict[str, Any]) -> str:
    return (f"<li><b>{escape(str(e.get('step')))}</b> {escape(e['type'].replace('_', ' '))}: "
            f"{escape(_finding(e))}</li>")


def _lost_class(run: Run, verdict: Verdict | None) -> str:
    """The lost count's highlight: red where loss fails the run, muted where the scenario expects it."""
    if verdict is None or not verdict.lost_count:
        return ""
    return " expected" if run.meta.get("expected_loss") == "found" else " some"


def _why(run: Run) -> str:
    """Why the run did not simply pass: the failure message, or the known failure it is."""
    word, _ = result_of(run)
    message = str(run.meta.get("message") or "")
    if word == "passed":
        return ""
    if not message:  # an error before the steps, or a history from before messages were kept
        message = "\n".join(str(e.get("message")) for e in run.events if e["type"] == "backend_error")
    because = escape(str(run.meta.get("known_failure") or ""))
    if word == "known failure":
        head = f"known failure on Kafka {escape(_meta(run, 'kafka_version'))}: {because} — it fails as declared"
    elif word == "XPASS":
        head = f"passed where the scenario declares a known failure ({because}): the declared releases are wrong"
    else:
        head = "why it failed" if message else f"{escape(word)}: no message was recorded"
    css = "why known" if word == "known failure" else "why"
    body = f'<pre class="message">{escape(message)}</pre>' if message else ""
    return f'<div class="{css}"><b>{head}</b>{body}</div>'


def _also(verdict: Verdict | None) -> str:
    """What the checker counted besides loss, in words, with where each kind is defined."""
    if verdict is None:
        return ""
    others = [explain(k, n) for k, n in verdict.anomalies.items() if n and k not in FATAL]
    if not others:
        return ""
    doc = DOCS / "history.md"
    link = (f'<a href="{doc.as_uri()}#what-the-checker-reports">{ANOMALIES_DOC}</a>' if doc.is_file()
            else escape(ANOMALIES_DOC))
    return f'<p class="also"><b>also</b> {escape("; ".join(others))} ({link})</p>'


def _finding(e: dict[str, object]) -> str:
    if e["type"] == "declared_difference":
        return (f"after {e.get('after')}, {e.get('field')}: model {e.get('model')}, observed {e.get('observed')} "
                f"-- {e.get('reason')} [{e.get('source')}]")
    if e["type"] == "kip_departure":
        return f"Kafka departs from the KIP: {e.get('summary')} -- {e.get('reason')} [{e.get('source')}]"
    if e["type"] == "loss_evidence":  # a loss proved by presence
        return (f"{e.get('count')} acknowledged records an earlier read saw (served by {e.get('served_by')}) are "
                f"absent from the final read; broker {e.get('victim')} lost "
                f"{say_lost_offsets(e) or 'unmeasured offsets'}")
    return str(e.get("message") or e.get("differences") or "")


def _flow(value: Any) -> str:
    """A value on one line as a scenario writes it (``{broker: 0, from: all}``)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False)
    return text.strip().removesuffix("...").strip()


def _fault_yaml(e: dict[str, Any], brokers: tuple[int, ...]) -> list[dict[str, Any]]:
    """A fault event as the ``do`` items that make it (histories from before steps kept their ``do``,
    and the finale's own actions)."""
    try:
        return ACTIONS[str(e.get("action"))].from_event(e.get("args") or {}).to_yaml(brokers)
    except Exception:  # an action this version does not know: its name and the arguments it has
        args = {k: v for k, v in (e.get("args") or {}).items() if v is not None}
        return [{str(e.get("action")): args or None}]


NONE = '<span class="none">—</span>'
STATE_KEYS = ("leader", "isr", "elr", "last_known_elr", "fenced", "hwm")


def _step_rows(run: Run) -> list[dict[str, Any]]:
    """Each step (and the finale) with its actions, expectations, observations and end."""
    brokers = tuple(sorted({int(b) for e in run.events if e["type"] == "observe" for b in e.get("leo") or {}}))
    rows: dict[str, dict[str, Any]] = {}
    for e in run.events:
        label = e.get("step")
        if label is None or label == "final":
            continue
        if e["type"] == "step" and e.get("phase") == "begin":
            rows[label] = {"label": label, "note": e.get("note") or "", "do": e.get("do"), "faults": [],
                           "state": None, "end": None, "refused": []}
        elif label == "finale" and label not in rows:
            rows[label] = {"label": label, "note": "heal and bring back what the steps left down", "do": None,
                           "faults": [], "state": None, "end": None, "refused": []}
        row = rows.get(label)
        if row is None:
            continue
        if e["type"] == "fault":
            row["faults"].append(e)
        elif e["type"] == "observe" and e.get("partition") in (None, 0):
            row["state"] = e
        elif e["type"] == "refused":  # an answer, not a finding: shown where the request was made
            row["refused"].append(e)
        elif e["type"] == "step" and e.get("phase") == "end":
            row["end"] = e
    for row in rows.values():
        if row["do"] is None:
            row["do"] = [item for f in row["faults"] for item in _fault_yaml(f, brokers)]
    return list(rows.values())


def _kv(key: str, value: Any, bad: bool) -> str:
    return f'<span class="kv{" bad" if bad else ""}"><code>{escape(key)}: {escape(_flow(value))}</code></span>'


def _steps(run: Run, known: bool = False) -> str:
    """Per step, side by side: what it did (in the YAML's own form), what it expected, what was
    observed (the expectations that did not hold in red) and how it ended, with a failed step's message."""
    rows = _step_rows(run)
    if not rows:
        return ""
    body = []
    for row in rows:
        end = row["end"] or {}
        expected: dict[str, Any] = end.get("expected") or {}
        observed: dict[str, Any] = end.get("observed") or {}
        missed = {str(m).split(":", 1)[0].split("[", 1)[0] for m in end.get("mismatches") or []}
        state = row["state"] or {}
        seen = {k: ("none" if state.get(k) is None and k == "leader" else state.get(k)) for k in STATE_KEYS
                if k in state}
        seen |= {k: v for k, v in observed.items() if k not in seen}
        if row["refused"] and "refused" not in seen:  # the controller's answer, expected or not
            seen["refused"] = ", ".join(f"{r.get('code')} ({r.get('action')})" for r in row["refused"])
        do = "".join(f"<code>- {escape(_flow(item))}</code><br>" for item in row["do"]) or NONE
        note = f'<span class="note">{escape(row["note"])}</span>' if row["note"] else ""
        want = "".join(_kv(k, v, k in missed) for k, v in expected.items()) or NONE
        got = "".join(_kv(k, v, k in missed) for k, v in seen.items()) or '<span class="none">not observed</span>'
        failed = bool(end.get("failed"))
        result = ("known failure" if known else "FAILED") if failed else ("ok" if row["end"] else "—")
        css = f' class="failed{" known" if known else ""}"' if failed else ""
        body.append(f'<tr data-step="{escape(str(row["label"]))}"{css}><td><b>{escape(str(row["label"]))}</b>{note}'
                    f"</td><td>{do}</td><td>{want}</td><td>{got}</td><td>{escape(result)}</td></tr>")
        if failed and end.get("message"):
            body.append(f'<tr class="message{" known" if known else ""}" data-step="{escape(str(row["label"]))}">'
                        f'<td colspan="5"><pre class="message">{escape(str(end["message"]))}</pre></td></tr>')
    return ('<table class="steps"><colgroup><col class="label"><col><col><col><col class="result"></colgroup>'
            "<thead><tr><th>step</th><th>do</th><th>expected</th><th>observed</th><th>result</th></tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")
