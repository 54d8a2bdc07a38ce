"""Model text -> :class:`Prediction`.

One module per answer family (``json_answer``, ``keyvalue``, ``semicolon``, ``choice``,
``prose``, ``coordinates``; ``fields`` turns any key/value mapping into fields); the protocols
compose them (``twm``, ``strict``, ``robust``), so a new paper's format is one new module.

Two modes. ``strict`` reproduces a named protocol's parser (``twm``: Thinking with Map's
released loop, see :mod:`geosleuth.core.parsing.twm`: the whole text, tool output included, the
first outermost brace span that ``json.loads`` reads with lat, lon, city and country, the
coordinates as geopy reads them; ``spotagent`` / ``geovista``: ``Key: value`` lines of the first
``<answer>`` block, one per line or inline ``key: v, key: v``, decimal degrees with an optional
degree mark and hemisphere letter; ``geoagent``: ``Country; Region; Place``; ``json``: the first
JSON object with answer keys; ``geoguessr-map``: ccmdi's GeoBench ``country:`` / ``lat:`` / ``lng:``
lines, read as its released regex reads them, see :mod:`geosleuth.core.parsing.geobench`).
``robust`` (the default) recovers what a careful reader would: the last answer block of a
multi-turn text, tolerant JSON, degree/minute/second and hemisphere notation, swapped lat/lon,
plain addresses geocoded by an injected geocoder. Whatever it repairs is listed in
``Prediction.recovered``. Parsing never raises: a string that holds nothing usable gives
``status=FAILED``.

Bounded work on any input (``twm`` reads the whole text in linear time, see its module):

* Input longer than :data:`MAX_PARSE_CHARS` is cut to its **tail** (the final answer of a
  rollout is at its end); ``recovered`` records ``input_truncated:kept_last_<n>_of_<m>_chars``.
  A tail that starts inside a tool result is cut further, to just after that result's end.
* Whitespace is squeezed once (runs of blanks -> one space, blank lines -> one newline) before
  any text pattern runs, and no pattern repeats over characters a neighbouring quantifier also
  takes, so every regex runs in time linear in the text. JSON needs no squeezing (the decoder
  skips whitespace and field values are squeezed one by one), so in robust mode a region is
  squeezed only when a format after JSON has to read it: most answers never pay for it.
* JSON is found by one pass over the structural characters and decoded with the C decoder;
  nesting deeper than the interpreter allows is an unparsable object, never an exception. A
  failed decode far into the text is repeated on its balanced span alone (the decoder's error
  counts every line before it).
* The work is capped, not only the characters: at most 64 answer blocks (the last ones),
  2,048 key lines (the first ones) and 1,024 number tokens (the last ones) are read.

Tool output is never the model's answer (except under ``twm``, as released). Everything between
the delimiters of any prompt style is ignored: ``<tool_response>…</tool_response>``,
``<tool_result>``, ``<observation>``, the model's own ``<tool_call>`` blocks, and the fence
``<<<TOOL OUTPUT …>>> … <<<END TOOL OUTPUT>>>`` of :mod:`geosleuth.tools.text`. The fence wins
over tags: a ``</tool_response>`` inside a fence closes nothing. An unclosed block runs to the
end of the text.

Which format wins (robust). Regions are tried in order: the last ``<answer>`` block, earlier
blocks, the text outside ``<think>``, then the whole text. In a region the formats run in
order JSON, ``Key: value`` lines, ``Country; Region; Place``, free-text coordinates, a bare
address line; the first format that yields coordinates wins and stops the search, after which
the cheap text formats (lines, semicolons) only fill fields it left empty. Within JSON the
last object with coordinates wins; within free text the last pair.

Coordinates. Out-of-range values are rejected, never wrapped (``{"lat": 200, "lon": 10}`` is no
position). Robust mode swaps lat/lon only for an unlabeled pair (a ``coordinates`` list, a pair
in prose, a ``;`` tail) that is impossible as given and valid swapped (|lat| in (90, 180], |lon|
<= 90); a value written under a latitude key is never moved. One coordinate comes from one JSON
object (its own pair, else the first nested object with one), never from two. A coordinate token
is a whole number: ``0x10``, ``48.85km`` and ``3rd`` hold none. A bare decimal pair in prose
counts only with a coordinate context: a degree mark or hemisphere letter, a
lat/lon/coordinates/GPS keyword or "answer:" before it on the line, or a line that is nothing
but the pair (anywhere in an ``<answer>`` block, the last line otherwise). "I am 0.85, 0.9
confident" is not a position.

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
explicit one, strict the first. WhereBench's WhereCountry replies are read with the released
regex (:func:`released_wherecountry_choice`).
"""

from __future__ import annotations

from collections.abc import Sequence

from geosleuth.core.parsing.base import GeocodeFn, Geocoder, ParseMode, PlaceLevelFn
from geosleuth.core.parsing.choice import _parse_choice, released_wherecountry_choice, wherecountry_choice
from geosleuth.core.parsing.coordinates import parse_coordinate_text
from geosleuth.core.parsing.delimiters import (
    MAX_PARSE_CHARS,
    _bounded,
    _without_tool_output,
    final_own_turn,
    squeeze,
    without_tool_output,
)
from geosleuth.core.parsing.fields import LAT_KEYS, LON_KEYS, field_key
from geosleuth.core.parsing.finish import _finish
from geosleuth.core.parsing.keyvalue import ANSWER_LINE, INLINE_KEY
from geosleuth.core.parsing.prose import clean_name
from geosleuth.core.parsing.robust import _robust
from geosleuth.core.parsing.strict import _strict_generic
from geosleuth.core.parsing.twm import released_twm
from geosleuth.core.records import ParseStatus, Prediction

STRICT_PROTOCOLS: tuple[str, ...] = ("twm", "spotagent", "geovista", "geoagent", "json", "geoguessr-map")
"""Parsers ``mode="strict"`` can reproduce; ``None`` tries each strict format in turn."""


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
    released_twm_loop = mode == "strict" and protocol == "twm"
    work, notes = _bounded(raw)
    try:
        if released_twm_loop:
            found = released_twm(raw)  # the whole text, tool output included, as released
            notes = []
        else:
            own, removed = _without_tool_output(work)
            notes += ["ignored_tool_output"] if removed else []
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


__all__ = [
    "ANSWER_LINE",
    "INLINE_KEY",
    "LAT_KEYS",
    "LON_KEYS",
    "MAX_PARSE_CHARS",
    "STRICT_PROTOCOLS",
    "GeocodeFn",
    "Geocoder",
    "ParseMode",
    "PlaceLevelFn",
    "clean_name",
    "field_key",
    "final_own_turn",
    "parse_answer",
    "parse_coordinate_text",
    "released_wherecountry_choice",
    "squeeze",
    "wherecountry_choice",
    "without_tool_output",
]
