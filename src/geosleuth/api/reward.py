"""``geosleuth.reward``: one training reward as a plain function of a rollout's text and its truth."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from geosleuth.training.rewards.batch import score_distance_one, score_texts
from geosleuth.training.rewards.registry import DISTANCE_REWARDS, RewardSpec


@dataclass(frozen=True)
class Reward:
    """A reward by name and parameters; the same number verl, TRL and ms-swift get for them.

    ``reward(text, truth)`` is the score; `details` is verl's dict (score, distance_km, parsed,
    acc@k flags); `batch` scores many rollouts in one vectorised call. ``truth`` is what the
    exports write: ``{"lat", "lon", "levels"}`` (a dict or its JSON) or ``"lat, lon"``.
    """

    spec: RewardSpec

    def __call__(self, text: str | None, truth: Any) -> float:
        return float(self.details(text, truth)["score"])

    def details(self, text: str | None, truth: Any) -> dict[str, float]:
        """The score with its distance, parse flag and Acc@k hits (verl logs them as metrics)."""
        if self.spec.name in DISTANCE_REWARDS:
            return score_distance_one(self.spec, text, truth)
        return score_texts(self.spec, [text], [truth]).item_info(0)

    def batch(self, texts: Sequence[str | None], truths: Sequence[Any]) -> list[float]:
        """Scores of many rollouts, in order."""
        return [float(s) for s in score_texts(self.spec, texts, truths).scores]


def reward(name: str = "step", **params: Any) -> Reward:
    """The reward ``name`` (``step``, ``piecewise``, ``spatial``, ``hierarchical``, ``semantic``,
    ``geo_similarity``, …) with ``params`` (``tau_km=100``, ``released=True``, …).

    An unknown name or parameter raises ValueError here, not at the first rollout.
    """
    return Reward(RewardSpec(name, params))
