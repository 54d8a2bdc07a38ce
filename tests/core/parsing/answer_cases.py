"""Generated model answers, one generator per case family, shared by the released-agreement tests.

Each generator takes a ``random.Random`` and returns one answer text. Hypothesis drives them
through ``st.randoms()`` (shrinking works on the random draws); the agreement table draws a
fixed number of cases per family from a seeded ``Random``. The families are those of issue 21:
JSON variants, tagged key-value lines, prose, multilingual and aliased names, abbreviations,
hedged answers, tool-response decoys, out-of-range coordinates and empty answers.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

CITIES = (  # (city, country, lat, lon): multilingual and aliased names, abbreviations
    ("Paris", "France", 48.8566, 2.3522),
    ("東京", "日本", 35.6762, 139.6503),
    ("São Paulo", "Brasil", -23.5505, -46.6333),
    ("Vilanova i la Geltrú", "Spain", 41.2241, 1.7256),
    ("Cape Town, WE", "South Africa", -33.9249, 18.4241),
    ("houston, texas", "united states", 29.7604, -95.3698),
    ("Juan Griego (Nueva Esparta, Venezuela)", "Venezuela", 11.0817, -63.9650),
    ("Москва", "Россия", 55.7558, 37.6173),
    ("Zürich", "Schweiz", 47.3769, 8.5417),
    ("Auckland", "NZ", -36.8485, 174.7633),
    ("Suva", "Fiji", -18.1416, 178.4419),
    ("Anchorage, AK", "USA", 61.2181, -149.9003),
)


def _place(rng: random.Random) -> tuple[str, str, float, float]:
    city, country, lat, lon = rng.choice(CITIES)
    return (
        city,
        country,
        round(lat + rng.uniform(-0.5, 0.5), rng.randint(1, 7)),
        round(lon + rng.uniform(-0.5, 0.5), rng.randint(1, 7)),
    )


def _number(rng: random.Random, value: float) -> object:
    """A coordinate as models write it in JSON: number, string, padded string, integer."""
    form = rng.randrange(6)
    if form == 0:
        return str(value)
    if form == 1:
        return f" {value} "
    if form == 2:
        return int(value) if value == int(value) else value
    return value


def _obj(rng: random.Random, lat: object, lon: object, city: object, country: object) -> dict[str, object]:
    items = [("lat", lat), ("lon", lon), ("city", city), ("country", country)]
    rng.shuffle(items)
    if rng.random() < 0.3:
        items.insert(
            rng.randrange(len(items) + 1), ("reason", rng.choice(["{not json}", "a } b", "see {x}", "ok"]))
        )
    return dict(items)


def _dump(rng: random.Random, obj: object) -> str:
    return json.dumps(obj, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 2]))


def json_variants(rng: random.Random) -> str:
    """Answer JSON as written, nested, fenced, with braces in strings, several objects, broken."""
    city, country, lat, lon = _place(rng)
    obj = _obj(rng, _number(rng, lat), _number(rng, lon), city, country)
    body = _dump(rng, obj)
    form = rng.randrange(9)
    if form == 1:
        body = _dump(rng, {"answer": obj})  # nested: the released loop reads only the outer object
    elif form == 2:
        body = f"```json\n{body}\n```"
    elif form == 3:
        body = _dump(rng, {"note": "the {lat} field", **obj})  # a brace inside a string
    elif form == 4:
        decoy = _dump(rng, _obj(rng, 1.5, 2.5, "Decoy", "Nowhere"))
        body = f"First guess {decoy}, final {body}" if rng.random() < 0.5 else f"{body} or maybe {decoy}"
    elif form == 5:
        body = body.replace('"city"', "'city'")  # broken JSON
    elif form == 6:
        body = body[: rng.randrange(1, len(body))]  # cut off
    elif form == 7:
        body = "{" + body  # an unclosed brace before the answer
    elif form == 8:
        body = body + "}" + rng.choice(["", "{", "}}"])  # stray braces after
    think = rng.choice(["", "<think>Signs in the photo {maybe}.</think>\n", "Reasoning: lat 10, lon 20.\n"])
    return think + body


def key_value_lines(rng: random.Random) -> str:
    """SpotAgent's ``<answer>`` lines: per line or inline, bold keys, degree marks, hemispheres."""
    city, country, lat, lon = _place(rng)
    lat_text, lon_text = _hemisphere(rng, lat, "NS"), _hemisphere(rng, lon, "EW")
    keys = [("Country", country), ("City", city), ("Latitude", lat_text), ("Longitude", lon_text)]
    bold = rng.random() < 0.2
    case = rng.choice([str, str.lower, str.upper]) if rng.random() < 0.3 else str
    lines = [
        f"{'**' if bold else ''}{case(k)}:{'**' if bold else ''}{rng.choice([' ', '  ', ''])}{v}"
        for k, v in keys
    ]
    sep = rng.choice(["\n", "\n", ", ", "; "])
    body = sep.join(lines)
    think = rng.choice(
        ["", "<think>The plate reads 12, 34. Latitude: 5.0</think>\n", "<think>No idea.</think>"]
    )
    tail = rng.choice(["", "\nThat is my final answer."])
    return f"{think}<answer>{rng.choice(['', chr(10)])}{body}{rng.choice(['', chr(10)])}</answer>{tail}"


def _hemisphere(rng: random.Random, value: float, letters: str) -> str:
    form = rng.randrange(4)
    if form == 0:
        return str(value)
    letter = letters[0] if value >= 0 else letters[1]
    mark = "°" if form in (1, 3) else ""
    space = " " if form in (1, 2) else ""
    return f"{abs(value)}{mark}{space}{letter}"


def prose(rng: random.Random) -> str:
    """An answer in sentences, with the JSON or lines the prompt asked for somewhere in it."""
    city, country, lat, lon = _place(rng)
    lead = rng.choice(
        [
            f"This is {city} ({country}). ",
            f"The photo was taken in {city}, {country}, about 3 km from the coast. ",
            "I think it is 2 or 3 streets from the station. ",
        ]
    )
    if rng.random() < 0.5:
        return lead + _dump(rng, {"lat": lat, "lon": lon, "city": city, "country": country})
    return lead + f"<answer>Country: {country}\nCity: {city}\nLatitude: {lat}\nLongitude: {lon}</answer>"


def hedged(rng: random.Random) -> str:
    """Hedged values: approximations, ranges, question marks, confidence words."""
    city, country, lat, lon = _place(rng)
    hedge = rng.choice(["~{}", "about {}", "{}?", "{} (approx.)", "{}±0.1", "{}"])
    if rng.random() < 0.5:
        return _dump(
            rng, {"lat": hedge.format(lat), "lon": hedge.format(lon), "city": city, "country": country}
        )
    lines = f"Country: {country}\nCity: probably {city}\nLatitude: {hedge.format(lat)}\nLongitude: {lon}"
    return f"<answer>{lines}</answer>"


def tool_decoys(rng: random.Random) -> str:
    """A tool response holding an answer-shaped object or lines before the model's own answer."""
    city, country, lat, lon = _place(rng)
    decoy_json = _dump(rng, {"lat": 1.0, "lon": 2.0, "city": "Decoy", "country": "Nowhere"})
    decoy_lines = "<answer>Country: Nowhere\nLatitude: 1.0\nLongitude: 2.0</answer>"
    tag = rng.choice(["tool_response", "tool_result", "observation"])
    decoy = f"<{tag}>{rng.choice([decoy_json, decoy_lines, 'no result'])}</{tag}>"
    own = rng.choice(
        [
            _dump(rng, {"lat": lat, "lon": lon, "city": city, "country": country}),
            f"<answer>Country: {country}\nCity: {city}\nLatitude: {lat}\nLongitude: {lon}</answer>",
            "",
        ]
    )
    call = '<tool_call>{"name": "poi_keyword_search", "arguments": {"query": "x"}}</tool_call>'
    return f"<think>Search first.</think>{call}{decoy}{own}"


def out_of_range(rng: random.Random) -> str:
    """Latitudes past ±90, longitudes past ±180 (geopy wraps longitude, rejects latitude)."""
    city, country, _, _ = _place(rng)
    lat = rng.choice([rng.uniform(-89.9, 89.9), rng.uniform(90.0000001, 200) * rng.choice([1, -1])])
    lon = rng.choice(
        [rng.uniform(180.0000001, 900) * rng.choice([1, -1]), rng.uniform(-180, 180), 180.0, -180.0, 540.0]
    )
    lat, lon = round(lat, rng.randint(0, 7)), round(lon, rng.randint(0, 7))
    if rng.random() < 0.5:
        return _dump(rng, _obj(rng, _number(rng, lat), _number(rng, lon), city, country))
    return f"<answer>Country: {country}\nCity: {city}\nLatitude: {lat}\nLongitude: {lon}</answer>"


def odd_values(rng: random.Random) -> str:
    """Values geopy reads its own way: "", 0, false, null, [], {}, NaN, huge, hex, underscores."""
    city, country, lat, lon = _place(rng)
    odd = rng.choice(
        ["", 0, False, True, None, [], {}, [lat], "NaN", "0x10", "1_0", 10**400, "1e3", " ", "-0"]
    )
    key = rng.choice(["lat", "lon"])
    obj = {"lat": lat, "lon": lon, "city": city, "country": country, key: odd}
    text = json.dumps(obj, allow_nan=True) if not isinstance(odd, int) or odd < 10**300 else None
    if text is None:
        text = json.dumps({k: v for k, v in obj.items() if k != key})[:-1] + f', "{key}": {odd}}}'
    return text.replace('"NaN"', "NaN") if rng.random() < 0.5 else text


def empty(rng: random.Random) -> str:
    """Nothing to read: empty, blank, empty tags, empty objects, refusals."""
    return rng.choice(
        [
            "",
            " ",
            "\n\n",
            "<answer></answer>",
            "{}",
            "{ }",
            "<think></think>",
            "I cannot tell.",
            "null",
            "[]",
            "{{}}",
        ]
    )


FAMILIES: dict[str, Callable[[random.Random], str]] = {
    "json variants": json_variants,
    "tagged key-value lines": key_value_lines,
    "prose": prose,
    "hedged": hedged,
    "tool-response decoys": tool_decoys,
    "out-of-range coordinates": out_of_range,
    "odd values": odd_values,
    "empty": empty,
}


def wherecountry_reply(rng: random.Random) -> tuple[str, int]:
    """A reply to WhereBench's released prompt (number 1-4 in ``<answer>``) and the option count."""
    n = rng.choice([4, 4, 4, 3])
    pick = rng.randint(1, 4)
    reasoning = rng.choice(
        [
            "The signs are in 2 languages and 1 car drives on the left.",
            "Bollards look like option 3, but the poles suggest 2.",
            "Hard to say.",
            "",
            "Between 1 (Italy) and 4 (France).",
        ]
    )
    answer = rng.choice(
        [
            f"{pick}",
            f" {pick} ",
            f"{pick} (not {pick % 4 + 1})",
            f"Option {pick}",
            f"{pick}. Japan",
            f"**{pick}**",
            f"{pick}{pick}",
            f"{pick}.5",
            "Japan",
            f"({pick})",
            f"My answer is {pick}, final.",
        ]
    )
    close = rng.choice(["</answer>", "</answer>", "", "</answer> Note: 2 is close."])
    opener = rng.choice(["<answer>", "<answer>", "Answer: "])
    text = f"<think>{reasoning}</think> {opener}{answer}{close}"
    if rng.random() < 0.1:
        text = f"<answer>{pick}</answer> then <answer>{pick % 4 + 1}</answer>"
    return text, n
