"""Tool-suite benchmark: offline geocode latency, batched reverse geocoding, cache hit latency
(SQLite, and Redis when redis-server is installed), offline search index build time.

Targets (issue 3): geocode p50 < 1 ms, reverse > 200,000 points/s batched, cache hit < 1 ms.
Run: python bench/tools_bench.py [--queries 10000] [--points 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

FIXTURE = (
    Path(__file__).resolve().parents[1] / ".." / "shared" / "fixtures" / "geoclip" / "coordinates_100K.csv"
)


def _percentiles(samples_s: list[float]) -> str:
    ms = np.array(samples_s) * 1000
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    return f"p50 {p50:.3f} ms  p90 {p90:.3f} ms  p99 {p99:.3f} ms"


def _queries(n: int) -> list[str]:
    """Real place names (GeoNames via the gazetteer), mixed with comma addresses and other scripts."""
    from geosleuth.gazetteer import get_gazetteer

    places = get_gazetteer().places_in_bbox(-90, -180, 90, 180, limit=50_000, min_population=15_000)
    rng = np.random.default_rng(0)
    names = [p.name if i % 3 else f"{p.name}, {p.country or p.country_code}" for i, p in enumerate(places)]
    names += ["Zürich", "東京", "Москва", "São Paulo", "Springfield, Illinois", "القاهرة", "서울", "Kraków"]
    return [names[i] for i in rng.integers(0, len(names), size=n)]


def bench_geocode(n: int) -> None:
    from geosleuth.gazetteer import get_gazetteer

    gaz = get_gazetteer()
    queries = _queries(n)
    for q in queries[:200]:  # warm caches
        gaz.search(q, limit=5)
    times = []
    for q in queries:
        t = time.perf_counter()
        gaz.search(q, limit=5)
        times.append(time.perf_counter() - t)
    print(f"offline geocode ({n:,} queries, gazetteer.search): {_percentiles(times)}")


def _points(n: int) -> tuple[np.ndarray, np.ndarray]:
    if FIXTURE.is_file():
        with FIXTURE.open() as fh:
            rows = list(csv.reader(fh))[1:]
        arr = np.array([[float(r[0]), float(r[1])] for r in rows[:n]])
        return arr[:, 0], arr[:, 1]
    rng = np.random.default_rng(0)
    return rng.uniform(-60, 70, n), rng.uniform(-180, 180, n)


def bench_reverse(n: int) -> None:
    from geosleuth.gazetteer import get_gazetteer

    gaz = get_gazetteer()
    lats, lons = _points(n)
    gaz.reverse_batch(lats[:1000], lons[:1000])
    t = time.perf_counter()
    gaz.reverse_batch(lats, lons)
    dt = time.perf_counter() - t
    print(
        f"offline reverse geocode batched ({len(lats):,} points): {len(lats) / dt:,.0f} points/s ({dt:.3f} s)"
    )


async def _cache_hits(cache: Any, n: int, label: str) -> None:
    from geosleuth.tools.base import ToolResult

    async def call() -> ToolResult:
        return ToolResult(text="x" * 2000, data=[{"name": "Zürich", "lat": 47.37, "lon": 8.54}])

    keys = [{"address": f"query {i}"} for i in range(n)]
    for args in keys:
        await cache.get_or_call("geocode", "bench", args, call)
    times = []
    for args in keys:
        t = time.perf_counter()
        result = await cache.get_or_call("geocode", "bench", args, call)
        times.append(time.perf_counter() - t)
        assert result.cache_hit
    print(f"cache hit ({n:,} lookups, {label}): {_percentiles(times)}; hit rate {cache.stats.hit_rate:.2f}")


async def _bench_cache(n: int) -> None:
    from geosleuth.tools.cache import RedisCache, SQLiteCache, ToolCache

    with tempfile.TemporaryDirectory() as tmp:
        await _cache_hits(ToolCache(SQLiteCache(Path(tmp) / "bench.sqlite"), "read_write"), n, "SQLite")
    binary = shutil.which("redis-server")
    if binary is None:
        print("cache hit (Redis): skipped, redis-server is not installed")
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        backend = RedisCache(f"redis://127.0.0.1:{port}/0")
        for _ in range(100):
            try:
                backend.client.ping()
                break
            except Exception:  # noqa: BLE001 - the server is still starting
                time.sleep(0.05)
        await _cache_hits(ToolCache(backend, "read_write"), n, "Redis on 127.0.0.1")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def bench_search_index() -> None:
    """First-use build of the offline web-search index (gazetteer places -> SQLite FTS5)."""
    from geosleuth.tools.providers.search_offline import OfflineSearchProvider

    with tempfile.TemporaryDirectory() as tmp:
        provider = OfflineSearchProvider(Path(tmp))
        t = time.perf_counter()
        provider.index()
        built = time.perf_counter() - t
        t = time.perf_counter()
        hits = provider.index().search("Zurich", 5)
        query_ms = 1000 * (time.perf_counter() - t)
        print(
            f"offline search index: built in {built:.2f} s; first query {query_ms:.1f} ms ({len(hits)} hits)"
        )


async def _bench_tool_call(n: int) -> None:
    from geosleuth.tools import build_registry
    from geosleuth.tools.config import ToolSettings

    reg = build_registry(ToolSettings(cache={"backend": "none"}), names=["geocode"])
    queries = _queries(n)
    times = []
    for q in queries:
        t = time.perf_counter()
        await reg.call("geocode", {"address": q})
        times.append(time.perf_counter() - t)
    print(f"geocode tool call end-to-end ({n:,} calls, validation + formatting): {_percentiles(times)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--cache-lookups", type=int, default=5_000)
    args = parser.parse_args()
    t = time.perf_counter()
    from geosleuth.gazetteer import get_gazetteer

    get_gazetteer()
    print(f"gazetteer ready in {time.perf_counter() - t:.2f} s")
    bench_geocode(args.queries)
    bench_reverse(args.points)
    asyncio.run(_bench_cache(args.cache_lookups))
    bench_search_index()
    asyncio.run(_bench_tool_call(min(args.queries, 2000)))


if __name__ == "__main__":
    main()
