"""Model text -> :class:`Prediction`.

Two modes. ``strict`` reproduces a named protocol's parser (``twm``: the first ``{...}`` object
that parses as JSON and has lat, lon, city and country; ``spotagent`` / ``geovista``: ``Key:
value`` lines of the first ``<answer>`` block, one per line or inline ``key: v, key: v``;
``geoagent``: ``Country; Region; Place``; ``json``: the first JSON object with answer keys).
``robust`` (the default) recovers what a careful reader would: the last answer block of a
multi-turn text, tolerant JSON, degree/minute/second and hemisphere notation, swapped lat/lon,
plain addresses geocoded by an injected geocoder. Whatever it repairs is listed in
``Prediction.recovered``. Parsing never raises: a string that holds nothing usable gives
``status=FAILED``.

Bounded work on any input:

* Input longer than :data:`MAX_PARSE_CHARS` is cut to its **tail** (the final answer of a
  rollout is at its end); ``recovered`` records ``input_truncated:kept_last_<n>_of_<m>_chars``.
  A tail that starts inside a tool result is cut further, to just after that result's end.
* Whitespace is squeezed once (runs of blanks -> one space, blank lines -> one newline) before
  any text pattern runs, and no pattern repeats over characters a neighbouring quantifier also
  takes, so every regex runs in time linear in the text. JSON needs no squeezing (the decoder
  skips whitespace and field values are squeezed one by one), so in robust mode a region is
  squeezed only when a format after JSON has to read it: most answers never pay for it.
* JSON is found by one pass over the structural characters and decoded with the C decoder;
  nesting deeper than the interpreter allows is an unparsable object, never an exception.

Tool output is never the model's answer. Everything between the delimiters of any prompt
style is ignored: ``<tool_response>…</tool_response>``, ``<tool_result>``, ``<observation>``,
the model's own ``<tool_call>`` blocks, and the fence ``<<<TOOL OUTPUT …>>> … <<<END TOOL
OUTPUT>>>`` of :mod:`geosleuth.tools.text`. The fence wins over tags: a ``</tool_response>``
inside a fence closes nothing. An unclosed block runs to the end of the text.

Which format wins (robust). Regions are tried in order: the last ``<answer>`` block, earlier
blocks, the text outside ``<think>``, then the whole text. In a region the formats run in
order JSON, ``Key: value`` lines, ``Country; Region; Place``, free-text coordinates, a bare
address line; the first format that yields coordinates wins and stops the search, after which
the cheap text formats (lines, semicolons) only fill fields it left empty. Within JSON the
last object with coordinates wins; within free text the last pair.

Coordinates. Out-of-range values are rejected, never wrapped (``{"lat": 200, "lon": 10}`` is
no position). Robust mode swaps lat/lon only when the pair is impossible as given and valid
swapped (|lat| in (90, 180], |lon| <= 90). A bare decimal pair in prose counts only with a
coordinate context: a degree mark or hemisphere letter, a lat/lon/coordinates/GPS keyword or
"answer:" before it on the line, or a line that is nothing but the pair (anywhere in an ``<answer>`` block,
the last line otherwise). "I am 0.85, 0.9 confident" is not a position.

Fields are names, never prose: "The photo was taken in Glovelier" yields "Glovelier"
(``recovered: name_from_prose``) or nothing. A comma address is split fine to coarse:
a trailing country, street-like parts (house numbers, street words), a part carrying a postcode
is the city; the remaining parts are ``city, admin1``. A lone name beside a country
("Hesse, Germany", "Tokyo, Japan") is ambiguous between city and admin-1: it goes to the
neutral ``place`` field, which :meth:`Prediction.level` offers at the admin1, city, admin2 and
town levels, unless an injected ``place_level`` resolver names its level.
``Country; Region; Place`` maps coarse to fine: country, admin1, then city, admin2, town for
middle parts, and the last part (the most precise) is the ``poi`` and the ``place``; empty
parts (``France; ; Paris``) are skipped and full-width ``；`` separates like ``;``.

Multiple choice: a JSON ``"choice"`` value, a lone letter or number, or an explicit
"answer/choice/option: X" (letters A-H, numbers 1..n -> A..), else (robust) the one option the
answer names. An explicit choice always wins over a named option; robust takes the last
explicit one, strict the first.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, Protocol

from geosleuth.core.geo import valid_coordinates
from geosleuth.core.records import LEVELS, ParseStatus, Prediction

ParseMode = Literal["robust", "strict"]
STRICT_PROTOCOLS: tuple[str, ...] = ("twm", "spotagent", "geovista", "geoagent", "json")
"""Parsers ``mode="strict"`` can reproduce; ``None`` tries each strict format in turn."""

MAX_PARSE_CHARS = 262_144
"""Longest text parsed (characters); longer input keeps its tail. 256 Ki characters is about
64k tokens: a whole multi-turn rollout with its tool results fits."""


class _Searchable(Protocol):
    def search(self, query: str, country: str | None = None, limit: int = 10) -> Sequence[Any]: ...


GeocodeFn = Callable[[str, str | None], tuple[float, float] | None]
"""``(address, country_hint) -> (lat, lon)`` or ``None`` when nothing matched."""

Geocoder = GeocodeFn | _Searchable

PlaceLevelFn = Callable[[str, str | None], str | None]
"""``(name, country_code) -> level`` ("city", "admin1", …) of an ambiguous place, or ``None``."""

LAT_KEYS = ("lat", "latitude", "纬度")
LON_KEYS = ("lon", "lng", "long", "longitude", "经度")
_FIELD_KEYS: dict[str, tuple[str, ...]] = {
    "country": ("country", "nation", "country_name", "country/region", "国家", "国家/地区"),
    "admin1": (
        "admin1", "admin_1", "region", "state", "province", "prefecture", "province/state",
        "state/province", "province_or_state", "state_or_province", "province_state", "state_province",
        "province/region", "region/province", "state/region", "region/state", "oblast", "省", "省份", "州",
    ),
    "city": ("city", "town_or_city", "city_or_town", "city/town", "town/city", "municipality", "城市", "市"),
    "admin2": ("admin2", "admin_2", "county", "district"),
    "town": ("town", "village", "subdistrict", "neighborhood", "neighbourhood"),
    "street": ("street", "road"),
    "poi": ("poi", "place", "landmark", "specific_location", "location_name", "precise_place"),
    "address": ("address", "full_address", "location"),
}  # fmt: skip
_FIELD_OF = {key: (name, rank) for name, keys in _FIELD_KEYS.items() for rank, key in enumerate(keys)}
_FIELD_ORDER = {name: i for i, name in enumerate(_FIELD_KEYS)}
_CONF_KEYS = ("confidence", "probability", "certainty")
_PAIR_KEYS = ("coordinates", "coords", "gps", "latlon", "lat_lon", "lat/lon")
_NULLS = frozenset(("null", "none", "unknown", "n/a", "na", "-", "?", "not sure", "unsure", "未知"))

# --- whitespace and delimiters ------------------------------------------------------------

_LINE_BREAKS = re.compile(r"\r\n?|[\u2028\u2029\x85\x0b\x0c\x1c-\x1e]")
_BREAK_CHARS = "\r\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e"  # what _LINE_BREAKS matches, for a C-speed test
# runs of blanks or one odd blank; a lone space is left alone (no work per word), and each branch
# starts with a single character class so the scan rejects ordinary characters fast
_BLANKS = re.compile(r" [^\S\n]+|[^\S \n][^\S\n]*")
# blanks other than the space that survive line-break folding; absent from most answers, so a few
# C-speed membership tests let squeeze use literal-prefixed patterns instead of scanning every
# character against a Unicode class (35 -> 12 us on a typical 900-character answer)
_ODD_BLANKS = (
    "\t\x1f\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
)
_SPACE_RUNS = re.compile(r"  +")
_UNSQUEEZED = re.compile(r"[^\S ]|  ")  # any blank but a lone space: squeeze may have work to do
_NEWLINE_RUNS = re.compile(r"\n[ \n]+")

_TOOL_OPEN = re.compile(r"<(tool_response|tool_result|tool_call|observation)>|<<<TOOL OUTPUT\b", re.I)
_FENCE_CLOSE = "<<<END TOOL OUTPUT>>>"  # the fence of geosleuth.tools.text (core imports no adapter)
_TOOL_CLOSE: dict[str, re.Pattern[str]] = {
    tag: re.compile(rf"</{tag}>|<<<TOOL OUTPUT\b", re.I)
    for tag in ("tool_response", "tool_result", "tool_call", "observation")
}
_ANY_TOOL_CLOSE = re.compile(
    r"</(?:tool_response|tool_result|tool_call|observation)>|<<<END TOOL OUTPUT>>>|"
    r"<(?:tool_response|tool_result|tool_call|observation)>|<<<TOOL OUTPUT\b",
    re.I,
)
_ANSWER_OPEN = re.compile(r"<answer>", re.I)
_ANSWER_CLOSE = re.compile(r"</answer>", re.I)
_THINK_OPEN = re.compile(r"<think>", re.I)
_THINK_CLOSE = re.compile(r"</think>", re.I)

# --- key / value lines --------------------------------------------------------------------

_KEY_NAMES = (
    r"(?:country|city|region|province/state|state/province|province_or_state|state_or_province"
    r"|state|province|admin1|county|district|town|street|address|place|location"
    r"|latitude|longitude|lat|lon|lng|confidence|choice)"
)
_ANSWER_KEYS = rf"\*{{0,2}}{_KEY_NAMES}\*{{0,2}}[ \t]?[:：]"
ANSWER_LINE = re.compile(  # one ``Key: value`` line; key and value may carry ``**`` (callers strip)
    r"^[^\S\n]*+(?:[-*•][^\S\n]*+)?(?P<key>[^:：\s][^:：\n]{0,39}+)[:：][^\S\n]*+(?P<val>\S[^\n]*+)", re.M
)
INLINE_KEY = re.compile(rf"[;,|；，][ \t]*+(?={_ANSWER_KEYS})", re.I)  # separator before the next key
_SPACED_KEY = re.compile(rf"(?<=\S)[ \t]++(?={_ANSWER_KEYS})", re.I)  # "**Latitude:** 1 **Longitude:** 2"
_KEY_LINE = re.compile(rf"[ \t]*+(?:[-•][ \t]*+)?{_ANSWER_KEYS}", re.I)
_EMPTY_KEY_LINE = re.compile(r"[^\S\n]*+(?:[-*•][^\S\n]*+)?(?P<key>[^:：\s][^:：\n]{0,39}+)[:：][\s*]*+$")

# --- coordinates --------------------------------------------------------------------------

_DEG_MARK = r"(?:°|º|˚|deg(?:rees?)?(?![a-z])|d(?![a-z]))"
_MIN_MARK = r"(?:['′’‘]|min(?:utes?)?(?![a-z])|m(?![a-z]))"
_SEC_MARK = r"(?:\"|″|”|''|′′|sec(?:onds?)?(?![a-z])|s(?![a-z]))"
_COORD_BODY = (
    r"(?:(?P<h1>[NSEW]) ?)?(?P<sign>[-+])?(?P<deg>\d{1,3}+(?:[.,]\d++)?)(?!\d)"
    rf"(?: ?(?P<dmark>{_DEG_MARK})"
    rf"(?: ?(?P<min>\d{{1,2}}+(?:[.,]\d++)?) ?{_MIN_MARK})?"
    rf"(?: ?(?P<sec>\d{{1,2}}+(?:[.,]\d++)?) ?{_SEC_MARK})?)?"
    r"(?(h1)|(?: ?(?P<h2>[NSEWnsew])(?![A-Za-z\d]))?)"  # one hemisphere letter, before or after
)
_COORD_TEXT = re.compile(_COORD_BODY)
_COORD_TOKEN = re.compile(rf"(?<![\w.]){_COORD_BODY}")
_PAIR_GAP = re.compile(r" ?(?:[,;/] ?|and |\n)?")
_CONTEXT = re.compile(  # words that announce a position (searched just before a pair, same line)
    r"(?i:\b(?:coordinates?|coords?|gps|lat(?:itude)?|lon(?:gitude)?|lng|position|located at)\b"
    r"|\b(?:answer|guess|prediction|location) ?(?:is\b|[:：]))"
)
_KEYED_PAIR = re.compile(  # "lat=48.85, lon=2.35", "latitude 48.85 longitude 2.35"
    r"(?i:\b(?:lat|latitude)\b)\*{0,2} ?[=:]?\*{0,2} ?(?P<a>[^\n]{1,40}?)[ ,;|/\n]{0,3}"
    r"(?i:\b(?:lon|lng|long|longitude)\b)\*{0,2} ?[=:]?\*{0,2} ?(?P<b>[^\n]{1,40}?)(?=$|[ ,;|)\]]|\.(?!\d))",
    re.M,
)
_PAIR_LINE_REST = re.compile(  # what may surround a pair that stands alone on its line
    r"[^\w]{0,12}(?i:(?:(?:my |the )?(?:final |best )?(?:answer|guess|location|prediction))[^\w]{0,6})?"
)
_DIGIT = re.compile(r"\d")
_DIGITS_ONLY = re.compile(r"[-+\d.,° ]+")
_NEWLINE = re.compile(r"\n")

# --- choices, addresses, prose ------------------------------------------------------------

_CHOICE = re.compile(
    r"(?i:answer|choice|option|答案)(?i: is| would be| =|:|：)? ?"
    r"(?:\((?P<a>[A-Ha-h1-8])\)|\[(?P<b>[A-Ha-h1-8])\]|(?P<c>[A-H]|[1-8])(?!\w|[.,]\d))"
)
_JSON_CHOICE = re.compile(r"""["']?(?i:choice|answer|option)["']? ?[:=] ?["']?(?P<v>[^"'\n,}]{1,60})""")
_ANSWER_PREFIX = re.compile(  # "**Final Answer:**", "My final answer:", "The answer is" before an address
    r"^(?:(?:my|the|our) )?(?:(?:final|best) )?(?:answer|location|address|guess) ?(?:[:：]|is\b) ?", re.I
)
_STREET_WORDS = re.compile(  # a part naming a street (abbreviations like "St" also start town names)
    r"(?i:\b(?:street|road|avenue|boulevard|lane|drive|highway|strasse|straße|gasse|allee|rue|chemin"
    r"|via|viale|piazza|calle|avenida|rua|praça|ulitsa|ulica|utca|straat|gatan|vägen|katu|sokak|cadde)\b)"
    r"|(?i:(?:straße|strasse|gasse|weg|platz)\b)|[路巷弄号]"
)
_POSTCODE = re.compile(
    r"^(?:[A-Z]{1,2}-)?\d{3,6}(?:-\d{3,4})? (?P<rest>.+)$|^(?P<rest2>.+?) \d{3,6}(?:-\d{3,4})?$"
)
_PROSE_WORDS = frozenset(
    ("was", "is", "are", "were", "be", "been", "taken", "likely", "probably", "possibly", "appears",
     "seems", "looks", "think", "believe", "guess", "photo", "image", "picture", "located", "somewhere",
     "shows", "this", "that", "it", "i", "we", "my", "based", "because", "could", "would", "might")
)  # fmt: skip
_REMARK = re.compile(r" ?\(([^()]{1,300})\)$")
_PLACE_AFTER = re.compile(r"(?:^|\s)(?:in|at|near|from|of)\s(?P<name>[^\W\d_][^.!?;:]{0,80}?)[.!?]?$")


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
    def has_coords(self) -> bool:
        return self.lat is not None and self.lon is not None

    @property
    def useful(self) -> bool:
        return self.has_coords or bool(self.fields)


def parse_answer(
    text: str | None,
    mode: ParseMode = "robust",
    protocol: str | None = None,
    geocoder: Geocoder | None = None,
    choices: Sequence[str] | None = None,
    place_level: PlaceLevelFn | None = None,
    country_codes: bool = True,
) -> Prediction:
    """Turn one model output into a Prediction; never raises on any string.

    ``protocol`` selects the strict parser to reproduce (see :data:`STRICT_PROTOCOLS`); an
    unknown protocol name is a programming error and raises ``ValueError``. ``place_level``
    optionally resolves the level of a lone place name (see the module docstring).
    ``country_codes=False`` leaves ``country_code`` unset unless geocoding or ``place_level``
    uses it for this answer: a scorer that never reads it then rarely builds the country-name index.
    """
    if protocol is not None and protocol not in STRICT_PROTOCOLS:
        raise ValueError(f"unknown answer protocol {protocol!r}; use one of {', '.join(STRICT_PROTOCOLS)}")
    raw = text if isinstance(text, str) else ("" if text is None else str(text))
    if not raw or raw.isspace():
        return Prediction(raw=raw, status=ParseStatus.EMPTY)
    work, notes = _bounded(raw)
    try:
        own, removed = _without_tool_output(work)
        notes += ["ignored_tool_output"] if removed else []
        if mode == "strict" and protocol == "twm":
            found = _strict_twm(own)  # released: first JSON object of the model's own text
        else:
            found = _strict_generic(own, protocol) if mode == "strict" else _robust(own)
        choice = _parse_choice(work, choices, mode) if choices else None
        pred = _finish(
            raw, found, choice, geocoder if mode == "robust" else None, mode, place_level, country_codes
        )
    except Exception as exc:  # noqa: BLE001 - the contract is "never raises"; record why
        pred = Prediction(
            raw=raw, status=ParseStatus.FAILED, recovered=[f"parser_error:{type(exc).__name__}"]
        )
    if notes:
        pred.recovered = list(dict.fromkeys(notes + pred.recovered))
    return pred


# --- bounding and cleaning ----------------------------------------------------------------


def _bounded(raw: str) -> tuple[str, list[str]]:
    """The text to parse: all of it, or its tail past a tool result it may start inside."""
    if len(raw) <= MAX_PARSE_CHARS:
        return raw, []
    tail, pos = raw[-MAX_PARSE_CHARS:], 0
    while (first := _ANY_TOOL_CLOSE.search(tail, pos)) is not None and _is_close(first.group(0)):
        pos = first.end()  # we start inside a tool result (or a fence in one): skip past its end
    tail = tail[pos:]
    return tail, [f"input_truncated:kept_last_{len(tail)}_of_{len(raw)}_chars"]


def _is_close(delimiter: str) -> bool:
    return delimiter.startswith(("</", _FENCE_CLOSE))


def squeeze(text: str) -> str:
    """Blank runs -> one space, line breaks of any kind -> one ``\\n`` (linear; no blank lines)."""
    if _UNSQUEEZED.search(text) is None:
        return text  # the common field value: one pattern search, nothing to rewrite
    if any(c in text for c in _BREAK_CHARS):
        text = _LINE_BREAKS.sub("\n", text)
    if not text.isascii() and any(c in text for c in _ODD_BLANKS) or "\t" in text or "\x1f" in text:
        text = _BLANKS.sub(" ", text)
    elif "  " in text:
        text = _SPACE_RUNS.sub(" ", text)
    if " \n" in text:
        text = text.replace(" \n", "\n")  # blanks are single now, so every space before a break goes
    if "\n " in text or "\n\n" in text:
        text = _NEWLINE_RUNS.sub("\n", text)
    return text


def without_tool_output(text: str) -> str:
    """The model's own text, every tool block removed: the one stripper the parser and rewards share."""
    return _without_tool_output(text)[0]


def final_own_turn(text: str) -> str:
    """The text after the last tool block (the model's final turn); empty when a tool block runs
    to the end (a rollout cut off inside a tool result has no final turn)."""
    pos = 0
    while (m := _TOOL_OPEN.search(text, pos)) is not None:
        pos = _tool_end(text, m.end(), (m.group(1) or "").lower())
    return text[pos:]


def _without_tool_output(text: str) -> tuple[str, bool]:
    """The model's own text and whether anything was removed (see the module docstring)."""
    if "<" not in text:
        return text, False  # no tag and no fence: nothing to remove, no scan
    out: list[str] = []
    pos, removed = 0, False
    while True:
        m = _TOOL_OPEN.search(text, pos)
        if m is None:
            out.append(text[pos:])
            return "".join(out), removed
        out.append(text[pos : m.start()])
        out.append(" ")
        removed = True
        pos = _tool_end(text, m.end(), (m.group(1) or "").lower())


def _tool_end(text: str, pos: int, tag: str) -> int:
    """Index just past the block opened before ``pos`` (``tag`` empty: a fence); end of text if open."""
    if not tag:
        end = text.find(_FENCE_CLOSE, pos)
        return len(text) if end < 0 else end + len(_FENCE_CLOSE)
    closer = _TOOL_CLOSE[tag]
    while True:
        m = closer.search(text, pos)
        if m is None:
            return len(text)
        if m.group(0).startswith("</"):
            return m.end()
        pos = _tool_end(text, m.end(), "")  # a fence inside the block: its end first
        if pos >= len(text):
            return pos


def _blocks(text: str, opener: re.Pattern[str], closer: re.Pattern[str]) -> Iterator[tuple[int, int, int]]:
    """``(start, content_start, content_end)`` of each block; an unclosed one runs to the end."""
    pos = 0
    while True:
        m = opener.search(text, pos)
        if m is None:
            return
        c = closer.search(text, m.end())
        end = len(text) if c is None else c.start()
        yield m.start(), m.end(), end
        if c is None:
            return
        pos = c.end()


def _answer_blocks(text: str) -> list[str]:
    return [text[a:b] for _, a, b in _blocks(text, _ANSWER_OPEN, _ANSWER_CLOSE)]


def _outside_think(text: str) -> str:
    out: list[str] = []
    pos = 0
    for start, _, end in _blocks(text, _THINK_OPEN, _THINK_CLOSE):
        out.append(text[pos:start])
        out.append(" ")
        c = _THINK_CLOSE.match(text, end)
        pos = c.end() if c else len(text)
    out.append(text[pos:])
    return "".join(out)


# --- JSON ---------------------------------------------------------------------------------

_JSON_TOKEN = re.compile(r'\\.|[{}"\n]', re.S)
_MAX_JSON_DEPTH = 32  # deeper objects are never answers; bounds the decoding work
_DIRECT_DECODE_BRACES = 64  # up to this many "{", decode at each (the released twm loop) directly
_DECODER = json.JSONDecoder()


def _decode(text: str, start: int) -> tuple[Any, int] | None:
    """The JSON value at ``start`` and its end, or ``None`` when it does not parse (any depth, size)."""
    try:
        return _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None


def _balanced_end(text: str, start: int) -> tuple[int, int]:
    """End of the ``{...}`` opened at ``start`` and the braces left open at the end of the text.

    One pass over the structural characters only. A quote ends at the next quote or newline
    (a model's broken JSON must not swallow the rest of the text). Returns ``(-1, depth)``
    when the text ends first.
    """
    depth, in_quote = 0, False
    for m in _JSON_TOKEN.finditer(text, start):
        ch = m.group(0)
        if in_quote:
            in_quote = ch not in ('"', "\n")
        elif ch == '"':
            in_quote = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return m.end(), 0
    return -1, depth


def _outer_objects(text: str) -> Iterator[tuple[int, int, int, Any]]:
    """``(start, end, open_depth, value)`` of each outermost ``{...}`` span in order.

    A span that decodes as JSON is taken whole by the C decoder; otherwise its balanced end
    is found by :func:`_balanced_end` and ``value`` is ``None``. An unclosed span has ``end=-1``.
    """
    pos = 0
    while (i := text.find("{", pos)) >= 0:
        hit = _decode(text, i)
        if hit is not None:
            yield i, hit[1], 0, hit[0]
            pos = hit[1]
            continue
        end, depth = _balanced_end(text, i)
        yield i, end, depth, None
        if end < 0:
            return
        pos = end


def _all_brace_starts(text: str) -> Iterator[int]:
    """Positions of every ``{`` that opens a balanced span no deeper than :data:`_MAX_JSON_DEPTH`.

    Few braces: every ``{`` (the released twm loop decodes from each). Many: one stack pass
    over the structural characters keeps the work linear whatever the nesting.
    """
    if text.count("{") <= _DIRECT_DECODE_BRACES:
        pos = text.find("{")
        while pos >= 0:
            yield pos
            pos = text.find("{", pos + 1)
        return
    starts: list[int] = []
    stack: list[int] = []
    in_quote = False
    for m in _JSON_TOKEN.finditer(text):
        ch = m.group(0)
        if in_quote:
            in_quote = ch not in ('"', "\n")
        elif ch == '"':
            in_quote = bool(stack)
        elif ch == "{":
            stack.append(m.start())
        elif ch == "}" and stack:
            start = stack.pop()
            if len(stack) < _MAX_JSON_DEPTH:
                starts.append(start)
    starts.sort()
    yield from starts


def _json_objects(text: str) -> Iterator[Any]:
    """JSON values starting at a ``{`` (nested ones included), in text order."""
    for start in _all_brace_starts(text):
        hit = _decode(text, start)
        if hit is not None:
            yield hit[0]


def _strict_twm(text: str) -> _Found | None:
    """Thinking-with-Map: first object parsing as JSON with lat, lon, city and country."""
    for obj in _json_objects(text):
        if isinstance(obj, dict) and all(k in obj for k in ("lat", "lon", "city", "country")):
            try:
                lat, lon = float(obj["lat"]), float(obj["lon"])
            except (TypeError, ValueError, OverflowError):
                return _Found(fmt="json")
            fields = {k: str(obj[k]) for k in ("city", "country") if obj[k] is not None}
            return _Found(lat=lat, lon=lon, fields=fields, fmt="json")
    return None


def _robust_json(region: str) -> _Found | None:
    """Last object with coordinates; fenced, tolerant (unquoted strings, single quotes)."""
    if "{" not in region:
        return None
    found: list[_Found] = []
    for start, end, depth, obj in _outer_objects(region):
        note: list[str] = []
        if obj is None:  # squeezed, it may decode (a tab or an odd blank in it) or read loosely
            span = squeeze(region[start:end] if end > 0 else region[start:] + "}" * depth)
            hit = _decode(span, 0)
            obj, note = (hit[0], []) if hit is not None else (_loose_mapping(span), ["tolerant_json"])
        if isinstance(obj, dict) and obj:
            item = _from_mapping(_flatten(obj), strict=False)
            if item.useful:
                item.fmt = "json"
                item.recovered = note + item.recovered
                found.append(item)
    if not found:
        return None
    with_coords = [f for f in found if f.has_coords]
    pick = (with_coords or found)[-1]
    if len(found) > 1:
        pick.recovered.append("several_objects_last_wins")
    return pick


_LOOSE_PAIR = re.compile(
    r"""["']?(?P<key>[A-Za-z_\u4e00-\u9fff][\w\u4e00-\u9fff/ ]{0,30}+)["']? ?: ?"""
    r"""(?P<val>"(?:[^"\\\n]|\\.){0,500}+"|'[^'\n]{0,500}+'|\[[^\]]{0,500}+\]|[^,\n}]{1,500}+)"""
)


def _loose_mapping(text: str) -> dict[str, Any]:
    """Key/value pairs from JSON-like text that json.loads rejects."""
    out: dict[str, Any] = {}
    body = text.strip()[1:-1]
    for m in _LOOSE_PAIR.finditer(body):
        key, val = m.group("key").strip(), m.group("val").strip()
        if val[:1] in "\"'" and val[-1:] == val[:1] and len(val) >= 2:
            val = val[1:-1]
        elif val.startswith("["):
            parsed = _decode(val, 0)
            if parsed is not None:
                out[key] = parsed[0]
                continue
        out[key] = val.rstrip(",").strip()
    return out


def _flatten(obj: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """Lift nested ``{"location": {...}}`` / ``{"answer": {...}}`` mappings to the top.

    A mapping's own keys win over nested ones; among nested mappings the first wins.
    """
    flat: dict[str, Any] = {}
    for k, v in obj.items():
        if isinstance(v, dict):
            if depth < _MAX_JSON_DEPTH:
                for k2, v2 in _flatten(v, depth + 1).items():
                    flat.setdefault(k2, v2)
        else:
            flat[k] = v
    return flat


# --- strict protocols ---------------------------------------------------------------------


def _strict_generic(text: str, protocol: str | None) -> _Found | None:
    """Strict: one format, no repairs; the first answer block (or the whole text) only.

    Only that region is squeezed: squeezing is local to whitespace runs and a block is bounded
    by its tags, so this reads exactly what squeezing the whole text first would give.
    """
    blocks = _answer_blocks(text)
    region = squeeze(blocks[0] if blocks else text)
    if protocol in (None, "spotagent", "geovista"):
        found = _from_lines(region, strict=True)
        if found is not None and (found.has_coords or protocol is not None):
            return found
    if protocol in (None, "geoagent", "geovista") and (blocks or protocol == "geoagent"):
        found = _from_semicolons(region)
        if found is not None:
            return found
    if protocol in (None, "json", "geovista", "geoagent"):
        for obj in _json_objects(region):
            if isinstance(obj, dict):
                found = _from_mapping(obj, strict=True)
                if protocol == "geoagent" and not found.useful:
                    found = _semicolon_value(obj) or found
                if found.useful:
                    found.fmt = found.fmt or "json"
                    return found
    return None


def _semicolon_value(obj: dict[str, Any]) -> _Found | None:
    """GeoAgent JSON: ``{"reasoning": …, "answer": "Country; Region; Place"}``."""
    for key in ("answer", "final_answer", "location", "prediction"):
        value = obj.get(key)
        if isinstance(value, str):
            found = _from_semicolons(value)
            if found is not None:
                return found
    return None


# --- robust -------------------------------------------------------------------------------


def _robust(text: str) -> _Found | None:
    """Last answer block wins; tool output was removed by the caller; ``text`` is not squeezed."""
    blocks = [b for b in _answer_blocks(text) if b.strip()]
    outside_think = _outside_think(text)
    regions: list[tuple[str, str | None, bool]] = [(b, None, True) for b in reversed(blocks)]
    if len(blocks) > 1:
        regions[0] = (regions[0][0], "last_answer_block", True)
    regions.append((outside_think, None, False))
    if outside_think != text:
        regions.append((text, "answer_inside_think", False))
    for region, note, in_block in regions:
        found = _parse_region(region, in_block)
        if found is not None and found.useful:
            found.recovered = ([note] if note else []) + found.recovered
            return found
    return None


def _parse_region(region: str, in_block: bool) -> _Found | None:
    """Formats in order; the first with coordinates stops the search (text formats fill fields).

    JSON reads the region as written; the text formats read it squeezed, computed only when
    one of them runs (an answer whose JSON is complete never needs it)."""
    candidates: list[_Found] = []
    best: _Found | None = None
    squeezed = ""
    for parser in (_robust_json, _robust_lines, _from_semicolons):
        if parser is not _robust_json and not squeezed:
            squeezed = squeeze(region)
        found = parser(squeezed if squeezed else region)
        if found is None:
            continue
        if best is None and found.has_coords:
            best = found
            if "country" in found.fields and "city" in found.fields:
                break  # complete: nothing left to fill
        candidates.append(found)
    if best is None:
        best = _free_coordinates(squeezed, in_block)
        if best is not None:
            candidates.append(best)
    if best is not None:
        for other in candidates:
            for k, v in other.fields.items():
                best.fields.setdefault(k, v)
        return best
    if candidates:
        return candidates[0]
    address = _address_text(squeezed)
    if address is None:
        return None
    return _Found(fields={"address": address[0]}, fmt="address", recovered=address[1])


def _robust_lines(region: str) -> _Found | None:
    return _from_lines(region, strict=False)


# --- mappings -----------------------------------------------------------------------------


def field_key(k: str) -> str:
    """The canonical spelling of an answer key: ``"Town or City"`` -> ``town_or_city``."""
    return _field_key(str(k)) if len(str(k)) <= 100 else _KEY_SEPARATORS.sub("_", str(k).strip("* ").lower())


@lru_cache(maxsize=8192)
def _field_key(k: str) -> str:
    return _KEY_SEPARATORS.sub("_", k.strip().strip("*").strip().lower())


_KEY_SEPARATORS = re.compile(r"[\s\-]+")


@dataclass(frozen=True, slots=True)
class _KeyPlan:
    """Which of a mapping's own keys hold what: answers repeat one schema, so this is per key set."""

    lat: str | None
    lon: str | None
    pair: str | None
    fields: tuple[tuple[str, tuple[str, ...]], ...]  # (field, its keys best first), in field order
    confidence: str | None


# mappings with more keys, or longer ones, are planned each time rather than cached: the cache
# must never hold a hostile answer's megabyte keys
_PLANNED_KEYS = 32
_PLANNED_KEY_CHARS = 512


def _key_plan(keys: tuple[str, ...]) -> _KeyPlan:
    if len(keys) <= _PLANNED_KEYS and sum(map(len, keys)) <= _PLANNED_KEY_CHARS:
        return _cached_plan(keys)
    return _plan(keys)


def _plan(keys: tuple[str, ...]) -> _KeyPlan:
    own = {field_key(k): k for k in keys}  # canonical -> the mapping's key (the last one wins)
    ranked: dict[str, list[tuple[int, str]]] = {}
    for canonical, key in own.items():
        hit = _FIELD_OF.get(canonical)
        if hit is not None:
            ranked.setdefault(hit[0], []).append((hit[1], key))
    fields = tuple(
        (name, tuple(key for _, key in sorted(ranked[name])))
        for name in sorted(ranked, key=_FIELD_ORDER.__getitem__)
    )
    return _KeyPlan(
        lat=next((own[k] for k in LAT_KEYS if k in own), None),
        lon=next((own[k] for k in LON_KEYS if k in own), None),
        pair=next((own[k] for k in _PAIR_KEYS if k in own), None),
        fields=fields,
        confidence=next((own[k] for k in _CONF_KEYS if k in own), None),
    )


_cached_plan = lru_cache(maxsize=4096)(_plan)


def _from_mapping(obj: dict[str, Any], strict: bool) -> _Found:
    """Fields from a key/value mapping (parsed JSON or answer lines)."""
    plan = _key_plan(tuple(obj))
    found = _Found()
    lat_raw = obj[plan.lat] if plan.lat is not None else None
    lon_raw = obj[plan.lon] if plan.lon is not None else None
    if lat_raw is None and lon_raw is None and plan.pair is not None:
        pair = obj[plan.pair]
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            lat_raw, lon_raw = pair
        elif isinstance(pair, str) and not strict:
            free = _free_coordinates(squeeze(pair)[:500], in_block=True)
            if free is not None:
                lat_raw, lon_raw = free.lat, free.lon
    if lat_raw is not None and lon_raw is not None:
        lat = _coordinate(lat_raw, "lat", strict, found.recovered)
        lon = _coordinate(lon_raw, "lon", strict, found.recovered)
        if lat is not None and lon is not None:
            found.lat, found.lon = lat, lon
    for name, keys in plan.fields:  # per field, its best-ranked key that holds a value
        val = None
        for key in keys:
            val = obj[key]
            if val is not None and val != "":
                break
        else:
            continue
        if not isinstance(val, (dict, list, bool)):
            text = clean_name(str(val), found.recovered, limit=200 if name == "address" else 100)
            if text is not None:
                found.fields[name] = text
    if plan.confidence is not None and obj[plan.confidence] is not None:
        found.confidence = _confidence(obj[plan.confidence])
    return found


_CACHED_NAME_CHARS = 120  # field values up to this long are memoised: names repeat across answers


def clean_name(value: str, recovered: list[str] | None = None, limit: int = 100) -> str | None:
    """A place name from a field value; prose gives the name it ends on, or nothing.

    "Glovelier" -> "Glovelier"; "The photo was taken in Glovelier." -> "Glovelier";
    "Probably Paris" -> "Paris"; "unknown" / "N/A" / a long sentence -> None.
    """
    name, notes = _cached_clean(value, limit) if len(value) <= _CACHED_NAME_CHARS else _clean(value, limit)
    if notes and recovered is not None:
        recovered.extend(notes)
    return name


def _clean(value: str, limit: int) -> tuple[str | None, tuple[str, ...]]:
    """:func:`clean_name`'s result and the repairs it made."""
    notes: tuple[str, ...] = ()
    text = squeeze(value).strip().strip("*`\"'").strip()
    text = text[:-1].rstrip() if text.endswith(".") and not text[-2:-1].isupper() else text
    remark = _REMARK.search(text)
    if remark is not None and remark.start() > 0 and len(remark.group(1).split()) >= 3:
        text = text[: remark.start()].rstrip()  # "United States (confirmed by the plates)"
        notes = ("dropped_remark",)
    if not text or text.lower() in _NULLS or len(text) > 4 * limit:
        return None, notes
    words = text.split()
    lowered = [w.strip(",;:()").lower() for w in words]
    if not any(w in _PROSE_WORDS for w in lowered) and len(text) <= limit:
        return text, notes
    m = _PLACE_AFTER.search(text)
    name = m.group("name").strip() if m else None
    if name is None and lowered and lowered[0] in ("probably", "likely", "possibly", "maybe", "perhaps"):
        name = " ".join(words[1:]).strip(",; ")
    if not name or len(name) > limit or any(w.lower() in _PROSE_WORDS for w in name.split()):
        return None, notes
    return name, (*notes, "name_from_prose")


_cached_clean = lru_cache(maxsize=16_384)(_clean)


def _confidence(value: Any) -> float | None:
    try:
        text = str(value).strip()[:50].rstrip("%")
        c = float(text)
    except (ValueError, OverflowError):
        return None
    if not math.isfinite(c):
        return None
    return c / 100.0 if c > 1.0 or str(value).strip().endswith("%") else c


def _coordinate(value: Any, axis: str, strict: bool, recovered: list[str]) -> float | None:
    """One coordinate from a number, a numeric string, or (robust) DMS / hemisphere text."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            v = float(value)
        except OverflowError:
            return None
        return v if math.isfinite(v) else None
    text = str(value).strip()[:100]
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
    tokens = list(_COORD_TOKEN.finditer(squeeze(text.replace("−", "-"))))
    if len(tokens) != 1:
        return None  # "about 48.85 (±0.01)" is one number; "48.85, 2.35" in one field is not a latitude
    parsed = _token_value(tokens[0], axis)
    if parsed is not None:
        recovered.append("coordinate_in_text")
    return parsed


def parse_coordinate_text(text: str, axis: str | None = None) -> float | None:
    """Decimal or degree/minute/second text with optional N/S/E/W before or after; S, W negative.

    ``48.5``, ``48,5``, ``48.5 S``, ``W 3.25``, ``12°30'N``, ``12d30m``, ``22 deg 53 min 53.6 sec S``,
    ``22d53m53.6sS``, ``22º 53' 53.6" S``, ``S22°53.8932'``. ``axis`` ("lat"/"lon") rejects the
    other axis's hemisphere letters. Minutes and seconds must be below 60.
    """
    s = squeeze(text[:100].replace("−", "-").replace("–", "-")).strip().rstrip(".,;")
    m = _COORD_TEXT.fullmatch(s)
    if m is None:
        return None
    return _token_value(m, axis)


def _token_value(m: re.Match[str], axis: str | None) -> float | None:
    """Signed decimal degrees of one coordinate token; None when its parts are impossible."""
    h1, h2 = m.group("h1"), m.group("h2")
    if h1 and h2:
        return None
    hemi = (h1 or h2 or "").upper()
    deg = float(m.group("deg").replace(",", "."))
    minutes = float((m.group("min") or "0").replace(",", "."))
    seconds = float((m.group("sec") or "0").replace(",", "."))
    if minutes >= 60 or seconds >= 60 or (m.group("min") is None and m.group("sec") is not None):
        return None
    value = deg + minutes / 60.0 + seconds / 3600.0
    if m.group("sign") == "-":
        value = -value
    if hemi:
        if (axis == "lat" and hemi in "EW") or (axis == "lon" and hemi in "NS"):
            return None
        if hemi in "SW":
            value = -abs(value)
    return value if math.isfinite(value) else None


def _marked(m: re.Match[str]) -> bool:
    """A token that says it is a coordinate: degrees with minutes, a decimal with a degree mark,
    or a hemisphere letter on a decimal or degree value (``N 5, E 7`` is a platform and
    ``20°, 25°`` two temperatures; ``S 33.87, E 151.21`` and ``48.85°, 2.35°`` are positions)."""
    mark = m.group("dmark")
    if mark is not None and m.group("min") is not None:
        return True
    degree = mark is not None and (mark[0] != "d" or mark.startswith("deg"))
    hemi = m.group("h1") or (m.group("h2") if m.group("h2") and m.group("h2").isupper() else None)
    if hemi:
        return degree or _is_decimal(m)
    return degree and _is_decimal(m)


def _is_decimal(m: re.Match[str]) -> bool:
    deg = m.group("deg")
    return "." in deg or "," in deg


# --- key / value lines --------------------------------------------------------------------


def _key_values(region: str) -> dict[str, str]:
    """``key -> value`` from ``Key: value`` lines; first occurrence of a key wins.

    ``Country: X, City: Y`` and ``**Latitude:** 1 **Longitude:** 2`` are split into lines; a
    key whose value is on the next line (``City:\\nParis``) takes that line.
    """
    if ":" in region or "：" in region:
        region = INLINE_KEY.sub("\n", region)
        region = "\n".join(
            _SPACED_KEY.sub("\n", line) if _KEY_LINE.match(line) else line for line in region.split("\n")
        )
    pairs: dict[str, str] = {}
    lines = region.split("\n")
    for i, line in enumerate(lines):
        if ":" not in line and "：" not in line:
            continue
        m = ANSWER_LINE.match(line)
        if m is not None:
            key, val = field_key(m.group("key")), m.group("val").strip().strip("*").strip()
        else:
            e = _EMPTY_KEY_LINE.match(line)
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            if e is None or not nxt or ANSWER_LINE.match(nxt) or len(nxt) > 120:
                continue
            key, val = field_key(e.group("key")), nxt.strip("*").strip()
        if val and key not in pairs:
            pairs[key] = val
    return pairs


def _from_lines(region: str, strict: bool) -> _Found | None:
    """``Country: …`` / ``City: …`` / ``Latitude: …`` / ``Longitude: …`` lines (any order)."""
    if ":" not in region and "：" not in region:
        return None
    pairs = _key_values(region)
    if not pairs:
        return None
    found = _from_mapping(pairs, strict=strict)
    if not found.useful:
        return None
    found.fmt = "answer_lines"
    return found


_SEMI_LEVELS = ("country", "admin1", "city", "admin2", "town")


def _from_semicolons(region: str) -> _Found | None:
    """``Country; Region; Place`` on one line: coarse to fine, the last part the most precise."""
    body = region.strip().strip("*`").strip()
    if "\n" in body or "{" in body or len(body) > 300:
        return None
    parts = [p.strip().strip(".").strip() for p in re.split(r"[;；]", body)]
    if len(parts) < 2 or len(parts) > 8:
        return None
    lat = lon = None
    if len(parts) >= 4:  # "Country; Region; Place; 48.85; 2.35": coordinates close the line
        lat, lon = parse_coordinate_text(parts[-2], "lat"), parse_coordinate_text(parts[-1], "lon")
        if lat is not None and lon is not None:
            parts = parts[:-2]
        else:
            lat = lon = None
    named = [(i, p) for i, p in enumerate(parts) if p]
    if len(named) < 2 or any(clean_name(p) != p or _DIGITS_ONLY.fullmatch(p) for _, p in named):
        return None
    fields: dict[str, str] = {"country": parts[0]} if parts[0] else {}
    last_i, last = named[-1]
    if len(parts) == 2:
        fields["admin1"] = last
    else:
        for level, part in zip(_SEMI_LEVELS[1:], parts[1:last_i], strict=False):
            if part:
                fields[level] = part
        fields["poi"] = last
        fields["place"] = last
    fields["address"] = ", ".join(p for _, p in reversed(named))
    return _Found(lat=lat, lon=lon, fields=fields, fmt="semicolon")


# --- free-text coordinates ----------------------------------------------------------------


def _free_coordinates(region: str, in_block: bool) -> _Found | None:
    """The last ``lat, lon`` pair with a coordinate context (see the module docstring)."""
    if _DIGIT.search(region) is None:
        return None
    text = region.replace("−", "-")
    keyed = _keyed_pair(text)
    if keyed is not None:
        return keyed
    tokens = list(_COORD_TOKEN.finditer(text))
    if len(tokens) < 2:
        return None
    breaks = [m.start() for m in _NEWLINE.finditer(text)]
    last_line_start = text.rfind("\n", 0, len(text.rstrip())) + 1
    for a, b in zip(reversed(tokens[:-1]), reversed(tokens[1:]), strict=True):
        if _PAIR_GAP.fullmatch(text, a.end(), b.start()) is None:
            continue
        found = _pair(a, b)
        if found is None:
            continue
        if _marked(a) or _marked(b):
            return found
        if not (_is_decimal(a) or _is_decimal(b)):
            continue  # two bare integers are more often a count or a year than a position
        i = bisect.bisect_left(breaks, a.start())
        line_start = breaks[i - 1] + 1 if i else 0
        if _CONTEXT.search(text, max(line_start, a.start() - 80), a.start()):
            return found
        j = bisect.bisect_left(breaks, b.end())
        line_end = breaks[j] if j < len(breaks) else len(text)
        if (in_block or line_start >= last_line_start) and line_end - line_start <= 120:
            rest = text[line_start : a.start()] + " " + text[b.end() : line_end]
            if _PAIR_LINE_REST.fullmatch(rest):
                return found
    return None


def _pair(a: re.Match[str], b: re.Match[str]) -> _Found | None:
    """Two adjacent tokens as (lat, lon); hemisphere letters may put longitude first."""
    ha = (a.group("h1") or a.group("h2") or "").upper()
    hb = (b.group("h1") or b.group("h2") or "").upper()
    if ha in ("E", "W") and hb in ("N", "S"):
        a, b, ha, hb = b, a, hb, ha
    if ha in ("E", "W") or hb in ("N", "S"):
        return None
    lat, lon = _token_value(a, "lat"), _token_value(b, "lon")
    if lat is None or lon is None or abs(lat) > 180 or abs(lon) > 180:
        return None
    note = "coordinate_notation" if a.group("dmark") or b.group("dmark") else "free_text_coordinates"
    return _Found(lat=lat, lon=lon, fmt="free_coordinates", recovered=[note])


def _keyed_pair(text: str) -> _Found | None:
    """The last ``lat … lon …`` pair written with keys in prose (``lat=1.5, lon=2.5``)."""
    if not _CONTEXT.search(text):
        return None
    last: _Found | None = None
    for m in _KEYED_PAIR.finditer(text):
        a = _COORD_TEXT.fullmatch(m.group("a").strip().rstrip(",;"))
        b = _COORD_TEXT.fullmatch(m.group("b").strip().rstrip(",;"))
        if a is None or b is None:
            continue
        lat, lon = _token_value(a, "lat"), _token_value(b, "lon")
        if lat is not None and lon is not None and abs(lat) <= 180 and abs(lon) <= 180:
            last = _Found(lat=lat, lon=lon, fmt="free_coordinates", recovered=["free_text_coordinates"])
    return last


# --- addresses ----------------------------------------------------------------------------


def _address_text(region: str) -> tuple[str, list[str]] | None:
    """A short final line that reads like an address (no coordinates anywhere)."""
    stripped = region.strip()
    last = stripped.rsplit("\n", 1)[-1].strip(" *-•`\"'") if stripped else ""
    if not last:
        return None
    last = _ANSWER_PREFIX.sub("", last.replace("**", "").replace("__", "")).strip().rstrip(".")
    if not re.search(r"[^\W\d_]", last) or re.search(r"[{}<>\[\]]", last):
        return None
    if len(last) > 300 or len(last.split()) > 20:
        return None
    notes: list[str] = []
    name = clean_name(last, notes, limit=150)
    if name is None or not re.search(r"(?:^|[\s,(])[A-ZÀ-ÖØ-Þ]|[^\x00-\u024f]", name):
        return None  # place names are capitalised (or written in a non-Latin script)
    return name, notes


def _split_address(address: str, recovered: list[str]) -> dict[str, str]:
    """Read "street, city, region, country" from a comma-separated answer (finest part first)."""
    parts = [p.strip() for p in re.split(r"[,，、]", address) if p.strip()]
    out: dict[str, str] = {}
    if len(parts) > 1 and _country_code(parts[-1]) is not None:
        out["country"] = parts.pop()
    elif len(parts) == 1 and _country_code(parts[0]) is not None:
        return {"country": parts[0]}
    streets: list[str] = []
    while len(parts) > 1 and (_STREET_WORDS.search(parts[0]) or re.search(r"\d", parts[0])):
        streets.append(parts.pop(0))
    if streets:
        out["street"] = ", ".join(streets)
    for i, part in enumerate(parts):
        post = _POSTCODE.match(part)
        if post is not None:
            out["city"] = (post.group("rest") or post.group("rest2")).strip()
            parts = parts[i + 1 :]
            if parts:
                out["admin1"] = parts[-1]
            break
    else:
        if len(parts) == 1:
            out["place"] = parts[0]
        elif len(parts) >= 2:
            *head, out["city"], out["admin1"] = parts
            if head:
                out["street"] = ", ".join([*streets, *head])
    if len(out) > 1 or "place" not in out:
        recovered.append("address_split")
    return out


# --- multiple choice ----------------------------------------------------------------------


def _parse_choice(work: str, choices: Sequence[str], mode: ParseMode) -> str | None:
    """The chosen option's letter (see the module docstring)."""
    letters = [chr(ord("A") + i) for i in range(min(len(choices), 8))]
    own = squeeze(_without_tool_output(work)[0])
    blocks = _answer_blocks(own)
    region = (blocks[0] if mode == "strict" else blocks[-1]) if blocks else own
    explicit = _explicit_choices(region, choices, letters)
    if explicit:
        return explicit[0] if mode == "strict" else explicit[-1]
    if mode == "strict":
        return None
    from geosleuth.core.text import normalize

    text = f" {normalize(region)} "
    named = [
        letters[i]
        for i, c in enumerate(choices[: len(letters)])
        if normalize(c) and f" {normalize(c)} " in text
    ]
    return named[0] if len(named) == 1 else None


def _as_letter(value: str, choices: Sequence[str], letters: list[str]) -> str | None:
    """``"B"``, ``"(b)"``, ``"2"`` or an option's own name -> its letter."""
    v = value.strip().strip("()[]*.\"' ")
    if len(v) == 1 and v.upper() in letters:
        return v.upper()
    if v.isdecimal() and 1 <= int(v) <= len(letters):  # not isdigit(): int("²") raises
        return letters[int(v) - 1]
    from geosleuth.core.text import normalize

    key = normalize(v)
    hits = [letters[i] for i, c in enumerate(choices[: len(letters)]) if key and normalize(c) == key]
    return hits[0] if len(hits) == 1 else None


def _explicit_choices(region: str, choices: Sequence[str], letters: list[str]) -> list[str]:
    """Explicit choices in text order: JSON ``"choice"``, a lone letter/number, "Answer: X"."""
    body = region.strip()
    if len(body) <= 40:
        lone = _as_letter(body, choices, letters)  # "B", "(b)", "4", or an option's exact name
        if lone is not None:
            return [lone]
    hits: list[tuple[int, str]] = []
    for m in _JSON_CHOICE.finditer(region):
        letter = _as_letter(m.group("v"), choices, letters)
        if letter is not None:
            hits.append((m.start(), letter))
    seen = {pos for pos, _ in hits}
    for m in _CHOICE.finditer(region):
        value = m.group("a") or m.group("b") or m.group("c")
        letter = _as_letter(value, choices, letters)
        if letter is not None and not any(abs(m.start() - p) <= 2 for p in seen):
            hits.append((m.start(), letter))
    return [letter for _, letter in sorted(hits)]


# --- finishing ----------------------------------------------------------------------------


def _finish(
    raw: str,
    found: _Found | None,
    choice: str | None,
    geocoder: Geocoder | None,
    mode: ParseMode,
    place_level: PlaceLevelFn | None,
    country_codes: bool = True,
) -> Prediction:
    if found is None or not found.useful:
        status = ParseStatus.OK if choice else ParseStatus.FAILED
        return Prediction(raw=raw, status=status, choice=choice, format="choice" if choice else None)
    recovered = list(found.recovered)
    lat, lon = found.lat, found.lon
    if lat is not None and lon is not None:
        lat, lon = _fix_coordinates(lat, lon, mode, recovered)
    fields = dict(found.fields)
    if set(fields) == {"address"}:
        fields.update(_split_address(fields["address"], recovered))
    resolve_place = "place" in fields and place_level is not None and not set(fields) & {"city", "admin1"}
    needs_code = country_codes or resolve_place or (lat is None and geocoder is not None)
    country_code = _country_code(fields.get("country")) if needs_code else None
    if resolve_place and place_level is not None:
        level = _resolve_level(place_level, fields["place"], country_code)
        if level is not None:
            fields[level] = fields.pop("place")
            recovered.append("place_level_resolved")
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
    # only the values present: validating a default costs as much as validating a value
    given: dict[str, Any] = {k: v for k, v in fields.items() if k in _NAME_FIELDS}
    if lat is not None and lon is not None:
        given["lat"], given["lon"], given["coords_source"] = lat, lon, coords_source
    if country_code is not None:
        given["country_code"] = country_code
    if choice is not None:
        given["choice"] = choice
    if found.confidence is not None:
        given["confidence"] = found.confidence
    if found.fmt is not None:
        given["format"] = found.fmt
    if recovered:
        given["recovered"] = list(dict.fromkeys(recovered))
    return Prediction(raw=raw, status=status, **given)


_NAME_FIELDS = frozenset(("country", "admin1", "city", "admin2", "town", "street", "poi", "place", "address"))


def _resolve_level(place_level: PlaceLevelFn, name: str, country: str | None) -> str | None:
    try:
        level = place_level(name, country)
    except Exception:  # noqa: BLE001 - a failing resolver leaves the place neutral
        return None
    return level if level in LEVELS and level != "country" else None


def _fix_coordinates(
    lat: float, lon: float, mode: ParseMode, recovered: list[str]
) -> tuple[float | None, float | None]:
    """Swap an impossible lat/lon that is valid swapped (robust); reject anything out of range."""
    if mode == "robust" and 90 < abs(lat) <= 180 and abs(lon) <= 90:
        lat, lon = lon, lat
        recovered.append("swapped_lat_lon")
    if not (math.isfinite(lat) and math.isfinite(lon)) or abs(lat) > 90 or abs(lon) > 180:
        recovered.append("invalid_coordinates")
        return None, None
    return lat, lon


def _country_code(text: str | None) -> str | None:
    if not text or len(text) > 100:
        return None
    from geosleuth.core.countries import resolve_country

    return resolve_country(text)


def _geocode_query(fields: dict[str, str]) -> str | None:
    if "address" in fields:
        return fields["address"]
    parts = [
        fields[k]
        for k in ("poi", "street", "town", "admin2", "city", "place", "admin1", "country")
        if k in fields and (k != "place" or fields[k] != fields.get("poi"))
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
