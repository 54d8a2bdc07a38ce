"""Names from prose: field values that are sentences, address lines, comma addresses."""

from __future__ import annotations

import re
from functools import lru_cache

from geosleuth.core.parsing.delimiters import squeeze

_NULLS = frozenset(("null", "none", "unknown", "n/a", "na", "-", "?", "not sure", "unsure", "未知"))

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
_LEAD_IN = re.compile(  # "this is Juan Griego, Venezuela", "It looks like Houston, Texas"
    r"^(?:this|it|that)(?: is|'s| looks like| appears to be| seems to be| must be)"
    r"(?: (?:probably|likely|most likely|possibly))? (?P<name>[^\W\d_][^.!?;:]{0,120}?)[.!?]?$",
    re.I,
)


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
    if remark is not None and remark.start() > 0 and _is_hierarchy(remark.group(1)):
        text = f"{text[: remark.start()].rstrip()}, {remark.group(1).strip()}"  # "City (State, Country)"
        notes = ("parenthetical_hierarchy",)
    elif remark is not None and remark.start() > 0 and len(remark.group(1).split()) >= 3:
        text = text[: remark.start()].rstrip()  # "United States (confirmed by the plates)"
        notes = ("dropped_remark",)
    if not text or text.lower() in _NULLS or len(text) > 4 * limit:
        return None, notes
    words = text.split()
    if not any(map(_is_prose_word, words)) and len(text) <= limit:
        return text, notes
    m = _PLACE_AFTER.search(text) or _LEAD_IN.match(text)
    name = m.group("name").strip() if m else None
    first = words[0].strip(",;:()").lower() if words else ""
    if name is None and first in ("probably", "likely", "possibly", "maybe", "perhaps"):
        name = " ".join(words[1:]).strip(",; ")
    if not name or len(name) > limit or any(map(_is_prose_word, name.split())):
        return None, notes
    return name, (*notes, "name_from_prose")


_cached_clean = lru_cache(maxsize=16_384)(_clean)


def _is_prose_word(word: str) -> bool:
    """A word of a sentence, not of a name: "WE" (Western Cape) and Catalan "i" are names."""
    bare = word.strip(",;:()")
    if bare == "I":
        return True
    if bare.isupper() and len(bare) <= 3:
        return False  # an abbreviation: "WE", "NSW", "IT"
    return bare != "i" and bare.lower() in _PROSE_WORDS


def _is_hierarchy(remark: str) -> bool:
    """ "Nueva Esparta, Venezuela" in "Juan Griego (Nueva Esparta, Venezuela)": names ending in a country."""
    parts = [q.strip() for q in remark.split(",")]
    return (
        len(parts) >= 2
        and len(remark.split()) <= 8
        and all(parts)
        and not any(_is_prose_word(w) for w in remark.split())
        and _country_code(parts[-1]) is not None
    )


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
    if name is None:
        return None
    if not re.search(r"(?:^|[\s,(])[A-ZÀ-ÖØ-Þ]|[^\x00-\u024f]", name) and (
        "," not in name or _country_code(name.rsplit(",", 1)[-1].strip()) is None
    ):
        return None  # place names are capitalised (or non-Latin, or end in a country: "houston, texas, usa")
    return name, notes


def _split_address(address: str, recovered: list[str]) -> dict[str, str]:
    """Read "street, city, region, country" from a comma-separated answer (finest part first)."""
    parts = [p.strip() for p in re.split(r"[,，、]", address) if p.strip()]
    out: dict[str, str] = {}
    if len(parts) > 1 and _country_code(parts[-1]) is None and _country_code(parts[0]) is not None:
        parts.reverse()  # written coarse to fine: "United States, Virginia, Montrose"
        recovered.append("coarse_to_fine_address")
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


def _country_code(text: str | None) -> str | None:
    if not text or len(text) > 100:
        return None
    from geosleuth.core.countries import resolve_country

    return resolve_country(text)
