"""Ground truth as the training engines hand it over, and the model's text in a completion.

verl stores ``reward_model.ground_truth`` in parquet (a struct comes back as a dict, sometimes
with NumPy scalars), TRL passes dataset columns, ms-swift a ``solution`` string. All of them
end up as one `GroundTruth`. Of a conversational completion only the assistant's own text is
kept: tool messages are data the model read, never its answer.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from geosleuth.core.records import LEVELS, Sample

_LATLON = re.compile(r"^\s*\(?\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)?\s*$")


@dataclass(frozen=True)
class GroundTruth:
    """Where an image was taken, plus the place names known at each hierarchy level."""

    lat: float
    lon: float
    levels: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Row form for parquet: every level key present so that all rows share one schema."""
        return {"lat": self.lat, "lon": self.lon, "levels": {k: self.levels.get(k) for k in LEVELS}}

    @classmethod
    def from_sample(cls, sample: Sample) -> GroundTruth:
        if sample.lat is None or sample.lon is None:
            raise ValueError(f"sample {sample.id!r} has no coordinates")
        return cls(float(sample.lat), float(sample.lon), {k: v for k, v in sample.labels.items() if v})


def _plain(value: Any) -> Any:
    """NumPy scalars and arrays from pandas/pyarrow to plain Python."""
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def _from_mapping(data: Mapping[str, Any]) -> GroundTruth:
    lat = _plain(data.get("lat", data.get("latitude")))
    lon = _plain(data.get("lon", data.get("lng", data.get("longitude"))))
    if lat is None or lon is None:
        raise ValueError(f"ground truth needs lat and lon, got keys {sorted(data)}")
    lat_f, lon_f = float(lat), float(lon)
    if not (math.isfinite(lat_f) and math.isfinite(lon_f) and -90 <= lat_f <= 90 and -180 <= lon_f <= 180):
        raise ValueError(f"ground truth coordinates out of range: {lat_f}, {lon_f}")
    raw_levels = data.get("levels") or {}
    levels = {str(k): str(_plain(v)) for k, v in dict(raw_levels).items() if _plain(v) not in (None, "")}
    for key in LEVELS:  # flat rows such as {"lat", "lon", "city", "country"} (IMAGEO style)
        value = _plain(data.get(key))
        if value not in (None, "") and key not in levels:
            levels[key] = str(value)
    return GroundTruth(lat_f, lon_f, levels)


def parse_ground_truth(value: Any) -> GroundTruth:
    """Accept a GroundTruth, a mapping, a JSON string or ``"lat, lon"``; raise ValueError otherwise."""
    if isinstance(value, GroundTruth):
        return value
    if isinstance(value, Mapping):
        return _from_mapping(value)
    if isinstance(value, str):
        match = _LATLON.match(value)
        if match:
            return _from_mapping({"lat": match.group(1), "lon": match.group(2)})
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"ground truth string is neither JSON nor 'lat, lon': {value[:80]!r}") from None
        if isinstance(decoded, Mapping):
            return _from_mapping(decoded)
        if isinstance(decoded, list) and len(decoded) == 2:
            return _from_mapping({"lat": decoded[0], "lon": decoded[1]})
        raise ValueError(f"ground truth JSON must be an object or [lat, lon], got {type(decoded).__name__}")
    if isinstance(value, list | tuple) and len(value) == 2:
        return _from_mapping({"lat": value[0], "lon": value[1]})
    raise ValueError(f"unsupported ground truth type {type(value).__name__}")


def completion_text(completion: Any) -> str:
    """TRL completions: a string (plain) or a list of messages (conversational) -> assistant text."""
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        completion = [completion]
    parts: list[str] = []
    for message in completion:
        if not isinstance(message, Mapping) or message.get("role", "assistant") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return "\n".join(parts)


_TOOL_CALL_TAG = re.compile(r"<tool_call>", re.I)


def tool_call_count(completion: Any) -> int:
    """Tool calls the policy made in a completion: the assistant messages' ``tool_calls`` plus
    ``<tool_call>`` tags in their text (a plain string: its tags)."""
    if completion is None:
        return 0
    if isinstance(completion, str):
        return len(_TOOL_CALL_TAG.findall(completion))
    if isinstance(completion, Mapping):
        completion = [completion]
    count = 0
    for message in completion:
        if not isinstance(message, Mapping) or message.get("role", "assistant") != "assistant":
            continue
        calls = message.get("tool_calls")
        count += len(calls) if isinstance(calls, list) else 0
    return count + len(_TOOL_CALL_TAG.findall(completion_text(completion)))
