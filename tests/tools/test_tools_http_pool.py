"""Provider HTTP: one pooled client per event loop, shared rate limits through a real Redis,
the special-use address filter and escaped path values."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from tools_fakes import FakeServer, Reply, fake_settings, free_port

from geosleuth.tools import build_registry
from geosleuth.tools.config import HttpSettings, ToolSettings
from geosleuth.tools.http import (
    HttpClient,
    RateLimiter,
    RedisRateLimiter,
    UnsafeUrlError,
    address_is_private,
    check_url,
    limiter_for,
    loop_client,
    path_segment,
)


@pytest.fixture
def keepalive() -> Iterator[FakeServer]:
    """An HTTP/1.1 server answering ``{"ok": true}`` on /x, so connection reuse shows in its log."""
    s = FakeServer(keep_alive=True)
    s.route("/x", Reply(json={"ok": True}))
    yield s
    s.close()


def _url(server: FakeServer) -> str:
    return f"{server.url}/x"


def _connections(server: FakeServer) -> int:
    """Distinct client ports seen: one per TCP connection."""
    return len({seen.client_port for seen in server.requests})


LOCAL = HttpSettings(allow_private_urls=True, max_retries=0, timeout_s=5.0)


def _run_requests(url: str, n: int, settings: HttpSettings = LOCAL) -> Any:
    async def go() -> Any:
        client = HttpClient("pooltest", settings)
        for _ in range(n):
            assert await client.get_json(url) == {"ok": True}
        return await loop_client()

    return asyncio.run(go())


def test_one_loop_reuses_one_connection_and_closes_it_at_shutdown(keepalive: FakeServer) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unclosed transport or client would raise here
        pooled = _run_requests(_url(keepalive), 5)
    assert _connections(keepalive) == 1
    assert pooled.is_closed  # asyncio.run's shutdown closed the pool


def test_per_request_mode_opens_a_connection_per_call(keepalive: FakeServer) -> None:
    _run_requests(_url(keepalive), 4, LOCAL.model_copy(update={"pool_connections": False}))
    assert _connections(keepalive) == 4


def test_each_worker_thread_gets_its_own_pool(keepalive: FakeServer) -> None:
    """verl runs tools from worker threads, each with its own loop: one client per loop."""
    clients: list[Any] = []

    def worker() -> None:
        loop = asyncio.new_event_loop()

        async def go() -> Any:
            client = HttpClient("pooltest", LOCAL)
            for _ in range(3):
                await client.get_json(_url(keepalive))
            return await loop_client()

        clients.append(loop.run_until_complete(go()))
        assert not clients[-1].is_closed  # a loop that lives on keeps its pool
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(clients) == 2 and clients[0] is not clients[1]
    assert all(c.is_closed for c in clients)
    assert _connections(keepalive) == 2


# --- special-use addresses ------------------------------------------------------------------------

REFUSED = [
    "0.1.2.3", "10.0.0.1", "100.64.0.1", "100.127.255.254", "127.0.0.1", "127.8.9.10", "169.254.169.254",
    "172.16.0.1", "172.31.255.255", "192.0.0.8", "192.0.2.1", "192.168.1.1", "198.18.0.1", "198.19.255.1",
    "198.51.100.7", "203.0.113.9", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
    "::1", "::", "fc00::1", "fd12:3456::1", "fe80::1", "ff02::1",
    "::ffff:127.0.0.1", "::ffff:100.64.0.1",       # IPv4-mapped
    "2002:7f00:1::", "2002:a00:1::1",               # 6to4 of 127.0.0.1 and 10.0.0.1
    "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe",        # NAT64 of 127.0.0.1 and 169.254.169.254
    "2001:0:4136:e378:8000:63bf:80ff:fffe",         # Teredo, client 127.0.0.1 (obfuscated)
]  # fmt: skip
ACCEPTED = ["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111", "2002:808:808::1", "64:ff9b::808:808"]


@pytest.mark.parametrize("address", REFUSED)
def test_every_special_use_range_is_refused(address: str) -> None:
    assert address_is_private(ipaddress.ip_address(address))
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(UnsafeUrlError, match="non-public"):
        check_url(f"https://{host}/x")


@pytest.mark.parametrize("address", ACCEPTED)
def test_public_addresses_and_their_embeddings_pass(address: str) -> None:
    assert not address_is_private(ipaddress.ip_address(address))


def test_teredo_client_is_decoded_before_the_check() -> None:
    teredo = ipaddress.ip_address("2001:0:4136:e378:8000:63bf:80ff:fffe")
    assert teredo.teredo is not None and teredo.teredo[1] == ipaddress.ip_address("127.0.0.1")


# --- escaping -------------------------------------------------------------------------------------


def test_path_segment_cannot_add_parameters_or_path() -> None:
    assert path_segment("abc?fields=*&key=x") == "abc%3Ffields%3D%2A%26key%3Dx"
    assert path_segment("../../admin") == "..%2F..%2Fadmin"
    assert path_segment("a#b c") == "a%23b%20c"


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    yield s
    s.close()


async def test_google_poi_id_cannot_inject_parameters(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEOSLEUTH_GOOGLE_API_KEY", "k-123456")
    server.route("/v1/places/*", Reply(json={"id": "x", "location": {"latitude": 1, "longitude": 2}}))
    reg = build_registry(fake_settings(server, {"poi": "google"}))
    for hostile in ("abc?fields=*&key=k", "abc/../../v1/x", "abc#frag", "abc%3F", "a b"):
        result = await reg.call("poi_detail_query", {"poi_id": hostile})
        assert not result.ok and "invalid Google place id" in (result.error or "")
    assert server.hits() == 0
    ok = await reg.call("poi_detail_query", {"poi_id": "ChIJ-a_1"})
    assert ok.ok and server.requests[-1].path == "/v1/places/ChIJ-a_1" and server.requests[-1].query == {}


# --- shared rate limits ---------------------------------------------------------------------------


WORKER = """
import asyncio, json, sys, time
import geosleuth.tools.http as h
from geosleuth.tools.config import HttpSettings
url, redis_url, n, rate = sys.argv[1], sys.argv[2] or None, int(sys.argv[3]), float(sys.argv[4])
stamps = []
for cls in (h.RateLimiter, h.RedisRateLimiter):  # record the start time each request was booked
    def wrap(original):
        def reserve(self):
            delay = original(self)
            if delay is not None:
                stamps.append(time.time() + delay)
            return delay
        return reserve
    cls.reserve = wrap(cls.reserve)
settings = HttpSettings(allow_private_urls=True, max_retries=0, redis_url=redis_url)
async def main():
    client = h.HttpClient("shared", settings, requests_per_second=rate)
    await h.loop_client()  # the pool exists before the start, so no request waits on its creation
    print("ready", flush=True)
    sys.stdin.readline()  # the parent says go once both workers are ready
    await asyncio.gather(*(client.get_json(url) for _ in range(n)))  # only the limiter spaces them
asyncio.run(main())
print(json.dumps(stamps))
"""


def _two_processes(url: str, redis_url: str, n: int, rate: float) -> list[float]:
    """The start times both workers' limiters booked, merged and sorted."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, redis_url, str(n), str(rate)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    stamps: list[float] = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        stamps += json.loads(out.strip().splitlines()[-1])
    return sorted(stamps)


def _gaps(stamps: list[float]) -> list[float]:
    return [b - a for a, b in zip(stamps, stamps[1:], strict=False)]


N, RATE = 5, 10.0
BOOKED = (2 * N - 1) / RATE  # 10 requests 0.1 s apart across both processes


def test_two_processes_share_one_rate_through_redis(keepalive: FakeServer, redis_url: str) -> None:
    stamps = _two_processes(_url(keepalive), redis_url, n=N, rate=RATE)
    assert len(stamps) == 2 * N and len(keepalive.requests) == 2 * N
    assert stamps[-1] - stamps[0] > 0.85 * BOOKED  # the rate holds across both processes
    assert min(_gaps(stamps)) > 0.05, _gaps(stamps)  # never two requests together


def test_without_redis_each_process_has_its_own_rate(keepalive: FakeServer) -> None:
    """The control for the test above: the same two processes overlap without a shared limiter."""
    stamps = _two_processes(_url(keepalive), "", n=N, rate=RATE)
    assert len(stamps) == 2 * N
    assert stamps[-1] - stamps[0] < 0.75 * BOOKED
    assert min(_gaps(stamps)) < 0.05


def test_redis_limiter_falls_back_to_the_process_limiter_when_redis_is_down() -> None:
    redis = pytest.importorskip("redis", reason="the redis package is not installed (pip install redis)")
    client = redis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.5)
    local = RateLimiter(1000.0)
    limiter = RedisRateLimiter(client, "down", 1000.0, local)
    assert limiter.reserve() is None
    asyncio.run(limiter.acquire())  # no exception: the local limiter booked the slot
    assert local._next > 0


def test_settings_share_rate_limits_with_a_redis_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEOSLEUTH_REDIS_URL", "redis://127.0.0.1:1/0")
    assert ToolSettings.load().http.redis_url == "redis://127.0.0.1:1/0"
    monkeypatch.delenv("GEOSLEUTH_REDIS_URL")
    from_file = ToolSettings.model_validate({"cache": {"backend": "redis", "redis_url": "redis://h:2/0"}})
    assert from_file.http.redis_url == "redis://h:2/0"
    assert ToolSettings().http.redis_url is None


def test_limiter_for_uses_redis_only_when_configured(redis_url: str) -> None:
    assert isinstance(limiter_for("a@b", 5.0), RateLimiter)
    assert isinstance(limiter_for("a@b", 5.0, redis_url), RedisRateLimiter)
    assert isinstance(limiter_for("a@b", None, redis_url), RateLimiter)  # unlimited needs no booking
