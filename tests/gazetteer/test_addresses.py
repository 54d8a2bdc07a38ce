"""Offline geocoding of real addresses and of admin-1 names in local languages and scripts.

Reference coordinates are the real places (city halls / region centres), looked up by hand;
tolerances are a few km for towns and tens of km for regions (whose point is the
population-weighted centre of their towns, so it must also lie inside the region).
"""

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.core.countries import country_family, sovereign_of
from geosleuth.core.geo import chord_to_km, haversine_km, to_unit_vectors
from geosleuth.gazetteer import get_gazetteer
from geosleuth.gazetteer.address import (
    MAX_PARTS,
    cjk_substrings,
    cyrillic_stem,
    designator_free,
    name_variants,
    segment,
    split_address,
)

HAMBURG = (53.5511, 9.9937)  # Rathaus
KOWLOON = (22.3193, 114.1694)  # Mong Kok / Yau Tsim Mong
PARIS = (48.8566, 2.3522)
LONDON = (51.5074, -0.1278)
SPRINGFIELD_IL = (39.7817, -89.6501)
WASHINGTON_DC = (38.8951, -77.0364)
SAINT_PHILIPPE_RE = (-21.3586, 55.7679)
TOKYO = (35.6895, 139.6917)


@pytest.fixture(scope="module")
def gz():
    return get_gazetteer()


def _km(place, ref: tuple[float, float]) -> float:
    return float(haversine_km(place.lat, place.lon, *ref))


@pytest.mark.parametrize(
    ("address", "ref", "code"),
    [
        ("Schöneberger Straße, 22149 Hamburg, Germany", HAMBURG, "DE"),  # was Germany's centre, 291 km
        ("Germany, Hamburg, Schöneberger Straße", HAMBURG, "DE"),  # coarse to fine
        ("Hamburg 22149, Deutschland", HAMBURG, "DE"),  # postcode after the town
        ("China; Hong Kong; Kowloon", KOWLOON, "HK"),  # was central China
        ("China；Hong Kong；Kowloon", KOWLOON, "HK"),  # full-width semicolons
        ("中国，香港，九龍", KOWLOON, "HK"),  # full-width commas, Chinese names
        ("Kowloon, Hong Kong, China", KOWLOON, "HK"),  # fine to coarse
        ("8 Rue du Faubourg Saint-Honoré, 75008 Paris, France", PARIS, "FR"),
        ("10 Downing Street, London SW1A 2AA, United Kingdom", LONDON, "GB"),
        ("Main Street 5, Springfield, Illinois, USA", SPRINGFIELD_IL, "US"),
        ("Washington, D.C., United States", WASHINGTON_DC, "US"),  # a place named twice supports itself
        ("Saint-Philippe, France (Réunion)", SAINT_PHILIPPE_RE, "RE"),  # parenthesis is a component
    ],
)
def test_an_address_resolves_to_its_most_specific_known_component(gz, address, ref, code):
    top = gz.search(address)[0]
    assert (top.kind, top.country_code) == ("city", code), top
    assert _km(top, ref) < 10, top


def test_a_town_abroad_does_not_override_the_named_country(gz):
    # No Fish Creek in the United States is in the gazetteer; the Australian one contradicts the country.
    top = gz.search("Fish Creek, United States")[0]
    assert (top.kind, top.country_code) == ("country", "US")
    assert gz.search("Fish Creek")[0].country_code == "AU"


def test_a_country_alone_is_the_country_and_unknown_text_is_nothing(gz):
    assert [(p.kind, p.country_code) for p in gz.search("Germany", limit=1)] == [("country", "DE")]
    assert gz.search("Schöneberger Straße 7, 22149") == []
    assert gz.search(" ;，; ") == []


@pytest.mark.parametrize(
    ("name", "code", "ref", "km"),
    [
        ("Bayern", "DE", (48.95, 11.40), 80),  # geographic centre near Kipfenberg
        ("Bavaria", "DE", (48.95, 11.40), 80),
        ("Baden-Württemberg", "DE", (48.54, 9.04), 60),
        ("Baden-Wurttemberg", "DE", (48.54, 9.04), 60),
        ("Île-de-France", "FR", (48.71, 2.50), 40),
        ("山东", "CN", (36.40, 118.51), 150),
        ("山东省", "CN", (36.40, 118.51), 150),
        ("Shandong Province", "CN", (36.40, 118.51), 150),
        ("Токийская обл.", "JP", TOKYO, 40),  # adjective + abbreviated "oblast"
        ("Tokyo Prefecture", "JP", TOKYO, 40),
        ("Московская обл.", "RU", (55.75, 37.62), 120),  # a ring around Moscow: its centre is in the city
        ("Moscow Oblast", "RU", (55.75, 37.62), 120),
        ("Київська область", "UA", (50.45, 30.52), 150),
        ("Cataluña", "ES", (41.59, 1.52), 120),
    ],
)
def test_admin1_names_in_local_languages_and_scripts(gz, name, code, ref, km):
    top = gz.search(name)[0]
    assert (top.kind, top.country_code) == ("admin1", code), top
    assert _km(top, ref) < km, top
    if code != "RU":
        assert gz.reverse(top.lat, top.lon).admin1 == top.name  # the point lies in the region


def test_admin1_names_qualify_towns(gz):
    top = gz.search("Nürnberg, Bayern")[0]
    assert (top.name, top.admin1) == ("Nuremberg", "Bavaria")
    assert gz.search("Jinan, 山东省")[0].admin1 == "Shandong Sheng"


def test_a_settlement_keeps_precedence_over_its_namesake_region(gz):
    assert gz.search("Tokyo")[0].kind == "city"
    assert gz.search("Hamburg, Germany")[0].kind == "city"
    found = {m.place.name for m in gz.match_names("Willkommen in Luzern")}
    assert "Luzern" in found  # a region's other-language name yields to the town's own


def test_split_address_components():
    assert split_address("Schöneberger Straße, 22149 Hamburg, Germany") == [
        "Schöneberger Straße", "Hamburg", "Germany",
    ]  # fmt: skip
    assert split_address("China；Hong Kong；Kowloon") == ["China", "Hong Kong", "Kowloon"]
    assert split_address("Deadhorse (Prudhoe Bay), USA") == ["Deadhorse", "Prudhoe Bay", "USA"]
    assert split_address("12345; 7") == []


@pytest.mark.parametrize(
    ("key", "core"),
    [("moscow oblast", "moscow"), ("province of alberta", "alberta"), ("山东省", "山东"), ("bayern", ""),
     ("京都", "")],
)  # fmt: skip
def test_designator_free(key, core):
    assert designator_free(key) == core


def test_cyrillic_adjective_and_noun_share_a_stem():
    assert cyrillic_stem("токииская") == cyrillic_stem("токио") == "ток"
    assert cyrillic_stem("баварская") == cyrillic_stem("бавария") == "бавар"
    assert cyrillic_stem("tokyo") == "" and cyrillic_stem("ок") == ""


def test_country_families():
    assert {"CN", "HK", "MO"} <= country_family("CN") and "TW" not in country_family("CN")
    assert {"FR", "RE", "GF", "NC"} <= country_family("FR")
    assert country_family("DE") == frozenset({"DE"})
    assert sovereign_of("GI") == "GB" and sovereign_of("PS") == "PS"  # "Indeterminate" is no dependency


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_split_address_is_bounded_and_total(text):
    parts = split_address(text)
    assert len(parts) <= MAX_PARTS
    assert all(p and not any(ch.isdigit() and ch.isascii() for ch in p) for p in parts)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "Springfield",
                "Paris",
                "Texas",
                "China",
                "Kowloon",
                "обл.",
                "省",
                "12345",
                "Main St",
                ";",
                "，",
                "(",
                ")",
            ]
        ),
        max_size=20,
    )
)
def test_search_never_raises_on_address_soup(words):
    found = get_gazetteer().search(" ".join(words), limit=3)
    assert len(found) <= 3


def test_get_gazetteer_once_loaded_does_no_work(gz, monkeypatch):
    import geosleuth.gazetteer.build as build

    def boom(*_a, **_k):
        raise AssertionError("recomputed on a warm call")

    monkeypatch.setattr(build, "default_data_dir", boom)
    monkeypatch.setattr(build, "ensure_built", boom)
    assert get_gazetteer() is gz
    assert get_gazetteer() is gz


def test_country_grid_answers_exactly_as_the_tile_tree(gz):
    """The lookup grid must not change one answer: random points, points on 1-degree and
    0.1-degree grid lines, and points a hair off them, against the tile-tree path alone."""
    rng = np.random.default_rng(7)
    lat = np.r_[
        rng.uniform(-60, 75, 6000),
        np.round(rng.uniform(35, 60, 2000), 1),
        np.floor(rng.uniform(-40, 60, 1000)),
        np.round(rng.uniform(40, 55, 1000), 1) + 1e-12,
    ]
    lon = np.r_[rng.uniform(-180, 180, 6000), np.round(rng.uniform(-10, 30, 2000), 1),
                rng.uniform(-120, 140, 1000), np.round(rng.uniform(0, 20, 1000), 1) - 1e-12]  # fmt: skip
    lat, lon = np.r_[lat, 90.0, -90.0, np.nan], np.r_[lon, 180.0, -180.0, 0.0]
    codes, on_land = gz.country_batch(lat, lon)
    ref_codes = np.full(lat.shape, "", dtype=object)
    ref_land = np.zeros(lat.shape, dtype=bool)
    rows = np.flatnonzero(np.isfinite(lat))
    off = rows[gz._tree_countries(rows, lat, lon, ref_codes, ref_land)]
    _, vertex_codes, vertex_tree = gz._pieces[0], gz._pieces[2], gz._pieces[3]

    ref_codes[off] = vertex_codes[vertex_tree.query(to_unit_vectors(lat[off], lon[off]), k=1)[1]]
    assert codes.tolist() == ref_codes.tolist()
    assert on_land.tolist() == ref_land.tolist()


def test_reverse_batch_keeps_the_callers_order(gz):
    lat = np.array([35.6895, 48.8566, np.nan, -33.8688, 47.3769])
    lon = np.array([139.6917, 2.3522, 0.0, 151.2093, 8.5417])
    out = gz.reverse_batch(lat, lon)
    assert out["country_code"].tolist() == ["JP", "FR", "", "AU", "CH"]
    single = [gz.reverse_batch(lat[i : i + 1], lon[i : i + 1])["city"][0] for i in range(lat.size)]
    assert out["city"].tolist() == single


async def test_geocode_tool_resolves_addresses_inline_once_warm():
    from geosleuth.tools import build_registry
    from geosleuth.tools.config import ToolSettings

    reg = build_registry(ToolSettings(cache={"backend": "none"}), names=["geocode"])
    for _ in range(2):  # the first call loads in a worker thread, the second runs inline
        result = await reg.call("geocode", {"address": "China; Hong Kong; Kowloon"})
        assert result.ok, result.error
        top = result.data[0]
        assert top["country_code"] == "HK" and float(haversine_km(top["lat"], top["lon"], *KOWLOON)) < 10
    assert reg.runtime.provider("geocode")._search_ready


def test_hedges_abbreviations_and_settlement_words():
    assert split_address("Rhyolite (near Beatty), Orlando area") == ["Rhyolite", "Beatty", "Orlando"]
    assert "saint robert" in name_variants("st robert") and "brick" in name_variants("brick township")
    assert name_variants("industry") == []


@pytest.mark.parametrize(
    ("address", "ref"),
    [("St. Robert, United States", (37.8281, -92.1777)),
     ("Brick Township, United States", (40.0584, -74.1372)),
     ("Creve Coeur (St. Louis), United States", (38.6609, -90.4226))],
)  # fmt: skip
def test_spelling_variants_find_the_town(gz, address, ref):
    assert _km(gz.search(address)[0], ref) < 10


SHIBUYA = (35.6618, 139.7041)  # Shibuya Station
OSAKA = (34.6937, 135.5023)
SAPPORO = (43.0618, 141.3545)
BEIJING_CHAOYANG = (39.9215, 116.4434)  # Chaoyang District government


@pytest.mark.parametrize(
    ("address", "ref", "km"),
    [("東京都渋谷区", SHIBUYA, 5), ("〒150-0002 東京都渋谷区渋谷2丁目21-1", SHIBUYA, 5),
     ("大阪府大阪市中央区", OSAKA, 5), ("北海道札幌市", SAPPORO, 5), ("香港九龍", KOWLOON, 10),
     ("北京市朝阳区建国路88号", BEIJING_CHAOYANG, 10)],
)  # fmt: skip
def test_chinese_and_japanese_addresses_without_separators(gz, address, ref, km):
    top = gz.search(address)[0]
    assert top.kind == "city" and _km(top, ref) < km, top


def test_segment_is_longest_match_and_skips_street_names():
    known = {"東京都", "東京", "渋谷区", "渋谷", "北京市", "朝阳区", "建国"}
    assert segment("東京都渋谷区", known) == ["東京都", "渋谷区"]
    assert segment("北京市朝阳区建国路", known) == ["北京市", "朝阳区"]  # 建国 begins 建国路, a street
    assert segment("無名", known) == []
    assert cjk_substrings("ab") == [] and len(cjk_substrings("東" * 500)) <= 40 * 7


def test_large_reverse_batches_match_small_ones_and_the_unbounded_search(gz):
    """A large batch (cell-ordered, polygons beside the place search, bounded large-place search)
    answers exactly as small inline batches do, and its places are those of the plain rule:
    the nearest place unless a large place's reach covers the point better."""
    from geosleuth.gazetteer import index as gi

    rng = np.random.default_rng(7)
    n = gi._OVERLAP_POINTS + 500
    lat, lon = rng.uniform(-60, 70, n), rng.uniform(-180, 180, n)
    lat[:300] = rng.normal(48.8, 0.3, 300)  # around Paris: large-place reach matters
    lon[:300] = rng.normal(2.35, 0.3, 300)
    lat[300:310], lon[310:320] = np.nan, np.inf
    lat[320:330] = 95.0  # out of range
    big = gz.reverse_batch(lat, lon)
    parts = [gz.reverse_batch(lat[i : i + 400], lon[i : i + 400]) for i in range(0, n, 400)]
    for key, values in big.items():
        joined = np.concatenate([p[key] for p in parts])
        assert (values.tolist() == joined.tolist()) or np.array_equal(values, joined, equal_nan=True), key
    ok = np.isfinite(lat) & np.isfinite(lon) & (np.abs(lat) <= 90)
    vectors = to_unit_vectors(lat[ok], lon[ok])
    dist, chosen = gz._city_tree.query(vectors, k=1)
    big_dist, big_i = gz._big_city_tree.query(vectors, k=1)
    big_i = gz._big_city_index[big_i]
    reach = gz._city_reach_km
    swap = chord_to_km(big_dist) - reach[big_i] < chord_to_km(dist) - reach[chosen]
    expected = np.where(swap, big_i, chosen)
    assert gz._nearest_places(vectors)[1].tolist() == expected.tolist()


def test_a_forked_child_reverse_geocodes_large_batches(gz):
    """The polygon worker thread does not survive fork: a child must start its own, not wait."""
    import multiprocessing

    from geosleuth.gazetteer import index as gi

    lat = np.full(gi._OVERLAP_POINTS, 47.3769)
    lon = np.full(gi._OVERLAP_POINTS, 8.5417)
    assert gz.reverse_batch(lat, lon)["country_code"][0] == "CH"  # the parent's pool exists now

    def child(queue: Any) -> None:
        queue.put(str(gz.reverse_batch(lat, lon)["country_code"][-1]))

    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=child, args=(queue,))
    proc.start()
    proc.join(timeout=120)
    alive = proc.is_alive()
    if alive:
        proc.kill()
    assert not alive and queue.get(timeout=5) == "CH"
