"""Rewards by name and parameters over whole batches: the one place the adapters share.

Each reward is one entry of `geosleuth.training.rewards.registry.REGISTRY` (parameters with the
paper's defaults, the paper scorer, the released scorer); this module is the entry point the
verl / TRL / ms-swift adapters call. A rollout's text is read by `geosleuth.training.rewards.reading`
(last answer wins; answers inside tool responses are ignored), distances are computed in one
vectorised call, and each item also gets hit flags at the published Acc@k thresholds and its
distance, which the engines log as metrics. `score_distance_one` scores a single rollout
without arrays (verl's per-rollout reward manager); it is tested against the batch path.

Names: ``step`` (Thinking-with-Map 0.5–750 km), ``piecewise`` / ``linear`` (SpotAgent),
``spatial`` (GeoAgent R_spa = exp(−d/τ); a text answer without coordinates is geocoded
through the tool layer), ``annealed`` (exp(−d/τ) with τ shrinking over training, an option),
``hierarchical`` (GeoVista 1/β/β²), ``semantic`` (GeoAgent R_sem), ``geo_similarity`` /
``combined`` (GeoAgent 1.5·R_spa + 1.0·R_sem + 0.5·R_con). ``released=true`` selects the
authors' released behaviour where it differs from the paper (see docs/training.md);
``tool_bonus`` adds an optional tool-use bonus to any of them.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from typing import Any

from geosleuth.core import reward_math
from geosleuth.core.geo import EARTH_RADIUS_KM, haversine_km
from geosleuth.core.records import Prediction
from geosleuth.core.released import GEOAGENT_RADIUS_KM
from geosleuth.training.rewards.reading import (
    MAX_PARSE_CHARS,
    answer_content,
    fast_coordinates,
    geoagent_levels,
    own_text,
    parse_rollout,
    rollout_levels,
    strip_tool_blocks,
    truth_latlon,
    truth_semantic,
)
from geosleuth.training.rewards.registry import (
    DISTANCE_REWARDS,
    LEVEL_REWARDS,
    REGISTRY,
    REWARD_NAMES,
    RewardDef,
    RewardSpec,
    score_rollouts,
)
from geosleuth.training.rewards.rollouts import (
    ACC_THRESHOLDS_KM,
    MISS_DISTANCE_KM,
    ConsistencyFn,
    RewardBatch,
    Rollouts,
    Verifier,
    acc_key,
)
from geosleuth.training.rewards.truth import GroundTruth

__all__ = [
    "ACC_THRESHOLDS_KM",
    "DISTANCE_REWARDS",
    "LEVEL_REWARDS",
    "MAX_PARSE_CHARS",
    "MISS_DISTANCE_KM",
    "REGISTRY",
    "REWARD_NAMES",
    "ConsistencyFn",
    "RewardBatch",
    "RewardDef",
    "RewardSpec",
    "Verifier",
    "acc_key",
    "answer_content",
    "fast_coordinates",
    "geoagent_levels",
    "own_text",
    "parse_rollout",
    "rollout_levels",
    "score_distance_one",
    "score_predictions",
    "score_texts",
    "strip_tool_blocks",
    "truth_semantic",
]

_ACC_KEYS: tuple[str, ...] = tuple(acc_key(t) for t in ACC_THRESHOLDS_KM)


def score_texts(
    spec: RewardSpec | str,
    texts: Sequence[str | None],
    truths: Sequence[Any],
    consistency_fn: ConsistencyFn | None = None,
    *,
    step: int | None = None,
    tool_calls: Sequence[int] | None = None,
) -> RewardBatch:
    """Read each rollout and score the batch; a bad ground truth raises (it is a dataset bug).

    ``step`` is the training step (the ``annealed`` reward's schedule); ``tool_calls`` the
    engine's count of tool calls per rollout (the tool-use bonus; else ``<tool_call>`` tags).
    """
    spec = RewardSpec.parse(spec)
    batch = Rollouts(
        list(texts),
        list(truths),
        reward=spec.name,
        consistency_fn=consistency_fn,
        step=step,
        tool_calls=None if tool_calls is None else list(tool_calls),
    )
    return score_rollouts(spec, batch)


def score_predictions(
    spec: RewardSpec,
    preds: Sequence[Prediction],
    truths: Sequence[GroundTruth],
    consistency: Sequence[float] | None = None,
    texts: Sequence[str | None] | None = None,
) -> RewardBatch:
    """Apply one reward to already parsed predictions (``texts``: the rollouts, for GeoAgent answers)."""
    spec = RewardSpec.parse(spec)
    batch = Rollouts(
        list(texts) if texts is not None else [None] * len(preds),
        list(truths),
        reward=spec.name,
        consistency_fn=None if consistency is None else (lambda _t, _g: list(consistency)),
    )
    batch.set_preds(preds)
    return score_rollouts(spec, batch)


_BOUNDARIES_KM: tuple[float, ...] = tuple(
    sorted({*ACC_THRESHOLDS_KM, *reward_math.STEP_THRESHOLDS_KM, *reward_math.PIECEWISE_KNOTS_KM})
)


def _distance_one(
    lat: float, lon: float, tlat: float, tlon: float, radius_km: float = EARTH_RADIUS_KM
) -> float:
    """Haversine with `math` (a NumPy call per rollout costs more: bench/reward_bench.py); NumPy
    decides near a threshold.

    `math` and NumPy's SIMD functions can differ in the last bit; close to a reward or Acc@k
    threshold the distance is recomputed exactly as the batch path does, so that flags and
    step rewards never depend on which path ran.
    """
    la1, la2 = math.radians(lat), math.radians(tlat)
    h = (
        math.sin((la2 - la1) / 2) ** 2
        + math.cos(la1) * math.cos(la2) * math.sin((math.radians(tlon) - math.radians(lon)) / 2) ** 2
    )
    d = 2 * radius_km * math.asin(math.sqrt(min(max(h, 0.0), 1.0)))
    for t in _BOUNDARIES_KM:
        if abs(d - t) <= 1e-9 * t:
            return float(haversine_km(lat, lon, tlat, tlon, radius_km=radius_km))
    return d


def _step_one(d: float) -> float:
    """`reward_math.step_reward` for one finite distance (same thresholds, same strict ``<``)."""
    i = bisect.bisect_right(reward_math.STEP_THRESHOLDS_KM, d)
    return reward_math.STEP_VALUES[i] if i < len(reward_math.STEP_VALUES) else 0.0


def _piecewise_one(d: float) -> float:
    """`reward_math.piecewise_linear_reward` for one finite distance, with `np.interp`'s arithmetic."""
    xs, ys = reward_math.PIECEWISE_KNOTS_KM, reward_math.PIECEWISE_VALUES
    if d >= xs[-1]:
        return 0.0
    if d < xs[0]:
        return 1.0
    j = bisect.bisect_right(xs, d) - 1
    if j == len(xs) - 1 or d == xs[j]:
        return ys[j]
    slope = (ys[j + 1] - ys[j]) / (xs[j + 1] - xs[j])
    return slope * (d - xs[j]) + ys[j]


_SCALAR_PATH: dict[str, Callable[[float], float]] = {
    "step": _step_one,
    "piecewise": _piecewise_one,
    "linear": _piecewise_one,
}
_SCALAR_NAMES = frozenset({*_SCALAR_PATH, "spatial"})
"""Rewards `score_distance_one` computes without arrays (paper form, no tool bonus)."""


def score_distance_one(spec: RewardSpec, text: str | None, truth: Any) -> dict[str, float]:
    """One rollout, one distance reward: the dict `RewardBatch.item_info` gives.

    The single-call path of verl's naive reward manager: ``step`` and ``piecewise`` in their
    paper form go without arrays (same parse, same thresholds; distances agree with the batch
    path to the last bit or two, see `_distance_one`); everything else is a batch of one.
    """
    params = spec.resolved()
    if spec.name not in _SCALAR_NAMES or params["released"] or params["tool_bonus"]:
        return score_texts(spec, [text], [truth]).item_info(0)
    hit = fast_coordinates(text)
    if hit is None:
        return score_texts(spec, [text], [truth]).item_info(0)  # the full parse, geocoding, logging
    tlat, tlon = truth_latlon(truth)
    if spec.name == "spatial":  # GeoAgent: R = 6371 km, exp(−d/τ), 0 from max_km when set
        tau = float(params["tau_km"])
        if not tau > 0:
            raise ValueError("tau_km must be positive")
        d = _distance_one(hit[0], hit[1], tlat, tlon, GEOAGENT_RADIUS_KM)
        max_km = params.get("max_km")
        score = 0.0 if max_km is not None and d >= float(max_km) else math.exp(-d / tau)
    else:
        d = _distance_one(hit[0], hit[1], tlat, tlon)
        score = _SCALAR_PATH[spec.name](d)
    info = {"score": score, "distance_km": d, "parsed": 1.0}
    for key, t in zip(_ACC_KEYS, ACC_THRESHOLDS_KM, strict=True):
        info[key] = 1.0 if d < t else 0.0
    return info
