"""ms-swift plugin: geosleuth rewards as ORMs for GRPO (ms-swift 4.x and 3.x), and geosleuth's
tools in multi-turn rollouts (ms-swift 4.x).

    geosleuth data export-swift train.jsonl --out swift_train.jsonl \
        --tools image_zoom_in_tool,web_search,geocode --model MODEL_DIR
    swift rlhf --rlhf_type grpo --external_plugins geo_orm_plugin.py \
        --reward_funcs geo_step --multi_turn_scheduler geosleuth_tools --max_turns 8 \
        --dataset swift_train.jsonl ...

``MODEL_DIR`` is the local checkpoint ``swift rlhf --model`` trains: its processor config gives
the image size the prompt states and the frame zoom boxes are read in.

Registers ``geo_<reward>`` for every geosleuth reward (geo_step, geo_piecewise, geo_linear,
geo_spatial, geo_hierarchical, geo_semantic, geo_geo_similarity, geo_combined) plus
``geo_spatial_200`` (spatial with tau = 200 km, GeoAgent's setting); each logs under its own
name (``rewards/geo_spatial_200/mean``). The dataset's ``solution`` column holds the ground
truth as JSON (``{"lat", "lon", "levels"}``) or ``"lat, lon"``.

``geosleuth_tools`` runs the policy's ``<tool_call>`` blocks through geosleuth's tools (at most
6 calls, zoom crops returned as images, errors as messages the policy reads); it never offers
``exif_gps``, which reads the answer from the photo's GPS tag. For other options, register
your own name: ``register_scheduler("geo_maps", tools=[...], settings_path="tools.yaml")``.
"""

from __future__ import annotations

from geosleuth.training.swift.reward import register_orms

register_orms()  # swift.rewards.orms on ms-swift 4.x, swift.plugin.orms on 3.x
register_orms(rewards={"geo_spatial_200": "spatial:tau_km=200"})

try:
    from geosleuth.training.swift.scheduler import register_scheduler

    register_scheduler("geosleuth_tools")  # swift.rollout.multi_turns, ms-swift 4.x
except ImportError:  # ms-swift 3.x: rewards only
    pass
