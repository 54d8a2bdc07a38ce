"""HTTP plumbing shared by every provider: URL safety, rate limits, retries, key redaction.

Providers never call httpx directly; they go through `HttpClient`, which
- refuses non-http(s) URLs and loopback / link-local / private targets unless allowed,
- spaces requests per provider (Nominatim's public server allows 1 request/s),
- retries 429 / 5xx / timeouts with exponential backoff and jitter, honouring Retry-After
  (tenacity runs the attempts),
- reads each body through the one bounded reader (`geosleuth.bounds.httpbody`: a cap on decoded bytes,
  gzip / deflate inflated piecewise, other encodings refused by name) within one total deadline,
- turns every failure into a `ProviderError` whose message never contains an API key.
"""

from __future__ import annotations

import asyncio
import email.utils
import ipaddress
import json
import logging
import random
import socket
import ssl
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from geosleuth.bounds.httpbody import ACCEPT_ENCODING, BodyError, send_capped
from geosleuth.secrets import RedactingFilter, register_secret
from geosleuth.secrets import redact_text as redact
from geosleuth.tools.config import HttpSettings
from geosleuth.tools.errors import MissingKeyError, ProviderError, ToolError, UnsafeUrlError

__all__ = [
    "HttpClient",
    "MissingKeyError",
    "ProviderError",
    "RateLimiter",
    "RedisRateLimiter",
    "Response",
    "ToolError",
    "UnsafeUrlError",
    "aclose_loop_client",
    "check_url",
    "limiter_for",
    "loop_client",
    "path_segment",
    "redact",
    "register_secret",
    "require_key",
]

log = logging.getLogger(__name__)


for _name in ("httpx", "httpcore"):  # httpx logs request URLs, query keys included
    logging.getLogger(_name).addFilter(RedactingFilter())


def require_key(key: str | None, service: str, family: str) -> str:
    if not key:
        raise MissingKeyError(
            f"{service} needs an API key: set GEOSLEUTH_{service.upper()}_API_KEY "
            f"or configure providers.{family} to another provider"
        )
    register_secret(key)
    return key


def path_segment(value: object) -> str:
    """``value`` escaped as one URL path segment: ``/``, ``?``, ``#``, ``&`` and ``%`` cannot
    change the path or add query parameters (``abc?fields=*&key=…`` stays one segment)."""
    return quote(str(value), safe="")


# --- URL safety --------------------------------------------------------------------------------

_BLOCKED_V4 = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",  # private
        "100.64.0.0/10",  # carrier-grade NAT (shared address space)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local, cloud metadata
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # TEST-NET-1
        "192.88.99.0/24",  # deprecated 6to4 relay anycast
        "192.168.0.0/16",  # private
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # TEST-NET-2
        "203.0.113.0/24",  # TEST-NET-3
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and 255.255.255.255 broadcast
    )
)
_BLOCKED_V6 = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "::/128",  # unspecified
        "::1/128",  # loopback
        "::/96",  # deprecated IPv4-compatible addresses
        "100::/64",  # discard-only
        "64:ff9b:1::/48",  # local-use NAT64
        "2001:db8::/32",  # documentation
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # deprecated site-local
        "ff00::/8",  # multicast
    )
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _embedded_v4(addr: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 address carries: IPv4-mapped, 6to4, NAT64 and Teredo forms."""
    found: list[ipaddress.IPv4Address] = []
    if addr.ipv4_mapped is not None:
        found.append(addr.ipv4_mapped)
    if addr.sixtofour is not None:
        found.append(addr.sixtofour)
    if addr.teredo is not None:
        found.extend(addr.teredo)
    if addr in _NAT64:
        found.append(ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF))
    return found


def address_is_private(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """True for every special-use address (RFC 6890 registries), including IPv4 special-use
    addresses embedded in IPv6 (``::ffff:127.0.0.1``, 6to4 ``2002:7f00:1::``, NAT64, Teredo)."""
    if isinstance(addr, ipaddress.IPv4Address):
        return any(addr in net for net in _BLOCKED_V4) or not addr.is_global
    embedded = _embedded_v4(addr)
    if any(address_is_private(v4) for v4 in embedded):
        return True
    if addr.teredo is not None:  # 2001::/32 is not globally routable itself; a public client is fine
        return False
    return any(addr in net for net in _BLOCKED_V6) or (not embedded and not addr.is_global)


def check_url(url: str, allow_private: bool = False) -> str:
    """Accept only http(s) URLs whose host is not a loopback, link-local or private address."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"}:
        raise UnsafeUrlError(f"refused URL with scheme {parts.scheme or '(none)'!r}: only http and https")
    host = parts.hostname
    if not host:
        raise UnsafeUrlError(f"refused URL without a host: {redact(url)[:200]}")
    if allow_private:
        return url
    if host.lower() in {"localhost", "localhost.localdomain"} or host.lower().endswith(".localhost"):
        raise UnsafeUrlError(f"refused loopback host {host!r}")
    for addr in _resolve(host, parts.port):
        if address_is_private(addr):
            raise UnsafeUrlError(f"refused {host!r}: it resolves to the non-public address {addr}")
    return url


def _needs_dns(url: str, allow_private: bool) -> bool:
    """Whether `check_url` would resolve a name (blocking I/O) rather than decide at once."""
    if allow_private:
        return False
    host = urlsplit(url).hostname or ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return bool(host)
    return False


def _resolve(host: str, port: int | None) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise UnsafeUrlError(f"cannot resolve host {host!r}: {exc}") from None
    return [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]


# --- rate limiting -----------------------------------------------------------------------------


class Limiter(Protocol):
    async def acquire(self) -> None: ...


class RateLimiter:
    """Minimum spacing between requests in this process; thread-safe so it works across loops.

    Hand-written rather than aiolimiter's ``AsyncLimiter``: that one holds futures of the event
    loop it first ran on and is not thread-safe, while one provider's limit here is shared by
    the tool calls of several loops in one process (TRL environments and verl tool workers run
    their own loops in threads); and a provider's "1 request per second" means spacing, where
    a leaky bucket lets a burst through.
    """

    def __init__(self, per_second: float | None) -> None:
        self.interval = 1.0 / per_second if per_second and per_second > 0 else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Book the next slot and return how long to wait for it."""
        if self.interval <= 0:
            return 0.0
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval
            return slot - now

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)


_RESERVE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nxt = tonumber(redis.call('GET', KEYS[1]) or '0')
local interval = tonumber(ARGV[1])
local slot = now
if nxt > now then slot = nxt end
local ttl_ms = math.floor((slot + interval - now) / 1000) + 1000
redis.call('SET', KEYS[1], string.format('%.0f', slot + interval), 'PX', ttl_ms)
return string.format('%.0f', slot - now)
"""


class RedisRateLimiter:
    """The same spacing shared by every process that uses one Redis server.

    Slots are booked atomically by a Lua script on the server's clock, so N workers on many
    machines together keep to the configured rate. When Redis fails, the call falls back to
    this process's own limiter (logged once) rather than failing the tool call.
    """

    def __init__(self, client: Any, key: str, per_second: float | None, fallback: RateLimiter) -> None:
        self.interval_us = round(1e6 / per_second) if per_second and per_second > 0 else 0
        self.key = f"geosleuth:ratelimit:{key}"
        self.fallback = fallback
        self._script = client.register_script(_RESERVE_LUA)
        self._errors: tuple[type[Exception], ...] = _redis_errors()
        self._warned = False

    def reserve(self) -> float | None:
        """Book the next shared slot; None when Redis could not be reached."""
        try:
            return int(self._script(keys=[self.key], args=[self.interval_us])) / 1e6
        except self._errors as exc:
            if not self._warned:
                self._warned = True
                log.warning("shared rate limit unavailable (%s); limiting per process", type(exc).__name__)
            return None

    async def acquire(self) -> None:
        if self.interval_us <= 0:
            return
        delay = await asyncio.to_thread(self.reserve)
        if delay is None:
            await self.fallback.acquire()
        elif delay > 0:
            await asyncio.sleep(delay)


def _redis_errors() -> tuple[type[Exception], ...]:
    import redis

    return (redis.RedisError, OSError)


_LIMITERS: dict[tuple[str, float | None, str | None], Limiter] = {}
_LIMITERS_LOCK = threading.Lock()
_REDIS_CLIENTS: dict[str, Any] = {}


def _redis_client(url: str) -> Any | None:
    """One Redis client per URL in the process (redis-py clients are thread-safe and fork-aware)."""
    client = _REDIS_CLIENTS.get(url)
    if client is None:
        try:
            import redis
        except ImportError:
            log.warning("shared rate limits need the redis package (pip install redis); limiting per process")
            return None
        try:
            client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
        except ValueError as exc:
            raise ValueError(f"bad redis URL for rate limits: {exc}") from None
        _REDIS_CLIENTS[url] = client
    return client


def limiter_for(key: str, per_second: float | None, redis_url: str | None = None) -> Limiter:
    """One limiter per provider and host, shared by every client in the process and, when
    ``redis_url`` is set, by every process using that Redis server."""
    with _LIMITERS_LOCK:
        found = _LIMITERS.get((key, per_second, redis_url))
        if found is not None:
            return found
        local = _LIMITERS.setdefault((key, per_second, None), RateLimiter(per_second))
        limiter: Limiter = local
        if redis_url and per_second and per_second > 0:
            client = _redis_client(redis_url)
            if client is not None:
                limiter = RedisRateLimiter(client, key, per_second, local)
        _LIMITERS[(key, per_second, redis_url)] = limiter
        return limiter


# --- pooled connections ------------------------------------------------------------------------

_LOOP_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)
_LOOP_CLOSERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
_LOOP_LOCK = threading.Lock()
POOL_LIMITS = httpx.Limits(max_connections=64, max_keepalive_connections=32, keepalive_expiry=30.0)


async def _close_at_shutdown(client: httpx.AsyncClient) -> AsyncIterator[None]:
    """Parked on its first ``yield``; the loop's ``shutdown_asyncgens`` (run by ``asyncio.run``,
    anyio and uvicorn at exit) closes it, and closing it closes the pool on its own loop."""
    try:
        yield
    finally:
        await client.aclose()


async def loop_client() -> httpx.AsyncClient:
    """The running loop's pooled client: connections (and TLS sessions) are reused across
    requests and providers on that loop. httpx clients cannot cross loops, so each loop
    (the CLI's, the MCP server's, each verl worker thread's) gets its own."""
    loop = asyncio.get_running_loop()
    with _LOOP_LOCK:
        client = _LOOP_CLIENTS.get(loop)
        if client is not None and not client.is_closed:
            return client
        for stale in [lp for lp in _LOOP_CLIENTS if lp.is_closed()]:
            _LOOP_CLIENTS.pop(stale, None)
            _LOOP_CLOSERS.pop(stale, None)
        client = httpx.AsyncClient(verify=_ssl_context(), follow_redirects=False, limits=POOL_LIMITS)
        closer = _close_at_shutdown(client)
        _LOOP_CLIENTS[loop] = client
        _LOOP_CLOSERS[loop] = closer
    await closer.__anext__()  # registers the generator with this loop's shutdown hooks
    return client


async def aclose_loop_client() -> None:
    """Close the running loop's pool now (for loops that live on without ``asyncio.run``)."""
    loop = asyncio.get_running_loop()
    with _LOOP_LOCK:
        client = _LOOP_CLIENTS.pop(loop, None)
        closer = _LOOP_CLOSERS.pop(loop, None)
    if closer is not None:
        await closer.aclose()
    elif client is not None:
        await client.aclose()


# --- client ------------------------------------------------------------------------------------


@dataclass
class Response:
    status: int
    content: bytes
    headers: Mapping[str, str]
    url: str

    def json(self, provider: str) -> Any:
        try:
            return json.loads(self.content)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            snippet = redact(self.content[:120].decode("utf-8", "replace"))
            raise ProviderError(f"{provider} returned malformed JSON: {snippet!r}") from None


@lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """Building a context loads the system's CA certificates; every loop's client shares one."""
    return ssl.create_default_context()


RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass
class HttpClient:
    """Requests for one provider: safety check, rate limit, retries, timeouts, redaction."""

    provider: str
    settings: HttpSettings
    requests_per_second: float | None = None
    timeout_s: float | None = None
    secrets: Iterable[str] = field(default_factory=tuple)
    sleep: Any = asyncio.sleep  # tests replace it to run backoff without waiting

    def __post_init__(self) -> None:
        for s in self.secrets:
            register_secret(s)

    async def get_json(
        self, url: str, params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None
    ) -> Any:
        return (await self.request("GET", url, params=params, headers=headers)).json(self.provider)

    async def post_json(self, url: str, body: Any, headers: Mapping[str, str] | None = None) -> Any:
        return (await self.request("POST", url, json_body=body, headers=headers)).json(self.provider)

    async def get_bytes(
        self, url: str, params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None
    ) -> bytes:
        return (await self.request("GET", url, params=params, headers=headers)).content

    async def request(
        self,
        method: str,
        url: str,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        if _needs_dns(url, self.settings.allow_private_urls):
            await asyncio.to_thread(check_url, url, self.settings.allow_private_urls)
        else:  # nothing to resolve: no thread hop
            check_url(url, self.settings.allow_private_urls)
        limiter = limiter_for(
            f"{self.provider}@{urlsplit(url).netloc}", self.requests_per_second, self.settings.redis_url
        )
        all_headers = {"User-Agent": self.settings.user_agent, **(headers or {})}
        timeout = self.timeout_s or self.settings.timeout_s
        attempts = max(1, self.settings.max_retries + 1)
        retrying = AsyncRetrying(
            stop=stop_after_attempt(attempts),
            wait=self._wait,
            retry=retry_if_exception_type(_Transient),
            sleep=self.sleep,
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    await limiter.acquire()
                    return await self._attempt(method, url, params, json_body, all_headers, timeout)
        except _Transient as exc:
            raise ProviderError(f"{self.provider}: {exc.problem} after {attempts} attempt(s)") from None
        raise AssertionError("unreachable: tenacity returns or raises")

    async def _attempt(
        self,
        method: str,
        url: str,
        params: Mapping[str, Any] | None,
        json_body: Any,
        headers: Mapping[str, str],
        timeout: float,
    ) -> Response:
        """One try: the response, `ProviderError` for good, or `_Transient` to try again.

        ``timeout`` bounds the whole try (httpx's own bounds each read: a server that sends a
        byte every few seconds would hold it for ever)."""
        try:
            async with asyncio.timeout(timeout):
                r = await self._send(method, url, params, json_body, headers, timeout)
        except (httpx.TimeoutException, TimeoutError):
            raise _Transient(f"timed out after {timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise _Transient(f"connection failed ({type(exc).__name__})") from None
        except BodyError as exc:  # the same request would get the same body: not retried
            raise ProviderError(f"{self.provider}: {exc} (http.max_response_bytes)") from None
        if r.status_code < 300:  # a body reflecting the key must not reach cache or model
            return Response(r.status_code, _redacted_body(r), r.headers, redact(str(r.url)))
        problem = f"HTTP {r.status_code}"
        if r.status_code not in RETRY_STATUSES:
            raise ProviderError(f"{self.provider}: {problem}: {_short_body(r.content)}")
        raise _Transient(problem, _retry_after(r.headers.get("retry-after")))

    def _log_retry(self, state: RetryCallState) -> None:
        problem = state.outcome.exception() if state.outcome is not None else None
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        log.info("%s: %s, retrying in %.2f s", self.provider, getattr(problem, "problem", problem), delay)

    async def _send(
        self,
        method: str,
        url: str,
        params: Mapping[str, Any] | None,
        json_body: Any,
        headers: Mapping[str, str],
        timeout: float,
    ) -> httpx.Response:
        """One attempt, on the loop's pooled client (or a client of its own when pooling is off), its
        body read through the one bounded reader (`geosleuth.bounds.httpbody`)."""
        cap = self.settings.max_response_bytes
        headers = {**headers, "Accept-Encoding": ACCEPT_ENCODING}
        if self.settings.pool_connections:
            client = await loop_client()
            request = client.build_request(
                method, url, params=params, json=json_body, headers=headers, timeout=timeout
            )
            return await send_capped(client, request, cap)
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False, verify=_ssl_context()) as own:
            request = own.build_request(method, url, params=params, json=json_body, headers=headers)
            return await send_capped(own, request, cap)

    def _wait(self, state: RetryCallState) -> float:
        """The server's Retry-After when it sent one, else exponential backoff with jitter."""
        problem = state.outcome.exception() if state.outcome is not None else None
        retry_after = problem.retry_after if isinstance(problem, _Transient) else None
        if retry_after is not None:
            return min(retry_after, self.settings.backoff_max_s)
        base = self.settings.backoff_base_s * (2 ** (state.attempt_number - 1))
        return min(self.settings.backoff_max_s, base * (0.5 + random.random()))


class _Transient(Exception):
    """A failure worth another try (timeout, dropped connection, 429/5xx), with Retry-After."""

    def __init__(self, problem: str, retry_after: float | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.retry_after = retry_after


def _redacted_body(r: httpx.Response) -> bytes:
    """Text bodies with every known key scrubbed; images and other binary bodies as they came."""
    kind = r.headers.get("content-type", "").lower()
    if kind.startswith(("image/", "application/octet-stream", "application/x-protobuf")):
        return r.content
    try:
        text = r.content.decode("utf-8")
    except UnicodeDecodeError:
        return r.content
    clean = redact(text)
    return r.content if clean == text else clean.encode("utf-8")


def _short_body(content: bytes) -> str:
    return redact(content[:200].decode("utf-8", "replace")).strip() or "(empty body)"


def _retry_after(value: str | None) -> float | None:
    """Retry-After is either delta-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
