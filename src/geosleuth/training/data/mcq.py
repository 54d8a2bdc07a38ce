"""Four-way country questions (WhereCountry style) with geographically hard distractors.

Distractors are sovereign states only (UN member and observer states; never a territory such
as Jersey or Åland). They come first from the answer's land neighbours and its UN geoscheme
sub-region (the countries a model most easily confuses), else from its UN regional group
(culturally related countries), then the same UN geoscheme region, continent, and anywhere.
Each question is shuffled by ``(seed, sample id)`` so that the output does not depend on file
order and is reproducible.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from geosleuth.core.countries import (
    CountryInfo,
    country_info,
    country_name,
    resolve_country,
)
from geosleuth.core.records import Sample

N_CHOICES = 4

UN_REGIONAL_GROUPS: dict[str, tuple[str, ...]] = {
    name: tuple(codes.split())
    for name, codes in {
        "African": "DZ AO BJ BW BF BI CV CM CF TD KM CG CD CI DJ EG GQ ER SZ ET GA GM GH GN GW KE LS "
        "LR LY MG MW ML MR MU MA MZ NA NE NG RW ST SN SC SL SO ZA SS SD TZ TG TN UG ZM ZW",
        "Asia-Pacific": "AF BH BD BT BN KH CN CY FJ IN ID IR IQ JP JO KZ KI KW KG LA LB MY MV MH FM MN "
        "MM NR NP KP OM PK PW PG PH QA KR WS SA SG SB LK SY TJ TH TL TO TM TV AE UZ VU VN YE PS",
        "Eastern European": "AL AM AZ BY BA BG HR CZ EE GE HU LV LT MD ME MK PL RO RU RS SK SI UA",
        "Latin American and Caribbean": "AG AR BS BB BZ BO BR CL CO CR CU DM DO EC SV GD GT GY HT HN "
        "JM MX NI PA PY PE KN LC VC SR TT UY VE",
        "Western European and Others": "AD AT AU BE CA DK FI FR DE GR IS IE IL IT LI LU MT MC NL NZ NO "
        "PT SM ES SE CH TR GB US",
    }.items()
}
"""The UN regional groups (United States with WEOG, Palestine with Asia-Pacific; the Holy See is in none)."""

_SOVEREIGN_TYPES = ("Sovereign country", "Country", "Sovereignty")
_SOVEREIGN_FIXES = {"IL": True, "PS": True, "TW": False}
"""Natural Earth marks Israel "Disputed" and Palestine "Indeterminate" (UN member / observer state);
Taiwan is neither a UN member nor an observer."""


@dataclass(frozen=True)
class Tier:
    """One ring of candidate distractors and its name in the question's metadata."""

    name: str
    codes: tuple[str, ...]


@lru_cache(maxsize=1)
def sovereign_states() -> frozenset[str]:
    """ISO codes of the 195 UN member and observer states: the only codes offered as distractors.

    From Natural Earth: the home part of a sovereign country (dependencies, crown
    dependencies and autonomous regions such as Jersey, Åland, Greenland or Hong Kong are
    not), with the corrections in ``_SOVEREIGN_FIXES``.
    """
    from geosleuth.core.countries import ne_record_code
    from geosleuth.data import natural_earth_country_records

    codes = {
        code
        for rec in natural_earth_country_records()
        if (code := ne_record_code(rec)) and rec.get("HOMEPART") == 1 and rec.get("TYPE") in _SOVEREIGN_TYPES
    }
    codes |= {c for c, keep in _SOVEREIGN_FIXES.items() if keep}
    return frozenset(codes - {c for c, keep in _SOVEREIGN_FIXES.items() if not keep})


def regional_group(code: str) -> str | None:
    """The UN regional group of a state, or None (the Holy See, territories)."""
    return next((name for name, codes in UN_REGIONAL_GROUPS.items() if code in codes), None)


@lru_cache(maxsize=1)
def _all_infos() -> tuple[CountryInfo, ...]:
    sovereign = sovereign_states()
    infos = (country_info(c) for c in sorted(sovereign))
    return tuple(i for i in infos if i is not None)


def distractor_tiers(code: str) -> list[Tier]:
    """Candidate rings of sovereign states from closest to loosest; the answer is never a candidate."""
    info = country_info(code)
    if info is None:
        raise ValueError(f"unknown country code {code!r}")
    infos = _all_infos()
    known = {i.code for i in infos}

    def ring(name: str, pred: object) -> Tier:
        codes = sorted(i.code for i in infos if i.code != code and pred(i))  # type: ignore[operator]
        return Tier(name, tuple(codes))

    neighbours = Tier("neighbours", tuple(sorted(n for n in info.neighbours if n in known and n != code)))
    group = regional_group(code)
    return [
        neighbours,
        ring("subregion", lambda i: info.subregion is not None and i.subregion == info.subregion),
        ring("regional_group", lambda i: group is not None and regional_group(i.code) == group),
        ring("region", lambda i: info.region_un is not None and i.region_un == info.region_un),
        ring("continent", lambda i: info.continent is not None and i.continent == info.continent),
        ring("world", lambda i: True),
    ]


def pick_distractors(code: str, rng: random.Random, n: int = N_CHOICES - 1) -> tuple[list[str], str]:
    """``n`` distinct distractor codes and the loosest ring that was needed."""
    chosen: list[str] = []
    source = "neighbours"
    for tier in distractor_tiers(code):
        pool = [c for c in tier.codes if c not in chosen]
        rng.shuffle(pool)
        take = pool[: n - len(chosen)]
        if take:
            source = tier.name
        chosen.extend(take)
        if len(chosen) == n:
            return chosen, source
    raise ValueError(f"not enough countries to build distractors for {code}")


def sample_country(sample: Sample) -> str | None:
    """The sample's country as an ISO code, from its labels."""
    label = sample.labels.get("country") or sample.metadata.get("country_code")
    return resolve_country(str(label)) if label else None


def build_question(sample: Sample, code: str, seed: int) -> Sample:
    """One 4-way question; choices are English country names, the answer a letter."""
    rng = random.Random(f"{seed}:{sample.id}")
    distractors, source = pick_distractors(code, rng)
    codes = [code, *distractors]
    rng.shuffle(codes)
    letter = string.ascii_uppercase[codes.index(code)]
    return Sample(
        id=sample.id,
        image=sample.image,
        lat=sample.lat,
        lon=sample.lon,
        labels={"country": country_name(code)},
        answer_type="choice",
        choices=[country_name(c) for c in codes],
        answer=letter,
        split=sample.split,
        data_source=sample.data_source,
        metadata={"choice_codes": codes, "answer_code": code, "distractor_source": source},
    )


def build_mcq(samples: Iterable[Sample], seed: int = 0) -> tuple[list[Sample], list[dict[str, str]]]:
    """Questions for every sample whose country resolves; the others are reported, not dropped silently."""
    questions: list[Sample] = []
    failed: list[dict[str, str]] = []
    for sample in samples:
        code = sample_country(sample)
        if code is None:
            failed.append({"sample_id": sample.id, "reason": "country label missing or unresolvable"})
            continue
        try:
            questions.append(build_question(sample, code, seed))
        except ValueError as exc:
            failed.append({"sample_id": sample.id, "reason": str(exc)})
    return questions, failed
