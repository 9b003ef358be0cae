"""The report says why, checked as a person sees it in headless Chromium at 1400 px and 800 px:
a run whose step fails shows that step's message beside its expected and observed state; a run
that fails as its scenario declares for its release is a known failure (amber, not counted as
failed); a negative control's broken data invariants sit under "expected: loss"; steps read as
their YAML; the acks=1 count is in words; and no label of a timeline or table is cut off.

The runs are real: the model backend, and a fake release (tests/fake_backend.py) for the known failure.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from test_report_chromium import browse, chromium  # noqa: F401  (the fixture)

from pytest_elr.backends.model import ModelBackend
from pytest_elr.report import build_report
from pytest_elr.scenario.executor import run_scenario
from pytest_elr.scenario.loader import load_scenario

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_backend import Fake  # noqa: E402

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

#: T1 expects leader 1 where the cluster keeps leader 0: that step fails with this message
WRONG = """
name: {name}
profiles: [kafka]
{known}
cluster: {{brokers: 3}}
topic: {{name: t, replicas: [0, 1, 2], min_insync_replicas: 2}}
steps:
  - at: T0
    do: [{{produce: 5}}]
    expect: {{leader: 0, isr: [0, 1, 2]}}
  - at: T1
    do: [{{isolate: {{broker: 2, from: brokers}}}}, {{produce: 3}}]
    expect: {{leader: 1, isr: [0, 1]}}
  - at: T2
    do: [{{heal: all}}]
verdict: {{acked_loss: none}}
"""
KNOWN = 'known_failures:\n  - {versions: "<4.1.0", because: "KAFKA-0000, planted", step: T1, fails: [leader]}'
MESSAGE = "leader: expected 1, observed 0"
#: a long name, as users write them: the loss-rate chart's labels must fit it
WRONG_NAME = "wrong-leader-expected-where-the-cluster-keeps-broker-0-leading"


class Release402(Fake):
    """The model as a Kafka release the scenario declares a known failure on."""

    kafka_version = "4.0.2"


#: run in the page after layout: per run, what a reader sees; and every label that sticks out
PROBE = """<script>
const inside = (b, box) => b.left >= box.left - 0.5 && b.right <= box.right + 0.5
                           && b.top >= box.top - 0.5 && b.bottom <= box.bottom + 0.5;
// inside a closed <details> nothing is laid out (Chromium still gives stale boxes): not shown
const shown = e => { const b = e.getBoundingClientRect(), shut = e.closest('details:not([open])');
                     return b.width > 0 && b.height > 0 && !(shut && e.tagName !== 'SUMMARY'); };
const clipped = [];
for (const svg of document.querySelectorAll('svg')) {
  const box = svg.getBoundingClientRect();
  for (const t of svg.querySelectorAll('text')) {
    if (shown(t) && !inside(t.getBoundingClientRect(), box)) clipped.push('svg text: ' + t.textContent);
  }
}
for (const card of document.querySelectorAll('.card')) {
  const box = card.getBoundingClientRect();
  for (const e of card.querySelectorAll('th, td, dd, dt, pre, code, h2, p, summary, li')) {
    if (shown(e) && !inside(e.getBoundingClientRect(), box)) clipped.push(e.tagName + ': ' + e.textContent);
  }
}
const runs = [...document.querySelectorAll('section.run')].map(s => ({
  scenario: s.querySelector('h2 a').innerText, result: s.dataset.result,
  pill: s.querySelector('h2 .pill.result').innerText,
  pill_colour: getComputedStyle(s.querySelector('h2 .pill.result')).color,
  why: (s.querySelector('.why') || {innerText: ''}).innerText,
  why_visible: !!s.querySelector('.why') && shown(s.querySelector('.why pre') || s.querySelector('.why')),
  failed_steps: [...s.querySelectorAll('table.steps tr.failed')].map(r => r.dataset.step),
  step_messages: [...s.querySelectorAll('table.steps tr.message')].filter(shown).map(r => r.innerText),
  steps_text: (s.querySelector('table.steps') || {innerText: ''}).innerText,
  red_findings: [...s.querySelectorAll('ul.findings li')].filter(shown).map(li => li.innerText),
  expected_loss: [...s.querySelectorAll('.expected-loss li')].map(li => li.innerText),
  expected_loss_head: (s.querySelector('.expected-loss summary') || {innerText: ''}).innerText,
  also: (s.querySelector('p.also') || {innerText: ''}).innerText,
}));
const chips = [...document.querySelectorAll('.chips span')].map(c => c.innerText);
const pre = document.createElement('pre');
pre.id = 'measured';
pre.textContent = JSON.stringify({runs, chips, clipped, overflow: document.documentElement.scrollWidth - innerWidth});
document.body.appendChild(pre);
</script>"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A failing step, a known failure, a negative control (and its passing profiles), acks=1 records."""
    root = tmp_path_factory.mktemp("why")
    histories = root / "histories"
    for name, known, backend in ((WRONG_NAME, "", ModelBackend), ("known-bug", KNOWN, Release402)):
        path = root / f"{name}.elr.yaml"
        path.write_text(WRONG.format(name=name, known=known), encoding="utf-8")
        assert not run_scenario(load_scenario(path), backend(), "kafka", histories).passed
    standing = load_scenario(SCENARIOS / "kip966_last_replica_standing.elr.yaml")
    for profile in standing.profiles:
        assert run_scenario(standing, ModelBackend(), profile, histories).passed
    return build_report([histories], root / "report.html")


def measure(chromium: str, report: Path, tmp_path: Path, width: int) -> dict:  # noqa: F811
    probe = tmp_path / f"probe-{width}.html"
    probe.write_text(report.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = browse(chromium, tmp_path, f"--window-size={width},1000", "--dump-dom", probe.as_uri()).stdout
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    text = found.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")
    return json.loads(text)


@pytest.mark.parametrize("width", [1400, 800])
def test_the_report_says_why_at(width: int, chromium: str, report: Path, tmp_path: Path) -> None:  # noqa: F811
    m = measure(chromium, report, tmp_path, width)
    runs = {(r["scenario"], r["result"]): r for r in m["runs"]}

    failed = runs[WRONG_NAME, "failed"]
    assert MESSAGE in failed["why"] and failed["why_visible"], failed
    assert failed["failed_steps"] == ["T1"] and any(MESSAGE in t for t in failed["step_messages"]), failed
    # the steps as the YAML has them, expected beside observed
    assert "- {isolate: {broker: 2, from: brokers}}" in failed["steps_text"], failed["steps_text"]
    assert "leader: 1" in failed["steps_text"] and "leader: 0" in failed["steps_text"]
    assert "links=None" not in failed["steps_text"] and "- {heal: all}" in failed["steps_text"]

    known = runs["known-bug", "known failure"]
    assert known["pill"] == "known failure" and "KAFKA-0000, planted" in known["why"] and MESSAGE in known["why"]
    assert known["pill_colour"] != failed["pill_colour"]  # amber, not the red of a failure
    assert known["failed_steps"] == ["T1"]
    assert "1 failed" in m["chips"] and "1 known failure" in m["chips"], m["chips"]  # not counted as failed

    # the negative control (legacy: ELR off, the last replica standing loses what it never had)
    controls = [r for r in m["runs"] if r["expected_loss"]]
    assert [(r["scenario"], r["result"]) for r in controls] == [("kip966-last-replica-standing", "passed")], controls
    control = controls[0]
    assert control["expected_loss_head"].startswith("expected: loss"), control
    assert not [f for f in control["red_findings"] if "violation" in f], control["red_findings"]

    assert any("acknowledged with acks=1 or acks=0 and never read" in r["also"] for r in m["runs"])
    assert "acks1_uncommitted" not in " ".join(r["also"] for r in m["runs"])

    assert m["clipped"] == [], m["clipped"]
    assert m["overflow"] <= 0, f"the page scrolls sideways by {m['overflow']} px at {width} px"


def test_a_failure_other_than_the_declared_one_is_not_shown_as_known(tmp_path: Path) -> None:
    """The release declares T1 to fail at the ISR; it fails at the leader: a failure (pytest fails it too)."""
    path = tmp_path / "other.elr.yaml"
    path.write_text(WRONG.format(name="other-bug", known=KNOWN.replace("[leader]", "[isr]")), encoding="utf-8")
    result = run_scenario(load_scenario(path), Release402(), "kafka", tmp_path / "h")
    assert not result.passed and result.known_failure == ""
    meta = json.loads((result.history_dir / "meta.json").read_text(encoding="utf-8"))
    assert meta["known_failure"] is None and MESSAGE in meta["message"]
    html = build_report([tmp_path / "h"], tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'data-result="failed"' in html and "known failure" not in html
