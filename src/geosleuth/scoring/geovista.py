"""GeoVista's released evaluation rules, reproduced exactly (pure functions, no I/O).

Sources (github.com/ekonwang/GeoVista): ``eval/utils_level_wise_eval.py`` (level-wise rule and
model verifier), ``eval/eval_infer_geolocation.py`` (final turn, aggregation, median),
``eval/utils_geocode.py`` (address extraction, geocoding, haversine R = 6371.0088 km).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from geosleuth.core.parsing import final_own_turn
from geosleuth.core.released import geovista_contains, geovista_normalize, geovista_rule

FINAL_TURN_CHARS = 4000
"""``_extract_final_response`` keeps the first 4000 characters of the last assistant turn."""

LEVELS: tuple[str, str, str] = ("country", "admin1", "city")
"""GeoVista's country / province_or_state / city, in geosleuth's level names."""

normalize_text = geovista_normalize
"""``_normalize_text`` (one implementation, in `geosleuth.core.released`)."""
contains_whole_term = geovista_contains
"""``_contains_whole_term`` (one implementation, in `geosleuth.core.released`)."""


def final_turn(text: str) -> str:
    """The model's last turn: text after its last tool block of any kind, first 4000 characters.

    GeoVista scores the last assistant message of a conversation; a whole rollout stored as one
    string must not have quoted search results, observations or fenced tool output read as the
    answer, and one cut off inside a tool result has no final turn.
    """
    return final_own_turn(text)[:FINAL_TURN_CHARS]


def rule_levels(response: str, truth: Mapping[str, str | None]) -> dict[str, bool]:
    """The released rule: a level is correct when its normalised truth occurs as a whole term.

    A correct city also credits state and country, a correct state the country
    (``rule_based`` plus the hierarchical fix-up in ``eval_geolocation_response``).
    """
    country, state, city = geovista_rule(response, truth)
    return {"country": country, "admin1": state, "city": city}


def verifier_levels(verdict: Mapping[str, bool]) -> dict[str, bool]:
    """With ``--model_verifier`` the verifier's booleans replace the rules, then the fix-up."""
    city = bool(verdict.get("city"))
    state = bool(verdict.get("admin1")) or city
    return {"country": bool(verdict.get("country")) or state, "admin1": state, "city": city}


def lower_median(values: ArrayLike) -> float:
    """``sorted_d[ceil(n * 0.5) - 1]``: the lower middle value for even n; NaN when empty."""
    d = np.sort(np.asarray(values, dtype=np.float64).reshape(-1))
    if d.size == 0:
        return math.nan
    return float(d[max(0, math.ceil(d.size * 0.5) - 1)])


def share_below(values: Sequence[float] | ArrayLike, km: float = 3.0) -> float:
    """``lt_3km_pct`` as a fraction: strict ``d < 3`` over the rows that have a distance."""
    d = np.asarray(values, dtype=np.float64).reshape(-1)
    return float(np.mean(d < km)) if d.size else math.nan
