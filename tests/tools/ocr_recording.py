"""The real RapidOCR engine, recording the size of every image it is handed (OCR bound tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import geosleuth.tools.ocr as ocr

LATIN_FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


class RecordingEngine:
    """The real RapidOCR engine, recording the size of every image it is handed."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.sizes: list[tuple[int, int]] = []

    def __call__(self, array: np.ndarray) -> Any:
        self.sizes.append((array.shape[1], array.shape[0]))
        return self.engine(array)


def record_engine(monkeypatch: pytest.MonkeyPatch) -> RecordingEngine:
    """Put a `RecordingEngine` in place of the engine's getter (RapidOCR's reading alone, no
    Tesseract); skips without RapidOCR or the font the tests draw with."""
    pytest.importorskip("rapidocr")
    if not Path(LATIN_FONT).is_file():
        pytest.skip("DejaVu Sans is not installed")
    recorder = RecordingEngine(ocr.rapidocr_engine())
    monkeypatch.setattr(ocr, "rapidocr_engine", lambda: recorder)
    monkeypatch.setattr(ocr, "tesseract_languages", frozenset)
    return recorder
