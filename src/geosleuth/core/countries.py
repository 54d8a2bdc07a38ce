"""Countries: ISO 3166-1 alpha-2 codes from names in any language, and facts about them.

Names come from maintained data: pycountry (ISO 3166), babel (Unicode CLDR territory names
in many languages), Natural Earth (names in 26 languages, UN geoscheme sub-regions) and
GeoNames (continents, neighbours, population, area, calling codes). A short alias table
covers the informal names people and models write ("USA", "UK", "Holland", "Ivory Coast").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from geosleuth.core.text import normalize
from geosleuth.data import geonames_countries, natural_earth_country_records

CLDR_LOCALES = (
    "en", "de", "fr", "es", "it", "pt", "nl", "ru", "uk", "pl", "cs", "sv", "nb", "da", "fi", "tr",
    "el", "hu", "ro", "zh", "zh_Hant", "ja", "ko", "ar", "fa", "he", "hi", "th", "vi", "id", "ms",
    "bg", "sr", "hr", "ca", "bn", "ur", "ta",
)  # fmt: skip

ALIASES: dict[str, str] = {
    "usa": "US", "u s a": "US", "u s": "US", "us": "US", "united states of america": "US", "america": "US",
    "the united states": "US", "uk": "GB", "u k": "GB", "great britain": "GB", "britain": "GB",
    "england": "GB", "scotland": "GB", "wales": "GB", "northern ireland": "GB", "holland": "NL",
    "the netherlands": "NL", "south korea": "KR", "korea": "KR", "republic of korea": "KR",
    "north korea": "KP", "russia": "RU", "czech republic": "CZ", "czechia": "CZ", "ivory coast": "CI",
    "cote d ivoire": "CI", "vatican": "VA", "vatican city": "VA", "macau": "MO", "macao": "MO",
    "burma": "MM", "swaziland": "SZ", "turkey": "TR", "turkiye": "TR", "taiwan": "TW", "palestine": "PS",
    "kosovo": "XK", "laos": "LA", "vietnam": "VN", "viet nam": "VN", "syria": "SY", "iran": "IR",
    "bolivia": "BO", "venezuela": "VE", "tanzania": "TZ", "moldova": "MD", "macedonia": "MK",
    "north macedonia": "MK", "cape verde": "CV", "east timor": "TL", "drc": "CD", "dr congo": "CD",
    "democratic republic of the congo": "CD", "congo kinshasa": "CD", "congo brazzaville": "CG",
    "republic of the congo": "CG", "uae": "AE", "emirates": "AE", "ksa": "SA", "hong kong": "HK",
    "brunei": "BN", "micronesia": "FM", "st lucia": "LC", "st kitts and nevis": "KN",
    "st vincent and the grenadines": "VC", "the bahamas": "BS", "the gambia": "GM", "prc": "CN",
    "mainland china": "CN", "roc": "TW", "republic of china": "TW", "hong kong sar": "HK", "macao sar": "MO",
    "macau sar": "MO", "bosnia": "BA", "persia": "IR", "ceylon": "LK", "zaire": "CD",
}  # fmt: skip

CONTINENTS = {
    "AF": "Africa", "AS": "Asia", "EU": "Europe", "NA": "North America",
    "SA": "South America", "OC": "Oceania", "AN": "Antarctica",
}  # fmt: skip

_NE_NAME_FIELDS = (
    "NAME",
    "NAME_LONG",
    "FORMAL_EN",
    "NAME_ALT",
    "ADMIN",
    "GEOUNIT",
    "SUBUNIT",
    "BRK_NAME",
) + tuple(
    f"NAME_{s}"
    for s in [
        "AR",
        "BN",
        "DE",
        "EN",
        "ES",
        "FA",
        "FR",
        "EL",
        "HE",
        "HI",
        "HU",
        "ID",
        "IT",
        "JA",
        "KO",
        "NL",
        "PL",
        "PT",
        "RU",
        "SV",
        "TR",
        "UK",
        "UR",
        "VI",
        "ZH",
        "ZHT",
    ]
)
_CODE = re.compile(r"^[A-Za-z]{2,3}$")
_NON_WORD = re.compile(r"[\W_]+")


@dataclass(frozen=True)
class CountryInfo:
    """Facts about one country used by metrics, clues, sampling and question builders."""

    code: str
    alpha3: str | None
    name: str
    continent: str | None
    subregion: str | None  # UN geoscheme sub-region ("Western Europe")
    region_un: str | None
    region_wb: str | None
    neighbours: tuple[str, ...] = field(default_factory=tuple)
    population: int = 0
    area_km2: float = 0.0
    phone: str | None = None
    tld: str | None = None
    currency: str | None = None
    languages: tuple[str, ...] = field(default_factory=tuple)


def ne_record_code(rec: dict[str, object]) -> str | None:
    """ISO alpha-2 of a Natural Earth admin-0 row (France and Norway carry -99 in ISO_A2)."""
    import pycountry

    for key in ("ISO_A2", "ISO_A2_EH", "WB_A2"):
        value = str(rec.get(key) or "")
        if len(value) == 2 and value.isalpha() and (pycountry.countries.get(alpha_2=value) or value == "XK"):
            return value
    for key in ("ADM0_A3", "ISO_A3_EH", "SOV_A3"):
        country = pycountry.countries.get(alpha_3=str(rec.get(key) or ""))
        if country is not None:
            return str(country.alpha_2)
    return None


SHORT_NAME_CHARS = 2
"""Names this short once folded match only as written, accents kept: folding makes Vietnamese
"Ý" (Italy) the letter "y" and "Bỉ" (Belgium) "bi"."""


def _key(name: str) -> str:
    """The index key of a name: folded (`normalize`), except for short names (`SHORT_NAME_CHARS`),
    which keep their accents (case and punctuation still fold)."""
    key = normalize(name)
    if len(key) > SHORT_NAME_CHARS:
        return key
    exact = unicodedata.normalize("NFC", name).casefold()
    return " ".join(_NON_WORD.sub(" ", exact).split())


def _add_name(index: dict[str, str], name: object, code: str) -> None:
    """Keep the first code a name got: earlier sources are the more precise ones."""
    key = _key(str(name or ""))
    if key and key not in index:
        index[key] = code


@lru_cache(maxsize=1)
def _first_sources() -> dict[str, str]:
    """The aliases and ISO names: the first sources of `name_index`, so a name found here maps
    exactly as the full index maps it, at a tenth of its build cost (most answers say "France")."""
    import pycountry

    index: dict[str, str] = {}
    for alias, code in ALIASES.items():
        _add_name(index, alias, code)
    for c in pycountry.countries:
        for attr in ("common_name", "name", "official_name"):
            _add_name(index, getattr(c, attr, None), c.alpha_2)
    _add_name(index, "Kosovo", "XK")
    return index


_SAVED_TABLES: list[Callable[[], dict[str, dict[str, str]] | None]] = []


def use_saved_tables(load: Callable[[], dict[str, dict[str, str]] | None]) -> None:
    """Let an adapter supply `country_tables` as saved earlier (the gazetteer saves them at build time).

    ``load`` returns None when its copy does not apply (written by other package versions);
    the tables are then built here. Building reads babel's CLDR locales and Natural Earth's
    attribute table (~0.3-0.7 s); a saved copy loads in milliseconds.
    """
    _SAVED_TABLES[:] = [load]
    name_index.cache_clear()
    _sovereigns.cache_clear()
    country_family.cache_clear()


def _saved(table: str) -> dict[str, str] | None:
    for load in _SAVED_TABLES:
        saved = load()
        if saved is not None:
            return saved[table]
    return None


def tables_sources() -> str:
    """The versions the tables depend on beyond the gazetteer's sources (babel's CLDR)."""
    from importlib.metadata import version

    return f"babel-{version('babel')}"


def country_tables() -> dict[str, dict[str, str]]:
    """What `use_saved_tables` loads, built from the sources: the name index and the sovereigns."""
    return {"names": build_name_index(), "sovereigns": build_sovereigns()}


@lru_cache(maxsize=1)
def name_index() -> dict[str, str]:
    """Normalised country name -> alpha-2 (also used by the gazetteer); earlier sources win on conflicts."""
    saved = _saved("names")
    return saved if saved is not None else build_name_index()


def build_name_index() -> dict[str, str]:
    """`name_index` from its sources: aliases, ISO names, Natural Earth, GeoNames, CLDR locales."""
    from babel import localedata

    index = dict(_first_sources())
    for rec in natural_earth_country_records():
        code = ne_record_code(rec)
        if code:
            for f in _NE_NAME_FIELDS:
                _add_name(index, rec.get(f), code)
    for code, row in geonames_countries().items():
        _add_name(index, row.get("name"), code)
    for loc in CLDR_LOCALES:
        for code, name in localedata.load(loc)["territories"].items():
            if len(code) == 2 and code.isalpha():
                _add_name(index, name, code)
        _drop_locale_cache()  # one locale at a time: ~7 MB of heap for all of them, not ~40
    return index


def _drop_locale_cache() -> None:
    """Free babel's parsed locale data (each locale's merged data is a few MB); it reloads on demand."""
    from babel import localedata

    cache, lock = getattr(localedata, "_cache", None), getattr(localedata, "_cache_lock", None)
    if isinstance(cache, dict) and lock is not None:
        with lock:
            cache.clear()


@lru_cache(maxsize=50_000)
def resolve_country(text: str | None) -> str | None:
    """ISO alpha-2 for a country name, code or alias in any supported language, else None."""
    if not text:
        return None
    raw = str(text).strip()
    if _CODE.match(raw) and raw.isupper():
        code = _code_from_iso(raw)
        if code:
            return code
    key = _key(raw)
    first = _first_sources()
    if key in first:
        return first[key]
    index = name_index()
    if key in index:
        return index[key]
    for candidate in _variants(raw, normalize(raw)):
        if candidate in index:
            return index[candidate]
    return None


def _code_from_iso(raw: str) -> str | None:
    import pycountry

    if raw == "XK":
        return "XK"
    found = pycountry.countries.get(alpha_2=raw) if len(raw) == 2 else pycountry.countries.get(alpha_3=raw)
    return str(found.alpha_2) if found else None


def _variants(raw: str, key: str) -> list[str]:
    """Looser keys: without "the"/"republic of", parentheses removed, the last comma part."""
    out = [_key(re.sub(r"\(.*?\)", " ", raw))]
    for prefix in ("the ", "republic of ", "kingdom of ", "state of "):
        if key.startswith(prefix):
            out.append(_key(key[len(prefix) :]))
    if "," in raw:
        out.append(_key(raw.rsplit(",", 1)[1]))
    return out


def same_country(a: str | None, b: str | None) -> bool:
    """Whether two country strings name the same country (False if either is unknown)."""
    ca, cb = resolve_country(a), resolve_country(b)
    return ca is not None and ca == cb


@lru_cache(maxsize=4096)
def country_name(code: str, locale: str = "en") -> str:
    """Display name in a CLDR locale, falling back to the code."""
    from babel import Locale

    try:
        return str(Locale.parse(locale).territories.get(code.upper(), code))
    except (ValueError, LookupError):
        return code


@lru_cache(maxsize=1)
def _ne_by_code() -> dict[str, dict[str, object]]:
    """One Natural Earth row per code, preferring the main part of a sovereign country."""
    chosen: dict[str, dict[str, object]] = {}
    for rec in natural_earth_country_records():
        code = ne_record_code(rec)
        if code is None:
            continue
        best = chosen.get(code)
        rank = (rec.get("HOMEPART") == 1, float(str(rec.get("POP_EST") or 0)))
        if best is None or rank > (best.get("HOMEPART") == 1, float(str(best.get("POP_EST") or 0))):
            chosen[code] = rec
    return chosen


def natural_earth_record(code: str) -> dict[str, object] | None:
    """The Natural Earth admin-0 attributes of an alpha-2 code (ECONOMY, INCOME_GRP, …), if any."""
    return _ne_by_code().get(code.upper())


@lru_cache(maxsize=512)
def country_info(code: str) -> CountryInfo | None:
    """Facts for an alpha-2 code (or any resolvable name); None when unknown."""
    upper = code.upper() if code else ""
    known = len(upper) == 2 and (upper in geonames_countries() or upper in _ne_by_code())
    resolved = upper if known else resolve_country(code)  # "UK" is no ISO code but resolves to GB
    if not resolved:
        return None
    gn = geonames_countries().get(resolved, {})
    ne = _ne_by_code().get(resolved, {})
    if not gn and not ne:
        return None
    neighbours = tuple(n for n in str(gn.get("neighbours") or "").split(",") if n)
    return CountryInfo(
        code=resolved,
        alpha3=str(gn.get("iso3") or ne.get("ADM0_A3") or "") or None,
        name=str(gn.get("name") or ne.get("NAME") or resolved),
        continent=CONTINENTS.get(str(gn.get("continentcode") or "")) or _opt(ne.get("CONTINENT")),
        subregion=_opt(ne.get("SUBREGION")),
        region_un=_opt(ne.get("REGION_UN")),
        region_wb=_opt(ne.get("REGION_WB")),
        neighbours=neighbours,
        population=int(gn.get("population") or float(str(ne.get("POP_EST") or 0))),
        area_km2=float(gn.get("areakm2") or 0.0),
        phone=_opt(gn.get("phone")),
        tld=_opt(gn.get("tld")),
        currency=_opt(gn.get("currencycode")),
        languages=tuple(str(gn.get("languages") or "").split(",")) if gn.get("languages") else (),
    )


def _opt(value: object) -> str | None:
    text = str(value or "").strip()
    return text or None


OVERSEAS_PARTS: dict[str, str] = {
    "GF": "FR", "GP": "FR", "MQ": "FR", "RE": "FR", "YT": "FR", "SJ": "NO", "BV": "NO", "BQ": "NL",
    "CX": "AU", "CC": "AU",
}  # fmt: skip
"""Territories with their own ISO code that Natural Earth draws inside their sovereign's polygon
(so its admin-0 rows do not name their sovereign); the gazetteer splits them out again."""

_SOVEREIGN_TYPES = frozenset({"Dependency", "Country", "Disputed"})


@lru_cache(maxsize=1)
def _sovereigns() -> dict[str, str]:
    saved = _saved("sovereigns")
    return saved if saved is not None else build_sovereigns()


def build_sovereigns() -> dict[str, str]:
    """Dependent territory -> sovereign alpha-2, from Natural Earth's admin-0 rows."""
    out = dict(OVERSEAS_PARTS)
    for rec in natural_earth_country_records():
        code = ne_record_code(rec)
        if code is None or rec.get("TYPE") not in _SOVEREIGN_TYPES:
            continue
        if rec.get("SOVEREIGNT") == rec.get("ADMIN"):
            continue
        sovereign = resolve_country(str(rec.get("SOVEREIGNT") or ""))
        if sovereign and sovereign != code:
            out[code] = sovereign
    return out


def sovereign_of(code: str) -> str:
    """The sovereign state of a dependent territory ("HK" -> "CN", "GI" -> "GB"); a state is its own."""
    return _sovereigns().get(code, code)


@lru_cache(maxsize=512)
def country_family(code: str) -> frozenset[str]:
    """A country and its dependent territories: "China" in an address also covers Hong Kong."""
    return frozenset({code} | {t for t, s in _sovereigns().items() if s == code})


def all_country_codes() -> list[str]:
    """Every code with GeoNames facts, sorted (for quotas, question builders, iteration)."""
    return sorted(geonames_countries())
