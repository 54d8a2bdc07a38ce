"""Training rewards: pure functions, scalar or vectorised over NumPy arrays.

The same math is reused by the verl / TRL / ms-swift adapters. A failed parse is a ``NaN``
distance or a ``None`` prediction and always earns 0, never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from geosleuth.core import geo
from geosleuth.core.geo import DistanceMethod
from geosleuth.core.parsing import ParseMode, parse_answer
from geosleuth.core.records import Prediction

STEP_THRESHOLDS_KM: tuple[float, ...] = (0.5, 2.0, 10.0, 25.0, 200.0, 750.0)
STEP_VALUES: tuple[float, ...] = (1.0, 0.8, 0.6, 0.4, 0.2, 0.1)
"""Thinking-with-Map step reward: value for ``d <`` each threshold, 0 beyond the last."""

PIECEWISE_KNOTS_KM: tuple[float, ...] = (1.0, 25.0, 200.0)
PIECEWISE_VALUES: tuple[float, ...] = (1.0, 0.75, 0.2)
"""SpotAgent: 1 below 1 km, linear to 0.75 at 25 km and towards 0.2 at 200 km; 0 from 200 km on."""

SEMANTIC_LEVELS: tuple[str, ...] = ("country", "region", "precise")
SEMANTIC_ALPHAS: tuple[float, float, float] = (0.1, 0.6, 0.3)
SEMANTIC_GATES: tuple[float, float] = (0.7, 0.5)
COMBINED_WEIGHTS: tuple[float, float, float] = (1.5, 1.0, 0.5)
SemanticGating = Literal["paper", "released"]
"""``paper``: a level adds αᵢ·sᵢ only when sᵢ passes its own threshold (and every level above
passed); ``released``: GeoAgent's ``TripleFieldAccuracy`` adds every computed sᵢ, the
threshold only decides whether the next level is computed (0.69 at country adds 0.069)."""

GEOAGENT_SPATIAL_MAX_KM = 2000.0
"""GeoAgent's released ``GeoScoreAccuracy``: exp(−10·d/2000) below 2000 km, 0 from there."""
CONSISTENCY_LAMBDA = 8.0
CONSISTENCY_MU = 0.5
CONSISTENCY_LENGTH_RANGE: tuple[float, float] = (90.0, 200.0)
"""Eq. 9 constants as released (``ThinkAnswerConsistency``): characters of a level's reasoning,
min–max normalised between 90 and 200, p = 1/(1+exp(−8·(ℓ̂−0.5)))."""

Similarity = Callable[[str, str, str], float]
"""``(predicted, reference, level) -> similarity in [0, 1]``; plug an embedding cosine here."""


def _f64(values: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(values, dtype=np.float64)


def _scalar_or_array(out: NDArray[np.float64], like: ArrayLike) -> float | NDArray[np.float64]:
    return float(out) if np.ndim(like) == 0 else out


def step_reward(distance_km: ArrayLike) -> float | NDArray[np.float64]:
    """1 / 0.8 / 0.6 / 0.4 / 0.2 / 0.1 / 0 at 0.5 / 2 / 10 / 25 / 200 / 750 km (strict <)."""
    d = _f64(distance_km)
    idx = np.searchsorted(np.asarray(STEP_THRESHOLDS_KM), np.where(np.isfinite(d), d, np.inf), side="right")
    values = np.append(np.asarray(STEP_VALUES), 0.0)
    out = values[idx]
    return _scalar_or_array(np.where(d >= 0, out, 0.0), distance_km)


def piecewise_linear_reward(distance_km: ArrayLike) -> float | NDArray[np.float64]:
    """SpotAgent's piecewise-linear distance reward; 0 from 200 km on (200 km gives 0) and for failures."""
    d = _f64(distance_km)
    safe = np.where(np.isfinite(d) & (d >= 0), d, np.inf)
    out = np.interp(safe, PIECEWISE_KNOTS_KM, PIECEWISE_VALUES, left=1.0, right=0.0)
    out = np.where(safe >= PIECEWISE_KNOTS_KM[-1], 0.0, out)
    return _scalar_or_array(out, distance_km)


def spatial_reward(
    distance_km: ArrayLike, tau_km: float = 200.0, max_km: float | None = None
) -> float | NDArray[np.float64]:
    """GeoAgent's R_spa = exp(−d/τ), τ = 200 km; failures earn 0.

    ``max_km`` (released code: 2000 = 10·τ) sets the reward to 0 from that distance on.
    """
    if tau_km <= 0:
        raise ValueError("tau_km must be positive")
    d = _f64(distance_km)
    safe = np.where(np.isfinite(d) & (d >= 0), d, np.inf)
    out = np.exp(-safe / tau_km)
    if max_km is not None:
        out = np.where(safe >= max_km, 0.0, out)
    return _scalar_or_array(out, distance_km)


def hierarchical_reward(
    country_ok: ArrayLike, state_ok: ArrayLike, city_ok: ArrayLike, beta: float = 2.0, normalize: bool = False
) -> float | NDArray[np.float64]:
    """GeoVista's hierarchical reward as released: β² when the city is right, else β when the
    state is, else 1 when the country is, else 0.

    Each level is judged on its own (a right city with a wrong state still earns β²).
    ``normalize`` divides by β² so the reward lies in [0, 1].
    """
    c, s, t = (np.asarray(x, dtype=bool) for x in (country_ok, state_ok, city_ok))
    out = np.where(t, beta**2, np.where(s, beta, np.where(c, 1.0, 0.0))).astype(np.float64)
    if normalize:
        out = out / beta**2
    return _scalar_or_array(out, country_ok)


def default_similarity(predicted: str, reference: str, level: str) -> float:
    """String-normalisation similarity (accents, case, generic words, containment, token overlap).

    Countries resolve through aliases in any language first ("Deutschland" = "Germany").
    """
    from geosleuth.core.text import similarity

    if not predicted or not reference:
        return 0.0
    if level == "country":
        from geosleuth.core.countries import resolve_country

        a, b = resolve_country(predicted), resolve_country(reference)
        if a is not None and b is not None:
            return 1.0 if a == b else 0.0
    return similarity(predicted, reference)


MAX_NAME_CHARS = 1000
"""A place name is shorter: longer "names" (an untagged answer read whole) are cut before any
similarity runs, so one hostile rollout costs bounded work."""


def _clamped(similarity: Similarity, p: str | None, r: str | None, level: str) -> float:
    try:
        s = float(similarity(p[:MAX_NAME_CHARS], r[:MAX_NAME_CHARS], level)) if p and r else 0.0
    except Exception:  # noqa: BLE001 - a failing similarity backend scores 0, training goes on
        return 0.0
    return min(max(s, 0.0), 1.0) if math.isfinite(s) else 0.0


def semantic_reward(
    predicted: Mapping[str, str | None],
    reference: Mapping[str, str | None],
    similarity: Similarity = default_similarity,
    alphas: Sequence[float] = SEMANTIC_ALPHAS,
    gates: Sequence[float] = SEMANTIC_GATES,
    levels: Sequence[str] = SEMANTIC_LEVELS,
    gating: SemanticGating = "paper",
) -> float:
    """R_sem = Σ αᵢ·sᵢ over country / region / precise place, gated top-down.

    A level is looked at only if every level above passed its threshold (0.7 for country,
    0.5 for region). ``paper``: a level adds αᵢ·sᵢ only if sᵢ also passes its own threshold
    (the precise level has none); ``released``: it adds αᵢ·sᵢ whatever sᵢ is. A missing
    level scores 0 and closes the gate.
    """
    if gating not in ("paper", "released"):
        raise ValueError(f"unknown semantic gating {gating!r}; use 'paper' or 'released'")
    total = 0.0
    for i, level in enumerate(levels):
        s = _clamped(similarity, predicted.get(level), reference.get(level), level)
        passed = i >= len(gates) or s >= gates[i]
        if passed or gating == "released":
            total += alphas[i] * s
        if not passed:
            break
    return total


def length_weight(
    length: float,
    lam: float = CONSISTENCY_LAMBDA,
    mu: float = CONSISTENCY_MU,
    length_range: Sequence[float] = CONSISTENCY_LENGTH_RANGE,
    hard_cutoff: bool = False,
) -> float:
    """GeoAgent Eq. 9: pᵢ = 1/(1+exp(−λ(ℓ̂ᵢ−μ))), ℓ̂ᵢ the min–max-normalised reasoning length.

    ℓ̂ = (ℓ − ℓ_min)/(ℓ_max − ℓ_min) clipped to [0, 1]. ``hard_cutoff`` (released code) gives
    exactly 0 below ℓ_min and 1 above ℓ_max.
    """
    lo, hi = float(length_range[0]), float(length_range[1])
    if hi <= lo:
        raise ValueError("length_range must be (min, max) with max > min")
    if hard_cutoff and length < lo:
        return 0.0
    if hard_cutoff and length > hi:
        return 1.0
    norm = min(max((length - lo) / (hi - lo), 0.0), 1.0)
    return 1.0 / (1.0 + math.exp(-lam * (norm - mu)))


def consistency_reward(
    matches: Sequence[float],
    lengths: Sequence[float],
    alphas: Sequence[float] = SEMANTIC_ALPHAS,
    lam: float = CONSISTENCY_LAMBDA,
    mu: float = CONSISTENCY_MU,
    length_range: Sequence[float] = CONSISTENCY_LENGTH_RANGE,
    hard_cutoff: bool = False,
) -> float:
    """GeoAgent Eq. 8: R_con = Σ αᵢ·pᵢ·cᵢ, cᵢ ∈ {0, 1} whether level i's re-derived conclusion
    matches, pᵢ the length weight of level i's own reasoning (Eq. 9)."""
    if not (len(matches) == len(lengths) == len(alphas)):
        raise ValueError("matches, lengths and alphas need one value per level")
    return float(
        sum(
            a * length_weight(n, lam, mu, length_range, hard_cutoff) * float(c)
            for a, c, n in zip(alphas, matches, lengths, strict=True)
        )
    )


def _precise(prediction: Prediction) -> str | None:
    return prediction.poi or prediction.street or prediction.town or prediction.city or prediction.admin2


def _open_place(prediction: Prediction) -> str | None:
    """The answer's lone place of open level, when no level field already holds that name."""
    place = prediction.place
    named = (prediction.admin1, prediction.city, prediction.admin2, prediction.town, prediction.street)
    if not place or place in named or place == prediction.poi:
        return None
    return place


def semantic_levels(prediction: Prediction | None) -> dict[str, str | None]:
    """Country / region / precise-place texts of a parsed prediction.

    A lone place of open level ("Paris" in "Paris, France") is read as the precise place, the
    finest level it may be: this is the reading geocoding and the consistency judge use (the
    geocoding query is "Paris, France" whichever slot holds it). `semantic_readings` gives
    every reading, for rewards that judge the place at the level it matches.
    """
    if prediction is None:
        return {}
    precise = _precise(prediction) or _open_place(prediction)
    return {"country": prediction.country, "region": prediction.admin1, "precise": precise}


def semantic_readings(prediction: Prediction | None) -> list[dict[str, str | None]]:
    """Every country / region / precise reading of a parsed answer; one unless a place is open.

    "X, Country" does not say whether X is a city or a province (the parser leaves it in
    ``Prediction.place``). The place fills one empty slot at a time: the precise place (the
    `semantic_levels` reading) or, when the answer names no region, the region. A reward takes
    the reading that scores best; since the place fills one slot, no reading scores more than
    an answer that names the region and the place.
    """
    if prediction is None:
        return [{}]
    place = _open_place(prediction)
    base = semantic_levels(prediction)
    if place is None or prediction.admin1:
        return [base]
    return [base, {"country": prediction.country, "region": place, "precise": _precise(prediction)}]


def best_semantic_reward(
    readings: Sequence[Mapping[str, str | None]],
    reference: Mapping[str, str | None],
    similarity: Similarity = default_similarity,
    gating: SemanticGating = "paper",
) -> float:
    """:func:`semantic_reward` of the best reading of an answer (see `semantic_readings`)."""
    return max((semantic_reward(r, reference, similarity, gating=gating) for r in readings), default=0.0)


def combined_reward(
    spatial: ArrayLike,
    semantic: ArrayLike,
    consistency: ArrayLike = 0.0,
    weights: Sequence[float] = COMBINED_WEIGHTS,
) -> float | NDArray[np.float64]:
    """GeoAgent's R = 1.5·R_spa + 1.0·R_sem + 0.5·R_con (R_con comes from the caller)."""
    parts = [np.nan_to_num(_f64(x), nan=0.0) for x in (spatial, semantic, consistency)]
    out = weights[0] * parts[0] + weights[1] * parts[1] + weights[2] * parts[2]
    like = spatial if np.ndim(spatial) else (semantic if np.ndim(semantic) else consistency)
    return _scalar_or_array(np.asarray(out, dtype=np.float64), like)


def distance_reward(kind: str, distance_km: ArrayLike, **params: float) -> float | NDArray[np.float64]:
    """Dispatch by name: ``step``, ``piecewise``, ``spatial``."""
    fns: dict[str, Callable[..., float | NDArray[np.float64]]] = {
        "step": step_reward,
        "piecewise": piecewise_linear_reward,
        "spatial": spatial_reward,
    }
    if kind not in fns:
        raise ValueError(f"unknown distance reward {kind!r}; use one of {sorted(fns)}")
    return fns[kind](distance_km, **params)


def semantic_rewards(
    predicted: Sequence[Mapping[str, str | None]],
    reference: Sequence[Mapping[str, str | None]],
    similarity: Similarity = default_similarity,
    gating: SemanticGating = "paper",
) -> NDArray[np.float64]:
    """:func:`semantic_reward` over a batch (one value per sample)."""
    if len(predicted) != len(reference):
        raise ValueError(f"{len(predicted)} predictions for {len(reference)} references")
    return np.array(
        [semantic_reward(p, r, similarity, gating=gating) for p, r in zip(predicted, reference, strict=True)]
    )


def prediction_distance_km(
    prediction: Prediction | None, lat: float, lon: float, method: DistanceMethod = "haversine"
) -> float:
    """Distance from a parsed answer to the truth; NaN when the answer has no coordinates."""
    if prediction is None or not prediction.has_coords:
        return math.nan
    return float(geo.distance_km(prediction.lat, prediction.lon, lat, lon, method=method))


def text_distance_reward(
    text: str | None,
    lat: float,
    lon: float,
    kind: str = "step",
    mode: ParseMode = "robust",
    protocol: str | None = None,
    method: DistanceMethod = "haversine",
) -> float:
    """Parse a model answer and score its distance; anything unparseable earns 0."""
    prediction = parse_answer(text, mode=mode, protocol=protocol)
    return float(distance_reward(kind, prediction_distance_km(prediction, lat, lon, method)))
