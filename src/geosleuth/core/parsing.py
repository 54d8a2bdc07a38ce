"""Model text -> :class:`Prediction`.

Two modes. ``strict`` reproduces a named protocol's parser exactly (``twm``: the first ``{...}``
object that parses as JSON and has lat, lon, city and country). ``robust`` (the default)
recovers what a careful reader would: the last answer block of a multi-turn text, tolerant
JSON, degree/minute/second and hemisphere notation, swapped lat/lon, plain addresses
geocoded by an injected geocoder. Whatever it repairs is listed in ``Prediction.recovered``.
Parsing never raises: a string that holds nothing usable gives ``status=FAILED``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from geosleuth.core.geo import valid_coordinates
from geosleuth.core.records import ParseStatus, Prediction

ParseMode = Literal["robust", "strict"]
STRICT_PROTOCOLS: tuple[str, ...] = ("twm", "spotagent", "geovista", "json")
"""Parsers ``mode="strict"`` can reproduce; ``None`` tries each strict format in turn."""


class _Searchable(Protocol):
    def search(self, query: str, country: str | None = None, limit: int = 10) -> Sequence[Any]: ...


GeocodeFn = Callable[[str, str | None], tuple[float, float] | None]
"""``(address, country_hint) -> (lat, lon)`` or ``None`` when nothing matched."""

Geocoder = GeocodeFn | _Searchable

LAT_KEYS = ("lat", "latitude", "纬度")
LON_KEYS = ("lon", "lng", "long", "longitude", "经度")
_FIELD_KEYS: dict[str, tuple[str, ...]] = {
    "country": ("country", "nation", "国家"),
    "admin1": ("admin1", "region", "state", "province", "prefecture", "省", "州"),
    "city": ("city", "town_or_city", "municipality", "城市"),
    "admin2": ("admin2", "county", "district"),
    "town": ("town", "village", "subdistrict", "neighborhood", "neighbourhood"),
    "street": ("street", "road"),
    "poi": ("poi", "place", "landmark", "specific_location", "location_name"),
    "address": ("address", "full_address", "location"),
}
_CONF_KEYS = ("confidence", "probability", "certainty")

_TOOL_BLOCK = re.compile(r"<(tool_response|tool_call|observation)>.*?</\1>", re.S | re.I)
_TOOL_OPEN = re.compile(r"<(tool_response|observation)>.*$", re.S | re.I)  # cut off mid-result
_ANSWER_BLOCK = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.S | re.I)
_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|$)", re.S | re.I)

_NUM = r"[-+−]?\d+(?:[.,]\d+)?"
_DMS = re.compile(
    rf"(?P<deg>{_NUM})\s*(?:°|º|˚|deg(?:rees?)?(?![a-z])|d(?![a-z]))\s*"
    r"(?:(?P<min>\d+(?:[.,]\d+)?)\s*(?:['′’]|min(?:utes?)?(?![a-z])|m(?![a-z]))\s*)?"
    r"(?:(?P<sec>\d+(?:[.,]\d+)?)\s*(?:[\"″”]|''|′′|sec(?:onds?)?(?![a-z])|s(?![a-z]))\s*)?"
    r"(?P<hemi>[NSEWnsew](?![a-zA-Z]))?"
)
_HEMI_BEFORE = re.compile(rf"(?P<hemi>[NSEW])\s*(?P<rest>{_NUM}.*)$", re.S)
_PLAIN_NUM = re.compile(rf"^\s*(?P<num>{_NUM})\s*(?:°|º)?\s*(?P<hemi>[NSEWnsew])?\s*$")
_PAIR = re.compile(
    rf"(?<![\d.])(?P<lat>{_NUM})\s*°?\s*(?P<lath>[NSns])?\s*[,;/\s]\s*(?P<lon>{_NUM})\s*°?\s*(?P<lonh>[EWew])?(?![\d.])"
)
_KEYED_PAIR = re.compile(  # "lat=48.85, lon=2.35", "latitude 48.85 longitude 2.35"
    rf"\b(?:lat|latitude)\s*[=:]?\s*(?P<lat>{_NUM})\s*°?\s*(?P<lath>[NSns](?![a-zA-Z]))?[\s,;|/]*"
    rf"\b(?:lon|lng|long|longitude)\s*[=:]?\s*(?P<lon>{_NUM})\s*°?\s*(?P<lonh>[EWew](?![a-zA-Z]))?",
    re.I,
)
_HEMI_FIRST_PAIR = re.compile(  # "S 33.87, E 151.21": capital hemisphere letters before the numbers
    rf"(?<![A-Za-z])(?P<lath>[NS])\s*(?P<lat>{_NUM})\s*°?\s*[,;/\s]\s*(?P<lonh>[EW])\s*(?P<lon>{_NUM})(?!\d|\.\d)"
)
ANSWER_LINE = re.compile(  # one ``Key: value`` line of an answer block
    r"^\s*[-*•]?\s*\**\s*(?P<key>[^:\n：]{1,40}?)\s*\**\s*[:：]\s*\**\s*(?P<val>.+?)\s*\**\s*$", re.M
)
_CHOICE = re.compile(
    r"(?i:answer|choice|option|答案)\s*(?i:is|:|：)?\s*(?:\((?P<a>[A-Ha-h])\)|\[(?P<b>[A-Ha-h])\]|(?P<c>[A-H])\b)"
)
_ANSWER_KEYS = (
    r"(?:country|city|region|state|province|admin1|address|place|location"
    r"|latitude|longitude|lat|lon|lng|confidence)\s*[:：]"
)
INLINE_KEY = re.compile(rf"\s*[;,|]\s*(?={_ANSWER_KEYS})", re.I)  # separator before the next key on one line
_SPACED_KEY = re.compile(rf"[ \t]+(?={_ANSWER_KEYS}[ \t]*\S)", re.I)  # "Latitude: 1 Longitude: 2"
_KEY_LINE = re.compile(rf"^[ \t]*[-*•]?[ \t]*\**[ \t]*{_ANSWER_KEYS}", re.I | re.M)
_ANSWER_PREFIX = re.compile(  # "**Final Answer:**", "My final answer:", "The answer is" before an address
    r"^(?:(?:my|the|our)\s+)?(?:(?:final|best)\s+)?(?:answer|location|address|guess)\s*(?:[:：]|\s+is\b)\s*",
    re.I,
)
_LONE_LETTER = re.compile(r"^\W*(?P<letter>[A-Ha-h])\W*$")


@dataclass
class _Found:
    """Fields collected from one candidate answer before they become a Prediction."""

    lat: float | None = None
    lon: float | None = None
    fields: dict[str, str] = field(default_factory=dict)
    confidence: float | None = None
    fmt: str | None = None
    recovered: list[str] = field(default_factory=list)

    @property
    def useful(self) -> bool:
        return (self.lat is not None and self.lon is not None) or bool(self.fields)


def parse_answer(
    text: str | None,
    mode: ParseMode = "robust",
    protocol: str | None = None,
    geocoder: Geocoder | None = None,
    choices: Sequence[str] | None = None,
) -> Prediction:
    """Turn one model output into a Prediction; never raises on any string.

    ``protocol`` selects the strict parser to reproduce (see :data:`STRICT_PROTOCOLS`); an
    unknown protocol name is a programming error and raises ``ValueError``.
    """
    if protocol is not None and protocol not in STRICT_PROTOCOLS:
        raise ValueError(f"unknown answer protocol {protocol!r}; use one of {', '.join(STRICT_PROTOCOLS)}")
    raw = text if isinstance(text, str) else ("" if text is None else str(text))
    if not raw.strip():
        return Prediction(raw=raw, status=ParseStatus.EMPTY)
    try:
        if mode == "strict" and protocol == "twm":
            found = _strict_twm(raw)
        elif mode == "strict":
            found = _strict_generic(raw, protocol)
        else:
            found = _robust(raw)
        choice = _parse_choice(raw, choices, mode) if choices else None
        return _finish(raw, found, choice, geocoder if mode == "robust" else None, mode)
    except Exception as exc:  # noqa: BLE001 - the contract is "never raises"; record why
        return Prediction(
            raw=raw, status=ParseStatus.FAILED, recovered=[f"parser_error:{type(exc).__name__}"]
        )


# --- strict protocols ---------------------------------------------------------------------


def _json_objects(text: str) -> list[Any]:
    """Every JSON value that starts at a ``{``, in text order (nested ones included)."""
    decoder = json.JSONDecoder()
    out: list[Any] = []
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, m.start())
        except (json.JSONDecodeError, RecursionError):
            continue
        out.append(obj)
    return out


def _strict_twm(text: str) -> _Found | None:
    """Thinking-with-Map: first object parsing as JSON with lat, lon, city and country."""
    for obj in _json_objects(text):
        if isinstance(obj, dict) and all(k in obj for k in ("lat", "lon", "city", "country")):
            try:
                lat, lon = float(obj["lat"]), float(obj["lon"])
            except (TypeError, ValueError):
                return _Found(fmt="json")
            fields = {k: str(obj[k]) for k in ("city", "country") if obj[k] is not None}
            return _Found(lat=lat, lon=lon, fields=fields, fmt="json")
    return None


def _strict_generic(text: str, protocol: str | None) -> _Found | None:
    """Strict: one format, no repairs; the first answer block (or the whole text) only."""
    blocks = [m.group(1) for m in _ANSWER_BLOCK.finditer(text)]
    region = blocks[0] if blocks else text
    if protocol in (None, "spotagent"):
        found = _from_lines(region, strict=True)
        if found is not None and (found.lat is not None or protocol == "spotagent"):
            return found
    if protocol in (None, "geovista") and blocks:
        found = _from_semicolons(region)
        if found is not None:
            return found
    if protocol in (None, "json"):
        for obj in _json_objects(region):
            if isinstance(obj, dict):
                found = _from_mapping(obj, strict=True)
                if found.useful:
                    found.fmt = "json"
                    return found
    return None


# --- robust -------------------------------------------------------------------------------


def _without_tool_output(text: str) -> str:
    """The model's own text: tool blocks removed, and an unclosed tool result up to the end.

    A rollout cut at its length limit can stop inside a tool response; whatever that output
    quotes (an ``<answer>``, "the answer is B") is the tool's, never the model's answer.
    """
    return _TOOL_OPEN.sub("", _TOOL_BLOCK.sub(" ", text))


def _robust(text: str) -> _Found | None:
    """Last answer block wins; tool output is never read as the model's answer."""
    cleaned = _without_tool_output(text)
    recovered: list[str] = []
    if cleaned != text:
        recovered.append("ignored_tool_output")
    blocks = [m.group(1) for m in _ANSWER_BLOCK.finditer(cleaned) if m.group(1).strip()]
    outside_think = _THINK_BLOCK.sub(" ", cleaned)
    regions: list[tuple[str, str | None]] = [(b, None) for b in reversed(blocks)]
    if len(blocks) > 1:
        regions[0] = (regions[0][0], "last_answer_block")
    regions.append((outside_think, None))
    if outside_think != cleaned:
        regions.append((cleaned, "answer_inside_think"))
    for region, note in regions:
        found = _parse_region(region)
        if found is not None and found.useful:
            found.recovered = recovered + ([note] if note else []) + found.recovered
            return found
    return None


def _parse_region(region: str) -> _Found | None:
    """Try each format on one region; prefer whichever yields coordinates."""
    candidates: list[_Found] = []
    json_found = _robust_json(region)
    if json_found is not None:
        candidates.append(json_found)
    lines = _from_lines(region, strict=False)
    if lines is not None:
        candidates.append(lines)
    semi = _from_semicolons(region)
    if semi is not None:
        candidates.append(semi)
    free = _free_coordinates(region)
    if free is not None:
        candidates.append(free)
    with_coords = [c for c in candidates if c.lat is not None and c.lon is not None]
    if with_coords:
        best = with_coords[0]
        for other in candidates:
            for k, v in other.fields.items():
                best.fields.setdefault(k, v)
        return best
    if candidates:
        return candidates[0]
    address = _address_text(region)
    return _Found(fields={"address": address}, fmt="address") if address else None


def _robust_json(region: str) -> _Found | None:
    """Last object with coordinates; fenced, tolerant (unquoted strings, single quotes)."""
    found: list[_Found] = []
    for obj_text in _brace_spans(region):
        try:
            obj = json.loads(obj_text)
            note: list[str] = []
        except (json.JSONDecodeError, RecursionError):
            obj = _loose_mapping(obj_text)
            note = ["tolerant_json"]
        if isinstance(obj, dict) and obj:
            item = _from_mapping(_flatten(obj), strict=False)
            if item.useful:
                item.fmt = "json"
                item.recovered = note + item.recovered
                found.append(item)
    if not found:
        return None
    with_coords = [f for f in found if f.lat is not None and f.lon is not None]
    pick = (with_coords or found)[-1]
    if len(found) > 1:
        pick.recovered.append("several_objects_last_wins")
    return pick


def _brace_spans(text: str) -> list[str]:
    """Outermost balanced ``{...}`` spans, tracking quoted strings."""
    spans: list[str] = []
    depth, start, quote = 0, -1, ""
    escaped = False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote or ch == "\n":
                quote = ""
            continue
        if ch == '"' and depth:
            quote = ch
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    if depth and start >= 0:
        spans.append(text[start:] + "}" * depth)
    return spans


_LOOSE_PAIR = re.compile(
    r"""["']?(?P<key>[A-Za-z_\u4e00-\u9fff][\w\u4e00-\u9fff ]{0,30}?)["']?\s*:\s*"""
    r"""(?P<val>"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|\[[^\]]*\]|[^,\n}]+)"""
)


def _loose_mapping(text: str) -> dict[str, Any]:
    """Key/value pairs from JSON-like text that json.loads rejects."""
    out: dict[str, Any] = {}
    for m in _LOOSE_PAIR.finditer(text.strip()[1:-1]):
        key, val = m.group("key").strip(), m.group("val").strip()
        if val[:1] in "\"'" and val[-1:] == val[:1] and len(val) >= 2:
            val = val[1:-1]
        elif val.startswith("["):
            try:
                out[key] = json.loads(val)
                continue
            except json.JSONDecodeError:
                pass
        out[key] = val.rstrip(",").strip()
    return out


def _flatten(obj: dict[str, Any]) -> dict[str, Any]:
    """Lift nested ``{"location": {...}}`` / ``{"answer": {...}}`` mappings to the top."""
    flat: dict[str, Any] = {}
    for k, v in obj.items():
        if isinstance(v, dict):
            for k2, v2 in _flatten(v).items():
                flat.setdefault(k2, v2)
        else:
            flat[k] = v
    return flat


def field_key(k: str) -> str:
    """The canonical spelling of an answer key: ``"Town or City"`` -> ``town_or_city``."""
    return re.sub(r"[\s\-]+", "_", str(k).strip().strip("*").lower())


def _from_mapping(obj: dict[str, Any], strict: bool) -> _Found:
    """Fields from a key/value mapping (parsed JSON or answer lines)."""
    keyed = {field_key(k): v for k, v in obj.items()}
    found = _Found()
    lat_raw = next((keyed[k] for k in LAT_KEYS if k in keyed), None)
    lon_raw = next((keyed[k] for k in LON_KEYS if k in keyed), None)
    if lat_raw is None and lon_raw is None:
        pair = next(
            (keyed[k] for k in ("coordinates", "coords", "gps", "latlon", "lat_lon") if k in keyed), None
        )
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            lat_raw, lon_raw = pair
        elif isinstance(pair, str) and not strict:
            free = _free_coordinates(pair)
            if free is not None:
                lat_raw, lon_raw = free.lat, free.lon
    if lat_raw is not None and lon_raw is not None:
        lat = _coordinate(lat_raw, "lat", strict, found.recovered)
        lon = _coordinate(lon_raw, "lon", strict, found.recovered)
        if lat is not None and lon is not None:
            found.lat, found.lon = lat, lon
    for name, keys in _FIELD_KEYS.items():
        val = next((keyed[k] for k in keys if k in keyed and keyed[k] not in (None, "")), None)
        if val is not None and not isinstance(val, (dict, list)):
            text = str(val).strip()
            if text and text.lower() not in ("null", "none", "unknown", "n/a"):
                found.fields[name] = text
    conf = next((keyed[k] for k in _CONF_KEYS if k in keyed), None)
    if conf is not None:
        found.confidence = _confidence(conf)
    return found


def _confidence(value: Any) -> float | None:
    try:
        text = str(value).strip().rstrip("%")
        c = float(text)
    except ValueError:
        return None
    if not math.isfinite(c):
        return None
    return c / 100.0 if c > 1.0 or str(value).strip().endswith("%") else c


def _coordinate(value: Any, axis: str, strict: bool, recovered: list[str]) -> float | None:
    """One coordinate from a number, a numeric string, or (robust) DMS / hemisphere text."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    text = str(value).strip()
    try:
        v = float(text)
        return v if math.isfinite(v) else None
    except ValueError:
        if strict:
            return None
    parsed = parse_coordinate_text(text, axis)
    if parsed is not None:
        recovered.append("coordinate_notation")
    return parsed


def parse_coordinate_text(text: str, axis: str | None = None) -> float | None:
    """Decimal or degree/minute/second text with optional N/S/E/W; S and W are negative."""
    s = text.strip().replace("−", "-").replace("–", "-")
    s = re.sub(r"(?<=\d),(?=\d)", ".", s)
    before = _HEMI_BEFORE.match(s)
    hemi_first = None
    if before:
        hemi_first, s = before.group("hemi"), before.group("rest")
    m = _PLAIN_NUM.match(s)
    if m:
        value, hemi = float(m.group("num")), m.group("hemi") or hemi_first
    else:
        m2 = _DMS.match(s)
        if not m2:
            return None
        deg = float(m2.group("deg"))
        minutes = float(m2.group("min") or 0.0)
        seconds = float(m2.group("sec") or 0.0)
        if minutes >= 60 or seconds >= 60:
            return None
        value = math.copysign(
            abs(deg) + minutes / 60.0 + seconds / 3600.0, -1.0 if deg < 0 or s.startswith("-") else 1.0
        )
        hemi = m2.group("hemi") or hemi_first
    if hemi:
        h = hemi.upper()
        if axis == "lat" and h in "EW" or axis == "lon" and h in "NS":
            return None
        if h in "SW":
            value = -abs(value)
    return value if math.isfinite(value) else None


def _from_lines(region: str, strict: bool) -> _Found | None:
    """``Country: …`` / ``City: …`` / ``Latitude: …`` / ``Longitude: …`` lines."""
    pairs: dict[str, str] = {}
    if not strict:  # "Country: X; City: Y; Latitude: …" or "Latitude: 1 Longitude: 2" on one line
        region = INLINE_KEY.sub("\n", region)
        region = "\n".join(
            _SPACED_KEY.sub("\n", line) if _KEY_LINE.match(line) else line for line in region.split("\n")
        )
    for m in ANSWER_LINE.finditer(region):
        key = field_key(m.group("key"))
        if key not in pairs:
            pairs[key] = m.group("val").strip().strip("*").strip()
    if not pairs:
        return None
    found = _from_mapping(pairs, strict=strict)
    if not found.useful:
        return None
    found.fmt = "answer_lines"
    return found


def _from_semicolons(region: str) -> _Found | None:
    """``Country; Region; Specific location`` (one line, two or three parts)."""
    body = region.strip()
    if "\n" in body or body.count(";") not in (1, 2) or "{" in body or len(body) > 300:
        return None
    parts = [p.strip().strip(".") for p in body.split(";")]
    if not all(parts):
        return None
    names = ("country", "admin1", "poi")
    found = _Found(fields=dict(zip(names, parts, strict=False)), fmt="semicolon")
    if len(parts) == 3:
        found.fields["address"] = ", ".join(reversed(parts))
    return found


def _free_coordinates(region: str) -> _Found | None:
    """The last plausible ``lat, lon`` pair (decimal or DMS with hemispheres) in free text."""
    text = region.replace("−", "-")
    dms = list(
        re.finditer(
            r"(?P<a>\d{1,3}(?:[.,]\d+)?\s*°[^NSEWnsew\n]{0,20}?[NSns])\s*[,;/]?\s*"
            r"(?P<b>\d{1,3}(?:[.,]\d+)?\s*°[^NSEWnsew\n]{0,20}?[EWew])",
            text,
        )
    )
    if dms:
        m = dms[-1]
        lat, lon = parse_coordinate_text(m.group("a"), "lat"), parse_coordinate_text(m.group("b"), "lon")
        if lat is not None and lon is not None:
            return _Found(lat=lat, lon=lon, fmt="free_coordinates", recovered=["coordinate_notation"])
    for pattern, integers_ok in ((_KEYED_PAIR, True), (_HEMI_FIRST_PAIR, False)):
        keyed = list(pattern.finditer(text))
        if keyed:
            found = _pair_found(keyed[-1], require_decimals=not integers_ok)
            if found is not None:
                return found
    for m in reversed(list(_PAIR.finditer(text))):
        found = _pair_found(m, require_decimals=True)
        if found is not None:
            return found
    return None


def _pair_found(m: re.Match[str], require_decimals: bool) -> _Found | None:
    """A matched ``lat, lon`` pair with optional hemisphere letters, if it is in range."""
    lat_s, lon_s = m.group("lat").replace(",", "."), m.group("lon").replace(",", ".")
    if require_decimals and "." not in lat_s and "." not in lon_s:
        return None  # two bare integers are more often a count or a year than a position
    lat, lon = float(lat_s), float(lon_s)
    if (m.group("lath") or "").upper() == "S":
        lat = -abs(lat)
    if (m.group("lonh") or "").upper() == "W":
        lon = -abs(lon)
    if abs(lat) > 180 or abs(lon) > 360:
        return None
    return _Found(lat=lat, lon=lon, fmt="free_coordinates", recovered=["free_text_coordinates"])


def _address_text(region: str) -> str | None:
    """A short final line that reads like an address (no coordinates anywhere)."""
    lines = [ln.strip(" *-•`\"'") for ln in region.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    last = re.sub(_ANSWER_PREFIX, "", re.sub(r"\*\*|__", "", lines[-1]))
    last = last.strip().rstrip(".")
    if not re.search(r"[^\W\d_]", last) or re.search(r"[{}<>\[\]]", last):
        return None
    if len(last) > 150 or len(last.split()) > 20:
        return None
    if not re.search(r"(?:^|[\s,(])[A-ZÀ-ÖØ-Þ]|[^\x00-\u024f]", last):
        return None  # place names are capitalised (or written in a non-Latin script)
    return last


def _parse_choice(raw: str, choices: Sequence[str], mode: ParseMode) -> str | None:
    """A choice letter ("B", "(b)", "Answer: C"), or (robust) the one option the answer names."""
    letters = [chr(ord("A") + i) for i in range(len(choices))]
    own = _without_tool_output(raw)
    blocks = [m.group(1) for m in _ANSWER_BLOCK.finditer(own)]
    region = (blocks[0] if mode == "strict" else blocks[-1]) if blocks else own
    lone = _LONE_LETTER.match(region)
    if lone and lone.group("letter").upper() in letters:
        return lone.group("letter").upper()
    explicit = [(m.group("a") or m.group("b") or m.group("c")).upper() for m in _CHOICE.finditer(region)]
    explicit = [x for x in explicit if x in letters]
    if explicit:
        return explicit[0] if mode == "strict" else explicit[-1]
    if mode == "strict":
        return None
    from geosleuth.core.text import normalize

    text = f" {normalize(region)} "
    named = [letters[i] for i, c in enumerate(choices) if normalize(c) and f" {normalize(c)} " in text]
    return named[0] if len(named) == 1 else None


# --- finishing ----------------------------------------------------------------------------


def _finish(
    raw: str, found: _Found | None, choice: str | None, geocoder: Geocoder | None, mode: ParseMode
) -> Prediction:
    if found is None or not found.useful:
        status = ParseStatus.OK if choice else ParseStatus.FAILED
        return Prediction(raw=raw, status=status, choice=choice, format="choice" if choice else None)
    recovered = list(dict.fromkeys(found.recovered))
    lat, lon = found.lat, found.lon
    if lat is not None and lon is not None:
        lat, lon = _fix_coordinates(lat, lon, mode, recovered)
    fields = dict(found.fields)
    if set(fields) == {"address"}:
        fields.update(_split_address(fields["address"], recovered))
    country_code = _country_code(fields.get("country"))
    coords_source: str | None = "model" if lat is not None else None
    if lat is None and geocoder is not None:
        query = _geocode_query(fields)
        if query:
            hit = _geocode(geocoder, query, country_code)
            if hit is not None:
                lat, lon = hit
                coords_source = "geocoded"
                recovered.append("geocoded_address")
    if lat is not None and lon is not None:
        status = ParseStatus.OK
    else:
        status = ParseStatus.PARTIAL if (fields or choice) else ParseStatus.FAILED
    return Prediction(
        lat=lat,
        lon=lon,
        country=fields.get("country"),
        country_code=country_code,
        admin1=fields.get("admin1"),
        city=fields.get("city"),
        admin2=fields.get("admin2"),
        town=fields.get("town"),
        street=fields.get("street"),
        poi=fields.get("poi"),
        address=fields.get("address"),
        choice=choice,
        confidence=found.confidence,
        raw=raw,
        status=status,
        format=found.fmt,
        coords_source=coords_source,  # type: ignore[arg-type]
        recovered=recovered,
    )


def _split_address(address: str, recovered: list[str]) -> dict[str, str]:
    """Read "street, city, region, country" from a comma-separated answer (finest part first)."""
    parts = [p.strip() for p in re.split(r"[,，、]", address) if p.strip()]
    if len(parts) < 2:
        return {}
    out: dict[str, str] = {}
    if _country_code(parts[-1]) is not None:
        out["country"] = parts.pop()
    if len(parts) == 1:
        out["city"] = parts[0]
    elif len(parts) >= 2:
        *head, out["city"], out["admin1"] = parts
        if head:
            out["street"] = ", ".join(head)
    recovered.append("address_split")
    return out


def _fix_coordinates(
    lat: float, lon: float, mode: ParseMode, recovered: list[str]
) -> tuple[float | None, float | None]:
    """Swap impossible lat/lon (robust), wrap 180–360 longitudes, reject the rest."""
    if mode == "robust" and abs(lat) > 90 and abs(lon) <= 90:
        lat, lon = lon, lat
        recovered.append("swapped_lat_lon")
    if mode == "robust" and 180 < lon <= 360:
        lon -= 360.0
        recovered.append("wrapped_longitude")
    if not (math.isfinite(lat) and math.isfinite(lon)) or abs(lat) > 90 or abs(lon) > 180:
        recovered.append("invalid_coordinates")
        return None, None
    return lat, lon


def _country_code(text: str | None) -> str | None:
    if not text:
        return None
    from geosleuth.core.countries import resolve_country

    return resolve_country(text)


def _geocode_query(fields: dict[str, str]) -> str | None:
    if "address" in fields:
        return fields["address"]
    parts = [
        fields[k] for k in ("poi", "street", "town", "admin2", "city", "admin1", "country") if k in fields
    ]
    return ", ".join(parts) if parts else None


def _geocode(geocoder: Geocoder, query: str, country: str | None) -> tuple[float, float] | None:
    """Call either a ``search``-style gazetteer or a plain function; failures mean no match."""
    try:
        if hasattr(geocoder, "search"):
            places = geocoder.search(query, country=country, limit=1)  # type: ignore[union-attr]
            if not places and country is not None:
                places = geocoder.search(query, country=None, limit=1)  # type: ignore[union-attr]
            if not places:
                return None
            lat, lon = float(places[0].lat), float(places[0].lon)
        else:
            hit = geocoder(query, country)  # type: ignore[operator]
            if hit is None:
                return None
            lat, lon = float(hit[0]), float(hit[1])
    except Exception:  # noqa: BLE001 - a failing geocoder means "not geocoded", never a crash
        return None
    if not valid_coordinates(lat, lon):
        return None  # a geocoder's impossible point is no match, not a prediction
    return lat, lon
