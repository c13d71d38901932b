"""The compare report in a real browser: index.html opens from disk with every plot decoded and visible.

Headless Debian chromium (`apt-get install chromium`; .ci/run installs it) driven by Playwright
(Playwright's own browser download is not used). Without chromium or Playwright the test skips
with the reason shown, except under CI (`CI` set, e.g. `CI=true`), where that is a failure: CI
installs both, so their absence there is a broken setup.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from ci_rule import skip_or_fail  # tests/ci_rule.py
from click.testing import CliRunner

from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.cli.main import cli

CHROMIUM = Path(os.environ.get("GPUTWIN_CHROMIUM", "/usr/bin/chromium"))
PLOTS = 4  # jct_cdf, queue_by_partition, utilization, span_hist
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

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
            "--policies", "fifo,sjf", "--placements", "consolidate", "--jobs", "1", "--quiet"]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.stderr
    return out / "index.html"


def test_every_plot_loads_and_is_visible_in_headless_chromium(
    chromium: Path, report: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    shot = tmp_path / "report.png"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(report.as_uri(), wait_until="load")
            images: list[dict[str, Any]] = page.evaluate(IMAGES_JS)
            visible = [page.locator("img").nth(i).is_visible() for i in range(len(images))]
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert len(images) == PLOTS, images
    for image, seen in zip(images, visible):
        assert image["complete"] and image["naturalWidth"] > 0, image  # the data URI decoded as an image
        assert image["width"] > 100 and image["height"] > 50 and image["shown"] and seen, image
    assert {i["alt"] for i in images} >= {
        "Job completion time, CDF per candidate",
        "GPU utilisation over time",
    }
    data = shot.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 20_000
