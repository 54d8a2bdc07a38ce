"""ms-swift ORM-style reward: ``__call__(completions, solution, **kwargs) -> list[float]``.

ms-swift's GRPO passes the completion strings and the dataset's ``solution`` column. Register
it in a plugin file loaded with ``--external_plugins``::

    from swift.plugin import orms
    from geosleuth.training.swift_reward import GeoORM
    orms["geo_step"] = GeoORM                      # --reward_funcs geo_step
    orms["geo_spatial"] = lambda: GeoORM("spatial:tau_km=200")

``solution`` holds the ground truth as `export-verl` / `export-sft` write it (JSON with lat,
lon, levels), or ``"lat, lon"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from geosleuth.training.rewards import ConsistencyFn, RewardSpec, score_texts
from geosleuth.training.truth import completion_text


class GeoORM:
    """Outcome reward model over one geosleuth reward; unparseable answers score 0."""

    def __init__(
        self, reward: RewardSpec | str = "step", consistency_fn: ConsistencyFn | None = None
    ) -> None:
        self.spec = RewardSpec.parse(reward)
        self.consistency_fn = consistency_fn

    def __call__(self, completions: Sequence[Any], solution: Sequence[Any], **kwargs: Any) -> list[float]:
        texts = [completion_text(c) for c in completions]
        batch = score_texts(self.spec, texts, list(solution), self.consistency_fn)
        return [float(s) for s in batch.scores]
