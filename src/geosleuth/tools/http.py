"""HTTP plumbing shared by every provider: URL safety, rate limits, retries, key redaction.

Providers never call httpx directly; they go through `HttpClient`, which
- refuses non-http(s) URLs and loopback / link-local / private targets unless allowed,
- spaces requests per provider (Nominatim's public server allows 1 request/s),
- retries 429 / 5xx / timeouts with exponential backoff and jitter, honouring Retry-After,
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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import httpx

from geosleuth.secrets import RedactingFilter, redact_text, register_secret
from geosleuth.tools.base import ToolError
from geosleuth.tools.config import HttpSettings

log = logging.getLogger(__name__)


class ProviderError(ToolError):
    """A provider refused or failed; the message is safe to show to the model and to log."""


class MissingKeyError(ProviderError):
    """A real provider was selected but no API key is configured."""


class UnsafeUrlError(ToolError):
    """A URL outside http(s) or pointing at a private network was refused."""


def redact(text: str) -> str:
    """Every known key (registered or in a key-named environment variable) and key pattern scrubbed."""
    return redact_text(text)


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


# --- URL safety --------------------------------------------------------------------------------


def _address_is_private(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped:
        addr = addr.ipv4_mapped
    return (
        addr.is_loopback
        or addr.is_link_local
        or addr.is_private
        or addr.is_reserved
        or addr.is_multicast
        or addr.is_unspecified
    )


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
        if _address_is_private(addr):
            raise UnsafeUrlError(f"refused {host!r}: it resolves to the non-public address {addr}")
    return url


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


class RateLimiter:
    """Minimum spacing between requests; thread-safe so it works across event loops."""

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


_LIMITERS: dict[tuple[str, float | None], RateLimiter] = {}
_LIMITERS_LOCK = threading.Lock()


def limiter_for(key: str, per_second: float | None) -> RateLimiter:
    """One limiter per provider and host in the process, shared by every client instance."""
    with _LIMITERS_LOCK:
        return _LIMITERS.setdefault((key, per_second), RateLimiter(per_second))


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
        except (json.JSONDecodeError, UnicodeDecodeError):
            snippet = redact(self.content[:120].decode("utf-8", "replace"))
            raise ProviderError(f"{provider} returned malformed JSON: {snippet!r}") from None


@lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """Building a context costs ~20 ms; clients are per call, so share one."""
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
        await asyncio.to_thread(check_url, url, self.settings.allow_private_urls)
        limiter = limiter_for(f"{self.provider}@{urlsplit(url).netloc}", self.requests_per_second)
        all_headers = {"User-Agent": self.settings.user_agent, **(headers or {})}
        timeout = self.timeout_s or self.settings.timeout_s
        attempts = max(1, self.settings.max_retries + 1)
        last_problem = ""
        for attempt in range(attempts):
            await limiter.acquire()
            retry_after: float | None = None
            try:
                async with httpx.AsyncClient(
                    timeout=timeout, follow_redirects=False, verify=_ssl_context()
                ) as client:
                    r = await client.request(method, url, params=params, json=json_body, headers=all_headers)
            except httpx.TimeoutException:
                last_problem = f"timed out after {timeout:g} s"
            except httpx.HTTPError as exc:
                last_problem = f"connection failed ({type(exc).__name__})"
            else:
                if r.status_code < 300:  # a body reflecting the key must not reach cache or model
                    return Response(r.status_code, _redacted_body(r), r.headers, redact(str(r.url)))
                last_problem = f"HTTP {r.status_code}"
                if r.status_code not in RETRY_STATUSES:
                    raise ProviderError(f"{self.provider}: {last_problem}: {_short_body(r.content)}")
                retry_after = _retry_after(r.headers.get("retry-after"))
            if attempt + 1 < attempts:
                delay = self._backoff(attempt, retry_after)
                log.info("%s: %s, retrying in %.2f s", self.provider, last_problem, delay)
                await self.sleep(delay)
        raise ProviderError(f"{self.provider}: {last_problem} after {attempts} attempt(s)")

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.settings.backoff_max_s)
        base = self.settings.backoff_base_s * (2**attempt)
        return min(self.settings.backoff_max_s, base * (0.5 + random.random()))


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
