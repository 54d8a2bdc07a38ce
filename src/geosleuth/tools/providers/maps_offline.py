"""Offline map renderer: Natural Earth countries and gazetteer places around a point.

Web Mercator at the requested zoom: land filled on a sea background, coastlines and land
borders in different colours (a border is an outline with land on both sides), country
names at their Natural Earth label points (or inside the part of the country in view),
place labels (bigger places first, no overlaps, never over the marker, scale bar or
legend), a marker on the queried point, a scale bar and a legend with a colour key. Only
country borders exist offline (no admin-1 borders, no roads), and the legend says so; the
"satellite" variant is the same schematic render in terrain colours, since no imagery ships
with the package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from shapely.geometry import MultiPolygon, Point, Polygon, box

from geosleuth.core.records import Place
from geosleuth.tools.providers.base import MapImage, MapKind
from geosleuth.tools.providers.mapdraw import (
    _FONT_CANDIDATES,
    draw_marker,
    draw_scale_bar,
    font,
    project,
    unproject,
    world_px,
)

Colour = tuple[int, int, int]
Box = tuple[float, float, float, float]

STYLES: dict[str, dict[str, Colour]] = {
    "static": {
        "water": (170, 211, 223),
        "land": (242, 239, 233),
        "coast": (92, 140, 170),
        "border": (140, 90, 150),
        "text": (30, 30, 30),
        "country": (110, 80, 120),
    },
    "satellite": {
        "water": (24, 52, 84),
        "land": (92, 112, 72),
        "coast": (150, 195, 215),
        "border": (235, 220, 120),
        "text": (250, 250, 250),
        "country": (255, 240, 170),
    },
}
LEGEND = "Natural Earth country borders + GeoNames places; no admin-1 borders, lakes or roads"
MARKER_BOX = 15  # half-size of the area kept free of labels around the queried point
_NUDGES: tuple[tuple[int, int], ...] = tuple(
    sorted(
        (
            (dx, dy)
            for dx in (0, -25, 25, -50, 50, -100, 100)
            for dy in (0, -20, 20, -40, 40, -70, 70, -120, 120)
        ),
        key=lambda d: abs(d[0]) + abs(d[1]),
    )
)
"""Offsets (px) from a country's pole of inaccessibility to try for its name, nearest first."""
_QUALIFIER = re.compile(r"\s*[(/]")
TILE_PX = 256
MAX_TILE_ZOOM = 12
"""Deeper tiles would show nothing new: the offline data has country borders and places only."""


def _gazetteer() -> Any:
    from geosleuth.gazetteer import get_gazetteer

    return get_gazetteer()


@lru_cache(maxsize=1)
def _country_shapes() -> dict[str, Any]:
    """Merged country geometries by ISO code, built once per process (merging costs seconds)."""
    import shapely

    shapes = _gazetteer().country_shapes()
    for geom in shapes.values():
        shapely.prepare(geom)
    return shapes


@lru_cache(maxsize=1)
def _country_labels() -> dict[str, tuple[str, float, float]]:
    """ISO code -> (name, lat, lon) of the gazetteer's country places (Natural Earth label points)."""
    return {
        cc: (name, lat, lon) for _, name, lat, lon, cc, *_ in _gazetteer().iter_rows(kind="country") if cc
    }


@lru_cache(maxsize=8)
def _bold(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """The bold face next to the regular font when there is one (DejaVu ships both)."""
    for candidate in _FONT_CANDIDATES:
        bold = Path(candidate.replace("Sans.ttf", "Sans-Bold.ttf"))
        if bold.is_file() and bold.name != Path(candidate).name:
            return ImageFont.truetype(str(bold), size)
    return font(size)


@dataclass(frozen=True)
class MapLabel:
    """A name drawn on the map and the box it occupies (pixels: left, top, right, bottom)."""

    text: str
    kind: str  # "country" or "place"
    box: Box


@dataclass
class _CountryView:
    """The part of one country inside the view: pixel rings and where its name could go."""

    code: str
    rings: list[list[tuple[float, float]]]
    holes: list[list[tuple[float, float]]]
    visible: Any  # clipped geometry in degrees
    area_px: float = 0.0
    shape_px: Any = None  # the part inside the image, in pixels


@dataclass
class _View:
    """Pixel frame of one render: origin in global Mercator pixels, size, zoom, wrap shifts."""

    ox: float
    oy: float
    zoom: int
    width: int
    height: int
    shifts: list[float]
    marked: bool = True  # a map tile has no queried point

    def marker_box(self) -> Box:
        """The area kept free of labels around the queried point (the image centre)."""
        if not self.marked:
            return (-1e9, -1e9, -1e9, -1e9)
        mx, my = self.width / 2, self.height / 2
        return (mx - MARKER_BOX, my - MARKER_BOX, mx + MARKER_BOX, my + MARKER_BOX)

    def to_px(self, lat: float, lon: float, shift: float = 0.0) -> tuple[float, float]:
        x, y = project(lat, lon, self.zoom)
        return x - self.ox + shift, y - self.oy


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
        return self.draw_labelled(lat, lon, zoom, kind)[0]

    def draw_labelled(
        self, lat: float, lon: float, zoom: int, kind: MapKind = "static"
    ) -> tuple[Image.Image, list[MapLabel]]:
        """The map and the labels placed on it (country names first, then places)."""
        style = STYLES["satellite" if kind == "satellite" else "static"]
        cx, cy = project(lat, lon, zoom)
        view = _View(
            cx - self.width / 2,
            cy - self.height / 2,
            zoom,
            self.width,
            self.height,
            self._wrap_shifts(cx, zoom),
        )
        extent = self._extent(view.ox, view.oy, zoom)
        countries = _visible_countries(view, extent)
        image = _paint_land(view, countries, style)
        draw = ImageDraw.Draw(image)
        title = "Offline satellite substitute" if kind == "satellite" else "Offline map"
        legend = _draw_legend(draw, [f"{title} · zoom {zoom} · centre {lat:.4f}, {lon:.4f}", LEGEND], style)
        scale_bar = (0.0, self.height - 44.0, 170.0, float(self.height))
        taken: list[Box] = [legend, view.marker_box(), scale_bar]
        labels = _label_countries(draw, view, countries, style, taken)
        labels += _draw_places(draw, view, extent, style, taken)
        draw_marker(draw, self.width / 2, self.height / 2)
        draw_scale_bar(image, lat, zoom)
        return image, labels

    def tile(self, zoom: int, x: int, y: int, kind: MapKind = "static") -> Image.Image:
        """One 256 px slippy-map tile (z/x/y, Web Mercator), for an interactive map over the same
        offline data: land, coasts, borders, a country's name on the tile holding its label point,
        and place names that fit inside the tile (labels are never cut at a tile edge)."""
        if not 0 <= zoom <= MAX_TILE_ZOOM:  # checked first: 2**99 is no range to print
            raise ValueError(f"no tile {zoom}/{x}/{y}: zoom must be 0–{MAX_TILE_ZOOM}")
        if not (0 <= x < 2**zoom and 0 <= y < 2**zoom):
            raise ValueError(f"no tile {zoom}/{x}/{y}: at zoom {zoom}, x and y must be 0–{2**zoom - 1}")
        style = STYLES["satellite" if kind == "satellite" else "static"]
        w = world_px(zoom)
        view = _View(
            x * TILE_PX, y * TILE_PX, zoom, TILE_PX, TILE_PX, [-w, 0.0, w] if zoom == 0 else [0.0], False
        )
        north, west = unproject(view.ox, view.oy, zoom)
        south, east = unproject(view.ox + TILE_PX, view.oy + TILE_PX, zoom)
        extent = (max(south, -90.0), west, min(north, 90.0), east)
        countries = _visible_countries(view, extent)
        image = _paint_land(view, countries, style)
        draw = ImageDraw.Draw(image)
        taken: list[Box] = []
        _label_countries(draw, view, countries, style, taken, label_point_only=True)
        _draw_places(draw, view, extent, style, taken)
        return image

    def _wrap_shifts(self, cx: float, zoom: int) -> list[float]:
        """Copies of the world to draw: one, unless the view is wide or crosses the antimeridian."""
        w = world_px(zoom)
        crosses = cx - self.width / 2 < 0 or cx + self.width / 2 > w
        return [-w, 0.0, w] if w < 2 * self.width or crosses else [0.0]

    def _extent(self, ox: float, oy: float, zoom: int) -> tuple[float, float, float, float]:
        north, west = unproject(ox, oy, zoom)
        south, east = unproject(ox + self.width, oy + self.height, zoom)
        if world_px(zoom) < 2 * self.width or west < -180 or east > 180:
            return max(south, -90.0), -180.0, min(north, 90.0), 180.0
        return south, west, north, east


def _visible_countries(view: _View, extent: tuple[float, float, float, float]) -> list[_CountryView]:
    """Countries clipped to the view (with a margin) and simplified to the pixel size."""
    south, west, north, east = extent
    pad = (north - south) * 0.1 + 0.5
    frame = box(west - pad, max(south - pad, -89.9), east + pad, min(north + pad, 89.9))
    degrees_per_px = 360.0 / world_px(view.zoom)
    out: list[_CountryView] = []
    for code, geom in _country_shapes().items():
        if not geom.intersects(frame):
            continue
        clipped = geom.intersection(frame).simplify(degrees_per_px * 0.7, preserve_topology=False)
        country = _CountryView(code, [], [], clipped)
        for poly in _polygons(clipped):
            for shift in view.shifts:
                ring = _ring_px(poly.exterior.coords, view, shift)
                if len(ring) >= 3:
                    country.rings.append(ring)
                for hole in poly.interiors:
                    hole_px = _ring_px(hole.coords, view, shift)
                    if len(hole_px) >= 3:
                        country.holes.append(hole_px)
        if country.rings:
            country.shape_px = _shape_px(country, view)
            country.area_px = float(country.shape_px.area)
            out.append(country)
    return out


def _paint_land(view: _View, countries: list[_CountryView], style: dict[str, Colour]) -> Image.Image:
    """Sea, land, then outlines: coast where an outline meets the sea, border where land is on both sides.

    Masks are drawn with a margin so that a coast just outside the image is still seen as one.
    """
    from scipy.ndimage import binary_closing, binary_erosion

    m = 8
    size = (view.width + 2 * m, view.height + 2 * m)
    land_img, line_img = Image.new("L", size, 0), Image.new("L", size, 0)
    land_draw, line_draw = ImageDraw.Draw(land_img), ImageDraw.Draw(line_img)
    width = 2 if view.zoom >= 5 else 1

    def moved(ring: list[tuple[float, float]]) -> list[tuple[float, float]]:
        return [(x + m, y + m) for x, y in ring]

    for country in countries:
        for ring in country.rings:
            land_draw.polygon(moved(ring), fill=255)
    for country in countries:
        for hole in country.holes:
            land_draw.polygon(moved(hole), fill=0)
        for ring in country.rings + country.holes:
            line_draw.line(moved(ring + [ring[0]]), fill=255, width=width)
    for country in countries:  # enclaves (Lesotho, San Marino) sit in a neighbour's hole
        if not country.holes:
            for ring in country.rings:
                land_draw.polygon(moved(ring), fill=255)
    land = np.asarray(land_img) > 0
    lines = np.asarray(line_img) > 0
    # neighbours simplified apart leave hairline gaps: close them so a border is not read as a coast
    solid = binary_closing(land | lines, iterations=1) | land
    inland = binary_erosion(solid, iterations=width + 1, border_value=1)
    pixels = np.empty((*land.shape, 3), dtype=np.uint8)
    pixels[:] = style["water"]
    pixels[solid] = style["land"]
    pixels[lines & ~inland] = style["coast"]
    pixels[lines & inland] = style["border"]
    return Image.fromarray(pixels[m:-m, m:-m], "RGB")


def _label_countries(
    draw: ImageDraw.ImageDraw,
    view: _View,
    countries: list[_CountryView],
    style: dict[str, Colour],
    taken: list[Box],
    label_point_only: bool = False,
) -> list[MapLabel]:
    """Country names, largest visible area first, where the name fits inside the country.

    ``label_point_only`` (map tiles): only at the Natural Earth label point, so that a country
    is named once across the tiles of a map, not on every tile it covers."""
    labels = _country_labels()
    size = 12 if view.zoom <= 2 else 14 if view.zoom <= 5 else 15
    f = _bold(size)
    shadow = _shadow(style["country"])
    placed: list[MapLabel] = []
    for country in sorted(countries, key=lambda c: -c.area_px):
        if country.code not in labels:
            continue
        name = labels[country.code][0].upper()
        tw = draw.textlength(name, font=f)
        if country.area_px < tw * size * 0.6:
            continue  # too little of the country in view for its name
        for x, y in _country_anchor(view, country, labels[country.code][1:], label_point_only):
            rect = (x - tw / 2 - 3, y - size / 2 - 3, x + tw / 2 + 3, y + size / 2 + 3)
            if not _inside(rect, view) or any(_overlap(rect, t) for t in taken):
                continue
            if country.shape_px.intersection(box(*rect)).area < 0.6 * (tw + 6) * (size + 6):
                continue  # the name would mostly lie outside the country
            taken.append(rect)
            placed.append(MapLabel(name, "country", rect))
            draw.text(
                (x, y), name, fill=style["country"], font=f, anchor="mm", stroke_width=2, stroke_fill=shadow
            )
            break
    return placed


def _country_anchor(
    view: _View, country: _CountryView, label_point: tuple[float, float], label_point_only: bool = False
) -> list[tuple[float, float]]:
    """Candidate name positions: the Natural Earth label point when it is in view and inside
    the country, then points deep inside the part in view, nudged up and down."""
    from shapely.ops import polylabel

    lat, lon = label_point
    out: list[tuple[float, float]] = []
    for shift in view.shifts:
        x, y = view.to_px(lat, lon, shift)
        if 0 <= x < view.width and 0 <= y < view.height and country.visible.contains(Point(lon, lat)):
            out.append((x, y))
    if label_point_only:
        return out
    in_image = country.visible.intersection(_image_box(view))
    polys = _polygons(in_image)
    if not polys:
        return out
    biggest = max(polys, key=lambda p: p.area)
    centre = polylabel(biggest, tolerance=max(360.0 / world_px(view.zoom) * 2, 1e-6))
    for shift in view.shifts:
        x, y = view.to_px(centre.y, centre.x, shift)
        for dx, dy in _NUDGES:
            if 0 <= x + dx < view.width and 0 <= y + dy < view.height:
                plat, plon = unproject(x + dx - shift + view.ox, y + dy + view.oy, view.zoom)
                if biggest.contains(Point(plon, plat)):
                    out.append((x + dx, y + dy))
    return out


def _image_box(view: _View) -> Any:
    """The image's own extent in degrees (the map frame without the drawing margin)."""
    north, west = unproject(view.ox, view.oy, view.zoom)
    south, east = unproject(view.ox + view.width, view.oy + view.height, view.zoom)
    if len(view.shifts) > 1:
        return box(-180.0, max(south, -89.9), 180.0, min(north, 89.9))
    return box(west, south, east, north)


def _draw_places(
    draw: ImageDraw.ImageDraw,
    view: _View,
    extent: tuple[float, float, float, float],
    style: dict[str, Colour],
    taken: list[Box],
) -> list[MapLabel]:
    """City dots and names, most populous first; districts named after a labelled city are skipped."""
    south, west, north, east = extent
    places: list[Place] = list(
        _gazetteer().places_in_bbox(
            south, west, north, east, limit=400, min_population=_min_population(view.zoom)
        )
    )
    shadow = _shadow(style["text"])
    shown: set[str] = set()
    placed: list[MapLabel] = []
    for rank, p in enumerate(places[:150]):
        base = _QUALIFIER.split(p.name, maxsplit=1)[0]
        if base in shown or (base != p.name and any(name in base for name in shown)):
            continue  # "Zürich (Kreis 9)", "Stadt Winterthur (Kreis 1)" next to "Zürich", "Winterthur"
        f = font(12 if p.population > 1_000_000 else 11)
        r = 4 if p.population > 1_000_000 else 3 if p.population > 100_000 else 2
        tw = draw.textlength(p.name, font=f)
        for shift in view.shifts:
            x, y = view.to_px(p.lat, p.lon, shift)
            spot = _label_spot(x, y, r, tw, view, taken, anywhere=rank < 15)
            if spot is None:
                continue
            taken.append(spot)
            placed.append(MapLabel(p.name, "place", spot))
            shown.add(base)
            draw.ellipse((x - r, y - r, x + r, y + r), fill=style["text"], outline=shadow)
            draw.text(
                (spot[0] + 1, spot[1] + 1),
                p.name,
                fill=style["text"],
                font=f,
                stroke_width=2,
                stroke_fill=shadow,
            )
    return placed


def _label_spot(
    x: float, y: float, r: int, tw: float, view: _View, taken: list[Box], anywhere: bool
) -> Box | None:
    """Where a place name fits: right of its dot, then left; ``anywhere`` (big places, and a
    place under the marker) also tries above, below and a little further out. None: no room."""
    dot = (x - r - 1, y - r - 1, x + r + 1, y + r + 1)
    marker = view.marker_box()
    if not _inside(dot, view) or any(_overlap(dot, t) for t in taken if t != marker):
        return None
    anywhere = anywhere or _overlap(dot, marker)
    for gap in (2, 14) if anywhere else (2,):
        spots = [
            (x + r + gap, y - 9, x + r + gap + 4 + tw, y + 9),
            (x - r - gap - 4 - tw, y - 9, x - r - gap, y + 9),
        ]
        if anywhere:
            spots += [
                (x - tw / 2 - 2, y - r - gap - 18, x + tw / 2 + 2, y - r - gap),
                (x - tw / 2 - 2, y + r + gap, x + tw / 2 + 2, y + r + gap + 18),
            ]
        for spot in spots:
            if _inside(spot, view) and not any(_overlap(spot, t) for t in taken):
                return spot
    return None


def _draw_legend(draw: ImageDraw.ImageDraw, lines: list[str], style: dict[str, Colour]) -> Box:
    """Title, sources and a colour key (land border, coastline, place, queried point), top left."""
    f = font(11)
    key = [("land border", style["border"]), ("coastline", style["coast"])]
    key_width = sum(24 + draw.textlength(label, font=f) + 12 for label, _ in key) + 110
    width = max(max(draw.textlength(line, font=f) for line in lines), key_width) + 10
    height = 14 * (len(lines) + 1) + 8
    draw.rectangle((0, 0, width, height), fill=(255, 255, 255), outline=(120, 120, 120))
    for i, line in enumerate(lines):
        draw.text((5, 3 + 14 * i), line, fill=(40, 40, 40), font=f)
    x, y = 5.0, 3 + 14 * len(lines) + 7
    for label, colour in key:
        draw.rectangle(
            (x, y - 4, x + 18, y + 4), fill=style["land"] if colour == style["border"] else style["water"]
        )
        draw.line((x, y, x + 18, y), fill=colour, width=2)
        draw.text((x + 22, y - 7), label, fill=(40, 40, 40), font=f)
        x += 24 + draw.textlength(label, font=f) + 12
    draw.ellipse((x, y - 3, x + 6, y + 3), fill=style["text"], outline=_shadow(style["text"]))
    draw.text((x + 10, y - 7), "place", fill=(40, 40, 40), font=f)
    x += 10 + draw.textlength("place", font=f) + 12
    draw.ellipse((x, y - 5, x + 10, y + 5), fill=(220, 30, 30), outline="white")
    draw.text((x + 14, y - 7), "point", fill=(40, 40, 40), font=f)
    return (0, 0, width, height)


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


def _shadow(text: Colour) -> Colour:
    """A halo that contrasts with the text colour."""
    return (0, 0, 0) if text[0] > 128 else (255, 255, 255)


def _polygons(geom: Any) -> list[Polygon]:
    if isinstance(geom, Polygon):
        return [geom] if not geom.is_empty else []
    if isinstance(geom, MultiPolygon):
        return list(geom.geoms)
    return [g for g in getattr(geom, "geoms", []) if isinstance(g, Polygon)]


def _ring_px(coords: Any, view: _View, shift: float) -> list[tuple[float, float]]:
    return [view.to_px(lat, lon, shift) for lon, lat, *_ in coords]


def _shape_px(country: _CountryView, view: _View) -> Any:
    """The country's rings minus its holes, in pixels, clipped to the image."""
    import shapely

    shell = shapely.union_all([Polygon(r).buffer(0) for r in country.rings])
    if country.holes:
        shell = shell.difference(shapely.union_all([Polygon(h).buffer(0) for h in country.holes]))
    return shell.intersection(box(0, 0, view.width, view.height))


def _inside(rect: Box, view: _View) -> bool:
    return rect[0] >= 0 and rect[1] >= 0 and rect[2] <= view.width and rect[3] <= view.height


def _overlap(a: Box, b: Box) -> bool:
    return not (a[2] < b[0] or b[2] < a[0] or a[3] < b[1] or b[3] < a[1])
