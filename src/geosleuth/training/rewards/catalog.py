"""The reward registry: every training reward by name (aliases included), light enough for ``--help``.

A reward is a `training.rewards.registry.RewardDef` (its parameters, its paper scorer and the
released one); a user's reward registers by name or through the ``geosleuth.rewards`` entry
point, and then `geosleuth.reward`, the verl / TRL / ms-swift adapters and ``eval`` take it.
"""

from __future__ import annotations

from typing import Any

from geosleuth.registry import Registry

REWARDS: Registry[Any] = Registry(  # of RewardDef, which training.rewards.registry validates
    "reward",
    "geosleuth.rewards",
    builtins=dict.fromkeys(
        (
            "step", "piecewise", "linear", "spatial", "annealed", "hierarchical", "semantic",
            "geo_similarity", "combined",
        ),
        "geosleuth.training.rewards.registry",
    ),
)  # fmt: skip
