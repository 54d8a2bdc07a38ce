"""Extreme aspect ratios through OCR (issue 32): what RapidOCR would allocate is computed from the
shape, a wide strip is read in tiles RapidOCR neither scales nor pads, and one too thin to hold a
line is skipped, so a 2000x1 PNG no longer costs gigabytes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from ocr_recording import LATIN_FONT, RecordingEngine, record_engine
from PIL import Image, ImageDraw, ImageFont

from geosleuth.bounds.ocr import (
    BAND_PIXELS,
    MIN_TEXT_SIDE,
    TILE_SIDE,
    ocr_peak_bytes,
    rapid_frames,
    strip_plan,
)
from geosleuth.bounds.ocr import (
    READ_SIDE as BOUNDS_READ_SIDE,
)
from geosleuth.tools.ocr import DET_PIXELS, READ_SIDE, run_ocr


def test_the_bounds_module_reads_at_the_ocr_modules_scale() -> None:
    assert BOUNDS_READ_SIDE == READ_SIDE and BAND_PIXELS == DET_PIXELS


def test_rapidocr_frames_of_the_issue_strips_by_hand() -> None:
    # 2000x1: short side 1 -> 30 (x30): 60000x30, sides to multiples of 32: 60000x32; wider than
    # 8:1, so padded to int(60000 / 8) * 2 = 15000 rows: 900 M pixels (2.7 GB as RGB)
    assert rapid_frames(2000, 1)[0] == 60000 * 15000
    # 8000x8 arrives at RapidOCR as 2000x2 (its long side at READ_SIDE): x15 -> 30000x30, to
    # multiples of 32: 30016x32, padded to int(30016 / 8) * 2 = 7504 rows
    assert rapid_frames(2000, 2)[0] == 30016 * 7504
    # a 640x480 photo: nothing scaled or padded
    assert rapid_frames(640, 480) == (640 * 480, 640 * 480)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, READ_SIDE), st.integers(1, READ_SIDE))  # what `_rapidocr` hands it
def test_the_frames_are_those_rapidocrs_own_preprocessing_makes(width: int, height: int) -> None:
    process = pytest.importorskip("rapidocr.utils.process_img")
    assume(rapid_frames(width, height)[0] <= 3_000_000)  # what can be allocated here
    img, _, _ = process.resize_image_within_bounds(np.zeros((height, width, 3), np.uint8), 30, 2000)
    padded, _ = process.apply_vertical_padding(img, {}, 8, 30)
    assert rapid_frames(width, height)[0] == padded.shape[0] * padded.shape[1]


def test_a_strip_too_thin_to_hold_text_is_skipped_and_a_thin_long_one_read_at_full_size() -> None:
    assert strip_plan(2000, 1).skipped  # type: ignore[union-attr]
    assert strip_plan(100_000, 10).skipped  # type: ignore[union-attr]  # 16 tiles would leave 2 rows
    plan = strip_plan(8000, 8)
    assert plan is not None and plan.scale == 1.0 and not plan.skipped
    assert plan.tiles[0][0] == 0 and plan.tiles[-1][1] == 8000
    assert all(x1 - x0 <= TILE_SIDE for x0, x1 in plan.tiles)
    assert strip_plan(640, 480) is None and strip_plan(4000, 3000) is None and strip_plan(20, 4000) is None


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 200_000), st.integers(1, 200_000))
def test_no_shape_makes_ocr_allocate_more_than_a_band(width: int, height: int) -> None:
    """Whatever the shape, OCR's peak stays that of one band read or of one whole read of at most
    1280x1024 pixels (RapidOCR's pre-processing included; 229 bytes a pixel, rounded to 32 px),
    where it reached 2.7 GB for 2000x1."""
    assert ocr_peak_bytes(width, height) <= 320 * 2**20
    plan = strip_plan(width, height)
    if plan is not None:
        rows = plan.size[1]
        assert plan.skipped == (rows < MIN_TEXT_SIDE)
        covered = [x for x0, x1 in plan.tiles for x in (x0, x1)]
        assert not plan.tiles or (covered[0] == 0 and covered[-1] == plan.size[0])
        for (_, left_end), (right_start, _) in zip(plan.tiles, plan.tiles[1:], strict=False):
            assert left_end - right_start >= min(TILE_SIDE // 4, 4 * rows)  # a word lies whole in one


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> RecordingEngine:
    return record_engine(monkeypatch)


def test_a_one_pixel_strip_never_reaches_the_engine(recording: RecordingEngine) -> None:
    report = run_ocr(Image.new("RGB", (2000, 1), "white"))
    assert report.lines == [] and recording.sizes == []


@pytest.mark.slow
def test_text_along_a_long_strip_is_read_once_each_where_it_is(recording: RecordingEngine) -> None:
    # 8000x24: RapidOCR would read it at 2000x6 (nothing legible) after padding it to 2.2 GB; the
    # tiles read it at full size. "Rue 1" straddles the first seam (tiles [0, 2000), [1500, 3500)).
    image = Image.new("RGB", (8000, 24), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(LATIN_FONT, 18)
    words = {"Rue 0 Paris": 100, "Rue 1 Paris": 1940, "Rue 2 Paris": 4210, "Rue 3 Paris": 7700}
    for text, x in words.items():
        draw.text((x, 12), text, fill="black", font=font, anchor="lm")

    lines = run_ocr(image).lines

    assert recording.sizes and all(rapid_frames(w, h)[0] == w * h for w, h in recording.sizes)  # as given
    assert all(w * h <= DET_PIXELS for w, h in recording.sizes)
    texts = [line.text for line in lines]
    for text, x in words.items():
        assert texts.count(text) == 1, texts
        assert abs(lines[texts.index(text)].box[0] - x) < 20, lines
