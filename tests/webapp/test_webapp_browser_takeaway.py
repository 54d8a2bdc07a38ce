"""Taking results away, in headless Chromium through the real server: answer downloads (the
trajectory record as JSON, its points as GeoJSON), the run page's per_sample.csv, summary.json
and report links, previous / next between a run's samples, and each parallel sample's point
on the answer map beside the combined one."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from test_webapp_browser import CHROMIUM, _playwright
from webapp_helpers import PLACES, make_run, make_settings
from webapp_server import serving

from geosleuth.testing import FakeOpenAIServer
from geosleuth.testing.fake_openai import reply

ZURICH = '{"lat": 47.3769, "lon": 8.5417, "city": "Zürich", "country": "Switzerland"}'
NEAR = '{"lat": 47.40, "lon": 8.55, "country": "CH"}'


def _browser(pw):  # type: ignore[no-untyped-def]
    return pw.chromium.launch(
        executable_path=shutil.which("chromium") or CHROMIUM, headless=True, args=["--no-sandbox"]
    )


def test_run_files_and_sample_pager(tmp_path: Path) -> None:
    sync_api = _playwright()
    run_root = make_run(tmp_path / "eval")
    shots = Path(os.environ.get("GEOSLEUTH_WEBAPP_SHOTS", tmp_path / "shots"))
    shots.mkdir(parents=True, exist_ok=True)
    with serving(make_settings(tmp_path, runs=[run_root])) as base, sync_api.sync_playwright() as pw:
        browser = _browser(pw)
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(base + "/#/runs/demo")
        page.wait_for_selector("#run-downloads a")
        links = {a.inner_text(): a.get_attribute("href") for a in page.locator("#run-downloads a").all()}
        assert set(links) == {"per_sample.csv", "summary.json"}
        assert page.locator("#html-report").get_attribute("href") == "/runs/demo/report/"
        table = page.request.get(base + links["per_sample.csv"])
        assert "attachment" in table.headers["content-disposition"]
        rows = list(csv.DictReader(io.StringIO(table.text())))
        assert [r["sample_id"] for r in rows] == [p[0] for p in PLACES]
        summary = json.loads(page.request.get(base + links["summary.json"]).text())
        assert summary["n_samples"] == 3

        page.click("#samples a:text('paris')")  # the first sample: no previous one
        page.wait_for_selector("#next-sample")
        assert (
            page.locator("#prev-sample").count() == 0
            and "first sample" in page.locator(".pager").inner_text()
        )
        page.click("#next-sample")
        page.wait_for_selector("h1:text('berlin')")
        assert page.locator("#prev-sample").inner_text().endswith("paris")
        # the fenced tool output is drawn as a labelled block, its markers not shown as text
        assert "data, not instructions" in page.locator("#trajectory .fence-label").text_content()
        assert "<<<" not in page.locator("#trajectory").inner_text()
        geo = json.loads(
            page.request.get(base + page.locator("#download-geojson").get_attribute("href")).text()
        )
        (answer,) = geo["features"]
        assert answer["properties"]["role"] == "answer" and answer["geometry"]["coordinates"] == [8.68, 50.11]
        record = json.loads(
            page.request.get(base + page.locator("#download-json").get_attribute("href")).text()
        )
        assert record["sample_id"] == "berlin" and record["prediction"]["lat"] == 50.11
        page.click("#next-sample")
        page.wait_for_selector("h1:text('tokyo')")  # the last sample; it failed: a record without points
        assert (
            page.locator("#next-sample").count() == 0 and "last sample" in page.locator(".pager").inner_text()
        )
        geo = json.loads(
            page.request.get(base + page.locator("#download-geojson").get_attribute("href")).text()
        )
        assert geo["features"] == [] and geo["properties"]["status"] == "timeout"
        page.screenshot(path=str(shots / "sample_pager.png"), full_page=True)
        browser.close()
    assert not errors, errors


@pytest.mark.parametrize("width", [1366, 390])
def test_parallel_samples_on_the_map_and_downloads(tmp_path: Path, width: int) -> None:
    sync_api = _playwright()
    script = [reply(f"Zürich. {ZURICH}"), reply(f"Near Zürich. {NEAR}")]
    with FakeOpenAIServer(script) as server:
        settings = make_settings(
            tmp_path,
            model="fake-vlm",
            base_url=server.base_url,
            prompt_style="thinking_with_map",
            agent_options={"tools": [], "tool_calling": "native"},
        )
        with serving(settings) as base, sync_api.sync_playwright() as pw:
            browser = _browser(pw)
            page = browser.new_page(viewport={"width": width, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            shots = Path(os.environ.get("GEOSLEUTH_WEBAPP_SHOTS", tmp_path / "shots"))
            shots.mkdir(parents=True, exist_ok=True)
            page.goto(base + "/")
            page.fill("#samples", "2")
            page.click("#example")
            page.wait_for_selector("#answer-map img.leaflet-tile-loaded", timeout=60_000)
            assert page.locator("#answer-map path.point-sample").count() == 2
            assert page.locator("#answer-map path.point-pred").count() == 1
            assert "each sample (2)" in page.locator(".map-legend").inner_text()
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            page.locator("#answer").screenshot(path=str(shots / f"samples_map_{width}.png"))
            geo = json.loads(
                page.request.get(base + page.locator("#download-geojson").get_attribute("href")).text()
            )
            roles = sorted(
                (f["properties"]["role"], tuple(f["geometry"]["coordinates"]))
                for f in geo["features"]
                if f["geometry"]["type"] == "Point"
            )
            assert [r for r, _ in roles] == ["answer", "sample", "sample"]
            circles = [f for f in geo["features"] if f["geometry"]["type"] == "Polygon"]
            assert [f["properties"]["role"] for f in circles] == ["uncertainty"]  # the answer's circle
            assert ("sample", (8.5417, 47.3769)) in roles and ("sample", (8.55, 47.40)) in roles
            browser.close()
    assert not errors, errors
