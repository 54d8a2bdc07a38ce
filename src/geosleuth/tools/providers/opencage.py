"""OpenCage geocoder: one endpoint (/geocode/v1/json) for forward and reverse queries."""

from __future__ import annotations

from typing import Any

from geosleuth.core.records import Place
from geosleuth.tools.config import ToolSettings
from geosleuth.tools.http import ProviderError, require_key
from geosleuth.tools.providers.base import as_float, client_for

API_URL = "https://api.opencagedata.com"


class OpenCageProvider:
    name = "opencage"

    def __init__(self, settings: ToolSettings) -> None:
        self.key = require_key(settings.api_key("opencage"), "opencage", "geocode")
        self.base_url = (settings.base_url("opencage", API_URL) or API_URL).rstrip("/")
        self.client = client_for(settings, "opencage", key=self.key)
        self.language = settings.service("opencage").language

    @property
    def identity(self) -> str:
        return f"opencage@{self.base_url}"

    async def _call(self, q: str, limit: int) -> list[Place]:
        params: dict[str, Any] = {"q": q, "key": self.key, "limit": limit, "no_annotations": 1}
        if self.language:
            params["language"] = self.language
        data = await self.client.get_json(f"{self.base_url}/geocode/v1/json", params)
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise ProviderError("opencage returned an unexpected response")
        status = data.get("status") or {}
        if status.get("code", 200) != 200:
            raise ProviderError(f"opencage: {status.get('code')} {status.get('message', '')}".strip())
        return [_place(r) for r in data["results"] if isinstance(r, dict)]

    async def geocode(self, address: str, limit: int = 5) -> list[Place]:
        return await self._call(address, limit)

    async def reverse(self, lat: float, lon: float) -> Place | None:
        found = await self._call(f"{lat},{lon}", 1)
        return found[0] if found else None


def _place(r: dict[str, Any]) -> Place:
    geom = r.get("geometry") or {}
    c = r.get("components") or {}
    city = c.get("city") or c.get("town") or c.get("village")
    return Place(
        id=f"opencage:{geom.get('lat')},{geom.get('lng')}",
        name=city or str(r.get("formatted", "")).split(",")[0],
        lat=as_float(geom.get("lat"), "latitude", "opencage"),
        lon=as_float(geom.get("lng"), "longitude", "opencage"),
        country_code=(c.get("country_code") or "").upper() or None,
        country=c.get("country"),
        admin1=c.get("state") or c.get("province"),
        admin2=c.get("county"),
        kind=str(c.get("_type") or "place"),
        address=r.get("formatted"),
        score=r.get("confidence"),
        extra={"city": city} if city else {},
    )
