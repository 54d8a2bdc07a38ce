"""The offline answer narrowed by a postcode read on the sign (geosleuth.agent.offline with
geosleuth.gazetteer.postcodes): moved onto the postcode where it is finer than the named city,
told where it is not used, and said to be unavailable without the index."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image

from geosleuth.agent.offline import OfflineResult, locate_offline
from geosleuth.core.geo import haversine_km
from geosleuth.core.records import Place, ReversePlace
from geosleuth.gazetteer.postcodes import CENTROID, LOCALITY, PostcodeRead, PostcodeRecord

LUZERN = Place(id="1", name="Luzern", lat=47.0502, lon=8.3093, country_code="CH", admin1="Lucerne",
               population=82_000)  # fmt: skip
GENEVA = Place(id="2", name="Geneva", lat=46.2022, lon=6.1457, country_code="CH", admin1="Geneva",
               population=183_000)  # fmt: skip


@dataclass
class Match:
    text: str
    start: int
    end: int
    place: Place


class TinyGazetteer:
    """The three calls the pipeline makes: Luzern by name, Geneva for the 022 area code."""

    def search(self, query: str, country: str | None = None, limit: int = 10) -> list[Place]:
        return [p for p in (LUZERN, GENEVA) if p.name == query and country in (None, p.country_code)]

    def reverse(self, lat: float, lon: float) -> ReversePlace:
        return ReversePlace(lat=lat, lon=lon, country_code="CH", country="Switzerland", admin1="Lucerne")

    def match_names(self, text: str, min_population: int = 0) -> list[Match]:
        i = text.find("Luzern")
        return [Match("Luzern", i, i + 6, LUZERN)] if i >= 0 else []


def _record(code: str, locality: str, lat: float, lon: float, source: str, radius: float | None,
            population: int | None = None) -> PostcodeRecord:  # fmt: skip
    place = locality if source == LOCALITY else None
    return PostcodeRecord("CH", code, locality, "LU", lat, lon, source, radius, population, place, None)


class FakePostcodes:
    """An index that knows a few Swiss codes and records the countries it was asked about."""

    def __init__(self, *records: PostcodeRecord) -> None:
        self.records = records
        self.asked: list[list[str]] = []

    def read(self, text: str, countries: Iterable[str]) -> list[PostcodeRead]:
        self.asked.append(list(countries))
        out = []
        for line in text.splitlines():
            for r in self.records:
                if r.code in line.split() and r.country_code in self.asked[-1]:
                    out.append(PostcodeRead(r.code, r.code, r.country_code, line, (r,)))
        return out


@dataclass
class FakeReport:
    text: str

    def describe(self) -> str:
        return self.text


def run(text: str, postcodes: object) -> OfflineResult:
    return locate_offline(
        Image.new("RGB", (8, 8)), None, gazetteer=TinyGazetteer(), ocr=lambda _i: FakeReport(text),
        postcodes=postcodes,
    )  # fmt: skip


SIGN = "CAFE ALPENBLICK\nHertensteinstrasse 12\n6004 Luzern"


def test_a_postcode_centroid_beside_its_city_moves_the_answer_and_shrinks_the_circle() -> None:
    index = FakePostcodes(_record("6004", "Luzern", 47.0540, 8.3150, CENTROID, 1.5))
    result = run(SIGN, index)
    pred = result.prediction
    assert pred is not None and (pred.lat, pred.lon, pred.radius_km) == (47.0540, 8.3150, 1.5)
    assert pred.city == "Luzern" and pred.country_code == "CH"
    assert (
        pred.evidence[0]
        == "postcode 6004 → Luzern (source: countrystatecity-postal-codes, postcode centroid; ±1.5 km)"
    )
    assert any("place name 'Luzern'" in e for e in pred.evidence)  # the name supports it
    assert "CH" in index.asked[0]  # asked in the country the named place is in
    assert not any("unavailable" in e for e in pred.evidence)


def test_a_locality_postcode_keeps_the_citys_circle_and_says_where_its_point_came_from() -> None:
    index = FakePostcodes(_record("6004", "Luzern", 47.0505, 8.3064, LOCALITY, None, 81_691))
    pred = run(SIGN, index).prediction
    # a locality match is the place's own circle: 10 km for a town under a million people
    assert pred is not None and pred.radius_km == 10.0 and (pred.lat, pred.lon) == (47.0505, 8.3064)
    assert pred.evidence[0].startswith("postcode 6004 → Luzern (source: countrystatecity-postal-codes, "
                                       "locality centroid: GeoNames Luzern")  # fmt: skip


def test_a_postcode_coarser_than_the_named_city_does_not_move_it_and_is_told() -> None:
    index = FakePostcodes(_record("6004", "Luzern", 47.10, 8.40, CENTROID, 30.0))
    result = run(SIGN, index)
    assert result.prediction is not None and result.prediction.radius_km == 10.0
    (step,) = [s for s in result.steps if s.name == "postcodes"]
    assert "coarser than Luzern" in step.text


def test_a_number_that_is_another_towns_postcode_is_not_read_as_one() -> None:
    """1020 is Renens's postcode, 140 km from Luzern: not beside "Renens", not in Luzern's circle."""
    index = FakePostcodes(_record("1020", "Renens", 46.5399, 6.5881, CENTROID, 2.0))
    result = run("Luzern\nSeit 1020 für Sie da", index)
    pred = result.prediction
    assert pred is not None and pred.city == "Luzern" and pred.radius_km == 10.0
    (step,) = [s for s in result.steps if s.name == "postcodes"]
    assert "'1020' (CH: Renens) is not written beside a place the sign names: not used" in step.text


def test_a_postcode_alone_on_its_line_counts_in_the_named_citys_circle_a_number_in_a_sentence_not() -> None:
    index = FakePostcodes(_record("6004", "Luzern", 47.0540, 8.3150, CENTROID, 1.5))
    alone = run(
        "Hertensteinstrasse 12\nLuzern\n6004", index
    ).prediction  # OCR read the town apart from its code
    assert alone is not None and (alone.lat, alone.lon, alone.radius_km) == (47.0540, 8.3150, 1.5)
    sentence = run("Hertensteinstrasse 12\nLuzern\nSeit 6004 Tagen offen", index)
    assert sentence.prediction is not None and sentence.prediction.radius_km == 10.0
    (step,) = [s for s in sentence.steps if s.name == "postcodes"]
    assert "'6004' (CH: Luzern) is not written beside a place the sign names: not used" in step.text


def test_a_postcode_of_a_district_counts_beside_the_name_of_its_city() -> None:
    """ "1020 Bruxelles": the package calls 1020 Laeken, a part of Brussels (here: Luzern's circle)."""
    index = FakePostcodes(_record("6006", "Würzenbach", 47.0560, 8.3320, CENTROID, 2.0))
    pred = run("Hertensteinstrasse 12\n6006 Luzern", index).prediction
    assert pred is not None and (pred.lat, pred.lon, pred.radius_km) == (47.0560, 8.3320, 2.0)
    assert pred.evidence[0].startswith("postcode 6006 → Würzenbach (source: countrystatecity-postal-codes")


def test_the_postcode_wins_over_a_phone_prefix_of_another_city_and_the_conflict_is_told() -> None:
    """Geneva's 022 is 180 km from Luzern (haversine of 47.0540,8.3150 and 46.2022,6.1457 is
    about 185 km): the postcode (a named place) wins, the disagreement is reported."""
    index = FakePostcodes(_record("6004", "Luzern", 47.0540, 8.3150, CENTROID, 1.5))
    result = run(SIGN + "\nTel. 022 310 45 67", index)
    pred = result.prediction
    assert pred is not None and (pred.lat, pred.lon) == (47.0540, 8.3150)
    (conflict,) = result.conflicts
    assert "Geneva" in conflict and "the name wins" in conflict
    assert 170 < haversine_km(47.0540, 8.3150, GENEVA.lat, GENEVA.lon) < 200


def test_without_the_index_the_answer_is_as_before_and_says_postcodes_were_unavailable() -> None:
    with_none = run(SIGN, None)
    pred = with_none.prediction
    assert pred is not None and (pred.lat, pred.lon, pred.radius_km) == (LUZERN.lat, LUZERN.lon, 10.0)
    note = "postcode narrowing unavailable: countrystatecity-postal-codes is not installed"
    assert any(e.startswith(note) for e in pred.evidence) and with_none.notes[0].startswith(note)
    (step,) = [s for s in with_none.steps if s.name == "postcodes"]
    assert step.text.startswith("postcode narrowing unavailable")
    # a gazetteer with no files of its own (this fake) has no index beside it either: told too
    default = locate_offline(Image.new("RGB", (8, 8)), None, gazetteer=TinyGazetteer(),
                             ocr=lambda _i: FakeReport(SIGN))  # fmt: skip
    assert default.prediction is not None and default.prediction.lat == LUZERN.lat
    assert any(e.startswith("postcode narrowing unavailable") for e in default.prediction.evidence)


@pytest.mark.slow
def test_a_drawn_sign_with_a_zip_code_is_answered_at_the_zip_codes_centroid(tmp_path: Path) -> None:
    """examples/make_sign.py's sign, real OCR and the real gazetteer; the postcode index built from
    a two-postcode copy of the package's layout. 10001's nearest other centroid is 10002 at
    40.7157,-73.9863: dlat 0.034949 deg = 3.886 km, dlon 0.011 deg * cos(40.73 deg) = 0.927 km,
    sqrt(3.886^2 + 0.927^2) = 3.995 km, its radius."""
    pytest.importorskip("rapidocr")
    import importlib.util

    from geosleuth.gazetteer import get_gazetteer
    from geosleuth.gazetteer.postcodes import PostcodeIndex, build_index
    from geosleuth.tools.ocr import run_ocr

    data = tmp_path / "data"
    (data / "by-country" / "US").mkdir(parents=True)
    (data / "countries.json").write_text(
        json.dumps([{"countryCode": "US", "postalCodeRegex": "^\\d{5}(-\\d{4})?$"}])
    )
    rows = [
        {"code": "10001", "countryCode": "US", "stateCode": "NY", "localityName": None, "type": "full",
         "latitude": 40.750649, "longitude": -73.997298},
        {"code": "10002", "countryCode": "US", "stateCode": "NY", "localityName": None, "type": "full",
         "latitude": 40.7157, "longitude": -73.9863},
    ]  # fmt: skip
    (data / "by-country" / "US" / "postcodes.json").write_text(json.dumps(rows))
    gaz = get_gazetteer()
    build_index(data, gaz.data_dir / "places.sqlite", tmp_path / "postcodes.sqlite", "test")

    path = Path(__file__).resolve().parents[2] / "examples" / "make_sign.py"
    spec = importlib.util.spec_from_file_location("make_sign", path)
    assert spec is not None and spec.loader is not None
    maker = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = maker
    spec.loader.exec_module(maker)
    sign = maker.render_sign(
        ("CORNER DELI", "4 Pennsylvania Plaza", "New York, NY 10001"), tmp_path / "deli.png"
    )
    image = Image.open(sign)
    image.load()
    report = run_ocr(image)
    before = locate_offline(image, None, gazetteer=gaz, ocr=lambda _i: report, postcodes=None).prediction
    after = locate_offline(
        image,
        None,
        gazetteer=gaz,
        ocr=lambda _i: report,
        postcodes=PostcodeIndex(tmp_path / "postcodes.sqlite"),
    ).prediction
    assert before is not None and after is not None
    assert (after.lat, after.lon) == (40.750649, -73.997298)
    assert after.radius_km == pytest.approx(3.995, abs=0.05) and after.radius_km < (before.radius_km or 0)
    said = "postcode 10001 → New York (source: countrystatecity-postal-codes, postcode centroid"
    assert any(e.startswith(said) for e in after.evidence)


def test_a_postcode_beside_a_name_tells_which_town_of_that_name_and_the_conflict_is_told() -> None:
    """ "15230 Frankfurt": the name alone matches Frankfurt am Main (the larger, ranked first); the
    postcode is Frankfurt (Oder), about 450 km away, and wins."""
    from geosleuth.agent.offline import Candidate, names_win

    said = "place name 'frankfurt' in the text matches Frankfurt am Main"
    main = Candidate(50.1155, 8.6842, "Frankfurt am Main, Hesse, Germany", 1.38, "DE", 10.0, [said],
                     source="place_names")  # fmt: skip
    oder = Candidate(52.3471, 14.5506, "Frankfurt (Oder), Brandenburg, Germany", 1.2, "DE", 10.0,
                     ["postcode 15230 → Frankfurt (Oder)"], source="postcode", postcode="15230")  # fmt: skip
    ranked, conflicts = names_win([main, oder])
    assert ranked == [oder, main]
    (told,) = conflicts
    assert "Frankfurt am Main" in told and "postcode 15230" in told and told.endswith("the postcode wins")
    # a postcode in the named town's own circle is no conflict
    near = Candidate(50.12, 8.69, "Frankfurt am Main, Hesse, Germany", 1.2, "DE", 1.0, ["postcode 60311"],
                     source="postcode", postcode="60311")  # fmt: skip
    assert names_win([main, near]) == ([main, near], [])


SPLIT_SIGN = "Hertensteinstrasse 12 · 6004\nLuzern"
"""The code ends the street's line, the town stands below it: the lines alone do not pair them."""


@pytest.mark.slow
def test_libpostal_pairs_a_postcode_with_its_town_across_lines() -> None:
    pytest.importorskip("postal")
    from geosleuth.gazetteer import libpostal

    if not libpostal.installed():
        pytest.skip("the address extra's data wheels are absent")
    index = FakePostcodes(_record("6004", "Luzern", 47.0540, 8.3150, CENTROID, 1.5))
    result = run(SPLIT_SIGN, index)
    pred = result.prediction
    assert pred is not None and (pred.lat, pred.lon, pred.radius_km) == (47.0540, 8.3150, 1.5)
    (step,) = [s for s in result.steps if s.name == "postcodes"]
    assert step.arguments["parser"].startswith("libpostal")
    # "Seit 6004 Tagen offen" is a sentence, not an address: libpostal labels no postcode there
    sentence = run("Hertensteinstrasse 12\nLuzern\nSeit 6004 Tagen offen", index)
    assert sentence.prediction is not None and sentence.prediction.radius_km == 10.0


def test_without_the_address_extra_a_postcode_apart_from_its_town_is_not_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from geosleuth.gazetteer import libpostal

    monkeypatch.setattr(libpostal, "_parser", lambda: None)
    monkeypatch.setattr(libpostal, "installed", lambda: False)
    index = FakePostcodes(_record("6004", "Luzern", 47.0540, 8.3150, CENTROID, 1.5))
    result = run(SPLIT_SIGN, index)
    assert result.prediction is not None and result.prediction.radius_km == 10.0
    (step,) = [s for s in result.steps if s.name == "postcodes"]
    assert step.arguments["parser"] == "geosleuth's line reading"
    assert "'6004' (CH: Luzern) is not written beside a place the sign names: not used" in step.text
