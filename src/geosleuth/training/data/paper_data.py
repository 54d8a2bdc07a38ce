"""Training-data builders the papers describe that need no model: SpotAgent's stage-1 Visual QA
records and Thinking with Map's difficulty labels.

SpotAgent (§3.2.2): "randomly sample 5% of the MP16-Pro dataset … into a Visual QA format":
image → coordinates and place, written in SpotAgent's answer format. Thinking with Map (§4):
an image is easy "if at least two models predict locations within 10km", else hard.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from geosleuth.core.records import Sample
from geosleuth.training.data.sampling import uniform_sample

VQA_QUESTION = "Where was this image taken? Give the country, the city and the coordinates."
EASY_KM = 10.0
EASY_RUNS = 2


def spotagent_answer(sample: Sample) -> str:
    """The sample's truth in SpotAgent's ``<answer>`` lines (Country, City, Latitude, Longitude)."""
    lines = [f"Country: {sample.labels.get('country') or ''}", f"City: {sample.labels.get('city') or ''}"]
    lines += [f"Latitude: {sample.lat:.6f}", f"Longitude: {sample.lon:.6f}"]
    return "<answer>\n" + "\n".join(lines) + "\n</answer>"


def visual_qa_record(sample: Sample, question: str = VQA_QUESTION) -> dict[str, Any]:
    """One ms-swift / TRL-style record: the image and the question, the truth as the answer."""
    return {
        "id": sample.id,
        "messages": [
            {"role": "user", "content": f"<image>{question}"},
            {"role": "assistant", "content": spotagent_answer(sample)},
        ],
        "images": [sample.image],
    }


def visual_qa_records(
    samples: Sequence[Sample], fraction: float, seed: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Records from a uniform random ``fraction`` of the samples that have an image and coordinates,
    and the samples that could not become one (with why)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    failed = [
        {"sample_id": s.id, "reason": "no image" if not s.image else "no coordinates"}
        for s in samples
        if not s.image or s.lat is None or s.lon is None
    ]
    usable = [s for s in samples if s.image and s.lat is not None and s.lon is not None]
    size = max(1, round(fraction * len(usable))) if usable else 0
    chosen = uniform_sample(usable, size, seed) if size else []
    return [visual_qa_record(s) for s in chosen], failed


def difficulty_labels(
    distances_km: Mapping[str, Sequence[float]], easy_km: float = EASY_KM, min_runs: int = EASY_RUNS
) -> dict[str, dict[str, Any]]:
    """Per sample: ``easy`` when at least ``min_runs`` runs answered within ``easy_km`` (d ≤ km;
    a failed run's NaN never counts), else ``hard``; with how many did."""
    out: dict[str, dict[str, Any]] = {}
    for sample_id, ds in distances_km.items():
        close = sum(1 for d in ds if math.isfinite(d) and d <= easy_km)
        out[sample_id] = {
            "difficulty": "easy" if close >= min_runs else "hard",
            "runs_within": close,
            "runs": len(ds),
        }
    return out
