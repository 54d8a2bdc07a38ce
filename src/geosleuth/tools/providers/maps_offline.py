"""Offline map renderer: Natural Earth country borders and gazetteer places around a point.

Web Mercator at the requested zoom, with labels (bigger places first, no overlaps), a
marker on the queried point, a scale bar and a legend. Only country borders exist offline
(no admin-1 borders, no roads), and the legend says so; the "satellite" variant is the
same schematic render in terrain colours, since no imagery ships with the package.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from PIL import Image, ImageDraw
from shapely.geometry import MultiPolygon, Polygon, box

from geosleuth.core.records import Place
from geosleuth.tools.providers.base import MapImage, MapKind
from geosleuth.tools.providers.mapdraw import (
    draw_caption,
    draw_marker,
    draw_scale_bar,
    font,
    project,
    unproject,
    world_px,
)

STYLES: dict[str, dict[str, tuple[int, int, int]]] = {
    "static": {
        "water": (170, 211, 223),
        "land": (242, 239, 233),
        "border": (140, 90, 150),
        "text": (30, 30, 30),
    },
    "satellite": {
        "water": (24, 52, 84),
        "land": (92, 112, 72),
        "border": (235, 220, 120),
        "text": (250, 250, 250),
    },
}
LEGEND = "Natural Earth country borders + GeoNames places; no admin-1 borders, no roads"


def _gazetteer() -> Any:
    from geosleuth.gazetteer import get_gazetteer

    return get_gazetteer()


@lru_cache(maxsize=1)
def _country_shapes() -> dict[str, Any]:
    """Merged country geometries, built once per process (merging costs seconds)."""
    import shapely

    shapes = _gazetteer().country_shapes()
    for geom in shapes.values():
        shapely.prepare(geom)
    return shapes


class OfflineMapProvider:
    name = "offline"

    def __init__(self, width: int = 640, height: int = 640) -> None:
        self.width, self.height = width, height

    @property
    def identity(self) -> str:
        return f"offline-map:{self.width}x{self.height}"

    async def render(self, lat: float, lon: float, zoom: int, kind: MapKind) -> MapImage:
        import asyncio

        image = await asyncio.to_thread(self.draw, lat, lon, zoom, kind)
        note = "Schematic render: no satellite imagery is available offline." if kind == "satellite" else ""
        return MapImage(
            image=image, lat=lat, lon=lon, zoom=zoom, attribution="Natural Earth, GeoNames", note=note
        )

    def draw(self, lat: float, lon: float, zoom: int, kind: MapKind = "static") -> Image.Image:
        style = STYLES["satellite" if kind == "satellite" else "static"]
        image = Image.new("RGB", (self.width, self.height), style["water"])
        cx, cy = project(lat, lon, zoom)
        ox, oy = cx - self.width / 2, cy - self.height / 2
        shifts = self._wrap_shifts(zoom)
        south, west, north, east = self._extent(ox, oy, zoom)
        self._draw_countries(image, ox, oy, zoom, shifts, style, (south, west, north, east))
        self._draw_places(image, ox, oy, zoom, shifts, style, (south, west, north, east))
        draw_marker(ImageDraw.Draw(image), self.width / 2, self.height / 2)
        draw_scale_bar(image, lat, zoom)
        title = "Offline satellite substitute" if kind == "satellite" else "Offline map"
        draw_caption(image, [f"{title} · zoom {zoom} · centre {lat:.4f}, {lon:.4f}", LEGEND])
        return image

    def _wrap_shifts(self, zoom: int) -> list[float]:
        w = world_px(zoom)
        return [0.0] if w >= 2 * self.width else [-w, 0.0, w]

    def _extent(self, ox: float, oy: float, zoom: int) -> tuple[float, float, float, float]:
        north, west = unproject(ox, oy, zoom)
        south, east = unproject(ox + self.width, oy + self.height, zoom)
        if world_px(zoom) < 2 * self.width or west < -180 or east > 180:
            return max(south, -90.0), -180.0, min(north, 90.0), 180.0
        return south, west, north, east

    def _draw_countries(
        self,
        image: Image.Image,
        ox: float,
        oy: float,
        zoom: int,
        shifts: list[float],
        style: dict[str, tuple[int, int, int]],
        extent: tuple[float, float, float, float],
    ) -> None:
        south, west, north, east = extent
        pad = (north - south) * 0.1 + 0.5
        view = box(west - pad, max(south - pad, -89.9), east + pad, min(north + pad, 89.9))
        degrees_per_px = 360.0 / world_px(zoom)
        draw = ImageDraw.Draw(image)
        outlines: list[list[tuple[float, float]]] = []
        for geom in _country_shapes().values():
            if not geom.intersects(view):
                continue
            clipped = geom.intersection(view).simplify(degrees_per_px * 0.7, preserve_topology=False)
            for poly in _polygons(clipped):
                for shift in shifts:
                    ring = _ring_px(poly.exterior.coords, ox - shift, oy, zoom)
                    if len(ring) >= 3:
                        draw.polygon(ring, fill=style["land"])
                        outlines.append(ring)
                    for hole in poly.interiors:
                        hole_px = _ring_px(hole.coords, ox - shift, oy, zoom)
                        if len(hole_px) >= 3:
                            draw.polygon(hole_px, fill=style["water"])
        width = 2 if zoom >= 5 else 1
        for ring in outlines:
            draw.line(ring + [ring[0]], fill=style["border"], width=width)

    def _draw_places(
        self,
        image: Image.Image,
        ox: float,
        oy: float,
        zoom: int,
        shifts: list[float],
        style: dict[str, tuple[int, int, int]],
        extent: tuple[float, float, float, float],
    ) -> None:
        south, west, north, east = extent
        min_pop = _min_population(zoom)
        places: list[Place] = list(
            _gazetteer().places_in_bbox(south, west, north, east, limit=400, min_population=min_pop)
        )
        places.sort(key=lambda p: (p.kind != "country", -p.population))
        draw = ImageDraw.Draw(image)
        taken: list[tuple[float, float, float, float]] = [(0, 0, 360, 34)]  # legend box
        shadow = (0, 0, 0) if style["text"][0] > 128 else (255, 255, 255)
        for p in places[:150]:
            big = p.kind in {"country", "admin1"}
            f = font(14 if p.kind == "country" else 12 if big or p.population > 1_000_000 else 11)
            for shift in shifts:
                px, py = project(p.lat, p.lon, zoom)
                x, y = px - ox + shift, py - oy
                if not (0 <= x < image.width and 0 <= y < image.height):
                    continue
                label = p.name.upper() if p.kind == "country" else p.name
                tw = draw.textlength(label, font=f)
                rect = (x + 5, y - 8, x + 7 + tw, y + 8)
                if any(_overlap(rect, t) for t in taken):
                    continue
                taken.append(rect)
                if p.kind not in {"country", "admin1"}:
                    r = 4 if p.population > 1_000_000 else 3 if p.population > 100_000 else 2
                    draw.ellipse((x - r, y - r, x + r, y + r), fill=style["text"], outline=shadow)
                draw.text(
                    (x + 6, y - 8), label, fill=style["text"], font=f, stroke_width=2, stroke_fill=shadow
                )


def _min_population(zoom: int) -> int:
    """Fewer, larger places when zoomed out."""
    if zoom <= 3:
        return 2_000_000
    if zoom <= 5:
        return 300_000
    if zoom <= 7:
        return 50_000
    if zoom <= 9:
        return 5_000
    return 0


def _polygons(geom: Any) -> list[Polygon]:
    if isinstance(geom, Polygon):
        return [geom] if not geom.is_empty else []
    if isinstance(geom, MultiPolygon):
        return list(geom.geoms)
    return [g for g in getattr(geom, "geoms", []) if isinstance(g, Polygon)]


def _ring_px(coords: Any, ox: float, oy: float, zoom: int) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for lon, lat, *_ in coords:
        x, y = project(lat, lon, zoom)
        out.append((x - ox, y - oy))
    return out


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return not (a[2] < b[0] or b[2] < a[0] or a[3] < b[1] or b[3] < a[1])
