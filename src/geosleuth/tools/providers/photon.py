"""Photon (komoot's OSM geocoder): GeoJSON answers from /api and /reverse.

The public server asks for fair use; ``services.photon.base_url`` points at a self-hosted one.
POI search is /api with a location bias (``lat``, ``lon``, ``zoom``); Photon has no lookup by
id, so poi_detail_query answers from the places this provider returned during the run.
"""

from __future__ import annotations

from typing import Any

from geosleuth.core.records import Place
from geosleuth.tools.config import ToolSettings
from geosleuth.tools.http import ProviderError
from geosleuth.tools.providers.base import RecentPlaces, as_float, client_for

PUBLIC_URL = "https://photon.komoot.io"
NEAR_ZOOM = 14  # location-bias radius of a few km around ``near``: a neighbourhood search


class PhotonProvider:
    name = "photon"

    def __init__(self, settings: ToolSettings) -> None:
        self.base_url = (settings.base_url("photon", PUBLIC_URL) or PUBLIC_URL).rstrip("/")
        public = self.base_url == PUBLIC_URL
        self.client = client_for(settings, "photon", default_rps=1.0 if public else None)
        self.language = settings.service("photon").language
        self.recent = RecentPlaces()

    @property
    def identity(self) -> str:
        return f"photon@{self.base_url}"

    async def _search(self, q: str, limit: int, **extra: Any) -> list[Place]:
        params: dict[str, Any] = {"q": q, "limit": limit, **extra}
        if self.language:
            params["lang"] = self.language
        return _features(await self.client.get_json(f"{self.base_url}/api", params))

    async def geocode(self, address: str, limit: int = 5) -> list[Place]:
        return await self._search(address, limit)

    async def input_tips(self, query: str, city: str | None = None, limit: int = 10) -> list[Place]:
        """Photon is a search-as-you-type engine: partial words match, so tips are a plain search."""
        return await self.keyword_search(query, city=city, limit=limit)

    async def keyword_search(
        self,
        query: str,
        city: str | None = None,
        near: tuple[float, float] | None = None,
        limit: int = 10,
    ) -> list[Place]:
        bias = {"lat": near[0], "lon": near[1], "zoom": NEAR_ZOOM} if near else {}
        return self.recent.remember(await self._search(f"{query} {city}" if city else query, limit, **bias))

    async def detail(self, poi_id: str) -> Place | None:
        place = self.recent.get(poi_id)
        if place is None:
            raise ProviderError(
                f"photon cannot look places up by id: {poi_id!r} was not among this run's POI results; "
                "use an id returned by poi_keyword_search or poi_input_tips"
            )
        return place

    async def reverse(self, lat: float, lon: float) -> Place | None:
        found = _features(await self.client.get_json(f"{self.base_url}/reverse", {"lat": lat, "lon": lon}))
        return found[0] if found else None


def _features(data: Any) -> list[Place]:
    if not isinstance(data, dict) or not isinstance(data.get("features"), list):
        raise ProviderError("photon returned an unexpected response (expected a GeoJSON FeatureCollection)")
    return [_place(f) for f in data["features"] if isinstance(f, dict)]


def _place(f: dict[str, Any]) -> Place:
    props = f.get("properties") or {}
    coords = (f.get("geometry") or {}).get("coordinates") or [None, None]
    street = " ".join(str(p) for p in (props.get("street"), props.get("housenumber")) if p)
    parts = [props.get("name"), street, props.get("postcode"), props.get("city"), props.get("state"),
             props.get("country")]  # fmt: skip
    osm_type = str(props.get("osm_type") or "")[:1].upper()
    return Place(
        id=f"osm:{osm_type}{props.get('osm_id')}" if props.get("osm_id") else "photon:unknown",
        name=props.get("name") or street or props.get("city") or "unnamed",
        lat=as_float(coords[1], "latitude", "photon"),
        lon=as_float(coords[0], "longitude", "photon"),
        country_code=(props.get("countrycode") or "").upper() or None,
        country=props.get("country"),
        admin1=props.get("state"),
        admin2=props.get("county"),
        kind=str(props.get("osm_value") or props.get("type") or "place"),
        address=", ".join(dict.fromkeys(str(p) for p in parts if p)),
        extra={"osm_key": props.get("osm_key"), **({"city": props["city"]} if props.get("city") else {})},
    )
