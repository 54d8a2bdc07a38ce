"""The pages in headless Chromium: locate the example live, browse a run; nothing leaves 127.0.0.1."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from webapp_helpers import make_run, make_settings
from webapp_server import serving

CHROMIUM = "/usr/bin/chromium"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "luzern_sign.png"


def _playwright():  # type: ignore[no-untyped-def]
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright not installed: pip install playwright"
    )
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip("Debian chromium not installed: apt-get install -y chromium")
    return sync_api


def test_locate_example_and_browse_runs_in_chromium(tmp_path: Path) -> None:
    sync_api = _playwright()
    run_root = make_run(tmp_path / "eval")
    shots = Path(os.environ.get("GEOSLEUTH_WEBAPP_SHOTS", tmp_path / "shots"))
    shots.mkdir(parents=True, exist_ok=True)
    requested: list[str] = []
    with serving(make_settings(tmp_path, runs=[run_root])) as base, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=shutil.which("chromium") or CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        page = browser.new_page(viewport={"width": 1360, "height": 1000})
        page.on("request", lambda request: requested.append(request.url))
        page.on("dialog", lambda dialog: requested.append("dialog:" + dialog.message))
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(base + "/")
        page.get_by_text("offline clue pipeline").first.wait_for()
        page.screenshot(path=str(shots / "locate_empty.png"), full_page=True)
        page.click("#example")
        page.wait_for_selector("#answer", timeout=60_000)
        answer = page.locator("#answer")
        assert "Luzern" in answer.inner_text() and "Switzerland" in answer.inner_text()
        assert page.locator("#answer-coords").inner_text().startswith("47.0")
        assert page.locator("#trajectory .call").count() >= 3  # exif, ocr, clues, … as tool calls
        assert page.locator("#trajectory .tool-name", has_text="ocr").count() == 1
        _assert_map(page, "#answer-map", circle=True, truth=False)
        page.screenshot(path=str(shots / "locate_result.png"), full_page=True)
        page.set_input_files("#file", str(EXAMPLE))  # the page's own CSP must allow the blob: preview
        page.wait_for_function(
            "() => { const i = document.querySelector('img.query-img'); return i && i.complete; }"
        )
        assert page.locator("img.query-img").evaluate("img => img.naturalWidth") > 0
        page.set_input_files(
            "#file", files=[{"name": "notes.png", "mimeType": "image/png", "buffer": b"plain text"}]
        )
        page.click("#locate")
        assert "not a supported image format" in page.locator("#upload-error").inner_text()
        page.goto(base + "/#/runs")
        page.wait_for_selector("#runs tbody tr")
        assert "demo" in page.locator("#runs").inner_text()
        page.screenshot(path=str(shots / "runs.png"), full_page=True)
        page.click("#runs a")
        page.wait_for_selector("#samples tbody tr")
        assert page.locator("#samples tbody tr").count() == 3
        assert "true country" in page.locator("#samples thead").inner_text()
        _assert_map(page, "#run-map", circle=False, truth=True, lines=2)  # tokyo failed: truth only
        page.screenshot(path=str(shots / "run_detail.png"), full_page=True)
        page.click("#samples a:text('paris')")
        page.wait_for_selector("#trajectory .call")
        assert "<script>" in page.locator("#trajectory .call pre").first.inner_text()  # shown as text
        assert page.evaluate("window.__pwned") is None
        _assert_map(page, "#answer-map", circle=False, truth=True, lines=1)
        page.screenshot(path=str(shots / "run_sample.png"), full_page=True)
        browser.close()
    assert not errors, errors
    outside = [u for u in requested if not u.startswith((base + "/", "data:", "blob:" + base))]
    assert not outside, outside


def _assert_map(page, selector: str, circle: bool, truth: bool, lines: int = 0) -> None:  # type: ignore[no-untyped-def]
    """An interactive Leaflet map: offline tiles loaded, the answer, its circle, truth and error lines."""
    page.wait_for_selector(f"{selector} img.leaflet-tile-loaded", timeout=60_000)
    assert page.locator(f"{selector} .leaflet-control-zoom-in").count() == 1  # zoom and pan, not a picture
    assert page.locator(f"{selector} path.point-pred").count() >= 1
    assert page.locator(f"{selector} path.uncertainty").count() == (1 if circle else 0)
    assert (page.locator(f"{selector} path.point-truth").count() > 0) == truth
    assert page.locator(f"{selector} path.error-line").count() == lines


def test_pages_fit_a_phone_screen(tmp_path: Path) -> None:
    """At 390 px wide nothing overflows sideways: the bar chart, the tables' cards, the maps."""
    sync_api = _playwright()
    run_root = make_run(tmp_path / "eval")
    with serving(make_settings(tmp_path, runs=[run_root])) as base, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=shutil.which("chromium") or CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        page = browser.new_page(viewport={"width": 390, "height": 844}, device_scale_factor=2)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(base + "/#/runs/demo")
        page.wait_for_selector("#acc-bars .bar")
        page.wait_for_selector("#run-map img.leaflet-tile-loaded", timeout=60_000)
        widths = page.evaluate(
            "() => [document.documentElement.scrollWidth, document.querySelector('#acc-bars').scrollWidth,"
            " document.querySelector('#acc-bars').clientWidth,"
            " document.querySelector('#run-map').clientWidth]"
        )
        assert widths[0] <= 390, widths  # the page itself does not scroll sideways
        assert widths[1] <= widths[2], widths  # the bar chart fits its card
        assert 300 <= widths[3] <= 390, widths
        page.goto(base + "/#/locate")
        page.click("#example")
        page.wait_for_selector("#answer-map img.leaflet-tile-loaded", timeout=60_000)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        browser.close()
    assert not errors, errors
