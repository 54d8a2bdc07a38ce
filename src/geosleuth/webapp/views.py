"""Trajectories as JSON for the browser: the record plus URLs for every image it references.

The page renders this with DOM text nodes only, so model and tool output are never parsed
as HTML; image references become same-origin URLs (or ``None`` when the file was not kept).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from geosleuth.core.records import Trajectory, Turn

ImageUrl = Callable[[str], str | None]


def turn_view(turn: Turn, image_url: ImageUrl) -> dict[str, Any]:
    """One turn: text, reasoning, usage and tool calls with their image URLs."""
    data = turn.model_dump(mode="json")
    for call, record in zip(data["tool_calls"], turn.tool_calls, strict=True):
        call["images"] = [url for url in (image_url(ref) for ref in record.result_images) if url]
    return data


def trajectory_view(trajectory: Trajectory, image_url: ImageUrl) -> dict[str, Any]:
    """The whole record (without the raw messages, which repeat the turns and hold data URLs)."""
    usage = trajectory.usage
    duration = (
        trajectory.finished_at - trajectory.started_at
        if trajectory.finished_at is not None and trajectory.started_at is not None
        else None
    )
    return {
        "sample_id": trajectory.sample_id,
        "model": trajectory.model,
        "prompt_style": trajectory.prompt_style,
        "status": trajectory.status.value,
        "error": trajectory.error,
        "duration_s": duration,
        "prediction": trajectory.prediction.model_dump(mode="json") if trajectory.prediction else None,
        "turns": [turn_view(t, image_url) for t in trajectory.turns],
        "samples": [trajectory_view(s, image_url) for s in trajectory.samples],
        "aggregator": trajectory.aggregator,
        "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens},
        "n_tool_calls": len(trajectory.tool_calls),
    }
