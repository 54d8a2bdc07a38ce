"""What a provider is: an object with a name, an identity for cache keys, and async methods.

Every provider returns `Place` records in WGS-84 (Chinese datums converted at the boundary)
or `SearchHit` records; the tool layer formats them for the model.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Literal, Protocol, runtime_checkable

from PIL import Image
from pydantic import BaseModel

from geosleuth.core.records import Place
from geosleuth.tools.config import ToolSettings
from geosleuth.tools.http import HttpClient, ProviderError
from geosleuth.tools.text import strip_html

MapKind = Literal["static", "satellite"]

RECENT_PLACES = 10_000
"""Results a provider remembers for poi_detail_query; a provider lives as long as a run."""


class SearchHit(BaseModel):
    """The one normalised web-search result shape."""

    title: str
    url: str
    snippet: str = ""


class MapImage(BaseModel):
    """A rendered map and what it shows (for the model's text and the logs)."""

    model_config = {"arbitrary_types_allowed": True}

    image: Image.Image
    lat: float
    lon: float
    zoom: int
    attribution: str
    note: str = ""


@runtime_checkable
class Provider(Protocol):
    name: str

    @property
    def identity(self) -> str:
        """Name plus endpoint: part of the cache key (never the key)."""
        ...


class GeocodeProvider(Provider, Protocol):
    async def geocode(self, address: str, limit: int = 5) -> list[Place]: ...

    async def reverse(self, lat: float, lon: float) -> Place | None: ...


class PoiProvider(Provider, Protocol):
    async def input_tips(self, query: str, city: str | None = None, limit: int = 10) -> list[Place]: ...

    async def keyword_search(
        self,
        query: str,
        city: str | None = None,
        near: tuple[float, float] | None = None,
        limit: int = 10,
    ) -> list[Place]: ...

    async def detail(self, poi_id: str) -> Place | None: ...


class SearchProvider(Provider, Protocol):
    async def search(self, query: str, max_results: int = 10) -> list[SearchHit]: ...


class MapProvider(Provider, Protocol):
    async def render(self, lat: float, lon: float, zoom: int, kind: MapKind) -> MapImage: ...


class RecentPlaces:
    """The places a provider returned lately, by id: details for ids it cannot look up itself."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit or RECENT_PLACES
        self._places: OrderedDict[str, Place] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, places: list[Place]) -> list[Place]:
        """Keep ``places`` (the newest last, the oldest dropped past the limit) and return them."""
        with self._lock:
            for p in places:
                self._places[p.id] = p
                self._places.move_to_end(p.id)
            while len(self._places) > self.limit:
                self._places.popitem(last=False)
        return places

    def get(self, place_id: str) -> Place | None:
        with self._lock:
            return self._places.get(place_id)

    def ids(self) -> Iterable[str]:
        with self._lock:
            return list(self._places)


def client_for(
    settings: ToolSettings, service: str, default_rps: float | None = None, key: str | None = None
) -> HttpClient:
    """An HttpClient with the service's rate, timeout and key registered for redaction."""
    svc = settings.service(service)
    return HttpClient(
        provider=service,
        settings=settings.http,
        requests_per_second=svc.requests_per_second if svc.requests_per_second is not None else default_rps,
        timeout_s=svc.timeout_s,
        secrets=(key,) if key else (),
    )


def as_float(value: object, what: str, provider: str) -> float:
    """Provider numbers arrive as strings or numbers; anything else is a malformed response."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise ProviderError(f"{provider} returned a malformed {what}: {value!r}")
    return number


def search_hits(
    results: object, max_results: int, url_key: str = "url", snippet_key: str = "content"
) -> list[SearchHit]:
    """A search API's result list in the one normalised shape; entries without a URL are dropped."""
    if not isinstance(results, list):
        return []
    return [
        SearchHit(
            title=strip_html(str(r.get("title") or "")),
            url=str(r.get(url_key) or ""),
            snippet=strip_html(str(r.get(snippet_key) or "")),
        )
        for r in results
        if isinstance(r, dict) and r.get(url_key)
    ][:max_results]
