"""Judged image filters the papers build training data with, asked of any OpenAI-compatible
vision model.

GeoVista (§3.2) keeps images of at least one million pixels that a model judges localizable and
not an easily localizable landmark. GeoAgent (§3.3) scores each image's locatability from 0 to
10 with a judge. Prompts are data files (``eval/judge_prompts/geovista_filter.md``,
``locatability.md``). A judge that fails or answers out of shape marks that image failed, with
the reason; the batch goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from geosleuth.core.records import Sample
from geosleuth.eval.judges.tasks import JudgeError, VerdictT, parse_verdict, prompt_template

MIN_PIXELS = 1_000_000
"""GeoVista's resolution rule: images of at least 1 M pixels."""
JUDGE_PIXEL_BUDGET = 1_003_520
"""The image sent to the judge is scaled down to this many pixels (the full image is only measured)."""


class FilterVerdict(BaseModel):
    localizable: bool
    famous_landmark: bool


class LocatabilityVerdict(BaseModel):
    score: float = Field(ge=0, le=10)


@dataclass
class ImageJudgment:
    """One image's outcome: kept or dropped with a reason, or failed with an error."""

    sample: Sample
    kept: bool = False
    reason: str | None = None
    error: str | None = None
    values: dict[str, Any] = field(default_factory=dict)


def large_enough(size: tuple[int, int], min_pixels: int = MIN_PIXELS) -> bool:
    """GeoVista's rule: width × height ≥ ``min_pixels``."""
    return size[0] * size[1] >= min_pixels


def _image_message(sample: Sample, prompt: str) -> list[dict[str, Any]]:
    from geosleuth.agent.images import load_image, prepare_image

    if not sample.image:
        raise ValueError("the sample has no image")
    prepared = prepare_image(load_image(sample.image), JUDGE_PIXEL_BUDGET)
    return [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": prepared.data_url}},
                {"type": "text", "text": prompt},
            ],
        }
    ]


async def _ask(client: Any, sample: Sample, prompt: str) -> str:
    response = await client.complete(_image_message(sample, prompt), temperature=0.0)
    return str(response.first.content)


async def geovista_filter_one(client: Any, sample: Sample, min_pixels: int = MIN_PIXELS) -> ImageJudgment:
    """The ≥ 1 MP rule first (no request for a small image), then the localizability and landmark question."""
    from geosleuth.bounds.imageio import probe_image

    out = ImageJudgment(sample)
    try:
        _, size = await asyncio.to_thread(probe_image, str(sample.image))
        out.values["pixels"] = size[0] * size[1]
        if not large_enough(size, min_pixels):
            out.reason = f"under {min_pixels:,} pixels ({size[0]}×{size[1]})"
            return out
    except (ValueError, OSError) as exc:
        out.error = str(exc)
        return out
    verdict = await _verdict(client, sample, "geovista_filter", FilterVerdict, out)
    if verdict is None:
        return out
    out.values |= verdict.model_dump()
    if not verdict.localizable:
        out.reason = "not localizable"
    elif verdict.famous_landmark:
        out.reason = "easily localizable landmark"
    else:
        out.kept = True
    return out


async def _verdict(
    client: Any, sample: Sample, prompt: str, model: type[VerdictT], out: ImageJudgment
) -> VerdictT | None:
    """The judge's verdict on one image, or None with ``out.error`` set: a failed ask is this
    image's failure, never the batch's."""
    try:
        return parse_verdict(model, await _ask(client, sample, prompt_template(prompt).template))
    except (JudgeError, ValueError, OSError) as exc:
        out.error = str(exc)
    except Exception as exc:  # a judge endpoint failure
        out.error = f"{type(exc).__name__}: {exc}"
    return None


async def locatability_one(client: Any, sample: Sample, min_score: float | None = None) -> ImageJudgment:
    """GeoAgent's 0–10 locatability score; kept when at least ``min_score`` (every scored image
    without one)."""
    out = ImageJudgment(sample)
    verdict = await _verdict(client, sample, "locatability", LocatabilityVerdict, out)
    if verdict is None:
        return out
    out.values["locatability"] = verdict.score
    out.kept = min_score is None or verdict.score >= min_score
    out.reason = None if out.kept else f"locatability {verdict.score:g} < {min_score:g}"
    return out


async def judge_images(
    client: Any, samples: Sequence[Sample], task: str, concurrency: int = 8, **options: Any
) -> list[ImageJudgment]:
    """Every sample through ``task`` (``geovista_filter`` or ``locatability``), ``concurrency`` at
    once, in input order."""
    one = {"geovista_filter": geovista_filter_one, "locatability": locatability_one}[task]
    slots = asyncio.Semaphore(concurrency)

    async def bounded(sample: Sample) -> ImageJudgment:
        async with slots:
            return await one(client, sample, **options)

    return list(await asyncio.gather(*(bounded(s) for s in samples)))
