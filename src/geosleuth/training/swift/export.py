"""ms-swift GRPO dataset: one JSONL row per sample in ms-swift's documented multimodal format.

Each row holds ``messages`` (system + user with an ``<image>`` tag where the image goes),
``images`` (absolute paths), ``solution`` (the ground truth as JSON, which `GeoORM` reads),
and, when tools are chosen, ``tools`` (their OpenAI schemas as a JSON string, ms-swift's agent
format). The prompts are the agent's own prompt style, with zoom boxes described in the frame
the model will see (Qwen ``smart_resize``), exactly as `export-verl` writes them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geosleuth.core.records import Sample, Task
from geosleuth.training.qwen.processor_config import DEFAULT_FRAME
from geosleuth.training.rewards.truth import GroundTruth
from geosleuth.training.verl.export import ExportReport, VerlExportOptions, sample_image, seen_size


@dataclass(frozen=True)
class SwiftExportOptions:
    style: str = "thinking_with_map"
    schemas: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    pixel_budget: int = DEFAULT_FRAME.max_pixels  # the processor's max_pixels
    resize_factor: int = DEFAULT_FRAME.resize_factor  # Qwen2.5-VL 28, Qwen3-VL 32; 0: plain pixel budget
    min_pixels: int = DEFAULT_FRAME.min_pixels
    bbox_convention: str | None = None  # default: the style's


def swift_row(sample: Sample, options: SwiftExportOptions) -> dict[str, Any]:
    """One dataset row; raises ValueError for a sample that cannot be used (reported by the caller)."""
    from geosleuth.agent.prompting import build_prompts, load_style

    path, size = sample_image(sample)
    truth = GroundTruth.from_sample(sample)
    style = load_style(options.style)
    convention = options.bbox_convention or style.bbox_convention
    frame = VerlExportOptions(
        pixel_budget=options.pixel_budget, resize_factor=options.resize_factor, min_pixels=options.min_pixels
    )
    seen = seen_size(size, frame)
    system, user = build_prompts(
        style, Task.from_sample(sample), list(options.schemas), "native", convention, seen
    )
    row: dict[str, Any] = {
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "<image>" + user}],
        "images": [str(path)],
        "solution": json.dumps(truth.to_dict(), ensure_ascii=False),
        "sample_id": sample.id,
        "model_size": list(seen),
        "bbox_convention": convention,
    }
    if options.schemas:
        row["tools"] = json.dumps(list(options.schemas), ensure_ascii=False)
    return row


def export_swift(samples: Sequence[Sample], out_path: Path, options: SwiftExportOptions) -> ExportReport:
    """Write the JSONL; unusable samples are reported, the rest are written."""
    report = ExportReport()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for sample in samples:
            try:
                row = swift_row(sample, options)
            except ValueError as exc:
                report.failed.append({"sample_id": sample.id, "reason": str(exc)})
                continue
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            report.written += 1
    tmp.replace(out_path)
    return report
