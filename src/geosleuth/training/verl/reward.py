"""verl reward functions (the plain ``compute_score`` path).

The recommended way to score rollouts in verl 0.9 is `verl_manager.GeoSleuthRewardManager`
(``reward.reward_manager.source=importlib``): it decodes only the tokens the policy
generated and scores concurrent rollouts in one vectorised call. This module keeps the plain
function for users who want verl's own ``naive`` manager: point
``reward.custom_reward_function.path`` at this file with ``name: compute_score``
(``compute_score_batch`` is the same scoring over lists, used by the manager).
``reward_kwargs`` choose the reward:

    reward_kwargs: {reward: step}                       # or piecewise / spatial / hierarchical …
    reward_kwargs: {reward: spatial, reward_params: {tau_km: 100}}
    reward_kwargs: {reward: geo_similarity, consistency: {base_url: http://…/v1, model: judge}}

Distance rewards through `compute_score` take a scalar path (no NumPy arrays, no pydantic
records for clean answers).

With the naive manager ``solution_str`` is the whole decoded response, tool responses
included and chat markers removed: the score comes from the model's last answer outside
``<tool_response>`` / ``<tool_call>`` / ``<observation>`` / tool-output fences, which holds
only when the chat template renders those markers (see `training.chat_template`); the
manager does not depend on that. Every result is ``{"score": …, "distance_km": …,
"parsed": 0/1, "acc@1km": 0/1, …}`` (verl logs the extra keys as reward metrics; all items
carry the same keys).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from geosleuth.training.rewards.batch import (
    DISTANCE_REWARDS,
    ConsistencyFn,
    RewardSpec,
    score_distance_one,
    score_texts,
)


def _spec(reward: Any, reward_params: Mapping[str, Any] | None, extra_info: Any) -> RewardSpec:
    """The reward named by the config, overridable per row through ``extra_info["reward"]``."""
    if isinstance(extra_info, Mapping) and extra_info.get("reward"):
        reward = extra_info["reward"]
    params = tuple(reward_params.items()) if reward_params else ()
    try:
        return _cached_spec(reward, params)
    except TypeError:  # unhashable (a mapping reward, list-valued parameters): parse each time
        return _build_spec(reward, params)


def _build_spec(reward: Any, params: tuple[tuple[str, Any], ...]) -> RewardSpec:
    spec = RewardSpec.parse(reward)
    if params:
        spec = RewardSpec(spec.name, {**spec.params, **dict(params)})
    return spec


_cached_spec = lru_cache(maxsize=256)(_build_spec)
"""Specs by (reward, parameters): verl's naive manager asks once per rollout with the same config."""


@lru_cache(maxsize=8)
def _judge_for(config_items: tuple[tuple[str, Any], ...]) -> ConsistencyFn:
    from geosleuth.training.rewards.consistency import ConsistencyJudge, JudgeConfig

    return ConsistencyJudge(JudgeConfig(**dict(config_items))).score_texts_sync


def _consistency_fn(consistency: Mapping[str, Any] | None) -> ConsistencyFn | None:
    if not consistency:
        return None
    return _judge_for(tuple(sorted((str(k), v) for k, v in dict(consistency).items())))


def compute_score(
    data_source: str | None,
    solution_str: str | None,
    ground_truth: Any,
    extra_info: Any = None,
    reward: Any = "step",
    reward_params: Mapping[str, Any] | None = None,
    consistency: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """One rollout -> ``{"score", "distance_km", "parsed", "acc@…km"}``; unparseable scores 0."""
    spec = _spec(reward, reward_params, extra_info)
    if spec.name in DISTANCE_REWARDS:
        return score_distance_one(spec, solution_str, ground_truth)
    batch = score_texts(spec, [solution_str], [ground_truth], _consistency_fn(consistency))
    return batch.item_info(0)


def compute_score_batch(
    data_sources: Sequence[str | None],
    solution_strs: Sequence[str | None],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    reward: Any = "step",
    reward_params: Mapping[str, Any] | None = None,
    consistency: Mapping[str, Any] | None = None,
    step: int | None = None,
    **kwargs: Any,
) -> list[dict[str, float]]:
    """The same dicts as `compute_score` for lists of rollouts, in order (verl's batch signature).

    Rows may pick different rewards through ``extra_info["reward"]``; each group is scored
    in one vectorised call. ``step`` is the training step (the ``annealed`` reward's schedule).
    """
    n = len(solution_strs)
    extras = list(extra_infos) if extra_infos is not None else [None] * n
    if len(ground_truths) != n or len(extras) != n:
        raise ValueError("solution_strs, ground_truths and extra_infos must have the same length")
    groups: dict[str, tuple[RewardSpec, list[int]]] = {}
    keys: dict[int, tuple[RewardSpec, str]] = {}  # by spec identity (cached specs repeat); holds them alive
    for i in range(n):
        spec = _spec(reward, reward_params, extras[i])
        known = keys.get(id(spec))
        if known is None:
            known = keys[id(spec)] = (
                spec,
                json.dumps([spec.name, dict(spec.params)], sort_keys=True, default=str),
            )
        groups.setdefault(known[1], (spec, []))[1].append(i)
    out: list[dict[str, float]] = [{} for _ in range(n)]
    judge = _consistency_fn(consistency)
    for spec, idx in groups.values():
        batch = score_texts(
            spec, [solution_strs[i] for i in idx], [ground_truths[i] for i in idx], judge, step=step
        )
        for i, info in zip(idx, batch.item_infos(), strict=True):
            out[i] = info
    return out
