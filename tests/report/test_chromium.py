"""The report renders in a real browser: headless Chromium draws every chart, offline.

Chromium is Debian's ``chromium`` package (``scripts/install_chromium.sh``, run by CI). The browser gets no
network (every host name resolves to nothing), so charts that draw prove the page is self-contained.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from personagraph.report import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (scripts/install_chromium.sh; CI installs it)"
)


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    command = [
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
        f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars",
        "--virtual-time-budget=8000", *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


@pytest.fixture(scope="module")
def page(eval_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("browser") / "report.html"
    write_report([eval_run], out)
    return out


def test_every_chart_draws(page: Path, tmp_path: Path) -> None:
    result = chromium(tmp_path, "--dump-dom", page.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    charts = page.read_text(encoding="utf-8").count('<div class="chart">')
    assert charts >= 4  # radar, radar per model, score distributions (all, per model)
    drawn = re.findall(r'<div id="chart-\d+" class="[^"]*js-plotly-plot[^"]*"', dom)
    assert len(drawn) == charts  # plotly turned every chart div into a plot
    assert dom.count('class="main-svg"') >= charts  # and drew its SVG layers
    assert dom.count("scatterpolar") + dom.count('class="trace scatter') >= 1  # radar traces
    assert 'class="point"' in dom or "class=\"bars\"" in dom  # histogram bars
    assert "&lt;script&gt;alert(" in dom and "<script>alert(" not in dom  # escaped text stays text


def test_screenshot_is_not_blank(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    result = chromium(tmp_path, "--window-size=1400,2600", f"--screenshot={shot}", page.as_uri())
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    assert shot.stat().st_size > 100_000  # a blank page of this size compresses to a few kB
    try:
        from PIL import Image  # pillow comes with matplotlib (bert-score); the size check above stands alone
    except ImportError:
        return
    image = Image.open(shot).convert("RGB")
    assert image.size == (1400, 2600)
    colors = image.getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50  # text, lines and filled charts, not a blank page
    # The radar and bar colours are on the page (the first palette colours, drawn by plotly).
    pixels = {rgb for _, rgb in colors}
    assert any(abs(r - 0x4C) < 40 and abs(g - 0x78) < 40 and abs(b - 0xA8) < 40 for r, g, b in pixels)
    assert any(abs(r - 0xF5) < 30 and abs(g - 0x85) < 40 and abs(b - 0x18) < 60 for r, g, b in pixels)
