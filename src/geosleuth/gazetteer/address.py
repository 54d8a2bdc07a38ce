"""Address strings as a gazetteer sees them: components, their name keys, designators, stems.

Pure text functions, no look-ups. An address is split on separators in either order
("Schöneberger Straße, 22149 Hamburg, Germany", "China; Hong Kong; Kowloon"); postcodes and
house numbers leave each component; a parenthesis is a component of its own ("Saint-Philippe,
France (Réunion)"), unless the name with its parenthesis or slash is a place name itself
("Frankfurt (Oder)", "Biel/Bienne": see `Qualified`, the gazetteer decides). Administrative
designators ("Province", "обл.", "省", "県") can be dropped from a key, and Russian/Ukrainian
adjectival region names ("Токийская обл.") reduce to a stem that meets the noun ("Токио").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from geosleuth.core.text import normalize

MAX_ADDRESS_CHARS = 1000
MAX_PARTS = 8

_SEPARATORS = re.compile(r"[,;/|\n\r\t，；、·]+")
_CHUNK_SEPARATORS = re.compile(r"[,;|\n\r\t，；、·]+")
"""`_SEPARATORS` but the slash: "Frankfurt/Oder" and "Biel/Bienne" may be one name."""
MAX_QUALIFIER_WORDS = 4
_PARENS = re.compile(r"[(（\[]([^()（）\[\]]*)[)）\]]")
_HAS_DIGIT = re.compile(r"\d")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_CJK_WORD = re.compile(r"^[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+$")
_CJK_NUMBER = re.compile(r"[\d０-９]+[号號番地丁目之の-]*")
_STREET_MARKS = frozenset("路街巷道通弄里胡同")
MAX_SEGMENT = 8
MAX_SEGMENTED_CHARS = 40

_DESIGNATOR_WORDS = frozenset(
    normalize(w)
    for w in (
        "province", "provincia", "provincie", "provinz", "prov", "prefecture", "pref", "state", "region",
        "regione", "región", "région", "oblast", "oblast'", "krai", "kray", "kraj", "voivodeship",
        "województwo", "county", "district", "dist", "land", "bundesland", "canton", "kanton", "department",
        "département", "departamento", "sheng", "shi", "municipality", "autonomous", "community",
        "comunidad", "autónoma", "governorate", "muhafazat", "emirate", "territory", "parish",
        "область", "обл", "край", "республика", "респ", "округ", "автономный", "провинция", "пров",
        "префектура", "штат", "губерния", "регион", "район", "р-н", "області", "обл.",
    )
)  # fmt: skip
"""Words that say what kind of region a name is, in the languages models write addresses in."""

_HEDGES_BEFORE = frozenset(
    {"near", "nr", "around", "outside", "about", "approx", "approximately", "downtown", "greater", "suburban",
     "rural"}
)  # fmt: skip
_HEDGES_AFTER = frozenset(
    {"area", "approx", "approximate", "approximately", "vicinity", "outskirts", "downtown", "surroundings",
     "environs"}
)  # fmt: skip
_ABBREVIATIONS = {"st": "saint", "ste": "sainte", "mt": "mount", "ft": "fort", "pt": "point"}
_CONTRACTIONS = {"saint": "st", "sainte": "ste", "mount": "mt", "fort": "ft"}
_SETTLEMENT_WORDS = frozenset({"township", "town", "city", "village", "borough", "municipality", "hamlet"})

_CONNECTORS = frozenset({"of", "de", "del", "di", "du", "des", "la", "the"})

_HAN_SUFFIXES = tuple(normalize(s) for s in (
    "维吾尔自治区", "維吾爾自治區", "壮族自治区", "壯族自治區", "回族自治区", "回族自治區", "特别行政区",
    "特別行政區", "自治区", "自治區", "特别市", "特別市", "省", "市", "都", "道", "府", "県", "县", "縣",
))  # fmt: skip
_HANGUL_SUFFIXES = tuple(normalize(s) for s in ("특별자치시", "특별자치도", "특별시", "광역시", "도"))
"""Compared on normalised keys, where Hangul syllables are decomposed into jamo."""

_CYRILLIC_ADJECTIVE = tuple(
    sorted({normalize(s) for s in ("ская", "ской", "ский", "ское", "ские", "ська", "ський", "ське", "цкая",
                                  "цкий", "ская")}, key=len, reverse=True)
)  # fmt: skip
_CYRILLIC_VOWELS = "аеиоуыэюяьії"
_CYRILLIC_WORD = re.compile(r"^[\u0400-\u04ff]+$")


@dataclass(frozen=True)
class Qualified:
    """One separator-delimited stretch of an address: its components (head first, then what a
    parenthesis or slash adds: "Frankfurt (Oder)" -> "Frankfurt", "Oder") and the keys of the
    stretch read as one name ("frankfurt oder"), empty when it has a single component.

    GeoNames spells many towns with their river or region ("Frankfurt (Oder)", "Halle (Saale)",
    "Neustadt (Hessen)"): the gazetteer tries ``keys`` as a name before the components, so the
    qualifier picks the town instead of being looked up as a place of its own."""

    parts: tuple[str, ...]
    keys: tuple[str, ...] = ()

    @property
    def head(self) -> str:
        return self.parts[0]

    @property
    def qualifier_words(self) -> tuple[str, ...]:
        """The normalised words of the components after the head, at most `MAX_QUALIFIER_WORDS`."""
        words = normalize(" ".join(self.parts[1:])).split()
        return tuple(dict.fromkeys(words))[:MAX_QUALIFIER_WORDS]


def split_qualified(text: str) -> list[Qualified]:
    """The address's stretches between separators (all but the slash), in written order, with
    their components as `split_address` gives them; at most `MAX_PARTS` components in all.

    One linear regex pass over at most `MAX_ADDRESS_CHARS` characters, as `split_address`.
    """
    text = (text or "")[:MAX_ADDRESS_CHARS]
    out: list[Qualified] = []
    room = MAX_PARTS
    for chunk in _CHUNK_SEPARATORS.split(text):
        parts = _chunk_parts(chunk)[:room]
        if not parts:
            continue
        room -= len(parts)
        keys = (normalize(chunk), normalize(_drop_numbers(chunk))) if len(parts) > 1 else ()
        out.append(Qualified(tuple(parts), tuple(k for k in dict.fromkeys(keys) if k)))
        if not room:
            break
    return out


def whole_keys(stretches: list[Qualified]) -> tuple[str, ...]:
    """The key of an address of several stretches read as one name, which GeoNames may hold as an
    alternate name ("Georgetown, IL" for the Georgetown in Vermilion County): else empty."""
    if len(stretches) < 2:
        return ()
    key = normalize(" ".join(part for stretch in stretches for part in stretch.parts))
    return (key,) if key else ()


def split_address(text: str) -> list[str]:
    """Components of an address in their written order, postcodes and house numbers removed.

    Input is capped at `MAX_ADDRESS_CHARS` characters and `MAX_PARTS` components: the split is
    one linear regex pass, so any string is handled in bounded time.
    """
    return [part for stretch in split_qualified(text) for part in stretch.parts]


def _chunk_parts(chunk: str) -> list[str]:
    """One stretch's components: outside the parentheses first, then each parenthesis; each
    split on the remaining separators (the slash)."""
    pieces: list[str] = []
    inner = _PARENS.findall(chunk)
    outer = _PARENS.sub(" ", chunk)
    for piece in (outer, *inner):
        for sub in _SEPARATORS.split(piece):
            cleaned = _drop_numbers(sub)
            if cleaned:
                pieces.append(cleaned)
    return pieces


def _drop_numbers(part: str) -> str:
    """A component without its postcode, house number or hedge ("22149 Hamburg" -> "Hamburg",
    "near Beatty" -> "Beatty", "Orlando area" -> "Orlando").

    Words with a digit go (postcodes, "SW1A", "No.5"); a component of nothing but digits is dropped.
    """
    words: list[str] = []
    for word in part.split():
        if _CJK.search(word):  # "建国路88号": the number goes, the words around it stay
            words.extend(_CJK_NUMBER.sub(" ", word).split())
        elif not _HAS_DIGIT.search(word):
            words.append(word)
    while len(words) > 1 and words[0].casefold().strip(".") in _HEDGES_BEFORE:
        words = words[1:]
    while len(words) > 1 and words[-1].casefold().strip(".") in _HEDGES_AFTER:
        words = words[:-1]
    return " ".join(words).strip(" .-–—#")


def cjk_substrings(word: str) -> list[str]:
    """Every substring of 2 to `MAX_SEGMENT` characters of a Chinese/Japanese word (capped at
    `MAX_SEGMENTED_CHARS` characters), for looking up which of them are place names."""
    if not _CJK_WORD.match(word):
        return []
    word = word[:MAX_SEGMENTED_CHARS]
    return list(
        dict.fromkeys(
            word[i : i + n] for i in range(len(word)) for n in range(2, MAX_SEGMENT + 1) if i + n <= len(word)
        )
    )


def segment(word: str, known: set[str]) -> list[str]:
    """A Chinese/Japanese address written without separators, as the place names it is made of,
    longest match first from the left ("東京都渋谷区" -> ["東京都", "渋谷区"]); unknown characters
    (street names, "号") are skipped, and so is a name that starts a street name ("建国" in
    "建国路")."""
    word = word[:MAX_SEGMENTED_CHARS]
    out: list[str] = []
    i = 0
    while i < len(word):
        for n in range(min(MAX_SEGMENT, len(word) - i), 1, -1):
            if word[i : i + n] in known and word[i + n : i + n + 1] not in _STREET_MARKS:
                out.append(word[i : i + n])
                i += n
                break
        else:
            i += 1
    return out


def name_variants(key: str) -> list[str]:
    """Other spellings of a normalised place key, tried when it has no match: abbreviations
    expanded or contracted ("st robert" <-> "saint robert", "mt vernon") and settlement words
    dropped ("brick township" -> "brick", "city of industry" -> "industry")."""
    words = key.split()
    out = [
        " ".join(_ABBREVIATIONS.get(w, w) for w in words),
        " ".join(_CONTRACTIONS.get(w, w) for w in words),
    ]
    start, end = 0, len(words)
    if end > 2 and words[1] == "of" and words[0] in _SETTLEMENT_WORDS:
        start = 2
    if end - start > 1 and words[end - 1] in _SETTLEMENT_WORDS:
        end -= 1
    out.append(" ".join(words[start:end]))
    return [v for v in dict.fromkeys(out) if v and v != key]


def designator_free(key: str) -> str:
    """A normalised key without leading/trailing region designators, else "" if nothing changes.

    "moscow oblast" -> "moscow"; "province of alberta" -> "alberta"; "山东省" -> "山东";
    "경기도" -> "경기". The remainder must keep at least two characters.
    """
    words = key.split()
    start, end = 0, len(words)
    while start < end and (words[start] in _DESIGNATOR_WORDS or (start and words[start] in _CONNECTORS)):
        start += 1
    while end > start and words[end - 1] in _DESIGNATOR_WORDS:
        end -= 1
    bare = " ".join(words[start:end])
    if bare == key and len(words) == 1:
        bare = _strip_suffix(key)
    return bare if bare != key and len(bare) >= 2 else ""


def _strip_suffix(word: str) -> str:
    for suffix in _HAN_SUFFIXES + _HANGUL_SUFFIXES:
        if word.endswith(suffix) and len(word) > len(suffix) + 1:
            return word[: -len(suffix)]
    return word


def cyrillic_stem(key: str) -> str:
    """Stem of a one-word Cyrillic region name, shared by its noun and adjective forms, else "".

    "токииская" (Токийская) and "токио" both give "ток"; "баварская" and "бавария" give "бавар".
    Stems are only compared with region names, never with towns.
    """
    if " " in key or not _CYRILLIC_WORD.match(key):
        return ""
    for suffix in _CYRILLIC_ADJECTIVE:
        if key.endswith(suffix):
            key = key[: -len(suffix)]
            break
    stem = key.rstrip(_CYRILLIC_VOWELS)
    return stem if len(stem) >= 3 else ""


def region_keys(name: str) -> tuple[str, str, str]:
    """(key, designator-free key, Cyrillic stem) of one region name; empty strings where none."""
    key = normalize(name)
    bare = designator_free(key)
    return key, bare, cyrillic_stem(bare or key)


MAX_POSTCODE_CHARS = 12
MAX_POSTCODE_TOKENS = 64
_TOKEN_EDGES = " \t.,;:()[]{}\"'«»„“”"
_COUNTRY_PREFIX = re.compile(r"^[A-Z]{1,3}-(?=\d)")


def postcode_tokens(line: str) -> list[str]:
    """What on one line could be a postcode: each word and each pair of adjacent words (for
    "SW1A 1AA", "K1A 0B1", "1012 AB") with a digit in it and at most `MAX_POSTCODE_CHARS`
    characters, punctuation at the edges and a "〒" mark dropped; a European country prefix
    ("CH-6004", "D-10115") is also tried without it. Which of them is a postcode is for a
    country's format and the index to say. At most `MAX_POSTCODE_TOKENS` tokens a line."""
    words = [w.strip(_TOKEN_EDGES).lstrip("〒") for w in line[:MAX_ADDRESS_CHARS].split()]
    words = [w for w in words if w]
    out: list[str] = []
    for i, word in enumerate(words):
        for token in (f"{word} {words[i + 1]}" if i + 1 < len(words) else "", word):  # the longer first
            if token and len(token) <= MAX_POSTCODE_CHARS and _HAS_DIGIT.search(token):
                out.append(token)
                bare = _COUNTRY_PREFIX.sub("", token)
                if bare != token:
                    out.append(bare)
    return list(dict.fromkeys(out))[:MAX_POSTCODE_TOKENS]
