"""Persistent tool cache: the same call to the same provider gives the same answer, offline.

Keys are a hash of tool, provider (name and endpoint) and normalised arguments — never
keys or headers. Values hold the text, the structured data and images as PNG bytes.
Replay mode turns a miss into an error so an evaluation can be re-run bit-for-bit.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import math
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from PIL import Image

from geosleuth.tools.base import ToolError, ToolResult
from geosleuth.tools.config import CacheMode, CacheSettings


class CacheMissError(ToolError):
    """Replay mode found no recorded result for a call."""


class CacheUnavailableError(ToolError):
    """The cache backend (a Redis server) could not be reached or refused the operation."""


@dataclass
class CacheEntry:
    text: str
    data: Any
    images: list[bytes]  # PNG
    provider: str | None
    created: float


class CacheBackend(Protocol):
    def get(self, key: str, include_expired: bool = False) -> CacheEntry | None: ...

    def set(self, key: str, entry: CacheEntry, ttl_s: float | None) -> None: ...

    def clear(self) -> None: ...

    def purge_expired(self) -> int: ...

    def __len__(self) -> int: ...


def _normalise(value: Any) -> Any:
    """Argument normal form: NFC, collapsed whitespace, rounded floats, sorted keys."""
    if isinstance(value, str):
        return " ".join(unicodedata.normalize("NFC", value).split())
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return round(value, 7) if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): _normalise(v) for k, v in sorted(value.items()) if v is not None}
    if isinstance(value, list | tuple):
        return [_normalise(v) for v in value]
    return str(value)


def cache_key(tool: str, provider: str, arguments: dict[str, Any]) -> str:
    payload = json.dumps(
        {"tool": tool, "provider": provider, "args": _normalise(arguments)},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


class SQLiteCache:
    """One SQLite file; WAL mode so several processes can read while one writes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, provider TEXT, text TEXT,"
                " data TEXT, created REAL, expires REAL)"
            )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS images (key TEXT, idx INTEGER, png BLOB, PRIMARY KEY (key, idx))"
            )
            conn.execute("CREATE INDEX IF NOT EXISTS entries_expires ON entries (expires)")

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get(self, key: str, include_expired: bool = False) -> CacheEntry | None:
        """The entry for ``key``; one past its TTL only with ``include_expired`` (replays)."""
        conn = self._conn()
        row = conn.execute(
            "SELECT provider, text, data, created, expires FROM entries WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        provider, text, data, created, expires = row
        if expires is not None and expires < time.time() and not include_expired:
            return None
        images = [
            r[0] for r in conn.execute("SELECT png FROM images WHERE key = ? ORDER BY idx", (key,)).fetchall()
        ]
        return CacheEntry(text=text, data=json.loads(data), images=images, provider=provider, created=created)

    def set(self, key: str, entry: CacheEntry, ttl_s: float | None) -> None:
        expires = entry.created + ttl_s if ttl_s is not None else None
        conn = self._conn()
        with conn:
            conn.execute("BEGIN")
            conn.execute(
                "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?)",
                (
                    key,
                    entry.provider,
                    entry.text,
                    json.dumps(entry.data, default=str),
                    entry.created,
                    expires,
                ),
            )
            conn.execute("DELETE FROM images WHERE key = ?", (key,))
            conn.executemany(
                "INSERT INTO images VALUES (?, ?, ?)", [(key, i, png) for i, png in enumerate(entry.images)]
            )

    def clear(self) -> None:
        conn = self._conn()
        conn.execute("DELETE FROM entries")
        conn.execute("DELETE FROM images")

    def purge_expired(self) -> int:
        """Delete entries past their TTL (and their images); returns how many went."""
        conn = self._conn()
        with conn:
            conn.execute("BEGIN")
            now = time.time()
            conn.execute(
                "DELETE FROM images WHERE key IN (SELECT key FROM entries WHERE expires < ?)", (now,)
            )
            removed = conn.execute("DELETE FROM entries WHERE expires < ?", (now,)).rowcount
        return int(removed)

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM entries").fetchone()[0])


class RedisCache:
    """Same interface over Redis, for many workers sharing one cache (``pip install redis``).

    An entry is one hash (``doc``: JSON of text, data, provider, created; ``img:N``: PNG bytes)
    written in one MULTI transaction and expiring at ``created + ttl_s``, as in SQLite.
    """

    def __init__(self, url: str, prefix: str = "geosleuth:tools:") -> None:
        try:
            import redis
        except ImportError:
            raise ValueError("the redis cache backend needs the redis package: pip install redis") from None
        try:
            self.client = redis.Redis.from_url(url, socket_timeout=10.0, socket_connect_timeout=5.0)
        except ValueError as exc:
            raise ValueError(f"bad cache.redis_url: {exc}") from None
        self.prefix = prefix
        self._errors: tuple[type[Exception], ...] = (redis.RedisError,)

    def _guard(self, what: str) -> _RedisGuard:
        return _RedisGuard(what, self._errors)

    def get(self, key: str, include_expired: bool = False) -> CacheEntry | None:
        """Redis deletes expired entries itself, so ``include_expired`` cannot bring them back."""
        with self._guard("read"):
            fields = self.client.hgetall(self.prefix + key)
        raw = fields.get(b"doc")
        if raw is None:
            return None
        doc = json.loads(raw)
        images = [fields[f"img:{i}".encode()] for i in range(int(doc.pop("n_images")))]
        return CacheEntry(images=images, **doc)

    def set(self, key: str, entry: CacheEntry, ttl_s: float | None) -> None:
        name = self.prefix + key
        doc = {
            "text": entry.text,
            "data": entry.data,
            "provider": entry.provider,
            "created": entry.created,
            "n_images": len(entry.images),
        }
        mapping: dict[str, bytes | str] = {"doc": json.dumps(doc, default=str)}
        mapping.update({f"img:{i}": png for i, png in enumerate(entry.images)})
        with self._guard("write"):
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(name)
            if ttl_s is None:
                pipe.hset(name, mapping=mapping)
            elif entry.created + ttl_s > time.time():
                pipe.hset(name, mapping=mapping)
                pipe.pexpireat(name, int((entry.created + ttl_s) * 1000))
            pipe.execute()

    def clear(self) -> None:
        with self._guard("clear"):
            batch: list[bytes] = []
            for k in self.client.scan_iter(match=self.prefix + "*", count=1000):
                batch.append(k)
                if len(batch) >= 1000:
                    self.client.delete(*batch)
                    batch.clear()
            if batch:
                self.client.delete(*batch)

    def purge_expired(self) -> int:
        """Nothing to do: the server drops an entry when its expiry passes."""
        return 0

    def __len__(self) -> int:
        with self._guard("count"):
            return sum(1 for _ in self.client.scan_iter(match=self.prefix + "*", count=1000))


class _RedisGuard:
    """Turns a Redis failure into a tool error naming the operation (not the URL: it may hold a password)."""

    def __init__(self, what: str, errors: tuple[type[Exception], ...]) -> None:
        self.what = what
        self.errors = errors

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        if exc is not None and isinstance(exc, self.errors):
            raise CacheUnavailableError(
                f"tool cache (redis) {self.what} failed: {type(exc).__name__}: {exc}"
            ) from None
        return False


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


@dataclass
class ToolCache:
    """Mode-aware front of a backend: read_write, replay (miss = error), refresh (write only), off."""

    backend: CacheBackend | None
    mode: CacheMode = "read_write"
    ttl_s: float | None = None
    stats: CacheStats = field(default_factory=CacheStats)

    @classmethod
    def from_settings(cls, settings: CacheSettings, path: Path) -> ToolCache:
        if settings.backend == "none" or settings.mode == "off":
            if settings.mode == "replay":
                raise ValueError("cache mode 'replay' needs a cache backend (sqlite or redis)")
            return cls(backend=None, mode="off")
        if settings.backend == "redis":
            if not settings.redis_url:
                raise ValueError(
                    "cache.backend is redis but cache.redis_url (or GEOSLEUTH_REDIS_URL) is not set"
                )
            backend: CacheBackend = RedisCache(settings.redis_url)
        else:
            backend = SQLiteCache(path)
        return cls(backend=backend, mode=settings.mode, ttl_s=settings.ttl_s)

    async def get_or_call(
        self,
        tool: str,
        provider: str,
        arguments: dict[str, Any],
        call: Callable[[], Awaitable[ToolResult]],
    ) -> ToolResult:
        """Serve from the cache when allowed; otherwise call, and store successful results."""
        if self.backend is None or self.mode == "off":
            return await call()
        key = cache_key(tool, provider, arguments)
        if self.mode in {"read_write", "replay"}:
            # SQLite / Redis I/O and PNG decoding off the event loop, in one thread hop;
            # a replay also serves entries past their TTL
            hit = await asyncio.to_thread(_lookup, self.backend, key, self.mode == "replay")
            if hit is not None:
                self.stats.hits += 1
                return hit
            self.stats.misses += 1
            if self.mode == "replay":
                shown = json.dumps(_normalise(arguments), ensure_ascii=False)[:200]
                raise CacheMissError(
                    f"replay mode: no cached result for {tool} via {provider} with arguments {shown}; "
                    "record it first with the cache in read_write mode"
                )
        result = await call()
        if result.ok:
            await asyncio.to_thread(_store, self.backend, key, result, self.ttl_s)
            self.stats.writes += 1
        return result


def _lookup(backend: CacheBackend, key: str, include_expired: bool) -> ToolResult | None:
    entry = backend.get(key, include_expired)
    return _from_entry(entry) if entry is not None else None


def _store(backend: CacheBackend, key: str, result: ToolResult, ttl_s: float | None) -> None:
    backend.set(key, _to_entry(result), ttl_s)


def _to_entry(result: ToolResult) -> CacheEntry:
    return CacheEntry(
        text=result.text,
        data=json.loads(json.dumps(result.data, default=str)),
        images=[_png(im) for im in result.images],
        provider=result.provider,
        created=time.time(),
    )


def _from_entry(entry: CacheEntry) -> ToolResult:
    images = [Image.open(io.BytesIO(png)) for png in entry.images]
    for im in images:
        im.load()
    return ToolResult(
        text=entry.text, images=images, data=entry.data, provider=entry.provider, cache_hit=True
    )
