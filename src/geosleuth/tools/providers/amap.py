"""AMap (Gaode) REST API v3: input tips, place text / around search, place detail, geocode,
reverse geocode and static maps.

AMap works in GCJ-02. Every coordinate it returns is converted to WGS-84 here, before the
model sees it, and every coordinate sent to it is converted WGS-84 → GCJ-02 (outside
mainland China both conversions are the identity). Errors come back as HTTP 200 with
``status: "0"`` and an ``info`` code.
"""

from __future__ import annotations

from typing import Any

from geosleuth.core.countries import resolve_country
from geosleuth.core.geo import gcj02_to_wgs84, wgs84_to_gcj02
from geosleuth.core.records import Place
from geosleuth.tools.config import ToolSettings
from geosleuth.tools.http import ProviderError, require_key
from geosleuth.tools.providers.base import MapImage, MapKind, as_float, client_for
from geosleuth.tools.providers.google import decode_image

API_URL = "https://restapi.amap.com"
RATE_LIMIT_INFOS = {"CUQPS_HAS_EXCEEDED_THE_LIMIT", "DAILY_QUERY_OVER_LIMIT", "ACCESS_TOO_FREQUENT"}


def to_gcj(lat: float, lon: float) -> str:
    """AMap's ``lon,lat`` string in GCJ-02 for a WGS-84 point."""
    glat, glon = wgs84_to_gcj02(lat, lon)
    return f"{float(glon):.6f},{float(glat):.6f}"


def parse_location(value: Any) -> tuple[float, float] | None:
    """AMap ``"lon,lat"`` (GCJ-02) → WGS-84 ``(lat, lon)``; empty values (``[]``, ``""``) → None."""
    if not value or not isinstance(value, str) or "," not in value:
        return None
    lon_s, lat_s = value.split(",", 1)
    lat, lon = gcj02_to_wgs84(as_float(lat_s, "latitude", "amap"), as_float(lon_s, "longitude", "amap"))
    return float(lat), float(lon)


def _text(value: Any) -> str | None:
    """AMap writes missing strings as ``[]``."""
    return value if isinstance(value, str) and value else None


class AMapProvider:
    name = "amap"

    def __init__(self, settings: ToolSettings, family: str = "poi") -> None:
        self.key = require_key(settings.api_key("amap"), "amap", family)
        self.base_url = (settings.base_url("amap", API_URL) or API_URL).rstrip("/")
        self.client = client_for(settings, "amap", key=self.key)
        self.size = (min(settings.maps.width, 1024), min(settings.maps.height, 1024))

    @property
    def identity(self) -> str:
        return f"amap@{self.base_url}"

    async def _call(self, path: str, **params: Any) -> dict[str, Any]:
        params = {k: v for k, v in params.items() if v is not None}
        params.update(key=self.key, output="JSON")
        data = await self.client.get_json(f"{self.base_url}/v3/{path}", params)
        if not isinstance(data, dict) or "status" not in data:
            raise ProviderError(f"amap {path} returned an unexpected response")
        if str(data["status"]) != "1":
            info = str(data.get("info") or "unknown error")
            hint = " (rate limit)" if info in RATE_LIMIT_INFOS else ""
            raise ProviderError(f"amap {path}: {info} (infocode {data.get('infocode')}){hint}")
        return data

    async def input_tips(self, query: str, city: str | None = None, limit: int = 10) -> list[Place]:
        data = await self._call("assistant/inputtips", keywords=query, city=city)
        out: list[Place] = []
        for tip in data.get("tips") or []:
            loc = parse_location(tip.get("location"))
            if loc is None:  # bus lines and query suggestions have no point
                continue
            out.append(
                Place(
                    id=_text(tip.get("id")) or f"amap-tip:{tip.get('name')}",
                    name=str(tip.get("name")),
                    lat=loc[0],
                    lon=loc[1],
                    country_code="CN",
                    admin2=_text(tip.get("district")),
                    kind="poi",
                    address=" ".join(x for x in (_text(tip.get("district")), _text(tip.get("address"))) if x)
                    or None,
                    extra={"adcode": _text(tip.get("adcode")), "typecode": _text(tip.get("typecode"))},
                )
            )
        return out[:limit]

    async def keyword_search(
        self,
        query: str,
        city: str | None = None,
        near: tuple[float, float] | None = None,
        limit: int = 10,
    ) -> list[Place]:
        if near:
            data = await self._call(
                "place/around", keywords=query, location=to_gcj(*near), radius=5000, offset=min(limit, 25)
            )
        else:
            data = await self._call("place/text", keywords=query, city=city, offset=min(limit, 25), page=1)
        return [p for p in (_poi(d) for d in data.get("pois") or []) if p is not None][:limit]

    async def detail(self, poi_id: str) -> Place | None:
        data = await self._call("place/detail", id=poi_id)
        found = [p for p in (_poi(d) for d in data.get("pois") or []) if p is not None]
        return found[0] if found else None

    async def geocode(self, address: str, limit: int = 5) -> list[Place]:
        data = await self._call("geocode/geo", address=address)
        out: list[Place] = []
        for g in data.get("geocodes") or []:
            loc = parse_location(g.get("location"))
            if loc is None:
                continue
            name = _text(g.get("district")) or _text(g.get("city")) or _text(g.get("province")) or address
            country = _text(g.get("country"))
            out.append(
                Place(
                    id=f"amap-geo:{g.get('adcode')}:{g.get('location')}",
                    name=name,
                    lat=loc[0],
                    lon=loc[1],
                    country_code=resolve_country(country) if country else "CN",  # geo/geo answers in China
                    country=country,
                    admin1=_text(g.get("province")),
                    admin2=_text(g.get("district")),
                    kind=str(_text(g.get("level")) or "address"),
                    address=_text(g.get("formatted_address")),
                    extra={"city": _text(g.get("city"))} if _text(g.get("city")) else {},
                )
            )
        return out[:limit]

    async def reverse(self, lat: float, lon: float) -> Place | None:
        data = await self._call("geocode/regeo", location=to_gcj(lat, lon))
        regeo = data.get("regeocode") or {}
        comp = regeo.get("addressComponent") or {}
        address = _text(regeo.get("formatted_address"))
        if not address:
            return None
        city = _text(comp.get("city")) or _text(comp.get("province"))
        return Place(
            id=f"amap-regeo:{lat:.5f},{lon:.5f}",
            name=_text(comp.get("township")) or city or address,
            lat=lat,
            lon=lon,
            country_code=resolve_country(_text(comp.get("country"))),
            country=_text(comp.get("country")),
            admin1=_text(comp.get("province")),
            admin2=_text(comp.get("district")),
            kind="address",
            address=address,
            extra={"city": city} if city else {},
        )

    async def render(self, lat: float, lon: float, zoom: int, kind: MapKind) -> MapImage:
        centre = to_gcj(lat, lon)
        params: dict[str, Any] = {
            "location": centre,
            "zoom": max(1, min(zoom, 17)),
            "size": f"{self.size[0]}*{self.size[1]}",
            "markers": f"mid,,A:{centre}",
            "key": self.key,
        }
        if kind == "satellite":
            params["traffic"] = 0
        content = await self.client.get_bytes(f"{self.base_url}/v3/staticmap", params)
        note = "AMap static maps are road maps; no satellite layer." if kind == "satellite" else ""
        return MapImage(
            image=decode_image(content, "amap"),
            lat=lat,
            lon=lon,
            zoom=int(params["zoom"]),
            attribution="© AutoNavi (AMap)",
            note=note,
        )


def _poi(d: dict[str, Any]) -> Place | None:
    loc = parse_location(d.get("location"))
    if loc is None:
        return None
    parts = [_text(d.get(k)) for k in ("pname", "cityname", "adname", "address")]
    return Place(
        id=str(d.get("id")),
        name=str(d.get("name")),
        lat=loc[0],
        lon=loc[1],
        country_code="CN",
        admin1=_text(d.get("pname")),
        admin2=_text(d.get("adname")),
        kind=str(_text(d.get("type")) or "poi"),
        address=" ".join(p for p in parts if p) or None,
        extra={k: v for k in ("tel", "typecode", "cityname") if (v := _text(d.get(k)))},
    )
