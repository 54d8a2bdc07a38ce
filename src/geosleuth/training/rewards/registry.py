"""Every training reward as one named entry: its parameters, its paper form, its released form.

A `RewardDef` owns the parameters it accepts (with the paper's defaults), what ``released=true``
changes (parameters the authors' code sets differently, and a scorer that replays the
authors' own reading where it differs from the paper's), and where each comes from. A new
paper's reward is one new entry in `REGISTRY`; "``released=true`` works for every reward" is
checked over the registry (tests/training/test_training_reward_registry.py).

A scorer (`training.reward_scorers`) takes the resolved parameters and a `Rollouts` batch and
returns a `RewardBatch` (both in `training.rollouts`). Per-rollout problems (no answer, an
answer that cannot be geocoded, a verifier that failed) are collected in `BatchLog` and logged
once per batch (count plus an escaped example); the detail of each rollout is at DEBUG.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from geosleuth.core import reward_math
from geosleuth.training.rewards.rollouts import RewardBatch, Rollouts, Scorer
from geosleuth.training.rewards.scorers import (
    _score_annealed,
    _score_combined,
    _score_combined_released,
    _score_hierarchical,
    _score_hierarchical_released,
    _score_piecewise,
    _score_semantic,
    _score_semantic_released,
    _score_spatial,
    _score_spatial_released,
    _score_step,
    _score_step_released,
)

# --- the entries ---------------------------------------------------------------------------

COMMON_PARAMS: dict[str, Any] = {"released": False, "tool_bonus": 0.0, "tool_bonus_cap": 1}
"""Accepted by every reward: ``released`` and the tool-use bonus (off by default)."""


@dataclass(frozen=True)
class RewardDef:
    """One named reward: parameters with the paper's defaults, the paper and released scorers."""

    name: str
    summary: str
    paper: str
    params: Mapping[str, Any]
    score_paper: Scorer
    released_source: str | None = None
    """The authors' released function, or None when none was released (then the paper's form)."""
    released_params: Mapping[str, Any] = field(default_factory=dict)
    score_released: Scorer | None = None
    """A replay of the released reading; None: the paper scorer with `released_params`."""
    released_note: str = ""
    aliases: tuple[str, ...] = ()
    distance: bool = False

    def accepts(self) -> frozenset[str]:
        return frozenset(self.params) | frozenset(COMMON_PARAMS)

    def resolve(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults, then the released overrides when ``released`` is set, then what was given."""
        unknown = sorted(set(given) - self.accepts())
        if unknown:
            raise ValueError(
                f"reward {self.name!r} has no parameter {', '.join(unknown)}; "
                f"it accepts {', '.join(sorted(self.accepts()))}"
            )
        out = {**COMMON_PARAMS, **self.params}
        if _truthy(given.get("released", False)):
            out.update(self.released_params)
        out.update(given)
        out["released"] = _truthy(out["released"])
        return out

    def scorer(self, params: Mapping[str, Any]) -> Scorer:
        if params["released"] and self.score_released is not None:
            return self.score_released
        return self.score_paper


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


_SIMILARITY_PARAMS: dict[str, Any] = {"similarity": None, "similarity_model": None}
_GEOCODE_PARAMS: dict[str, Any] = {"geocode": True, "tool_settings": None}
_GEOAGENT_ORM = "HVision-NKU/GeoAgent swift/plugin/orm.py"

REGISTRY_ENTRIES: tuple[RewardDef, ...] = (
    RewardDef(
        name="step",
        summary="Thinking with Map step reward 1/0.8/0.6/0.4/0.2/0.1/0 at 0.5/2/10/25/200/750 km",
        paper="Thinking with Map (AMAP-ML), step reward",
        params={},
        score_paper=_score_step,
        released_source=(
            "AMAP-ML/Thinking-with-Map verl/verl/utils/reward_score/localization.py:compute_distance_score"
        ),
        score_released=_score_step_released,
        released_note=(
            "first top-level JSON object of the whole text with lat/lon/city/country; geopy WGS-84 geodesic"
        ),
        distance=True,
    ),
    RewardDef(
        name="piecewise",
        summary="SpotAgent piecewise-linear: 1 below 1 km, 0.75 at 25 km, towards 0.2 at 200 km, 0 beyond",
        paper="SpotAgent, distance reward",
        params={},
        score_paper=_score_piecewise,
        released_note="SpotAgent released no reward code: released=true is the paper's formula",
        aliases=("linear",),
        distance=True,
    ),
    RewardDef(
        name="spatial",
        summary="GeoAgent R_spa = exp(−d/τ), haversine R = 6371 km; text answers geocoded",
        paper="GeoAgent Eq. R_spa, Table 5 (τ = 200 km, R = 6371 km)",
        params={"tau_km": 200.0, "max_km": None, **_GEOCODE_PARAMS},
        score_paper=_score_spatial,
        released_source=f"{_GEOAGENT_ORM}:GeoScoreAccuracy",
        released_params={"max_km": reward_math.GEOAGENT_SPATIAL_MAX_KM},
        score_released=_score_spatial_released,
        released_note="first <answer> (else JSON FinalAnswer) geocoded; exp(−10·d/2000), 0 from 2000 km",
        distance=True,
    ),
    RewardDef(
        name="annealed",
        summary="exp(−d/τ(t)) with τ shrinking from tau_start_km to tau_end_km over anneal_steps (option)",
        paper="geosleuth option against tool-use collapse (not a paper's reward)",
        params={"tau_start_km": 2000.0, "tau_end_km": 200.0, "anneal_steps": 1000, **_GEOCODE_PARAMS},
        score_paper=_score_annealed,
        released_note="not a paper's reward: released=true changes nothing",
        distance=True,
    ),
    RewardDef(
        name="hierarchical",
        summary="GeoVista: β² if the city is right, else β if the state is, else 1 if the country is",
        paper="GeoVista, hierarchical reward (β = 2)",
        params={
            "beta": 2.0,
            "normalize": False,
            "match_threshold": 0.85,
            "verifier": None,
            **_SIMILARITY_PARAMS,
        },
        score_paper=_score_hierarchical,
        released_source="ekonwang/GeoVista verl/utils/reward_score/search_agent.py:compure_score_search",
        score_released=_score_hierarchical_released,
        released_note=(
            "rule on the text after the last 'assistant' (reasoning included); verifier fallback to the rule"
        ),
    ),
    RewardDef(
        name="semantic",
        summary="GeoAgent R_sem = Σ αᵢ·sᵢ, α = 0.1/0.6/0.3, gates 0.7/0.5",
        paper="GeoAgent Eq. R_sem",
        params={"gating": None, **_SIMILARITY_PARAMS},
        score_paper=_score_semantic,
        released_source=f"{_GEOAGENT_ORM}:TripleFieldAccuracy",
        score_released=_score_semantic_released,
        released_note=(
            "released gating; first <answer> or the whole text, empty parts dropped, "
            "extra parts joined with ';'"
        ),
    ),
    RewardDef(
        name="geo_similarity",
        summary="GeoAgent R = 1.5·R_spa + 1.0·R_sem + 0.5·R_con",
        paper="GeoAgent Eq. R",
        params={
            "tau_km": 200.0,
            "max_km": None,
            "weights": reward_math.COMBINED_WEIGHTS,
            "gating": None,
            **_GEOCODE_PARAMS,
            **_SIMILARITY_PARAMS,
        },
        score_paper=_score_combined,
        released_source=f"{_GEOAGENT_ORM}:GeoScoreAccuracy+TripleFieldAccuracy+ThinkAnswerConsistency",
        released_params={"max_km": reward_math.GEOAGENT_SPATIAL_MAX_KM},
        score_released=_score_combined_released,
        released_note="the released R_spa and R_sem readings (R_con: the judge's own released option)",
        aliases=("combined",),
    ),
)

REGISTRY: dict[str, RewardDef] = {}
for _entry in REGISTRY_ENTRIES:
    for _name in (_entry.name, *_entry.aliases):
        REGISTRY[_name] = _entry

REWARD_NAMES: tuple[str, ...] = tuple(REGISTRY)
DISTANCE_REWARDS: tuple[str, ...] = tuple(n for n, e in REGISTRY.items() if e.distance)
LEVEL_REWARDS: tuple[str, ...] = tuple(n for n, e in REGISTRY.items() if not e.distance)


def get_reward(name: str) -> RewardDef:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown reward {name!r}; use one of {', '.join(REWARD_NAMES)}") from None


@dataclass(frozen=True)
class RewardSpec:
    """A reward chosen by name, with its parameters (``tau_km``, ``beta``, ``match_threshold``…)."""

    name: str = "step"
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        get_reward(self.name).resolve(self.params)  # unknown names and parameters fail here

    @property
    def definition(self) -> RewardDef:
        return get_reward(self.name)

    def resolved(self) -> dict[str, Any]:
        return self.definition.resolve(self.params)

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
        parsed: dict[str, Any] = {}
        for part in filter(None, rest.split(",")):
            key, sep, raw = part.partition("=")
            if not sep:
                raise ValueError(f"reward parameter {part!r} must look like key=value")
            parsed[key.strip()] = _number(raw.strip())
        return cls(name.strip(), parsed)


def _number(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


_TOOL_CALL_TAG = re.compile(r"<tool_call>", re.I)


def tool_call_counts(batch: Rollouts) -> NDArray[np.float64]:
    """Tool calls per rollout: as the engine counted them, else ``<tool_call>`` tags in the text."""
    if batch.tool_calls is not None:
        return np.asarray(batch.tool_calls, dtype=np.float64)
    return np.array([len(_TOOL_CALL_TAG.findall(t or "")) for t in batch.texts], dtype=np.float64)


def apply_tool_bonus(params: Mapping[str, Any], batch: Rollouts, result: RewardBatch) -> RewardBatch:
    """Add ``tool_bonus``·min(calls, cap)/cap to rollouts whose reward is already positive.

    Paid only on top of a rewarded answer, so a policy cannot earn it by calling tools and
    answering badly. Off (0) by default.
    """
    bonus = float(params["tool_bonus"])
    if bonus == 0.0:
        return result
    cap = int(params["tool_bonus_cap"])
    if cap <= 0 or not math.isfinite(bonus):
        raise ValueError("tool_bonus must be finite and tool_bonus_cap positive")
    calls = np.minimum(tool_call_counts(batch), cap) / cap
    result.scores = result.scores + np.where(result.scores > 0, bonus * calls, 0.0)
    return result


def score_rollouts(spec: RewardSpec, batch: Rollouts) -> RewardBatch:
    """Score one batch with one reward; problems are logged once per batch."""
    params = spec.resolved()
    definition = spec.definition
    try:
        result = definition.scorer(params)(params, batch)
        return apply_tool_bonus(params, batch, result)
    finally:
        batch.log.flush()
