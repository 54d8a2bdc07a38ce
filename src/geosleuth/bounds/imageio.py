"""Bounded image decoding: every image a run opens (dataset, upload, MCP, report) goes through here.

The size in an image header costs nothing to read, the decoded pixels cost 3–4 bytes each: a
420 KB PNG can claim 12000 × 12000 pixels and need gigabytes. So the header is read first;
JPEGs above the limit are reduced while decoding (``draft``: 1/2, 1/4 or 1/8 scale, the
decoder never holds the full frame); formats that cannot reduce on decode (PNG, WebP, …)
are refused above the limit with an `ImageInputError` that says so. The limit is
``GEOSLEUTH_MAX_IMAGE_PIXELS`` (default 64 M pixels, about 200 MB as RGB), or an argument.
A PNG's oversized ancillary chunks (a 400 MB eXIf) are never read (`geosleuth.bounds.pngchunks`).

Reduce-on-decode does not hold for progressive and multi-scan JPEGs: libjpeg keeps every DCT
coefficient of the full frame (2 bytes a pixel per component at its sampling) whatever scale it
outputs, so a 2 MB progressive 16000x11000 JPEG held 1 GB. Those buffers are counted from the
header (`coefficient_bytes`, reserved by the memory gates) and an image whose buffers pass what
the pixel limit allows a frame (`BYTES_PER_LIMIT_PIXEL` a pixel) is refused by name (issue 41).
"""

from __future__ import annotations

import io
import math
import os
import re
import struct
import warnings
from pathlib import Path
from typing import BinaryIO

from PIL import Image, ImageOps, UnidentifiedImageError

from geosleuth.bounds.pngchunks import dropped_chunks, without_big_ancillary

DEFAULT_MAX_PIXELS = 64_000_000
MAX_PIXELS_ENV = "GEOSLEUTH_MAX_IMAGE_PIXELS"
REDUCIBLE_FORMATS = frozenset({"JPEG", "MPO"})
"""Formats decoded at a reduced scale when above the limit; others are refused there."""
_REDUCIBLE = REDUCIBLE_FORMATS
BYTES_PER_LIMIT_PIXEL = 3
"""Coefficient bytes a buffered JPEG may need per pixel of the decode limit: an RGB frame's worth."""
_SOS = b"\xff\xda"
PROBE_DECODE_PIXELS = 4_000_000
"""`probe_image` decodes formats it cannot check otherwise (WebP, GIF, …) only up to this size."""

Source = str | Path | bytes | BinaryIO


class ImageInputError(ValueError):
    """An image that cannot be used; the message names it and the reason."""


class ImageTooLarge(ImageInputError):
    """A header above Pillow's own ceiling (a possible decompression bomb); ``pixels`` is the
    count Pillow named, when it named one, so a caller can refuse it by its size."""

    def __init__(self, message: str, pixels: int | None) -> None:
        super().__init__(message)
        self.pixels = pixels


def max_image_pixels(override: int | None = None) -> int:
    """The decode limit: ``override``, else ``$GEOSLEUTH_MAX_IMAGE_PIXELS``, else the default."""
    if override is not None and override > 0:
        return override
    try:
        value = int(os.environ.get(MAX_PIXELS_ENV, "") or DEFAULT_MAX_PIXELS)
    except ValueError:
        return DEFAULT_MAX_PIXELS
    return value if value > 0 else DEFAULT_MAX_PIXELS


def _label(source: Source, label: str | None) -> str:
    if label:
        return label
    return str(source) if isinstance(source, str | Path) else "image"


def _open_lazy(source: Source, label: str) -> Image.Image:
    """The image with only its header read (no pixel is decoded yet)."""
    if isinstance(source, str | Path):
        p = Path(source)
        if not p.exists():
            raise ImageInputError(f"{label}: file not found")
        if p.is_dir():
            raise ImageInputError(f"{label}: is a directory, not an image")
        if not p.is_file():
            raise ImageInputError(f"{label}: not a regular file")
        if p.stat().st_size == 0:
            raise ImageInputError(f"{label}: file is empty (0 bytes)")
        with _errors(label), p.open("rb") as probe:
            big_chunks = bool(dropped_chunks(probe))
        fp: str | Path | BinaryIO = without_big_ancillary(p.open("rb"), label) if big_chunks else p
    elif isinstance(source, bytes):
        if not source:
            raise ImageInputError(f"{label}: file is empty (0 bytes)")
        with _errors(label):
            fp = without_big_ancillary(io.BytesIO(source), label)
    else:
        with _errors(label):
            fp = without_big_ancillary(source, label)
    with _errors(label):
        return Image.open(fp)


class _errors:
    """Every way Pillow fails, as an `ImageInputError` a user can act on."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __enter__(self) -> None:
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # our own check decides

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        self._warnings.__exit__(kind, exc, tb)
        if exc is None or isinstance(exc, ImageInputError):
            return False
        label = self.label
        if isinstance(exc, Image.DecompressionBombError):
            pixels = bomb_pixels(exc)
            raise ImageTooLarge(_bomb_message(label, pixels), pixels) from None
        if isinstance(exc, UnidentifiedImageError):
            raise ImageInputError(
                f"{label}: not a supported image format (PNG, JPEG, WebP, GIF, TIFF, BMP, …)"
            ) from None
        if isinstance(exc, MemoryError):
            raise ImageInputError(f"{label}: not enough memory to decode the image") from None
        if isinstance(exc, OSError | EOFError | ValueError | SyntaxError | struct.error):
            raise ImageInputError(f"{label}: image data is damaged or truncated ({exc})") from None
        return False


_BOMB_PIXELS = re.compile(r"\((\d+) pixels\)")


def bomb_pixels(exc: Image.DecompressionBombError) -> int | None:
    """The pixel count Pillow's refusal names ("Image size (N pixels) exceeds limit …"), if any."""
    found = _BOMB_PIXELS.search(str(exc))
    return int(found.group(1)) if found else None


def _bomb_message(label: str, pixels: int | None) -> str:
    """Pillow refuses headers above twice its ``MAX_IMAGE_PIXELS`` (178,956,970 by default) before
    our own check runs: say so in this module's terms, not Pillow's "DOS attack"."""
    size = f"{pixels:,} pixels" if pixels else "more pixels than Pillow decodes"
    limit = max_image_pixels()
    pillow = 2 * (Image.MAX_IMAGE_PIXELS or 0)
    if pixels is None or pixels > limit:
        return (
            f"{label}: image is {size}, above the {limit:,}-pixel decode limit; possible decompression "
            f"bomb. Downscale it, or raise {MAX_PIXELS_ENV}"
        )
    return (
        f"{label}: image is {size}, above the {pillow:,} pixels Pillow decodes at most, whatever "
        f"{MAX_PIXELS_ENV} allows; downscale it"
    )


def _refuse(label: str, size: tuple[int, int], limit: int, reducible: bool) -> ImageInputError:
    w, h = size
    hint = "" if reducible else " (this format cannot be reduced while decoding)"
    return ImageInputError(
        f"{label}: image is {w}x{h} = {w * h:,} pixels, above the {limit:,}-pixel decode limit{hint}; "
        f"possible decompression bomb. Downscale it, or raise {MAX_PIXELS_ENV}"
    )


def _more_scans(fp: BinaryIO) -> bool:
    """Whether another start-of-scan follows the one Pillow stopped at (entropy-coded data
    escapes 0xFF, so the marker bytes appear only as markers); the position is restored."""
    where = fp.tell()
    try:
        tail = b""
        while chunk := fp.read(1 << 20):
            if _SOS in tail + chunk:
                return True
            tail = chunk[-1:]
        return False
    finally:
        fp.seek(where)


def _coefficients(img: Image.Image) -> int:
    """Bytes of DCT coefficients libjpeg buffers for a progressive or multi-scan JPEG (0 for a
    single-scan one, decoded row by row): 64 coefficients of 2 bytes per 8x8 block of each
    component, over whole MCUs."""
    if img.format not in _REDUCIBLE or not getattr(img, "layer", None):
        return 0
    if not img.info.get("progressive") and not _more_scans(img.fp):
        return 0
    hmax = max(h for _, h, _, _ in img.layer) or 1
    vmax = max(v for _, _, v, _ in img.layer) or 1
    w, h = img.size
    mcus = math.ceil(w / (8 * hmax)) * math.ceil(h / (8 * vmax))
    return sum(mcus * ch * cv * 128 for _, ch, cv, _ in img.layer)


def _check_coefficients(img: Image.Image, label: str, limit: int) -> None:
    """Refuse a buffered JPEG whose coefficients pass an RGB frame at the pixel limit."""
    need = _coefficients(img)
    allowed = limit * BYTES_PER_LIMIT_PIXEL
    if need > allowed:
        w, h = img.size
        kind = "progressive" if img.info.get("progressive") else "multi-scan"
        raise ImageInputError(
            f"{label}: {kind} JPEG of {w}x{h}: its decoder holds all {need / 2**20:,.0f} MiB of the full "
            f"frame's coefficients whatever the reduction, above the {allowed / 2**20:,.0f} MiB the "
            f"{limit:,}-pixel decode limit allows; re-save it as a baseline JPEG or downscale it, "
            f"or raise {MAX_PIXELS_ENV}"
        )


def coefficient_bytes(source: Source) -> int:
    """Bytes a decoder of ``source`` holds beside its output frame (a progressive or multi-scan
    JPEG's coefficients; 0 otherwise or when unreadable), for the memory gates to reserve."""
    try:
        with open_header(source) as img:
            return _coefficients(img)
    except (ImageInputError, OSError, ValueError):
        return 0


def _reduce_on_decode(img: Image.Image, limit: int) -> None:
    """Ask a JPEG decoder for a 1/2–1/8 scale so that the decoded frame fits ``limit``."""
    w, h = img.size
    if img.format not in _REDUCIBLE or w * h <= limit:
        return
    # draft picks the smallest scale still at least the requested size, so ask for half the
    # side the limit allows: the result then lies between a quarter of the limit and the limit
    side = math.sqrt(limit / (w * h)) / 2
    img.draft(img.mode if img.mode in ("RGB", "L") else "RGB", (max(1, int(w * side)), max(1, int(h * side))))


def open_image(
    source: Source, max_pixels: int | None = None, *, label: str | None = None, transpose: bool = True
) -> Image.Image:
    """Decode an image within the pixel limit (EXIF orientation applied), or say why not.

    JPEGs larger than the limit come back reduced (``img.info["decode_scale"]`` < 1); other
    formats larger than the limit raise `ImageInputError` before a pixel is decoded.
    """
    name = _label(source, label)
    limit = max_image_pixels(max_pixels)
    img = _open_lazy(source, name)
    with _errors(name):
        _check_coefficients(img, name, limit)
        original = img.size
        _reduce_on_decode(img, limit)
        if img.size[0] * img.size[1] > limit:
            raise _refuse(name, original, limit, img.format in _REDUCIBLE)
        img.load()
        img.info["decode_scale"] = img.size[0] / original[0] if original[0] else 1.0
        img.info["original_size"] = original
        if transpose:
            ImageOps.exif_transpose(img, in_place=True)  # no second full-size copy
        return img


def probe_image(
    source: Source, max_pixels: int | None = None, *, label: str | None = None
) -> tuple[str, tuple[int, int]]:
    """(format, size) of a usable image, checked in bounded memory without a full decode.

    The header and the pixel limit are checked; PNGs are verified chunk by chunk (CRCs, a
    complete stream), JPEGs are decoded at 1/8 scale, other formats only when small
    (`PROBE_DECODE_PIXELS`), so damage shows up here at a small cost.
    """
    name = _label(source, label)
    limit = max_image_pixels(max_pixels)
    img = _open_lazy(source, name)
    with _errors(name):
        _check_coefficients(img, name, limit)
        fmt, size = str(img.format), img.size
        if fmt not in _REDUCIBLE and size[0] * size[1] > limit:
            raise _refuse(name, size, limit, False)
        if fmt in _REDUCIBLE:
            img.draft("RGB", (max(1, size[0] // 8), max(1, size[1] // 8)))
            if img.size[0] * img.size[1] > limit:
                raise _refuse(name, size, limit, True)
            img.load()
        elif fmt == "PNG":
            img.verify()
        elif size[0] * size[1] <= PROBE_DECODE_PIXELS:
            img.load()  # other formats cannot be checked more cheaply than by decoding; large ones wait
        return fmt, size


def thumbnail(
    source: Source, max_side: int, max_pixels: int | None = None, *, label: str | None = None
) -> Image.Image:
    """An RGB image at most ``max_side`` on a side, decoded within the pixel limit."""
    name = _label(source, label)
    limit = max_image_pixels(max_pixels)
    img = _open_lazy(source, name)
    with _errors(name):
        _check_coefficients(img, name, limit)
        if img.format in _REDUCIBLE:
            img.draft("RGB", (max_side, max_side))
        if img.size[0] * img.size[1] > limit:
            raise _refuse(name, img.size, limit, img.format in _REDUCIBLE)
        img.thumbnail((max_side, max_side))
        ImageOps.exif_transpose(img, in_place=True)
        return img if img.mode == "RGB" else img.convert("RGB")


def reducible(img: Image.Image) -> Image.Image:
    """``img`` in a mode `Image.reduce` and the resamplers average correctly: a palette as RGB(A)
    (averaging palette indices is meaningless; Pillow refuses P), 1-bit as L, 16-bit grey scaled
    to 8 bits (Pillow's own conversion clips it to white); other modes as they are."""
    if img.mode in ("P", "PA"):
        has_alpha = img.mode == "PA" or "transparency" in img.info
        return img.convert("RGBA" if has_alpha else "RGB")
    if img.mode == "1":
        return img.convert("L")
    if img.mode.startswith("I;16"):
        return img.convert("I").point(lambda v: v * (1 / 256)).convert("L")
    return img


def open_work_copy(
    source: Source, work_pixels: int, max_pixels: int | None = None, *, label: str | None = None
) -> Image.Image:
    """An RGB copy of at most ``work_pixels`` pixels, decoded within the pixel limit.

    JPEGs are reduced while decoding; other formats are decoded once at full size and box-reduced
    by an integer factor at once, so the full frame lives only beside that smaller copy (not
    beside a rotated or resampled full-size one). ``info["original_size"]`` keeps the
    file's size and ``info["work_scale"]`` the factor applied.
    """
    name = _label(source, label)
    limit = max_image_pixels(max_pixels)
    img = _open_lazy(source, name)
    with _errors(name):
        _check_coefficients(img, name, limit)
        original = img.size
        if img.format in _REDUCIBLE and original[0] * original[1] > work_pixels:
            side = math.sqrt(work_pixels / (original[0] * original[1]))
            img.draft("RGB", (max(1, int(original[0] * side)), max(1, int(original[1] * side))))
        if img.size[0] * img.size[1] > limit:
            raise _refuse(name, original, limit, img.format in _REDUCIBLE)
        img.load()
        w, h = img.size
        factor = math.isqrt(w * h // work_pixels) if w * h > work_pixels else 1
        if factor >= 2:  # a box reduction first, then the full frame goes before anything else is made
            converted = reducible(img)
            if converted is not img:
                img.close()
                img = converted
            reduced = img.reduce(factor)
            img.close()
            img = reduced
        ImageOps.exif_transpose(img, in_place=True)
        w, h = img.size
        if w * h > work_pixels:
            scale = math.sqrt(work_pixels / (w * h))
            img.thumbnail((max(1, int(w * scale)), max(1, int(h * scale))), Image.Resampling.LANCZOS)
        work = img if img.mode == "RGB" else img.convert("RGB")
        work.info["original_size"] = original
        work.info["work_scale"] = work.size[0] / original[0] if original[0] else 1.0
        return work


def header_size(source: Source) -> tuple[int, int]:
    """(width, height) from the header alone ((0, 0) when it is not a readable image)."""
    try:
        with open_header(source) as img:
            return img.size
    except ImageInputError:
        return (0, 0)


def header_pixels(source: Source) -> int:
    """Width × height from the header alone (0 when the file is not a readable image)."""
    width, height = header_size(source)
    return width * height


def open_header(source: Source, *, label: str | None = None) -> Image.Image:
    """The image with only its header read (oversized ancillary PNG chunks left out unread),
    for its size, format or metadata; `ImageInputError` when it is not a readable image."""
    return _open_lazy(source, _label(source, label))
