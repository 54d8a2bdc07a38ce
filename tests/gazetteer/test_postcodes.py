"""The postcode index: built from a small copy of countrystatecity-postal-codes' data layout and
a small gazetteer, then read per country (geosleuth.gazetteer.postcodes)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.core.text import normalize
from geosleuth.gazetteer.address import MAX_POSTCODE_CHARS, MAX_POSTCODE_TOKENS, postcode_tokens
from geosleuth.gazetteer.postcodes import (
    CENTROID,
    LOCALITY,
    MAX_CENTROID_KM,
    MIN_CENTROID_KM,
    PostcodeIndex,
    build_index,
    ensure_built,
    index_path,
)

COUNTRIES = [  # the package's countries.json entries, as it writes them
    {"countryCode": "CH", "countryName": "Switzerland", "postalCodeFormat": "####",
     "postalCodeRegex": "^(\\d{4})$", "postcodeCount": 4},
    {"countryCode": "US", "countryName": "United States", "postalCodeFormat": "#####-####",
     "postalCodeRegex": "^\\d{5}(-\\d{4})?$", "postcodeCount": 4},
    {"countryCode": "AT", "countryName": "Austria", "postalCodeFormat": "####",
     "postalCodeRegex": "^(\\d{4})$", "postcodeCount": 2},
    {"countryCode": "DE", "countryName": "Germany", "postalCodeFormat": "#####",
     "postalCodeRegex": "^(\\d{5})$", "postcodeCount": 2},
    {"countryCode": "CA", "countryName": "Canada", "postalCodeFormat": "@#@ #@#",
     "postalCodeRegex": "^([ABCEGHJKLMNPRSTVXY]\\d[ABCEGHJKLMNPRSTVWXYZ])"
                        "(?: ?(\\d[ABCEGHJKLMNPRSTVWXYZ]\\d))?$",
     "postcodeCount": 1},
    {"countryCode": "XX", "countryName": "Broken", "postalCodeRegex": "^(\\d{4}$", "postcodeCount": 0},
]  # fmt: skip


def _pc(cc: str, code: str, locality: str | None, state: str | None, lat: float | None = None,
        lon: float | None = None, kind: str = "full") -> dict[str, object]:  # fmt: skip
    return {"code": code, "countryCode": cc, "stateCode": state, "localityName": locality, "type": kind,
            "latitude": lat, "longitude": lon}  # fmt: skip


POSTCODES = {
    "CH": [
        _pc("CH", "6004", "Luzern", "LU"),
        _pc("CH", "1020", "Renens VD", "VD"),
        _pc("CH", "9999", "Nowhere At All", "SG"),
        _pc("CH", "6004", "Luzern", "LU"),  # a duplicate row: one index row
    ],
    "US": [  # centroids: 10001 and 10002 are 0.1 degree of latitude apart, 10003 0.001 from 10002
        _pc("US", "10001", None, "NY", 40.70, -74.00),
        _pc("US", "10002", None, "NY", 40.80, -74.00),
        _pc("US", "10003", None, "NY", 40.801, -74.00),
        _pc("US", "99501", None, "AK", 61.2, -149.9),
    ],
    "AT": [
        _pc("AT", "8010", "Graz, 02.Bez.:Sankt Leonhard", "6"),
        _pc("AT", "8010", "Graz, 09.Bez.:Waltendorf", "6"),
    ],
    "DE": [_pc("DE", "67433", "Neustadt", "RP"), _pc("DE", "01844", "Neustadt", "SN")],
    "CA": [_pc("CA", "K1A", "Ottawa", "ON", 45.42, -75.70, kind="fsa")],
    "JP": [_pc("JP", "600-8216", "京都市下京区西七条南中野町（１丁目）", "26")],
}

PLACES = [  # (name, lat, lon, cc, admin1, population, alternate names)
    ("Luzern", 47.0505, 8.3064, "CH", "Lucerne", 81_691, ["Lucerne"]),
    ("Renens", 46.5399, 6.5881, "CH", "Vaud", 20_000, []),
    ("Graz", 47.0673, 15.4420, "AT", "Styria", 303_270, []),
    ("Sankt Leonhard", 47.0692, 15.4578, "AT", "Styria", 15_853, []),
    ("Sankt Leonhard", 48.3, 14.9, "AT", "Upper Austria", 1_400, []),  # another one, 140 km away
    ("Neustadt an der Weinstraße", 49.35, 8.14, "DE", "Rheinland-Pfalz", 53_000, ["Neustadt"]),
    ("Neustadt in Sachsen", 51.03, 14.22, "DE", "Saxony", 12_000, ["Neustadt"]),
    ("Saxony", 51.0, 13.3, "DE", "Saxony", 4_000_000, ["Sachsen"]),
    ("Kyoto", 35.0211, 135.7538, "JP", "Kyoto", 1_463_723, ["京都市"]),  # a region: ISO's "Sachsen" finds it
]
REGIONS = {"Saxony"}


def _write_layout(root: Path) -> Path:
    data = root / "data"
    (data / "by-country").mkdir(parents=True)
    (data / "countries.json").write_text(json.dumps(COUNTRIES), encoding="utf-8")
    for cc, rows in POSTCODES.items():
        (data / "by-country" / cc).mkdir()
        (data / "by-country" / cc / "postcodes.json").write_text(json.dumps(rows), encoding="utf-8")
    return data


def _write_places(gazetteer_dir: Path) -> None:
    """places.sqlite as the gazetteer build writes it (places, names with normalised keys)."""
    gazetteer_dir.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(gazetteer_dir / "places.sqlite")
    db.executescript(
        "CREATE TABLE places (idx INTEGER PRIMARY KEY, id TEXT, name TEXT, lat REAL, lon REAL, cc TEXT,"
        " admin1 TEXT, population INTEGER, kind TEXT);"
        " CREATE TABLE names (key TEXT, idx INTEGER, is_primary INTEGER);"
    )
    for idx, (name, lat, lon, cc, admin1, pop, alternates) in enumerate(PLACES):
        db.execute("INSERT INTO places VALUES (?,?,?,?,?,?,?,?,?)",
                   (idx, f"geonames:{idx}", name, lat, lon, cc, admin1, pop,
                    "admin1" if name in REGIONS else "city"))  # fmt: skip
        db.execute("INSERT INTO names VALUES (?,?,1)", (normalize(name), idx))
        for alt in alternates:
            db.execute("INSERT INTO names VALUES (?,?,0)", (normalize(alt), idx))
    db.commit()
    db.close()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> PostcodeIndex:
    root = tmp_path_factory.mktemp("postcodes")
    _write_places(root / "gaz")
    path = ensure_built(root / "gaz", data_dir=_write_layout(root), package="9.9.9")
    assert path == index_path(root / "gaz", "9.9.9")
    return PostcodeIndex(path)


def test_build_keeps_centroids_with_the_distance_to_the_next_postcode_as_radius(index: PostcodeIndex) -> None:
    (a,) = index.lookup("US", "10001")
    (b,) = index.lookup("US", "10002")
    (lone,) = index.lookup("us", "99501")
    assert (a.source, a.lat, a.lon, a.locality) == (CENTROID, 40.70, -74.00, None)
    # 10001's nearest other centroid is 10002, 0.1 degree north: 0.1 * pi/180 * 6371 km = 11.12 km
    assert a.radius_km == pytest.approx(11.12, abs=0.02)
    # 10002's is 10003, 0.001 degree away (0.11 km): raised to the 1 km floor
    assert b.radius_km == MIN_CENTROID_KM
    # Anchorage's nearest is about 5,400 km away: capped
    assert lone.radius_km == MAX_CENTROID_KM
    (ottawa,) = index.lookup("CA", "K1A")  # an FSA covers a district: its own, larger cap
    assert ottawa.radius_km is not None and ottawa.radius_km > MAX_CENTROID_KM


def test_build_gives_a_postcode_without_coordinates_its_localitys_place(index: PostcodeIndex) -> None:
    (luzern,) = index.lookup("CH", "6004")  # the duplicate row is one row
    assert (luzern.source, luzern.place, luzern.lat, luzern.lon) == (LOCALITY, "Luzern", 47.0505, 8.3064)
    assert luzern.radius_km is None and luzern.population == 81_691 and luzern.admin1 == "Lucerne"
    (renens,) = index.lookup("CH", "1020")  # "Renens VD": the canton suffix goes
    assert renens.place == "Renens"
    assert index.lookup("CH", "9999") == []  # no place of that name: absent, not guessed
    assert index.meta["unmatched"] == "1" and index.meta["package"].endswith("9.9.9")


def test_a_district_is_used_when_it_lies_in_its_locality_and_the_state_breaks_ties(
    index: PostcodeIndex,
) -> None:
    rows = {r.locality: r for r in index.lookup("AT", "8010")}
    # "Sankt Leonhard" exists twice; the one 1.2 km from Graz is the district, not the one 140 km away
    assert rows["Graz, 02.Bez.:Sankt Leonhard"].lat == 47.0692
    assert rows["Graz, 09.Bez.:Waltendorf"].place == "Graz"  # an unknown district: the locality stands
    # two towns called Neustadt: the ISO 3166-2 state (DE-RP, DE-SN) picks each one's own, DE-SN by
    # the region the gazetteer calls "Saxony" (ISO's names for DE-SN do not include that one)
    assert index.lookup("DE", "67433")[0].place == "Neustadt an der Weinstraße"
    assert index.lookup("DE", "01844")[0].place == "Neustadt in Sachsen"


def test_a_japanese_locality_is_cut_into_municipality_and_ward(index: PostcodeIndex) -> None:
    (kyoto,) = index.lookup("JP", "600-8216")  # 京都市 | 下京区 | a neighbourhood; (１丁目) is a note
    assert kyoto.place == "Kyoto" and kyoto.source == LOCALITY


def test_a_format_that_does_not_compile_is_skipped(index: PostcodeIndex) -> None:
    assert index.read("1234 Broken", ["XX"]) == []


def test_postcodes_are_read_only_in_the_countries_asked_and_known_to_the_index(index: PostcodeIndex) -> None:
    (read,) = index.read("Hertensteinstrasse 12\n6004 Luzern\nTel. 022 310 45 67", ["CH", "US"])
    assert (read.written, read.code, read.country_code, read.line) == ("6004", "6004", "CH", "6004 Luzern")
    assert index.read("6004 Luzern", ["US", "DE"]) == []  # a 4-digit number is no US or German code
    assert index.read("Seit 1020 Jahren, Tel. 6004", ["AT"]) == []  # valid format, unknown code
    (prefixed,) = index.read("CH-6004 Luzern", ["CH"])
    assert prefixed.code == "6004"
    (zip_plus4,) = index.read("New York, NY 10001-1234", ["US"])
    assert zip_plus4.written == "10001-1234" and zip_plus4.code == "10001"
    (full,) = index.read("Ottawa ON K1A 0B1", ["CA"])  # the index knows the FSA only
    assert (full.written, full.code) == ("K1A 0B1", "K1A")


def test_a_record_is_named_on_its_line_by_locality_place_or_state(index: PostcodeIndex) -> None:
    (luzern,) = index.lookup("CH", "6004")
    assert luzern.named_in("6004 Luzern") and not luzern.named_in("6004 Bern")
    (ny,) = index.lookup("US", "10001")
    assert ny.named_in("New York, NY 10001") and not ny.named_in("ANY 10001")
    district = next(r for r in index.lookup("AT", "8010") if "Leonhard" in (r.locality or ""))
    assert district.named_in("8010 Graz")  # the locality's first component


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000))
def test_postcode_tokens_are_bounded_on_any_text(text: str) -> None:
    tokens = postcode_tokens(text)
    assert len(tokens) <= MAX_POSTCODE_TOKENS
    assert all(len(t) <= MAX_POSTCODE_CHARS and any(c.isdigit() for c in t) for t in tokens)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.sampled_from("0123456789 -ABCKNY\n,〒"), max_size=400))
def test_reading_any_text_raises_nothing(index: PostcodeIndex, text: str) -> None:
    for read in index.read(text, ["CH", "US", "CA", "AT", "DE", "XX", "ZZ"]):
        assert read.records and read.line in text


def test_no_package_means_no_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from geosleuth.gazetteer import postcodes

    monkeypatch.setattr(postcodes, "package_version", lambda: None)
    assert ensure_built(tmp_path) is None
    assert postcodes.get_postcode_index(tmp_path) is None


def test_the_build_is_reproducible(tmp_path: Path) -> None:
    _write_places(tmp_path / "gaz")
    data = _write_layout(tmp_path)
    build_index(data, tmp_path / "gaz" / "places.sqlite", tmp_path / "a.sqlite", "1")
    build_index(data, tmp_path / "gaz" / "places.sqlite", tmp_path / "b.sqlite", "1")
    dump = [list(sqlite3.connect(tmp_path / n).iterdump()) for n in ("a.sqlite", "b.sqlite")]
    assert dump[0] == dump[1]


def test_a_new_index_replaces_the_files_of_other_versions(tmp_path: Path) -> None:
    _write_places(tmp_path / "gaz")
    data = _write_layout(tmp_path)
    old = ensure_built(tmp_path / "gaz", data_dir=data, package="1.0.0")
    new = ensure_built(tmp_path / "gaz", data_dir=data, package="1.0.1")
    assert old is not None and new is not None and new.exists() and not old.exists()
    assert ensure_built(tmp_path / "gaz", data_dir=data, package="1.0.1") == new  # built once
