"""No model or dataset text reaches innerHTML (issue 41, item 9): Leaflet's ``bindTooltip(label)``
sets a string as HTML, so a ``poi`` of ``<a href=…>Session expired</a>`` rendered a live link
on the answer map. Checked in headless Chromium through the real server."""

from __future__ import annotations

import json
from pathlib import Path

from test_webapp_browser import _playwright
from test_webapp_browser_input import _browser
from webapp_helpers import make_settings
from webapp_server import serving

from geosleuth.testing import FakeOpenAIServer
from geosleuth.testing.fake_openai import reply

PLANTED = '<a id="planted" href="#x">Session expired</a><img id="planted-img" src="x">'


def test_a_model_answer_with_markup_is_shown_as_text_on_the_map(tmp_path: Path) -> None:
    sync_api = _playwright()
    answer = {"lat": 47.0502, "lon": 8.3093, "poi": PLANTED, "city": "Luzern", "country": "Switzerland"}
    with FakeOpenAIServer([reply(json.dumps(answer))]) as server:
        settings = make_settings(
            tmp_path, model="fake-vlm", base_url=server.base_url, prompt_style="direct",
            agent_options={"max_retries": 0},
        )  # fmt: skip
        with serving(settings) as base, sync_api.sync_playwright() as pw:
            browser = _browser(pw)
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(base + "/")
            page.click("#example")
            page.wait_for_selector("#answer .leaflet-interactive.point-pred", timeout=60_000)
            page.hover("#answer .leaflet-interactive.point-pred", force=True)
            tooltip = page.wait_for_selector(".leaflet-tooltip", timeout=10_000)
            assert PLANTED in tooltip.text_content()  # the markup, as text
            assert page.locator("#planted, #planted-img").count() == 0  # never parsed as elements
            browser.close()
    assert not errors, errors
