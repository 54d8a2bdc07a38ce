"""How well the offline pipeline's confidence is calibrated, on the bundled sign set.

Renders every sign of ``examples/make_sign.py``'s `SIGN_SET` (40 cities and 5 script-only
signs, 15 scripts), locates each offline, and compares the stated confidence with how often
the answer is right at its own stated radius (the truth within ``radius_km`` of the answer):
a well calibrated 0.7 is right 7 times in 10. Prints a reliability table (bins of 0.1), the
expected calibration error ECE = sum over bins of (n_bin / n) * |accuracy - mean confidence|,
the Brier score, and beside them the same figures for a constant confidence equal to the
overall accuracy (the reference a calibrated score must beat on Brier).

``--fit`` also fits the calibration map of `geosleuth.agent.offline.calibrated` (a logistic map of
the evidence strength's log-odds) by maximum likelihood and prints its parameters, with the ECE
of leave-one-out fits (each sign scored by a map fitted without it), an honest estimate on signs
the fit did not see.

Usage: python bench/calibration_bench.py [--out results.json] [--fit]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from PIL import Image

from geosleuth.agent.offline import locate_offline
from geosleuth.core.geo import haversine_km

ROOT = Path(__file__).resolve().parents[1]
BINS = 10


@dataclass
class Outcome:
    name: str
    located: bool
    confidence: float | None
    strength: float | None  # the evidence strength before calibration
    radius_km: float | None
    distance_km: float | None
    right: bool
    seconds: float


def _maker():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("make_sign", ROOT / "examples" / "make_sign.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_sign"] = module
    spec.loader.exec_module(module)
    return module


def run_set(folder: Path) -> list[Outcome]:
    """Locate every sign of the set; an answer is right when the truth lies within its radius."""
    out = []
    for spec, path in _maker().render_set(folder):
        start = time.perf_counter()
        result = locate_offline(Image.open(path), str(path))
        pred = result.prediction
        seconds = time.perf_counter() - start
        if pred is None or pred.lat is None or pred.lon is None:
            out.append(Outcome(spec.name, False, None, None, None, None, False, seconds))
            continue
        distance = float(haversine_km(pred.lat, pred.lon, spec.lat, spec.lon))
        radius = pred.radius_km or 0.0
        right = distance <= radius
        out.append(
            Outcome(
                spec.name, True, pred.confidence, result.evidence_strength, radius, distance, right, seconds
            )
        )
    return out


def ece(pairs: list[tuple[float, bool]]) -> float:
    """Expected calibration error over equal-width bins of confidence."""
    total = 0.0
    for b in range(BINS):
        members = [(c, r) for c, r in pairs if min(int(c * BINS), BINS - 1) == b]
        if members:
            accuracy = sum(r for _, r in members) / len(members)
            mean = sum(c for c, _ in members) / len(members)
            total += len(members) / len(pairs) * abs(accuracy - mean)
    return total


def brier(pairs: list[tuple[float, bool]]) -> float:
    return sum((c - r) ** 2 for c, r in pairs) / len(pairs)


def report(outcomes: list[Outcome]) -> None:
    pairs = [(o.confidence or 0.0, o.right) for o in outcomes if o.located]
    for o in outcomes:
        where = f"{o.distance_km:8.1f} km off, ±{o.radius_km:g} km" if o.located else "    not located"
        conf = f"{o.confidence:.2f}" if o.confidence is not None else "  – "
        print(f"{o.name:<18} conf {conf}  {where:<30} {'right' if o.right else 'wrong'}  {o.seconds:5.1f} s")
    print(f"\n{'bin':<11} {'n':>3} {'mean conf':>10} {'accuracy':>9}")
    for b in range(BINS):
        members = [(c, r) for c, r in pairs if min(int(c * BINS), BINS - 1) == b]
        if members:
            mean = sum(c for c, _ in members) / len(members)
            acc = sum(r for _, r in members) / len(members)
            print(f"{b / BINS:.1f}–{(b + 1) / BINS:.1f}    {len(members):>3} {mean:>10.2f} {acc:>9.2f}")
    base = sum(r for _, r in pairs) / len(pairs)
    constant = [(base, r) for _, r in pairs]
    print(f"\nlocated {len(pairs)} of {len(outcomes)}; right at the stated radius {base:.2%}")
    print(f"ECE   {ece(pairs):.3f}   (a constant {base:.2f}: {ece(constant):.3f})")
    ratio = brier(pairs) / max(brier(constant), 1e-9)
    print(f"Brier {brier(pairs):.3f}   (a constant {base:.2f}: {brier(constant):.3f}; ratio {ratio:.2f})")


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def fit(points: list[tuple[float, bool]]) -> tuple[float, float]:
    """(a, b) maximising the likelihood of σ(a·logit(s) + b), a > 0 (a grid, then a finer grid)."""

    def loss(a: float, b: float) -> float:
        total = 0.0
        for s, right in points:
            p = min(max(_sigmoid(a * _logit(s) + b), 1e-9), 1 - 1e-9)
            total -= math.log(p if right else 1 - p)
        return total

    best = min(((a / 10, b / 10) for a in range(1, 41) for b in range(-30, 51)), key=lambda ab: loss(*ab))
    a0, b0 = best
    return min(
        (
            (a0 + da / 100, b0 + db / 100)
            for da in range(-10, 11)
            for db in range(-10, 11)
            if a0 + da / 100 > 0
        ),
        key=lambda ab: loss(*ab),
    )


def report_fit(outcomes: list[Outcome]) -> None:
    points = [(o.strength, o.right) for o in outcomes if o.located and o.strength is not None]
    a, b = fit(points)
    fitted = [(min(0.95, _sigmoid(a * _logit(s) + b)), r) for s, r in points]
    held_out = []
    for i, (s, r) in enumerate(points):
        ai, bi = fit(points[:i] + points[i + 1 :])
        held_out.append((min(0.95, _sigmoid(ai * _logit(s) + bi)), r))
    print(f"\nfit: CALIBRATION = ({a:.2f}, {b:.2f})")
    print(f"ECE fitted {ece(fitted):.3f}, leave-one-out {ece(held_out):.3f}; raw strength {ece(points):.3f}")
    print(f"Brier fitted {brier(fitted):.3f}, leave-one-out {brier(held_out):.3f}", end="")
    print(f"; raw strength {brier(points):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the per-sign outcomes as JSON")
    parser.add_argument("--fit", action="store_true", help="fit the calibration map and print it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = run_set(Path(tmp))
    report(outcomes)
    if args.fit:
        report_fit(outcomes)
    if args.out:
        args.out.write_text(json.dumps([asdict(o) for o in outcomes], indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
