"""Tool-suite benchmark: every figure beside a reference measured in the same run, as a ratio.

    python bench/tools_bench.py [--queries 10000] [--points 100000] [--cache-lookups 5000]
                                [--http-requests 500]

| figure | reference |
|---|---|
| offline geocode tool call p50 (validation, provider, formatting) | `gazetteer.search` inside it |
| batched reverse geocoding, points/s | `reverse_geocoder` mode 2 on the same points |
| tool-cache hit p50 (SQLite; Redis when available) | the bare backend read of the same entry |
| offline search: first query | the bare FTS5 MATCH on the same index |
| offline search index: a `Place` per gazetteer city | the same cities as plain rows |
| provider HTTP p50, pooled (one client per loop) | a client per request; a bare reused `httpx.AsyncClient` |
| shared (Redis) rate-limit booking p50 | Redis PING on the same connection |

Optional parts (Redis, `reverse_geocoder`) are skipped with a message when missing; the
`redis` package and the `redis-server` binary are checked separately.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import importlib.util
import math
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

FIXTURE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "geoclip" / "coordinates_100K.csv"


def p50_ms(samples_s: list[float]) -> float:
    return float(np.percentile(np.array(samples_s) * 1000, 50))


def row(what: str, value: float, unit: str, ref_what: str, ref: float) -> None:
    """One figure, its reference and the ratio (value / reference)."""
    ratio = value / ref if ref else float("nan")
    print(f"{what:58s} {value:12,.3f} {unit:9s} | {ref_what:44s} {ref:12,.3f} {unit:9s} | {ratio:7.2f}x")


def skip(what: str, why: str) -> None:
    print(f"{what:58s} skipped: {why}")


def timed(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


async def atimed(fn: Callable[[], Awaitable[Any]], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - t)
    return out


# --- geocoding -----------------------------------------------------------------------------------


def _queries(n: int) -> list[str]:
    """Real place names (GeoNames via the gazetteer), mixed with comma addresses and other scripts."""
    from geosleuth.gazetteer import get_gazetteer

    places = get_gazetteer().places_in_bbox(-90, -180, 90, 180, limit=50_000, min_population=15_000)
    rng = np.random.default_rng(0)
    names = [p.name if i % 3 else f"{p.name}, {p.country or p.country_code}" for i, p in enumerate(places)]
    names += ["Zürich", "東京", "Москва", "São Paulo", "Springfield, Illinois", "القاهرة", "서울", "Kraków"]
    return [names[i] for i in rng.integers(0, len(names), size=n)]


async def bench_geocode(n: int) -> None:
    from geosleuth.gazetteer import get_gazetteer
    from geosleuth.tools import build_registry
    from geosleuth.tools.config import ToolSettings

    gaz = get_gazetteer()
    reg = build_registry(ToolSettings(cache={"backend": "none"}), names=["geocode"])
    queries = _queries(n)
    for q in queries[:200]:  # warm both paths
        gaz.search(q, limit=5)
        await reg.call("geocode", {"address": q})
    it = iter(queries)
    search = timed(lambda: gaz.search(next(it), limit=5), n)
    it2 = iter(queries)
    calls = await atimed(lambda: reg.call("geocode", {"address": next(it2)}), n)
    row(f"geocode tool call p50 ({n:,} queries)", p50_ms(calls), "ms", "gazetteer.search p50", p50_ms(search))


def _points(n: int) -> tuple[np.ndarray, np.ndarray]:
    if FIXTURE.is_file():
        with FIXTURE.open() as fh:
            rows = list(csv.reader(fh))[1:]
        arr = np.array([[float(r[0]), float(r[1])] for r in rows[:n]])
        return arr[:, 0], arr[:, 1]
    print(f"(no fixture at {FIXTURE}: uniform random points)")
    rng = np.random.default_rng(0)
    return rng.uniform(-60, 70, n), rng.uniform(-180, 180, n)


def _best_of(runs: int, call: Callable[[], Any]) -> float:
    """Seconds of the fastest of ``runs`` calls: noise from other work only ever adds time."""
    best = math.inf
    for _ in range(runs):
        t = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t)
    return best


def bench_reverse(n: int) -> None:
    from geosleuth.gazetteer import get_gazetteer

    gaz = get_gazetteer()
    lats, lons = _points(n)
    gaz.reverse_batch(lats[:1000], lons[:1000])
    ours = len(lats) / _best_of(3, lambda: gaz.reverse_batch(lats, lons))
    what = f"reverse geocode batched ({len(lats):,} points)"
    if importlib.util.find_spec("reverse_geocoder") is None:
        skip(what + " reference", "reverse_geocoder is not installed")
        print(f"{what:58s} {ours:12,.0f} points/s")
        return
    import reverse_geocoder

    coords = list(zip(lats.tolist(), lons.tolist(), strict=True))
    reverse_geocoder.search(coords[:1000], mode=2, verbose=False)  # load its tree first
    ref = len(coords) / _best_of(3, lambda: reverse_geocoder.search(coords, mode=2, verbose=False))
    row(what, ours, "points/s", "reverse_geocoder mode 2", ref)


# --- cache ---------------------------------------------------------------------------------------


async def _cache_rows(cache: Any, n: int, label: str, bare: Callable[[str], Any]) -> None:
    """Hit latency through ToolCache vs ``bare(key)``, the backend read of the same entry."""
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
    from geosleuth.tools.cache import cache_key

    raw_keys = [cache_key("geocode", "bench", args) for args in keys]
    it = iter(raw_keys)
    reads = timed(lambda: bare(next(it)), n)
    row(
        f"cache hit p50 ({n:,} lookups, {label})",
        p50_ms(times),
        "ms",
        f"bare {label} read p50",
        p50_ms(reads),
    )


@contextlib.contextmanager
def redis_server() -> Iterator[str | None]:
    """A throwaway redis-server on 127.0.0.1, or None (with the reason printed) when unavailable."""
    binary = shutil.which("redis-server")
    if binary is None:
        skip("Redis parts", "redis-server is not installed (apt-get install redis-server)")
        yield None
        return
    if importlib.util.find_spec("redis") is None:
        skip("Redis parts", "the redis package is not installed (pip install redis)")
        yield None
        return
    import redis

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        for _ in range(200):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            skip("Redis parts", "redis-server did not start")
            yield None
            return
        client.close()
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def bench_cache(n: int, redis_url: str | None) -> None:
    from geosleuth.tools.cache import RedisCache, SQLiteCache, ToolCache

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        backend = SQLiteCache(path)
        conn = sqlite3.connect(path)
        sql = "SELECT * FROM entries WHERE key = ?"
        await _cache_rows(
            ToolCache(backend, "read_write"), n, "SQLite", lambda k: conn.execute(sql, (k,)).fetchone()
        )
        conn.close()
    if redis_url is None:
        return
    redis_backend = RedisCache(redis_url)
    client, prefix = redis_backend.client, redis_backend.prefix
    await _cache_rows(
        ToolCache(redis_backend, "read_write"), n, "Redis", lambda k: client.hgetall(prefix + k)
    )


# --- offline search ------------------------------------------------------------------------------


def bench_search() -> None:
    from geosleuth.tools.providers.search_offline import OfflineSearchProvider

    with tempfile.TemporaryDirectory() as tmp:
        provider = OfflineSearchProvider(Path(tmp))
        t = time.perf_counter()
        index = provider.index()
        print(f"{'offline search index build (first use)':58s} {time.perf_counter() - t:12,.3f} s")
        words = ["Zurich", "Kraków", "Springfield Illinois", "Lake Geneva"]
        index.search("warm", 5)
        ours = timed(lambda: [index.search(w, 5) for w in words], 50)
        conn = sqlite3.connect(index.path)
        sql = "SELECT title, url FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT 5"
        bare = timed(lambda: [conn.execute(sql, (f'"{w.split()[0]}"',)).fetchall() for w in words], 50)
        row(
            "offline web_search, 4 Latin queries, p50",
            p50_ms(ours),
            "ms",
            "bare FTS5 MATCH, same words",
            p50_ms(bare),
        )
        cjk = timed(lambda: index.search("東京", 5), 5)
        like = "SELECT title FROM docs WHERE title LIKE ? OR body LIKE ? LIMIT 10"
        scan = timed(lambda: conn.execute(like, ("%東京%", "%東京%")).fetchall(), 5)
        row(
            "offline web_search '東京' (spaceless: LIKE scan), p50",
            p50_ms(cjk),
            "ms",
            "the bare LIKE scan",
            p50_ms(scan),
        )
        conn.close()


# --- provider HTTP -------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as every real provider
    disable_nagle_algorithm = True  # headers and body in separate writes would wait on delayed ACKs

    def log_message(self, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        body = b'{"status": "OK", "results": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


async def bench_http(n: int) -> None:
    import httpx

    from geosleuth.tools.config import HttpSettings
    from geosleuth.tools.http import HttpClient

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/maps/api/geocode/json"
    try:
        settings = HttpSettings(allow_private_urls=True, max_retries=0)
        pooled = HttpClient("bench", settings)
        single = HttpClient("bench", settings.model_copy(update={"pool_connections": False}))
        await pooled.get_json(url, {"address": "warm"})
        t_pooled = await atimed(lambda: pooled.get_json(url, {"address": "Zürich"}), n)
        t_single = await atimed(lambda: single.get_json(url, {"address": "Zürich"}), n)
        async with httpx.AsyncClient() as bare:
            await bare.get(url)
            t_bare = await atimed(lambda: bare.get(url, params={"address": "Zürich"}), n)
    finally:
        server.shutdown()
        server.server_close()
    what = f"provider HTTP p50, pooled ({n:,} requests, 127.0.0.1)"
    row(what, p50_ms(t_pooled), "ms", "a new client per request (before)", p50_ms(t_single))
    row(what, p50_ms(t_pooled), "ms", "bare reused httpx.AsyncClient (floor)", p50_ms(t_bare))


async def bench_rate_limit(n: int, redis_url: str | None) -> None:
    if redis_url is None:
        return
    import redis

    from geosleuth.tools.http import RateLimiter, RedisRateLimiter

    client = redis.Redis.from_url(redis_url)
    limiter = RedisRateLimiter(client, "bench", 1e9, RateLimiter(1e9))  # spacing too small to wait
    limiter.reserve()
    booking = timed(limiter.reserve, n)
    ping = timed(client.ping, n)
    row(
        f"shared rate-limit booking p50 ({n:,}, Redis)", p50_ms(booking), "ms", "Redis PING p50", p50_ms(ping)
    )
    client.close()


def bench_search_documents() -> None:
    """Why the offline search index reads the gazetteer's cities as plain rows, not `Place` objects."""
    from geosleuth.gazetteer import get_gazetteer

    gaz = get_gazetteer()
    bulk = _best_of(3, lambda: list(gaz.iter_rows(kind="city")))
    objects = _best_of(3, lambda: [gaz._row_to_place(r, None) for r in gaz.iter_rows(kind="city")])
    row("offline search: a Place per city, s", objects, "s", "the same cities as plain rows (ref)", bulk)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--cache-lookups", type=int, default=5_000)
    parser.add_argument("--http-requests", type=int, default=500)
    args = parser.parse_args()
    t = time.perf_counter()
    from geosleuth.gazetteer import get_gazetteer

    get_gazetteer()
    print(f"gazetteer ready in {time.perf_counter() - t:.2f} s")
    print(f"{'figure':58s} {'value':>12s} {'unit':9s} | {'reference':44s} {'value':>12s} {'unit':9s} | ratio")
    asyncio.run(bench_geocode(args.queries))
    bench_reverse(args.points)
    asyncio.run(bench_http(args.http_requests))
    bench_search()
    bench_search_documents()
    with redis_server() as redis_url:
        asyncio.run(bench_cache(args.cache_lookups, redis_url))
        asyncio.run(bench_rate_limit(min(args.cache_lookups, 2000), redis_url))


if __name__ == "__main__":
    main()
