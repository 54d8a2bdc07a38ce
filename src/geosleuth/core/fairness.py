"""Fairness figures: the disparity of an accuracy across groups, and over-prediction entropy.

Pure math over arrays (no I/O). A grouping's disparity compares the groups' accuracies (in
percent): best and worst group, their gap in points and ratio, the macro mean over groups, and a
percentile bootstrap interval of the gap. Over-prediction follows FairLocator (EMNLP 2025): a model
that answers one default city for a country has a low entropy H = -sum_k p_k ln p_k of the cities
it predicts for that country's images.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from geosleuth.core.metrics import percentile_interval

MIN_GROUP_N = 10
"""Groups with fewer samples are listed but enter no disparity: one sample is 0 or 100 %."""
MIN_ENTROPY_N = 5
"""Countries with fewer answered samples get no entropy: a handful of answers is always low."""


HEADLINE_KM = 25.0
"""The accuracy a disparity compares: Acc@25 km (city level, in every published threshold preset)."""


def headline_threshold(thresholds: Sequence[float]) -> float:
    """`HEADLINE_KM` when the protocol scores it, else its middle threshold (sorted)."""
    ordered = sorted(thresholds)
    if not ordered:
        raise ValueError("a protocol without distance thresholds has no headline threshold")
    return HEADLINE_KM if HEADLINE_KM in ordered else ordered[len(ordered) // 2]


@dataclass(frozen=True)
class Disparity:
    """How unequal one accuracy is across the groups of one grouping (accuracies in percent)."""

    metric: str
    headline: float | None
    best: str
    best_value: float
    worst: str
    worst_value: float
    gap: float  # best - worst, percentage points
    gap_ci95: tuple[float, float]
    ratio: float | None  # worst / best; None when the best is 0
    macro_mean: float
    n_groups: int
    excluded: tuple[str, ...]  # groups below the minimum size

    def as_dict(self) -> dict[str, object]:
        def num(x: float | None) -> float | None:
            return None if x is None or not math.isfinite(x) else round(float(x), 4)

        return {
            "metric": self.metric,
            "headline": num(self.headline),
            "best": {"group": self.best, "value": num(self.best_value)},
            "worst": {"group": self.worst, "value": num(self.worst_value)},
            "gap": num(self.gap),
            "gap_ci95": [num(self.gap_ci95[0]), num(self.gap_ci95[1])],
            "ratio": num(self.ratio),
            "macro_mean": num(self.macro_mean),
            "n_groups": self.n_groups,
            "excluded_small_groups": list(self.excluded),
        }


def disparity(
    hits: Mapping[str, ArrayLike],
    metric: str,
    headline: float | None = None,
    *,
    min_n: int = MIN_GROUP_N,
    n_boot: int = 1000,
    seed: int = 0,
) -> Disparity | None:
    """Disparity of per-group hit vectors; None when fewer than two groups have ``min_n`` samples.

    The gap's interval is a stratified percentile bootstrap of the statistic as defined: each
    group is resampled within itself (a resampled accuracy of n Bernoulli outcomes is
    Binomial(n, p̂) / n, drawn exactly) and the gap is max - min over the groups of each draw.
    Ties for best or worst go to the first name in sorted order.
    """
    arrays = {g: np.asarray(h, dtype=bool).ravel() for g, h in sorted(hits.items())}
    kept = {g: h for g, h in arrays.items() if h.size >= max(min_n, 1)}
    excluded = tuple(g for g in arrays if g not in kept)
    if len(kept) < 2:
        return None
    names = list(kept)
    n = np.array([kept[g].size for g in names])
    p = np.array([kept[g].mean() for g in names])
    best, worst = int(np.argmax(p)), int(np.argmin(p))
    rng = np.random.default_rng(seed)
    draws = rng.binomial(n[:, None], p[:, None], size=(len(names), n_boot)) / n[:, None]
    lo, hi = percentile_interval(100.0 * (draws.max(axis=0) - draws.min(axis=0)), 0.95)
    return Disparity(
        metric=metric,
        headline=headline,
        best=names[best],
        best_value=100.0 * p[best],
        worst=names[worst],
        worst_value=100.0 * p[worst],
        gap=100.0 * (p[best] - p[worst]),
        gap_ci95=(lo, hi),
        ratio=float(p[worst] / p[best]) if p[best] > 0 else None,
        macro_mean=100.0 * float(p.mean()),
        n_groups=len(names),
        excluded=excluded,
    )


@dataclass(frozen=True)
class CountryEntropy:
    """The cities predicted for one truth country and how spread they are."""

    country: str
    n: int
    entropy: float  # nats
    distinct: int
    top_city: str
    top_share: float


def prediction_entropy(
    truth_countries: Sequence[str | None], predicted_cities: Sequence[str | None], min_n: int = MIN_ENTROPY_N
) -> list[CountryEntropy]:
    """Per truth country with ``min_n`` answers or more, H = -sum_k p_k ln p_k over its predicted
    cities (rows without a truth country or a predicted city are skipped), lowest H first."""
    by_country: dict[str, Counter[str]] = {}
    for country, city in zip(truth_countries, predicted_cities, strict=True):
        if country and city:
            by_country.setdefault(country, Counter())[city] += 1
    return entropy_ranking(by_country, min_n)


def entropy_ranking(
    city_counts: Mapping[str, Mapping[str, int]], min_n: int = MIN_ENTROPY_N
) -> list[CountryEntropy]:
    """`prediction_entropy` from counts already made: per truth country, how many answers named
    each city (a report counts integer codes of the pairs, not a string per row). Countries with
    fewer than ``min_n`` answers are left out; lowest H first, then more answers, then the code;
    the top city's ties go to the lowest name."""
    out = []
    for country, counts in city_counts.items():
        total = sum(counts.values())
        if total < min_n:
            continue
        p = np.sort(np.fromiter(counts.values(), dtype=np.float64, count=len(counts))) / total
        top, top_count = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        out.append(
            CountryEntropy(
                country=country,
                n=total,
                entropy=float(-(p * np.log(p)).sum()),
                distinct=len(counts),
                top_city=top,
                top_share=top_count / total,
            )
        )
    return sorted(out, key=lambda e: (e.entropy, -e.n, e.country))
