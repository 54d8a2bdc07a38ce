"""The offline agent with the real gazetteer on places whose names carry a qualifier: a sign that
writes one ("Frankfurt (Oder)", "Kingston upon Hull"), and the phone-area clue, the place an area
code's description names (phonenumbers' offline geocoding data), checked on single numbers and,
in a slow sweep, on every area description of the tables.

Reference coordinates from Wikipedia infoboxes, converted by hand (52°21′N 14°33′E = 52.35,
14.55); a state's point is the gazetteer's population-weighted centre, so a state is checked by
its name, level and a loose distance.
"""

from dataclasses import dataclass

import pytest
from PIL import Image

from geosleuth.agent.offline import locate_offline, phone_area_place
from geosleuth.core.geo import haversine_km
from geosleuth.gazetteer import get_gazetteer

FRANKFURT_ODER = (52.35, 14.55)  # 52°21′N 14°33′E
FRANKFURT_MAIN = (50.1167, 8.6833)  # 50°07′N 8°41′E
HALLE_SAALE = (51.4833, 11.9667)  # 51°29′N 11°58′E
HULL = (53.7333, -0.3333)  # 53°44′N 0°20′W
NEWCASTLE = (54.9667, -1.6167)  # 54°58′N 1°37′W
SALT_LAKE_CITY = (40.75, -111.8833)  # 40°45′N 111°53′W
CALIFORNIA_MD = (38.3, -76.5167)  # California, Maryland: 38°18′N 76°31′W
NORTH_FORK_CA = (37.2333, -119.5)  # the geographic centre of California, 37°14′N 119°30′W


@dataclass
class _Report:
    text: str

    def describe(self) -> str:
        return self.text


def _locate(text: str):  # type: ignore[no-untyped-def]
    return locate_offline(
        Image.new("RGB", (8, 8)),
        None,
        gazetteer=get_gazetteer(),
        ocr=lambda _i: _Report(text),
        postcodes=None,
    )


def _km(lat: float, lon: float, ref: tuple[float, float]) -> float:
    return float(haversine_km(lat, lon, *ref))


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("STADTWERKE\nFrankfurt (Oder)", FRANKFURT_ODER),  # was Frankfurt am Main, by "Frankfurt" alone
        ("BÜRGERAMT\nFrankfurt/Oder", FRANKFURT_ODER),
        ("HALLE (SAALE) HBF", HALLE_SAALE),
        ("Kingston upon Hull", HULL),  # was Kingston, Jamaica
        ("Newcastle upon Tyne", NEWCASTLE),  # was Newcastle, New South Wales
        ("Salt Lake City", SALT_LAKE_CITY),  # was Sanaa's governorate, Yemen, by a name inside
    ],
)
def test_a_sign_that_writes_a_qualified_name_is_answered_there(text: str, ref: tuple[float, float]) -> None:
    result = _locate(text)
    assert result.prediction is not None and _km(result.prediction.lat, result.prediction.lon, ref) < 5
    assert all(_km(c.lat, c.lon, ref) < 5 for c in result.candidates if c.source == "place_names")


@pytest.mark.parametrize(
    "text", ["BÄCKEREI SCHULZ\nTel. +49 335 55 22 10", "BÄCKEREI SCHULZ\nDeutschland\nTel. 0335 55 22 10"]
)
def test_area_code_0335_is_frankfurt_oder(text: str) -> None:
    # phonenumbers describes +49 335 as "Frankfurt (Oder)"; the bare head word was Frankfurt am
    # Main, 478 km west.
    result = _locate(text)
    (phone,) = [c for c in result.candidates if c.source == "phone_area"]
    assert phone.label.startswith("Frankfurt (Oder)") and phone.level == "city"
    assert _km(phone.lat, phone.lon, FRANKFURT_ODER) < 5
    assert (
        result.prediction is not None
        and _km(result.prediction.lat, result.prediction.lon, FRANKFURT_ODER) < 5
    )


def test_area_code_0345_is_halle_saale() -> None:
    # described "Halle Saale"; Halle in Belgium has more names of its own spelled "Halle"
    (phone,) = [c for c in _locate("Tel. +49 345 123456").candidates if c.source == "phone_area"]
    assert _km(phone.lat, phone.lon, HALLE_SAALE) < 5


def test_a_state_area_code_is_the_state_not_a_namesake_town() -> None:
    # +1 408 is described "California": the state (a loose region candidate), not California, MD.
    (phone,) = [
        c for c in _locate("CORNER SHOP\nCall +1 408 234 5678").candidates if c.source == "phone_area"
    ]
    assert (phone.level, phone.country_code, phone.region) == ("admin1", "US", "California")
    assert _km(phone.lat, phone.lon, CALIFORNIA_MD) > 3000
    assert _km(phone.lat, phone.lon, NORTH_FORK_CA) < 400


def _area_descriptions() -> dict[tuple[str, str], int]:
    """(region, English description) of every area prefix in phonenumbers' geocoding tables, with
    how many prefixes carry it. A calling code shared by several regions (+1, +7, +262) is
    assigned by the region of a number in that prefix, padded out with a few digit choices."""
    import phonenumbers
    from phonenumbers.geodata import GEOCODE_DATA

    from geosleuth.core.countries import resolve_country

    out: dict[tuple[str, str], int] = {}
    for prefix, names in GEOCODE_DATA.items():
        area = names.get("en")
        if not area:
            continue
        code = next(
            int(prefix[:n]) for n in (1, 2, 3) if phonenumbers.region_codes_for_country_code(int(prefix[:n]))
        )
        regions = phonenumbers.region_codes_for_country_code(code)
        region = regions[0]
        for pad in ("0", "2", "5"):
            number = (prefix[len(str(code)) :] + pad * 12)[:10]
            found = phonenumbers.region_code_for_number(
                phonenumbers.PhoneNumber(country_code=code, national_number=int(number))
            )
            region = found or region
        if resolve_country(area) != region:  # nationwide numbers name only the country
            out[(region, area)] = out.get((region, area), 0) + 1
    return out


@pytest.mark.slow
def test_every_area_description_resolves_to_a_place_of_that_whole_name() -> None:
    """Where a place in the number's country (with its territories) carries the area description
    as a whole name, the phone-area place is within 50 km of one. Before, of about 40,000
    (region, description) pairs, 3 were farther: "Frankfurt (Oder)" (Frankfurt am Main, 478 km),
    "Fez/Meknes" and "Georgetown, IL" (the other Georgetown in Illinois, 303 km).

    And a description whose most populous namesake is a state or province is not answered by a
    town of that name outside it, more than 150 km from the region's centre: before, the agent
    took the first town among the search's five and 46 pairs (623 prefixes) did, "California"
    (396 prefixes) at California, Maryland. One is left: "San Martín", Peru, is the town of
    130,000 in Piura, which outranks the region of 340,000 by the search's lean to towns
    (`CITY_BONUS`)."""
    from geosleuth.core.countries import country_family
    from geosleuth.core.text import normalize

    gaz = get_gazetteer()
    far, elsewhere = [], []
    pairs = _area_descriptions()
    assert len(pairs) > 30_000
    for (region, area), count in sorted(pairs.items()):
        place = phone_area_place(area, region, gaz)
        if place is None:
            continue
        family = country_family(region)
        rows = gaz._db.execute("SELECT DISTINCT idx FROM names WHERE key = ?", (normalize(area),)).fetchall()
        named = [i for (i,) in rows if gaz.cc[i] in family and gaz.kind[i] != "country"]
        if not named:
            continue
        if min(_km(place.lat, place.lon, (gaz.lat[i], gaz.lon[i])) for i in named) > 50:
            far.append((region, area, count, place.name, place.admin1))
        top = gaz.place(max(named, key=lambda i: int(gaz.population[i])))
        outside = normalize(place.admin1 or "") != normalize(top.name)
        if (
            top.kind == "admin1"
            and place.kind == "city"
            and outside
            and _km(place.lat, place.lon, (top.lat, top.lon)) > 150
        ):
            elsewhere.append((region, area, count, place.name, place.admin1))
    assert far == []
    assert [(region, area) for region, area, *_ in elsewhere] == [("PE", "San Martín")], elsewhere
