"""The image frame a local Qwen-VL checkpoint's processor produces, read from its
``preprocessor_config.json``, so exported prompts state the size the model will see.

transformers' ``Qwen2VLImageProcessor`` (Qwen2-VL, Qwen2.5-VL and Qwen3-VL) snaps sides to
``patch_size × merge_size`` and keeps the pixels within ``size.shortest_edge`` /
``size.longest_edge``; top-level ``min_pixels`` / ``max_pixels`` (older checkpoints) override
those, as the processor's own constructor does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONFIG_NAME = "preprocessor_config.json"


@dataclass(frozen=True)
class ImageFrameSettings:
    """What a processor config says; None where it says nothing."""

    resize_factor: int | None = None
    min_pixels: int | None = None
    max_pixels: int | None = None


DEFAULT_FRAME = ImageFrameSettings(resize_factor=28, min_pixels=56 * 56, max_pixels=2_000_000)
"""The frame without a model folder or an option: Qwen2.5-VL's snapping (28 = 14-pixel patches
× 2 merge) and min_pixels, with a 2 MP budget (the agent's default)."""


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def settings_from_config(config: dict[str, Any]) -> ImageFrameSettings:
    """The frame settings in one ``preprocessor_config.json`` mapping."""
    size = config.get("size") if isinstance(config.get("size"), dict) else {}
    lo = _positive_int(config.get("min_pixels")) or _positive_int(size.get("shortest_edge"))
    hi = _positive_int(config.get("max_pixels")) or _positive_int(size.get("longest_edge"))
    lo = lo or _positive_int(size.get("min_pixels"))
    hi = hi or _positive_int(size.get("max_pixels"))
    patch, merge = _positive_int(config.get("patch_size")), _positive_int(config.get("merge_size"))
    factor = patch * merge if patch and merge else None
    return ImageFrameSettings(resize_factor=factor, min_pixels=lo, max_pixels=hi)


def read_model_settings(model: Path) -> ImageFrameSettings:
    """The frame settings of a local model folder (none without a config file; the caller
    reports the defaults it falls back to); ValueError for a config it cannot read."""
    path = model / CONFIG_NAME
    if not path.is_file():
        return ImageFrameSettings()
    if path.stat().st_size > 1_000_000:
        raise ValueError(f"{path} is over 1 MB: not a processor config")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} is not a JSON object")
    return settings_from_config(config)


def resolve_frame(
    explicit: ImageFrameSettings, model: Path | None, defaults: ImageFrameSettings
) -> tuple[ImageFrameSettings, dict[str, str]]:
    """Each setting from the command line, else the local model's config, else the default;
    with where each came from (``option`` / ``model`` / ``default``). A ``model`` that is not a
    local folder is a ValueError: its frame would silently become the defaults."""
    if model is not None and not model.is_dir():
        raise ValueError(f"{model}: not a local model directory (its {CONFIG_NAME} gives the image frame)")
    found = read_model_settings(model) if model is not None else ImageFrameSettings()
    chosen: dict[str, int | None] = {}
    source: dict[str, str] = {}
    for key in ("resize_factor", "min_pixels", "max_pixels"):
        for origin, settings in (("option", explicit), ("model", found), ("default", defaults)):
            value = getattr(settings, key)
            if value is not None:
                chosen[key], source[key] = value, origin
                break
    return ImageFrameSettings(**chosen), source
