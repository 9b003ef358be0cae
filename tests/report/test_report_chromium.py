"""The report as a person sees it: rendered by headless Chromium, measured, and photographed.

Chromium is a test requirement (Debian: ``apt-get install chromium``): without it this fails
rather than skips, so a machine that cannot check the page says so.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from report_helpers import ReportDom, events_of

from pytest_elr.checker import check_history
from pytest_elr.report import build_report, find_runs

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]

#: run in the page after layout: what each run's timeline looks like on screen
MEASURE = """<script>
const runs = [...document.querySelectorAll('section.run')].map(s => {
  const svg = s.querySelector('svg.timeline'), box = svg.getBoundingClientRect();
  const label = svg.querySelector('text.steplabel');
  const seen = q => [...s.querySelectorAll(q)].filter(e => { const b = e.getBoundingClientRect();
                                                              return b.width > 0 && b.height > 0; }).length;
  return {id: s.dataset.runId, width: box.width, height: box.height, bands: seen('g.band rect'),
          faults: seen('g.fault path'), ticks: seen('rect.tick'), lost_ticks: seen('rect.tick.lost'),
          label_width: label ? label.getBBox().width : 0,
          facts: Object.fromEntries(['acked', 'read', 'lost'].map(k => [k, s.querySelector('dd.' + k).innerText]))};
});
const pre = document.createElement('pre');
pre.id = 'measured';
pre.textContent = JSON.stringify(runs);
document.body.appendChild(pre);
</script>"""


@pytest.fixture(scope="session")
def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    pytest.fail("headless Chromium is needed to check the report: apt-get install chromium")


def browse(chromium: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"chromium-profile-{len(list(tmp_path.glob('chromium-profile-*')))}"
    return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=120, check=True)


def test_timelines_render_with_the_histories_numbers(chromium: str, history_root: Path, tmp_path: Path) -> None:
    report = build_report([history_root], tmp_path / "report.html")
    probe = tmp_path / "probe.html"
    probe.write_text(report.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = browse(chromium, tmp_path, "--window-size=1280,1000", "--dump-dom", probe.as_uri()).stdout
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    measured = {m["id"]: m for m in json.loads(found.group(1).replace("&amp;", "&").replace("&lt;", "<")
                                                   .replace("&gt;", ">").replace("&quot;", '"'))}
    runs = find_runs([history_root])
    assert len(measured) == len(runs) == 9
    for run in runs:
        events = events_of(run)
        verdict = check_history(events)
        m = measured[json.loads((run / "meta.json").read_text())["run_id"]]
        assert m["facts"] == {"acked": str(verdict.acked), "read": str(verdict.read), "lost": str(verdict.lost_count)}
        assert m["width"] >= 1000 and m["height"] >= 150, m  # drawn at full size, not collapsed
        assert m["bands"] >= 3 and m["ticks"] > 0 and m["label_width"] > 10, m  # lanes, ticks, text with a font
        assert m["faults"] == sum(e["type"] == "fault" for e in events)
        assert (m["lost_ticks"] > 0) == bool(verdict.lost_count)
    assert len(ReportDom(dom).sections) == 9  # and the static checks hold on Chromium's DOM too


def png_pixels(png: bytes) -> tuple[int, int, bytes]:
    """Width, height and the (filtered) pixel rows of a PNG: enough to tell a blank page."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    data, pos = b"", 8
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        if kind == b"IDAT":
            data += png[pos + 8:pos + 8 + length]
        pos += 12 + length
    return width, height, zlib.decompress(data)


def test_screenshot_is_not_blank(chromium: str, history_root: Path, tmp_path: Path) -> None:
    report = build_report([history_root], tmp_path / "report.html")
    shot = tmp_path / "report.png"
    browse(chromium, tmp_path, "--window-size=1280,2400", f"--screenshot={shot}", report.as_uri())
    blank = tmp_path / "blank.png"
    (tmp_path / "blank.html").write_text('<body style="background:#f3f4f6"></body>', encoding="utf-8")
    browse(chromium, tmp_path, "--window-size=1280,2400", f"--screenshot={blank}", (tmp_path / "blank.html").as_uri())
    width, height, rows = png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 2400)
    # filtered rows of a flat page are almost all zero bytes; charts, bands and text are not
    drawn, flat = (len(px) - px.count(0) for px in (rows, png_pixels(blank.read_bytes())[2]))
    assert drawn > 20 * max(flat, 1_000), (drawn, flat)
