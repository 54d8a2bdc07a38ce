"""Reading a rollout for the training rewards: the model's own text, its answer, its levels.

Nothing inside tool blocks (``<tool_call>``, ``<tool_response>``, ``<tool_result>``,
``<observation>``, the ``<<<TOOL OUTPUT …>>>`` fence) is ever read as the answer: the core
parser's `without_tool_output` removes them in one linear pass before any reader sees the text.
Clean answers (one JSON object, or ``Latitude:`` / ``Longitude:`` lines) skip the full parser
(`fast_coordinates`), tested against the full path. The authors' own readings, used with
``released=true``, are in `geosleuth.core.released`.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from geosleuth.core import reward_math
from geosleuth.core.countries import resolve_country
from geosleuth.core.parsing import final_own_turn, parse_answer, without_tool_output
from geosleuth.core.records import Prediction
from geosleuth.core.released import geoagent_final_answer_json, twm_brace_objects
from geosleuth.training.rewards.truth import GroundTruth, parse_ground_truth

log = logging.getLogger(__name__)

_ANSWER_OPEN = re.compile(r"<answer>", re.I)
_ANSWER_CLOSE = re.compile(r"</answer>", re.I)
_GEOAGENT_SPLIT = re.compile(r"[;；]")
_COMMA = re.compile(r"[,，]")


strip_tool_blocks = without_tool_output
"""The parser's own stripper under the name the training code imports (one implementation)."""


def answer_content(text: str | None) -> str | None:
    """Content of the last ``<answer>`` block outside tool blocks (unclosed: to the end)."""
    if not text:
        return None
    own = without_tool_output(text)
    last = None
    for match in _ANSWER_OPEN.finditer(own):
        last = match
    if last is None:
        return None
    close = _ANSWER_CLOSE.search(own, last.end())
    content = own[last.end() : close.start() if close else len(own)].strip()
    return content or None


_LABEL = re.compile(r"^\W*(?:final\s+answer|answer|final\s+location|location|最终答案|答案)\W*[:：]\s*", re.I)
"""A label the model wrote before an untagged answer ("Final answer:", "**Answer**:")."""
_MAX_NAME_CHARS = 60


def _final_answer_json(own: str) -> str | None:
    """GeoAgent's SFT form ``{..., "FinalAnswer": "Country; Region; Place"}``.

    Read as the released ``GeoScoreAccuracy`` reads it (the span from the first ``{`` to the
    last ``}``), else from the last top-level object that carries the key.
    """
    if "FinalAnswer" not in own:
        return None
    found = geoagent_final_answer_json(own)
    if found:
        return found
    for cand in reversed(twm_brace_objects(own)):
        if "FinalAnswer" not in cand:
            continue
        try:
            obj = json.loads(cand)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("FinalAnswer"), str) and obj["FinalAnswer"].strip():
            return obj["FinalAnswer"].strip()
    return None


def _untagged_answer_line(own: str) -> str | None:
    """The last line of the final turn when it is a ``;`` answer, its label removed.

    Only the last non-empty line counts, and every part must be short (a name, not a
    sentence): prose that happens to hold a semicolon is not an answer.
    """
    lines = [line for line in final_own_turn(own).splitlines() if line.strip()]
    if not lines or not _GEOAGENT_SPLIT.search(lines[-1]):
        return None
    line = _LABEL.sub("", lines[-1].strip()).strip().strip("*").strip()
    parts = [p.strip() for p in _GEOAGENT_SPLIT.split(line)]
    names = all(len(p) <= _MAX_NAME_CHARS and len(p.split()) <= 6 for p in parts)
    return line if line and names else None


def geoagent_answer(text: str | None) -> str | None:
    """The text of a GeoAgent answer: the last ``<answer>`` block, a JSON ``FinalAnswer``, or the
    last ``;`` line of an untagged final turn (its "Final answer:" label removed)."""
    if not text:
        return None
    content = answer_content(text)
    own = own_text(text)
    if content is not None and "{" in content:
        return _final_answer_json(content)
    if content is not None:
        return _LABEL.sub("", content).strip() or None
    return _final_answer_json(own) or _untagged_answer_line(own)


def _country_first(content: str) -> dict[str, str | None] | None:
    """``Country, Region, Place`` (coarse to fine, as GeoAgent orders levels) when the first of three
    or more comma parts names a country and the last does not."""
    parts = [p.strip() for p in _COMMA.split(content)]
    if len(parts) < 3 or not all(parts) or any(":" in p for p in parts):
        return None
    if resolve_country(parts[0]) is None or resolve_country(parts[-1]) is not None:
        return None
    return {"country": parts[0], "region": parts[1], "precise": ";".join(parts[2:])}


def geoagent_levels(text: str | None) -> dict[str, str | None] | None:
    """GeoAgent's ``Country; Region; Place`` answer (``;`` or ``；``) as semantic levels, else None.

    Paper reading: positions are kept (an empty part is a missing level); a fourth part and
    beyond belong to the place, joined with ``;`` as the released code joins them. A comma
    answer in GeoAgent's coarse-to-fine order ("United States, Virginia, Montrose") is read in
    that order. `geosleuth.core.released.geoagent_fields` is the released reading.
    """
    content = geoagent_answer(text)
    if not content:
        return None
    if not _GEOAGENT_SPLIT.search(content):
        return _country_first(content) if "," in content else None
    parts = [p.strip() for p in _GEOAGENT_SPLIT.split(content)]
    if any(":" in p for p in parts[:2]):
        return None  # key: value answers that happen to contain a semicolon
    while len(parts) < 3:
        parts.append("")
    place = ";".join(p for p in parts[2:] if p)
    return {"country": parts[0] or None, "region": parts[1] or None, "precise": place or None}


MAX_PARSE_CHARS = 65_536
"""The full parser reads at most the last 64 KiB of the model's own text (the answer is at the end)."""


def own_text(text: str | None) -> str:
    """The model's own text, tool blocks removed, capped to its last `MAX_PARSE_CHARS` characters."""
    own = without_tool_output(text or "")
    if len(own) > MAX_PARSE_CHARS:
        log.debug("reward: rollout of %d characters read from its last %d", len(own), MAX_PARSE_CHARS)
        own = own[-MAX_PARSE_CHARS:]
    return own


def parse_rollout(text: str | None) -> Prediction:
    """The model's final answer in a decoded rollout (robust mode; tool blocks removed, length capped)."""
    return parse_answer(own_text(text), mode="robust")


def rollout_levels(text: str | None, pred: Prediction | None) -> dict[str, str | None]:
    """Country / region / precise place of a rollout: GeoAgent's answer form, else the parsed fields."""
    return geoagent_levels(text) or reward_math.semantic_levels(pred)


def truth_semantic(truth: GroundTruth) -> dict[str, str | None]:
    lv = truth.levels
    precise = lv.get("poi") or lv.get("street") or lv.get("town") or lv.get("city") or lv.get("admin2")
    return {"country": lv.get("country"), "region": lv.get("admin1"), "precise": precise}


_STATE_KEYS = frozenset({"province/state", "province / state", "province", "state", "region", "admin1"})


def _state_line(text: str | None) -> str | None:
    """A ``Province/State:`` line of the answer block (GeoVista's form), read line by line."""
    content = answer_content(text)
    if not content:
        return None
    for line in content.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().strip("*-").strip().lower() in _STATE_KEYS and value.strip():
            return value.strip().strip("*").strip()
    return None


def hierarchy_levels(text: str | None, pred: Prediction) -> tuple[str | None, str | None, str | None]:
    """(country, state, city) of an answer; a GeoAgent answer gives (country, region, place).

    A lone place of open level ("Paris" in "Paris, France", `Prediction.place`) is offered at
    both the state and the city level through `Prediction.level`: the released reward judges
    each level on its own and pays for the finest one that is right, so the place earns β² when
    it names the true city and β when it names the true state, as the same name on a ``City:``
    or ``Province/State:`` line would. It can never earn more than a full answer.
    """
    ga = geoagent_levels(text)
    if ga is not None:
        return ga["country"], ga["region"], ga["precise"]
    return pred.country, pred.admin1 or _state_line(text) or pred.level("admin1"), pred.level("city")


def answered(pred: Prediction) -> bool:
    """Coordinates or a named place; free text the parser kept only as an "address" does not count."""
    return pred.has_coords or any(
        (pred.country, pred.admin1, pred.city, pred.town, pred.street, pred.poi, pred.place)
    )


_ANSWER_TAG = re.compile(r"<(/?)answer>", re.I)
_RENAMED_KEYS = frozenset({"latitude", "longitude", "lng", "long"})
_PLAIN_KEYS = frozenset(
    {"lat", "lon", "city", "country", "region", "state", "province", "admin1", "address", "confidence"}
)
"""Keys the parser reads as they are (lower-case identifiers); others are checked one by one."""
_DECIMAL = re.compile(r"[-+]?[0-9]+(?:\.[0-9]+)?")


def _last_answer(text: str) -> str | None:
    """Content of the last non-empty ``<answer>`` block, found as the robust parser finds it.

    ``text`` is already free of tool blocks (`own_text`); each ``<answer>`` runs to the next
    ``</answer>``. Any case the replay does not cover exactly returns None: an unclosed
    answer, or a last answer holding markup.
    """
    parts = _ANSWER_TAG.split(text)  # text, "/" or "", text, …
    blocks: list[tuple[int, int]] = []  # (opening tag, closing tag) indices
    open_at = -1
    for i, slash in enumerate(parts[1::2]):
        if not slash:
            if open_at < 0:
                open_at = i
        elif open_at >= 0:
            blocks.append((open_at, i))
            open_at = -1
    if open_at >= 0:
        return None
    for a, b in reversed(blocks):
        if b != a + 1:
            return None  # a nested <answer> inside the block
        content = parts[2 * a + 2]
        if content.strip():
            return None if "<" in content else content
    return None


def _json_coordinates(content: str) -> tuple[float, float] | None:
    """A flat JSON object with numeric ``lat`` / ``lon`` and plain lower-case keys."""
    try:
        obj = json.loads(content)
    except ValueError:
        return None
    if type(obj) is not dict:
        return None
    keys = obj.keys()
    if not keys.isdisjoint(_RENAMED_KEYS) or not all(
        k.isidentifier() and k.islower() for k in keys - _PLAIN_KEYS
    ):
        return None  # other spellings of lat / lon, or keys the parser renames: it decides
    for v in obj.values():
        if type(v) is dict or type(v) is list:
            return None  # nested objects are flattened by the parser
    lat, lon = obj.get("lat"), obj.get("lon")
    if type(lat) not in (int, float) or type(lon) not in (int, float):
        return None
    return float(lat), float(lon)


_LAT_KEYS = ("lat", "latitude", "纬度")
_LON_KEYS = ("lon", "lng", "long", "longitude", "经度")
_SEPARATOR = re.compile(r"[;,|]")
_KEY_AFTER_SEPARATOR = re.compile(
    r"[ \t\r\n\f\v]*(?:country|city|region|state|province|admin1|address|place|location"
    r"|latitude|longitude|lat|lon|lng|confidence)[ \t\r\n\f\v]*[:：]",
    re.I,
)
"""Anchored at one position after a separator: the whitespace runs it crosses never overlap (linear)."""
_SPACE_DASH = re.compile(r"[\s\-]+")


def _inline_keys(content: str) -> bool:
    """Whether a ``;`` / ``,`` / ``|`` is followed by another answer key on the same text (inline answers)."""
    return any(_KEY_AFTER_SEPARATOR.match(content, m.end()) for m in _SEPARATOR.finditer(content))


def _answer_line(line: str) -> tuple[str, str] | None:
    """One ``Key: value`` line, read as the parser's answer-line rule reads it, in linear time."""
    rest = line.lstrip()
    if rest[:1] in ("-", "*", "•"):
        rest = rest[1:]
    rest = rest.lstrip().lstrip("*").lstrip()
    cut = min((i for i in (rest.find(":"), rest.find("：")) if i >= 0), default=-1)
    if cut <= 0:
        return None
    key = rest[:cut].rstrip().rstrip("*").rstrip()
    value = rest[cut + 1 :].strip().strip("*").strip()
    if not key or len(key) > 40 or not value:
        return None
    return key, value


def _line_coordinates(content: str) -> tuple[float, float] | None:
    """``Latitude: …`` / ``Longitude: …`` lines with plain decimals (one linear pass over the lines)."""
    if ("," in content or ";" in content or "|" in content) and _inline_keys(content):
        return None
    pairs: dict[str, str] = {}
    for line in content.split("\n"):
        found = _answer_line(line)
        if found is None:
            continue
        raw, value = found
        key = raw.strip().strip("*").lower()
        if not key.replace("_", "").isalnum():  # spaces or dashes: the parser's full key rule
            key = _SPACE_DASH.sub("_", key.strip())
        pairs.setdefault(key, value)
    lat = next((pairs[k] for k in _LAT_KEYS if k in pairs), None)
    lon = next((pairs[k] for k in _LON_KEYS if k in pairs), None)
    if lat is None or lon is None or not (_DECIMAL.fullmatch(lat) and _DECIMAL.fullmatch(lon)):
        return None
    return float(lat), float(lon)


def fast_coordinates(text: str | None) -> tuple[float, float] | None:
    """The common cases without the full parser: the last answer is clean JSON or answer lines.

    Returns coordinates only when the robust parser would certainly return the same ones: the
    last ``<answer>`` block lies outside any tool block and holds either one flat JSON object
    with numeric ``lat`` / ``lon``, or ``Latitude:`` / ``Longitude:`` lines with plain
    decimals, in range. Anything else returns None (full parse).
    """
    if not text or "<" not in text:
        return None
    content = _last_answer(own_text(text))
    if content is None:
        return None
    hit = _json_coordinates(content) if "{" in content else _line_coordinates(content)
    if hit is None or not (-90.0 <= hit[0] <= 90.0 and -180.0 <= hit[1] <= 180.0):
        return None
    return hit


def truth_latlon(value: Any) -> tuple[float, float]:
    if type(value) is dict:
        lat, lon = value.get("lat"), value.get("lon")
        if (
            isinstance(lat, float)
            and isinstance(lon, float)
            and -90.0 <= lat <= 90.0
            and -180.0 <= lon <= 180.0
        ):
            return lat, lon
    gt = parse_ground_truth(value)
    return gt.lat, gt.lon
