"""Crop-and-zoom: map the model's box back to original pixels, crop, enlarge within limits.

Two box conventions (a per-model setting): ``absolute`` pixels of the resized image the model
saw (GeoVista, Qwen2.5-VL) and ``relative1000`` (0–1000 on both axes, Thinking with Map,
Qwen3-VL). Every invalid box is a `ToolError` whose message tells the model what to fix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image

from geosleuth.tools.base import BBoxConvention, ToolError
from geosleuth.tools.config import ZoomSettings


@dataclass(frozen=True)
class PixelBox:
    """A box in original-image pixels (x2, y2 exclusive)."""

    x1: int
    y1: int
    x2: int
    y2: int

    @property
    def width(self) -> int:
        return self.x2 - self.x1

    @property
    def height(self) -> int:
        return self.y2 - self.y1


def model_frame(
    width: int,
    height: int,
    convention: BBoxConvention,
    model_scale: float,
    model_size: tuple[int, int] | None = None,
) -> tuple[float, float]:
    """Width and height of the coordinate frame the model's boxes live in.

    ``model_size`` is the exact frame when known: processors that snap sides to a patch
    multiple (Qwen-VL: 28 px) scale the two axes slightly differently.
    """
    if convention == "relative1000":
        return 1000.0, 1000.0
    if model_size is not None:
        return float(model_size[0]), float(model_size[1])
    return width * model_scale, height * model_scale


def to_original_box(
    bbox: Sequence[float],
    size: tuple[int, int],
    convention: BBoxConvention = "absolute",
    model_scale: float = 1.0,
    min_side: int = 28,
    arg: str = "bbox_2d",
    model_size: tuple[int, int] | None = None,
) -> tuple[PixelBox, list[str]]:
    """Validate a model box and return it in original pixels, plus notes on adjustments made.

    ``arg`` is the argument's name in the calling tool, so error messages name what the model sent.
    """
    if not isinstance(bbox, list | tuple) or len(bbox) != 4:
        n = len(bbox) if isinstance(bbox, list | tuple) else "a non-list"
        raise ToolError(f"{arg} must be a list of 4 numbers [x1, y1, x2, y2], got {n} values")
    try:
        x1, y1, x2, y2 = (float(v) for v in bbox)
    except (TypeError, ValueError):
        raise ToolError(f"{arg} must contain only numbers, got {list(bbox)!r}") from None
    if not all(math.isfinite(v) for v in (x1, y1, x2, y2)):
        raise ToolError(f"{arg} contains a non-finite number (NaN or infinity)")
    if model_scale <= 0 or (model_size is not None and min(model_size) <= 0):
        raise ToolError("the image scale for this model is invalid; cannot map the box")
    width, height = size
    fw, fh = model_frame(width, height, convention, model_scale, model_size)
    frame = f"{fw:.0f}x{fh:.0f}" if convention == "absolute" else "0-1000 relative"
    if x2 == x1 or y2 == y1:
        raise ToolError(f"{arg} {list(bbox)} has zero area: x2 must be > x1 and y2 must be > y1")
    if x2 < x1 or y2 < y1:
        raise ToolError(
            f"{arg} {list(bbox)} is inverted: use [x1, y1, x2, y2] with the top-left corner first"
        )
    tol = 1.0  # rounding of the resized size
    if x1 < -tol or y1 < -tol or x2 > fw + tol or y2 > fh + tol:
        raise ToolError(
            f"{arg} {list(bbox)} is outside the image: coordinates must lie within "
            f"[0, 0, {fw:.0f}, {fh:.0f}] ({frame} frame)"
        )
    sx, sy = width / fw, height / fh
    ox1, oy1 = max(0, math.floor(x1 * sx)), max(0, math.floor(y1 * sy))
    ox2, oy2 = min(width, math.ceil(x2 * sx)), min(height, math.ceil(y2 * sy))
    notes: list[str] = []
    ox1, ox2 = _widen(ox1, ox2, min_side, width, "width", notes)
    oy1, oy2 = _widen(oy1, oy2, min_side, height, "height", notes)
    return PixelBox(ox1, oy1, ox2, oy2), notes


def _widen(a: int, b: int, min_side: int, limit: int, axis: str, notes: list[str]) -> tuple[int, int]:
    """Grow a side shorter than the model's minimum patch around its centre, inside the image."""
    need = min(min_side, limit)
    if b - a >= need:
        return a, b
    centre = (a + b) / 2
    a = int(round(centre - need / 2))
    a = max(0, min(a, limit - need))
    notes.append(f"crop {axis} was below {min_side} px and was widened to {need} px around its centre")
    return a, a + need


def zoom_image(image: Image.Image, box: PixelBox, settings: ZoomSettings) -> Image.Image:
    """Crop and enlarge toward ``target_long_side``, never beyond ``max_upscale`` or the pixel budget."""
    crop = image.crop((box.x1, box.y1, box.x2, box.y2))
    if crop.mode not in {"RGB", "L"}:
        crop = crop.convert("RGB")
    long_side = max(box.width, box.height)
    scale = min(settings.max_upscale, settings.target_long_side / long_side)
    scale = max(scale, 1.0)
    pixel_cap = math.sqrt(settings.max_output_pixels / (box.width * box.height))
    scale = min(scale, max(pixel_cap, 1e-9))
    new_size = (max(1, round(box.width * scale)), max(1, round(box.height * scale)))
    if new_size == crop.size:
        return crop
    return crop.resize(new_size, Image.Resampling.LANCZOS)
