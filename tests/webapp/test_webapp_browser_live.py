"""The investigator's screen in headless Chromium at 1366 and 390 px, through the real server:
offline steps stream with a running clock, a job can be cancelled, a waiting job shows its
place in the queue, and on a phone the job and then the answer scroll into view."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from test_webapp_browser import CHROMIUM, _playwright
from webapp_helpers import make_settings
from webapp_server import serving

WIDTHS = {"desktop": (1366, 900), "phone": (390, 844)}


def _in_view(page, selector: str) -> bool:  # type: ignore[no-untyped-def]
    """The element is on screen below the sticky bar, its top above the fold."""
    return bool(
        page.evaluate(
            "s => { const r = document.querySelector(s).getBoundingClientRect();"
            " const bar = document.querySelector('header.top').getBoundingClientRect().bottom;"
            " return r.top >= bar - 2 && r.bottom > bar && r.top < window.innerHeight - 40; }",
            selector,
        )
    )


@pytest.mark.parametrize("screen", sorted(WIDTHS))
def test_steps_stream_then_the_answer_comes_into_view(tmp_path: Path, screen: str) -> None:
    sync_api = _playwright()
    shots = Path(os.environ.get("GEOSLEUTH_WEBAPP_SHOTS", tmp_path / "shots"))
    shots.mkdir(parents=True, exist_ok=True)
    width, height = WIDTHS[screen]
    with serving(make_settings(tmp_path)) as base, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=shutil.which("chromium") or CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        page = browser.new_page(viewport={"width": width, "height": height})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(base + "/")
        page.click("#example")
        # the EXIF step arrives while the job still runs: a step, a clock and a truthful status
        page.wait_for_selector("#live .call .tool-name:text('exif_gps')", timeout=60_000)
        running = page.evaluate(
            "() => [document.querySelector('#job-status-text').textContent,"
            " document.querySelector('#job-elapsed').textContent, !!document.querySelector('#cancel-job')]"
        )
        assert running[2] and running[1].endswith(" s"), running
        assert running[0].endswith("…") and "Connecting" not in running[0], running
        assert "Pipeline steps" in page.locator("#live").inner_text()
        assert "done at" in page.locator("#live .call-head").first.inner_text()
        assert _in_view(page, "#job-status"), "the running job is off screen"
        page.screenshot(path=str(shots / f"live_steps_{screen}.png"))
        page.wait_for_selector("#answer", timeout=90_000)
        assert _in_view(page, "#answer"), "the answer arrived off screen"
        assert page.locator("#cancel-job").count() == 0 and page.locator("#job-status").count() == 0
        assert page.locator("#trajectory .call").count() >= 4  # the record shows every step
        page.screenshot(path=str(shots / f"live_answer_{screen}.png"))
        browser.close()
    assert not errors, errors


def test_cancel_and_queue_position_in_the_page(tmp_path: Path) -> None:
    sync_api = _playwright()
    shots = Path(os.environ.get("GEOSLEUTH_WEBAPP_SHOTS", tmp_path / "shots"))
    shots.mkdir(parents=True, exist_ok=True)
    with serving(make_settings(tmp_path, concurrency=1)) as base, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=shutil.which("chromium") or CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        page = browser.new_page(viewport={"width": 390, "height": 844})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(base + "/")
        ahead = page.request.post(base + "/api/locate", multipart={"example": "1"}).json()
        page.click("#example")  # waits behind the job posted above
        page.wait_for_function(
            "() => document.querySelector('#job-status-text')?.textContent.includes('next in line')"
        )
        page.screenshot(path=str(shots / "queued_phone.png"))
        page.click("#cancel-job")
        page.wait_for_function(
            "() => document.querySelector('#job-status-text')?.textContent.startsWith('Cancelled')"
        )
        assert page.locator("#cancel-job").count() == 0
        page.wait_for_selector(".jobs-list .pill:text('cancelled')")
        page.request.post(base + f"/api/jobs/{ahead['id']}/cancel")
        page.screenshot(path=str(shots / "cancelled_phone.png"), full_page=True)
        browser.close()
    assert not errors, errors
