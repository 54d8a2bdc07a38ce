"""Thinking with Map's released answer reading, transcribed by hand once for the tests and benches.

``api_evaluation/api_test.py`` (``extract_all_json_objects`` + ``find_coords_json``) and the verl
reward ``verl/utils/reward_score/localization.py`` (``compute_distance_score``) read an answer the
same way: every top-level ``{…}`` span by brace counting (strings and tool output included), the
first that ``json.loads`` reads with all of lat, lon, city and country. geosleuth never imports
this file: it is the reference its own readers are compared with.
"""

from __future__ import annotations

import json
from typing import Any

STEP_BINS_M = ((500, 1.0), (2000, 0.8), (10000, 0.6), (25000, 0.4), (200000, 0.2), (750000, 0.1))
KEYS = ("lat", "lon", "city", "country")


def top_level_objects(text: str) -> list[str]:
    """``extract_all_json_objects``: the outermost brace spans, in order."""
    objects, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "{":
            if not depth:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if not depth:
                objects.append(text[start : i + 1])
    return objects


def first_answer(text: str, survive_recursion: bool = False) -> dict[str, Any] | None:
    """``find_coords_json``: the first span that decodes with the four keys. The released loop
    crashes on a span nested past Python's recursion limit; ``survive_recursion`` skips it."""
    skipped: tuple[type[Exception], ...] = (
        (json.JSONDecodeError, RecursionError) if survive_recursion else (json.JSONDecodeError,)
    )
    for span in top_level_objects(text):
        try:
            obj = json.loads(span)
        except skipped:
            continue
        if isinstance(obj, dict) and all(k in obj for k in KEYS):
            return obj
    return None


def step_score(text: str, truth: dict[str, float]) -> float:
    """``compute_distance_score``: geopy's geodesic in metres (any failure: 99,999,999 m), binned."""
    from geopy.distance import geodesic

    found = first_answer(text)
    metres = 99999999.0
    if found is not None and found["lat"] is not None and found["lon"] is not None:
        try:
            metres = geodesic((found["lat"], found["lon"]), (truth["lat"], truth["lon"])).meters
        except Exception:  # noqa: BLE001 - the released code catches everything here
            metres = 99999999.0
    for limit, value in STEP_BINS_M:
        if metres < limit:
            return value
    return 0.0
