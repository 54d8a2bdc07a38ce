"""Input and messages in headless Chromium through the real server: the chooser from the keyboard,
a pasted and a dropped image, disabled fields that look disabled, a model error told by its
cause with the server's words folded away, and the HTML report on a phone (tool-output fences:
test_webapp_browser_takeaway.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from test_webapp_browser import CHROMIUM, EXAMPLE, _playwright
from webapp_helpers import make_run, make_settings
from webapp_server import serving

from geosleuth.testing import FakeOpenAIServer
from geosleuth.testing.fake_openai import error, reply, tool_call

CONTEXT_ERROR = (
    "This model's maximum context length is 4096 tokens. However, you requested 9012 tokens "
    "(8500 in the messages, 512 in the completion). Please reduce the length of the messages."
)
GIVE_FILE = """([selector, kind, bytes]) => {
  const name = kind === 'paste' ? 'image.png' : 'dropped.png';
  const data = new DataTransfer();
  data.items.add(new File([new Uint8Array(bytes)], name, {type: 'image/png'}));
  const event = kind === 'paste'
    ? new ClipboardEvent('paste', {clipboardData: data, bubbles: true})
    : new DragEvent('drop', {dataTransfer: data, bubbles: true, cancelable: true});
  (kind === 'paste' ? document : document.querySelector(selector)).dispatchEvent(event);
}"""


def _browser(pw):  # type: ignore[no-untyped-def]
    return pw.chromium.launch(
        executable_path=shutil.which("chromium") or CHROMIUM, headless=True, args=["--no-sandbox"]
    )


@pytest.mark.parametrize("width", [1366, 390])
def test_keyboard_paste_drop_and_disabled_fields(tmp_path: Path, width: int) -> None:
    sync_api = _playwright()
    image = list(EXAMPLE.read_bytes())
    with serving(make_settings(tmp_path)) as base, sync_api.sync_playwright() as pw:
        browser = _browser(pw)
        page = browser.new_page(viewport={"width": width, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        choosers: list = []  # listened for from the start: Playwright intercepts choosers once listening,
        page.on("filechooser", lambda chooser: choosers.append(chooser))  # and that set-up can lose a race
        page.goto(base + "/")
        page.wait_for_selector("#drop")
        for _ in range(8):  # the chooser is in the tab order, after the bar's links
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.id") == "file":
                break
        assert page.evaluate("document.activeElement.id") == "file"
        outline = page.evaluate("getComputedStyle(document.querySelector('#drop')).outlineStyle")
        assert outline == "solid"  # the focused chooser shows it
        page.keyboard.press("Space")
        for _ in range(100):  # the chooser opens from the key alone
            if choosers:
                break
            page.wait_for_timeout(100)
        assert choosers, "Space on the focused chooser opened no file chooser"
        choosers[0].set_files(str(EXAMPLE))
        page.wait_for_selector("#drop b:text('luzern_sign.png')")

        page.evaluate(GIVE_FILE, ["#drop", "paste", image])
        page.wait_for_selector("#drop b:text('pasted-image.png')")
        assert page.locator("img.query-img").count() == 1
        page.evaluate(GIVE_FILE, ["#drop", "drop", image])
        page.wait_for_selector("#drop b:text('dropped.png')")

        # offline: the model's fields are disabled and look it (greyed, no text cursor)
        looks = page.evaluate(
            "() => { const s = getComputedStyle(document.querySelector('#samples'));"
            " return [document.querySelector('#samples').disabled, s.cursor, s.backgroundColor]; }"
        )
        assert looks == [True, "not-allowed", "rgb(238, 241, 244)"], looks
        page.click("#locate")  # the dropped image is the one sent
        page.wait_for_selector("#answer", timeout=90_000)
        assert "dropped.png" in page.locator(".job-head").inner_text()
        browser.close()
    assert not errors, errors


@pytest.mark.parametrize("width", [1366, 390])
def test_model_errors_in_words(tmp_path: Path, width: int) -> None:
    sync_api = _playwright()
    script = [
        reply("Zooming.", tool_calls=[tool_call("image_zoom_in_tool", {"bbox_2d": [100, 150, 500, 350]})]),
        error(400, CONTEXT_ERROR),
    ]
    with FakeOpenAIServer(script) as server:
        settings = make_settings(
            tmp_path,
            model="fake-vlm",
            base_url=server.base_url,
            prompt_style="thinking_with_map",
            agent_options={"tools": ["image_zoom_in_tool"], "tool_calling": "native", "max_retries": 0},
        )
        with serving(settings) as base, sync_api.sync_playwright() as pw:
            browser = _browser(pw)
            page = browser.new_page(viewport={"width": width, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(base + "/")
            page.click("#example")
            page.wait_for_selector("#answer", timeout=60_000)
            banner = page.locator("#answer .banner.error")
            assert (
                banner.locator("b").inner_text().startswith("The request was longer than the model's context")
            )
            raw = banner.locator("details.raw")
            assert not raw.evaluate("d => d.open") and "maximum context length" in raw.text_content()
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            shots = Path(os.environ.get("GEOSLEUTH_WEBAPP_SHOTS", tmp_path / "shots"))
            shots.mkdir(parents=True, exist_ok=True)
            page.locator("#answer").screenshot(path=str(shots / f"model_error_{width}.png"))
            browser.close()
    assert not errors, errors


def test_html_report_fits_a_phone(tmp_path: Path) -> None:
    sync_api = _playwright()
    run_root = make_run(tmp_path / "eval")
    with serving(make_settings(tmp_path, runs=[run_root])) as base, sync_api.sync_playwright() as pw:
        browser = _browser(pw)
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.goto(base + "/runs/demo/report/")
        assert page.locator('meta[name="viewport"]').count() == 1
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        colours = page.evaluate(
            "() => [...document.querySelectorAll('.legend b')].map(b => getComputedStyle(b).color)"
        )
        assert colours == ["rgb(26, 127, 55)", "rgb(31, 111, 235)"]  # truth and answer as in the app
        browser.close()
