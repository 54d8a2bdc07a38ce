"""Geographically balanced training subsets (GeoAgent's stratified sampling).

Step 1, per-country quotas: weight_c = 0.5·road share + 0.2·population share + 0.3·area share,
shares taken over the countries present in the dataset. Population and area come from the
offline country facts. Road length comes from a CSV the user gives (``country,road_km``);
without one, or for a country missing from it, the fallback is ``sqrt(population · area)``,
a proxy that grows with both how many people live in a country and how much land they
spread over (road networks scale with both), rescaled so the CSV and proxy values are
comparable. Quotas are rounded by largest remainder and capped by what the dataset holds,
the excess going to the other countries, so they always sum to the requested size.

Step 2, within a country: images are grouped into 1° cells and drawn with probability
∝ log(1 + population of the cell) (gazetteer population), shared among the cell's images,
so that dense cities do not swamp the subset but empty cells are rarely chosen. Cells
with no known population keep a tiny weight so a quota can always be filled.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from geosleuth.core.countries import country_info, resolve_country
from geosleuth.core.records import Sample

WEIGHTS = {"road": 0.5, "population": 0.2, "area": 0.3}
EMPTY_CELL_WEIGHT = 1e-6


@dataclass(frozen=True)
class CountryFacts:
    road_km: float
    population: float
    area_km2: float
    road_source: str  # "csv" | "proxy"


def read_road_csv(path: Path) -> dict[str, float]:
    """``country,road_km`` rows (country as code or name); bad rows raise with their line number."""
    out: dict[str, float] = {}
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        cols = {c.lower().strip(): c for c in reader.fieldnames or []}
        if "country" not in cols or "road_km" not in cols:
            raise ValueError(f"{path}: needs columns 'country' and 'road_km', got {reader.fieldnames}")
        for lineno, row in enumerate(reader, 2):
            code = resolve_country(row[cols["country"]])
            try:
                km = float(row[cols["road_km"]])
            except ValueError:
                raise ValueError(
                    f"{path}:{lineno}: road_km is not a number: {row[cols['road_km']]!r}"
                ) from None
            if code is None or km < 0:
                raise ValueError(f"{path}:{lineno}: unknown country or negative length: {row}")
            out[code] = km
    return out


def country_facts(codes: Sequence[str], road_km: dict[str, float] | None = None) -> dict[str, CountryFacts]:
    """Population, area and road length (CSV, else the proxy rescaled to the CSV's scale)."""
    road_km = road_km or {}
    base: dict[str, tuple[float, float]] = {}
    for code in codes:
        info = country_info(code)
        base[code] = (float(info.population), float(info.area_km2)) if info else (0.0, 0.0)
    proxy = {c: math.sqrt(p * a) for c, (p, a) in base.items()}
    both = [c for c in codes if c in road_km and proxy[c] > 0]
    scale = sum(road_km[c] for c in both) / sum(proxy[c] for c in both) if both else 1.0
    return {
        c: CountryFacts(
            road_km=road_km[c] if c in road_km else proxy[c] * scale,
            population=base[c][0],
            area_km2=base[c][1],
            road_source="csv" if c in road_km else "proxy",
        )
        for c in codes
    }


def country_weights(facts: dict[str, CountryFacts]) -> dict[str, float]:
    """0.5 / 0.2 / 0.3 mix of each country's share of road, population and area."""
    totals = {
        "road": sum(f.road_km for f in facts.values()),
        "population": sum(f.population for f in facts.values()),
        "area": sum(f.area_km2 for f in facts.values()),
    }
    out: dict[str, float] = {}
    for code, f in facts.items():
        values = {"road": f.road_km, "population": f.population, "area": f.area_km2}
        out[code] = sum(WEIGHTS[k] * (values[k] / totals[k] if totals[k] > 0 else 0.0) for k in WEIGHTS)
    if sum(out.values()) <= 0:  # no facts at all: fall back to equal weights
        return dict.fromkeys(facts, 1.0 / len(facts))
    return out


def allocate_quotas(weights: dict[str, float], available: dict[str, int], size: int) -> dict[str, int]:
    """Largest-remainder quotas proportional to weight, capped by availability, summing to ``size``."""
    if size > sum(available.values()):
        raise ValueError(f"asked for {size} samples but the dataset has {sum(available.values())}")
    quotas = dict.fromkeys(weights, 0)
    open_codes = sorted(c for c in weights if available.get(c, 0) > 0)
    remaining = size
    while remaining > 0:
        w = {c: weights[c] for c in open_codes}
        if sum(w.values()) <= 0:
            w = dict.fromkeys(open_codes, 1.0)
        total_w = sum(w.values())
        shares = {c: remaining * w[c] / total_w for c in open_codes}
        add = {c: int(math.floor(s)) for c, s in shares.items()}
        leftover = remaining - sum(add.values())
        for c in sorted(open_codes, key=lambda c: (-(shares[c] - add[c]), c))[:leftover]:
            add[c] += 1
        for c in open_codes:
            quotas[c] += add[c]
        overflow = sum(max(0, quotas[c] - available[c]) for c in open_codes)
        for c in open_codes:
            quotas[c] = min(quotas[c], available[c])
        open_codes = [c for c in open_codes if quotas[c] < available[c]]
        remaining = overflow
    return quotas


def cell_population(
    lats: NDArray[np.float64], lons: NDArray[np.float64], pops: NDArray[np.float64]
) -> dict[tuple[int, int], float]:
    """Total gazetteer population per 1° cell (floor of lat, lon)."""
    cells: dict[tuple[int, int], float] = defaultdict(float)
    keys_lat = np.floor(lats).astype(int)
    keys_lon = np.floor(lons).astype(int)
    for la, lo, p in zip(keys_lat.tolist(), keys_lon.tolist(), pops.tolist(), strict=True):
        cells[(la, lo)] += p
    return dict(cells)


def _cell(sample: Sample) -> tuple[int, int]:
    return (math.floor(float(sample.lat)), math.floor(float(sample.lon)))  # type: ignore[arg-type]


def draw_within_country(
    samples: list[Sample], quota: int, cells: dict[tuple[int, int], float], rng: np.random.Generator
) -> list[Sample]:
    """Weighted draw without replacement: each cell carries log(1 + pop), split among its images."""
    if quota >= len(samples):
        return list(samples)
    by_cell: dict[tuple[int, int], int] = defaultdict(int)
    for s in samples:
        by_cell[_cell(s)] += 1
    w = np.array(
        [max(math.log1p(cells.get(_cell(s), 0.0)), EMPTY_CELL_WEIGHT) / by_cell[_cell(s)] for s in samples]
    )
    idx = rng.choice(len(samples), size=quota, replace=False, p=w / w.sum())
    return [samples[i] for i in sorted(idx.tolist())]


@dataclass
class SampleResult:
    chosen: list[Sample]
    quotas: dict[str, int]
    weights: dict[str, float]
    facts: dict[str, CountryFacts]
    failed: list[dict[str, str]]


def stratified_sample(
    samples: Sequence[Sample],
    size: int,
    seed: int,
    cells: dict[tuple[int, int], float],
    road_km: dict[str, float] | None = None,
    country_of: Callable[[Sequence[Sample]], list[str | None]] | None = None,
) -> SampleResult:
    """Quotas per country, then cells by log-population; the same seed gives the same subset."""
    if size <= 0:
        raise ValueError("size must be positive")
    failed: list[dict[str, str]] = []
    usable = [s for s in samples if s.lat is not None and s.lon is not None]
    failed += [
        {"sample_id": s.id, "reason": "no coordinates"} for s in samples if s.lat is None or s.lon is None
    ]
    codes = (
        country_of(usable)
        if country_of
        else [resolve_country(s.labels["country"]) if s.labels.get("country") else None for s in usable]
    )
    groups: dict[str, list[Sample]] = defaultdict(list)
    for s, code in zip(usable, codes, strict=True):
        if code is None:
            failed.append({"sample_id": s.id, "reason": "country unknown"})
        else:
            groups[code].append(s)
    facts = country_facts(sorted(groups), road_km)
    weights = country_weights(facts)
    quotas = allocate_quotas(weights, {c: len(v) for c, v in groups.items()}, size)
    rng = np.random.default_rng(seed)
    chosen: list[Sample] = []
    for code in sorted(groups):
        chosen.extend(draw_within_country(groups[code], quotas[code], cells, rng))
    return SampleResult(chosen, quotas, weights, facts, failed)
