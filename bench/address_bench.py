"""Median error of the offline answer on signs that carry a street address and a postcode.

Held-out-style signs (not in ``examples/make_sign.py``'s set): each names its street, postcode
and city; many carry a phone number in national format, some of which also fit another
country's area code (Swiss "022" is Purkersdorf in Austria, "044" Wilhelmshaven in Germany).
Some postcodes have a centroid in the postcode package (US, AU, PL, BE, DK: the answer can move
onto the postcode), the others only a locality (CH, AT, FR, IT, DE: the postcode can tell
Frankfurt (Oder) from Frankfurt am Main, not a street). Each is photographed
(`make_sign.photograph`: JPEG, a slight turn, a brick facade) and read once by OCR; the
pipeline then ranks that same text three times, all in this one run: "ranked" as the ranking
was before issue 40 (the highest score wins, whatever named it, no postcodes), "names" with
`names_win` (the place the text names outranks a phone area elsewhere) but no postcode index,
"postcodes" with both (the postcode index built from ``countrystatecity-postal-codes``; absent
without the ``postcodes`` extra, with a note). The error is the great-circle distance to where
the address is.

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
    "new_york_zip": (
        ("CORNER DELI", "4 Pennsylvania Plaza", "New York, NY 10001", "(212) 465-6741"),
        40.7505,
        -73.9934,
    ),
    "chicago_zip": (
        ("SKYDECK CAFE", "233 S Wacker Dr", "Chicago, IL 60606", "(312) 875-9447"),
        41.8789,
        -87.6359,
    ),
    "boston_zip": (
        ("BEACON BOOKS", "24 Beacon St", "Boston, MA 02108", "(617) 725-4000"),
        42.3588,
        -71.0638,
    ),
    "melbourne": (
        ("FLINDERS CAFE", "Flinders Street", "Melbourne VIC 3000", "Tel. (03) 9610 7476"),
        -37.8183,
        144.9671,
    ),
    "warszawa": (
        ("KAWIARNIA CENTRALNA", "plac Defilad 1", "00-901 Warszawa", "tel. 22 656 76 00"),
        52.2318,
        21.0060,
    ),
    "bruxelles_laeken": (
        ("BRASSERIE ATOMIUM", "Place de l'Atomium 1", "1020 Bruxelles", "Tél. 02 475 47 75"),
        50.8949,
        4.3415,
    ),
    "kobenhavn": (
        ("CAFE TIVOLI", "Vesterbrogade 3", "1620 Kobenhavn V", "Tlf. 33 15 10 01"),
        55.6737,
        12.5681,
    ),
    "frankfurt_oder": (
        ("APOTHEKE AM MARKT", "Karl-Marx-Strasse 1", "15230 Frankfurt", "Tel. 0335 55 22 10"),
        52.3471,
        14.5506,
    ),
}
"""Name -> (sign lines, latitude, longitude of the address: the city's GeoNames centre for the
Swiss, Austrian, French and Italian signs, the building for the others)."""


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


def _postcode_source(result: offline.OfflineResult) -> str:
    """Which kind of postcode point the answer used: a package centroid, a locality, or none."""
    said = " ".join(result.prediction.evidence if result.prediction else [])
    for kind in ("postcode centroid", "locality centroid"):
        if kind in said:
            return f"a {kind}"
    return "no postcode"


def _unranked(ranked: list[offline.Candidate]) -> tuple[list[offline.Candidate], list[str]]:
    return ranked, []


def _median_line(label: str, errors: list[float], reference: list[float]) -> str:
    median, ref = statistics.median(errors), statistics.median(reference)
    ratio = f" ({median / ref:.2f} of ranked)" if ref > 0 else ""
    return f"median error {label} {median:.1f} km{ratio}"


def main() -> None:
    from geosleuth.gazetteer import get_gazetteer
    from geosleuth.gazetteer.postcodes import INSTALL_HINT, get_postcode_index

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--signs", default=",".join(SIGNS))
    args = parser.parse_args()
    maker = _maker()
    postcodes = get_postcode_index(get_gazetteer().data_dir)
    if postcodes is None:
        print(f"no postcode index ({INSTALL_HINT}): the postcodes column repeats the names column")
    errors: dict[str, list[float]] = {"ranked": [], "names": [], "postcodes": []}
    inside = dict.fromkeys(errors, 0)  # answers whose circle holds the address
    radius_names: list[float] = []
    radius_postcodes: list[float] = []
    groups: list[str] = []  # which kind of postcode point each answer used
    print(f"{'sign':<22} {'ranked km':>10} {'names km':>9} {'postcode km':>12} {'radius':>7}  answer")
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
                ranked = offline.locate_offline(image, str(photo), ocr=read, postcodes=None)
            named = offline.locate_offline(image, str(photo), ocr=read, postcodes=None)
            new = offline.locate_offline(image, str(photo), ocr=read, postcodes=postcodes)
            for key, result in (("ranked", ranked), ("names", named), ("postcodes", new)):
                errors[key].append(_error_km(result, lat, lon))
                radius = result.prediction.radius_km if result.prediction else None
                inside[key] += radius is not None and errors[key][-1] <= radius
            radius_names.append(named.prediction.radius_km or 0.0 if named.prediction else 0.0)
            radius_postcodes.append(new.prediction.radius_km or 0.0 if new.prediction else 0.0)
            groups.append(_postcode_source(new))
            pred = new.prediction
            answer = pred.city or pred.country_code if pred else "none"
            radius = f"{pred.radius_km:.1f}" if pred and pred.radius_km else "–"
            row = " ".join(
                f"{errors[k][-1]:>{w}.1f}" for k, w in (("ranked", 10), ("names", 9), ("postcodes", 12))
            )
            print(f"{name:<22} {row} {radius:>7}  {answer}  ({len(new.conflicts)})")
    reference = errors["ranked"]
    print(f"median error ranked {statistics.median(reference):.1f} km (the reference)")
    print(_median_line("names (no postcode index)", errors["names"], reference))
    print(_median_line("postcodes (index present)", errors["postcodes"], reference))
    before, after = statistics.median(errors["names"]), statistics.median(errors["postcodes"])
    print(
        f"postcode index: median error before {before:.1f} km, after {after:.1f} km"
        + (f" (after / before {after / before:.2f})" if before > 0 else "")
    )
    print(" ".join(f"mean {k} {statistics.mean(v):.1f} km" for k, v in errors.items()))
    print(" ".join(f"within its radius {k} {inside[k]}/{len(v)}" for k, v in errors.items()))
    radii = [statistics.median(r) for r in (radius_names, radius_postcodes)]
    print(f"median radius names {radii[0]:.1f} km, postcodes {radii[1]:.1f} km")
    for group in dict.fromkeys(groups):
        rows = [i for i, g in enumerate(groups) if g == group]
        pick = lambda values, rows=rows: statistics.median([values[i] for i in rows])  # noqa: E731
        print(
            f"signs answered by {group} ({len(rows)}): median error names {pick(errors['names']):.1f} km, "
            f"postcodes {pick(errors['postcodes']):.1f} km; median radius names {pick(radius_names):.1f} km, "
            f"postcodes {pick(radius_postcodes):.1f} km"
        )


if __name__ == "__main__":
    main()
