"""ms-swift outcome rewards (ORMs) over geosleuth rewards, for ms-swift 4.x and 3.x.

ms-swift 4.x keeps ORMs in ``swift.rewards.orms`` and builds each as ``orms[name](args=args)``;
3.x keeps them in ``swift.plugin.orms`` and builds them with the keyword arguments of
``__init__`` that its GRPO config happens to have (``self``, ``args`` and ``kwargs`` excluded).
`GeoORM` accepts both. Either version then calls ``orm(completions, **columns)``: the
completion strings (the final assistant message) and the dataset's columns, of which
``solution`` holds the ground truth as ``geosleuth data export-swift`` writes it (JSON
``{"lat", "lon", "levels"}``; ``"lat, lon"`` also works). Unparseable answers score 0.

A plugin file (``--external_plugins``) registers them::

    from geosleuth.training.swift.reward import register_orms
    register_orms()          # geo_step, geo_piecewise, geo_linear, geo_spatial, geo_hierarchical, …
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import Any, ClassVar

from geosleuth.training.rewards.batch import REWARD_NAMES, ConsistencyFn, RewardSpec, score_texts
from geosleuth.training.rewards.truth import completion_text


class GeoORM:
    """Outcome reward model over one geosleuth reward (``reward_spec`` on a subclass, or ``reward=``)."""

    reward_spec: ClassVar[str] = "step"

    def __init__(
        self,
        args: Any = None,
        *,
        reward: RewardSpec | str | None = None,
        consistency_fn: ConsistencyFn | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(args, str | RewardSpec) and reward is None:  # GeoORM("spatial:tau_km=200")
            args, reward = None, args
        self.args = args  # ms-swift's GRPO config (4.x passes it; unused by these rewards)
        self.spec = RewardSpec.parse(reward if reward is not None else self.reward_spec)
        self.consistency_fn = consistency_fn

    def __call__(
        self, completions: Sequence[Any], solution: Sequence[Any] | None = None, **kwargs: Any
    ) -> list[float]:
        if solution is None:
            raise ValueError(
                "the dataset has no 'solution' column: write it with `geosleuth data export-swift`"
            )
        texts = [completion_text(c) for c in completions]
        batch = score_texts(self.spec, texts, list(solution), self.consistency_fn)
        return [float(s) for s in batch.scores]


def orm_class(reward: str, name: str | None = None) -> type[GeoORM]:
    """A GeoORM subclass fixed to ``reward`` (e.g. ``"spatial:tau_km=200"``), constructible the
    way ms-swift constructs ORMs."""
    spec = RewardSpec.parse(reward)  # fail now on a bad spec, not inside a training job
    cls_name = name or "Geo" + "".join(part.title() for part in spec.name.split("_"))

    def __init__(self: GeoORM, args: Any = None, **kwargs: Any) -> None:
        # Only ``args``: ms-swift 3.x fills every other named __init__ parameter from its config.
        GeoORM.__init__(self, args)

    attrs = {"reward_spec": reward, "__init__": __init__, "__doc__": f"geosleuth {reward} reward."}
    return type(cls_name, (GeoORM,), attrs)


def swift_orms() -> MutableMapping[str, Any]:
    """ms-swift's ORM registry: ``swift.rewards.orms`` (4.x) or ``swift.plugin.orms`` (3.x)."""
    try:
        from swift.rewards import orms
    except ImportError:
        try:
            from swift.plugin import orms
        except ImportError:
            raise ImportError("ms-swift is not installed (pip install ms-swift)") from None
    return orms  # type: ignore[no-any-return]


def register_orms(
    orms: MutableMapping[str, Any] | None = None, rewards: dict[str, str] | None = None
) -> dict[str, type[GeoORM]]:
    """Register ``geo_<reward>`` for every geosleuth reward (or the given name -> spec map)."""
    registry = swift_orms() if orms is None else orms
    chosen = rewards or {f"geo_{name}": name for name in REWARD_NAMES}
    made = {name: orm_class(spec, name) for name, spec in chosen.items()}  # ms-swift logs by class name
    registry.update(made)
    return made
