"""Offline geocoding bench: accuracy on real model answers, latency, and reverse throughput.

Accuracy: geocode the ``"city, country"`` of every parsable answer in the published
predictions (parsed with ``parse_answer``) and count the share that lands within 25 km of the
model's own coordinates: a model that names a city usually puts its coordinates in it, so a
geocoder that disagrees is (nearly always) the one that is wrong.

Speed, each beside a reference measured in the same run, as a ratio:
- ``gazetteer.search`` p50/p99 on those queries, and the ``geocode`` tool call through the
  registry (validation, provider thread hop, formatting) against the search inside it;
- ``get_gazetteer()`` per call against one ``importlib.metadata.version()`` call (what the old
  code paid per call, four times over);
- polygon reverse geocoding throughput against ``reverse_geocoder`` mode 2 (multi-process
  KD-tree, nearest GeoNames place only) on the GeoCLIP 100k coordinates.

Run "before" against another checkout by putting its ``src`` first on ``PYTHONPATH``, with
``GEOSLEUTH_DATA_DIR`` set so each code version builds its own index:
    PYTHONPATH=/path/to/main/src python bench/geocode_bench.py
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PREDICTIONS = ROOT / "tests" / "data" / "published_predictions"
POINTS = ROOT / ".." / "shared" / "fixtures" / "geoclip" / "coordinates_100K.csv"
WITHIN_KM = 25.0


def _queries(folder: Path) -> list[tuple[str, str, float, float]]:
    """(file, "city, country", lat, lon) for every answer that parses with a city and coordinates."""
    from geosleuth.core.parsing import parse_answer

    out = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").split("\n"):
            if not line.strip():
                continue
            pred = parse_answer(json.loads(line).get("solution_str") or "")
            if pred.city and pred.has_coords:
                query = f"{pred.city}, {pred.country}" if pred.country else pred.city
                out.append((path.stem, query, float(pred.lat), float(pred.lon)))  # type: ignore[arg-type]
    return out


def _ms(samples: list[float], q: float) -> float:
    return float(np.percentile(np.array(samples) * 1000.0, q))


def bench_accuracy(folder: Path, show_misses: int) -> list[str]:
    from geosleuth.core.geo import haversine_km
    from geosleuth.gazetteer import get_gazetteer

    gaz = get_gazetteer()
    rows = _queries(folder)
    if not rows:
        print(f"accuracy: skipped, no parsable answers under {folder}")
        return []
    by_file: dict[str, list[bool]] = {}
    misses = []
    for name, query, lat, lon in rows:
        found = gaz.search(query, limit=1)
        d = float(haversine_km(found[0].lat, found[0].lon, lat, lon)) if found else float("inf")
        by_file.setdefault(name, []).append(d <= WITHIN_KM)
        if d > WITHIN_KM:
            misses.append((d, query, found[0].name if found else None, found[0].kind if found else None))
    hits = [h for v in by_file.values() for h in v]
    for name, v in sorted(by_file.items()):
        print(f"  {name}: {np.mean(v):.1%} of {len(v)} within {WITHIN_KM:g} km")
    print(
        f"geocoded 'city, country' within {WITHIN_KM:g} km of the model's own coordinates: "
        f"{np.mean(hits):.2%} ({sum(hits)} of {len(hits)} parsable answers)"
    )
    for d, query, name, kind in sorted(misses, key=lambda m: -m[0])[:show_misses]:
        print(f"    miss {d:8.0f} km  {query!r} -> {name} ({kind})")
    return [q for _, q, _, _ in rows]


def _timed(fn: Callable[[], Any], n: int) -> list[float]:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def bench_latency(queries: list[str]) -> None:
    from geosleuth.gazetteer import get_gazetteer

    gaz = get_gazetteer()
    for q in queries[:200]:
        gaz.search(q, limit=5)
    search = []
    for q in queries:
        t = time.perf_counter()
        gaz.search(q, limit=5)
        search.append(time.perf_counter() - t)
    p50, p99 = _ms(search, 50), _ms(search, 99)
    print(f"gazetteer.search ({len(queries):,} queries, limit 5): p50 {p50:.3f} ms  p99 {p99:.3f} ms")

    async def tool_calls() -> list[float]:
        from geosleuth.tools import build_registry
        from geosleuth.tools.config import ToolSettings

        reg = build_registry(ToolSettings(cache={"backend": "none"}), names=["geocode"])
        for q in queries[:200]:
            await reg.call("geocode", {"address": q})
        times = []
        for q in queries:
            t = time.perf_counter()
            result = await reg.call("geocode", {"address": q})
            times.append(time.perf_counter() - t)
            if not result.ok and "no place" not in (result.error or "").lower():
                raise RuntimeError(f"geocode tool failed on {q!r}: {result.error}")
        return times

    calls = asyncio.run(tool_calls())
    c50 = _ms(calls, 50)
    print(
        f"geocode tool call through the registry: p50 {c50:.3f} ms  p99 {_ms(calls, 99):.3f} ms; "
        f"{c50 / p50:.2f}x the search inside it (target p50 < 0.4 ms: {'met' if c50 < 0.4 else 'NOT met'})"
    )


def bench_get_gazetteer(n: int = 20_000) -> None:
    from importlib.metadata import version

    from geosleuth.gazetteer import get_gazetteer

    get_gazetteer()
    ours = float(np.median(_timed(get_gazetteer, n))) * 1e6
    ref = float(np.median(_timed(lambda: version("numpy"), max(n // 20, 100)))) * 1e6
    print(
        f"get_gazetteer() once loaded: {ours:.2f} us per call; one importlib.metadata.version() "
        f"{ref:.1f} us; ratio {ours / ref:.3f}"
    )


def _points(n: int) -> tuple[np.ndarray, np.ndarray]:
    if POINTS.is_file():
        with POINTS.open() as fh:
            rows = list(csv.reader(fh))[1 : n + 1]
        arr = np.array([[float(r[0]), float(r[1])] for r in rows])
        return arr[:, 0], arr[:, 1]
    print(f"(fixture {POINTS} missing: uniform random points instead)")
    rng = np.random.default_rng(0)
    return rng.uniform(-60, 70, n), rng.uniform(-180, 180, n)


def bench_reverse(n: int, repeats: int) -> None:
    from geosleuth.gazetteer import get_gazetteer

    gaz = get_gazetteer()
    lats, lons = _points(n)
    gaz.reverse_batch(lats[:1000], lons[:1000])
    ours = min(_timed(lambda: gaz.reverse_batch(lats, lons), repeats))
    print(f"reverse_batch (polygons, {lats.size:,} points): {lats.size / ours:,.0f} points/s ({ours:.3f} s)")
    try:
        import reverse_geocoder as rg
    except ImportError:
        print("reverse_geocoder mode 2: skipped, the package is not installed")
        return
    coords = list(zip(lats.tolist(), lons.tolist(), strict=True))
    geocoder = rg.RGeocoder(mode=2, verbose=False)
    geocoder.query(coords[:1000])
    ref = min(_timed(lambda: geocoder.query(coords), repeats))
    print(
        f"reverse_geocoder mode 2 (nearest place only, same points): {lats.size / ref:,.0f} points/s "
        f"({ref:.3f} s); ratio {ref / ours:.2f}x (target >= 1.5x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--predictions", type=Path, default=PREDICTIONS, help="folder of *.jsonl answers")
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--show-misses", type=int, default=0)
    args = parser.parse_args()
    import geosleuth

    print(f"geosleuth from {Path(geosleuth.__file__).parent}")
    t = time.perf_counter()
    from geosleuth.gazetteer import get_gazetteer

    get_gazetteer()
    print(f"gazetteer ready in {time.perf_counter() - t:.2f} s")
    queries = bench_accuracy(args.predictions, args.show_misses)
    if queries:
        bench_latency(queries)
    bench_get_gazetteer()
    bench_reverse(args.points, args.repeats)


if __name__ == "__main__":
    main()
