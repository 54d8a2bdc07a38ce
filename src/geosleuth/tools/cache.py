"""Persistent tool cache: the same call to the same provider gives the same answer, offline.

Keys are a hash of tool, provider (name and endpoint) and normalised arguments — never
keys or headers. Values hold the text, the structured data and images as PNG bytes.
Replay mode turns a miss into an error so an evaluation can be re-run bit-for-bit.
"""

from __future__ import annotations

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


@dataclass
class CacheEntry:
    text: str
    data: Any
    images: list[bytes]  # PNG
    provider: str | None
    created: float


class CacheBackend(Protocol):
    def get(self, key: str) -> CacheEntry | None: ...

    def set(self, key: str, entry: CacheEntry, ttl_s: float | None) -> None: ...

    def clear(self) -> None: ...


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

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get(self, key: str) -> CacheEntry | None:
        conn = self._conn()
        row = conn.execute(
            "SELECT provider, text, data, created, expires FROM entries WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        provider, text, data, created, expires = row
        if expires is not None and expires < time.time():
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

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM entries").fetchone()[0])


class RedisCache:
    """Same interface over Redis, for many workers sharing one cache (``pip install redis``)."""

    def __init__(self, url: str, prefix: str = "geosleuth:tools:") -> None:
        try:
            import redis
        except ImportError:
            raise ValueError("the redis cache backend needs the redis package: pip install redis") from None
        self.client = redis.Redis.from_url(url)
        self.prefix = prefix

    def get(self, key: str) -> CacheEntry | None:
        raw = self.client.get(self.prefix + key)
        if raw is None:
            return None
        doc = json.loads(raw)
        images = [bytes.fromhex(h) for h in doc.pop("images")]
        return CacheEntry(images=images, **doc)

    def set(self, key: str, entry: CacheEntry, ttl_s: float | None) -> None:
        doc = {
            "text": entry.text,
            "data": entry.data,
            "images": [png.hex() for png in entry.images],
            "provider": entry.provider,
            "created": entry.created,
        }
        ttl = int(math.ceil(ttl_s)) if ttl_s else None
        self.client.set(self.prefix + key, json.dumps(doc, default=str), ex=ttl)

    def clear(self) -> None:
        for k in self.client.scan_iter(self.prefix + "*"):
            self.client.delete(k)


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
            entry = self.backend.get(key)
            if entry is not None:
                self.stats.hits += 1
                return _from_entry(entry)
            self.stats.misses += 1
            if self.mode == "replay":
                shown = json.dumps(_normalise(arguments), ensure_ascii=False)[:200]
                raise CacheMissError(
                    f"replay mode: no cached result for {tool} via {provider} with arguments {shown}; "
                    "record it first with the cache in read_write mode"
                )
        result = await call()
        if result.ok:
            self.backend.set(key, _to_entry(result), self.ttl_s)
            self.stats.writes += 1
        return result


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
