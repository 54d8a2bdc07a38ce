"""Name normalisation shared by the gazetteer, country resolution and text metrics.

"Zürich", "Zurich" and "ZURICH" must meet at one key; so must "São Paulo" and "Sao Paulo".
Non-Latin scripts keep their letters (only marks, case and punctuation go).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_SPECIAL = str.maketrans(
    {"ß": "ss", "æ": "ae", "Æ": "ae", "ø": "o", "Ø": "o", "œ": "oe", "Œ": "oe", "đ": "d", "Đ": "d",
     "ł": "l", "Ł": "l", "ı": "i", "þ": "th", "ð": "d", "’": "'", "ʻ": "'", "ʼ": "'"}
)  # fmt: skip
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_APOSTROPHE = re.compile(r"(?<=\w)'(?=\w)")


@lru_cache(maxsize=200_000)
def normalize(text: str) -> str:
    """Fold accents, case, punctuation and spacing into a comparison key."""
    if not text:
        return ""
    text = unicodedata.normalize("NFKC", text).translate(_SPECIAL)
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    stripped = _APOSTROPHE.sub("", stripped.casefold())
    return _NON_WORD.sub(" ", stripped).strip()


_GENERIC_WORDS = frozenset(
    ("city", "of", "the", "municipality", "district", "county", "province", "prefecture", "state",
     "region", "shi", "xian", "qu", "sheng", "metropolitan", "borough", "town", "village", "township",
     "kommune", "gemeinde", "stadt", "ville", "ciudad", "cidade")
)  # fmt: skip


def strip_generic(key: str) -> str:
    """Drop administrative filler words ("City of", "Province") from a normalised key."""
    words = [w for w in key.split() if w not in _GENERIC_WORDS]
    return " ".join(words) if words else key


def similarity(a: str | None, b: str | None) -> float:
    """String similarity in [0, 1] on normalised keys: exact, containment, else token overlap."""
    if not a or not b:
        return 0.0
    ka, kb = normalize(a), normalize(b)
    if not ka or not kb:
        return 0.0
    if ka == kb or strip_generic(ka) == strip_generic(kb):
        return 1.0
    ta, tb = set(ka.split()), set(kb.split())
    jaccard = len(ta & tb) / len(ta | tb)
    if ka in kb or kb in ka:
        return max(jaccard, 0.8)
    return jaccard


@lru_cache(maxsize=100_000)
def script_of(text: str) -> str | None:
    """Dominant Unicode script of the letters in ``text`` (Latin, Cyrillic, Han, …).

    Memoised per string (labels repeat across rows) and per character: the Unicode name of
    each distinct character is looked up once per process, and ASCII text needs no lookup.
    """
    if text.isascii():
        return "Latin" if _ASCII_LETTER.search(text) else None
    counts: dict[str, int] = {}
    for ch in text:
        script = _char_script(ch)
        if script is not None:
            counts[script] = counts.get(script, 0) + 1
    return max(counts, key=counts.__getitem__) if counts else None


_ASCII_LETTER = re.compile(r"[A-Za-z]")


@lru_cache(maxsize=65_536)
def _char_script(ch: str) -> str | None:
    """Script of one letter (None for anything that is not a letter)."""
    if not ch.isalpha():
        return None
    if ch.isascii():
        return "Latin"
    return script_from_name(unicodedata.name(ch, ""))


_SCRIPT_PREFIXES = (
    ("CJK", "Han"), ("HIRAGANA", "Hiragana"), ("KATAKANA", "Katakana"), ("HANGUL", "Hangul"),
    ("CYRILLIC", "Cyrillic"), ("GREEK", "Greek"), ("ARABIC", "Arabic"), ("HEBREW", "Hebrew"),
    ("DEVANAGARI", "Devanagari"), ("THAI", "Thai"), ("GEORGIAN", "Georgian"), ("ARMENIAN", "Armenian"),
    ("BENGALI", "Bengali"), ("TAMIL", "Tamil"), ("ETHIOPIC", "Ethiopic"), ("KHMER", "Khmer"),
    ("LAO", "Lao"), ("MYANMAR", "Myanmar"), ("SINHALA", "Sinhala"), ("GUJARATI", "Gujarati"),
    ("GURMUKHI", "Gurmukhi"), ("TELUGU", "Telugu"), ("KANNADA", "Kannada"), ("MALAYALAM", "Malayalam"),
    ("TIBETAN", "Tibetan"), ("MONGOLIAN", "Mongolian"), ("LATIN", "Latin"),
)  # fmt: skip


def script_from_name(name: str) -> str:
    """Script of one character from its Unicode name ("CJK UNIFIED IDEOGRAPH-6771" -> "Han")."""
    for prefix, script in _SCRIPT_PREFIXES:
        if name.startswith(prefix):
            return script
    return "Other"
