"""WhereBench rules as pure functions: answer hierarchies, hint levels, path hits and the aggregate.

The released WhereStreet file gives an answer as a comma-separated hierarchy, fine to coarse
("Liuzhou, Guangxi, China"), its finest level (``answer_type``) and a free-text hint. The
functions here turn that into level labels, find which level the hint gives away, decide per
level whether a predicted answer names the true unit, and aggregate WhereCountry / WhereStreet
items into the published figures (paper Eq. 2 and Eq. 5). Accuracies are fractions here; the
edges (summaries, reports) show percentages.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from geosleuth.core import metrics
from geosleuth.core.records import Prediction
from geosleuth.core.text import normalize, strip_generic

MAX_TEXT_CHARS = 4000
"""Hints and answers longer than this are cut before matching (bounded work on untrusted text)."""

ANSWER_TYPES: dict[str, str] = {
    "street": "street",
    "town": "town",
    "town/subdistrict": "town",
    "subdistrict": "town",
    "county": "admin2",
    "county/district": "admin2",
    "district": "admin2",
    "city": "city",
    "province": "admin1",
    "province or equivalent": "admin1",
    "province/state": "admin1",
    "state": "admin1",
    "country": "country",
    "latitude & longitude": "coordinates",
    "coordinates": "coordinates",
}
"""Released ``answer_type`` values (and obvious variants) → geosleuth level or ``coordinates``."""

SOURCES: tuple[str, ...] = ("bilibili", "youtube")
ACC_KM: tuple[float, ...] = (1.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0)
"""The released WhereStreet coordinate thresholds."""

_LEVEL_WORDS: dict[str, tuple[str, ...]] = {
    "admin1": ("province", "state", "prefecture", "oblast", "autonomous region", "省", "自治区"),
    "city": ("city", "municipality", "市"),
    "admin2": ("county", "district", "borough", "县", "区"),
    "town": ("town", "township", "subdistrict", "village", "镇", "乡", "街道"),
}


_NUMBER = re.compile(r"[-+]?(?:\d+\.\d+|\d+|\.\d+)")
r"""The released ``[-+]?\d*\.?\d+`` (same matches), written without overlapping quantifiers."""


def answer_block(text: str) -> str:
    """The first ``<answer>…</answer>`` text (all the released inference keeps), else the whole text."""
    head = text[: MAX_TEXT_CHARS * 4]
    start = head.find("<answer>")
    if start < 0:
        return head.strip()
    end = head.find("</answer>", start)
    return head[start + len("<answer>") : end if end >= 0 else None].strip()


def released_coordinates(text: str) -> tuple[float, float] | None:
    """The released reading of a coordinate answer: its first two numbers are latitude and longitude.

    Hemisphere letters are ignored ("33.87 S" reads as +33.87) and any two numbers count
    ("Road 5, No. 12" reads as (5, 12)), as in the released evaluation; None with fewer than two
    numbers (the released code then asks its judge model to geocode the text).
    """
    numbers = _NUMBER.findall(text[:MAX_TEXT_CHARS].replace("(", "").replace(")", ""))
    if len(numbers) < 2:
        return None
    return float(numbers[0]), float(numbers[1])


def source_of(item_id: str) -> str:
    """The released split rule: bilibili items have ``BV…`` ids, every other id is YouTube."""
    return "bilibili" if str(item_id).startswith("BV") else "youtube"


def answer_level(answer_type: str) -> str:
    """Geosleuth level (or ``coordinates``) of a released ``answer_type``; ValueError if unknown."""
    key = " ".join(str(answer_type).strip().lower().split())
    if key in ANSWER_TYPES:
        return ANSWER_TYPES[key]
    if key in metrics.PATH_LEVELS:
        return key
    choices = ", ".join(sorted(ANSWER_TYPES))
    raise ValueError(f"answer level {answer_type!r} is not one of {choices}")


def _components(text: str) -> list[str]:
    parts = (p.strip(" .;") for p in text[:MAX_TEXT_CHARS].split(","))
    return [p for p in parts if p]


def _word_level(component: str) -> str | None:
    low = component.lower()
    for level, words in _LEVEL_WORDS.items():
        if any(low.endswith(w) or low.endswith(f"{w}.") for w in words):
            return level
    return None


def hierarchy_labels(answer: str, level: str) -> dict[str, str]:
    """Level labels of a fine→coarse answer hierarchy whose finest component is at ``level``.

    The last component is the country and the first the answer level; components between
    take the levels between, in order, preferring levels their own words name ("… County",
    "… City") and otherwise the coarsest free ones. Extra components beyond the levels
    available stay with the finest one ("plac Europejski 1, Warszawa" keeps its street
    number with the street).
    """
    if level not in metrics.PATH_LEVELS:
        raise ValueError(f"level {level!r} is not one of {', '.join(metrics.PATH_LEVELS)}")
    parts = _components(answer)
    if not parts:
        raise ValueError("empty answer")
    if level == "country":
        return {"country": ", ".join(parts)}
    if len(parts) == 1:
        return {level: parts[0]}
    top = metrics.PATH_LEVELS.index(level)
    slots = list(metrics.PATH_LEVELS[1:top])
    finest, middle, country = parts[0], parts[1:-1], parts[-1]
    extra = max(len(middle) - len(slots), _street_parts(middle) if level == "street" else 0)
    if extra:
        finest = ", ".join([finest, *middle[:extra]])
        middle = middle[extra:]
    coarse_first = list(reversed(middle))  # coarse → fine, like the slots
    best: tuple[str, ...] = tuple(slots[: len(coarse_first)])
    best_score = -1
    for chosen in itertools.combinations(slots, len(coarse_first)):
        agree = sum(_word_level(c) == lv for c, lv in zip(coarse_first, chosen, strict=True))
        if agree > best_score:
            best, best_score = chosen, agree
    labels = {"country": country}
    labels.update(zip(best, coarse_first, strict=True))
    labels[level] = finest
    return labels


def _key(text: str) -> str:
    return strip_generic(normalize(text[:MAX_TEXT_CHARS]))


def _contains(haystack_key: str, name: str) -> bool:
    needle = _key(name)
    return bool(needle) and f" {needle} " in f" {haystack_key} "


_AMBIGUOUS_ALIASES = frozenset({"us", "america"})
"""Aliases that are ordinary English words or whole continents in a hint."""
MAX_NGRAM = 4


@lru_cache(maxsize=1)
def _country_keys() -> dict[str, str]:
    """English country names and the common aliases ("U.S.", "UK"), normalised → ISO code.

    English only: other languages' names include ordinary English words (German "Island").
    """
    from geosleuth.core.countries import ALIASES, all_country_codes, country_name

    keys = {normalize(alias): code for alias, code in ALIASES.items() if alias not in _AMBIGUOUS_ALIASES}
    keys.update((normalize(country_name(code)), code) for code in all_country_codes())
    return {k: v for k, v in keys.items() if k}


def countries_named(text: str) -> set[str]:
    """ISO codes of the countries an English text names (whole words, up to four-word names)."""
    words = normalize(text[:MAX_TEXT_CHARS]).split()
    keys = _country_keys()
    found: set[str] = set()
    for n in range(1, MAX_NGRAM + 1):
        for i in range(len(words) - n + 1):
            code = keys.get(" ".join(words[i : i + n]))
            if code:
                found.add(code)
    return found


def hint_level(hint: str | None, labels: Mapping[str, str]) -> str | None:
    """The finest true level a hint gives away, or None.

    A level is given away when the hint names its true unit; a hint that lists candidates
    from several countries ("one of the following places: A: Vietnam, … D: Taiwan, China")
    gives nothing away, as the released judge prompt rules.
    """
    if not hint or len(countries_named(hint)) > 1:
        return None
    key = _key(hint)
    given: str | None = None
    for level in metrics.PATH_LEVELS:
        truth = labels.get(level)
        if not truth:
            continue
        if level == "country":
            if not _country_in(key, hint, truth):
                continue
        elif not _contains(key, truth):
            continue
        given = level
    return given


def _country_in(key: str, hint: str, truth: str) -> bool:
    from geosleuth.core.countries import resolve_country

    code = resolve_country(truth)
    return _contains(key, truth) or (code is not None and code in countries_named(hint))


def _street_parts(middle: list[str]) -> int:
    """How many of the finest middle components (fine → coarse) are address parts (numbers, postcodes)."""
    count = 0
    for part in middle:
        if not any(ch.isdigit() for ch in part):
            break
        count += 1
    return count


def _predicted_parts(prediction: Prediction) -> list[str]:
    parts = _components(prediction.address or "")
    for level in (*metrics.PATH_LEVELS, "poi"):
        value = prediction.level(level)
        if value:
            parts.append(value[:MAX_TEXT_CHARS])
    return list(dict.fromkeys(parts))


def _names(part: str, truth: str, level: str) -> bool:
    if metrics.text_matches(part, truth, level):
        return True
    return level != "country" and len(_key(truth)) >= 4 and _contains(_key(part), truth)


def path_hits(prediction: Prediction | None, labels: Mapping[str, str]) -> dict[str, bool]:
    """Per true level: does the answer name the true unit (explicitly, or implicitly by a finer one)?

    Implicit parent credit (the released rule): a coarser level the answer omits counts when a
    finer level is right, unless the answer names a different unit at that level.
    """
    levels = [lv for lv in metrics.PATH_LEVELS if labels.get(lv)]
    if prediction is None:
        return dict.fromkeys(levels, False)
    parts = _predicted_parts(prediction)
    direct = {lv: any(_names(p, labels[lv], lv) for p in parts) for lv in levels}
    if "country" in direct and prediction.country_code:
        from geosleuth.core.countries import resolve_country

        direct["country"] = direct["country"] or prediction.country_code == resolve_country(labels["country"])
    out: dict[str, bool] = {}
    for i, lv in enumerate(levels):
        said = prediction.level(lv)
        contradicted = bool(said) and not direct[lv]
        out[lv] = direct[lv] or (not contradicted and any(direct[f] for f in levels[i + 1 :]))
    return out


def copies_hint(prediction: Prediction | None, hint: str | None) -> bool:
    """Every place the answer names is already in the hint (the released anti-cheating rule)."""
    if prediction is None or not hint:
        return False
    parts = _predicted_parts(prediction)
    key = _key(hint)
    return bool(parts) and all(_contains(key, p) for p in parts)


def item_path_score(
    prediction: Prediction | None,
    labels: Mapping[str, str],
    level: str,
    hint: str | None,
    given: str | None = None,
) -> tuple[float, dict[str, bool], str | None, bool]:
    """(path score, level hits, hint level, copied hint) of one WhereStreet text item.

    The path runs over the levels the ground truth has, from one below the hint's level
    (``given``, else found in the hint text) to the answer level; levels the truth leaves
    out cannot be checked and are not on it.
    """
    hits = path_hits(prediction, labels)
    given = given if given in labels else hint_level(hint, labels)
    copied = copies_hint(prediction, hint) and given is not None
    present = tuple(lv for lv in metrics.PATH_LEVELS if labels.get(lv))
    score = metrics.path_score(hits, level, given, copied, order=present) if level in present else 0.0
    return score, hits, given, copied


# ----------------------------------------------------------------------------- aggregate


@dataclass
class WhereItem:
    """One WhereBench item as the aggregate sees it."""

    id: str
    task: str  # "wherecountry" | "text" | "coordinates"
    source: str | None = None  # WhereStreet split: bilibili | youtube
    parsed: bool = False  # WhereCountry: an option was read from the answer
    correct: bool = False  # WhereCountry
    path_score: float = 0.0  # WhereStreet text items
    distance_km: float = math.nan  # WhereStreet coordinate items; NaN when unanswered
    clues_used: list[bool] | None = None  # judged key-clue usage, None when not judged
    clue_weights: list[float] = field(default_factory=list)


def hits_open(distances_km: Sequence[float], km: float) -> np.ndarray:
    """The released Acc@k hit: ``0 < d ≤ k`` (an exact 0 km answer is not counted); NaN misses."""
    d = np.asarray(distances_km, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return (d > 0) & (d <= km)


def _pct(value: float) -> float | None:
    return None if not math.isfinite(value) else round(100.0 * value, 4)


def _mean(values: Iterable[float]) -> float:
    v = list(values)
    return float(np.mean(v)) if v else math.nan


def _country_accuracies(items: Sequence[WhereItem]) -> dict[str, float | None]:
    """Both WhereCountry accuracies in percent, without intervals: Overall needs no bootstrap."""
    n = len(items)
    parsed = sum(i.parsed for i in items)
    correct = sum(i.correct for i in items)
    return {
        "accuracy_as_published": _pct(correct / parsed if parsed else math.nan),
        "accuracy_every_row": _pct(correct / n if n else math.nan),
    }


def wherecountry_figures(items: Sequence[WhereItem]) -> dict[str, object]:
    """Accuracy as published (over parsed answers) and over every row, with the rows that differ."""
    parsed = [i for i in items if i.parsed]
    accuracy = _country_accuracies(items)
    return {
        "n": len(items),
        "parsed": len(parsed),
        "accuracy_as_published": accuracy["accuracy_as_published"],
        "accuracy_as_published_ci95": _ci([i.correct for i in parsed]),
        "accuracy_every_row": accuracy["accuracy_every_row"],
        "accuracy_every_row_ci95": _ci([i.correct for i in items]),
        "unparsed_ids": [i.id for i in items if not i.parsed],
    }


def _ci(values: Sequence[float], seed: int = 0) -> list[float | None]:
    """Percentile-bootstrap 95 % interval of a mean, in percent (hits or scores in [0, 1])."""
    lo, hi = metrics.bootstrap_ci_mean(np.asarray(values, dtype=np.float64), seed=seed)
    return [_pct(lo), _pct(hi)]


def thinking_figures(items: Sequence[WhereItem]) -> dict[str, object]:
    """Plain thinking score (share of clues used) and the Shapley-reweighted Σ wᵢ·sᵢ (Eq. 5), in percent."""
    judged = [i for i in items if i.clues_used is not None and i.clues_used]
    plain = [metrics.thinking_score(i.clues_used or []) for i in judged]
    weighted = [
        metrics.thinking_score(i.clues_used or [], i.clue_weights)
        for i in judged
        if len(i.clue_weights) == len(i.clues_used or [])
    ]
    return {
        "n_judged": len(judged),
        "n_items": len(items),
        "thinking": _pct(_mean(plain)),
        "thinking_shapley": _pct(_mean(weighted)),
        "n_weighted": len(weighted),
    }


def wherestreet_figures(items: Sequence[WhereItem]) -> dict[str, dict[str, object]]:
    """Per source split: mean path score of text items, Acc@k of coordinate items, thinking scores."""
    out: dict[str, dict[str, object]] = {}
    for source in SOURCES:
        text = [i for i in items if i.task == "text" and i.source == source]
        coords = [i for i in items if i.task == "coordinates" and i.source == source]
        if not text and not coords:
            continue
        d = [i.distance_km for i in coords]
        out[source] = {
            "n_text": len(text),
            "path_score": _pct(_mean(i.path_score for i in text)),
            "path_score_ci95": _ci([i.path_score for i in text]),
            "n_coordinates": len(coords),
            "answered_coordinates": int(np.isfinite(np.asarray(d, dtype=float)).sum()) if d else 0,
            **{metrics.threshold_name(km): _pct(metrics.accuracy(hits_open(d, km))) for km in ACC_KM},
            "thinking_text": thinking_figures(text),
            "thinking_coordinates": thinking_figures(coords),
        }
    return out


COORDINATE_SCORE_KM = 0.1
COORDINATE_SCORE_ALPHA = 1.3
"""The released answer score of a coordinate item: exp(−(d / 0.1 km)^1.3)."""


def coordinate_answer_score(distance_km: float) -> float:
    """``answer_score`` of a coordinate item as released: exp(−(d/0.1)^1.3); 0 when unanswered."""
    if not math.isfinite(distance_km) or distance_km < 0:
        return 0.0
    return math.exp(-((distance_km / COORDINATE_SCORE_KM) ** COORDINATE_SCORE_ALPHA))


def _country_fraction(items: Sequence[WhereItem], country_accuracy: str) -> float:
    """p_C as the released WhereCountry script writes it: ``correct / total`` unrounded."""
    correct = sum(i.correct for i in items)
    total = sum(i.parsed for i in items) if country_accuracy == "accuracy_as_published" else len(items)
    return correct / total if total else 0.0


def overall_score(
    items: Sequence[WhereItem],
    country_accuracy: str = "accuracy_as_published",
    coordinates: str = "answer_score",
) -> float:
    """WhereBench Overall: item-weighted mean of p_C and each split's scores (a fraction).

    As released (``coordinates="answer_score"``): (N_C·p_C + Σ_s n_s·ā_s) / (N_C + Σ_s n_s), ā_s
    the split's mean answer score (path score of a text item, exp(−(d/0.1)^1.3) of a coordinate
    item), p_C the unrounded WhereCountry accuracy; N_C is 0 when p_C is exactly 0
    (``wherecountry_count = 500 if wherecountry_accuracy != 0.0 else 0``). ``coordinates="acc@1km"``
    is the paper's Eq. 2, coordinate items counting Acc@1 km. ``country_accuracy`` picks p_C
    (every row: unparsed answers wrong, N_C always counted).
    """
    numerator = 0.0
    denominator = 0
    country = [i for i in items if i.task == "wherecountry"]
    if country:
        p_c = _country_fraction(country, country_accuracy)
        if p_c != 0.0 or country_accuracy != "accuracy_as_published":
            numerator += len(country) * p_c
            denominator += len(country)
    for source in SOURCES:
        text = [i.path_score for i in items if i.task == "text" and i.source == source]
        coords = [i.distance_km for i in items if i.task == "coordinates" and i.source == source]
        if coordinates == "answer_score":  # summed in item order, as the released loop sums
            scores = [
                i.path_score if i.task == "text" else coordinate_answer_score(i.distance_km)
                for i in items
                if i.source == source and i.task in ("text", "coordinates")
            ]
            if scores:
                numerator += len(scores) * (sum(scores) / len(scores))
                denominator += len(scores)
            continue
        if text:
            numerator += len(text) * _mean(text)
            denominator += len(text)
        if coords:
            numerator += len(coords) * metrics.accuracy(hits_open(coords, 1.0))
            denominator += len(coords)
    return numerator / denominator if denominator else math.nan


def wherebench_figures(items: Sequence[WhereItem]) -> dict[str, object]:
    """The whole WhereBench block of a summary (percentages)."""
    out: dict[str, object] = {}
    country = [i for i in items if i.task == "wherecountry"]
    street = [i for i in items if i.task in ("text", "coordinates")]
    if country:
        out["wherecountry"] = wherecountry_figures(country)
    if street:
        out["wherestreet"] = wherestreet_figures(street)
    out["overall"] = _pct(overall_score(items))
    out["overall_every_row"] = _pct(overall_score(items, "accuracy_every_row"))
    out["overall_eq2"] = _pct(overall_score(items, coordinates="acc@1km"))
    return out
