"""GeoVista's released evaluation rules, reproduced exactly (pure functions, no I/O).

Sources (github.com/ekonwang/GeoVista): ``eval/utils_level_wise_eval.py`` (level-wise rule and
model verifier), ``eval/eval_infer_geolocation.py`` (final turn, aggregation, median),
``eval/utils_geocode.py`` (address extraction, geocoding, haversine R = 6371.0088 km).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from geosleuth.core.parsing import final_own_turn

FINAL_TURN_CHARS = 4000
"""``_extract_final_response`` keeps the first 4000 characters of the last assistant turn."""

LEVELS: tuple[str, str, str] = ("country", "admin1", "city")
"""GeoVista's country / province_or_state / city, in geosleuth's level names."""

_NON_ALNUM = re.compile(r"[^a-z0-9\s]")
_SPACES = re.compile(r"\s+")


def normalize_text(text: str | None) -> str:
    """``_normalize_text``: NFKD, drop non-ASCII, lower case, punctuation to spaces, collapse.

    Names in non-Latin scripts ("東京") normalise to the empty string and so never match.
    """
    if not text:
        return ""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    return _SPACES.sub(" ", _NON_ALNUM.sub(" ", folded)).strip()


def contains_whole_term(text_norm: str, term_norm: str) -> bool:
    """``_contains_whole_term``: the term occurs bounded by non-word characters (linear time)."""
    if not term_norm:
        return False
    start = text_norm.find(term_norm)
    while start != -1:
        end = start + len(term_norm)
        before_ok = start == 0 or not _is_word(text_norm[start - 1])
        after_ok = end == len(text_norm) or not _is_word(text_norm[end])
        if before_ok and after_ok:
            return True
        start = text_norm.find(term_norm, start + 1)
    return False


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


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
    text = normalize_text(response)
    city = contains_whole_term(text, normalize_text(truth.get("city")))
    state = contains_whole_term(text, normalize_text(truth.get("admin1")))
    country = contains_whole_term(text, normalize_text(truth.get("country")))
    return {"country": country or state or city, "admin1": state or city, "city": city}


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
