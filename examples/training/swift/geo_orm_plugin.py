"""ms-swift plugin: geosleuth rewards as ORMs for GRPO (ms-swift 4.x and 3.x).

    geosleuth data export-swift train.jsonl --out swift_train.jsonl
    swift rlhf --rlhf_type grpo --external_plugins geo_orm_plugin.py \
        --reward_funcs geo_step --dataset swift_train.jsonl ...

Registers ``geo_<reward>`` for every geosleuth reward (geo_step, geo_piecewise, geo_linear,
geo_spatial, geo_hierarchical, geo_semantic, geo_geo_similarity, geo_combined) plus
``geo_spatial_200`` (spatial with tau = 200 km, GeoAgent's setting). The dataset's ``solution``
column holds the ground truth as JSON (``{"lat", "lon", "levels"}``) or ``"lat, lon"``.
"""

from __future__ import annotations

from geosleuth.training.swift_reward import register_orms

register_orms()  # swift.rewards.orms on ms-swift 4.x, swift.plugin.orms on 3.x
register_orms(rewards={"geo_spatial_200": "spatial:tau_km=200"})
