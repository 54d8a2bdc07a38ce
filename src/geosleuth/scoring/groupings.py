"""`geosleuth score --by income|m49_region|m49_subregion|economy|settlement`: groups of the truth.

A row's group comes from its truth, not from a column: the truth's country label (resolved
to ISO alpha-2), else the country its truth point lies in (the gazetteer's borders), mapped by
`geosleuth.core.country_groups`; the settlement class from the truth point. Rows are collected
as they stream (a country code and two floats each) and grouped once at the end; the disparity
of the headline accuracy across the groups comes with them.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from geosleuth.core.countries import resolve_country
from geosleuth.core.country_groups import COUNTRY_GROUPINGS, GROUPINGS, country_group, settlement_classes
from geosleuth.core.fairness import disparity, headline_threshold
from geosleuth.core.metrics import threshold_name
from geosleuth.scoring.columnstore import Growing, Interned
from geosleuth.scoring.io import Truth
from geosleuth.scoring.results import ScoreArrays


class TruthGroups:
    """Collects what a grouping of the truth needs, row by row, and labels every row at the end."""

    def __init__(self, grouping: str) -> None:
        if grouping not in GROUPINGS:
            raise ValueError(f"{grouping!r} is not a grouping of the truth ({', '.join(GROUPINGS)})")
        self.grouping = grouping
        self.country = Interned()
        self.lat = Growing(np.float64)
        self.lon = Growing(np.float64)

    def add(self, truth: Truth | None) -> None:
        label = truth.labels.get("country") if truth is not None else None
        self.country.append(label if self.grouping in COUNTRY_GROUPINGS else None)
        self.lat.append(truth.lat if truth is not None and truth.lat is not None else math.nan)
        self.lon.append(truth.lon if truth is not None and truth.lon is not None else math.nan)

    def interned(self, missing: str) -> Interned:
        """Every row's group (``missing`` where none can be found) as one interned column."""
        labels = self._labels()
        out = Interned()
        for value in labels:
            out.append(value or missing)
        return out

    def _labels(self) -> NDArray[np.object_]:
        lat, lon = self.lat.array(), self.lon.array()
        if self.grouping == "settlement":
            from geosleuth.gazetteer import get_gazetteer

            population, dist = get_gazetteer().place_population_batch(lat, lon)
            return settlement_classes(population, dist)
        codes = np.array([resolve_country(t) or "" for t in self.country.table], dtype=object)
        country = codes[self.country.column.array()]
        todo = np.flatnonzero((country == "") & np.isfinite(lat) & np.isfinite(lon))
        if todo.size:
            from geosleuth.gazetteer import get_gazetteer

            country[todo], _ = get_gazetteer().country_batch(lat[todo], lon[todo])
        groups = {code: country_group(self.grouping, code) for code in set(country)}
        return np.array([groups[c] for c in country], dtype=object)


def headline_name(arrays: ScoreArrays) -> str | None:
    """The accuracy a disparity compares: Acc at `headline_threshold` of the distance thresholds
    scored, else the first accuracy the protocol scores (levels, choices)."""
    kms = [float(k[4:-2]) for k in arrays.hits if k.startswith("acc@") and k.endswith("km")]
    if kms:
        return threshold_name(headline_threshold(kms))
    return next(iter(arrays.hits), None)


def group_disparity(groups: Interned, arrays: ScoreArrays, missing: str) -> dict[str, object] | None:
    """`geosleuth.core.fairness.disparity` of the headline accuracy over the groups (rows without
    a group left out); None when there is no accuracy or fewer than two large enough groups."""
    name = headline_name(arrays)
    if name is None:
        return None
    hits = arrays.hits[name]
    scored = arrays.scored.get(name, np.ones(hits.size, dtype=bool))
    labels = groups.values()
    keep = scored & (labels != missing)
    by_group = {g: hits[keep & (labels == g)] for g in set(labels[keep])}
    headline = 100.0 * float(hits[scored].mean()) if scored.any() else None
    result = disparity(by_group, name, headline)
    return result.as_dict() if result else None
