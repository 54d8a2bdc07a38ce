"""Country hints from text read in an image: phone numbers, domains, currency, script,
language and country-specific patterns (postcodes, company forms, street words).

Plain functions over strings, offline, so that both the ``ocr`` tool and the agent's
offline clue pipeline use them. Each `Clue` names candidate countries (ISO alpha-2) and a
weight in (0, 1] that says how specific the evidence is.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from functools import lru_cache

from pydantic import BaseModel, Field

from geosleuth.core.text import script_from_name


class Clue(BaseModel):
    kind: str  # phone | domain | currency | script | language | pattern
    text: str  # the evidence as found
    countries: list[str] = Field(default_factory=list)
    weight: float = 0.5
    detail: str = ""


class LanguageGuess(BaseModel):
    code: str
    name: str
    percent: int
    reliable: bool


# --- script and language ------------------------------------------------------------------------


def script_profile(text: str) -> dict[str, float]:
    """Share of letters per Unicode script (Latin, Han, Hangul, …)."""
    counts: Counter[str] = Counter()
    for ch in text:
        if ch.isalpha():
            counts[script_from_name(unicodedata.name(ch, ""))] += 1
    total = sum(counts.values())
    return {s: round(n / total, 3) for s, n in counts.most_common()} if total else {}


def detect_language(text: str) -> list[LanguageGuess]:
    """Languages by pycld2 (offline, compact); empty for too little text."""
    import pycld2

    clean = "".join(ch for ch in text if ch.isprintable() or ch in "\n\t")
    if len(clean.strip()) < 3:
        return []
    try:
        reliable, _, details = pycld2.detect(clean)
    except pycld2.error:
        return []
    return [
        LanguageGuess(code=code, name=name.title(), percent=int(pct), reliable=bool(reliable))
        for name, code, pct, _ in details
        if code != "un" and pct > 0
    ]


SCRIPT_COUNTRIES: dict[str, tuple[list[str], float]] = {
    "Hangul": (["KR", "KP"], 0.9),
    "Hiragana": (["JP"], 0.95),
    "Katakana": (["JP"], 0.9),
    "Thai": (["TH"], 0.9),
    "Lao": (["LA"], 0.95),
    "Khmer": (["KH"], 0.95),
    "Myanmar": (["MM"], 0.95),
    "Georgian": (["GE"], 0.95),
    "Armenian": (["AM"], 0.95),
    "Greek": (["GR", "CY"], 0.85),
    "Hebrew": (["IL"], 0.85),
    "Sinhala": (["LK"], 0.95),
    "Ethiopic": (["ET", "ER"], 0.9),
    "Tibetan": (["CN", "BT", "NP", "IN"], 0.6),
    "Bengali": (["BD", "IN"], 0.7),
    "Gurmukhi": (["IN"], 0.8),
    "Gujarati": (["IN"], 0.85),
    "Tamil": (["IN", "LK", "SG", "MY"], 0.6),
    "Telugu": (["IN"], 0.9),
    "Kannada": (["IN"], 0.9),
    "Malayalam": (["IN"], 0.9),
    "Devanagari": (["IN", "NP"], 0.7),
    "Mongolian": (["CN", "MN"], 0.6),
    "Han": (["CN", "TW", "HK", "JP", "SG", "MO"], 0.4),
    "Cyrillic": (["RU", "UA", "BY", "BG", "RS", "KZ", "MK", "KG", "MN"], 0.3),
    "Arabic": (["SA", "AE", "EG", "MA", "IQ", "IR", "PK", "JO", "DZ", "TN"], 0.2),
}
"""Scripts that narrow the country; Latin says too little to be a clue."""

LANGUAGE_COUNTRIES: dict[str, list[str]] = {
    "ja": ["JP"],
    "ko": ["KR"],
    "th": ["TH"],
    "vi": ["VN"],
    "el": ["GR", "CY"],
    "he": ["IL"],
    "iw": ["IL"],
    "ka": ["GE"],
    "hy": ["AM"],
    "pl": ["PL"],
    "cs": ["CZ"],
    "sk": ["SK"],
    "hu": ["HU"],
    "ro": ["RO", "MD"],
    "bg": ["BG"],
    "uk": ["UA"],
    "be": ["BY"],
    "lt": ["LT"],
    "lv": ["LV"],
    "et": ["EE"],
    "fi": ["FI"],
    "sv": ["SE", "FI"],
    "da": ["DK"],
    "no": ["NO"],
    "nb": ["NO"],
    "nn": ["NO"],
    "is": ["IS"],
    "nl": ["NL", "BE"],
    "tr": ["TR", "CY"],
    "id": ["ID"],
    "ms": ["MY", "BN", "SG"],
    "tl": ["PH"],
    "fil": ["PH"],
    "sl": ["SI"],
    "hr": ["HR"],
    "sr": ["RS", "BA", "ME"],
    "sq": ["AL", "XK", "MK"],
    "mk": ["MK"],
    "mt": ["MT"],
    "ga": ["IE"],
    "cy": ["GB"],
    "eu": ["ES", "FR"],
    "ca": ["ES", "AD"],
    "gl": ["ES"],
    "km": ["KH"],
    "lo": ["LA"],
    "my": ["MM"],
    "si": ["LK"],
    "ne": ["NP"],
    "bn": ["BD", "IN"],
    "ur": ["PK", "IN"],
    "fa": ["IR", "AF"],
    "am": ["ET"],
    "sw": ["KE", "TZ", "UG"],
    "af": ["ZA", "NA"],
    "zh": ["CN", "TW", "HK", "SG"],
    "zh-Hant": ["TW", "HK", "MO"],
    "mn": ["MN"],
    "kk": ["KZ"],
    "uz": ["UZ"],
    "az": ["AZ"],
    "pt": ["BR", "PT", "AO", "MZ"],
    "de": ["DE", "AT", "CH"],
    "fr": ["FR", "BE", "CH", "CA"],
    "it": ["IT", "CH"],
    "es": ["ES", "MX", "AR", "CO", "CL", "PE"],
    "ru": ["RU", "BY", "KZ", "UA"],
}


def script_clues(text: str) -> list[Clue]:
    profile = script_profile(text)
    out: list[Clue] = []
    for script, share in profile.items():
        if script in SCRIPT_COUNTRIES and share >= 0.05:
            countries, weight = SCRIPT_COUNTRIES[script]
            out.append(
                Clue(
                    kind="script",
                    text=script,
                    countries=countries,
                    weight=round(weight * share, 3),
                    detail=f"{share:.0%} of letters are {script}",
                )
            )
    return out


def language_clues(text: str) -> list[Clue]:
    out: list[Clue] = []
    for guess in detect_language(text):
        countries = LANGUAGE_COUNTRIES.get(guess.code)
        if countries and guess.percent >= 20:
            weight = (0.6 if guess.reliable else 0.3) * guess.percent / 100 / max(1, len(countries) ** 0.5)
            out.append(
                Clue(
                    kind="language",
                    text=guess.name,
                    countries=countries,
                    weight=round(weight, 3),
                    detail=f"{guess.name} ({guess.code}), {guess.percent}% of the text",
                )
            )
    return out


# --- phone numbers ------------------------------------------------------------------------------


def phone_clues(text: str, regions: list[str] | None = None) -> list[Clue]:
    """International numbers (+CC …) anywhere; national formats only for the regions given."""
    import phonenumbers

    out: list[Clue] = []
    seen: set[str] = set()
    for region in [None, *(regions or [])]:
        for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID):
            number = match.number
            e164 = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
            if e164 in seen:
                continue
            seen.add(e164)
            cc = phonenumbers.region_code_for_number(number)
            if not cc or cc == "001":
                continue
            sharing = phonenumbers.region_codes_for_country_code(number.country_code)
            weight = 0.95 if len(sharing) == 1 or region is None and match.raw_string.startswith("+") else 0.7
            out.append(
                Clue(
                    kind="phone",
                    text=match.raw_string,
                    countries=[cc],
                    weight=weight,
                    detail=f"{e164}: country calling code +{number.country_code}",
                )
            )
    return out


# --- domains ------------------------------------------------------------------------------------

_HOST = re.compile(
    r"(?:https?://)?(?:[\w-]+@)?((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,24})\b", re.IGNORECASE
)
VANITY_TLDS = frozenset({"io", "co", "tv", "me", "ai", "fm", "ly", "to", "cc", "ws", "gg", "vc", "app", "nu"})
TLD_EXCEPTIONS = {"uk": "GB", "su": "RU"}


@lru_cache(maxsize=1)
def _extractor():  # type: ignore[no-untyped-def]
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def domain_clues(text: str) -> list[Clue]:
    """Country-code top-level domains (``.de``, ``.co.jp``, ``.com.br``) → countries."""
    out: list[Clue] = []
    seen: set[str] = set()
    for m in _HOST.finditer(text):
        host = m.group(1).lower().rstrip(".")
        if host in seen:
            continue
        seen.add(host)
        ext = _extractor()(host)
        if not ext.suffix or not ext.domain:
            continue
        tld = ext.suffix.rsplit(".", 1)[-1]
        if len(tld) != 2 or tld == "eu":
            continue
        code = TLD_EXCEPTIONS.get(tld, tld.upper())
        weight = 0.2 if tld in VANITY_TLDS else 0.85
        out.append(
            Clue(
                kind="domain",
                text=host,
                countries=[code],
                weight=weight,
                detail=f"country-code domain .{ext.suffix}",
            )
        )
    return out


# --- currency -----------------------------------------------------------------------------------

EURO = [
    "DE",
    "FR",
    "IT",
    "ES",
    "NL",
    "BE",
    "AT",
    "PT",
    "IE",
    "FI",
    "GR",
    "SK",
    "SI",
    "LT",
    "LV",
    "EE",
    "LU",
    "MT",
    "CY",
    "HR",
]
CURRENCY_SYMBOLS: dict[str, tuple[list[str], float]] = {
    "R$": (["BR"], 0.9),
    "HK$": (["HK"], 0.9),
    "NT$": (["TW"], 0.9),
    "S$": (["SG"], 0.9),
    "A$": (["AU"], 0.85),
    "NZ$": (["NZ"], 0.9),
    "C$": (["CA"], 0.8),
    "MX$": (["MX"], 0.9),
    "€": (EURO, 0.5),
    "£": (["GB"], 0.7),
    "₩": (["KR"], 0.9),
    "₹": (["IN"], 0.9),
    "₽": (["RU"], 0.9),
    "₺": (["TR"], 0.9),
    "₴": (["UA"], 0.9),
    "₪": (["IL"], 0.9),
    "฿": (["TH"], 0.85),
    "₫": (["VN"], 0.9),
    "₱": (["PH"], 0.9),
    "₦": (["NG"], 0.9),
    "₵": (["GH"], 0.9),
    "৳": (["BD"], 0.9),
    "₸": (["KZ"], 0.9),
    "₾": (["GE"], 0.9),
    "₼": (["AZ"], 0.9),
    "₮": (["MN"], 0.9),
    "₭": (["LA"], 0.9),
    "៛": (["KH"], 0.9),
    "円": (["JP"], 0.9),
    "元": (["CN", "TW"], 0.6),
    "¥": (["JP", "CN"], 0.5),
    "zł": (["PL"], 0.9),
    "Kč": (["CZ"], 0.9),
    "лв": (["BG"], 0.8),
    "руб": (["RU", "BY"], 0.8),
    "грн": (["UA"], 0.9),
    "Ft": (["HU"], 0.6),
    "lei": (["RO", "MD"], 0.5),
    "KSh": (["KE"], 0.9),
    "Rp": (["ID"], 0.7),
    "RM": (["MY"], 0.5),
    "CHF": (["CH", "LI"], 0.85),
    "kr": (["SE", "NO", "DK", "IS"], 0.4),
    "TL": (["TR"], 0.4),
    "Bs": (["VE", "BO"], 0.5),
    "S/": (["PE"], 0.8),
    "Q": (["GT"], 0.2),
}
ISO_CURRENCIES: dict[str, list[str]] = {
    "EUR": EURO,
    "GBP": ["GB"],
    "JPY": ["JP"],
    "CNY": ["CN"],
    "RMB": ["CN"],
    "KRW": ["KR"],
    "INR": ["IN"],
    "RUB": ["RU"],
    "TRY": ["TR"],
    "UAH": ["UA"],
    "ILS": ["IL"],
    "THB": ["TH"],
    "VND": ["VN"],
    "PHP": ["PH"],
    "BRL": ["BR"],
    "MXN": ["MX"],
    "ARS": ["AR"],
    "CLP": ["CL"],
    "COP": ["CO"],
    "PEN": ["PE"],
    "CAD": ["CA"],
    "AUD": ["AU"],
    "NZD": ["NZ"],
    "CHF": ["CH", "LI"],
    "SEK": ["SE"],
    "NOK": ["NO"],
    "DKK": ["DK"],
    "PLN": ["PL"],
    "CZK": ["CZ"],
    "HUF": ["HU"],
    "RON": ["RO"],
    "BGN": ["BG"],
    "ZAR": ["ZA"],
    "EGP": ["EG"],
    "AED": ["AE"],
    "SAR": ["SA"],
    "IDR": ["ID"],
    "MYR": ["MY"],
    "SGD": ["SG"],
    "HKD": ["HK"],
    "TWD": ["TW"],
    "NGN": ["NG"],
    "KES": ["KE"],
    "PKR": ["PK"],
    "BDT": ["BD"],
    "LKR": ["LK"],
    "ISK": ["IS"],
    "USD": ["US"],
}
_ISO_CUR = re.compile(r"(?<![A-Z])(" + "|".join(ISO_CURRENCIES) + r")(?![A-Z])")
_LETTER_SYMBOLS = re.compile(
    r"(?<!\w)(zł|Kč|лв|руб|грн|Ft|lei|KSh|Rp|RM|CHF|kr|TL|Bs|S/|Q)(?=\s?\d|\.)|"
    r"(?<=\d)\s?(zł|Kč|лв|руб|грн|Ft|lei|kr|TL|円|元)"
)


def currency_clues(text: str) -> list[Clue]:
    out: list[Clue] = []
    found: list[str] = []
    for sym in ("R$", "HK$", "NT$", "S$", "A$", "NZ$", "C$", "MX$"):
        if sym in text:
            found.append(sym)
    for sym in CURRENCY_SYMBOLS:
        if len(sym) == 1 and not sym.isascii() and sym in text:
            found.append(sym)
    for m in _LETTER_SYMBOLS.finditer(text):
        found.append(m.group(1) or m.group(2))
    for sym in dict.fromkeys(found):
        countries, weight = CURRENCY_SYMBOLS[sym]
        out.append(
            Clue(
                kind="currency", text=sym, countries=countries, weight=weight, detail=f"currency symbol {sym}"
            )
        )
    for code in dict.fromkeys(_ISO_CUR.findall(text)):
        out.append(
            Clue(
                kind="currency",
                text=code,
                countries=ISO_CURRENCIES[code],
                weight=0.5,
                detail=f"ISO currency code {code}",
            )
        )
    return out


# --- country-specific patterns ------------------------------------------------------------------

PATTERNS: list[tuple[str, re.Pattern[str], list[str], float]] = [
    ("UK postcode", re.compile(r"\b[A-Z]{1,2}\d[A-Z\d]? \d[A-Z]{2}\b"), ["GB"], 0.85),
    ("Canadian postcode", re.compile(r"\b[ABCEGHJ-NPRSTVXY]\d[A-Z] ?\d[A-Z]\d\b"), ["CA"], 0.8),
    ("Japanese postcode", re.compile(r"〒\s?\d{3}-\d{4}"), ["JP"], 0.95),
    ("Brazilian CEP", re.compile(r"\bCEP:?\s?\d{5}-\d{3}\b"), ["BR"], 0.9),
    (
        "Dutch postcode",
        re.compile(r"\b\d{4} ?[A-Z]{2}\b(?=.*\b(?:Amsterdam|Rotterdam|Utrecht|straat|weg)\b)"),
        ["NL"],
        0.6,
    ),
    ("German company form", re.compile(r"\b(?:GmbH|Gmbh)\b|\be\.\s?V\.\B"), ["DE", "AT", "CH"], 0.6),
    ("German street word", re.compile(r"(?:straße|strasse|gasse)\b", re.IGNORECASE), ["DE", "AT", "CH"], 0.5),
    ("Mexican company form", re.compile(r"\bS\.?A\.? de C\.?V\.?"), ["MX"], 0.85),
    ("Australian/South African company", re.compile(r"\bPty\.? Ltd\b"), ["AU", "ZA"], 0.6),
    ("Polish company form", re.compile(r"\bsp\. z o\.o\.", re.IGNORECASE), ["PL"], 0.9),
    ("Czech/Slovak company form", re.compile(r"\bs\.r\.o\.", re.IGNORECASE), ["CZ", "SK"], 0.85),
    ("Finnish company form", re.compile(r"\bOy\b|\bOyj\b"), ["FI"], 0.6),
    ("Danish company form", re.compile(r"\bApS\b"), ["DK"], 0.8),
    ("Russian street abbreviation", re.compile(r"\b(?:ул\.|пр-т|пер\.)"), ["RU", "UA", "BY", "KZ"], 0.5),
    ("Indian PIN code", re.compile(r"\b(?:PIN|Pin)(?: code)?:?\s?\d{3}\s?\d{3}\b"), ["IN"], 0.8),
    (
        "US ZIP with state",
        re.compile(
            r"\b(?:A[KLRZ]|C[AOT]|DE|FL|GA|HI|I[ADLN]|K[SY]|LA|M[ADEINOST]|N[CDEHJMVY]|"
            r"O[HKR]|PA|RI|S[CD]|T[NX]|UT|V[AT]|W[AIVY]) \d{5}(?:-\d{4})?\b"
        ),
        ["US"],
        0.85,
    ),
    ("Korean address unit", re.compile(r"[가-힣]+(?:로|길)\s?\d+"), ["KR"], 0.8),
    ("Chinese address unit", re.compile(r"[\u4e00-\u9fff]{1,8}(?:路|街)\d+号"), ["CN", "TW"], 0.6),
]


def pattern_clues(text: str) -> list[Clue]:
    out: list[Clue] = []
    for name, pattern, countries, weight in PATTERNS:
        m = pattern.search(text)
        if m:
            out.append(
                Clue(kind="pattern", text=m.group(0).strip(), countries=countries, weight=weight, detail=name)
            )
    return out


# --- all together -------------------------------------------------------------------------------


def extract_clues(text: str, regions: list[str] | None = None) -> list[Clue]:
    """Every offline clue in ``text``; ``regions`` enables national phone formats for those countries."""
    if not text or not text.strip():
        return []
    return [
        *phone_clues(text, regions),
        *domain_clues(text),
        *currency_clues(text),
        *pattern_clues(text),
        *script_clues(text),
        *language_clues(text),
    ]


def country_votes(clues: list[Clue]) -> dict[str, float]:
    """Combine clues into a score per country (each clue spreads its weight over its countries)."""
    votes: Counter[str] = Counter()
    for clue in clues:
        for cc in clue.countries:
            votes[cc] += clue.weight / len(clue.countries) ** 0.5
    return {cc: round(v, 3) for cc, v in votes.most_common()}
