"""The offline clue pipeline's scoring with an injected gazetteer and OCR (no OCR model needed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image

from geosleuth.agent.offline import locate_offline
from geosleuth.core.geo import haversine_km
from geosleuth.core.records import Place, ReversePlace

PLACES = {
    "Luzern": Place(
        id="1", name="Luzern", lat=47.0502, lon=8.3093, country_code="CH", admin1="Lucerne", population=82_000
    ),
    "Lucerne": Place(
        id="1", name="Luzern", lat=47.0502, lon=8.3093, country_code="CH", admin1="Lucerne", population=82_000
    ),
    "Springfield": Place(
        id="2", name="Springfield", lat=39.80, lon=-89.64, country_code="US", population=114_000
    ),
    "Frey": Place(id="3", name="Frey", lat=-31.0, lon=-64.0, country_code="AR", population=300),
    "Switzerland": Place(id="4", name="Switzerland", lat=46.8, lon=8.2, country_code="CH", kind="country"),
}


@dataclass
class Match:
    text: str
    start: int
    end: int
    place: Place


class TinyGazetteer:
    """Just the three calls the pipeline makes, over a handful of places."""

    def __init__(self) -> None:
        self.searches: list[tuple[str, str | None]] = []

    def search(self, query: str, country: str | None = None, limit: int = 10) -> list[Place]:
        self.searches.append((query, country))
        p = PLACES.get(query)
        return [p] if p and (country is None or p.country_code == country) else []

    def reverse(self, lat: float, lon: float) -> ReversePlace:
        return ReversePlace(
            lat=lat, lon=lon, country_code="CH", country="Switzerland", admin1="Lucerne", city="Luzern"
        )

    def match_names(self, text: str, min_population: int = 0) -> list[Match]:
        out = []
        for name in ("Luzern", "Springfield", "Frey"):
            i = text.find(name)
            if i >= 0:
                out.append(Match(name, i, i + len(name), PLACES[name]))
        return out


@dataclass
class FakeReport:
    text: str

    def describe(self) -> str:
        return f"Text found: {self.text!r}"


def run(text: str) -> tuple[object, TinyGazetteer]:
    gaz = TinyGazetteer()
    result = locate_offline(
        Image.new("RGB", (64, 64)), None, gazetteer=gaz, ocr=lambda _img: FakeReport(text)
    )
    return result, gaz


def test_phone_area_code_and_place_name_agree() -> None:
    result, gaz = run("Konditorei Frey\n6004 Luzern\nTel. +41 41 410 23 45\nwww.konditorei-frey.ch")
    pred = result.prediction
    assert pred is not None and pred.country_code == "CH" and pred.city == "Luzern"
    assert float(haversine_km(pred.lat, pred.lon, 47.0502, 8.3093)) < 1
    assert ("Lucerne", "CH") in gaz.searches  # the area code's town, looked up in its country
    assert any("area code of Lucerne" in e for e in pred.evidence)
    assert any("place name 'Luzern'" in e for e in pred.evidence)
    assert any("domain" in e for e in pred.evidence)
    assert 0.3 < (pred.confidence or 0) <= 0.95 and pred.radius_km == 10.0
    assert all(c.label != "Frey, AR" for c in result.candidates)  # tiny place, no Argentine clue


def test_country_clues_alone_give_a_country_sized_answer() -> None:
    result, _ = run("Tel. +41 58 000 00 00 — www.example.ch")
    pred = result.prediction
    assert pred is not None and pred.country_code == "CH" and (pred.radius_km or 0) >= 50


@pytest.mark.parametrize("text", ["", "hello there", "Frey"])
def test_no_usable_clue_means_no_prediction(text: str) -> None:
    result, _ = run(text)
    assert result.prediction is None


def test_exif_gps_wins_over_text(tmp_path: Path) -> None:
    img = Image.new("RGB", (64, 64))
    exif = img.getexif()
    exif.get_ifd(0x8825).update({1: "S", 2: (33.0, 51.0, 0.0), 3: "E", 4: (151.0, 12.0, 36.0)})
    path = tmp_path / "sydney.jpg"
    img.save(path, exif=exif)
    ocr_called = []
    result = locate_offline(
        Image.open(path),
        str(path),
        gazetteer=TinyGazetteer(),
        ocr=lambda i: ocr_called.append(i) or FakeReport("Luzern"),
    )
    pred = result.prediction
    assert pred is not None and (pred.lat, pred.lon) == (-33.85, 151.21) and pred.coords_source == "exif"
    assert not ocr_called


def test_national_phone_format_is_read_once_the_country_is_known() -> None:
    result, gaz = run("Tel. 041 410 23 45\nwww.konditorei-frey.ch")  # no +41: the .ch domain says CH
    pred = result.prediction
    assert pred is not None and pred.city == "Luzern" and ("Lucerne", "CH") in gaz.searches
