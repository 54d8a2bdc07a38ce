"""What RapidOCR really allocates for an image's shape, and how strips are read within a bound.

Before its detector runs, RapidOCR pre-processes the whole input at full size: it scales the short
side up to 30 px (``min_side_len``, sides rounded to multiples of 32) and pads an image wider than
8:1 (``width_height_ratio``) with black rows to 4:1. A 2000x1 strip becomes 60000x32, padded to
60000x15032: 2.7 GB of pixels for a 2000-pixel image. The pixel count says nothing of this; the
shape does (`rapid_frames`, `engine_bytes`).

So a wide strip (wider than 8:1 where RapidOCR would read it) is read here in tiles of at most
`TILE_SIDE` along its length, each padded by us to 8:1 and at least `STRIP_SIDE` rows, so that
RapidOCR neither scales nor pads it and one detector call sees at most `TILE_SIDE`² / 8 pixels. A
strip too thin to hold text at RapidOCR's reading scale is read at up to full resolution instead
(at most `MAX_TILES` tiles); one still thinner than `MIN_TEXT_SIDE` rows holds no line a
recogniser can read and is skipped. Pure geometry and one callable: no engine is imported here.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

from PIL import Image

log = logging.getLogger(__name__)

Line = tuple[str, list[float], float]

READ_SIDE = 2000
"""RapidOCR's ``max_side_len``: the long side it reads an image at (and `tools.ocr.READ_SIDE`)."""
RAPID_MIN_SIDE = 30
"""RapidOCR's ``min_side_len``: a shorter side is scaled up to this before detection."""
RAPID_PAD_RATIO = 8
"""RapidOCR's ``width_height_ratio``: a wider image is padded with black rows to half this ratio."""
STRIP_SIDE = 32
"""Rows a strip tile gets at least (padded): RapidOCR scales nothing of 30 rows or more."""
MIN_TEXT_SIDE = 8
"""Rows below which a strip holds no readable line (the recogniser reads lines 48 px tall)."""
TILE_SIDE = READ_SIDE
"""Length of one strip tile; padded to 8:1 it is 2000x250, within `BAND_PIXELS`."""
MAX_TILES = 16
"""Tiles one strip is read in at most: a longer strip is read at a smaller scale."""
BAND_PIXELS = 512_000
"""Pixels of one band of a large image (`tools.ocr.DET_PIXELS`)."""
DET_BYTES_PER_PIXEL = 220
"""The detector's working memory per input pixel (measured: 1600x1200 took 535 MB, 800x600 204 MB)."""
WHOLE_PIXELS = 1280 * 1024
"""Pixels of a reading copy read in one detector call, as RapidOCR's default call reads it: up to
this (a sign, a screenshot; ``engine_bytes`` about 300 MB) the bands and their overview would
cost three or four calls for no memory RapidOCR's own call of the image does not take anyway
(its default detector input is at least 736 px on the short side, so no smaller)."""


@dataclass(frozen=True)
class StripPlan:
    """How to read a wide strip: at ``scale``, in tiles ``[x0, x1)`` of the scaled strip."""

    scale: float
    size: tuple[int, int]  # the scaled strip
    tiles: tuple[tuple[int, int], ...]  # empty: too thin to hold text, skipped

    @property
    def skipped(self) -> bool:
        return not self.tiles


def _round32(value: float) -> int:
    return int(round(value / 32) * 32)


def rapid_frames(width: int, height: int) -> tuple[int, int]:
    """(pixels of the array RapidOCR pre-processes at full size, pixels of its detector's input)
    for an input of ``width`` x ``height``, following its ``resize_image_within_bounds``,
    ``apply_vertical_padding`` and the detector's ``limit_type: max`` resize."""
    w, h = max(1, width), max(1, height)
    if max(w, h) > READ_SIDE:
        ratio = READ_SIDE / max(w, h)
        w, h = max(1, _round32(w * ratio)), max(1, _round32(h * ratio))  # (RapidOCR fails on a 0)
    if min(w, h) < RAPID_MIN_SIDE:
        ratio = RAPID_MIN_SIDE / min(w, h)
        w, h = _round32(w * ratio), _round32(h * ratio)
    if h <= RAPID_MIN_SIDE or w / h > RAPID_PAD_RATIO:
        padded = max(int(w / RAPID_PAD_RATIO), RAPID_MIN_SIDE) * 2
        h += 2 * int(abs(padded - h) / 2)
    ratio = min(1.0, READ_SIDE / max(w, h))
    det = max(_round32(w * ratio), 32) * max(_round32(h * ratio), 32)
    return w * h, det


def engine_bytes(width: int, height: int) -> int:
    """Bytes one RapidOCR call on this shape needs at its peak: the pre-processed RGB array (and
    its padded copy) plus the detector's working memory."""
    frame, det = rapid_frames(width, height)
    return 2 * 3 * frame + DET_BYTES_PER_PIXEL * det


def strip_plan(width: int, height: int) -> StripPlan | None:
    """The tiles of a wide strip, or None for an image RapidOCR reads without padding it."""
    if width <= 0 or height <= 0:
        return None
    read = min(1.0, READ_SIDE / max(width, height))
    if width * read <= RAPID_PAD_RATIO * max(1, round(height * read)):
        return None
    scale = read
    if height * read < STRIP_SIDE:  # as thin as this, read it larger (up to full size)
        scale = max(read, min(1.0, STRIP_SIDE / height, MAX_TILES * TILE_SIDE * 3 / 4 / width))
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    if size[1] < MIN_TEXT_SIDE:
        return StripPlan(scale, size, ())
    return StripPlan(scale, size, tuple(_tiles(size[0], size[1])))


def _tiles(width: int, rows: int) -> list[tuple[int, int]]:
    """``[x0, x1)`` of tiles of at most `TILE_SIDE` covering ``width``; neighbours share a few
    line heights, so a word cut at one seam is whole in the next tile."""
    if width <= TILE_SIDE:
        return [(0, width)]
    overlap = min(TILE_SIDE // 4, 4 * rows + 32)
    count = math.ceil((width - overlap) / (TILE_SIDE - overlap))
    return [
        (x0, x0 + TILE_SIDE) for x0 in (round(i * (width - TILE_SIDE) / (count - 1)) for i in range(count))
    ]


def ocr_peak_bytes(width: int, height: int) -> int:
    """Bytes the OCR of an image of this shape needs at its peak: its largest engine call (a
    strip's padded tile, a band of at most `BAND_PIXELS`, or the whole reading copy) plus the
    copy it is read from. The memory reservation of a task budgets this."""
    plan = strip_plan(width, height)
    if plan is not None:
        if plan.skipped:
            return 0
        tile = plan.tiles[0][1] - plan.tiles[0][0]
        return engine_bytes(tile, _padded_rows(tile, plan.size[1])) + 3 * plan.size[0] * plan.size[1]
    read = min(1.0, READ_SIDE / max(width, height, 1))
    w, h = max(1, round(width * read)), max(1, round(height * read))
    if w * h > WHOLE_PIXELS:  # read in bands of at most `BAND_PIXELS`
        return 2 * 3 * BAND_PIXELS + DET_BYTES_PER_PIXEL * BAND_PIXELS + 3 * w * h
    return engine_bytes(w, h) + 3 * w * h


def _padded_rows(tile_width: int, rows: int) -> int:
    return max(rows, STRIP_SIDE, math.ceil(tile_width / RAPID_PAD_RATIO))


def read_strip(image: Image.Image, plan: StripPlan, call: Callable[[Image.Image], list[Line]]) -> list[Line]:
    """``call``'s lines over the tiles of ``plan``, boxes in ``image`` pixels; a line cut at a
    seam yields to the whole reading of it in the neighbouring tile."""
    if plan.skipped:
        log.info("OCR skipped a %dx%d strip: under %d rows at any scale read", *image.size, MIN_TEXT_SIDE)
        return []
    strip = image if image.mode == "RGB" else image.convert("RGB")
    if plan.size != image.size:
        strip = strip.resize(plan.size)
    width, rows = plan.size
    readings: list[tuple[tuple[int, float], Line]] = []
    for x0, x1 in plan.tiles:
        tile = Image.new("RGB", (x1 - x0, _padded_rows(x1 - x0, rows)))  # black, as RapidOCR pads
        tile.paste(strip.crop((x0, 0, x1, rows)), (0, 0))
        for text, box, score in call(tile):
            cut = (x0 > 0 and box[0] <= 2) or (x1 < width and box[2] >= x1 - x0 - 2)
            clipped = [box[0] + x0, min(box[1], rows), box[2] + x0, min(box[3], rows)]
            readings.append(((int(cut), -score), (text, clipped, score)))
    kept: list[Line] = []
    for _, line in sorted(readings, key=lambda r: r[0]):
        if all(_shared_span(line[1], other[1]) <= 0.5 for other in kept):
            kept.append(line)
    factor = 1 / plan.scale
    return [(t, [v * factor for v in b], s) for t, b, s in sorted(kept, key=lambda ln: (ln[1][0], ln[1][1]))]


def _shared_span(a: list[float], b: list[float]) -> float:
    """Horizontal overlap over the narrower box, for boxes whose rows meet (one line read twice)."""
    if min(a[3], b[3]) <= max(a[1], b[1]):
        return 0.0
    shared = min(a[2], b[2]) - max(a[0], b[0])
    narrower = min(a[2] - a[0], b[2] - b[0])
    return shared / narrower if shared > 0 and narrower > 0 else 0.0
