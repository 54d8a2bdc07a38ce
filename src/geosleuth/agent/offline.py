"""The offline clue pipeline: locate an image with no model and no network.

Order of evidence: EXIF GPS first (when present it wins and the output says so); otherwise
the text in the image (OCR) gives country clues (phone numbers, domains, currencies,
script, language, country-specific patterns), place names matched against the gazetteer,
and the area served by a phone number's area code. Candidates are scored by how many
independent clues agree; the best becomes the prediction with a confidence, an uncertainty
radius and the evidence used. With no usable clue the answer is "cannot locate"
(status ``no_evidence``), never a default location.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from PIL import Image

from geosleuth.agent.config import AgentConfig
from geosleuth.agent.images import ImageInputError
from geosleuth.bounds.imageio import open_work_copy
from geosleuth.bounds.imagemeta import strip_metadata
from geosleuth.core.geo import haversine_km
from geosleuth.core.records import (
    ParseStatus,
    Place,
    Prediction,
    ReversePlace,
    Task,
    ToolCallRecord,
    Trajectory,
    TrajectoryStatus,
    Turn,
)
from geosleuth.core.surrogates import clean_text
from geosleuth.core.text import normalize
from geosleuth.gazetteer.libpostal import AddressParts, parse_address, parser_name
from geosleuth.gazetteer.postcodes import (
    INSTALL_HINT,
    LOCALITY,
    PACKAGE,
    PostcodeRead,
    PostcodeRecord,
    code_key,
    package_version,
    written_in,
)

MODEL_NAME = "offline-clues"
OFFLINE_WORK_PIXELS = 8_000_000
"""The pipeline reads a copy of at most this many pixels (3266x2448 at 4:3): RapidOCR reads it at
2000 px on the long side, Tesseract's re-read of unsure lines at full size; 32 MB in memory
(Pillow keeps 4 bytes a pixel) whatever the photo's size (a 62 MP PNG decoded whole is 248 MB)."""
AGREE_KM = 30.0  # candidates closer than this support each other
CONFLICT_KM = 50.0  # a phone area this far from a place the text names disagrees with it
MIN_NAME_CHARS = 4
CITY_RADIUS_KM = 10.0
MAX_CITY_RADIUS_KM = 40.0
MIN_COUNTRY_VOTE = 0.5  # a country-only answer needs more than, say, "the text is English"
BIG_PLACE = 100_000  # a name match with no country clue counts only for places this large
REGION_RADIUS_KM = 150.0  # a phone area code that names a whole state or province
POSTCODE_SCORE = 1.2
"""A postcode read beside its locality outranks a name (at most 1.0) or an area code (1.0) at
the same place: its point and circle are the finest the text gives."""
FROM_GAZETTEER = object()
"""`locate_offline`'s default ``postcodes``: the index built beside the gazetteer in use."""
NAMED_SOURCES = ("place_names", "postcode")  # the steps whose candidates are places the text names

# How far each kind of clue alone makes the answer right at its radius: independent clues
# combine as a noisy OR (1 - prod(1 - w)), so one more agreeing clue never lowers confidence.
# A name is weighted by its population (a big place named in the text is more telling) and
# halved when the text matched an alternate name unlike the place's own (see _unrelated_alias).
PHONE_AREA_WEIGHT = 0.55  # an area code serving one town or city
PHONE_REGION_WEIGHT = 0.35  # an area code serving a state or province
NAME_WEIGHT = 0.45
POSTCODE_WEIGHT = 0.45  # a postcode read beside its locality: as telling as the name itself
COUNTRY_CLUE_WEIGHT = 0.15  # each country clue (domain, phone prefix, pattern) agreeing with the answer
MAX_CONFIDENCE = 0.95  # what text clues alone can claim; EXIF GPS is 0.99
CALIBRATION = (1.68, 0.75)  # (a, b) of `calibrated`: bench/calibration_bench.py --fit on the sign set


class Gazetteer(Protocol):
    def search(self, query: str, country: str | None = None, limit: int = 10) -> list[Place]: ...

    def reverse(self, lat: float, lon: float) -> ReversePlace: ...

    def match_names(self, text: str, min_population: int = 0) -> list[Any]: ...


@runtime_checkable
class Postcodes(Protocol):
    def read(self, text: str, countries: Iterable[str]) -> list[PostcodeRead]: ...


@dataclass
class Candidate:
    """One possible location with the clues behind it."""

    lat: float
    lon: float
    label: str
    score: float
    country_code: str | None
    radius_km: float
    evidence: list[str] = field(default_factory=list)
    level: str = "city"  # "admin1" for a region's area code, "country" when only country clues placed it
    region: str | None = None  # admin-1 name: a region's area code supports the towns in it
    weights: dict[str, float] = field(default_factory=dict)  # evidence text -> how telling it is alone
    source: str = ""  # the step that found it: "phone_area", "place_names", "postcode", "country"
    national: bool = False  # a phone number read in national format (its country was a guess)
    postcode: str | None = None  # the postcode that placed it
    written: str | None = None  # the text a place name matched, as read ("Bruxelles" for Brussels)

    @property
    def city(self) -> str | None:
        """The town the candidate names; None for a region, a country, or a postcode whose
        locality is unnamed (a US ZIP code's centroid)."""
        if self.level != "city" or (self.postcode and self.label.startswith("postcode ")):
            return None
        return self.label.split(",")[0]

    @property
    def strength(self) -> float:
        """Noisy OR of the candidate's own (and supporters') place-level evidence."""
        return 1.0 - math.prod(1.0 - w for w in self.weights.values())


@dataclass
class Step:
    """One pipeline step, recorded as a tool call in the trajectory."""

    name: str
    arguments: dict[str, Any]
    text: str
    latency_s: float
    ok: bool = True
    error: str | None = None


@dataclass
class OfflineResult:
    prediction: Prediction | None
    steps: list[Step]
    candidates: list[Candidate]
    evidence_strength: float | None = None  # the confidence before calibration (see `calibrated`)
    conflicts: list[str] = field(default_factory=list)  # clues that disagree, and which one won
    text: str = ""  # what OCR read, line by line
    notes: list[str] = field(default_factory=list)  # what the pipeline could not do (postcodes unavailable)


def _timed(steps: list[Step], name: str, arguments: dict[str, Any], fn: Callable[[], Any]) -> Any:
    """Run one step; a failing step is recorded and the pipeline goes on."""
    start = time.perf_counter()
    try:
        out = fn()
    except Exception as exc:  # an optional engine (OCR) missing or failing must not end the run
        steps.append(
            Step(name, arguments, "", time.perf_counter() - start, False, f"{type(exc).__name__}: {exc}")
        )
        return None
    steps.append(Step(name, arguments, "", time.perf_counter() - start))
    return out


def _exif_prediction(lat: float, lon: float, gaz: Gazetteer | None) -> Prediction:
    pred = Prediction(
        lat=lat,
        lon=lon,
        confidence=0.99,
        radius_km=0.05,
        status=ParseStatus.OK,
        format="exif",
        coords_source="exif",
        evidence=[
            f"EXIF GPS position {lat:.6f}, {lon:.6f} recorded by the camera: used as is, other clues ignored"
        ],
    )
    return _with_address(pred, gaz)


def _with_address(pred: Prediction, gaz: Gazetteer | None, level: str = "city") -> Prediction:
    """Fill the address hierarchy from the gazetteer without moving the coordinates."""
    if gaz is None or pred.lat is None or pred.lon is None:
        return pred
    try:
        rev = gaz.reverse(pred.lat, pred.lon)
    except Exception:  # reverse geocoding is a nicety; the coordinates stand on their own
        return pred
    if level == "country":
        return pred.model_copy(
            update={"country_code": pred.country_code or rev.country_code, "country": rev.country}
        )
    if level == "admin1":  # a region's centre: its nearest town is no answer
        return pred.model_copy(
            update={"country_code": pred.country_code or rev.country_code, "country": rev.country,
                    "admin1": rev.admin1}
        )  # fmt: skip
    return pred.model_copy(
        update={
            "country_code": rev.country_code or pred.country_code,
            "country": rev.country or pred.country,
            "admin1": rev.admin1,
            "admin2": rev.admin2,
            "city": pred.city or rev.city,
        }
    )


def _population_weight(pop: int) -> float:
    return min(1.0, math.log10(max(pop, 0) + 10) / 7)


def _name_candidates(text: str, votes: dict[str, float], gaz: Gazetteer) -> list[Candidate]:
    """Place names found in the text, weighted by population and agreement with country clues.

    A name read inside a longer one that is also a candidate is not read alone: "Kingston upon
    Hull" is not Kingston, Jamaica, nor "Frankfurt (Oder)" Frankfurt am Main (see `_covered`)."""
    found: list[tuple[Any, str, Candidate]] = []
    for m in gaz.match_names(text):
        place: Place = m.place
        if len(m.text.strip()) < MIN_NAME_CHARS:
            continue
        country_support = votes.get(place.country_code or "", 0.0)
        if country_support <= 0 and place.population < BIG_PLACE:
            continue
        score = 0.4 * _population_weight(place.population) + 0.3 * min(country_support, 2.0)
        if place.kind == "country":
            continue
        said = f"place name {m.text!r} in the text matches {_place_label(place)} (pop. {place.population:,})"
        other_name = _unrelated_alias(m.text, place.name)
        if other_name:
            said += f", by an alternate name unlike {place.name!r}"
        weight = NAME_WEIGHT * _population_weight(place.population) * (0.5 if other_name else 1.0)
        cand = Candidate(
            place.lat,
            place.lon,
            _place_label(place),
            score,
            place.country_code,
            city_radius_km(place.population),
            [said],
            region=place.admin1,
            weights={said: weight},
            written=m.text,
        )
        found.append((m, place.id, cand))
    best: dict[str, Candidate] = {}
    for m, place_id, cand in found:
        if any(_covered(m, other) for other, _, _ in found):
            continue
        if place_id not in best or best[place_id].score < cand.score:
            best[place_id] = cand
    return list(best.values())


def _covered(inner: Any, outer: Any) -> bool:
    """A word match lies inside a longer word match of the same text ("kingston" in "kingston upon
    hull", both `NameMatch` token spans); character matches of unspaced scripts are left alone."""
    longer = outer.end - outer.start > inner.end - inner.start
    nested = outer.start <= inner.start and inner.end <= outer.end
    return longer and nested and f" {inner.text} " in f" {outer.text} "


def postcode_candidates(
    text: str, countries: list[str], named: list[Candidate], index: Postcodes
) -> tuple[list[Candidate], list[str]]:
    """Postcodes the text reads in the countries the evidence names, as candidates at their
    point with their circle (`geosleuth.gazetteer.postcodes`), and what was read but not used.

    A postcode counts only where it belongs to a place the sign names: its own line names its
    locality or state ("6004 Luzern", "NY 10118"), or it lies within the circle of a city named
    on its line ("1020 Bruxelles": Laeken, in Brussels) or, standing alone on its line (OCR read
    the town apart), of a city the text names elsewhere; a number that merely fits a country's
    format ("since 2001" on a Sydney sign) is not a postcode. A postcode coarser than the named
    city it lies in (its rows spread wider than the city's circle) is told and not used.
    """
    from geosleuth.core.countries import country_name

    cities = [c for c in named if c.source == "place_names" and c.level == "city"]
    out: list[Candidate] = []
    unused: list[str] = []
    reads = index.read(text, countries)
    parsed = parse_address(text) if reads else None
    for read in reads:
        alone = re.fullmatch(rf"\W*(?:[A-Z]{{1,3}}-)?{re.escape(read.written)}\W*", read.line) is not None
        beside = [c for c in cities if alone or _written_on(c, read.line) or _parsed_beside(parsed, read, c)]
        accepted = [r for r in read.records if r.named_in(read.line)] or [
            r for r in read.records if any(_inside(r.lat, r.lon, c) for c in beside)
        ]
        if not accepted:
            where = ", ".join(dict.fromkeys(r.place or r.locality or r.state or "?" for r in read.records))
            unused.append(
                f"postcode {read.written!r} ({read.country_code}: {where}) is not written beside a place "
                "the sign names: not used"
            )
            continue
        lat, lon, radius = _postcode_circle(accepted)
        near = next((c for c in cities if _inside(lat, lon, c)), None)
        if near is not None and near.radius_km < radius:
            unused.append(
                f"postcode {read.written!r} → ±{radius:.0f} km, coarser than {near.label} "
                f"(±{near.radius_km:.0f} km)"
            )
            continue
        first = accepted[0]
        name = first.place or (
            first.locality.title() if first.locality and first.locality.isupper() else first.locality
        )
        name = name or (near.label.split(",")[0] if near else None)
        country = country_name(read.country_code)
        label = ", ".join(
            x for x in (name or f"postcode {read.code}", first.admin1 or first.state, country) if x
        )
        how = (
            f"locality centroid: GeoNames {first.place}" if first.source == LOCALITY else "postcode centroid"
        )
        said = f"postcode {read.written} → {name or read.code} (source: {PACKAGE}, {how}; ±{radius:.1f} km)"
        out.append(
            Candidate(
                lat, lon, label, POSTCODE_SCORE, read.country_code, radius, [said],
                region=first.admin1 or (near.region if near else None), weights={said: POSTCODE_WEIGHT},
                postcode=read.code,
            )
        )  # fmt: skip
    return out, unused


def _parsed_beside(parsed: AddressParts | None, read: PostcodeRead, city: Candidate) -> bool:
    """libpostal labelled this code the sign's postcode and the city's written name its town
    ("Hertensteinstrasse 12 · 6004" above "Luzern"), where the lines alone do not pair them."""
    if parsed is None or not parsed.postcode or not parsed.city:
        return False
    return code_key(parsed.postcode) == code_key(read.written) and written_in(
        normalize(city.written or ""), parsed.city
    )


def _written_on(city: Candidate, line: str) -> bool:
    """The text that named the city stands on this line."""
    return written_in(normalize(city.written or ""), line)


def _inside(lat: float, lon: float, city: Candidate) -> bool:
    """A point within a named city's circle (at least `AGREE_KM`: small towns' circles)."""
    return float(haversine_km(lat, lon, city.lat, city.lon)) <= max(city.radius_km, AGREE_KM)


def _postcode_circle(records: list[PostcodeRecord]) -> tuple[float, float, float]:
    """The mean point of a postcode's rows and the circle that holds each row's own circle (a
    centroid's radius, or the matched place's circle as a named city gets)."""
    lat = sum(r.lat for r in records) / len(records)
    lon = sum(r.lon for r in records) / len(records)
    radius = max(
        float(haversine_km(lat, lon, r.lat, r.lon))
        + (r.radius_km if r.radius_km is not None else city_radius_km(r.population or 0))
        for r in records
    )
    return lat, lon, round(radius, 2)


def _unrelated_alias(text: str, name: str) -> bool:
    """The text matched an alternate name that is not a spelling of the place's own (Somers,
    Wisconsin by "Pike"), as opposed to an exonym or local form (Lisboa, Köln, 大阪)."""
    from difflib import SequenceMatcher

    a, b = normalize(text), normalize(name)
    if a == b or not (a.isascii() and b.isascii()):
        return False
    return SequenceMatcher(None, a, b).ratio() < 0.5


def phone_area_place(area: str, cc: str, gaz: Gazetteer) -> Place | None:
    """The place an area code's description names ("Frankfurt (Oder)", "California"), in the
    number's country: the search's own first, which ranks a namesake town over its canton ("St.
    Gallen") but a state over a small town elsewhere that shares its name (not California, MD)."""
    return next((p for p in gaz.search(area, country=cc, limit=5) if p.kind != "country"), None)


def _phone_candidates(text: str, regions: list[str], gaz: Gazetteer) -> list[Candidate]:
    """Area codes name the town or region they serve (phonenumbers' offline geocoding data)."""
    import phonenumbers
    from phonenumbers import geocoder as phone_geocoder

    from geosleuth.core.countries import resolve_country

    out = []
    for region in [None, *regions]:
        for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID):
            cc = phonenumbers.region_code_for_number(match.number)
            area = phone_geocoder.description_for_number(match.number, "en", region=None)
            if not area or not cc or resolve_country(area) == cc:  # nationwide numbers name only the country
                continue
            p = phone_area_place(area, cc, gaz)
            if p is None:
                continue
            said = f"phone number {match.raw_string!r} has the area code of {area} ({cc})"
            national = region is not None and not match.raw_string.lstrip().startswith(("+", "00"))
            region = p.kind == "admin1"  # the code serves a whole state: place it there, loosely
            out.append(
                Candidate(
                    p.lat,
                    p.lon,
                    _place_label(p),
                    0.6 if region else 1.0,
                    p.country_code,
                    REGION_RADIUS_KM if region else 25.0,
                    [said],
                    level="admin1" if region else "city",
                    region=p.admin1 or p.name,
                    weights={said: PHONE_REGION_WEIGHT if region else PHONE_AREA_WEIGHT},
                    national=national,
                )
            )
        if out:
            break
    return out


def _country_candidate(votes: dict[str, float], gaz: Gazetteer) -> Candidate | None:
    """Only country-level clues: the country's main place, with a country-sized radius."""
    from geosleuth.core.countries import country_info, country_name

    cc, weight = next(iter(votes.items()))
    if weight < MIN_COUNTRY_VOTE:
        return None
    places = [p for p in gaz.search(country_name(cc), country=cc, limit=5) if p.kind == "country"]
    if not places:
        return None
    info = country_info(cc)
    area = getattr(info, "area_km2", None) or 100_000.0
    radius = max(50.0, math.sqrt(float(area) / math.pi))
    label = country_name(cc)
    evidence = [f"only country-level clues: {label}; the point is the country's reference location"]
    return Candidate(
        places[0].lat, places[0].lon, label, 0.3 * min(weight, 2.0), cc, radius, evidence, "country"
    )


def _place_label(p: Place) -> str:
    return ", ".join(x for x in (p.name, p.admin1, p.country or p.country_code) if x)


def _combine(candidates: list[Candidate]) -> list[Candidate]:
    """Candidates near each other support each other: add a share of their neighbours' scores."""
    if len(candidates) < 2:
        return candidates
    lat = [c.lat for c in candidates]
    lon = [c.lon for c in candidates]
    dist = haversine_km([[v] for v in lat], [[v] for v in lon], [lat], [lon])
    out = []
    for i, c in enumerate(candidates):
        support = [
            candidates[j]
            for j in range(len(candidates))
            if j != i and (dist[i][j] <= AGREE_KM or _same_region(c, candidates[j]))
        ]
        evidence = list(c.evidence)
        weights = dict(c.weights)
        for s in support:
            evidence += [e for e in s.evidence if e not in evidence]
            weights.update(s.weights)
        if c.level == "admin1":  # a region's centre: the towns it holds support them, not it
            out.append(replace(c, evidence=evidence, weights=weights))
            continue
        radius = c.radius_km if not support else min(c.radius_km, min(s.radius_km for s in support))
        score = c.score + 0.5 * sum(s.score for s in support)
        out.append(replace(c, score=score, radius_km=radius, evidence=evidence, weights=weights))
    return sorted(out, key=lambda c: -c.score)


def names_win(ranked: list[Candidate]) -> tuple[list[Candidate], list[str]]:
    """The place the text names outranks a phone area that points elsewhere, and each such
    disagreement is told.

    A phone number read in national format fits area codes of several countries (Swiss "022" is
    also Austrian), and a phone number's area code is where the line was registered, not where the
    sign stands; a city name on the sign says where the sign is. So when the best candidate is a
    phone area more than `CONFLICT_KM` from the best place the text names, the name wins if the
    number's country was only a guess (national format) or is the named place's own country. An
    international number from another country keeps its rank; the conflict is told either way.

    A postcode read beside its locality names its place most precisely: it is the named place
    when there is one, and it also outranks a town that a name alone matched elsewhere ("15230
    Frankfurt" is Frankfurt (Oder), not the larger Frankfurt am Main), which is told too.

    Without a postcode, a phone area in the named town's country whose town carries the written
    name ("Frankfurt": the area code 0335 is Frankfurt (Oder)) agrees with the text and tells
    which town of that name it is; that is told as well.
    """
    postcode = next((c for c in ranked if c.source == "postcode"), None)
    named = postcode or next((c for c in ranked if c.source in NAMED_SOURCES and c.level == "city"), None)
    if named is None:
        return ranked, []
    conflicts = []
    best = ranked[0]
    namesake = None if postcode else next((c for c in ranked if _namesake_area(named, c)), None)
    if namesake is not None:
        clue = namesake.evidence[0] if namesake.evidence else "a phone area code"
        conflicts.append(
            f"{clue}: {namesake.label} is {_km_between(named, namesake):.0f} km from {named.label}, "
            f"which the name {named.written!r} also fits; the phone area tells which town of that name"
        )
        if best is named or best is namesake:
            best, named = namesake, namesake
    for c in ranked:
        if c.source != "phone_area" or _same_region(named, c) or c is namesake:
            continue
        km = float(haversine_km(named.lat, named.lon, c.lat, c.lon))
        if km <= CONFLICT_KM:
            continue
        wins = c.national or c.country_code == named.country_code
        clue = c.evidence[0] if c.evidence else "a phone area code"
        conflicts.append(
            f"{clue}: {c.label} is {km:.0f} km from {named.label}, which the text names; "
            + ("the name wins" if wins else "the international number keeps its rank")
        )
        if c is best and wins:
            best = named
    if postcode is not None and best is not postcode and best.source == "place_names":
        km = float(haversine_km(postcode.lat, postcode.lon, best.lat, best.lon))
        if km > CONFLICT_KM:
            conflicts.append(
                f"{best.evidence[0] if best.evidence else best.label}: {best.label} is {km:.0f} km from "
                f"{postcode.label}, where postcode {postcode.postcode} written beside the name is; "
                "the postcode wins"
            )
            best = postcode
    if best is named and ranked[0] is not named:
        ranked = [named, *(c for c in ranked if c is not named)]
    return ranked, conflicts


def _namesake_area(named: Candidate, area: Candidate) -> bool:
    """A phone area's town, elsewhere in the named town's country, whose name starts with the
    words the text wrote ("Frankfurt (Oder)" for "Frankfurt"): another town of the written name."""
    if area.source != "phone_area" or area.level != "city" or named.source not in NAMED_SOURCES:
        return False
    written, town = normalize(named.written or "").split(), normalize(area.city or "").split()
    return (
        bool(written)
        and area.country_code == named.country_code
        and town[: len(written)] == written
        and _km_between(named, area) > CONFLICT_KM
    )


def _km_between(a: Candidate, b: Candidate) -> float:
    return float(haversine_km(a.lat, a.lon, b.lat, b.lon))


def _same_region(a: Candidate, b: Candidate) -> bool:
    """A region's area code and a town inside that region support each other."""
    return (
        "admin1" in (a.level, b.level)
        and a.country_code == b.country_code
        and a.region is not None
        and normalize(a.region) == normalize(b.region or "")
    )


def evidence_strength(best: Candidate, rivals: list[Candidate], country_clues: int) -> float:
    """How strongly the evidence points at the answer, before calibration.

    The best candidate's place-level clues and the country clues agreeing with it combine as a
    noisy OR; each rival (a candidate elsewhere that none of the best's clues support) takes
    away half its own place-level strength. More agreeing evidence never lowers the figure.
    """
    doubt = (1.0 - best.strength) * (1.0 - COUNTRY_CLUE_WEIGHT) ** country_clues
    strength = 1.0 - doubt
    for rival in rivals:
        strength *= 1.0 - 0.5 * rival.strength
    return strength


def calibrated(strength: float) -> float:
    """The probability that the answer is right at its radius, for an evidence strength.

    A logistic map of the strength's log-odds, ``σ(a·logit(s) + b)``, fitted by maximum
    likelihood on the bundled sign set (``bench/calibration_bench.py --fit``; its ECE is in
    docs/evaluation.md); monotone, so more evidence still never lowers the confidence."""
    a, b = CALIBRATION
    s = min(max(strength, 1e-6), 1.0 - 1e-6)
    return 1.0 / (1.0 + math.exp(-(a * math.log(s / (1.0 - s)) + b)))


def evidence_confidence(best: Candidate, rivals: list[Candidate], country_clues: int) -> float:
    """The answer's confidence: its calibrated evidence strength, at most `MAX_CONFIDENCE`."""
    return round(min(MAX_CONFIDENCE, calibrated(evidence_strength(best, rivals, country_clues))), 3)


def city_radius_km(population: int) -> float:
    """How far from a city's point its photos are taken: 10 km, more for a big city (Bangkok's
    answer 12 km off is right), at most `MAX_CITY_RADIUS_KM`."""
    return min(MAX_CITY_RADIUS_KM, max(CITY_RADIUS_KM, CITY_RADIUS_KM * math.sqrt(max(population, 0) / 1e6)))


def locate_offline(
    image: Image.Image,
    image_path: str | None,
    *,
    use_ocr: bool = True,
    gazetteer: Gazetteer | None = None,
    ocr: Callable[[Image.Image], Any] | None = None,
    on_step: Callable[[list[Step]], None] | None = None,
    use_metadata: bool = True,
    postcodes: Postcodes | None | object = FROM_GAZETTEER,
) -> OfflineResult:
    """The whole pipeline on one decoded image (blocking: OCR and gazetteer lookups).

    ``on_step(steps)`` sees the steps so far each time one finishes (the web app streams them);
    an exception it raises (a cancelled job) ends the pipeline there. Without ``use_metadata``
    (benchmark runs) no EXIF step runs: the clues come from pixels only. ``postcodes``: the
    postcode index (by default the one beside the gazetteer, when the ``postcodes`` extra is
    installed); None runs without one, and the answer says postcode narrowing was unavailable."""
    from geosleuth.tools.clues import country_votes, extract_clues
    from geosleuth.tools.exif import read_exif

    steps: list[Step] = []
    notes: list[str] = []
    loaded: list[Gazetteer | None] = [gazetteer] if gazetteer is not None else []

    def done() -> None:
        if on_step is not None:
            on_step(list(steps))

    def gaz() -> Gazetteer | None:
        """Load the gazetteer only once a clue needs it (a blank image never pays for it)."""
        if not loaded:
            loaded.append(_timed(steps, "gazetteer", {}, _default_gazetteer))
            if loaded[0] is not None:
                steps[-1].text = f"offline gazetteer of {len(loaded[0]):,} places loaded"
            done()
        return loaded[0]

    exif = _timed(steps, "exif_gps", {}, lambda: read_exif(image, image_path)) if use_metadata else None
    if exif is not None:
        steps[0].text = exif.describe()
    if use_metadata:
        done()
    if exif is not None and exif.lat is not None and exif.lon is not None:
        return OfflineResult(_exif_prediction(exif.lat, exif.lon, gaz()), steps, [])
    if not use_ocr:
        return OfflineResult(None, steps, [])
    if ocr is None:
        from geosleuth.tools.ocr import run_ocr

        ocr = run_ocr
    report = _timed(steps, "ocr", {}, lambda: ocr(image))
    text = report.text if report is not None else ""
    if report is not None:
        steps[-1].text = report.describe()
    done()
    if not text.strip():
        return OfflineResult(None, steps, [])
    clues = extract_clues(text)
    votes = country_votes(clues)
    clues = extract_clues(text, regions=list(votes)[:3])  # national phone formats of likely countries
    votes = country_votes(clues)
    steps.append(
        Step(
            "clues",
            {},
            "\n".join(f"{c.kind} {c.text!r} → {'/'.join(c.countries)} ({c.detail})" for c in clues),
            0.0,
        )
    )
    done()
    candidates: list[Candidate] = []
    g = gaz()
    if g is not None:
        regions = list(votes)[:3]
        for name, finder in (
            ("phone_area", lambda: _phone_candidates(text, regions, g)),
            ("place_names", lambda: _name_candidates(text, votes, g)),
        ):
            found = [replace(c, source=name) for c in _timed(steps, name, {}, finder) or []]
            steps[-1].text = "\n".join(
                f"{c.label} ({c.lat:.4f}, {c.lon:.4f}): {'; '.join(c.evidence)}" for c in found
            )
            candidates += found
            done()
        candidates += _postcode_step(text, votes, candidates, g, postcodes, steps, notes)
        done()
        if not candidates and votes:
            top = {"country": next(iter(votes))}
            country = _timed(steps, "country", top, lambda: _country_candidate(votes, g))
            candidates += [country] if country else []
            done()
    ranked, conflicts = names_win(_combine(candidates))
    if not ranked:
        return OfflineResult(None, steps, [])
    best = ranked[0]
    verdicts = [_verdict(c, best) for c in ranked]
    steps.append(
        Step(
            "candidates",
            {},
            "\n".join(
                f"{v}: {c.label} ({c.lat:.4f}, {c.lon:.4f}), score {c.score:.2f}"
                for c, v in zip(ranked[:10], verdicts, strict=False)
            ),
            0.0,
        )
    )
    done()
    clue_evidence = [
        f"{c.kind} {c.text!r} points to {'/'.join(c.countries[:4])}"
        for c in clues
        if best.country_code in c.countries
    ]
    rivals = [c for c, v in zip(ranked, verdicts, strict=True) if v.startswith("rejected")]
    strength = evidence_strength(best, rivals, len(clue_evidence))
    confidence = round(min(MAX_CONFIDENCE, calibrated(strength)), 3)
    pred = Prediction(
        lat=best.lat,
        lon=best.lon,
        city=best.city,
        country_code=best.country_code,
        confidence=confidence,
        radius_km=best.radius_km,
        status=ParseStatus.OK,
        format="offline_clues",
        coords_source="geocoded",
        evidence=best.evidence + clue_evidence + notes,
    )
    return OfflineResult(_with_address(pred, g, best.level), steps, ranked, strength, conflicts, text, notes)


def _postcode_step(
    text: str,
    votes: dict[str, float],
    candidates: list[Candidate],
    gaz: Gazetteer,
    postcodes: Postcodes | None | object,
    steps: list[Step],
    notes: list[str],
) -> list[Candidate]:
    """The postcodes step: candidates from the postcodes read in the countries the clues and the
    named places point to; without an index, the step and ``notes`` say narrowing was unavailable."""
    index = _postcode_index(gaz) if postcodes is FROM_GAZETTEER else postcodes
    if not isinstance(index, Postcodes):
        why = (
            f"{PACKAGE} is not installed; {INSTALL_HINT}"
            if package_version() is None or postcodes is None
            else "this gazetteer has no postcode index"
        )
        notes.append(f"postcode narrowing unavailable: {why}")
        steps.append(Step("postcodes", {}, notes[-1], 0.0))
        return []
    named = [c.country_code for c in candidates if c.source == "place_names" and c.country_code]
    countries = list(dict.fromkeys([*list(votes)[:3], *named]))
    found = _timed(
        steps,
        "postcodes",
        {"countries": countries, "parser": parser_name()},
        lambda: postcode_candidates(text, countries, candidates, index),
    )
    if found is None:
        return []
    used, unused = found
    steps[-1].text = "\n".join(
        [f"{c.label} ({c.lat:.4f}, {c.lon:.4f}) ±{c.radius_km:g} km: {'; '.join(c.evidence)}" for c in used]
        + unused
    )
    return [replace(c, source="postcode") for c in used]


def _postcode_index(gaz: Gazetteer) -> Postcodes | None:
    """The postcode index beside the gazetteer's files, built on first use; None without the
    ``postcodes`` extra or for a gazetteer with no files of its own."""
    data_dir = getattr(gaz, "data_dir", None)
    if data_dir is None or package_version() is None:
        return None
    from geosleuth.gazetteer.postcodes import get_postcode_index

    return get_postcode_index(data_dir)


def _verdict(candidate: Candidate, best: Candidate) -> str:
    """What became of a candidate: the answer, one folded into it, or rejected (and why)."""
    if candidate is best:
        return "chosen"
    if set(candidate.evidence) <= set(best.evidence):
        return "supports the answer"
    return f"rejected (weaker than {best.label.split(',')[0]})"


def _default_gazetteer() -> Gazetteer:
    from geosleuth.gazetteer import get_gazetteer

    return get_gazetteer()


def candidate_records(candidates: list[Candidate]) -> list[dict[str, Any]]:
    """The candidates as the trajectory keeps them, each with its verdict."""
    if not candidates:
        return []
    best = candidates[0]
    return [
        {
            "label": c.label,
            "lat": c.lat,
            "lon": c.lon,
            "score": round(c.score, 3),
            "country_code": c.country_code,
            "radius_km": c.radius_km,
            "level": c.level,
            "verdict": _verdict(c, best),
            "evidence": c.evidence,
        }
        for c in candidates
    ]


def _steps_turn(steps: list[Step], text: str, latency_s: float) -> Turn:
    """The pipeline's one turn: each step a tool call."""
    return Turn(
        index=0,
        text=text,
        latency_s=latency_s,
        tool_calls=[
            ToolCallRecord(
                id=f"step_{i}",
                name=s.name,
                arguments=s.arguments,
                ok=s.ok,
                error=s.error,
                result_text=s.text,
                latency_s=s.latency_s,
            )
            for i, s in enumerate(steps)
        ],
    )


def _summary(result: OfflineResult) -> str:
    pred = result.prediction
    if pred is None:
        return (
            "Cannot locate this image: no GPS metadata and no usable clue "
            "(readable place name, phone number, domain, …)."
        )
    where = ", ".join(x for x in (pred.city, pred.admin1, pred.country or pred.country_code) if x)
    return (
        f"Located at {pred.lat:.5f}, {pred.lon:.5f} ({where}); "
        f"confidence {pred.confidence}, ±{pred.radius_km:g} km."
    )


async def run_offline(
    task: Task,
    config: AgentConfig,
    *,
    artifacts_dir: Path | None = None,
    on_turn: Callable[[int, Turn], None] | None = None,
) -> Trajectory:
    """The offline pipeline as a `Trajectory` (one turn; each step recorded as a tool call).

    ``on_turn(0, turn)`` sees the turn grow by one tool call as each step finishes; it is called
    from the worker thread the pipeline runs in."""
    started = time.time()
    traj = Trajectory(sample_id=task.id, model=MODEL_NAME, prompt_style="offline", started_at=started)
    try:
        if not task.image:
            raise ImageInputError(f"task {task.id} has no image")
        image = await asyncio.to_thread(
            open_work_copy, task.image, OFFLINE_WORK_PIXELS, config.max_image_pixels
        )
        if config.pixels_only:
            image = strip_metadata(image)
    except ImageInputError as exc:
        traj.status, traj.error, traj.finished_at = TrajectoryStatus.INPUT_ERROR, str(exc), time.time()
        return traj
    start = time.perf_counter()

    def on_step(steps: list[Step]) -> None:
        if on_turn is not None:
            on_turn(0, _steps_turn(steps, "", time.perf_counter() - start))

    result = await asyncio.to_thread(
        locate_offline,
        image,
        None if config.pixels_only else task.image,
        use_ocr=config.offline_use_ocr,
        on_step=on_step,
        use_metadata=not config.pixels_only,
    )
    street = await _with_street(result, config.tool_settings, on_step)
    summary = _summary(result)
    traj.turns = [_steps_turn(result.steps, summary, time.perf_counter() - start)]
    traj.messages = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": clean_text(str(Path(task.image).resolve()))[0]}}
            ],
        },
        {"role": "assistant", "content": summary},
    ]
    traj.prediction = result.prediction
    traj.status = TrajectoryStatus.OK if result.prediction is not None else TrajectoryStatus.NO_EVIDENCE
    traj.error = None if result.prediction is not None else "cannot locate: no usable clue"
    traj.metadata = {"candidates": candidate_records(result.candidates[:10]), "conflicts": result.conflicts}
    if result.notes:
        traj.metadata["notes"] = result.notes
    if street is not None:
        traj.metadata["street_geocode"] = street
    traj.finished_at = time.time()
    return traj


async def _with_street(
    result: OfflineResult, tool_settings: Any, on_step: Callable[[list[Step]], None]
) -> dict[str, Any] | None:
    """With a geocoding provider configured, the sign's street address refines the answer
    (`geosleuth.agent.street`); the step, any disagreement and the source are recorded."""
    if result.prediction is None or not result.text:
        return None
    from geosleuth.agent.street import street_level

    fix = await street_level(result.prediction, result.text, tool_settings)
    if fix is None:
        return None
    result.steps.append(
        Step(
            "street_geocode",
            {"address": fix.query, "parser": fix.parser},
            fix.text,
            fix.latency_s,
            fix.ok,
            fix.error,
        )
    )
    on_step(result.steps)
    if fix.conflict:
        result.conflicts.append(fix.conflict)
    if fix.prediction is not None:
        result.prediction = fix.prediction
    return {
        "address": fix.query,
        "parser": fix.parser,
        "provider": fix.provider,
        "used": fix.prediction is not None,
    }
