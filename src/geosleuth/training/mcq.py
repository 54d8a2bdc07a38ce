"""Four-way country questions (WhereCountry style) with geographically hard distractors.

Distractors come first from the answer's land neighbours and its UN geoscheme sub-region
(the countries a model most easily confuses), then from the same UN region, then the same
continent, then anywhere. Each question is shuffled by ``(seed, sample id)`` so that the
output does not depend on file order and is reproducible.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from geosleuth.core.countries import (
    CountryInfo,
    all_country_codes,
    country_info,
    country_name,
    resolve_country,
)
from geosleuth.core.records import Sample

N_CHOICES = 4


@dataclass(frozen=True)
class Tier:
    """One ring of candidate distractors and its name in the question's metadata."""

    name: str
    codes: tuple[str, ...]


@lru_cache(maxsize=1)
def _all_infos() -> tuple[CountryInfo, ...]:
    infos = (country_info(c) for c in all_country_codes())
    return tuple(i for i in infos if i is not None and i.population > 0)


def distractor_tiers(code: str) -> list[Tier]:
    """Candidate rings from closest to loosest; the answer is never a candidate."""
    info = country_info(code)
    if info is None:
        raise ValueError(f"unknown country code {code!r}")
    infos = _all_infos()
    known = {i.code for i in infos}

    def ring(name: str, pred: object) -> Tier:
        codes = sorted(i.code for i in infos if i.code != code and pred(i))  # type: ignore[operator]
        return Tier(name, tuple(codes))

    neighbours = Tier("neighbours", tuple(sorted(n for n in info.neighbours if n in known and n != code)))
    return [
        neighbours,
        ring("subregion", lambda i: info.subregion is not None and i.subregion == info.subregion),
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
