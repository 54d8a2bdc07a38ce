"""Training rewards: pure functions, scalar or vectorised over NumPy arrays.

The same math is reused by the verl / TRL / ms-swift adapters. A failed parse is a ``NaN``
distance or a ``None`` prediction and always earns 0, never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

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
"""SpotAgent: 1 below 1 km, linear to 0.75 at 25 km and 0.2 at 200 km, 0 beyond."""

SEMANTIC_LEVELS: tuple[str, ...] = ("country", "region", "precise")
SEMANTIC_ALPHAS: tuple[float, float, float] = (0.1, 0.6, 0.3)
SEMANTIC_GATES: tuple[float, float] = (0.7, 0.5)
COMBINED_WEIGHTS: tuple[float, float, float] = (1.5, 1.0, 0.5)

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
    """SpotAgent's piecewise-linear distance reward; 0 beyond 200 km and for failures."""
    d = _f64(distance_km)
    safe = np.where(np.isfinite(d) & (d >= 0), d, np.inf)
    out = np.interp(safe, PIECEWISE_KNOTS_KM, PIECEWISE_VALUES, left=1.0, right=0.0)
    out = np.where(safe > PIECEWISE_KNOTS_KM[-1], 0.0, out)
    return _scalar_or_array(out, distance_km)


def spatial_reward(distance_km: ArrayLike, tau_km: float = 200.0) -> float | NDArray[np.float64]:
    """GeoAgent's R_spa = exp(−d/τ), τ = 200 km; failures earn 0."""
    if tau_km <= 0:
        raise ValueError("tau_km must be positive")
    d = _f64(distance_km)
    safe = np.where(np.isfinite(d) & (d >= 0), d, np.inf)
    return _scalar_or_array(np.exp(-safe / tau_km), distance_km)


def hierarchical_reward(
    country_ok: ArrayLike, state_ok: ArrayLike, city_ok: ArrayLike, beta: float = 2.0, normalize: bool = False
) -> float | NDArray[np.float64]:
    """GeoVista's hierarchical reward: 1 / β / β² for the finest correct level country / state / city.

    A correct finer level implies the coarser ones. ``normalize`` divides by β² so the reward
    lies in [0, 1].
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


def semantic_reward(
    predicted: Mapping[str, str | None],
    reference: Mapping[str, str | None],
    similarity: Similarity = default_similarity,
    alphas: Sequence[float] = SEMANTIC_ALPHAS,
    gates: Sequence[float] = SEMANTIC_GATES,
    levels: Sequence[str] = SEMANTIC_LEVELS,
) -> float:
    """R_sem = Σ αᵢ·sᵢ over country / region / precise place, gated top-down.

    A level contributes only if the level above reached its gate (0.7 for country, 0.5 for
    region); a missing level scores 0 and closes the gate.
    """
    total = 0.0
    for i, level in enumerate(levels):
        p, r = predicted.get(level), reference.get(level)
        try:
            s = float(similarity(p, r, level)) if p and r else 0.0
        except Exception:  # noqa: BLE001 - a failing similarity backend scores 0, training goes on
            s = 0.0
        s = min(max(s, 0.0), 1.0) if math.isfinite(s) else 0.0
        total += alphas[i] * s
        if i < len(gates) and s < gates[i]:
            break
    return total


def semantic_levels(prediction: Prediction | None) -> dict[str, str | None]:
    """Country / region / precise-place texts of a parsed prediction."""
    if prediction is None:
        return {}
    precise = prediction.poi or prediction.street or prediction.town or prediction.city or prediction.admin2
    return {"country": prediction.country, "region": prediction.admin1, "precise": precise}


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
) -> NDArray[np.float64]:
    """:func:`semantic_reward` over a batch (one value per sample)."""
    if len(predicted) != len(reference):
        raise ValueError(f"{len(predicted)} predictions for {len(reference)} references")
    return np.array([semantic_reward(p, r, similarity) for p, r in zip(predicted, reference, strict=True)])


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
