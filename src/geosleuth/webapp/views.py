"""Trajectories as JSON for the browser: the record plus URLs for every image it references.

The page renders this with DOM text nodes only, so model and tool output are never parsed
as HTML; image references become same-origin URLs (or ``None`` when the file was not kept).
Every string is served cut to `MAX_SERVED_CHARS` (head and tail around a marker); ``cut``
names each cut field with its full length, which stays in the run's ``trajectories.jsonl``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from geosleuth.core.records import Prediction, Trajectory, Turn, cap_text

ImageUrl = Callable[[str], str | None]
MAX_SERVED_CHARS = 20_000
"""Longest string one view serves: a page shows a model's reply, not megabytes of it."""
FULL_RECORD = "trajectories.jsonl"


def _cap_strings(value: Any, path: str, cut: dict[str, int]) -> Any:
    """``value`` with every string longer than `MAX_SERVED_CHARS` cut, each cut noted in ``cut``."""
    if isinstance(value, str):
        text, original = cap_text(value, MAX_SERVED_CHARS)
        if original is not None:
            cut[path] = original
        return text
    if isinstance(value, dict):
        return {k: _cap_strings(v, f"{path}.{k}" if path else str(k), cut) for k, v in value.items()}
    if isinstance(value, list):
        return [_cap_strings(v, f"{path}[{i}]", cut) for i, v in enumerate(value)]
    return value


def served(view: dict[str, Any]) -> dict[str, Any]:
    """A view as the app sends it: long strings cut, and where the full record is when any was."""
    cut: dict[str, int] = {}
    out = _cap_strings(view, "", cut)
    if cut:
        out["cut"] = {"fields": cut, "max_chars": MAX_SERVED_CHARS, "full_record": FULL_RECORD}
    return out


def turn_view(turn: Turn, image_url: ImageUrl) -> dict[str, Any]:
    """One turn: text, reasoning, usage and tool calls with their image URLs (strings cut)."""
    return served(_turn_data(turn, image_url))


def trajectory_view(trajectory: Trajectory, image_url: ImageUrl) -> dict[str, Any]:
    """The whole record (without the raw messages, which repeat the turns and hold data URLs),
    its strings cut as `served` says."""
    return served(_trajectory_data(trajectory, image_url))


def _turn_data(turn: Turn, image_url: ImageUrl) -> dict[str, Any]:
    data = turn.model_dump(mode="json")
    for call, record in zip(data["tool_calls"], turn.tool_calls, strict=True):
        call["images"] = [url for url in (image_url(ref) for ref in record.result_images) if url]
    return data


def _trajectory_data(trajectory: Trajectory, image_url: ImageUrl) -> dict[str, Any]:
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
        "turns": [_turn_data(t, image_url) for t in trajectory.turns],
        "samples": [_trajectory_data(s, image_url) for s in trajectory.samples],
        "aggregator": trajectory.aggregator,
        "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens},
        "n_tool_calls": len(trajectory.tool_calls),
        "candidates": trajectory.metadata.get("candidates") or [],
        "conflicts": trajectory.metadata.get("conflicts") or [],
    }


def _point(lat: float, lon: float, properties: dict[str, Any]) -> dict[str, Any]:
    """A GeoJSON point feature (RFC 7946: longitude first)."""
    return {
        "type": "Feature",
        "geometry": {"type": "Point", "coordinates": [lon, lat]},
        "properties": properties,
    }


def _located(prediction: Prediction | None) -> bool:
    return prediction is not None and prediction.lat is not None and prediction.lon is not None


def answer_geojson(trajectory: Trajectory) -> dict[str, Any]:
    """The answer as GeoJSON: its point with radius and confidence, each parallel sample's point,
    and the offline pipeline's candidates, each feature's ``role`` saying which. Without
    coordinates the collection has no features and says why."""
    features: list[dict[str, Any]] = []
    pred = trajectory.prediction
    if pred is not None and _located(pred):
        place = {k: getattr(pred, k) for k in ("country_code", "country", "admin1", "city")}
        features.append(
            _point(
                pred.lat,  # type: ignore[arg-type]
                pred.lon,  # type: ignore[arg-type]
                {"role": "answer", "radius_km": pred.radius_km, "confidence": pred.confidence, **place},
            )
        )
    for i, sample in enumerate(trajectory.samples):
        sp = sample.prediction
        if sp is not None and _located(sp):
            features.append(
                _point(sp.lat, sp.lon, {"role": "sample", "sample": i + 1, "status": sample.status.value})  # type: ignore[arg-type]
            )
    for cand in trajectory.metadata.get("candidates") or []:
        keep = ("label", "score", "verdict", "radius_km", "country_code")
        features.append(
            _point(cand["lat"], cand["lon"], {"role": "candidate"} | {k: cand.get(k) for k in keep})
        )
    return {
        "type": "FeatureCollection",
        "properties": {
            "sample_id": trajectory.sample_id,
            "model": trajectory.model,
            "status": trajectory.status.value,
            "note": None if features else "no coordinates in this answer",
        },
        "features": features,
    }
