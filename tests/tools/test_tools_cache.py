"""Cache: hits skip the provider, replay mode fails clearly on a miss, images and TTL round-trip."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tools_fakes import NOMINATIM, FakeServer, Reply, fake_settings

from geosleuth.tools import build_registry
from geosleuth.tools.cache import ToolCache, cache_key


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


def _settings(server: FakeServer, path: Path, mode: str = "read_write", **providers: str):  # type: ignore[no-untyped-def]
    return fake_settings(
        server, providers or {"geocode": "nominatim"}, cache={"path": str(path), "mode": mode}
    )


async def test_replay_with_cold_cache_fails_clearly(server: FakeServer, tmp_path: Path) -> None:
    server.route("/search", Reply(json=NOMINATIM))
    reg = build_registry(_settings(server, tmp_path / "cold.sqlite", mode="replay"))
    result = await reg.call("geocode", {"address": "Zürich"})
    assert not result.ok
    assert "replay mode: no cached result for geocode" in result.error
    assert server.hits() == 0


def test_key_ignores_secrets_and_normalises() -> None:
    a = cache_key("geocode", "google@https://maps", {"address": "Zürich", "x": None})
    b = cache_key("geocode", "google@https://maps", {"address": " Zürich  "})
    c = cache_key("geocode", "nominatim@https://n", {"address": "Zürich"})
    assert a == b != c
    assert cache_key("t", "p", {"lat": 1.00000001}) == cache_key("t", "p", {"lat": 1.0})


def test_redis_backend_needs_its_package_or_url() -> None:
    from geosleuth.tools.config import CacheSettings

    with pytest.raises(ValueError, match="redis_url"):
        ToolCache.from_settings(CacheSettings(backend="redis"), Path("unused"))
    with pytest.raises(ValueError, match="replay"):
        ToolCache.from_settings(CacheSettings(backend="none", mode="replay"), Path("unused"))
