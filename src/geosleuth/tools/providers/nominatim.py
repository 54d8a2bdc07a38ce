"""Nominatim (OpenStreetMap) geocoding, reverse geocoding and POI search.

Usage policy of the public server: an identifying User-Agent and at most 1 request/s;
self-hosted servers set ``services.nominatim.base_url`` and may raise the rate.
API: /search, /reverse and /lookup with ``format=jsonv2``.
"""

from __future__ import annotations

from typing import Any

from geosleuth.core.records import Place
from geosleuth.tools.config import ToolSettings
from geosleuth.tools.http import ProviderError
from geosleuth.tools.providers.base import as_float, client_for

PUBLIC_URL = "https://nominatim.openstreetmap.org"


class NominatimProvider:
    name = "nominatim"

    def __init__(self, settings: ToolSettings) -> None:
        self.base_url = (settings.base_url("nominatim", PUBLIC_URL) or PUBLIC_URL).rstrip("/")
        public = self.base_url == PUBLIC_URL
        self.client = client_for(settings, "nominatim", default_rps=1.0 if public else None)
        self.language = settings.service("nominatim").language

    @property
    def identity(self) -> str:
        return f"nominatim@{self.base_url}"

    def _params(self, **extra: Any) -> dict[str, Any]:
        params = {"format": "jsonv2", "addressdetails": 1, **extra}
        if self.language:
            params["accept-language"] = self.language
        return params

    async def geocode(self, address: str, limit: int = 5) -> list[Place]:
        data = await self.client.get_json(f"{self.base_url}/search", self._params(q=address, limit=limit))
        return _places(data)

    async def reverse(self, lat: float, lon: float) -> Place | None:
        data = await self.client.get_json(f"{self.base_url}/reverse", self._params(lat=lat, lon=lon))
        if isinstance(data, dict) and "error" in data:
            return None
        if not isinstance(data, dict):
            raise ProviderError("nominatim returned an unexpected reverse response")
        return _place(data)

    async def input_tips(self, query: str, city: str | None = None, limit: int = 10) -> list[Place]:
        return await self.keyword_search(query, city=city, limit=limit)

    async def keyword_search(
        self,
        query: str,
        city: str | None = None,
        near: tuple[float, float] | None = None,
        limit: int = 10,
    ) -> list[Place]:
        q = f"{query}, {city}" if city else query
        extra: dict[str, Any] = {"q": q, "limit": limit}
        if near:
            lat, lon = near
            extra["viewbox"] = f"{lon - 0.1},{lat + 0.1},{lon + 0.1},{lat - 0.1}"
        return _places(await self.client.get_json(f"{self.base_url}/search", self._params(**extra)))

    async def detail(self, poi_id: str) -> Place | None:
        osm = poi_id.removeprefix("osm:")
        if not osm or osm[0] not in "NWR" or not (osm[1:].isascii() and osm[1:].isdigit()):
            raise ProviderError(f"nominatim POI ids look like osm:N123, osm:W45 or osm:R6, got {poi_id!r}")
        found = _places(await self.client.get_json(f"{self.base_url}/lookup", self._params(osm_ids=osm)))
        return found[0] if found else None


def _places(data: Any) -> list[Place]:
    if not isinstance(data, list):
        raise ProviderError("nominatim returned an unexpected response (expected a list of places)")
    return [_place(d) for d in data if isinstance(d, dict)]


def _place(d: dict[str, Any]) -> Place:
    addr = d.get("address") or {}
    osm_type = str(d.get("osm_type") or "")[:1].upper()
    pid = f"osm:{osm_type}{d['osm_id']}" if osm_type and d.get("osm_id") else f"nominatim:{d.get('place_id')}"
    city = addr.get("city") or addr.get("town") or addr.get("village") or addr.get("municipality")
    return Place(
        id=pid,
        name=d.get("name") or city or str(d.get("display_name", "")).split(",")[0],
        lat=as_float(d.get("lat"), "latitude", "nominatim"),
        lon=as_float(d.get("lon"), "longitude", "nominatim"),
        country_code=(addr.get("country_code") or "").upper() or None,
        country=addr.get("country"),
        admin1=addr.get("state") or addr.get("province") or addr.get("region"),
        admin2=addr.get("county") or addr.get("state_district"),
        kind=str(d.get("category") or d.get("type") or "place"),
        address=d.get("display_name"),
        score=d.get("importance"),
        extra={"type": d.get("type"), **({"city": city} if city else {})},
    )
