"""Benchmark: score 100,000 predictions with the full default metric set, vectorised vs per-row.

Ground truth is the GeoCLIP gallery (``../shared/fixtures/geoclip/coordinates_100K.csv``); each
prediction is that point moved a seeded random distance (log-normal, median ~60 km) in a random
direction, and 2 % of predictions are failed parses (NaN). Both paths compute Acc@k for every
threshold preset, median / mean km (failures charged the maximum distance), GeoGuessr and
GeoScore, and country / admin1 / city accuracy by reverse-geocoding prediction and truth.
Distances are WGS-84 geodesics so the reference can use geopy per row, as published scripts do.

Run: ``.venv/bin/python bench/score_bench.py [--n 100000] [--reverse gazetteer|reverse_geocoder]``
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from geosleuth.core import metrics as M
from geosleuth.scoring.engine import Score, score_coordinates
from geosleuth.scoring.protocols import get_protocol

ROOT = Path(__file__).resolve().parents[1]
COORDS = ROOT / ".." / "shared" / "fixtures" / "geoclip" / "coordinates_100K.csv"
ReverseFn = Callable[[NDArray[np.float64], NDArray[np.float64]], Mapping[str, Any]]


def load_truth(n: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    with COORDS.open() as fh:
        rows = list(csv.DictReader(fh))[:n]
    return np.array([float(r["LAT"]) for r in rows]), np.array([float(r["LON"]) for r in rows])


def perturb(
    lat: NDArray[np.float64], lon: NDArray[np.float64], seed: int = 0
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Move each point a log-normal distance along a random bearing (great circle); 2 % fail."""
    rng = np.random.default_rng(seed)
    dist = rng.lognormal(mean=math.log(60.0), sigma=2.0, size=lat.size).clip(0.0, 19000.0)
    bearing = np.radians(rng.uniform(0, 360, lat.size))
    delta = dist / 6371.0088
    la, lo = np.radians(lat), np.radians(lon)
    la2 = np.arcsin(np.sin(la) * np.cos(delta) + np.cos(la) * np.sin(delta) * np.cos(bearing))
    lo2 = lo + np.arctan2(
        np.sin(bearing) * np.sin(delta) * np.cos(la), np.cos(delta) - np.sin(la) * np.sin(la2)
    )
    plat, plon = np.degrees(la2), (np.degrees(lo2) + 180.0) % 360.0 - 180.0
    failed = rng.random(lat.size) < 0.02
    plat[failed], plon[failed] = np.nan, np.nan
    return plat, plon


def reference_loop(
    plat: NDArray[np.float64],
    plon: NDArray[np.float64],
    tlat: NDArray[np.float64],
    tlon: NDArray[np.float64],
    thresholds: tuple[float, ...],
    reverse: ReverseFn,
) -> dict[str, float]:
    """What evaluation scripts usually do: one geopy call and one lookup per row, dict counters."""
    from geopy.distance import geodesic

    counts = {M.threshold_name(t): 0 for t in thresholds}
    levels = {"acc_country": 0, "acc_admin1": 0, "acc_city": 0}
    distances: list[float] = []
    geoguessr = geoscore = 0.0
    n = len(plat)
    for i in range(n):
        if math.isnan(plat[i]):
            distances.append(M.MAX_DISTANCE_KM)
            continue
        d = geodesic((tlat[i], tlon[i]), (plat[i], plon[i])).km
        distances.append(d)
        for t in thresholds:
            if d < t:
                counts[M.threshold_name(t)] += 1
        geoguessr += 5000.0 * math.exp(-d / 1492.7)
        geoscore += 5000.0 * math.exp(-10.0 * d / 18050.0)
        pred = reverse(np.array([plat[i]]), np.array([plon[i]]))
        true = reverse(np.array([tlat[i]]), np.array([tlon[i]]))
        same_country = str(pred["country_code"][0]) == str(true["country_code"][0])
        same_admin1 = same_country and str(pred["admin1"][0]) == str(true["admin1"][0])
        same_city = same_admin1 and str(pred["city"][0]) == str(true["city"][0])
        levels["acc_country"] += same_country
        levels["acc_admin1"] += same_admin1
        levels["acc_city"] += same_city
    distances.sort()
    mid = n // 2
    median = distances[mid] if n % 2 else (distances[mid - 1] + distances[mid]) / 2
    out = {k: 100.0 * v / n for k, v in counts.items()}
    out.update({k: 100.0 * v / n for k, v in levels.items()})
    out.update(
        {
            "median_km": median,
            "mean_km": sum(distances) / n,
            "geoguessr": geoguessr / n,
            "geoscore": geoscore / n,
        }
    )
    return out


def get_reverse(kind: str) -> ReverseFn:
    if kind.startswith("gazetteer"):
        from geosleuth.gazetteer import get_gazetteer

        gazetteer = get_gazetteer()
        return gazetteer.reverse_batch if kind == "gazetteer" else gazetteer.reverse_geocoder_batch  # type: ignore[no-any-return]
    import reverse_geocoder as rg

    rg.RGeocoder(mode=1, verbose=False)

    def rg_batch(lats: NDArray[np.float64], lons: NDArray[np.float64]) -> Mapping[str, Any]:
        res = rg.search(list(zip(lats.tolist(), lons.tolist(), strict=True)), mode=1, verbose=False)
        return {
            "country_code": [r["cc"] for r in res],
            "admin1": [r["admin1"] for r in res],
            "admin2": [r["admin2"] for r in res],
            "city": [r["name"] for r in res],
        }

    return rg_batch


def compare(ours: Score, ref: dict[str, float]) -> list[str]:
    """Differences beyond float noise: 1e-9 percentage points, 1e-6 km or points."""
    diffs = []
    for key, value in ref.items():
        mine = ours.metrics.get(key, math.nan)
        tolerance = 1e-6 if key.endswith("_km") or key.startswith("geo") else 1e-9
        if not abs(mine - value) <= tolerance:
            diffs.append(f"{key}: vectorised {mine!r} vs reference {value!r}")
    return diffs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="number of predictions (≤ 100,000)")
    parser.add_argument("--reference-n", type=int, default=0, help="rows for the per-row loop (0 = all)")
    parser.add_argument(
        "--reverse",
        choices=("gazetteer", "gazetteer-rg", "reverse_geocoder"),
        default="gazetteer",
        help="gazetteer: reverse_batch (country by polygon, the default protocol); gazetteer-rg: its "
        "reverse_geocoder_batch (nearest place, OSV-5M semantics); reverse_geocoder: the PyPI package",
    )
    args = parser.parse_args()

    tlat, tlon = load_truth(args.n)
    plat, plon = perturb(tlat, tlon)
    protocol = replace(get_protocol("default"), distance="geodesic", text_levels=())
    reverse = get_reverse(args.reverse)
    reverse(np.array([0.0]), np.array([0.0]))  # load the index outside the timings

    t0, c0 = time.perf_counter(), time.process_time()
    ours = score_coordinates(plat, plon, tlat, tlon, protocol, reverse)
    t_ours, c_ours = time.perf_counter() - t0, time.process_time() - c0

    m = args.reference_n or args.n
    t0, c0 = time.perf_counter(), time.process_time()
    ref = reference_loop(plat[:m], plon[:m], tlat[:m], tlon[:m], protocol.thresholds, reverse)
    scale = args.n / m
    t_ref, c_ref = (time.perf_counter() - t0) * scale, (time.process_time() - c0) * scale
    same_rows = (
        ours if m == args.n else score_coordinates(plat[:m], plon[:m], tlat[:m], tlon[:m], protocol, reverse)
    )
    diffs = compare(same_rows, ref)

    print(
        f"predictions: {args.n:,} (failed parses: {int(np.isnan(plat).sum()):,}); "
        f"reverse geocoder: {args.reverse}"
    )
    print(f"metrics: {len(ours.metrics)} values + {len(ours.ci95)} bootstrap CIs")
    print(f"vectorised (geosleuth): {t_ours:.3f} s wall, {c_ours:.3f} s CPU")
    label = "per-row reference loop" + ("" if m == args.n else f" (timed on {m:,} rows, scaled)")
    print(f"{label}: {t_ref:.3f} s wall, {c_ref:.3f} s CPU")
    print(f"speed-up: {t_ref / t_ours:.1f}x wall, {c_ref / c_ours:.1f}x CPU")
    print("numbers identical: " + ("yes" if not diffs else "NO"))
    for line in diffs:
        print("  " + line)
    for key in ("acc@0.5km", "acc@25km", "acc@750km", "acc_country", "acc_city", "median_km", "geoguessr"):
        print(f"  {key:>12}: {ours.to_dict()['metrics'][key]}")
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())
