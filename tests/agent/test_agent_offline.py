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


def _cand(label: str, lat: float, lon: float, cc: str, source: str, score: float, national: bool = False):  # type: ignore[no-untyped-def]
    from geosleuth.agent.offline import Candidate

    return Candidate(
        lat, lon, label, score, cc, 25.0, [f"{source} clue for {label}"], source=source, national=national
    )


def test_the_named_city_wins_over_a_national_phone_number_that_fits_elsewhere() -> None:
    from geosleuth.agent.offline import names_win

    # "022 …" read in national format fits Purkersdorf (AT) as well as Geneva; the sign names Luzern.
    # Luzern (47.05, 8.31) to Purkersdorf (48.21, 16.18): about 600 km, far beyond 50 km
    phone = _cand("Purkersdorf", 48.2077, 16.1754, "AT", "phone_area", 1.0, national=True)
    named = _cand("Luzern", 47.0502, 8.3093, "CH", "place_names", 0.65)
    ranked, conflicts = names_win([phone, named])
    assert [c.label for c in ranked] == ["Luzern", "Purkersdorf"]
    (told,) = conflicts
    assert "Purkersdorf" in told and "which the text names; the name wins" in told
    assert 550 < float(told.split(" km from ")[0].rsplit(" ", 1)[-1]) < 650


def test_a_postcode_city_beats_a_phone_prefix_of_another_city_in_the_same_country() -> None:
    from geosleuth.agent.offline import names_win

    # an international +41 44 (Zürich) number on a sign that names Bern: same country, the name wins
    phone = _cand("Zürich", 47.3769, 8.5417, "CH", "phone_area", 1.0)
    named = _cand("Bern", 46.9480, 7.4474, "CH", "place_names", 0.7)
    ranked, conflicts = names_win([phone, named])
    assert ranked[0].label == "Bern" and len(conflicts) == 1 and "the name wins" in conflicts[0]


def test_a_phone_area_in_a_town_of_the_written_name_tells_which_town_it_is() -> None:
    from dataclasses import replace

    from geosleuth.agent.offline import names_win

    # "Frankfurt" on the sign matched Frankfurt am Main (the larger); "0335 …" is Frankfurt (Oder),
    # also a "Frankfurt": the phone area says which one. Main (50.1155, 8.6842) to Oder (52.3471,
    # 14.5506): dlat 2.2316 deg = 248.1 km, dlon 5.8664 deg * cos(51.23 deg) = 408.5 km,
    # sqrt(248.1^2 + 408.5^2) = 477.9 km.
    named = replace(_cand("Frankfurt am Main, Hesse, Germany", 50.1155, 8.6842, "DE", "place_names", 1.38),
                    written="frankfurt")  # fmt: skip
    phone = _cand("Frankfurt (Oder), Brandenburg, Germany", 52.3471, 14.5506, "DE", "phone_area", 1.0, True)
    ranked, conflicts = names_win([named, phone])
    assert ranked[0] is phone
    (told,) = conflicts
    assert "which the name 'frankfurt' also fits; the phone area tells which town" in told
    assert 470 < float(told.split(" km from ")[0].rsplit(" ", 1)[-1]) < 485
    # a town whose name merely starts with the same letters is another place: the name wins
    bern = replace(_cand("Bern", 46.9480, 7.4474, "CH", "place_names", 0.7), written="bern")
    berneck = _cand("Berneck, Saint Gallen, Switzerland", 47.4254, 9.6156, "CH", "phone_area", 1.0, True)
    ranked, conflicts = names_win([berneck, bern])
    assert ranked[0] is bern and "the name wins" in conflicts[0]


def test_an_international_number_of_another_country_keeps_its_rank_but_is_told() -> None:
    from geosleuth.agent.offline import names_win

    phone = _cand("Berlin", 52.52, 13.405, "DE", "phone_area", 1.0)  # "+49 30 …"
    named = _cand("Paris", 48.8566, 2.3522, "FR", "place_names", 0.6)  # "Café Paris"
    ranked, conflicts = names_win([phone, named])
    assert ranked[0].label == "Berlin" and "keeps its rank" in conflicts[0]
    near = _cand("Kriens", 47.033, 8.28, "CH", "phone_area", 1.0, national=True)  # 3 km from Luzern: agrees
    luzern = _cand("Luzern", 47.0502, 8.3093, "CH", "place_names", 0.65)
    assert names_win([near, luzern]) == ([near, luzern], [])


@pytest.mark.slow
def test_address_bench_on_a_photographed_sign_that_names_its_city() -> None:
    """bench/address_bench.py as written, on two signs: Luzern named, a Geneva number in national
    format that also fits Purkersdorf (AT), about 600 km away: the answer stays in Luzern; a
    Frankfurt (Oder) postcode and phone number (0335) beside the name "Frankfurt": the answer is
    Frankfurt (Oder), 0.0 km from its GeoNames centre, with the postcode index (the ``postcodes``
    extra) and without it (the phone area names a town of the written name); the name alone was
    Frankfurt am Main, about 478 km away."""
    import importlib.util
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "bench/address_bench.py", "--signs", "luzern_geneva_phone,frankfurt_oder"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    row = next(line for line in out.splitlines() if line.startswith("luzern_geneva_phone"))
    before_km, after_km = (float(x) for x in row.split()[1:3])
    assert before_km > 500 and after_km < 10 and "Luzern" in row
    assert "median error before" in out and "median error names (no postcode index)" in out
    frankfurt = next(line for line in out.splitlines() if line.startswith("frankfurt_oder")).split()
    assert float(frankfurt[1]) < 1  # the area code 0335 is Frankfurt (Oder) (was Frankfurt am Main)
    assert float(frankfurt[2]) < 1  # the name "Frankfurt" fits it too: the phone area tells which
    if importlib.util.find_spec("countrystatecity_postal_codes") is not None:
        assert float(frankfurt[3]) < 1 and "Frankfurt (Oder)" in " ".join(frankfurt)
        assert "after / before" in out
