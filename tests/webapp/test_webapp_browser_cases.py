"""The case file in headless Chromium at 1366 and 390 px, through the real server: an upload with
a 300-character name never widens the page, focus lands on the answer, the map stays under the
bar, a dropped pin measures distances, every export opens and checks out (KML parsed, polygon
closed, hash equal to the file's), no server path shows anywhere, a case keeps its notes and a
re-run side by side, and all of it is still there after the server restarts."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_webapp_browser import CHROMIUM, EXAMPLE, _playwright
from webapp_helpers import make_settings
from webapp_server import serving

WIDTHS = {1366: 900, 390: 844}
KML = {"k": "http://www.opengis.net/kml/2.2"}


def _no_overflow(page, width: int) -> None:  # type: ignore[no-untyped-def]
    wide = page.evaluate("() => document.documentElement.scrollWidth")
    culprits = page.evaluate(
        "w => [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > w + 1)"
        ".slice(0, 5).map(e => e.tagName + '#' + e.id + '.' + e.className)",
        width,
    )
    assert wide <= width, f"the page is {wide} px wide in a {width} px window: {culprits}"


@pytest.mark.slow
@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_case_file_in_chromium(tmp_path: Path, width: int) -> None:
    sync_api = _playwright()
    data = EXAMPLE.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    name = "Hertensteinstrasse_" + "x" * 281 + ".png"  # 300 characters, no break opportunity
    settings = make_settings(tmp_path)
    server_paths = [str(tmp_path), str(tmp_path.resolve())]
    errors: list[str] = []
    dialogs: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=shutil.which("chromium") or CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        page = browser.new_page(viewport={"width": width, "height": WIDTHS[width]})
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))
        with serving(settings) as base:
            page.goto(base + "/")
            page.set_input_files("#file", {"name": name, "mimeType": "image/png", "buffer": data})
            _no_overflow(page, width)
            page.click("#locate")
            page.wait_for_selector("#answer", timeout=120_000)
            assert page.evaluate("() => document.activeElement.id") == "answer"
            _no_overflow(page, width)
            assert (
                int(page.evaluate("() => getComputedStyle(document.querySelector('header.top')).zIndex"))
                > 1000
            )
            job_id = page.evaluate("() => location.hash").rsplit("/", 1)[-1]
            html = page.content()
            assert not any(p in html for p in server_paths)

            page.wait_for_selector("#answer-map .leaflet-tile-loaded")
            box = page.locator("#answer-map").bounding_box()
            page.locator("#answer-map").click(position={"x": box["width"] * 0.7, "y": box["height"] * 0.6})
            page.wait_for_selector("#pin-distances li")
            assert "km to the answer" in page.locator("#pin-distances").inner_text()

            texts = {}
            for fmt in ("json", "geojson", "kml", "csv", "html"):
                link = page.locator(f"#download-{fmt}")
                response = page.request.get(base + link.get_attribute("href"))
                assert response.ok, fmt
                assert "Hertensteinstrasse_xxx" in response.headers["content-disposition"]
                texts[fmt] = response.text()
                assert digest in texts[fmt] and not any(p in texts[fmt] for p in server_paths), fmt
            assert json.loads(texts["json"])["provenance"]["image"]["original_name"] == name
            geo = json.loads(texts["geojson"])
            ring = next(f for f in geo["features"] if f["geometry"]["type"] == "Polygon")["geometry"]
            assert ring["coordinates"][0][0] == ring["coordinates"][0][-1]
            kml = ET.fromstring(texts["kml"].encode())
            coords = kml.find(".//k:Polygon//k:coordinates", KML).text.split()
            assert coords[0] == coords[-1] and len(coords) > 3
            assert next(csv.DictReader(io.StringIO(texts["csv"])))["image_sha256"] == digest
            report = browser.new_page(viewport={"width": width, "height": WIDTHS[width]})
            report.on(
                "console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None
            )
            report.goto(base + page.locator("#download-html").get_attribute("href"))
            assert digest in report.content()
            _no_overflow(report, width)
            report.close()

            page.click("#job-case")
            page.wait_for_selector("#case-notes")
            page.fill("#case-notes", "Sign photographed in Luzern; compare with street view.")
            page.fill("#case-tags", "lucerne, signage")
            page.click("#case-save")
            page.wait_for_function("() => document.querySelector('#case-saved').textContent !== ''")
            assert page.locator("#case-saved").inner_text().startswith("Saved"), page.locator(
                "#case-saved"
            ).inner_text()
            row = page.locator(f"#case-jobs tr[data-job='{job_id}']")
            row.locator(".rerun-ocr").uncheck()
            row.locator(".rerun-go").click()
            (
                page.wait_for_function("() => document.querySelectorAll('#case-jobs tbody tr').length === 2"),
                errors,
            )
            page.wait_for_function(
                "() => [...document.querySelectorAll('#case-jobs tbody .pill')]"
                ".every(p => !/queued|running/.test(p.textContent))",
                timeout=60_000,
            )
            assert "no OCR" in page.locator("#case-jobs").inner_text()
            _no_overflow(page, width)
            assert not any(p in page.content() for p in server_paths)
            case_hash = page.evaluate("() => location.hash")

        with serving(settings) as base:  # a restart: the bookmark and the case are still there
            page.goto(base + f"/#/locate/{job_id}")
            page.wait_for_selector("#answer", timeout=30_000)
            assert "Luzern" in page.locator("#answer .place").inner_text()
            page.goto(base + "/" + case_hash)
            page.wait_for_selector("#case-jobs")
            assert page.locator("#case-notes").input_value().startswith("Sign photographed in Luzern")
            assert page.locator("#case-tags").input_value() == "lucerne, signage"
            assert page.locator("#case-jobs tbody tr").count() == 2
            page.click("#case-delete")
            page.wait_for_function("() => location.hash === '#/cases'")
            assert not (tmp_path / "jobs" / job_id).exists()
            assert dialogs == ["Delete this case, its 2 job(s) and their files?"]
        browser.close()
    assert not errors, errors


def test_a_wide_runs_table_says_it_scrolls_on_a_phone(tmp_path: Path) -> None:
    from webapp_helpers import make_run

    sync_api = _playwright()
    run_root = make_run(tmp_path / "eval")
    with serving(make_settings(tmp_path, runs=[run_root])) as base, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=shutil.which("chromium") or CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.goto(base + "/#/runs")
        page.wait_for_selector("#runs")
        page.wait_for_selector(".table-card.scrolls #scroll-cue", state="visible")
        assert "scroll sideways" in page.locator("#scroll-cue").inner_text()
        _no_overflow(page, 390)  # the card scrolls, not the page
        page.locator(".table-card").evaluate("card => { card.scrollLeft = card.scrollWidth; }")
        page.wait_for_selector("#scroll-cue", state="hidden")  # at the end: no more to see
        browser.close()


def test_cancel_during_ocr_says_the_slot_stays_taken_until_it_stops(tmp_path: Path) -> None:
    sync_api = _playwright()
    with serving(make_settings(tmp_path, concurrency=1)) as base, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=shutil.which("chromium") or CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.goto(base + "/")
        page.click("#example")
        page.wait_for_selector("#live .call .tool-name:text('exif_gps')", timeout=60_000)  # OCR runs now
        page.click("#cancel-job")
        page.wait_for_function(
            "() => document.querySelector('#job-status-text')?.textContent.startsWith('Cancelling')"
        )
        assert "keeps its worker slot" in page.locator("#job-status-text").inner_text()
        assert page.locator("#cancel-job").count() == 0
        page.wait_for_function(
            "() => document.querySelector('#job-status-text')?.textContent.startsWith('Cancelled')",
            timeout=60_000,
        )
        assert page.locator("#answer").count() == 0
        browser.close()
