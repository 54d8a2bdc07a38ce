"""Cache: hits skip the provider, replay mode fails clearly on a miss, images and TTL round-trip."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from tools_fakes import FakeServer, Reply, fake_settings, png_bytes

from geosleuth.tools import build_registry
from geosleuth.tools.base import ToolResult
from geosleuth.tools.cache import CacheEntry, CacheMissError, SQLiteCache, ToolCache, cache_key

NOMINATIM = [
    {
        "place_id": 1,
        "osm_type": "node",
        "osm_id": 42,
        "lat": "47.37",
        "lon": "8.54",
        "name": "Zürich",
        "display_name": "Zürich, Schweiz",
        "category": "place",
        "type": "city",
        "address": {"country_code": "ch", "country": "Schweiz"},
    }
]


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def _settings(server: FakeServer, path: Path, mode: str = "read_write", **providers: str):  # type: ignore[no-untyped-def]
    return fake_settings(
        server, providers or {"geocode": "nominatim"}, cache={"path": str(path), "mode": mode}
    )


async def test_second_identical_call_is_a_hit_and_skips_the_provider(
    server: FakeServer, tmp_path: Path
) -> None:
    server.route("/search", Reply(json=NOMINATIM))
    reg = build_registry(_settings(server, tmp_path / "c.sqlite"))
    first = await reg.call("geocode", {"address": "Zürich"})
    second = await reg.call("geocode", {"address": "  Zürich "})  # normalised to the same key
    assert first.ok and not first.cache_hit
    assert second.ok and second.cache_hit
    assert second.text == first.text and second.data == first.data
    assert server.hits("/search") == 1
    stats = reg.runtime.cache.stats
    assert (stats.hits, stats.misses, stats.writes) == (1, 1, 1)


async def test_cache_survives_a_new_registry(server: FakeServer, tmp_path: Path) -> None:
    server.route("/search", Reply(json=NOMINATIM))
    await build_registry(_settings(server, tmp_path / "c.sqlite")).call("geocode", {"address": "Zürich"})
    replay = build_registry(_settings(server, tmp_path / "c.sqlite", mode="replay"))
    again = await replay.call("geocode", {"address": "Zürich"})
    assert again.ok and again.cache_hit
    assert server.hits() == 1


async def test_replay_with_cold_cache_fails_clearly(server: FakeServer, tmp_path: Path) -> None:
    server.route("/search", Reply(json=NOMINATIM))
    reg = build_registry(_settings(server, tmp_path / "cold.sqlite", mode="replay"))
    result = await reg.call("geocode", {"address": "Zürich"})
    assert not result.ok
    assert "replay mode: no cached result for geocode" in result.error
    assert server.hits() == 0


async def test_errors_are_not_cached(server: FakeServer, tmp_path: Path) -> None:
    server.route("/search", Reply(status=500, json={}), Reply(status=500, json={}), Reply(json=NOMINATIM))
    reg = build_registry(_settings(server, tmp_path / "c.sqlite"))
    assert not (await reg.call("geocode", {"address": "Zürich"})).ok
    ok = await reg.call("geocode", {"address": "Zürich"})
    assert ok.ok and not ok.cache_hit


async def test_map_images_are_cached_as_png(server: FakeServer, tmp_path: Path) -> None:
    server.route("/maps/api/staticmap", Reply(body=png_bytes((640, 640), (10, 20, 30))))
    settings = _settings(server, tmp_path / "c.sqlite", static_map="google")
    reg = build_registry(settings)
    import os

    os.environ["GEOSLEUTH_GOOGLE_API_KEY"] = "k-cache-test-9999"
    try:
        first = await reg.call("static_map_query", {"lat": 1.0, "lon": 2.0, "zoom": 10})
        second = await reg.call("static_map_query", {"lat": 1.0, "lon": 2.0, "zoom": 10})
    finally:
        del os.environ["GEOSLEUTH_GOOGLE_API_KEY"]
    assert first.ok and second.cache_hit
    assert second.images[0].getpixel((5, 5)) == (10, 20, 30)
    assert b"k-cache-test-9999" not in (tmp_path / "c.sqlite").read_bytes()


def test_key_ignores_secrets_and_normalises() -> None:
    a = cache_key("geocode", "google@https://maps", {"address": "Zürich", "x": None})
    b = cache_key("geocode", "google@https://maps", {"address": " Zürich  "})
    c = cache_key("geocode", "nominatim@https://n", {"address": "Zürich"})
    assert a == b != c
    assert cache_key("t", "p", {"lat": 1.00000001}) == cache_key("t", "p", {"lat": 1.0})


def test_ttl_expiry(tmp_path: Path) -> None:
    backend = SQLiteCache(tmp_path / "t.sqlite")
    backend.set("k", CacheEntry("x", None, [], "p", time.time() - 10), ttl_s=5)
    assert backend.get("k") is None
    backend.set("k", CacheEntry("y", {"a": 1}, [png_bytes((4, 4))], "p", time.time()), ttl_s=None)
    entry = backend.get("k")
    assert entry is not None and entry.data == {"a": 1} and len(entry.images) == 1
    assert len(backend) == 1


async def test_modes_refresh_and_off(tmp_path: Path) -> None:
    calls = 0

    async def call() -> ToolResult:
        nonlocal calls
        calls += 1
        return ToolResult(text=f"n={calls}", images=[Image.new("RGB", (2, 2))])

    backend = SQLiteCache(tmp_path / "m.sqlite")
    rw = ToolCache(backend, "read_write")
    await rw.get_or_call("t", "p", {"a": 1}, call)
    assert (await rw.get_or_call("t", "p", {"a": 1}, call)).text == "n=1"
    refresh = ToolCache(backend, "refresh")
    assert (await refresh.get_or_call("t", "p", {"a": 1}, call)).text == "n=2"
    assert (await rw.get_or_call("t", "p", {"a": 1}, call)).text == "n=2"
    off = ToolCache(None, "off")
    assert (await off.get_or_call("t", "p", {"a": 1}, call)).text == "n=3"
    with pytest.raises(CacheMissError):
        await ToolCache(backend, "replay").get_or_call("t", "p", {"a": 2}, call)


def test_redis_backend_needs_its_package_or_url() -> None:
    from geosleuth.tools.config import CacheSettings

    with pytest.raises(ValueError, match="redis_url"):
        ToolCache.from_settings(CacheSettings(backend="redis"), Path("unused"))
    with pytest.raises(ValueError, match="replay"):
        ToolCache.from_settings(CacheSettings(backend="none", mode="replay"), Path("unused"))
