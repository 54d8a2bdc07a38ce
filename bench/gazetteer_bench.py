"""Gazetteer loading: the figures its code comments used to quote, measured here, as ratios.

    python bench/gazetteer_bench.py [--runs 5]

| figure | reference |
|---|---|
| loading the saved reverse-geocoding KD-trees (`kdtrees.pkl`) | building the same trees |
| `import scipy` (a small batch's check of the saved files) | `import scipy.spatial` (the trees') |
| a small batch's brute-force nearest search, 10 points | `import scipy.spatial` alone |

Each figure is the best of N runs (noise only adds time); imports are timed in fresh processes.
"""

from __future__ import annotations

import argparse
import pickle
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

from geosleuth.core.geo import to_unit_vectors
from geosleuth.gazetteer import get_gazetteer
from geosleuth.gazetteer.nearest import brute_nearest
from geosleuth.gazetteer.saved import SAVED_TREES, kd_tree


def best(runs: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def import_seconds(module: str, runs: int) -> float:
    """Best wall time of ``import module`` in a fresh interpreter, less the bare interpreter's."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    return min(
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
        for _ in range(runs)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    gazetteer = get_gazetteer()
    path = gazetteer.data_dir / SAVED_TREES
    load = best(args.runs, lambda: pickle.loads(path.read_bytes()))  # noqa: S301 - our own build's file
    unit = to_unit_vectors(gazetteer._cities["lat"], gazetteer._cities["lon"])
    points = {
        "sphere": unit,
        "big": unit[gazetteer._big_city_index],
        "latlon": np.column_stack([gazetteer._cities["lat"], gazetteer._cities["lon"]]),
        "vertices": gazetteer._vertex_unit,
    }
    build = best(args.runs, lambda: [kd_tree(p) for p in points.values()])
    print(f"saved trees ({', '.join(points)}): load {load * 1e3:.1f} ms, build {build * 1e3:.1f} ms: "
          f"loading takes {load / build:.2f}x the build")  # fmt: skip
    scipy_alone = import_seconds("scipy", args.runs)
    spatial = import_seconds("scipy.spatial", args.runs)
    print(f"import scipy {scipy_alone * 1e3:.1f} ms, import scipy.spatial {spatial * 1e3:.1f} ms: "
          f"{scipy_alone / spatial:.2f}x")  # fmt: skip
    rng = np.random.default_rng(3)
    queries = to_unit_vectors(rng.uniform(-60, 70, 10), rng.uniform(-180, 180, 10))
    brute = best(args.runs, lambda: brute_nearest(gazetteer._city_unit, queries, 1))
    print(f"brute-force nearest place, 10 points: {brute * 1e3:.2f} ms, "
          f"{brute / spatial:.4f}x import scipy.spatial")  # fmt: skip


if __name__ == "__main__":
    main()
