"""Rewards by name and parameters over whole batches: the one place the adapters share.

Wraps the pure math of `geosleuth.core.rewards` (never re-implements it): a rollout's text is
parsed with the robust parser (last answer wins; answers inside tool responses are ignored),
distances are computed in one vectorised call, and the chosen reward is applied to the
whole batch. Each item also gets hit flags at the published Acc@k thresholds and its
distance, which the engines log as metrics.

Names: ``step`` (Thinking-with-Map 0.5–750 km), ``piecewise`` / ``linear`` (SpotAgent),
``spatial`` (exp(−d/τ)), ``hierarchical`` (GeoVista 1/β/β²), ``semantic`` (gated name
similarity), ``geo_similarity`` / ``combined`` (GeoAgent 1.5·spatial + 1.0·semantic +
0.5·consistency, the consistency term from a judge when one is given).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from geosleuth.core import rewards as core
from geosleuth.core.geo import haversine_km
from geosleuth.core.parsing import parse_answer
from geosleuth.core.records import Prediction
from geosleuth.training.truth import GroundTruth, parse_ground_truth

ACC_THRESHOLDS_KM: tuple[float, ...] = (0.5, 1.0, 2.0, 10.0, 25.0, 200.0, 750.0, 2500.0)
MISS_DISTANCE_KM = 20015.1
"""Half the Earth's circumference: the distance logged for an answer without coordinates."""

DISTANCE_REWARDS = ("step", "piecewise", "linear", "spatial")
LEVEL_REWARDS = ("hierarchical", "semantic", "geo_similarity", "combined")
REWARD_NAMES: tuple[str, ...] = DISTANCE_REWARDS + LEVEL_REWARDS

ConsistencyFn = Callable[[Sequence[str]], Sequence[float]]
"""Batch of rollout texts -> consistency scores in [0, 1] (see `training.consistency`)."""


def acc_key(threshold_km: float) -> str:
    """Metric name for one threshold: ``acc@1km``, ``acc@0.5km``."""
    return f"acc@{threshold_km:g}km"


@dataclass(frozen=True)
class RewardSpec:
    """A reward chosen by name, with its parameters (``tau_km``, ``beta``, ``match_threshold``…)."""

    name: str = "step"
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in REWARD_NAMES:
            raise ValueError(f"unknown reward {self.name!r}; use one of {', '.join(REWARD_NAMES)}")

    @classmethod
    def parse(cls, value: RewardSpec | str | Mapping[str, Any] | None) -> RewardSpec:
        """``"spatial"``, ``"spatial:tau_km=100"``, ``{"name": "spatial", "tau_km": 100}`` or a spec."""
        if value is None:
            return cls()
        if isinstance(value, RewardSpec):
            return value
        if isinstance(value, Mapping):
            params = {k: v for k, v in value.items() if k != "name"}
            return cls(str(value.get("name", "step")), params)
        name, _, rest = str(value).partition(":")
        params: dict[str, Any] = {}
        for part in filter(None, rest.split(",")):
            key, sep, raw = part.partition("=")
            if not sep:
                raise ValueError(f"reward parameter {part!r} must look like key=value")
            params[key.strip()] = _number(raw.strip())
        return cls(name.strip(), params)


def _number(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


@dataclass
class RewardBatch:
    """Scores and metrics for a batch of rollouts, in input order."""

    scores: NDArray[np.float64]
    distances_km: NDArray[np.float64]  # NaN where the answer had no coordinates
    parsed: NDArray[np.bool_]
    predictions: list[Prediction | None]  # None where the fast path read the coordinates directly

    def hits(self, threshold_km: float) -> NDArray[np.bool_]:
        return self.distances_km < threshold_km  # NaN compares False: a missing answer is a miss

    def item_info(self, i: int) -> dict[str, Any]:
        """verl's per-item dict: ``score`` plus numeric extras (all items share the keys)."""
        return self.item_infos()[i]

    def item_infos(self) -> list[dict[str, float]]:
        """All per-item dicts, built column-wise."""
        d = np.where(np.isnan(self.distances_km), MISS_DISTANCE_KM, self.distances_km)
        columns: dict[str, list[float]] = {
            "score": self.scores.tolist(),
            "distance_km": d.tolist(),
            "parsed": self.parsed.astype(np.float64).tolist(),
        }
        for t in ACC_THRESHOLDS_KM:
            columns[acc_key(t)] = self.hits(t).astype(np.float64).tolist()
        keys = list(columns)
        return [dict(zip(keys, row, strict=True)) for row in zip(*columns.values(), strict=True)]

    def metrics(self) -> dict[str, float]:
        """Batch means: Acc@k, parse rate, median distance over answers with coordinates."""
        out = {acc_key(t): float(self.hits(t).mean()) if len(self.scores) else 0.0 for t in ACC_THRESHOLDS_KM}
        finite = self.distances_km[np.isfinite(self.distances_km)]
        out["parse_rate"] = float(self.parsed.mean()) if len(self.scores) else 0.0
        out["median_distance_km"] = float(np.median(finite)) if finite.size else MISS_DISTANCE_KM
        return out


def parse_rollout(text: str | None) -> Prediction:
    """The model's final answer in a decoded rollout (robust mode: tool output never counts)."""
    return parse_answer(text or "", mode="robust")


def _distances(preds: Sequence[Prediction], truths: Sequence[GroundTruth]) -> NDArray[np.float64]:
    lat = np.array([p.lat if p.has_coords else np.nan for p in preds], dtype=np.float64)
    lon = np.array([p.lon if p.has_coords else np.nan for p in preds], dtype=np.float64)
    tlat = np.array([t.lat for t in truths], dtype=np.float64)
    tlon = np.array([t.lon for t in truths], dtype=np.float64)
    return np.asarray(haversine_km(lat, lon, tlat, tlon), dtype=np.float64)


def _level_ok(pred: str | None, ref: str | None, level: str, threshold: float) -> bool:
    return bool(pred and ref) and core.default_similarity(pred, ref, level) >= threshold  # type: ignore[arg-type]


def _truth_semantic(truth: GroundTruth) -> dict[str, str | None]:
    lv = truth.levels
    precise = lv.get("poi") or lv.get("street") or lv.get("town") or lv.get("city") or lv.get("admin2")
    return {"country": lv.get("country"), "region": lv.get("admin1"), "precise": precise}


def _hierarchical(spec: RewardSpec, preds: Sequence[Prediction], truths: Sequence[GroundTruth]) -> NDArray:
    thr = float(spec.params.get("match_threshold", 0.85))
    c = [
        _level_ok(p.country, t.levels.get("country"), "country", thr)
        for p, t in zip(preds, truths, strict=True)
    ]
    s = [
        _level_ok(p.admin1, t.levels.get("admin1"), "admin1", thr) for p, t in zip(preds, truths, strict=True)
    ]
    y = [_level_ok(p.city, t.levels.get("city"), "city", thr) for p, t in zip(preds, truths, strict=True)]
    # a finer level counts only when the coarser one is right (the hierarchy is a path)
    s = [a and b for a, b in zip(c, s, strict=True)]
    y = [a and b for a, b in zip(s, y, strict=True)]
    return np.asarray(
        core.hierarchical_reward(
            np.array(c),
            np.array(s),
            np.array(y),
            beta=float(spec.params.get("beta", 2.0)),
            normalize=bool(spec.params.get("normalize", False)),
        ),
        dtype=np.float64,
    )


def _semantic(preds: Sequence[Prediction], truths: Sequence[GroundTruth]) -> NDArray[np.float64]:
    return np.array(
        [
            core.semantic_reward(core.semantic_levels(p), _truth_semantic(t))
            for p, t in zip(preds, truths, strict=True)
        ],
        dtype=np.float64,
    )


def _answered(pred: Prediction) -> bool:
    """Coordinates or a named place; free text the parser kept only as an "address" does not count."""
    return pred.has_coords or any((pred.country, pred.admin1, pred.city, pred.town, pred.street, pred.poi))


def score_predictions(
    spec: RewardSpec,
    preds: Sequence[Prediction],
    truths: Sequence[GroundTruth],
    consistency: Sequence[float] | None = None,
) -> RewardBatch:
    """Apply one reward to parsed predictions; anything unparseable scores 0."""
    d = _distances(preds, truths)
    name, p = spec.name, dict(spec.params)
    if name == "step":
        scores = core.step_reward(d)
    elif name in ("piecewise", "linear"):
        scores = core.piecewise_linear_reward(d)
    elif name == "spatial":
        scores = core.spatial_reward(d, tau_km=float(p.get("tau_km", 200.0)))
    elif name == "hierarchical":
        scores = _hierarchical(spec, preds, truths)
    elif name == "semantic":
        scores = _semantic(preds, truths)
    else:
        con = np.zeros(len(preds)) if consistency is None else np.asarray(consistency, dtype=np.float64)
        weights = tuple(p.get("weights", core.COMBINED_WEIGHTS))
        scores = core.combined_reward(
            core.spatial_reward(d, tau_km=float(p.get("tau_km", 200.0))),
            _semantic(preds, truths),
            con,
            weights,
        )
    parsed = np.array([_answered(pr) for pr in preds], dtype=bool)
    return RewardBatch(np.atleast_1d(np.asarray(scores, dtype=np.float64)), d, parsed, list(preds))


def fast_coordinates(text: str | None) -> tuple[float, float] | None:
    """The common case without the full parser: the last answer block is one clean JSON object.

    Returns coordinates only when the robust parser would certainly return the same ones: the
    last ``<answer>`` block lies outside any tool block and holds a flat JSON object with
    numeric ``lat`` / ``lon`` in range. Anything else returns None (full parse).
    """
    if not text:
        return None
    end = text.rfind("</answer>")
    if end < 0 or "<answer>" in text[end:]:
        return None
    start = text.rfind("<answer>", 0, end)
    if start < 0 or "<" in text[start + 8 : end]:
        return None
    for tag in ("tool_response", "observation", "tool_call"):
        if text.rfind(f"<{tag}>", 0, start) > text.rfind(f"</{tag}>", 0, start):
            return None
    try:
        obj = json.loads(text[start + 8 : end])
    except ValueError:
        return None
    if type(obj) is not dict or any(type(v) in (dict, list) for v in obj.values()):
        return None
    if any(k in obj for k in ("latitude", "longitude", "lng", "long")):
        return None
    lat, lon = obj.get("lat"), obj.get("lon")
    if type(lat) not in (int, float) or type(lon) not in (int, float):
        return None
    if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
        return None
    return float(lat), float(lon)


def _truth_latlon(value: Any) -> tuple[float, float]:
    if type(value) is dict:
        lat, lon = value.get("lat"), value.get("lon")
        if (
            isinstance(lat, float)
            and isinstance(lon, float)
            and -90.0 <= lat <= 90.0
            and -180.0 <= lon <= 180.0
        ):
            return lat, lon
    gt = parse_ground_truth(value)
    return gt.lat, gt.lon


def score_distances_fast(spec: RewardSpec, texts: Sequence[str | None], truths: Sequence[Any]) -> RewardBatch:
    """Distance rewards for a batch: clean answers skip the full parser, the rest go through it."""
    n = len(texts)
    lat = np.full(n, np.nan)
    lon = np.full(n, np.nan)
    parsed = np.zeros(n, dtype=bool)
    preds: list[Prediction | None] = []
    for i, text in enumerate(texts):
        hit = fast_coordinates(text)
        if hit is None:
            pred = parse_rollout(text)
            parsed[i] = _answered(pred)
            if pred.has_coords:
                lat[i], lon[i] = pred.lat, pred.lon
            preds.append(pred)
        else:
            lat[i], lon[i] = hit
            parsed[i] = True
            preds.append(None)
    tl = np.array([_truth_latlon(t) for t in truths], dtype=np.float64).reshape(n, 2)
    d = np.asarray(haversine_km(lat, lon, tl[:, 0], tl[:, 1]), dtype=np.float64)
    if spec.name == "step":
        scores = core.step_reward(d)
    elif spec.name == "spatial":
        scores = core.spatial_reward(d, tau_km=float(spec.params.get("tau_km", 200.0)))
    else:
        scores = core.piecewise_linear_reward(d)
    return RewardBatch(np.atleast_1d(np.asarray(scores, dtype=np.float64)), d, parsed, preds)


def score_texts(
    spec: RewardSpec | str,
    texts: Sequence[str | None],
    truths: Sequence[Any],
    consistency_fn: ConsistencyFn | None = None,
) -> RewardBatch:
    """Parse each rollout and score the batch; a bad ground truth raises (it is a dataset bug)."""
    spec = RewardSpec.parse(spec)
    if len(texts) != len(truths):
        raise ValueError(f"{len(texts)} completions but {len(truths)} ground truths")
    if spec.name in DISTANCE_REWARDS:
        return score_distances_fast(spec, texts, truths)
    gts = [parse_ground_truth(t) for t in truths]
    preds = [parse_rollout(t) for t in texts]
    consistency = None
    if spec.name in ("geo_similarity", "combined") and consistency_fn is not None:
        consistency = list(consistency_fn([t or "" for t in texts]))
    return score_predictions(spec, preds, gts, consistency)
