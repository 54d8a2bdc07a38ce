"""Warm offline `locate` of one small sign against the OCR engines alone on the same image.

Target (issue 23): the whole offline pipeline (EXIF, OCR, clues, gazetteer, phone areas, place
names, ranking, reverse geocoding) takes at most 1.5x the OCR engines' own calls. The engines
are timed exactly as the pipeline calls them: RapidOCR over the image's bands, plus, for a sign
RapidOCR cannot read, Tesseract's two readings of the bounded text area (every installed script,
then the script it found). Everything is warm (models loaded, gazetteer open): the first call of
each is made and not counted.

Usage: python bench/offline_bench.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from PIL import Image

from geosleuth.agent.offline import locate_offline
from geosleuth.tools import ocr

ROOT = Path(__file__).resolve().parents[1]


def _best(fn: Callable[[], object], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _engines(image: Image.Image) -> Callable[[], object]:
    """The OCR engines' own calls, as the pipeline makes them for this image: RapidOCR's detector
    and recogniser over the image's bands, then, for text RapidOCR is unsure of, Tesseract's two
    passes over the bounded copies of the text area."""
    raw = ocr._rapidocr(image)
    languages = [c for c in dict.fromkeys(ocr.SCRIPT_LANGUAGES.values()) if c in ocr.tesseract_languages()]
    reread = bool(languages) and (not raw or any(ocr._unsure(line) for line in raw))
    every = ocr._reread_view(image, raw, ocr.SCRIPT_PASS_PIXELS)[0]
    one = ocr._reread_view(image, raw, ocr.REREAD_MAX_PIXELS)[0]
    found = ocr._tesseract(every, "+".join(languages), ocr.SIGN_PAGE_MODE) if reread else []
    script = ocr._dominant_script([line for line in found if line[2] >= ocr.MIN_TESSERACT_SCORE])

    def run() -> object:
        out: object = ocr._rapidocr(image)
        if reread:
            out = ocr._tesseract(every, "+".join(languages), ocr.SIGN_PAGE_MODE)
            if script in ocr.SCRIPT_LANGUAGES:
                out = ocr._tesseract(one, ocr.SCRIPT_LANGUAGES[script], ocr.SIGN_PAGE_MODE)
        return out

    return run


def _thai_sign(folder: Path) -> Path:
    spec = importlib.util.spec_from_file_location("make_sign", ROOT / "examples" / "make_sign.py")
    assert spec is not None and spec.loader is not None
    maker = importlib.util.module_from_spec(spec)
    sys.modules["make_sign"] = maker
    spec.loader.exec_module(maker)
    sign = next(s for s in maker.SIGN_SET if s.name == "chiang_mai")
    return maker.render_sign(sign.lines, folder / "chiang_mai.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        signs = [ROOT / "examples" / "luzern_sign.png", _thai_sign(Path(tmp))]
        print(f"{'image':<18} {'locate (s)':>11} {'OCR engines (s)':>16} {'ratio':>6}  target <= 1.5")
        for path in signs:
            image = Image.open(path)
            image.load()
            engines = _best(_engines(image), args.repeats)
            pipeline = _best(lambda image=image, path=path: locate_offline(image, str(path)), args.repeats)
            print(f"{path.stem:<18} {pipeline:>11.3f} {engines:>16.3f} {pipeline / engines:>6.2f}")


if __name__ == "__main__":
    main()
