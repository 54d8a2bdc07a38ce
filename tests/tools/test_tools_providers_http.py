"""Every real provider against a fake server on 127.0.0.1 speaking its documented response shapes:
success, empty, 429, 500, timeout and malformed JSON."""

from __future__ import annotations

import tracemalloc
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tools_fakes import FakeServer, Reply, fake_settings, png_bytes

from geosleuth.core.geo import gcj02_to_wgs84, haversine_km, wgs84_to_gcj02
from geosleuth.tools import build_registry

KEY = "sk-test-SECRET-123456"


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for service in ("GOOGLE", "OPENCAGE", "AMAP", "TAVILY", "SERPER", "BRAVE", "SEARXNG"):
        monkeypatch.setenv(f"GEOSLEUTH_{service}_API_KEY", KEY)


@dataclass
class Case:
    id: str
    providers: dict[str, str]
    tool: str
    args: dict[str, Any]
    path: str
    success: Any
    empty: Any
    expect: str  # substring of the success text


NOMINATIM_ZURICH = {
    "place_id": 123,
    "osm_type": "relation",
    "osm_id": 1682248,
    "lat": "47.3744489",
    "lon": "8.5410422",
    "category": "boundary",
    "type": "administrative",
    "importance": 0.78,
    "name": "Zürich",
    "display_name": "Zürich, Bezirk Zürich, Zürich, Schweiz/Suisse/Svizzera/Svizra",
    "address": {
        "city": "Zürich",
        "county": "Bezirk Zürich",
        "state": "Zürich",
        "country": "Schweiz/Suisse/Svizzera/Svizra",
        "country_code": "ch",
    },
}
PHOTON_ZURICH = {
    "type": "FeatureCollection",
    "features": [
        {
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [8.5410422, 47.3744489]},
            "properties": {
                "osm_id": 1682248,
                "osm_type": "R",
                "name": "Zürich",
                "country": "Switzerland",
                "countrycode": "CH",
                "state": "Zurich",
                "type": "city",
                "osm_key": "place",
                "osm_value": "city",
            },
        }
    ],
}
PHOTON_KUNSTHAUS = {
    "type": "FeatureCollection",
    "features": [
        {
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [8.5484, 47.3704]},
            "properties": {
                "osm_id": 27364815,
                "osm_type": "W",
                "extent": [8.5476, 47.3709, 8.5492, 47.3699],
                "country": "Switzerland",
                "countrycode": "CH",
                "osm_key": "tourism",
                "osm_value": "museum",
                "housenumber": "1",
                "street": "Heimplatz",
                "postcode": "8001",
                "city": "Zürich",
                "state": "Zurich",
                "name": "Kunsthaus Zürich",
                "type": "house",
            },
        }
    ],
}
GOOGLE_ZURICH = {
    "status": "OK",
    "results": [
        {
            "formatted_address": "Zürich, Switzerland",
            "place_id": "ChIJGaK-SZcLkEcRA9wf5_GNbuY",
            "geometry": {"location": {"lat": 47.3768866, "lng": 8.541694}},
            "types": ["locality", "political"],
            "address_components": [
                {"long_name": "Zürich", "short_name": "Zürich", "types": ["locality"]},
                {"long_name": "Switzerland", "short_name": "CH", "types": ["country"]},
            ],
        }
    ],
}
OPENCAGE_ZURICH = {
    "results": [
        {
            "components": {
                "_type": "city",
                "city": "Zürich",
                "country": "Switzerland",
                "country_code": "ch",
                "state": "Zurich",
            },
            "confidence": 5,
            "formatted": "Zürich, Switzerland",
            "geometry": {"lat": 47.3723941, "lng": 8.5423328},
        }
    ],
    "status": {"code": 200, "message": "OK"},
    "total_results": 1,
}
AMAP_GEO = {
    "status": "1",
    "info": "OK",
    "infocode": "10000",
    "count": "1",
    "geocodes": [
        {
            "formatted_address": "北京市朝阳区阜通东大街6号",
            "country": "中国",
            "province": "北京市",
            "city": "北京市",
            "district": "朝阳区",
            "adcode": "110105",
            "location": "116.480881,39.989410",
            "level": "门牌号",
        }
    ],
}
AMAP_POIS = {
    "status": "1",
    "info": "OK",
    "infocode": "10000",
    "count": "1",
    "pois": [
        {
            "id": "B000A83M61",
            "name": "北京大学",
            "type": "科教文化服务;学校;高等院校",
            "typecode": "141201",
            "address": "颐和园路5号",
            "location": "116.310905,39.992806",
            "pname": "北京市",
            "cityname": "北京市",
            "adname": "海淀区",
            "tel": "010-62752114",
        }
    ],
}
GOOGLE_PLACES = {
    "places": [
        {
            "id": "ChIJ1",
            "displayName": {"text": "Kunsthaus Zürich", "languageCode": "de"},
            "formattedAddress": "Heimplatz 1, 8001 Zürich, Switzerland",
            "location": {"latitude": 47.3704, "longitude": 8.5484},
            "types": ["art_gallery", "museum"],
        }
    ],
}

CASES = [
    Case(
        "nominatim",
        {"geocode": "nominatim"},
        "geocode",
        {"address": "Zürich"},
        "/search",
        [NOMINATIM_ZURICH],
        [],
        "Zürich",
    ),
    Case(
        "photon",
        {"geocode": "photon"},
        "geocode",
        {"address": "Zürich"},
        "/api",
        PHOTON_ZURICH,
        {"type": "FeatureCollection", "features": []},
        "Zürich",
    ),
    Case(
        "google-geocode",
        {"geocode": "google"},
        "geocode",
        {"address": "Zürich"},
        "/maps/api/geocode/json",
        GOOGLE_ZURICH,
        {"status": "ZERO_RESULTS", "results": []},
        "Zürich",
    ),
    Case(
        "opencage",
        {"geocode": "opencage"},
        "geocode",
        {"address": "Zürich"},
        "/geocode/v1/json",
        OPENCAGE_ZURICH,
        {"results": [], "status": {"code": 200, "message": "OK"}, "total_results": 0},
        "Zürich",
    ),
    Case(
        "amap-geocode",
        {"geocode": "amap"},
        "geocode",
        {"address": "阜通东大街6号"},
        "/v3/geocode/geo",
        AMAP_GEO,
        {"status": "1", "info": "OK", "infocode": "10000", "count": "0", "geocodes": []},
        "朝阳区",
    ),
    Case(
        "amap-poi",
        {"poi": "amap"},
        "poi_keyword_search",
        {"query": "北京大学", "city": "北京"},
        "/v3/place/text",
        AMAP_POIS,
        {"status": "1", "info": "OK", "infocode": "10000", "count": "0", "pois": []},
        "北京大学",
    ),
    Case(
        "google-places",
        {"poi": "google"},
        "poi_keyword_search",
        {"query": "Kunsthaus"},
        "/v1/places:searchText",
        GOOGLE_PLACES,
        {},
        "Kunsthaus Zürich",
    ),
    Case(
        "nominatim-poi",
        {"poi": "nominatim"},
        "poi_keyword_search",
        {"query": "Zürich"},
        "/search",
        [NOMINATIM_ZURICH],
        [],
        "osm:R1682248",
    ),
    Case(
        "photon-poi",
        {"poi": "photon"},
        "poi_keyword_search",
        {"query": "Kunsthaus", "city": "Zürich"},
        "/api",
        PHOTON_KUNSTHAUS,
        {"type": "FeatureCollection", "features": []},
        "Heimplatz 1",
    ),
    Case(
        "tavily",
        {"search": "tavily"},
        "web_search",
        {"query": "Zürich tram"},
        "/search",
        {
            "query": "Zürich tram",
            "response_time": 0.5,
            "results": [
                {
                    "title": "Trams in Zürich",
                    "url": "https://example.org/tram",
                    "content": "VBZ trams",
                    "score": 0.9,
                }
            ],
        },
        {"query": "x", "results": [], "response_time": 0.1},
        "Trams in Zürich",
    ),
    Case(
        "serper",
        {"search": "serper"},
        "web_search",
        {"query": "Zürich tram"},
        "/search",
        {
            "searchParameters": {"q": "Zürich tram"},
            "organic": [
                {
                    "title": "Trams in Zürich",
                    "link": "https://example.org/tram",
                    "snippet": "VBZ",
                    "position": 1,
                }
            ],
        },
        {"searchParameters": {"q": "x"}, "organic": []},
        "Trams in Zürich",
    ),
    Case(
        "brave",
        {"search": "brave"},
        "web_search",
        {"query": "Zürich tram"},
        "/res/v1/web/search",
        {
            "type": "search",
            "web": {
                "type": "search",
                "results": [
                    {
                        "title": "Trams in <strong>Zürich</strong>",
                        "url": "https://example.org/tram",
                        "description": "The <strong>VBZ</strong> runs trams",
                    }
                ],
            },
        },
        {"type": "search"},
        "Trams in Zürich",
    ),
    Case(
        "searxng",
        {"search": "searxng"},
        "web_search",
        {"query": "Zürich tram"},
        "/search",
        {
            "query": "Zürich tram",
            "number_of_results": 1,
            "results": [
                {
                    "title": "Trams in Zürich",
                    "url": "https://example.org/tram",
                    "content": "VBZ",
                    "engine": "x",
                }
            ],
        },
        {"query": "x", "number_of_results": 0, "results": []},
        "Trams in Zürich",
    ),
]


def _registry(server: FakeServer, case: Case, **extra: Any):  # type: ignore[no-untyped-def]
    return build_registry(fake_settings(server, case.providers, **extra))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_success(server: FakeServer, case: Case) -> None:
    server.route(case.path, Reply(json=case.success))
    result = await _registry(server, case).call(case.tool, case.args)
    assert result.ok, result.error
    assert case.expect in result.text
    assert result.provider == next(iter(case.providers.values()))
    assert result.data
    assert KEY not in result.text and KEY not in str(result.data)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_empty(server: FakeServer, case: Case) -> None:
    server.route(case.path, Reply(json=case.empty))
    result = await _registry(server, case).call(case.tool, case.args)
    assert result.ok, result.error
    assert "No results" in result.text
    assert result.data == []


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_429_then_success_retries(server: FakeServer, case: Case) -> None:
    server.route(
        case.path,
        Reply(status=429, json={"error": "slow down"}, headers={"Retry-After": "0"}),
        Reply(json=case.success),
    )
    result = await _registry(server, case).call(case.tool, case.args)
    assert result.ok, result.error
    assert server.hits(case.path) == 2


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
@pytest.mark.parametrize("status", [429, 500])
async def test_persistent_error_status(server: FakeServer, case: Case, status: int) -> None:
    server.route(case.path, Reply(status=status, json={"error": f"key {KEY} failed"}))
    result = await _registry(server, case).call(case.tool, case.args)
    assert not result.ok
    assert f"HTTP {status}" in result.error and "2 attempt" in result.error
    assert KEY not in result.error
    assert server.hits(case.path) == 2  # max_retries=1


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_timeout(server: FakeServer, case: Case) -> None:
    server.route(case.path, Reply(json=case.success, delay_s=0.6))
    result = await _registry(
        server, case, http={"allow_private_urls": True, "max_retries": 0, "timeout_s": 0.15}
    ).call(case.tool, case.args)
    assert not result.ok
    assert "timed out" in result.error


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_malformed_json(server: FakeServer, case: Case) -> None:
    server.route(case.path, Reply(body=b'{"results": [ oops', headers={"Content-Type": "application/json"}))
    result = await _registry(server, case).call(case.tool, case.args)
    assert not result.ok
    assert "malformed JSON" in result.error


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_wrong_shape_is_a_clear_error(server: FakeServer, case: Case) -> None:
    server.route(case.path, Reply(json="surprise"))
    result = await _registry(server, case).call(case.tool, case.args)
    assert not result.ok
    assert "unexpected response" in result.error


async def test_client_error_is_not_retried_and_key_is_redacted(server: FakeServer) -> None:
    server.route("/maps/api/geocode/json", Reply(status=403, body=f"denied for key={KEY}".encode()))
    result = await build_registry(fake_settings(server, {"geocode": "google"})).call(
        "geocode", {"address": "x"}
    )
    assert not result.ok and "HTTP 403" in result.error
    assert KEY not in result.error and "***" in result.error
    assert server.hits() == 1


async def test_google_status_errors(server: FakeServer) -> None:
    server.route(
        "/maps/api/geocode/json", Reply(json={"status": "REQUEST_DENIED", "error_message": "bad key"})
    )
    result = await build_registry(fake_settings(server, {"geocode": "google"})).call(
        "geocode", {"address": "x"}
    )
    assert not result.ok and "REQUEST_DENIED" in result.error


async def test_amap_status_zero_is_an_error(server: FakeServer) -> None:
    server.route(
        "/v3/geocode/geo", Reply(json={"status": "0", "info": "INVALID_USER_KEY", "infocode": "10001"})
    )
    result = await build_registry(fake_settings(server, {"geocode": "amap"})).call(
        "geocode", {"address": "x"}
    )
    assert not result.ok and "INVALID_USER_KEY" in result.error


async def test_amap_converts_gcj02_results_to_wgs84(server: FakeServer) -> None:
    server.route("/v3/place/text", Reply(json=AMAP_POIS))
    result = await build_registry(fake_settings(server, {"poi": "amap"})).call(
        "poi_keyword_search", {"query": "北京大学"}
    )
    place = result.data[0]
    want_lat, want_lon = gcj02_to_wgs84(39.992806, 116.310905)
    assert place["lat"] == pytest.approx(float(want_lat), abs=1e-9)
    assert place["lon"] == pytest.approx(float(want_lon), abs=1e-9)
    shift_m = float(haversine_km(place["lat"], place["lon"], 39.992806, 116.310905)) * 1000
    assert 100 < shift_m < 1000  # the GCJ-02 offset is really removed


async def test_amap_near_search_sends_gcj02(server: FakeServer) -> None:
    server.route("/v3/place/around", Reply(json=AMAP_POIS))
    reg = build_registry(fake_settings(server, {"poi": "amap"}))
    result = await reg.call("poi_keyword_search", {"query": "大学", "near_lat": 39.99, "near_lon": 116.31})
    assert result.ok
    sent_lon, sent_lat = map(float, server.requests[-1].query["location"][0].split(","))
    glat, glon = wgs84_to_gcj02(39.99, 116.31)
    assert (sent_lat, sent_lon) == pytest.approx((float(glat), float(glon)), abs=1e-6)


async def test_amap_detail_and_tips(server: FakeServer) -> None:
    server.route("/v3/place/detail", Reply(json=AMAP_POIS))
    server.route(
        "/v3/assistant/inputtips",
        Reply(
            json={
                "status": "1",
                "info": "OK",
                "infocode": "10000",
                "count": "2",
                "tips": [
                    {
                        "id": "B000A83M61",
                        "name": "北京大学",
                        "district": "北京市海淀区",
                        "adcode": "110108",
                        "location": "116.310905,39.992806",
                        "address": "颐和园路5号",
                        "typecode": "141201",
                    },
                    {
                        "id": [],
                        "name": "北京大学东门(地铁站)",
                        "district": "北京市海淀区",
                        "adcode": "110108",
                        "location": [],
                        "address": [],
                        "typecode": "150500",
                    },
                ],
            }
        ),
    )
    reg = build_registry(fake_settings(server, {"poi": "amap"}))
    detail = await reg.call("poi_detail_query", {"poi_id": "B000A83M61"})
    assert detail.ok and "010-62752114" in detail.text
    tips = await reg.call("poi_input_tips", {"query": "北京大"})
    assert tips.ok and len(tips.data) == 1  # the tip without a location is dropped


async def test_nominatim_reverse_and_public_rate(server: FakeServer) -> None:
    server.route("/reverse", Reply(json=NOMINATIM_ZURICH))
    reg = build_registry(fake_settings(server, {"geocode": "nominatim"}))
    result = await reg.call("reverse_geocode", {"lat": 47.37, "lon": 8.54})
    assert result.ok and "[CH]" in result.text
    assert "geosleuth" in server.requests[-1].headers["User-Agent"]
    server.route("/reverse", Reply(json={"error": "Unable to geocode"}))
    empty = await reg.call("reverse_geocode", {"lat": 0.0, "lon": -140.0})
    assert empty.ok and "No results" in empty.text


def test_nominatim_public_server_is_limited_to_one_request_per_second() -> None:
    from geosleuth.tools.config import ToolSettings
    from geosleuth.tools.providers.nominatim import NominatimProvider

    assert NominatimProvider(ToolSettings()).client.requests_per_second == 1.0


async def test_search_headers_carry_keys_not_urls(server: FakeServer) -> None:
    server.route("/search", Reply(json={"query": "x", "results": []}))
    await build_registry(fake_settings(server, {"search": "tavily"})).call("web_search", {"query": "x"})
    seen = server.requests[-1]
    assert seen.headers["Authorization"] == f"Bearer {KEY}"
    assert KEY not in str(seen.query)


MAP_CASES = [
    ("google-static", {"static_map": "google"}, "static_map_query", "/maps/api/staticmap"),
    ("google-satellite", {"satellite_map": "google"}, "satellite_map_query", "/maps/api/staticmap"),
    ("osm", {"static_map": "osm"}, "static_map_query", "/*"),
    ("esri", {"satellite_map": "esri"}, "satellite_map_query", "/tile/*"),
    ("amap-static", {"static_map": "amap"}, "static_map_query", "/v3/staticmap"),
]


@pytest.mark.parametrize(("name", "providers", "tool", "path"), MAP_CASES, ids=[c[0] for c in MAP_CASES])
async def test_map_providers(
    server: FakeServer, name: str, providers: dict[str, str], tool: str, path: str
) -> None:
    size = (640, 640) if name.startswith(("google", "amap")) else (256, 256)
    server.route(path, Reply(body=png_bytes(size), headers={"Content-Type": "image/png"}))
    reg = build_registry(fake_settings(server, providers))
    result = await reg.call(tool, {"lat": 39.9087, "lon": 116.3975, "zoom": 15})
    assert result.ok, result.error
    assert result.images and result.images[0].size == (640, 640)
    if name == "amap-static":
        lon_s, lat_s = server.requests[-1].query["location"][0].split(",")
        glat, glon = wgs84_to_gcj02(39.9087, 116.3975)
        assert (float(lat_s), float(lon_s)) == pytest.approx((float(glat), float(glon)), abs=1e-6)
    if name in {"osm", "esri"}:
        assert server.hits() >= 4  # several tiles stitched


@pytest.mark.parametrize(("name", "providers", "tool", "path"), MAP_CASES, ids=[c[0] for c in MAP_CASES])
async def test_map_providers_errors(
    server: FakeServer, name: str, providers: dict[str, str], tool: str, path: str
) -> None:
    server.route(path, Reply(body=b"<html>not an image</html>", headers={"Content-Type": "text/html"}))
    reg = build_registry(fake_settings(server, providers))
    bad = await reg.call(tool, {"lat": 39.9, "lon": 116.4, "zoom": 15})
    assert not bad.ok and "did not return an image" in bad.error
    server.route(path, Reply(status=500, body=b"boom"))
    failed = await reg.call(tool, {"lat": 39.9, "lon": 116.4, "zoom": 15})
    assert not failed.ok and "HTTP 500" in failed.error


async def test_photon_and_opencage_reverse(server: FakeServer) -> None:
    server.route("/reverse", Reply(json=PHOTON_ZURICH))
    photon = await build_registry(fake_settings(server, {"geocode": "photon"})).call(
        "reverse_geocode", {"lat": 47.37, "lon": 8.54}
    )
    assert photon.ok and photon.data[0]["country_code"] == "CH"
    server.route("/geocode/v1/json", Reply(json=OPENCAGE_ZURICH))
    opencage = await build_registry(fake_settings(server, {"geocode": "opencage"})).call(
        "reverse_geocode", {"lat": 47.37, "lon": 8.54}
    )
    assert opencage.ok and opencage.data[0]["country_code"] == "CH"
    assert server.requests[-1].query["q"] == ["47.37,8.54"]
    assert opencage.provider == "opencage"


async def test_google_place_details_and_nominatim_lookup(server: FakeServer) -> None:
    server.route("/v1/places/ChIJ1", Reply(json=GOOGLE_PLACES["places"][0]))
    google = await build_registry(fake_settings(server, {"poi": "google"})).call(
        "poi_detail_query", {"poi_id": "ChIJ1"}
    )
    assert google.ok and "Heimplatz 1" in google.text
    assert server.requests[-1].headers["X-Goog-Api-Key"] == KEY
    server.route("/lookup", Reply(json=[NOMINATIM_ZURICH]))
    reg = build_registry(fake_settings(server, {"poi": "nominatim"}))
    osm = await reg.call("poi_detail_query", {"poi_id": "osm:R1682248"})
    assert osm.ok and server.requests[-1].query["osm_ids"] == ["R1682248"]
    sent = len(server.requests)
    for poi_id in ("12345", "osm:N\u00b2"):  # "²" is a Unicode digit, not an OSM id: refused before sending
        bad = await reg.call("poi_detail_query", {"poi_id": poi_id})
        assert not bad.ok and "osm:N123" in bad.error and bad.provider == "nominatim"
    assert len(server.requests) == sent


async def test_tile_maps_keep_to_the_parallel_connection_limit() -> None:
    import asyncio
    import io

    from PIL import Image

    from geosleuth.tools.config import ToolSettings
    from geosleuth.tools.providers import tiles

    tile = io.BytesIO()
    Image.new("RGB", (256, 256), (10, 20, 30)).save(tile, format="PNG")
    in_flight, peak, urls = 0, 0, []

    class CountingClient:
        async def get_bytes(self, url: str) -> bytes:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            urls.append(url)
            await asyncio.sleep(0.01)
            in_flight -= 1
            return tile.getvalue()

    provider = tiles.TileMapProvider(ToolSettings(), "osm")
    provider.client = CountingClient()  # type: ignore[assignment]
    m = await provider.render(47.37, 8.54, 12, "static")
    assert len(urls) >= 4 and peak == tiles.MAX_PARALLEL_TILES
    assert m.image.size == (640, 640)


async def test_photon_poi_biases_to_near_and_details_come_from_its_results(server: FakeServer) -> None:
    server.route("/api", Reply(json=PHOTON_KUNSTHAUS))
    reg = build_registry(fake_settings(server, {"poi": "photon"}))
    found = await reg.call("poi_keyword_search", {"query": "museum", "near_lat": 47.37, "near_lon": 8.55})
    assert found.ok and found.data[0]["id"] == "osm:W27364815" and found.data[0]["kind"] == "museum"
    query = server.requests[-1].query
    assert (query["q"], query["lat"], query["lon"], query["zoom"]) == (
        ["museum"],
        ["47.37"],
        ["8.55"],
        ["14"],
    )
    tips = await reg.call("poi_input_tips", {"query": "Kunsth", "city": "Zürich"})
    assert tips.ok and server.requests[-1].query["q"] == ["Kunsth Zürich"]
    detail = await reg.call("poi_detail_query", {"poi_id": "osm:W27364815"})
    assert detail.ok and "Heimplatz 1, 8001" in detail.text
    assert server.hits("/api") == 2  # the detail came from the search results, not a request
    unknown = await reg.call("poi_detail_query", {"poi_id": "osm:N1"})
    assert not unknown.ok and "cannot look places up by id" in unknown.error and unknown.provider == "photon"


async def test_photon_details_work_after_a_search_served_from_the_cache(
    server: FakeServer, tmp_path: Path
) -> None:
    server.route("/api", Reply(json=PHOTON_KUNSTHAUS))
    cache = {"path": str(tmp_path / "cache.sqlite")}
    first = build_registry(fake_settings(server, {"poi": "photon"}, cache=cache))
    assert (await first.call("poi_keyword_search", {"query": "Kunsthaus"})).ok
    second = build_registry(fake_settings(server, {"poi": "photon"}, cache=cache))
    cached = await second.call("poi_keyword_search", {"query": "Kunsthaus"})
    assert cached.ok and cached.cache_hit and server.hits("/api") == 1
    detail = await second.call("poi_detail_query", {"poi_id": "osm:W27364815"})
    assert detail.ok and "Kunsthaus Zürich" in detail.text


def _gzip_bomb(decoded_mib: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join([packer.compress(b" " * 2**20) for _ in range(decoded_mib)] + [packer.flush()])


BOUNDED_CASES = CASES + [Case(c[0], c[1], c[2], {"lat": 39.9, "lon": 116.4, "zoom": 15}, c[3], None, None, "")
                         for c in MAP_CASES]  # fmt: skip


@pytest.mark.parametrize("case", BOUNDED_CASES, ids=lambda c: c.id)
async def test_a_gzip_bomb_from_any_provider_stops_at_the_cap(server: FakeServer, case: Case) -> None:
    """Issue 41: every provider reads its reply through the one bounded reader: 64 MiB of spaces
    in 64 KB of gzip fail the call naming the cap, having inflated about the cap, not the bomb."""
    server.route(case.path, Reply(body=_gzip_bomb(64), headers={"Content-Encoding": "gzip"}))
    http = {"allow_private_urls": True, "max_retries": 2, "max_response_bytes": 1_000_000}
    registry = _registry(server, case, http=http)
    tracemalloc.start()
    try:
        result = await registry.call(case.tool, case.args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not result.ok
    assert "more than 1,000,000 bytes (decompressed)" in result.error and "max_response_bytes" in result.error
    assert peak < 16 * 2**20  # the cap and a chunk or two; httpx inflated the 64 MiB whole


@pytest.mark.parametrize("case", CASES[:3], ids=lambda c: c.id)
async def test_an_encoding_not_asked_for_is_refused_by_name(server: FakeServer, case: Case) -> None:
    server.route(case.path, Reply(body=b"\x8b\x00\x80", headers={"Content-Encoding": "br"}))
    result = await _registry(server, case).call(case.tool, case.args)
    assert not result.ok and "Content-Encoding 'br'" in result.error
    assert server.requests[-1].headers["Accept-Encoding"] == "gzip, deflate"
