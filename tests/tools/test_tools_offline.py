"""Offline defaults: multilingual geocoding, reverse geocoding near borders and coasts, POI search
over a user file, full-text search, the offline map, and the GCJ-02 datum."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from geosleuth.core.geo import gcj02_to_wgs84, haversine_km, wgs84_to_gcj02
from geosleuth.tools import build_registry
from geosleuth.tools.config import ToolSettings


@pytest.fixture(scope="module")
def registry():  # type: ignore[no-untyped-def]
    return build_registry(ToolSettings(cache={"backend": "none"}))


@pytest.mark.parametrize(
    ("query", "lat", "lon"),
    [
        ("Zürich", 47.3769, 8.5417),
        ("東京", 35.6895, 139.6917),
        ("Москва", 55.7558, 37.6173),
        ("São Paulo", -23.5505, -46.6333),
        ("Springfield, Illinois", 39.7817, -89.6501),
        ("Sao Paulo", -23.5505, -46.6333),
    ],
)
async def test_offline_geocode_is_multilingual(registry, query: str, lat: float, lon: float) -> None:  # type: ignore[no-untyped-def]
    result = await registry.call("geocode", {"address": query})
    assert result.ok, result.error
    top = result.data[0]
    assert float(haversine_km(top["lat"], top["lon"], lat, lon)) < 25, result.text
    assert result.provider == "offline"


@pytest.mark.parametrize(
    ("lat", "lon", "cc"),
    [
        (48.8566, 2.3522, "FR"),
        (52.5200, 13.4050, "DE"),
        (35.6762, 139.6503, "JP"),
        (-35.2809, 149.1300, "AU"),
        (-15.7939, -47.8828, "BR"),
        (-1.2921, 36.8219, "KE"),
        (45.4215, -75.6972, "CA"),
        (38.9072, -77.0369, "US"),
        # near borders
        (48.5734, 7.7521, "FR"),
        (48.5728, 7.8156, "DE"),
        (47.5596, 7.5886, "CH"),
        (32.5149, -117.0382, "MX"),
        (32.7157, -117.1611, "US"),
        (31.7619, -106.4850, "US"),
        (31.6904, -106.4245, "MX"),
        (56.0465, 12.6945, "SE"),
        (56.0361, 12.6136, "DK"),
        # coasts
        (43.7102, 7.2620, "FR"),
        (38.7223, -9.1393, "PT"),
        (-33.8688, 151.2093, "AU"),
        (1.2903, 103.8519, "SG"),
    ],
)
async def test_offline_reverse_geocode_country(registry, lat: float, lon: float, cc: str) -> None:  # type: ignore[no-untyped-def]
    result = await registry.call("reverse_geocode", {"lat": lat, "lon": lon})
    assert result.ok, result.error
    assert result.data[0]["country_code"] == cc, result.text


async def test_reverse_geocode_rejects_bad_coordinates(registry) -> None:  # type: ignore[no-untyped-def]
    result = await registry.call("reverse_geocode", {"lat": 95, "lon": 0})
    assert not result.ok and "lat must be in [-90, 90]" in result.error


async def test_offline_poi_search_over_a_user_file(tmp_path: Path) -> None:
    csv_path = tmp_path / "pois.csv"
    csv_path.write_text(
        "id,name,lat,lon,category,address\n"
        "1,Café Odeon,47.3665,8.5456,cafe,Limmatquai 2 Zürich\n"
        "2,Café Sprüngli,47.3700,8.5390,cafe,Bahnhofstrasse 21 Zürich\n"
        "3,Café de Flore,48.8540,2.3325,cafe,172 Bd Saint-Germain Paris\n",
        encoding="utf-8",
    )
    geojson = tmp_path / "pois.geojson"
    geojson.write_text(
        '{"type": "FeatureCollection", "features": [{"type": "Feature", "id": "kh",'
        ' "geometry": {"type": "Point", "coordinates": [8.5484, 47.3704]},'
        ' "properties": {"name": "Kunsthaus", "amenity": "museum"}}]}',
        encoding="utf-8",
    )
    reg = build_registry(ToolSettings(cache={"backend": "none"}, poi_files=[csv_path, geojson]))
    result = await reg.call("poi_keyword_search", {"query": "cafe", "city": "Zürich"})
    assert result.ok, result.error
    names = [p["name"] for p in result.data]
    assert "Café Odeon" in names and "Café de Flore" not in names
    near = await reg.call("poi_keyword_search", {"query": "cafe", "near_lat": 48.85, "near_lon": 2.33})
    assert near.data[0]["name"] == "Café de Flore"
    tips = await reg.call("poi_input_tips", {"query": "Kunst"})
    assert tips.data[0]["id"] == "poi:pois:kh"
    detail = await reg.call("poi_detail_query", {"poi_id": "poi:pois:kh"})
    assert detail.ok and "museum" in detail.text and detail.data["country_code"] == "CH"
    missing = await reg.call("poi_detail_query", {"poi_id": "poi:none"})
    assert not missing.ok and "no POI with id" in missing.error


async def test_offline_web_search_over_gazetteer_and_documents(tmp_path: Path) -> None:
    doc = tmp_path / "notes.md"
    doc.write_text("# Tram notes\n\nThe blue-and-white trams of the VBZ run in Zürich since 1882.\n")
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text(
        '{"title": "Kyiv metro", "url": "https://example.org/kyiv", "text": "Київ метрополітен"}\n'
    )
    settings = ToolSettings(
        cache={"backend": "none"}, search_documents=[doc, jsonl], data_dir=tmp_path / "data"
    )
    reg = build_registry(settings)
    trams = await reg.call("web_search", {"query": "VBZ trams", "max_results": 3})
    assert trams.ok, trams.error
    assert trams.data[0]["title"] == "Tram notes"
    assert set(trams.data[0]) == {"title", "url", "snippet"}
    city = await reg.call("web_search", {"query": "Zurich", "max_results": 5})
    assert any("geonames.org" in hit["url"] for hit in city.data)
    cyr = await reg.call("web_search", {"query": "метрополітен"})
    assert cyr.data[0]["url"] == "https://example.org/kyiv"
    none = await reg.call("web_search", {"query": "qqqxxyyzz"})
    assert none.ok and none.data == [] and "No results" in none.text
    assert "<<<TOOL OUTPUT web_search" in trams.text
    # Words nearly every document has ("city", "in") must not drown the informative one.
    common = await reg.call("web_search", {"query": "Luzern city in", "max_results": 3})
    assert common.data[0]["title"] == "Luzern"
    unknown = await reg.call("web_search", {"query": "Bäckerei sign city"})
    assert not any(hit["title"] in {"Shanghai", "Beijing"} for hit in unknown.data)


@pytest.mark.parametrize(
    ("query", "first", "country", "not_before"),
    [
        # "Lisboa" is Lisbon's own-language name; João Lisboa (Brazil) only shares the word
        ("Rua Augusta Lisboa", "Lisbon", "Portugal", "João Lisboa"),
        ("Springfield Illinois", "Springfield", "Illinois", None),  # the names agree on one place
        ("Shibuya crossing Tokyo", "Shibuya", "Tokyo", None),
        ("New York pizza", "New York", "United States", "York"),  # "York" is part of "New York"
    ],
)
async def test_offline_web_search_ranks_exact_names_first(
    registry, query: str, first: str, country: str, not_before: str | None
) -> None:  # type: ignore[no-untyped-def]
    found = await registry.call("web_search", {"query": query, "max_results": 5})
    assert found.ok, found.error
    titles = [hit["title"] for hit in found.data]
    assert titles[0] == first and country in found.data[0]["snippet"], found.data
    if not_before is not None and not_before in titles:
        assert titles.index(not_before) > 0


async def test_offline_static_map_png(registry, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = await registry.call("static_map_query", {"lat": 47.3769, "lon": 8.5417, "zoom": 7})
    assert result.ok, result.error
    im = result.images[0]
    assert im.size == (640, 640)
    im.save(tmp_path / "map.png")
    pixels = np.asarray(im)
    centre = pixels[316:324, 316:324].reshape(-1, 3)
    assert any(tuple(p) == (220, 30, 30) for p in centre)  # the marker
    border = np.all(pixels == (140, 90, 150), axis=-1)
    assert border.sum() > 200  # country borders drawn (CH/DE/FR/AT/IT are all in view)
    water = np.all(pixels == (170, 211, 223), axis=-1)
    assert water.sum() < border.size * 0.2  # mostly land in central Europe
    sat = await registry.call("satellite_map_query", {"lat": 47.3769, "lon": 8.5417, "zoom": 7})
    assert sat.ok and "no satellite imagery" in sat.text.lower()


async def test_map_rejects_bad_zoom(registry) -> None:  # type: ignore[no-untyped-def]
    result = await registry.call("static_map_query", {"lat": 0, "lon": 0, "zoom": 30})
    assert not result.ok and "zoom must be between" in result.error


# --- GCJ-02 -----------------------------------------------------------------------------------

# Reference output of the widely used public algorithm (e.g. coordtransform's README example):
# WGS-84 (39.915, 116.404) -> GCJ-02 (39.91640428150164, 116.41024449916938);
# its one-step inverse of GCJ-02 (39.915, 116.404) gives WGS-84 (39.91359571849836, 116.39775550083061).
REF_TO_GCJ = (39.91640428150164, 116.41024449916938)
REF_TO_WGS = (39.91359571849836, 116.39775550083061)


def test_gcj02_beijing_both_ways_within_one_metre() -> None:
    glat, glon = wgs84_to_gcj02(39.915, 116.404)
    assert float(haversine_km(glat, glon, *REF_TO_GCJ)) * 1000 < 1.0
    wlat, wlon = gcj02_to_wgs84(39.915, 116.404)
    assert float(haversine_km(wlat, wlon, *REF_TO_WGS)) * 1000 < 1.0
    back_lat, back_lon = gcj02_to_wgs84(glat, glon)
    assert float(haversine_km(back_lat, back_lon, 39.915, 116.404)) * 1000 < 0.01
    assert 300 < float(haversine_km(glat, glon, 39.915, 116.404)) * 1000 < 800  # the offset is real


@pytest.mark.parametrize(("lat", "lon"), [(48.8566, 2.3522), (35.6762, 139.6503), (-33.8688, 151.2093)])
def test_gcj02_outside_china_unchanged(lat: float, lon: float) -> None:
    assert tuple(map(float, wgs84_to_gcj02(lat, lon))) == (lat, lon)
    assert tuple(map(float, gcj02_to_wgs84(lat, lon))) == (lat, lon)


async def test_offline_reverse_geocode_at_sea_says_so(registry) -> None:  # type: ignore[no-untyped-def]
    result = await registry.call("reverse_geocode", {"lat": 0.0, "lon": -140.0})
    assert result.ok
    place = result.data[0]
    assert place["name"] == "open water" and place["extra"]["on_land"] is False
    assert "at sea" in result.text and "km" in result.text


def test_malformed_poi_file_is_a_clear_error_naming_the_file(tmp_path: Path) -> None:
    from geosleuth.tools.providers.offline_geo import PoiStore

    bad_number = tmp_path / "pois.csv"
    bad_number.write_text("name,lat,lon\nCafe,abc,8.5\n", encoding="utf-8")
    with pytest.raises(ValueError, match="pois.csv is malformed"):
        PoiStore.load([bad_number])
    off_globe = tmp_path / "far.csv"
    off_globe.write_text("id,name,lat,lon\nx1,Cafe,95,8.5\n", encoding="utf-8")
    with pytest.raises(ValueError, match="far.csv: coordinates out of range for poi:far:x1"):
        PoiStore.load([off_globe])


async def test_remembered_poi_results_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from geosleuth.core.records import Place
    from geosleuth.tools.providers import base, offline_geo

    monkeypatch.setattr(base, "RECENT_PLACES", 3)
    provider = offline_geo.OfflineGeoProvider()
    places = [Place(id=f"p{i}", name=f"P{i}", lat=0.0, lon=float(i)) for i in range(5)]
    provider.recent.remember(places)
    assert list(provider.recent.ids()) == ["p2", "p3", "p4"]
    assert await provider.detail("p4") is not None


def test_search_documents_must_hold_json_objects(tmp_path: Path) -> None:
    from geosleuth.tools.providers.search_offline import document_rows

    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"title": "Luzern", "text": "Kapellbrücke"}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"docs.jsonl:2: expected a JSON object"):
        list(document_rows(docs))
