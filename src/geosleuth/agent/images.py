"""Loading query images safely and preparing them for a VLM request.

Every way an input file can be bad (missing, empty, truncated, a decompression bomb, not an
image) becomes an `ImageInputError` with a message a user can act on; the CLI and the
evaluation runner record it per image instead of crashing.
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from geosleuth.bounds.imageio import DEFAULT_MAX_PIXELS, open_image, reducible
from geosleuth.bounds.imageio import ImageInputError as ImageInputError

MAX_INPUT_PIXELS = DEFAULT_MAX_PIXELS
"""Default decode limit (``GEOSLEUTH_MAX_IMAGE_PIXELS``); see `geosleuth.bounds.imageio`."""

DEFAULT_PIXEL_BUDGET = 2_000_000

_PNG_MODES = frozenset({"1", "L", "LA", "I;16", "P", "RGB", "RGBA"})
"""Modes Pillow writes as PNG; others (CMYK JPEGs, float TIFFs, …) are converted first."""


def load_image(path: str | Path, max_pixels: int | None = None) -> Image.Image:
    """Open, size-check and decode a query image within the pixel limit (EXIF orientation
    applied), or raise `ImageInputError` saying why not (see `geosleuth.bounds.imageio.open_image`)."""
    return open_image(path, max_pixels)


@dataclass
class PreparedImage:
    """An image as sent to the model: the (downscaled) pixels, its data URL and the scale used."""

    image: Image.Image
    data_url: str
    scale: float  # sent size / original size (1.0 when not downscaled)
    original_size: tuple[int, int]


def fit_to_budget(img: Image.Image, pixel_budget: int) -> tuple[Image.Image, float]:
    """Downscale so that width × height ≤ budget, keeping the aspect ratio; return the scale.
    A palette, 1-bit or 16-bit grey image is first made one that averages correctly."""
    w, h = img.size
    if pixel_budget <= 0 or w * h <= pixel_budget:
        return img, 1.0
    img = reducible(img)
    scale = math.sqrt(pixel_budget / (w * h))
    nw, nh = max(1, int(w * scale)), max(1, int(h * scale))
    return img.resize((nw, nh), Image.Resampling.LANCZOS), nw / w


def encode_data_url(img: Image.Image, fmt: str = "JPEG", quality: int = 90) -> str:
    """Base64 data URL; deterministic for the same pixels so servers can reuse prefix caches."""
    buf = io.BytesIO()
    if fmt == "JPEG":
        if img.mode not in ("RGB", "L"):
            img = img.convert("RGB")
        img.save(buf, format="JPEG", quality=quality)
        mime = "image/jpeg"
    else:
        png_ready(img).save(buf, format="PNG")
        mime = "image/png"
    return f"data:{mime};base64,{base64.b64encode(buf.getvalue()).decode('ascii')}"


def png_ready(img: Image.Image) -> Image.Image:
    """The image in a mode PNG can store: a CMYK photo would otherwise fail to encode."""
    if img.mode in _PNG_MODES:
        return img
    return img.convert("RGBA" if "A" in img.getbands() else "RGB")


def smart_resize(
    size: tuple[int, int], factor: int = 28, min_pixels: int = 56 * 56, max_pixels: int = 14 * 14 * 4 * 1280
) -> tuple[int, int]:
    """(width, height) the Qwen-VL processors give an image: sides rounded to multiples of
    ``factor``, then scaled into [min_pixels, max_pixels] (the rule in their image processor).

    Boxes in absolute pixels live in this frame, whatever size the image was sent at. Written
    out rather than imported: qwen-vl-utils and transformers' ``image_processing_qwen2_vl``
    import torchvision, and transformers' PIL processor module took 11.6 s to import on the
    2-core test host, for six lines; tests/agent/test_agent_smart_resize.py checks that both
    give the same frame (the processors refuse aspect ratios above 200; this does not).
    """
    width, height = size
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return w_bar, h_bar


def prepare_image(
    img: Image.Image, pixel_budget: int = DEFAULT_PIXEL_BUDGET, fmt: str = "JPEG", resize_factor: int = 0
) -> PreparedImage:
    """Downscale to the pixel budget and encode once, so N samples share identical bytes.

    With ``resize_factor`` (28 for Qwen2.5-VL, 32 for Qwen3-VL) the image is sent already in
    the frame the server's processor would snap it to, so the size the prompt states is
    exactly the frame the model's boxes live in.
    """
    if resize_factor > 0:
        budget = pixel_budget if pixel_budget > 0 else img.width * img.height
        target = smart_resize(
            img.size, resize_factor, (2 * resize_factor) ** 2, max(budget, 4 * resize_factor**2)
        )
        small = img if target == img.size else img.resize(target, Image.Resampling.LANCZOS)
        return PreparedImage(small, encode_data_url(small, fmt), target[0] / img.width, img.size)
    small, scale = fit_to_budget(img, pixel_budget)
    return PreparedImage(small, encode_data_url(small, fmt), scale, img.size)
