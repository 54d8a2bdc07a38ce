"""TRL ``GRPOTrainer`` reward functions.

TRL calls each reward function as ``f(prompts=…, completions=…, completion_ids=…, **columns)``
where ``columns`` are the dataset's other columns repeated per generation, plus (recent TRL)
``trainer_state``, ``log_metric(name, value)`` and ``log_extra(column, values)``. Completions
are strings (standard datasets) or message lists (conversational, including the tool
messages of TRL's tool loop: only assistant text is read, so a tool's output never counts).

Ground truth comes from a ``ground_truth`` column (dict or JSON, as `export-verl` writes it)
or from ``lat`` / ``lon`` columns plus optional level columns (``country``, ``admin1``,
``city``…). Unparseable answers score 0. Acc@k, parse rate and median distance are logged
through ``log_metric`` when the trainer offers it. The trainer's step (``trainer_state``) drives the
``annealed`` reward's schedule; tool calls are counted from the assistant messages' ``tool_calls``
(and ``<tool_call>`` tags) for the optional ``tool_bonus``::

    from geosleuth.training.trl.reward import make_reward_func
    trainer = GRPOTrainer(model, reward_funcs=[make_reward_func("step")], …)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from geosleuth.core.records import LEVELS
from geosleuth.training.rewards.batch import ConsistencyFn, RewardBatch, RewardSpec, score_texts
from geosleuth.training.rewards.truth import completion_text, tool_call_count

MetricLogger = Callable[[str, float], None]


def ground_truths_from_columns(n: int, columns: dict[str, Any]) -> list[Any]:
    """One ground truth per completion from the dataset columns TRL passes through."""
    if "ground_truth" in columns:
        values = list(columns["ground_truth"])
    elif "lat" in columns and "lon" in columns:
        values = []
        for i in range(n):
            row: dict[str, Any] = {"lat": columns["lat"][i], "lon": columns["lon"][i]}
            for level in LEVELS:
                if level in columns:
                    row[level] = columns[level][i]
            if "levels" in columns:
                row["levels"] = columns["levels"][i]
            values.append(row)
    else:
        raise ValueError("the dataset needs a 'ground_truth' column or 'lat' and 'lon' columns")
    if len(values) != n:
        raise ValueError(f"{n} completions but {len(values)} ground truths")
    return values


class GeoRewardFunc:
    """A synchronous TRL reward function over one geosleuth reward."""

    def __init__(
        self,
        reward: RewardSpec | str = "step",
        consistency_fn: ConsistencyFn | None = None,
        metric_prefix: str = "geo",
    ) -> None:
        self.spec = RewardSpec.parse(reward)
        self.consistency_fn = consistency_fn
        self.metric_prefix = metric_prefix
        self.__name__ = f"geo_{self.spec.name}"
        self.last_batch: RewardBatch | None = None

    def _score(self, completions: Sequence[Any], columns: dict[str, Any]) -> list[float]:
        texts = [completion_text(c) for c in completions]
        truths = ground_truths_from_columns(len(texts), columns)
        step = getattr(columns.get("trainer_state"), "global_step", None)
        calls = [tool_call_count(c) for c in completions]
        batch = score_texts(self.spec, texts, truths, self.consistency_fn, step=step, tool_calls=calls)
        self.last_batch = batch
        self._log(batch, columns.get("log_metric"), columns.get("log_extra"))
        return [float(s) for s in batch.scores]

    def _log(self, batch: RewardBatch, log_metric: Any, log_extra: Any) -> None:
        if callable(log_metric):
            for name, value in batch.metrics().items():
                log_metric(f"{self.metric_prefix}/{name}", value)
        if callable(log_extra):
            log_extra(f"{self.metric_prefix}/distance_km", [float(d) for d in batch.distances_km])

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float]:
        return self._score(completions, kwargs)


class AsyncGeoRewardFunc(GeoRewardFunc):
    """The same reward as a coroutine: TRL runs async reward functions concurrently."""

    async def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float]:  # type: ignore[override]
        return await asyncio.to_thread(self._score, completions, kwargs)


def make_reward_func(
    reward: RewardSpec | str = "step",
    *,
    asynchronous: bool = False,
    consistency_fn: ConsistencyFn | None = None,
) -> GeoRewardFunc:
    """A reward function for ``GRPOTrainer(reward_funcs=[...])``."""
    cls = AsyncGeoRewardFunc if asynchronous else GeoRewardFunc
    return cls(reward, consistency_fn=consistency_fn)
