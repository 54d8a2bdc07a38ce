"""Both cache backends, same behaviour: SQLite (a file) and Redis (a real redis-server on 127.0.0.1).

The Redis cases start ``redis-server`` on a free local port with persistence off, and are
skipped with a reason when the binary or the ``redis`` package is missing
(CI: ``apt-get install -y redis-server`` and ``pip install redis``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PIL import Image
from tools_fakes import NOMINATIM, FakeServer, Reply, fake_settings, free_port, png_bytes

from geosleuth.tools import build_registry
from geosleuth.tools.base import ToolResult
from geosleuth.tools.cache import (
    CacheBackend,
    CacheEntry,
    CacheMissError,
    CacheUnavailableError,
    RedisCache,
    SQLiteCache,
    ToolCache,
)
from geosleuth.tools.config import CacheSettings

SECRET = "k-backend-test-7777"


BackendFactory = Callable[[], CacheBackend]


@pytest.fixture(params=["sqlite", "redis"])
def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> BackendFactory:
    """A factory of backends that share one store (a new instance sees earlier writes)."""
    if request.param == "sqlite":
        path = tmp_path / "cache.sqlite"
        return lambda: SQLiteCache(path)
    url = request.getfixturevalue("redis_url")
    prefix = f"geosleuth:test:{uuid.uuid4().hex}:"
    return lambda: RedisCache(url, prefix=prefix)


def _stored_bytes(backend: CacheBackend) -> bytes:
    """Everything the backend holds, keys included, as one blob (to look for secrets)."""
    if isinstance(backend, SQLiteCache):
        return backend.path.read_bytes() + b"".join(
            p.read_bytes() for p in backend.path.parent.glob(backend.path.name + "-*")
        )
    assert isinstance(backend, RedisCache)
    out = b""
    for key in backend.client.scan_iter(match=backend.prefix + "*"):
        out += key + b"".join(k + v for k, v in backend.client.hgetall(key).items())
    return out


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def _registry(server: FakeServer, backend: CacheBackend, mode: str = "read_write", **providers: str):  # type: ignore[no-untyped-def]
    settings = fake_settings(server, providers or {"geocode": "nominatim"})
    return build_registry(settings, cache=ToolCache(backend, mode))  # type: ignore[arg-type]


async def test_hit_skips_the_provider_and_counts(server: FakeServer, make_backend: BackendFactory) -> None:
    server.route("/search", Reply(json=NOMINATIM))
    reg = _registry(server, make_backend())
    first = await reg.call("geocode", {"address": "Zürich"})
    second = await reg.call("geocode", {"address": "  Zürich "})
    assert first.ok and not first.cache_hit
    assert second.ok and second.cache_hit
    assert (second.text, second.data) == (first.text, first.data)
    assert server.hits("/search") == 1
    stats = reg.runtime.cache.stats
    assert (stats.hits, stats.misses, stats.writes) == (1, 1, 1)
    assert stats.hit_rate == 0.5


async def test_a_new_instance_replays_what_another_recorded(
    server: FakeServer, make_backend: BackendFactory
) -> None:
    server.route("/search", Reply(json=NOMINATIM))
    await _registry(server, make_backend()).call("geocode", {"address": "Zürich"})
    replay = _registry(server, make_backend(), mode="replay")
    again = await replay.call("geocode", {"address": "Zürich"})
    assert again.ok and again.cache_hit
    assert server.hits() == 1
    cold = await replay.call("geocode", {"address": "Bern"})
    assert not cold.ok and "replay mode: no cached result for geocode" in (cold.error or "")
    assert server.hits() == 1
    assert (replay.runtime.cache.stats.hits, replay.runtime.cache.stats.misses) == (1, 1)


async def test_errors_are_not_cached(server: FakeServer, make_backend: BackendFactory) -> None:
    server.route("/search", Reply(status=500, json={}), Reply(status=500, json={}), Reply(json=NOMINATIM))
    reg = _registry(server, make_backend())
    assert not (await reg.call("geocode", {"address": "Zürich"})).ok
    ok = await reg.call("geocode", {"address": "Zürich"})
    assert ok.ok and not ok.cache_hit
    assert reg.runtime.cache.stats.writes == 1


async def test_map_images_round_trip_and_keys_stay_out(
    server: FakeServer, make_backend: BackendFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.route("/maps/api/staticmap", Reply(body=png_bytes((640, 640), (10, 20, 30))))
    backend = make_backend()
    reg = _registry(server, backend, static_map="google")
    monkeypatch.setenv("GEOSLEUTH_GOOGLE_API_KEY", SECRET)
    first = await reg.call("static_map_query", {"lat": 1.0, "lon": 2.0, "zoom": 10})
    second = await reg.call("static_map_query", {"lat": 1.0, "lon": 2.0, "zoom": 10})
    assert first.ok and not first.cache_hit and second.cache_hit
    assert server.hits() == 1
    assert second.images[0].size == (640, 640)
    assert second.images[0].getpixel((5, 5)) == (10, 20, 30)
    stored = _stored_bytes(backend)
    assert stored and SECRET.encode() not in stored


def test_entries_round_trip_and_ttl_expires(make_backend: BackendFactory) -> None:
    backend = make_backend()
    now = time.time()
    backend.set("old", CacheEntry("x", None, [], "p", now - 10), ttl_s=5)
    assert backend.get("old") is None
    backend.set("zero", CacheEntry("x", None, [], "p", now), ttl_s=0)
    assert backend.get("zero") is None
    images = [png_bytes((4, 4)), png_bytes((3, 5), (1, 2, 3))]
    data = {"a": 1, "nested": [1.5, "ü", None]}
    backend.set("k", CacheEntry("y", data, images, "nominatim", now), ttl_s=None)
    entry = backend.get("k")
    assert entry is not None
    assert (entry.text, entry.data, entry.images, entry.provider) == ("y", data, images, "nominatim")
    assert entry.created == pytest.approx(now)
    backend.set("short", CacheEntry("s", None, [], "p", time.time()), ttl_s=0.3)
    assert backend.get("short") is not None
    time.sleep(0.45)
    assert backend.get("short") is None
    assert backend.get("k") is not None


def test_overwrite_replaces_images_and_clear_empties(make_backend: BackendFactory) -> None:
    backend = make_backend()
    backend.set("k", CacheEntry("a", None, [png_bytes(), png_bytes()], "p", time.time()), ttl_s=None)
    backend.set("k", CacheEntry("b", None, [png_bytes((2, 2))], "p", time.time()), ttl_s=60)
    entry = backend.get("k")
    assert entry is not None and entry.text == "b" and len(entry.images) == 1
    backend.set("other", CacheEntry("c", None, [], "p", time.time()), ttl_s=None)
    assert len(backend) == 2
    backend.clear()
    assert backend.get("k") is None and len(backend) == 0


async def test_modes_refresh_replay_and_off(make_backend: BackendFactory) -> None:
    calls = 0

    async def call() -> ToolResult:
        nonlocal calls
        calls += 1
        return ToolResult(text=f"n={calls}", images=[Image.new("RGB", (2, 2))])

    backend = make_backend()
    rw = ToolCache(backend, "read_write")
    await rw.get_or_call("t", "p", {"a": 1}, call)
    assert (await rw.get_or_call("t", "p", {"a": 1}, call)).text == "n=1"
    assert (await ToolCache(backend, "refresh").get_or_call("t", "p", {"a": 1}, call)).text == "n=2"
    assert (await rw.get_or_call("t", "p", {"a": 1}, call)).text == "n=2"
    with pytest.raises(CacheMissError, match="replay mode"):
        await ToolCache(backend, "replay").get_or_call("t", "p", {"a": 2}, call)
    assert calls == 2


def test_settings_build_a_redis_cache(redis_url: str) -> None:
    cache = ToolCache.from_settings(
        CacheSettings(backend="redis", redis_url=redis_url, mode="replay", ttl_s=5), Path("unused")
    )
    assert isinstance(cache.backend, RedisCache)
    assert (cache.mode, cache.ttl_s) == ("replay", 5)


async def test_unreachable_redis_is_a_clear_tool_error_without_the_password(
    server: FakeServer, redis_url: str
) -> None:
    url = f"redis://:hunter2-secret@127.0.0.1:{free_port()}/0"
    backend = RedisCache(url)
    backend.client.connection_pool.connection_kwargs.update(socket_connect_timeout=0.5)
    server.route("/search", Reply(json=NOMINATIM))
    result = await _registry(server, backend).call("geocode", {"address": "Zürich"})
    assert not result.ok
    assert "tool cache (redis) read failed" in (result.error or "")
    assert "hunter2" not in (result.error or "")
    with pytest.raises(CacheUnavailableError):
        backend.set("k", CacheEntry("x", None, [], "p", time.time()), ttl_s=None)


def test_bad_redis_url_is_a_value_error() -> None:
    pytest.importorskip("redis", reason="the redis package is not installed (pip install redis)")
    with pytest.raises(ValueError, match="redis_url"):
        RedisCache("http://127.0.0.1:1/")
