"""Maps stitched from XYZ tiles: OpenStreetMap (road map) and Esri World Imagery (satellite).

OSM's tile usage policy asks for an identifying User-Agent and light use; both base URLs
are configurable (``services.osm.base_url``, ``services.esri.base_url``) for mirrors and tests.
"""

from __future__ import annotations

import asyncio
import math

from PIL import Image, ImageDraw

from geosleuth.tools.config import ToolSettings
from geosleuth.tools.providers.base import MapImage, MapKind, client_for
from geosleuth.tools.providers.google import decode_image
from geosleuth.tools.providers.mapdraw import draw_caption, draw_marker, draw_scale_bar, project

OSM_URL = "https://tile.openstreetmap.org"
MAX_PARALLEL_TILES = 2  # OSM's tile policy: few parallel connections
ESRI_URL = "https://server.arcgisonline.com/ArcGIS/rest/services/World_Imagery/MapServer"


def tile_range(cx: float, cy: float, width: int, height: int, zoom: int) -> tuple[range, range]:
    """Tile columns and rows covering a ``width`` × ``height`` window centred on pixel (cx, cy)."""
    n = 2**zoom
    x0, x1 = math.floor((cx - width / 2) / 256), math.floor((cx + width / 2) / 256)
    y0, y1 = max(0, math.floor((cy - height / 2) / 256)), min(n - 1, math.floor((cy + height / 2) / 256))
    return range(x0, x1 + 1), range(y0, y1 + 1)


class TileMapProvider:
    """Fetch the tiles around a point, stitch, crop to the map size, mark the point."""

    def __init__(self, settings: ToolSettings, service: str) -> None:
        if service not in {"osm", "esri"}:
            raise ValueError(f"unknown tile service {service!r}")
        self.name = service
        default = OSM_URL if service == "osm" else ESRI_URL
        self.base_url = (settings.base_url(service, default) or default).rstrip("/")
        self.client = client_for(settings, service, default_rps=5.0)
        self.width, self.height = settings.maps.width, settings.maps.height
        self.max_zoom = 19

    @property
    def identity(self) -> str:
        return f"{self.name}@{self.base_url}"

    def tile_url(self, x: int, y: int, z: int) -> str:
        if self.name == "esri":
            return f"{self.base_url}/tile/{int(z)}/{int(y)}/{int(x)}"
        return f"{self.base_url}/{int(z)}/{int(x)}/{int(y)}.png"

    async def render(self, lat: float, lon: float, zoom: int, kind: MapKind) -> MapImage:
        zoom = max(0, min(zoom, self.max_zoom))
        cx, cy = project(lat, lon, zoom)
        cols, rows = tile_range(cx, cy, self.width, self.height, zoom)
        n = 2**zoom
        jobs = [(tx, ty) for ty in rows for tx in cols]
        slots = asyncio.Semaphore(MAX_PARALLEL_TILES)

        async def fetch(tx: int, ty: int) -> bytes:
            async with slots:
                return await self.client.get_bytes(self.tile_url(tx % n, ty, zoom))

        contents = await asyncio.gather(*(fetch(tx, ty) for tx, ty in jobs))
        mosaic = Image.new("RGB", (len(cols) * 256, len(rows) * 256), (200, 200, 200))
        for (tx, ty), content in zip(jobs, contents, strict=True):
            tile = decode_image(content, self.name)
            mosaic.paste(tile, ((tx - cols.start) * 256, (ty - rows.start) * 256))
        left = round(cx - self.width / 2 - cols.start * 256)
        top = round(cy - self.height / 2 - rows.start * 256)
        image = Image.new("RGB", (self.width, self.height), (200, 200, 200))
        image.paste(mosaic, (-left, -top))
        draw_marker(ImageDraw.Draw(image), self.width / 2, self.height / 2)
        draw_scale_bar(image, lat, zoom)
        attribution = (
            "© OpenStreetMap contributors" if self.name == "osm" else "Esri, Maxar, Earthstar Geographics"
        )
        draw_caption(image, [attribution])
        return MapImage(image=image, lat=lat, lon=lon, zoom=zoom, attribution=attribution)
