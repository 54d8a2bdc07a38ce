"""Cache: hits skip the provider, replay fails clearly on a miss and outlives the TTL, purging, CLI."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tools_fakes import NOMINATIM, FakeServer, Reply, fake_settings, png_bytes
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.tools import build_registry
from geosleuth.tools.base import ToolResult
from geosleuth.tools.cache import CacheEntry, SQLiteCache, ToolCache, cache_key


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


def _entry(text: str, created: float) -> CacheEntry:
    return CacheEntry(text, {"n": 1}, [png_bytes()], "nominatim", created)


async def test_replay_serves_entries_past_their_ttl_and_read_write_does_not(tmp_path: Path) -> None:
    backend = SQLiteCache(tmp_path / "c.sqlite")
    backend.set(cache_key("geocode", "p", {"a": 1}), _entry("recorded", time.time() - 100), ttl_s=10)

    async def live() -> ToolResult:
        return ToolResult(text="live")

    replayed = await ToolCache(backend, "replay").get_or_call("geocode", "p", {"a": 1}, live)
    assert replayed.cache_hit and replayed.text == "recorded" and len(replayed.images) == 1
    assert (await ToolCache(backend, "read_write").get_or_call("geocode", "p", {"a": 1}, live)).text == "live"


def test_purge_drops_expired_entries_with_their_images(tmp_path: Path) -> None:
    backend = SQLiteCache(tmp_path / "c.sqlite")
    now = time.time()
    backend.set("old", _entry("old", now - 100), ttl_s=10)
    backend.set("fresh", _entry("fresh", now), ttl_s=3600)
    backend.set("forever", _entry("forever", now - 1e9), ttl_s=None)
    assert backend.purge_expired() == 1
    assert backend.get("old", include_expired=True) is None
    assert {k for k in ("fresh", "forever") if backend.get(k)} == {"fresh", "forever"}
    conn = sqlite3.connect(backend.path)
    assert conn.execute("SELECT COUNT(*) FROM images WHERE key = 'old'").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM images").fetchone()[0] == 2
    assert backend.purge_expired() == 0


def test_cli_cache_stats_purge_clear(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    backend = SQLiteCache(path)
    backend.set("old", _entry("old", time.time() - 100), ttl_s=10)
    backend.set("fresh", _entry("fresh", time.time()), ttl_s=None)
    env = {"GEOSLEUTH_TOOL_CACHE": str(path), "GEOSLEUTH_REDIS_URL": ""}
    runner = CliRunner()

    def run(*argv: str) -> tuple[int, str]:
        res = runner.invoke(app, ["tools", "cache", *argv], env=env)
        return res.exit_code, res.output

    assert run() == (0, f"2 entries in {path}\n")
    assert run("purge") == (0, f"1 expired entries removed from {path}\n1 entries in {path}\n")
    assert run("clear") == (0, f"all entries removed from {path}\n0 entries in {path}\n")
    code, out = run("vacuum")
    assert code == 2 and "use stats, purge or clear" in out
