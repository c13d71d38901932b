"""The compare report in a real browser: what a person sees, checked on the rendered page and its screenshot.

Headless Debian chromium (`apt-get install chromium`; .ci/run installs it) driven by Playwright
(Playwright's own browser download is not used). Without chromium or Playwright the test skips
with the reason shown, except under CI (`CI` set, e.g. `CI=true`), where that is a failure: CI
installs both, so their absence there is a broken setup.

What is checked, and how far it can be trusted (there is no OCR here):
- the page's text as laid out (Playwright's inner_text, which leaves out hidden text): the provenance
  header with the trace's and cluster's real sha256, the version and a UTC date; the table's headers
  with units and one fixed number of decimals per column;
- the screenshot: the header's and the table's boxes are painted (dark text pixels inside each box
  of the full-page screenshot), every plot image decoded and visible;
- the plots differ between candidates, measured on the screenshot: in the utilisation small
  multiples each panel draws its candidate in the same blue, so the blue area of a panel measures
  its curve. Two candidates with different utilisation must differ by more than 3 %; the same
  measure on two identical panels (drawn here, `test_the_panel_measure_sees_identical_panels_as_equal`)
  agrees within 1 %, so a difference is the data's, not the layout's.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from ci_rule import skip_or_fail  # tests/ci_rule.py
from click.testing import CliRunner

from gputwin import __version__
from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.cli.main import cli

CHROMIUM = Path(os.environ.get("GPUTWIN_CHROMIUM", "/usr/bin/chromium"))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# fifo and sjf, each with two placers: utilisation, JCT and span all differ between them on the demo trace.
CANDIDATES = ["--policies", "fifo,sjf", "--placements", "consolidate,random"]

# Per image: decoded (complete, naturalWidth) and laid out on the page (a non-empty box, not hidden).
IMAGES_JS = """() => [...document.images].map(img => {
  const box = img.getBoundingClientRect(), style = getComputedStyle(img);
  return {alt: img.alt, complete: img.complete, naturalWidth: img.naturalWidth, width: box.width,
          height: box.height, shown: style.visibility !== "hidden" && style.display !== "none"};
})"""


@pytest.fixture(scope="module")
def chromium() -> Path:
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        found = shutil.which("chromium")
        skip_or_fail(f"no chromium at {CHROMIUM}{f' (one is at {found}: set GPUTWIN_CHROMIUM)' if found else ''}; "
                     "install it with `apt-get install -y chromium`")  # fmt: skip
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        skip_or_fail("Playwright is not installed: pip install -e '.[test]'")
    return CHROMIUM


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    args = ["compare", "--trace", str(demo_trace_path()), "--cluster", str(demo_cluster_path()), "--out", str(out),
            *CANDIDATES, "--jobs", "1", "--quiet", "--report-format", "both"]  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:  # what the provenance header records, as if typed
        patch.setattr(sys, "argv", ["gputwin", *args])
        result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.stderr
    return out / "index.html"


@pytest.fixture(scope="module")
def seen(chromium: Path, report: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The page opened in headless chromium: its images, laid-out texts, boxes and a full-page screenshot."""
    from playwright.sync_api import sync_playwright

    shot = tmp_path_factory.mktemp("shot") / "report.png"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(report.as_uri(), wait_until="load")
            images: list[dict[str, Any]] = page.evaluate(IMAGES_JS)
            got = {"errors": errors, "images": images, "shot": shot,
                   "visible": [page.locator("img").nth(i).is_visible() for i in range(len(images))],
                   "provenance": page.locator("#provenance").inner_text(),
                   "rows": [[c.inner_text() for c in row.locator("th, td").all()]
                            for row in page.locator("#ranking tr").all()],
                   "boxes": {sel: page.locator(sel).bounding_box()
                             for sel in ("#provenance", "#ranking", "#utilization img")}}  # fmt: skip
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    return got


def test_every_plot_loads_and_is_visible_in_headless_chromium(seen: dict[str, Any], report: Path) -> None:
    images = seen["images"]
    assert seen["errors"] == []
    assert len(images) == len(list(report.parent.glob("*.png"))) == 4, images  # span varies here: all four
    for image, visible in zip(images, seen["visible"]):
        assert image["complete"] and image["naturalWidth"] > 0, image  # the data URI decoded as an image
        assert image["width"] > 100 and image["height"] > 50 and image["shown"] and visible, image
    data = seen["shot"].read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 20_000


def test_the_page_shows_provenance_with_the_inputs_real_hashes(seen: dict[str, Any]) -> None:
    text = seen["provenance"]
    for path in (demo_trace_path(), demo_cluster_path()):
        assert f"{path} (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()}" in text
    assert f"{__version__} (" in text and "core)" in text
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", text)
    assert "gputwin compare --trace" in text and "--report-format both" in text


def test_the_table_shows_units_and_fixed_decimals_per_column(seen: dict[str, Any]) -> None:
    head, *rows = seen["rows"]
    assert head == ["#", "candidate", "jobs", "avg JCT (s)", "p99 JCT (s)", "avg queue (s)", "p99 queue (s)",
                    "GPU util (%)", "overhead (%)", "preemptions"]  # fmt: skip
    assert len(rows) == 4 and rows[0][2] == "3,375"  # the demo trace's jobs, thousands separated
    for column in range(3, len(head)):
        assert len({row[column].partition(".")[2].__len__() for row in rows}) == 1, [r[column] for r in rows]


def _crop(shot: Path, box: dict[str, float]) -> Any:
    import numpy as np
    from PIL import Image

    image = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    x, y, w, h = (round(box[k]) for k in ("x", "y", "width", "height"))
    return image[y:y + h, x:x + w]


@pytest.mark.parametrize("selector", ["#provenance", "#ranking"])
def test_the_header_and_table_are_painted_in_the_screenshot(seen: dict[str, Any], selector: str) -> None:
    pixels = _crop(seen["shot"], seen["boxes"][selector])
    dark = (pixels.max(axis=2) < 100).mean()
    assert pixels.size and 0.01 < dark < 0.6, dark  # text drawn there: neither blank nor a filled block


def panel_areas(pixels: Any) -> list[int]:
    """Blue pixels (each panel's own curve and its fill) per panel of the top row of small multiples,
    panels told apart by the blue-free columns between them."""
    top = pixels[: pixels.shape[0] // 2]
    blue = (top[:, :, 2] - top[:, :, 0]) > 15
    per_column = blue.sum(axis=0)
    areas, run = [], 0
    for count in [*per_column, 0]:
        if count:
            run += int(count)
        elif run:
            areas.append(run)
            run = 0
    return areas


def test_the_utilisation_panels_differ_between_candidates_in_the_screenshot(seen: dict[str, Any]) -> None:
    areas = panel_areas(_crop(seen["shot"], seen["boxes"]["#utilization img"]))
    assert len(areas) == 3, areas  # the top row: three of the four candidates
    # Columns 2 and 3 (same width, both without y tick labels): sjf/consolidate and fifo/random.
    assert abs(areas[1] - areas[2]) / max(areas[1:]) > 0.03, areas


def test_the_panel_measure_sees_identical_panels_as_equal(tmp_path: Path) -> None:
    """The control for the test above: the same candidate in two panels measures the same (2 rows, as there)."""
    import numpy as np
    from PIL import Image

    from gputwin.adapters.traces import read_trace
    from gputwin.api.loader import load_cluster
    from gputwin.core.model import Candidate
    from gputwin.sim.compare import run_candidate
    from gputwin.sim.plots import _utilization

    cluster, jobs = load_cluster(demo_cluster_path()), tuple(read_trace(demo_trace_path()).jobs)  # hours of it: curves
    a, b = (run_candidate(cluster, jobs, Candidate(q, "consolidate"), 0) for q in ("fifo", "sjf"))
    buffer = io.BytesIO()
    _utilization([a, b, b, a]).savefig(buffer, format="png", dpi=100)
    areas = panel_areas(np.asarray(Image.open(buffer).convert("RGB")).astype(int))
    assert len(areas) == 3 and abs(areas[1] - areas[2]) / max(areas[1:]) < 0.01, areas
