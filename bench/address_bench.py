"""Median error of the offline answer on signs that carry a street address and a postcode.

Held-out-style signs (not in ``examples/make_sign.py``'s set): each names its street, postcode
and city, and most carry a phone number in national format, some of which also fit another
country's area code (Swiss "022" is Purkersdorf in Austria, "044" Wilhelmshaven in Germany) or
another city of the same country. Each is photographed (`make_sign.photograph`: JPEG, a slight
turn, a brick facade) and read once by OCR; the pipeline then ranks that same text twice:
"before" with the ranking as it was (the highest score wins, whatever named it), "after" with
`names_win` (the place the text names outranks a phone area elsewhere). Both figures come from
this one run; the error is the great-circle distance to the city's GeoNames centre.

Usage: python bench/address_bench.py [--signs luzern_geneva_phone,bern_zurich_phone]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

from PIL import Image

from geosleuth.agent import offline
from geosleuth.core.geo import haversine_km
from geosleuth.tools.ocr import run_ocr

ROOT = Path(__file__).resolve().parents[1]
SIGNS: dict[str, tuple[tuple[str, ...], float, float]] = {
    "luzern_geneva_phone": (
        ("CAFÉ ALPENBLICK", "Hertensteinstrasse 12", "6004 Luzern", "Tel. 022 310 45 67"),
        47.0502,
        8.3093,
    ),
    "bern_zurich_phone": (
        ("BÄCKEREI MÜLLER", "Marktgasse 5", "3011 Bern", "Tel. 044 211 22 33"),
        46.9481,
        7.4474,
    ),
    "zurich_geneva_phone": (
        ("UHREN HUBER", "Bahnhofstrasse 45", "8001 Zürich", "Tel. 022 700 12 12"),
        47.3769,
        8.5417,
    ),
    "graz": (
        ("GASTHAUS ZUR LINDE", "Herrengasse 7", "8010 Graz", "Tel. 0316 81 20 45"),
        47.0707,
        15.4395,
    ),
    "lyon": (
        ("BOULANGERIE DUPONT", "12 Rue de la République", "69002 Lyon", "Tél. 04 78 42 10 10"),
        45.7640,
        4.8357,
    ),
    "bologna": (
        ("TRATTORIA DA MARIO", "Via Rizzoli 3", "40125 Bologna", "Tel. 051 23 45 67"),
        44.4949,
        11.3426,
    ),
    "salzburg": (
        ("CAFÉ MOZART", "Getreidegasse 9", "5020 Salzburg", "Tel. 0662 84 43 13"),
        47.7994,
        13.0440,
    ),
    "basel": (
        ("BUCHHANDLUNG ROTH", "Freie Strasse 20", "4001 Basel", "Tel. 061 261 22 33"),
        47.5584,
        7.5733,
    ),
}
"""Name -> (sign lines, city latitude, city longitude)."""


def _maker() -> Any:
    spec = importlib.util.spec_from_file_location("make_sign", ROOT / "examples" / "make_sign.py")
    assert spec is not None and spec.loader is not None
    maker = importlib.util.module_from_spec(spec)
    sys.modules["make_sign"] = maker
    spec.loader.exec_module(maker)
    return maker


def _error_km(result: offline.OfflineResult, lat: float, lon: float) -> float:
    pred = result.prediction
    if pred is None or pred.lat is None or pred.lon is None:
        return 20_037.5  # no answer: half the Earth's circumference, the worst an answer can be
    return float(haversine_km(pred.lat, pred.lon, lat, lon))


def _unranked(ranked: list[offline.Candidate]) -> tuple[list[offline.Candidate], list[str]]:
    return ranked, []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--signs", default=",".join(SIGNS))
    args = parser.parse_args()
    maker = _maker()
    before: list[float] = []
    after: list[float] = []
    print(f"{'sign':<22} {'before km':>10} {'after km':>9} {'radius':>7}  answer after  (conflicts)")
    with tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(args.signs.split(",")):
            lines, lat, lon = SIGNS[name]
            drawn = maker.render_sign(lines, Path(tmp) / f"{name}.png")
            photo = maker.photograph(
                drawn, Path(tmp) / f"{name}.jpg", angle=(-3.0, 2.5, -2.0, 3.5)[i % 4], seed=i
            )
            image = Image.open(photo)
            image.load()
            report = run_ocr(image)

            def read(_image: Image.Image, report: Any = report) -> Any:
                return report

            with mock.patch.object(offline, "names_win", _unranked):
                old = offline.locate_offline(image, str(photo), ocr=read)
            new = offline.locate_offline(image, str(photo), ocr=read)
            before.append(_error_km(old, lat, lon))
            after.append(_error_km(new, lat, lon))
            pred = new.prediction
            answer = pred.city or pred.country_code if pred else "none"
            radius = f"{pred.radius_km:.0f}" if pred and pred.radius_km else "–"
            told = len(new.conflicts)
            print(f"{name:<22} {before[-1]:>10.1f} {after[-1]:>9.1f} {radius:>7}  {answer}  ({told})")
    old_median, new_median = statistics.median(before), statistics.median(after)
    print(f"median error before {old_median:.1f} km, after {new_median:.1f} km", end="")
    print(f" (after / before {new_median / old_median:.2f})" if old_median > 0 else "")
    print(f"mean error before {statistics.mean(before):.1f} km, after {statistics.mean(after):.1f} km")


if __name__ == "__main__":
    main()
