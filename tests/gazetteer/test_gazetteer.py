"""The offline gazetteer: forward, reverse, names in text, batch reverse geocoding."""

import numpy as np
import pytest

from geosleuth.core.geo import haversine_km
from geosleuth.gazetteer import get_gazetteer

REF = {"zurich": (47.3769, 8.5417), "tokyo": (35.6895, 139.6917), "moscow": (55.7558, 37.6173),
       "sao_paulo": (-23.5505, -46.6333), "springfield_il": (39.7817, -89.6501)}  # fmt: skip


@pytest.fixture(scope="module")
def gz():
    return get_gazetteer()


@pytest.mark.parametrize(
    ("query", "ref"),
    [("Zürich", "zurich"), ("Zurich", "zurich"), ("東京", "tokyo"), ("Москва", "moscow"),
     ("São Paulo", "sao_paulo"), ("Sao Paulo", "sao_paulo"), ("Springfield, Illinois", "springfield_il"),
     ("Springfield, IL", "springfield_il")],
)  # fmt: skip
def test_forward_multilingual_within_25km(gz, query, ref):
    top = gz.search(query)[0]
    assert haversine_km(top.lat, top.lon, *REF[ref]) < 25


def test_ambiguous_names_rank_by_population_and_filter_by_country(gz):
    springfields = gz.search("Springfield", limit=5)
    pops = [p.population for p in springfields if p.kind == "city"]
    assert pops == sorted(pops, reverse=True)
    assert all(p.country_code == "AU" for p in gz.search("Springfield", country="Australia"))
    assert gz.search("Paris, Texas")[0].admin1 == "Texas"
    assert gz.search("Paris")[0].country_code == "FR"
    assert gz.search("") == [] and gz.search("qqqxxyyzz") == []


@pytest.mark.parametrize(
    ("query", "code"), [("y", "IT"), ("Ý", "IT"), ("bi", "BE"), ("ao", "AT"), ("uc", "AU")]
)
def test_a_short_country_name_folded_is_not_that_country(gz, query, code):
    """Vietnamese "Ý" (Italy) folds to "y": a country place does not answer to such a fold."""
    assert all(p.country_code != code or p.kind != "country" for p in gz.search(query, limit=5))


@pytest.mark.parametrize(
    ("lat", "lon", "code"),
    [(48.8566, 2.3522, "FR"), (38.9072, -77.0369, "US"), (35.6762, 139.6503, "JP"), (-35.2809, 149.13, "AU"),
     (47.56, 7.59, "CH"),  # Basel, metres from France and Germany
     (47.5947, 7.6206, "DE"),  # Weil am Rhein, across the Rhine
     (47.5893, 7.5830, "FR"),  # Huningue, the French corner
     (32.52, -117.04, "MX"),  # Tijuana, next to San Diego
     (41.9029, 12.4534, "VA"), (36.14, -5.35, "GI"), (42.5063, 1.5218, "AD"),
     (54.0, 7.9, "DE"),  # North Sea off Heligoland: nearest polygon, not on land
     (-33.92, 18.35, "ZA")],  # off Cape Town
)  # fmt: skip
def test_reverse_country_by_polygon(gz, lat, lon, code):
    assert gz.reverse(lat, lon).country_code == code


def test_reverse_admin_levels_and_coast_flag(gz):
    r = gz.reverse(47.3769, 8.5417)
    assert (r.country_code, r.admin1) == ("CH", "Zurich") and r.on_land
    assert r.city_distance_km is not None and r.city_distance_km < 5
    assert gz.reverse(54.0, 7.9).on_land is False


def test_reverse_batch_handles_nan_and_matches_single(gz):
    out = gz.reverse_batch([48.8566, np.nan, 51.5074], [2.3522, 0.0, -0.1278])
    assert out["country_code"].tolist() == ["FR", "", "GB"]
    assert np.isnan(out["city_distance_km"][1])


def test_reverse_geocoder_semantics_match_package(gz):
    import reverse_geocoder as rg

    rng = np.random.default_rng(3)
    lat, lon = rng.uniform(-60, 70, 300), rng.uniform(-180, 180, 300)
    ours = gz.reverse_geocoder_batch(lat, lon)
    ref = rg.RGeocoder(mode=1, verbose=False).query(list(zip(lat, lon, strict=True)))
    assert ours["country_code"].tolist() == [r["cc"] for r in ref]
    assert ours["city"].tolist() == [r["name"] for r in ref]


def test_match_names_in_text(gz):
    found = {m.place.name for m in gz.match_names("Willkommen in Luzern, Tel. 041 227 17 17")}
    assert "Luzern" in found
    cjk = {m.place.country_code for m in gz.match_names("東京都渋谷区")}
    assert "JP" in cjk


def test_nearest_bbox_suggest_and_get(gz):
    near = gz.nearest(47.3769, 8.5417, k=3)
    assert len(near) == 3 and near[0].extra["distance_km"] < 3
    box = gz.places_in_bbox(45.8, 5.9, 47.8, 10.5, limit=5)
    assert {p.country_code for p in box} <= {"CH", "FR", "DE", "IT", "AT", "LI"} and len(box) == 5
    # Antimeridian-crossing box (Fiji) returns places on both sides.
    fiji = gz.places_in_bbox(-20, 177, -15, -178, limit=50)
    assert any(p.lon > 0 for p in fiji)
    assert gz.suggest("Lond")[0].name == "London"
    assert gz.get(gz.search("Zürich")[0].id) is not None
    assert gz.get("geonames:0") is None


def test_country_shapes(gz):
    shapes = gz.country_shapes()
    assert shapes["CH"].contains(__import__("shapely").Point(8.5417, 47.3769))
    assert len(shapes) > 200


@pytest.mark.parametrize("name", ["São Paulo", "New York", "Zürich", "Rio de Janeiro"])
def test_bare_name_prefers_the_town_over_its_province(gz, name):
    assert gz.search(name)[0].kind == "city"
    assert gz.search("Bavaria")[0].kind == "admin1"  # no town of that name: the region stands


def test_suggest_prefers_own_names_over_alternate_spellings(gz):
    assert gz.suggest("Luz", country="CH")[0].name == "Luzern"
    assert "Luzern" in [p.name for p in gz.suggest("Luz", limit=10)]


@pytest.mark.parametrize(
    ("lat", "lon", "city"),
    [(48.8584, 2.2945, "Paris"),  # Eiffel Tower: nearer to Neuilly's centre than to Paris's
     (48.8352, 2.2410, "Boulogne-Billancourt"),  # a suburb keeps its own name
     (47.3780, 8.5400, "Zurich")],
)  # fmt: skip
def test_reverse_city_is_the_place_the_point_belongs_to(gz, lat, lon, city):
    assert gz.reverse(lat, lon).city == city


@pytest.mark.parametrize("name", ["Illinois", "California", "Florida", "Illinois, United States"])
def test_a_village_sharing_a_state_name_does_not_outrank_the_state(gz, name):
    top = gz.search(name)[0]
    assert (top.kind, top.country_code) == ("admin1", "US")


@pytest.mark.parametrize(
    ("lat", "lon", "code", "city"),
    [(4.93, -52.33, "GF", "Cayenne"), (-20.88, 55.45, "RE", "Saint-Denis"), (16.24, -61.53, "GP", None),
     (78.22, 15.65, "SJ", "Longyearbyen"), (78.0, 16.5, "SJ", "Longyearbyen"),  # not Finnmark, 800 km away
     (12.15, -68.27, "BQ", "Kralendijk"), (-10.42, 105.68, "CX", "Flying Fish Cove"),
     (41.92, 8.74, "FR", "Ajaccio"), (47.35, -3.15, "FR", None), (69.65, 18.96, "NO", "Tromso"),
     (53.05, 4.8, "NL", None), (-42.88, 147.33, "AU", "Hobart")],
)  # fmt: skip
def test_territories_inside_a_sovereigns_polygon_keep_their_own_code(gz, lat, lon, code, city):
    r = gz.reverse(lat, lon)
    assert r.country_code == code
    assert city is None or r.city == city
    assert r.city_distance_km is not None and r.city_distance_km < 40


def test_split_territories_are_places_and_shapes(gz):
    import shapely

    assert [(p.country_code, p.kind) for p in gz.search("French Guiana", limit=1)] == [("GF", "country")]
    shapes = gz.country_shapes()
    cayenne = shapely.Point(-52.33, 4.93)
    assert shapes["GF"].contains(cayenne) and not shapes["FR"].contains(cayenne)
    assert shapes["FR"].contains(shapely.Point(2.3522, 48.8566))


def test_a_province_abroad_outranks_a_smaller_namesake_town(gz):
    (bali,) = gz.search("Bali", limit=1)
    assert (bali.country_code, bali.kind) == ("ID", "admin1")  # not Bāli, India (297k vs 1.8M)
    assert gz.search("Bali", country="IN", limit=1)[0].name == "Bāli"
