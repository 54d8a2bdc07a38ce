"""Google Maps Platform: Geocoding API, Places API (New) and Maps Static API.

One key, ``GEOSLEUTH_GOOGLE_API_KEY``. Geocoding and Static Maps take it as the ``key``
query parameter (redacted from every error and log line); Places (New) takes it in the
``X-Goog-Api-Key`` header with a required field mask.
"""

from __future__ import annotations

import re
from typing import Any

from PIL import Image

from geosleuth.core.records import Place
from geosleuth.tools.config import ToolSettings
from geosleuth.tools.http import ProviderError, path_segment, require_key
from geosleuth.tools.providers.base import MapImage, MapKind, as_float, client_for

MAPS_URL = "https://maps.googleapis.com"
PLACES_URL = "https://places.googleapis.com"
PLACE_FIELDS = "id,displayName,formattedAddress,location,types,addressComponents"
PLACE_ID = re.compile(r"[A-Za-z0-9_-]{1,512}")
"""Google place ids (``ChIJ…``) are URL-safe base64; anything else is refused before any request."""


class GoogleProvider:
    name = "google"

    def __init__(self, settings: ToolSettings, family: str = "geocode") -> None:
        self.key = require_key(settings.api_key("google"), "google", family)
        self.maps_url = (settings.base_url("google", MAPS_URL) or MAPS_URL).rstrip("/")
        self.places_url = (settings.base_url("google_places", PLACES_URL) or PLACES_URL).rstrip("/")
        self.client = client_for(settings, "google", key=self.key)
        self.language = settings.service("google").language
        self.size = (settings.maps.width, settings.maps.height)

    @property
    def identity(self) -> str:
        return f"google@{self.maps_url}|{self.places_url}"

    # --- Geocoding API -----------------------------------------------------------------------

    async def _geocode_call(self, **params: Any) -> list[Place]:
        params["key"] = self.key
        if self.language:
            params["language"] = self.language
        data = await self.client.get_json(f"{self.maps_url}/maps/api/geocode/json", params)
        if not isinstance(data, dict):
            raise ProviderError("google geocoding returned an unexpected response")
        status = data.get("status")
        if status == "ZERO_RESULTS":
            return []
        if status != "OK":
            raise ProviderError(f"google geocoding: {status}: {data.get('error_message', '')}".strip(": "))
        return [_geocode_place(r) for r in data.get("results") or [] if isinstance(r, dict)]

    async def geocode(self, address: str, limit: int = 5) -> list[Place]:
        return (await self._geocode_call(address=address))[:limit]

    async def reverse(self, lat: float, lon: float) -> Place | None:
        found = await self._geocode_call(latlng=f"{lat},{lon}")
        return found[0] if found else None

    # --- Places API (New) --------------------------------------------------------------------

    def _headers(self, mask: str) -> dict[str, str]:
        headers = {"X-Goog-Api-Key": self.key, "X-Goog-FieldMask": mask}
        if self.language:
            headers["Accept-Language"] = self.language
        return headers

    async def keyword_search(
        self,
        query: str,
        city: str | None = None,
        near: tuple[float, float] | None = None,
        limit: int = 10,
    ) -> list[Place]:
        body: dict[str, Any] = {"textQuery": f"{query} {city}" if city else query, "pageSize": min(limit, 20)}
        if near:
            centre = {"latitude": near[0], "longitude": near[1]}
            body["locationBias"] = {"circle": {"center": centre, "radius": 5000.0}}
        mask = ",".join(f"places.{f}" for f in PLACE_FIELDS.split(","))
        data = await self.client.post_json(
            f"{self.places_url}/v1/places:searchText", body, self._headers(mask)
        )
        if not isinstance(data, dict):
            raise ProviderError("google places returned an unexpected response")
        return [_new_place(p) for p in data.get("places") or [] if isinstance(p, dict)][:limit]

    async def input_tips(self, query: str, city: str | None = None, limit: int = 10) -> list[Place]:
        """Autocomplete (New) returns no coordinates, so suggestions come from Text Search."""
        return await self.keyword_search(query, city=city, limit=limit)

    async def detail(self, poi_id: str) -> Place | None:
        if not PLACE_ID.fullmatch(poi_id or ""):
            raise ProviderError(
                f"invalid Google place id {poi_id[:80]!r}: ids are letters, digits, '-' and '_'"
            )
        data = await self.client.get_json(
            f"{self.places_url}/v1/places/{path_segment(poi_id)}", None, self._headers(PLACE_FIELDS)
        )
        if not isinstance(data, dict) or "id" not in data:
            raise ProviderError("google place details returned an unexpected response")
        return _new_place(data)

    # --- Maps Static API ---------------------------------------------------------------------

    async def render(self, lat: float, lon: float, zoom: int, kind: MapKind) -> MapImage:
        params = {
            "center": f"{lat},{lon}",
            "zoom": zoom,
            "size": f"{self.size[0]}x{self.size[1]}",
            "maptype": "satellite" if kind == "satellite" else "roadmap",
            "markers": f"color:red|{lat},{lon}",
            "key": self.key,
        }
        content = await self.client.get_bytes(f"{self.maps_url}/maps/api/staticmap", params)
        return MapImage(
            image=decode_image(content, "google"),
            lat=lat,
            lon=lon,
            zoom=zoom,
            attribution="Map data © Google",
        )


MAX_MAP_PIXELS = 16_000_000
"""A map or tile is at most a few megapixels; a provider sending a bomb gets an error, not our memory."""


def decode_image(content: bytes, provider: str) -> Image.Image:
    from geosleuth.bounds.imageio import ImageInputError, open_image

    try:
        im = open_image(content, MAX_MAP_PIXELS, label=f"{provider} image", transpose=False)
    except ImageInputError as exc:
        raise ProviderError(f"{provider} did not return an image ({exc})") from None
    return im if im.mode == "RGB" else im.convert("RGB")


def _component(components: list[dict[str, Any]], kind: str, field: str = "long_name") -> str | None:
    for c in components:
        if kind in (c.get("types") or []):
            return c.get(field)
    return None


def _geocode_place(r: dict[str, Any]) -> Place:
    loc = (r.get("geometry") or {}).get("location") or {}
    comps = r.get("address_components") or []
    city = _component(comps, "locality") or _component(comps, "postal_town")
    return Place(
        id=str(r.get("place_id") or "google:unknown"),
        name=city or str(r.get("formatted_address", "")).split(",")[0],
        lat=as_float(loc.get("lat"), "latitude", "google"),
        lon=as_float(loc.get("lng"), "longitude", "google"),
        country_code=_component(comps, "country", "short_name"),
        country=_component(comps, "country"),
        admin1=_component(comps, "administrative_area_level_1"),
        admin2=_component(comps, "administrative_area_level_2"),
        kind=(r.get("types") or ["address"])[0],
        address=r.get("formatted_address"),
        extra={"city": city} if city else {},
    )


def _new_place(p: dict[str, Any]) -> Place:
    loc = p.get("location") or {}
    comps = [
        {"types": c.get("types") or [], "long_name": c.get("longText"), "short_name": c.get("shortText")}
        for c in p.get("addressComponents") or []
    ]
    return Place(
        id=str(p.get("id")),
        name=(p.get("displayName") or {}).get("text") or str(p.get("formattedAddress", "")),
        lat=as_float(loc.get("latitude"), "latitude", "google"),
        lon=as_float(loc.get("longitude"), "longitude", "google"),
        country_code=_component(comps, "country", "short_name"),
        country=_component(comps, "country"),
        admin1=_component(comps, "administrative_area_level_1"),
        kind=(p.get("types") or ["poi"])[0],
        address=p.get("formattedAddress"),
        extra={"types": p.get("types") or []},
    )
