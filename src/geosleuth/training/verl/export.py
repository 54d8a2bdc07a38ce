"""Samples -> verl RL parquet rows.

Each row follows verl's RLHF dataset layout for a vision-language agent:

- ``prompt``: chat messages; the user turn carries ``<image>``, which verl swaps for the
  image in ``images``;
- ``images``: ``[{"bytes": …}]`` (embedded, so every node reads the same pixels) or
  ``[{"image": "file://…"}]``;
- ``reward_model``: ``{"style": "rule", "ground_truth": {"lat", "lon", "levels": {…}}}``,
  every level key present so all rows share one parquet schema;
- ``extra_info``: ``index``, ``sample_id``, ``split``, ``need_tools_kwargs`` and
  ``tools_kwargs[<tool>].create_kwargs`` = the image path and the scale of the image the
  model sees, which the zoom tool needs to map boxes back to original pixels.

The system and user text come from the agent's prompt styles, so a policy trained on these
rows meets the same prompt at evaluation time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from geosleuth.agent.images import smart_resize
from geosleuth.core.records import Sample, Task
from geosleuth.training.qwen.processor_config import DEFAULT_FRAME
from geosleuth.training.rewards.truth import GroundTruth

ABILITY = "geolocation"
REGION_STYLES = frozenset({"geovista", "geoagent"})
"""Prompt styles whose answer names the admin-1 region (GeoVista's ``Province/State:`` line,
GeoAgent's ``Country; Region; Place``)."""
NO_REGION_STYLES = frozenset({"spotagent", "thinking_with_map", "direct"})
REGION_REWARDS = {
    "hierarchical": "geovista",
    "semantic": "geoagent",
    "geo_similarity": "geoagent",
    "combined": "geoagent",
}
"""Rewards that need the region in the answer, and the style each one's paper uses."""
ROW_GROUP = 256
"""Rows per parquet row group (bounded memory with embedded images)."""


@dataclass(frozen=True)
class VerlExportOptions:
    style: str = "spotagent"
    schemas: tuple[dict[str, Any], ...] = ()  # the tools' OpenAI schemas (their names go in tools_kwargs)
    pixel_budget: int = DEFAULT_FRAME.max_pixels  # what the processor lets the model see (max_pixels)
    resize_factor: int = DEFAULT_FRAME.resize_factor  # sides snap to it (Qwen2.5-VL 28, Qwen3-VL 32; 0: none)
    min_pixels: int = DEFAULT_FRAME.min_pixels  # the processor's min_pixels (with resize_factor)
    bbox_convention: str | None = None  # default: the style's
    embed_images: bool = True
    data_source: str | None = None


@dataclass
class ExportReport:
    written: int = 0
    failed: list[dict[str, str]] = field(default_factory=list)


def style_for_reward(style: str | None, reward: str | None) -> str:
    """The prompt style to export: the given one, checked against the reward, else the reward's paper's.

    A reward that scores the admin-1 region (``hierarchical``, ``semantic``, ``geo_similarity``)
    cannot reach its range with a style whose answer has no region: that pairing is refused.
    """
    name = (reward or "").partition(":")[0].strip() or None
    if style is None:
        return REGION_REWARDS.get(name or "", "spotagent")
    if name in REGION_REWARDS and style not in REGION_STYLES:
        raise ValueError(
            f"reward {name!r} scores the province/state, but the {style!r} answer format has no region line; "
            f"use --prompt {REGION_REWARDS[name]} (or {' / '.join(sorted(REGION_STYLES))})"
        )
    return style


def model_scale(size: tuple[int, int], pixel_budget: int) -> float:
    """Scale of the image the model sees (same rule as the agent's pixel budget)."""
    w, h = size
    if pixel_budget <= 0 or w * h <= pixel_budget:
        return 1.0
    return max(1, int(w * math.sqrt(pixel_budget / (w * h)))) / w


def seen_size(size: tuple[int, int], options: VerlExportOptions) -> tuple[int, int]:
    """The frame the trained model sees the image in."""
    if options.resize_factor > 0:
        return smart_resize(size, options.resize_factor, options.min_pixels, options.pixel_budget)
    scale = model_scale(size, options.pixel_budget)
    return max(1, int(size[0] * scale)), max(1, int(size[1] * scale))


def sample_image(sample: Sample) -> tuple[Path, tuple[int, int]]:
    """The sample's resolved image path and pixel size (header only); ValueError when unusable."""
    from PIL import Image

    if not sample.image:
        raise ValueError("sample has no image")
    path = Path(sample.image).expanduser().resolve()
    try:
        with Image.open(path) as img:
            return path, img.size
    except OSError as exc:
        raise ValueError(f"image cannot be read: {exc}") from None


def verl_row(sample: Sample, index: int, options: VerlExportOptions) -> dict[str, Any]:
    """One parquet row; raises ValueError for a sample that cannot be used (reported by the caller)."""
    from geosleuth.agent.prompting import build_prompts, load_style

    path, size = sample_image(sample)
    truth = GroundTruth.from_sample(sample)
    style = load_style(options.style)
    convention = options.bbox_convention or style.bbox_convention
    seen = seen_size(size, options)
    system, user = build_prompts(
        style, Task.from_sample(sample), list(options.schemas), "native", convention, seen
    )
    image = {"bytes": path.read_bytes()} if options.embed_images else {"image": path.as_uri()}
    create = {
        "image": str(path),
        "model_scale": seen[0] / size[0],
        "model_size": list(seen),
        "bbox_convention": convention,
    }
    tools_kwargs = {s["function"]["name"]: {"create_kwargs": dict(create)} for s in options.schemas}
    extra: dict[str, Any] = {
        "index": index,
        "sample_id": sample.id,
        "split": sample.split or "train",
        "need_tools_kwargs": bool(tools_kwargs),
    }
    if tools_kwargs:  # parquet cannot store an empty struct
        extra["tools_kwargs"] = tools_kwargs
    return {
        "data_source": options.data_source or sample.data_source or "geosleuth",
        "prompt": [{"role": "system", "content": system}, {"role": "user", "content": "<image>" + user}],
        "images": [image],
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": truth.to_dict()},
        "extra_info": extra,
    }


def export_verl(samples: Sequence[Sample], out_path: Path, options: VerlExportOptions) -> ExportReport:
    """Write the parquet file; unusable samples are reported, the rest are written.

    Rows are built without image bytes first, so the schema is inferred from every row (a
    level that is empty in the first rows still gets its type); embedded bytes are then read
    one row group (`ROW_GROUP` rows) at a time, never all in memory at once.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    report = ExportReport()
    rows: list[dict[str, Any]] = []
    paths: list[Path] = []
    by_reference = replace(options, embed_images=False)
    for sample in samples:
        try:
            rows.append(verl_row(sample, len(rows), by_reference))
        except ValueError as exc:
            report.failed.append({"sample_id": sample.id, "reason": str(exc)})
            continue
        paths.append(Path(str(sample.image)).expanduser().resolve())
    if not rows:
        raise ValueError("no sample could be exported: " + "; ".join(f["reason"] for f in report.failed[:3]))
    if options.embed_images:
        schema = pa.Table.from_pylist([{**r, "images": [{"bytes": b""}]} for r in rows]).schema
    else:
        schema = pa.Table.from_pylist(rows).schema
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(out_path, schema) as writer:
        for start in range(0, len(rows), ROW_GROUP):
            group = rows[start : start + ROW_GROUP]
            if options.embed_images:
                group = [
                    {**r, "images": [{"bytes": p.read_bytes()}]}
                    for r, p in zip(group, paths[start : start + ROW_GROUP], strict=True)
                ]
            writer.write_table(pa.Table.from_pylist(group, schema=schema))
    report.written = len(rows)
    return report
