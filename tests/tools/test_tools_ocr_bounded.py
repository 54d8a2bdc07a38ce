"""OCR and the offline work copy in bounded memory: the text detector never sees more than
`DET_PIXELS` at once (its memory grows with its input), yet text anywhere on a large photo,
across a band's seam or too tall for a band, is still read once, where it is."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ocr_recording import LATIN_FONT, RecordingEngine, record_engine
from PIL import Image, ImageDraw, ImageFont, ImageOps

import geosleuth.tools.ocr as ocr
from geosleuth.bounds.imageio import open_work_copy
from geosleuth.tools.ocr import BAND_OVERLAP, DET_PIXELS, READ_SIDE, detector_bands, run_ocr


@settings(max_examples=60, deadline=None)
@given(st.integers(1, READ_SIDE), st.integers(1, READ_SIDE))
def test_detector_bands_cover_every_row_within_the_pixel_budget(width: int, height: int) -> None:
    bands = detector_bands(width, height)
    assert bands[0][0] == 0 and bands[-1][1] == height
    if width * height > DET_PIXELS:
        assert all((bottom - top) * width <= DET_PIXELS for top, bottom in bands)
    for (_, above_bottom), (below_top, _) in zip(bands, bands[1:], strict=False):
        assert above_bottom - below_top >= BAND_OVERLAP  # a line this tall lies whole in one band


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> RecordingEngine:
    return record_engine(monkeypatch)


def test_text_on_a_large_photo_is_read_with_every_detector_call_bounded(recording: RecordingEngine) -> None:
    # A 12 MP phone photo: read at 2000x1500, i.e. in bands; lines 24 px tall at that scale, some
    # across a seam between two bands (rows 256 and 416 there: 512 and 832 here), one far too tall
    # for any band.
    image = Image.new("RGB", (4000, 3000), (200, 210, 220))
    draw = ImageDraw.Draw(image)
    small = ImageFont.truetype(LATIN_FONT, 48)
    rows = {f"Bahnhofstrasse {i} Luzern": (300 + 420 * i, y) for i, y in enumerate((490, 810, 1500, 2900))}
    for text, xy in rows.items():
        draw.text(xy, text, fill=(0, 0, 0), font=small, anchor="lm")
    draw.text((3000, 1900), "HOTEL", fill=(0, 0, 0), font=ImageFont.truetype(LATIN_FONT, 700), anchor="mm")

    report = run_ocr(image)

    assert recording.sizes and max(w * h for w, h in recording.sizes) <= DET_PIXELS
    texts = [line.text for line in report.lines]
    for text, (x, y) in rows.items():
        assert texts.count(text) == 1, texts
        box = report.lines[texts.index(text)].box
        assert abs((box[1] + box[3]) / 2 - y) < 40 and abs(box[0] - x) < 40, (text, box)
    hotel = [line for line in report.lines if line.text == "HOTEL"]
    assert len(hotel) == 1 and hotel[0].box[3] - hotel[0].box[1] > 300, texts


def test_a_small_image_is_one_detector_call(recording: RecordingEngine) -> None:
    image = Image.new("RGB", (700, 200), "white")
    font = ImageFont.truetype(LATIN_FONT, 60)
    ImageDraw.Draw(image).text((20, 100), "Luzern", fill="black", font=font, anchor="lm")
    assert [line.text for line in run_ocr(image).lines] == ["Luzern"]
    assert recording.sizes == [(700, 200)]


def test_the_work_copy_of_a_big_png_never_resamples_or_turns_the_full_frame(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # shown turned a quarter clockwise: the work copy is portrait
    path = tmp_path / "big.png"
    Image.new("RGB", (3000, 2000), (40, 60, 90)).save(path, exif=exif)
    seen: list[tuple[str, tuple[int, int]]] = []
    resize, exif_transpose = Image.Image.resize, ImageOps.exif_transpose

    def spy_resize(self: Image.Image, *args: Any, **kwargs: Any) -> Image.Image:
        seen.append(("resize", self.size))
        return resize(self, *args, **kwargs)

    def spy_transpose(image: Image.Image, *args: Any, **kwargs: Any) -> Image.Image | None:
        seen.append(("transpose", image.size))
        return exif_transpose(image, *args, **kwargs)

    monkeypatch.setattr(Image.Image, "resize", spy_resize)
    monkeypatch.setattr(ImageOps, "exif_transpose", spy_transpose)
    work = open_work_copy(path, 1_000_000)

    assert work.width < work.height and work.width * work.height <= 1_000_000
    assert work.getpixel((work.width // 2, work.height // 2)) == (40, 60, 90)
    assert work.info["original_size"] == (3000, 2000)
    assert {op for op, _ in seen} == {"resize", "transpose"}
    assert all(w * h <= 1500 * 1000 for _, (w, h) in seen), seen  # the 2x box reduction, at most


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt"
)
def test_big_frees_go_back_to_the_system_on_glibc() -> None:
    assert ocr._return_big_frees()


def test_the_tesseract_reread_reads_a_bounded_copy_of_the_text_area() -> None:
    """The re-read of unsure lines works on the box around what RapidOCR saw (with a margin),
    reduced to its pixel budget, so a large photo's texture never reaches Tesseract whole."""
    from geosleuth.tools.ocr import REREAD_MAX_PIXELS, SCRIPT_PASS_PIXELS, _reread_view

    image = Image.new("RGB", (8000, 6000))
    raw = [("ab", [1000.0, 1000.0, 3000.0, 1200.0], 0.5), ("cd", [1200.0, 2000.0, 2600.0, 2200.0], 0.4)]
    view, (ox, oy), scale = _reread_view(image, raw, SCRIPT_PASS_PIXELS)
    assert view.width * view.height <= SCRIPT_PASS_PIXELS * 1.01
    assert (ox, oy) == (784.0, 384.0)  # 10 % + 16 px of the width, half the height + 16 px around
    assert scale < 1.0 and abs(view.width / scale - (3216 - 784)) <= 2
    whole, origin, k = _reread_view(image, [], REREAD_MAX_PIXELS)  # nothing seen: the whole image
    assert (
        origin == (0.0, 0.0)
        and abs(whole.width / k - 8000) <= 2
        and whole.width * whole.height <= REREAD_MAX_PIXELS * 1.01
    )
