"""Text answers to coordinates for the training rewards, through the tool layer.

GeoAgent answers ``Country; Region; Place`` without coordinates; its R_spa geocodes that
text first (the released code asks OpenCage). Here the query goes through the same
``geocode`` tool the agent uses: the offline gazetteer by default, or whatever geocoder the
tool settings configure (OpenCage, Nominatim, Google, AMap, …), behind the tool cache. Each
query is tried fine to coarse ("Paris, Île-de-France, France", then "Île-de-France,
France", then "France"), as the released code drops the last part when nothing is found.
A query that finds nothing, or a provider error, gives None and a logged reason: the reward
for that rollout is 0.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_QUERY_CHARS = 300
"""A longer "address" is prose: it is not sent to a provider."""


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine from synchronous code, also when the caller is inside an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())  # type: ignore[arg-type]
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(asyncio.run(make()))  # type: ignore[arg-type]
        except BaseException as exc:  # re-raised in the caller's thread
            box.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


def address_queries(parts: Sequence[str | None]) -> list[str]:
    """Queries fine to coarse from levels given coarse to fine (country, region, place)."""
    names = [p.strip() for p in parts if p and p.strip()]
    queries = []
    for end in range(len(names), 0, -1):
        query = ", ".join(reversed(names[:end]))
        if len(query) <= MAX_QUERY_CHARS:
            queries.append(query)
    return queries


class AnswerGeocoder:
    """Geocodes answer texts with the ``geocode`` tool; results are remembered (bounded LRU)."""

    def __init__(self, settings: Any = None, registry: Any = None, cache_size: int = 100_000) -> None:
        if registry is None:
            from geosleuth.tools import build_registry

            registry = build_registry(settings, names=["geocode"])
        self.registry = registry
        self.cache_size = cache_size
        self._memo: OrderedDict[str, tuple[float, float] | None] = OrderedDict()
        self._lock = threading.Lock()
        self.failures = 0

    async def _one(self, query: str) -> tuple[float, float] | None:
        result = await self.registry.call("geocode", {"address": query})
        if not result.ok:
            log.debug("reward geocoding of %r failed: %s", query[:80], result.error)
            return None
        places = result.data or []
        if not places:
            return None
        first = places[0]
        return float(first["lat"]), float(first["lon"])

    async def _resolve(self, queries: list[str]) -> tuple[float, float] | None:
        for query in queries:
            with self._lock:
                if query in self._memo:
                    hit = self._memo[query]
                    if hit is not None:
                        return hit
                    continue
            got = await self._one(query)
            self._remember(query, got)
            if got is not None:
                return got
        return None

    def _remember(self, query: str, value: tuple[float, float] | None) -> None:
        with self._lock:
            self._memo[query] = value
            self._memo.move_to_end(query)
            while len(self._memo) > self.cache_size:
                self._memo.popitem(last=False)

    def geocode_many(self, answers: Sequence[Sequence[str | None]]) -> list[tuple[float, float] | None]:
        """One result per answer (levels coarse to fine); None where nothing was found."""

        async def all_of() -> list[tuple[float, float] | None]:
            return list(await asyncio.gather(*(self._resolve(address_queries(a)) for a in answers)))

        out = run_sync(all_of) if answers else []
        for levels, hit in zip(answers, out, strict=True):
            if hit is None and any(levels):
                self.failures += 1
                log.debug("reward: answer %r could not be geocoded; R_spa = 0", [x for x in levels if x])
        return out


_GEOCODERS: dict[str, AnswerGeocoder] = {}
_GEOCODERS_LOCK = threading.Lock()


def shared_geocoder(settings_path: str | None = None) -> AnswerGeocoder:
    """One geocoder per tool-settings file per process (shared cache and provider clients)."""
    key = settings_path or ""
    with _GEOCODERS_LOCK:
        if key not in _GEOCODERS:
            _GEOCODERS[key] = AnswerGeocoder(settings_path)
        return _GEOCODERS[key]
