"""ms-swift plugin: geosleuth rewards as ORMs for ``swift rlhf --rlhf_type grpo``.

    swift rlhf --rlhf_type grpo --external_plugins geo_orm_plugin.py \
        --reward_funcs geo_step --dataset train.jsonl ...

The dataset's ``solution`` column holds the ground truth as JSON (``{"lat", "lon", "levels"}``)
or ``"lat, lon"``.
"""

from __future__ import annotations

from swift.plugin import orms

from geosleuth.training.swift_reward import GeoORM


class GeoStep(GeoORM):
    def __init__(self) -> None:
        super().__init__("step")


class GeoPiecewise(GeoORM):
    def __init__(self) -> None:
        super().__init__("piecewise")


class GeoSpatial(GeoORM):
    def __init__(self) -> None:
        super().__init__("spatial:tau_km=200")


orms["geo_step"] = GeoStep
orms["geo_piecewise"] = GeoPiecewise
orms["geo_spatial"] = GeoSpatial
