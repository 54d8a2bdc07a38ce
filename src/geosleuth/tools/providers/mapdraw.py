"""Web Mercator arithmetic and drawing helpers shared by the offline renderer and tile stitching."""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

TILE = 256
MAX_LAT = 85.05112878
_FONT_CANDIDATES = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/Library/Fonts/Arial Unicode.ttf",
    "C:/Windows/Fonts/arial.ttf",
)


def world_px(zoom: int) -> float:
    return TILE * (2**zoom)


def project(lat: float, lon: float, zoom: int) -> tuple[float, float]:
    """WGS-84 → global Web Mercator pixel at ``zoom``."""
    lat = max(-MAX_LAT, min(MAX_LAT, lat))
    size = world_px(zoom)
    x = (lon + 180.0) / 360.0 * size
    s = math.sin(math.radians(lat))
    y = (0.5 - math.log((1 + s) / (1 - s)) / (4 * math.pi)) * size
    return x, y


def unproject(x: float, y: float, zoom: int) -> tuple[float, float]:
    size = world_px(zoom)
    lon = x / size * 360.0 - 180.0
    n = math.pi - 2 * math.pi * y / size
    lat = math.degrees(math.atan(math.sinh(n)))
    return lat, lon


def metres_per_pixel(lat: float, zoom: int) -> float:
    return 156543.03392 * math.cos(math.radians(lat)) / (2**zoom)


@lru_cache(maxsize=16)
def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    for candidate in _FONT_CANDIDATES:
        if Path(candidate).is_file():
            return ImageFont.truetype(candidate, size)
    return ImageFont.load_default(size=size)


def draw_marker(draw: ImageDraw.ImageDraw, x: float, y: float) -> None:
    """A red pin with a white halo at the queried point."""
    draw.ellipse((x - 9, y - 9, x + 9, y + 9), fill="white")
    draw.ellipse((x - 6, y - 6, x + 6, y + 6), fill=(220, 30, 30))
    draw.line((x - 14, y, x - 9, y), fill=(220, 30, 30), width=2)
    draw.line((x + 9, y, x + 14, y), fill=(220, 30, 30), width=2)
    draw.line((x, y - 14, x, y - 9), fill=(220, 30, 30), width=2)
    draw.line((x, y + 9, x, y + 14), fill=(220, 30, 30), width=2)


def nice_length(max_metres: float) -> float:
    """Largest 1/2/5 × 10^k not above ``max_metres``."""
    exp = math.floor(math.log10(max_metres))
    for m in (5, 2, 1):
        if m * 10**exp <= max_metres:
            return m * 10**exp
    return 10**exp


def draw_scale_bar(image: Image.Image, lat: float, zoom: int, max_px: int = 140) -> None:
    draw = ImageDraw.Draw(image)
    mpp = metres_per_pixel(lat, zoom)
    metres = nice_length(max_px * mpp)
    px = metres / mpp
    label = f"{metres / 1000:g} km" if metres >= 1000 else f"{metres:g} m"
    x0, y0 = 12, image.height - 18
    draw.rectangle((x0 - 4, y0 - 18, x0 + px + 4, y0 + 8), fill=(255, 255, 255, 200))
    draw.line((x0, y0, x0 + px, y0), fill="black", width=3)
    draw.line((x0, y0 - 5, x0, y0 + 3), fill="black", width=2)
    draw.line((x0 + px, y0 - 5, x0 + px, y0 + 3), fill="black", width=2)
    draw.text((x0, y0 - 17), label, fill="black", font=font(12))


def draw_caption(image: Image.Image, lines: list[str]) -> None:
    """Legend / attribution box in the top-left corner."""
    draw = ImageDraw.Draw(image)
    f = font(11)
    height = 14 * len(lines) + 6
    width = max(int(draw.textlength(line, font=f)) for line in lines) + 10
    draw.rectangle((0, 0, width, height), fill=(255, 255, 255))
    draw.rectangle((0, 0, width, height), outline=(120, 120, 120))
    for i, line in enumerate(lines):
        draw.text((5, 3 + 14 * i), line, fill=(40, 40, 40), font=f)
