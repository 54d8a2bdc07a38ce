"""What libpostal's address parser (the ``address`` extra) costs the offline answer.

Printed beside a reference measured in the same run: the cold load (data directory ready,
parser read into memory) and the resident memory it adds, against one RapidOCR call on the
example sign; the warm parse of a sign's text against the same OCR call (issue 40 holds the warm
offline answer to 2x RapidOCR's own call), and against geosleuth's line reading of the same text.

Usage: python bench/libpostal_bench.py [--repeat 200]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

from PIL import Image

from geosleuth.agent.street import street_query
from geosleuth.gazetteer import libpostal
from geosleuth.tools.ocr import run_ocr

ROOT = Path(__file__).resolve().parents[1]
SIGN = ROOT / "examples" / "luzern_sign.png"


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    if not libpostal.installed():
        sys.exit("the address extra is not installed: pip install 'geosleuth[address]'")
    image = Image.open(SIGN)
    image.load()
    run_ocr(image)  # the OCR model loads once, as in a warm server
    start = time.perf_counter()
    text = run_ocr(image).text
    ocr_s = time.perf_counter() - start
    libpostal.ensure_data()
    before = _rss_mb()
    start = time.perf_counter()
    parts = libpostal.parse_address(text)
    load_s = time.perf_counter() - start
    added = _rss_mb() - before
    start = time.perf_counter()
    for _ in range(args.repeat):
        libpostal.parse_address(text)
    parse_s = (time.perf_counter() - start) / args.repeat
    start = time.perf_counter()
    for _ in range(args.repeat):
        street_query(text, "Luzern")
    lines_s = (time.perf_counter() - start) / args.repeat
    print(f"sign text {text!r} -> {parts}")
    print(f"RapidOCR call {ocr_s * 1000:.0f} ms (the reference)")
    print(
        f"libpostal cold load {load_s:.2f} s ({load_s / ocr_s:.1f}x the OCR call), +{added:.0f} MB peak RSS"
    )
    print(f"libpostal warm parse {parse_s * 1000:.3f} ms ({parse_s / ocr_s:.5f}x the OCR call)")
    print(f"line reading {lines_s * 1000:.4f} ms (libpostal is {parse_s / lines_s:.0f}x it)")


if __name__ == "__main__":
    main()
