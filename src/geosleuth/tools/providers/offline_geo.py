"""Offline geocoding and POI search over the gazetteer and the user's own POI files.

No key, no network: forward and reverse geocoding come from the GeoNames / Natural Earth
gazetteer; POI search looks at the user's GeoJSON / CSV points first, then gazetteer places.
"""

from __future__ import annotations

import asyncio
import csv
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from geosleuth.core.geo import haversine_km, valid_coordinates
from geosleuth.core.records import Place, ReversePlace
from geosleuth.core.text import normalize
from geosleuth.tools.providers.base import RecentPlaces

CITY_RADIUS_KM = 60.0  # how far from a named city a POI may be to count as "in" it


def _gazetteer() -> Any:
    from geosleuth.gazetteer import get_gazetteer

    return get_gazetteer()


def reverse_to_place(rp: ReversePlace) -> Place:
    """A reverse-geocoding answer as a Place with a readable address line.

    Off-shore points say so, and a far nearest town is given with its distance, so that the
    model does not read "nearest" as "in".
    """
    dist = rp.city_distance_km
    country = rp.country or rp.country_code
    if rp.on_land is False:
        name = "open water"
        address = f"at sea; nearest country {country or 'unknown'}"
        if rp.city:
            address += (
                f"; nearest place {rp.city} ({dist:,.0f} km)" if dist is not None else f"; nearest {rp.city}"
            )
    else:
        far = dist is not None and dist > 25
        parts = [p for p in (None if far else rp.city, rp.admin2, rp.admin1, country) if p]
        address = ", ".join(dict.fromkeys(parts)) or "unknown"
        name = (None if far else rp.city) or rp.admin2 or rp.admin1 or country or "unknown"
        if far and rp.city:
            address += f" (nearest place {rp.city}, {dist:,.0f} km away)"
    return Place(
        id=f"reverse:{rp.lat:.5f},{rp.lon:.5f}",
        name=name,
        lat=rp.lat,
        lon=rp.lon,
        country_code=rp.country_code,
        country=rp.country,
        admin1=rp.admin1,
        admin2=rp.admin2,
        kind="address",
        address=address,
        extra={"nearest_city_km": dist, "on_land": rp.on_land},
    )


@dataclass
class PoiStore:
    """User POIs (GeoJSON points or CSV rows with name, lat, lon) with token search."""

    places: list[Place]
    keys: list[str]

    @classmethod
    def load(cls, paths: Iterable[Path]) -> PoiStore:
        places: list[Place] = []
        for path in paths:
            places.extend(_read_poi_file(Path(path)))
        return cls(places=places, keys=[normalize(" ".join(_search_text(p))) for p in places])

    def get(self, poi_id: str) -> Place | None:
        return next((p for p in self.places if p.id == poi_id), None)

    def search(self, query: str, limit: int = 10, prefix: bool = False) -> list[Place]:
        q = normalize(query)
        if not q or not self.places:
            return []
        tokens = q.split()
        scored: list[tuple[float, int]] = []
        for i, key in enumerate(self.keys):
            words = key.split()
            if prefix:
                hit = sum(any(w.startswith(t) for w in words) for t in tokens)
            else:
                hit = sum(t in words for t in tokens)
            if hit:
                exact = 1.0 if normalize(self.places[i].name) == q else 0.0
                scored.append((hit / len(tokens) + exact, i))
        scored.sort(key=lambda s: -s[0])
        return [self.places[i].model_copy(update={"score": round(s, 3)}) for s, i in scored[:limit]]


def _search_text(p: Place) -> list[str]:
    return [p.name, p.kind, p.address or "", str(p.extra.get("category", ""))]


def _read_poi_file(path: Path) -> list[Place]:
    if not path.is_file():
        raise ValueError(f"POI file not found: {path}")
    suffix = path.suffix.lower()
    if suffix not in {".geojson", ".json", ".csv"}:
        raise ValueError(f"POI file {path} must be .geojson, .json or .csv")
    try:
        places = _read_csv(path) if suffix == ".csv" else _read_geojson(path)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, UnicodeDecodeError) as exc:
        raise ValueError(f"POI file {path} is malformed: {type(exc).__name__}: {exc}") from None
    bad = [p.id for p in places if not valid_coordinates(p.lat, p.lon)]
    if bad:
        raise ValueError(f"POI file {path}: coordinates out of range for {', '.join(bad[:5])}")
    return places


def _read_geojson(path: Path) -> list[Place]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    features = doc.get("features", []) if isinstance(doc, dict) else []
    out: list[Place] = []
    for n, feat in enumerate(features):
        geom = feat.get("geometry") or {}
        props = feat.get("properties") or {}
        if geom.get("type") != "Point" or not props.get("name"):
            continue
        lon, lat = geom["coordinates"][:2]
        out.append(_poi_place(path, n, props, float(lat), float(lon), feat.get("id")))
    return out


def _read_csv(path: Path) -> list[Place]:
    out: list[Place] = []
    with path.open(encoding="utf-8", newline="") as fh:
        for n, row in enumerate(csv.DictReader(fh)):
            lat = row.get("lat") or row.get("latitude")
            lon = row.get("lon") or row.get("lng") or row.get("longitude")
            if not row.get("name") or lat in (None, "") or lon in (None, ""):
                continue
            out.append(_poi_place(path, n, row, float(lat), float(lon), row.get("id")))
    return out


def _poi_place(path: Path, n: int, props: dict[str, Any], lat: float, lon: float, fid: Any) -> Place:
    category = (
        props.get("category") or props.get("type") or props.get("amenity") or props.get("shop") or "poi"
    )
    return Place(
        id=f"poi:{path.stem}:{fid if fid not in (None, '') else n}",
        name=str(props["name"]),
        lat=lat,
        lon=lon,
        country_code=(props.get("country_code") or None),
        kind="poi",
        address=props.get("address") or props.get("addr:full") or None,
        extra={"category": str(category), **({"city": props["city"]} if props.get("city") else {})},
    )


class OfflineGeoProvider:
    """Geocode, reverse geocode and POI search with no network.

    Reverse geocoding, POI ranking and the first use of the gazetteer (which loads or builds it)
    take milliseconds to seconds, so they run in a worker thread rather than stall every other
    trajectory on the event loop; forward geocoding, once warm, runs inline.
    """

    name = "offline"

    def __init__(self, poi_files: Iterable[Path] = ()) -> None:
        self.poi_files = [Path(p) for p in poi_files]
        self.store = PoiStore.load(self.poi_files)
        self.recent = RecentPlaces()  # for poi_detail_query on gazetteer results
        self._search_ready = False

    @property
    def identity(self) -> str:
        return "offline:" + ",".join(str(p) for p in self.poi_files)

    async def geocode(self, address: str, limit: int = 5) -> list[Place]:
        """Inline once the gazetteer is loaded: a search takes well under a millisecond (tens at
        worst, bounded by `split_address`), less than the hop to a worker thread and back."""
        if self._search_ready:
            return self._geocode(address, limit)
        found = await asyncio.to_thread(self._geocode, address, limit)
        await asyncio.to_thread(lambda: _gazetteer().prepare_search())
        self._search_ready = True
        return found

    async def reverse(self, lat: float, lon: float) -> Place | None:
        return await asyncio.to_thread(lambda: reverse_to_place(_gazetteer().reverse(lat, lon)))

    async def input_tips(self, query: str, city: str | None = None, limit: int = 10) -> list[Place]:
        return await asyncio.to_thread(self._input_tips, query, city, limit)

    async def keyword_search(
        self,
        query: str,
        city: str | None = None,
        near: tuple[float, float] | None = None,
        limit: int = 10,
    ) -> list[Place]:
        return await asyncio.to_thread(self._keyword_search, query, city, near, limit)

    async def detail(self, poi_id: str) -> Place | None:
        return await asyncio.to_thread(self._detail, poi_id)

    def _geocode(self, address: str, limit: int) -> list[Place]:
        found = list(_gazetteer().search(address, limit=limit))
        if not found:
            found = self.store.search(address, limit=limit)
        return self.recent.remember(found)

    def _city_centre(self, city: str | None) -> tuple[float, float] | None:
        if not city:
            return None
        hits = _gazetteer().search(city, limit=1)
        return (hits[0].lat, hits[0].lon) if hits else None

    def _input_tips(self, query: str, city: str | None, limit: int) -> list[Place]:
        near = self._city_centre(city)
        gaz = _gazetteer()
        pool = self.store.search(query, limit=limit * 3, prefix=True)
        pool += list(gaz.search(query, limit=limit * 3)) + list(gaz.suggest(query, limit=limit * 3))
        return self.recent.remember(_rank(pool, near, limit, CITY_RADIUS_KM if near else None))

    def _keyword_search(
        self, query: str, city: str | None, near: tuple[float, float] | None, limit: int
    ) -> list[Place]:
        centre = near or self._city_centre(city)
        pool = self.store.search(query, limit=limit * 5) + list(_gazetteer().search(query, limit=limit * 3))
        radius = CITY_RADIUS_KM if (city and not near) else None
        return self.recent.remember(_rank(pool, centre, limit, radius))

    def _detail(self, poi_id: str) -> Place | None:
        place = self.store.get(poi_id) or self.recent.get(poi_id) or _gazetteer().get(poi_id)
        if place is None:
            return None
        rp = _gazetteer().reverse(place.lat, place.lon)
        nearby = _gazetteer().nearest(place.lat, place.lon, k=4)
        extra = dict(place.extra)
        extra["located_in"] = reverse_to_place(rp).address
        extra["nearby_places"] = [n.name for n in nearby if n.id != place.id][:3]
        return place.model_copy(
            update={"extra": extra, "country_code": place.country_code or rp.country_code}
        )


def _rank(
    pool: list[Place], centre: tuple[float, float] | None, limit: int, radius_km: float | None
) -> list[Place]:
    """De-duplicate; with a centre, keep places within the radius and sort by distance."""
    unique = list({p.id: p for p in pool}.values())
    if centre is None or not unique:
        return unique[:limit]
    d = haversine_km(
        centre[0], centre[1], np.array([p.lat for p in unique]), np.array([p.lon for p in unique])
    )
    order = np.argsort(d, kind="stable")
    out: list[Place] = []
    for i in order:
        if radius_km is not None and d[i] > radius_km:
            continue
        extra = {**unique[i].extra, "distance_km": round(float(d[i]), 2)}
        out.append(unique[i].model_copy(update={"extra": extra}))
    return out[:limit]
