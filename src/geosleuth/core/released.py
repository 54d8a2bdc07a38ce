"""The seed papers' released reward readers, replayed exactly (pure functions, bounded work).

Each function reproduces what one authors' function reads from a rollout, quirks included,
so that a reward with ``released=true`` equals the released code on the same text. The
quirks are listed in docs/training.md; paper modes (the defaults) do not inherit them.

Sources:
- Thinking with Map, ``verl/verl/utils/reward_score/localization.py``
  (``compute_distance_score``): the first top-level ``{...}`` of the whole text that decodes to
  an object with ``lat``, ``lon``, ``city`` and ``country``; geopy's WGS-84 geodesic in metres;
  1 / 0.8 / 0.6 / 0.4 / 0.2 / 0.1 / 0 below 500 m / 2 / 10 / 25 / 200 / 750 km.
- GeoVista, ``verl/utils/reward_score/search_agent.py`` (``compure_score_search``) with
  ``utils_geo.eval_geolocation_response`` (rule path): the text after the last ``assistant``,
  ASCII-folded, each truth level matched as a whole term; 4 / 2 / 1 / 0.
- GeoAgent, ``swift/plugin/orm.py``: ``TripleFieldAccuracy`` (R_sem: first ``<answer>`` or the
  whole completion, split on ``;`` / ``；``, empty parts dropped, parts past the third joined
  with ``;``) and ``GeoScoreAccuracy`` (R_spa: first ``<answer>``, else a JSON ``FinalAnswer``;
  haversine R = 6371 km; exp(−10·d/2000) below 2000 km).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

TWM_KEYS: tuple[str, ...] = ("lat", "lon", "city", "country")
TWM_THRESHOLDS_M: tuple[float, ...] = (500.0, 2000.0, 10000.0, 25000.0, 200000.0, 750000.0)
TWM_VALUES: tuple[float, ...] = (1.0, 0.8, 0.6, 0.4, 0.2, 0.1)
TWM_MISS_M = 99999999.0
"""The distance the released code uses for an answer it cannot read or measure."""

GEOAGENT_RADIUS_KM = 6371.0
"""GeoAgent's haversine radius (paper Table 5, ``GeoScoreAccuracy._calculate_distance``)."""

_WGS84_A_KM = 6378.137
_WGS84_F = 1 / 298.257223563
"""geopy's ``ELLIPSOIDS['WGS-84']``: its geodesic works in kilometres and converts to metres."""


# --- Thinking with Map -------------------------------------------------------------------


def twm_brace_objects(text: str) -> list[str]:
    """``extract_all_json_objects``: every top-level ``{...}`` span, braces counted naively.

    Braces inside JSON strings count, an unmatched ``}`` is skipped, an unclosed ``{`` yields
    nothing. Vectorised over the braces: the released depth, which never drops below 0, is the
    running sum minus its running minimum (floored at 0), so a hostile text of millions of
    braces costs milliseconds.
    """
    if "{" not in text or "}" not in text:
        return []
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    at = np.flatnonzero((codes == 0x7B) | (codes == 0x7D))
    step = np.where(codes[at] == 0x7B, 1, -1)
    total = np.cumsum(step)
    depth = total - np.minimum(np.minimum.accumulate(total), 0)
    before = np.concatenate(([0], depth[:-1]))
    starts = at[(step == 1) & (before == 0)]
    ends = at[(step == -1) & (before == 1)]
    return [text[a : b + 1] for a, b in zip(starts.tolist(), ends.tolist(), strict=False)]


def twm_answer(text: str | None) -> dict[str, Any] | None:
    """``find_coords_json``: the first candidate that decodes with all of lat, lon, city, country.

    The released loop reads the whole text, tool responses included. A candidate Python's
    ``json`` cannot decode for lack of stack or digits (a ``RecursionError`` or a 5,000-digit
    integer, which crash the released function) is skipped.
    """
    for cand in twm_brace_objects(text or ""):
        if "\\" not in cand and not all(k in cand for k in TWM_KEYS):
            continue  # without escapes a decoded key is spelled out in the text: skip the decode
        try:
            obj = json.loads(cand)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and all(k in obj for k in TWM_KEYS):
            return obj
    return None


def _normalize_angle(x: float, limit: float) -> float:
    """geopy's longitude wrap to [−limit, limit)."""
    modulo = math.fmod(x, limit * 2.0) or 0.0
    if modulo < -limit:
        return modulo + limit * 2.0
    if modulo >= limit:
        return modulo - limit * 2.0
    return modulo


def geopy_point(lat: Any, lon: Any) -> tuple[float, float]:
    """``geopy.Point((lat, lon))``: ``float(x or 0.0)``, finite, |lat| ≤ 90, lon wrapped.

    Raises ValueError or TypeError exactly where geopy does.
    """
    la = float(lat or 0.0)
    lo = float(lon or 0.0)
    if not (math.isfinite(la) and math.isfinite(lo)):
        raise ValueError("Point coordinates must be finite")
    if abs(la) > 90:
        raise ValueError("Latitude must be in the [-90; 90] range.")
    if abs(lo) > 180:
        lo = _normalize_angle(lo, 180.0)
    return la, lo


def geopy_geodesic_m(a: tuple[float, float], b: tuple[float, float]) -> float:
    """``geopy.distance.geodesic(a, b).meters``: Karney's inverse on WGS-84 in km, times 1000."""
    from geographiclib.geodesic import Geodesic

    s12_km = Geodesic(_WGS84_A_KM, _WGS84_F).Inverse(a[0], a[1], b[0], b[1], Geodesic.DISTANCE)["s12"]
    return 0.0 + s12_km * 1000


def twm_distance_m(answer: Mapping[str, Any] | None, truth_lat: float, truth_lon: float) -> float:
    """The released distance in metres; ``TWM_MISS_M`` when the answer is missing or unmeasurable."""
    if answer is None or answer.get("lat") is None or answer.get("lon") is None:
        return TWM_MISS_M
    try:
        return geopy_geodesic_m(geopy_point(answer["lat"], answer["lon"]), geopy_point(truth_lat, truth_lon))
    except (ValueError, TypeError, OverflowError):
        return TWM_MISS_M


def twm_step_score(distance_m: float) -> float:
    """The released bins, strict ``<`` in metres."""
    for t, v in zip(TWM_THRESHOLDS_M, TWM_VALUES, strict=True):
        if distance_m < t:
            return v
    return 0.0


# --- GeoVista ------------------------------------------------------------------------------

_ASCII_KEEP = bytes(
    b if (chr(b).isspace() or chr(b).isdigit() or "a" <= chr(b) <= "z") else 0x20 for b in range(256)
)
"""``[^a-z0-9\\s]`` to a space, as one byte table (the text is ASCII by then)."""


def geovista_normalize(text: str | None) -> str:
    """``_normalize_text``: NFKD, drop non-ASCII, lower case, punctuation to spaces, collapse.

    Names in non-Latin scripts ("東京") normalise to the empty string and so never match.
    ``re.sub(r"[^a-z0-9\\s]", " ")`` and ``re.sub(r"\\s+", " ").strip()`` are done with a byte
    table and ``split`` / ``join`` (the same result; linear and fast on megabytes).
    """
    if not text:
        return ""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").lower()
    return " ".join(folded.translate(_ASCII_KEEP).decode("ascii").split())


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def geovista_contains(text_norm: str, term_norm: str) -> bool:
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


def geovista_rule(response: str | None, truth: Mapping[str, str | None]) -> tuple[bool, bool, bool]:
    """``rule_based`` plus the fix-up: (country, state, city); a right city credits all three.

    ``truth`` holds geosleuth level names (``country``, ``admin1``, ``city``).
    """
    text = geovista_normalize(response or "")
    city = geovista_contains(text, geovista_normalize(truth.get("city")))
    state = geovista_contains(text, geovista_normalize(truth.get("admin1")))
    country = geovista_contains(text, geovista_normalize(truth.get("country")))
    return country or state or city, state or city, city


def geovista_last_turn(predict_str: str | None) -> str:
    """``predict_str.split('assistant')[-1].strip()``: any "assistant", prose included, cuts."""
    return (predict_str or "").split("assistant")[-1].strip()


def geovista_score(predict_str: str | None, truth: Mapping[str, str | None], beta: float = 2.0) -> float:
    """``compure_score_search`` with the verifier off: β² / β / 1 / 0 (4 / 2 / 1 / 0 at β = 2)."""
    country, state, city = geovista_rule(geovista_last_turn(predict_str), truth)
    return beta**2 if city else beta if state else 1.0 if country else 0.0


# --- GeoAgent --------------------------------------------------------------------------------

_ANSWER_OPEN = re.compile("<answer>", re.I)
_ANSWER_CLOSE = re.compile("</answer>", re.I)
_GEOAGENT_SEP = re.compile(r"[;；]")


def geoagent_first_answer(completion: str | None) -> str | None:
    """``re.search(r"<answer>\\s*(.*?)\\s*</answer>", re.S | re.I)``, stripped; None without one.

    Found in linear time: the match opens at the first ``<answer>`` (a later one has no
    closing tag either when the first has none) and ends at the first ``</answer>`` after it.
    """
    if not completion:
        return None
    opened = _ANSWER_OPEN.search(completion)
    if opened is None:
        return None
    closed = _ANSWER_CLOSE.search(completion, opened.end())
    return completion[opened.end() : closed.start()].strip() if closed else None


def geoagent_final_answer_json(completion: str) -> str | None:
    """``GeoScoreAccuracy``'s fallback: the greedy ``{.*}`` span decoded, its ``FinalAnswer``.

    ``re.search(r"\\{.*\\}", re.S)`` spans from the first ``{`` to the last ``}``; found
    with ``find`` / ``rfind`` (the regex is quadratic on text with many ``{`` and no ``}``).
    """
    start, end = completion.find("{"), completion.rfind("}")
    if start == -1 or end < start:
        return None
    try:
        data = json.loads(completion[start : end + 1])
        if "FinalAnswer" in data:
            return str(data["FinalAnswer"]).strip()
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    return None


def geoagent_spatial_answer(completion: str | None) -> str | None:
    """``GeoScoreAccuracy._extract_answer_content``: first ``<answer>``, else JSON ``FinalAnswer``."""
    if completion is None:
        return None
    tagged = geoagent_first_answer(completion)
    if tagged is not None:
        return tagged
    return geoagent_final_answer_json(completion)


def geoagent_semantic_answer(completion: str | None) -> str:
    """``TripleFieldAccuracy._extract_answer_content``: first ``<answer>``, else the whole text."""
    if completion is None:
        return ""
    tagged = geoagent_first_answer(completion)
    return tagged if tagged is not None else completion.strip()


def geoagent_fields(text: str, max_chars: int | None = None) -> tuple[str, str, str]:
    """``_split_three_fields`` (``split_new``): empty parts dropped, the rest joined with ``;``.

    ``max_chars`` stops each field once it is that long (a caller that reads no further, such
    as a similarity capped at a name's length, gets the same prefix in bounded work).
    """
    if not text:
        return "", "", ""
    parts: list[str] = []
    rest: list[str] = []
    size = 0
    for raw in _GEOAGENT_SEP.split(text) if max_chars is None else _split_lazily(text):
        part = raw.strip()
        if not part:
            continue
        if len(parts) < 2:
            parts.append(part if max_chars is None else part[:max_chars])
            continue
        rest.append(part)
        size += len(part) + 1
        if max_chars is not None and size > max_chars:
            break
    third = ";".join(rest)
    return (
        parts[0] if parts else "",
        parts[1] if len(parts) > 1 else "",
        third if max_chars is None else third[:max_chars],
    )


def _split_lazily(text: str) -> Iterator[str]:
    """``_GEOAGENT_SEP.split`` one part at a time."""
    pos = 0
    for m in _GEOAGENT_SEP.finditer(text):
        yield text[pos : m.start()]
        pos = m.end()
    yield text[pos:]


def geoagent_haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """``_calculate_distance``: haversine with R = 6371 km (scalar ``math``)."""
    p1, l1, p2, l2 = map(math.radians, (lat1, lon1, lat2, lon2))
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin((l2 - l1) / 2) ** 2
    return 2 * math.asin(math.sqrt(a)) * GEOAGENT_RADIUS_KM


def geoagent_geoscore(distance_km: float, max_km: float = 2000.0) -> float:
    """``_calculate_geoscore``: exp(−10·d/max) below ``max_km``, 0 from there."""
    if distance_km >= max_km:
        return 0.0
    return math.exp(-10 * (distance_km / max_km))
