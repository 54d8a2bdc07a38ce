"""The offline HTML report in headless Chromium: no outside requests, the map and a trajectory page render."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from eval_data import make_csv_dataset, write_plan
from typer.testing import CliRunner

from geosleuth.cli.app import app

CHROMIUM = "/usr/bin/chromium"
PLAN = {
    "paris": {
        "lat": 48.85,
        "lon": 2.35,
        "country": "France",
        "tools": [["image_zoom_in_tool", True, False]],
        "raw": "It is Paris <script>alert(1)</script>" + " and so on" * 30_000,  # 300 kB of answer text
    },
    "berlin": {"lat": 50.11, "lon": 8.68, "country": "Germany"},
    "tokyo": {"raise": "boom"},
    "nyc": {"lat": 40.7, "lon": -74.0},
    "sydney": {"lat": -37.8, "lon": 144.9},
    "cairo": {"status": "timeout"},
    "lima": {"lat": -12.0, "lon": -77.0},
    "delhi": {"lat": 19.07, "lon": 72.87},
}


def _playwright():  # type: ignore[no-untyped-def]
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright not installed: pip install playwright"
    )
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip("Debian chromium not installed: apt-get install -y chromium")
    return sync_api


def test_html_report_renders_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sync_api = _playwright()
    data = make_csv_dataset(tmp_path / "bench")
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", PLAN)))
    result = CliRunner().invoke(
        app,
        [
            "eval",
            str(data),
            "--out",
            str(tmp_path / "run"),
            "--agent-fn",
            "eval_fake_agent:planned",
            "--no-report",
        ],
    )
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["report", str(tmp_path / "run"), "--no-plots"])
    assert result.exit_code == 0, result.output
    index = tmp_path / "run" / "html" / "index.html"
    requested: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=shutil.which("chromium") or CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        page = browser.new_page()
        page.on("request", lambda request: requested.append(request.url))
        page.on("console", lambda message: requested.append("console:" + message.text))
        page.on("dialog", lambda dialog: requested.append("dialog:" + dialog.message))
        page.goto(index.as_uri())
        assert page.locator("#worldmap").is_visible()
        assert page.locator("#worldmap .err").count() == 8  # every sample with a truth point
        assert page.locator("#worldmap .err line").count() == 6  # one error line per prediction
        if importlib.util.find_spec("geosleuth.gazetteer.index") is not None:
            assert page.locator("#worldmap path.land").count() > 150  # country outlines
        box = page.locator("#worldmap").bounding_box()
        assert box is not None and box["width"] > 300
        assert page.locator("#samples tbody tr").count() == 8
        page.fill("#filter", "model_error")  # the inline script runs under the hash-based CSP
        assert page.locator("#samples tbody tr:visible").count() == 1
        legend = "getComputedStyle(document.querySelector('.legend .e0')).backgroundColor"
        assert page.evaluate(legend) == "rgb(26, 127, 55)"  # so does the inline stylesheet
        page.fill("#filter", "")
        page.click("#samples a:text('paris')")
        page.wait_for_load_state()
        assert page.url.endswith("samples/paris.html")
        assert page.evaluate("document.querySelector('img.main').naturalWidth") == 64
        assert page.locator("#trajectory .turn").count() == 2
        assert page.locator("#trajectory .call b").first.inner_text() == "image_zoom_in_tool"
        answer = page.locator("pre").last.inner_text()
        assert answer.startswith("It is Paris <script>alert(1)</script>")
        assert "cut to 20,000" in answer and "full 300,037 characters are in trajectories.jsonl" in answer
        browser.close()
    outside = [u for u in requested if not u.startswith(("file://", "data:"))]
    assert outside == []  # no request, no dialog, no console message (a CSP violation logs one)
    assert (tmp_path / "run" / "html" / "samples" / "paris.html").stat().st_size < 100_000
    assert "unsafe-inline" not in index.read_text(encoding="utf-8")
