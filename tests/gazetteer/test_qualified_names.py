"""Place names written with a qualifier: a river or region in parentheses or after a slash
("Frankfurt (Oder)", "Halle/Saale"), a preposition ("Weil am Rhein", "Kingston upon Hull"), a
country after a namesake ("Córdoba (Argentina)").

Reference coordinates are each town's own, from its Wikipedia infobox (degrees and minutes,
converted by hand: 52°21′N 14°33′E = 52 + 21/60, 14 + 33/60 = 52.35, 14.55); a town's GeoNames
point is its centre, so "right" means within 5 km.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.core.geo import haversine_km
from geosleuth.gazetteer import get_gazetteer
from geosleuth.gazetteer.address import MAX_PARTS, MAX_QUALIFIER_WORDS, split_qualified, whole_keys

FRANKFURT_ODER = (52.35, 14.55)  # 52°21′N 14°33′E
FRANKFURT_MAIN = (50.1167, 8.6833)  # 50°07′N 8°41′E
HALLE_SAALE = (51.4833, 11.9667)  # 51°29′N 11°58′E
MUELHEIM_RUHR = (51.4333, 6.8833)  # 51°26′N 6°53′E
WEIL_AM_RHEIN = (47.5833, 7.6167)  # 47°35′N 7°37′E
NEUSTADT_WEINSTRASSE = (49.35, 8.1333)  # 49°21′N 8°08′E
NEUSTADT_HESSEN = (50.85, 9.1167)  # 50°51′N 9°07′E
FREIBURG_BREISGAU = (47.9833, 7.85)  # 47°59′N 7°51′E
ROTHENBURG_TAUBER = (49.3833, 10.1833)  # 49°23′N 10°11′E
BRANDENBURG_HAVEL = (52.4167, 12.55)  # 52°25′N 12°33′E
ST_GALLEN = (47.4167, 9.3667)  # 47°25′N 9°22′E
VILLINGEN_SCHWENNINGEN = (48.0667, 8.4667)  # 48°04′N 8°28′E
HULL = (53.7333, -0.3333)  # 53°44′N 0°20′W
NEWCASTLE = (54.9667, -1.6167)  # 54°58′N 1°37′W
SAINT_DENIS_RE = (-20.8833, 55.45)  # 20°53′S 55°27′E
CORDOBA_AR = (-31.4167, -64.1833)  # 31°25′S 64°11′W
CORDOBA_ES = (37.8833, -4.7667)  # 37°53′N 4°46′W


@pytest.fixture(scope="module")
def gz():
    return get_gazetteer()


def _km(place, ref: tuple[float, float]) -> float:
    return float(haversine_km(place.lat, place.lon, *ref))


@pytest.mark.parametrize(
    ("query", "ref", "code"),
    [
        ("Frankfurt (Oder)", FRANKFURT_ODER, "DE"),  # was Frankfurt am Main, 478 km away
        ("Frankfurt/Oder", FRANKFURT_ODER, "DE"),
        ("15230 Frankfurt (Oder), Deutschland", FRANKFURT_ODER, "DE"),
        ("Frankfurt an der Oder", FRANKFURT_ODER, "DE"),
        ("Frankfurt (Main)", FRANKFURT_MAIN, "DE"),  # the head word's name that carries "Main"
        ("Halle (Saale)", HALLE_SAALE, "DE"),  # was Halle, Belgium
        ("Halle/Saale", HALLE_SAALE, "DE"),
        ("Mülheim an der Ruhr", MUELHEIM_RUHR, "DE"),
        ("Mülheim (Ruhr)", MUELHEIM_RUHR, "DE"),
        ("Weil am Rhein", WEIL_AM_RHEIN, "DE"),
        ("Weil (Rhein)", WEIL_AM_RHEIN, "DE"),  # was Weil, Bavaria
        ("Neustadt an der Weinstraße", NEUSTADT_WEINSTRASSE, "DE"),
        ("Neustadt (Weinstraße)", NEUSTADT_WEINSTRASSE, "DE"),
        ("Neustadt (Hessen)", NEUSTADT_HESSEN, "DE"),  # was Neustadt, Hamburg
        ("Freiburg im Breisgau", FREIBURG_BREISGAU, "DE"),
        ("Freiburg (Breisgau)", FREIBURG_BREISGAU, "DE"),
        ("Rothenburg ob der Tauber", ROTHENBURG_TAUBER, "DE"),
        ("Brandenburg an der Havel", BRANDENBURG_HAVEL, "DE"),
        ("Sankt Gallen", ST_GALLEN, "CH"),
        ("St. Gallen", ST_GALLEN, "CH"),
        ("Villingen-Schwenningen", VILLINGEN_SCHWENNINGEN, "DE"),
        ("Kingston upon Hull", HULL, "GB"),
        ("Newcastle upon Tyne", NEWCASTLE, "GB"),
        ("Saint-Denis (Réunion)", SAINT_DENIS_RE, "RE"),
        ("Córdoba (Argentina)", CORDOBA_AR, "AR"),
        ("Córdoba (Spain)", CORDOBA_ES, "ES"),  # the country in the parenthesis still decides
        ("Córdoba (España)", CORDOBA_ES, "ES"),
    ],
)
def test_a_qualified_name_is_the_place_it_names(gz, query, ref, code):
    top = gz.search(query)[0]
    assert (top.kind, top.country_code) == ("city", code), top
    assert _km(top, ref) < 5, top


def test_a_qualifier_that_is_a_separate_place_still_qualifies_by_containment(gz):
    # "Creve Coeur (St. Louis)": no name of Creve Coeur carries "St. Louis"; the town of that
    # name near St. Louis (38°40′N 90°25′W = 38.6667, -90.4167) wins by lying within its reach.
    top = gz.search("Creve Coeur (St. Louis), United States")[0]
    assert top.name == "Creve Coeur" and _km(top, (38.6667, -90.4167)) < 5
    top = gz.search("Saint-Philippe, France (Réunion)")[0]  # 21°21′S 55°46′E
    assert top.country_code == "RE" and _km(top, (-21.35, 55.7667)) < 5


def test_a_state_outranks_a_namesake_town_in_another_state(gz):
    # Wyoming, Michigan (75,000 people) and Delaware, Ohio are towns elsewhere: the state it is.
    for state in ("Wyoming", "Delaware", "Maine", "Missouri", "California", "Florida"):
        top = gz.search(state, country="US")[0]
        assert (top.kind, top.name) == ("admin1", state), top
    # A town in (or a capital district beside) its namesake province still outranks it.
    for town, code in (("Buenos Aires", "AR"), ("São Paulo", "BR"), ("Québec", "CA"), ("Luzern", "CH")):
        top = gz.search(town)[0]
        assert (top.kind, top.country_code) == ("city", code), top


def test_an_address_that_is_a_name_as_a_whole_is_that_place(gz):
    # "Georgetown, IL" is the alternate name of the Georgetown in Vermilion County
    # (39°59′N 87°38′W = 39.9833, -87.6333), not of the slightly larger one in the north.
    top = gz.search("Georgetown, IL")[0]
    assert top.admin1 == "Illinois" and _km(top, (39.9833, -87.6333)) < 5


def test_split_qualified_keeps_the_written_name_beside_its_components():
    (one,) = split_qualified("15230 Frankfurt (Oder)")
    assert one.parts == ("Frankfurt", "Oder") and "frankfurt oder" in one.keys
    assert one.head == "Frankfurt" and one.qualifier_words == ("oder",)
    stretches = split_qualified("Saint-Philippe, France (Réunion)")
    assert [s.parts for s in stretches] == [("Saint-Philippe",), ("France", "Réunion")]
    assert stretches[0].keys == () and whole_keys(stretches) == ("saint philippe france reunion",)
    assert whole_keys(split_qualified("Frankfurt (Oder)")) == ()


_PIECES = ["Frankfurt", "Halle", "Oder", "(", ")", "（", "）", "[", "]", "/", ",", " ", "am", "Rhein",
           "San", "St.", "12345", "Réunion", "an der", "東京都", "((", "))"]  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=12)), max_size=60))
def test_search_on_strings_with_parentheses_is_bounded_and_never_raises(pieces):
    text = "".join(pieces)
    stretches = split_qualified(text)
    assert sum(len(s.parts) for s in stretches) <= MAX_PARTS
    assert all(len(s.keys) <= 2 and len(s.qualifier_words) <= MAX_QUALIFIER_WORDS for s in stretches)
    assert all(p and not any(ch.isdigit() and ch.isascii() for ch in p) for s in stretches for p in s.parts)
    assert len(get_gazetteer().search(text, limit=3)) <= 3
    assert len(get_gazetteer().search(text, country="DE", limit=2)) <= 2
