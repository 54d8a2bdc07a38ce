"""WhereCountry-style distractors are sovereign states: neighbours by UN geoscheme, else UN regional group."""

from __future__ import annotations

import random

import pytest

from geosleuth.core.records import Sample
from geosleuth.training.data.mcq import (
    UN_REGIONAL_GROUPS,
    build_mcq,
    distractor_tiers,
    pick_distractors,
    regional_group,
    sovereign_states,
)

TERRITORIES = {"JE", "GG", "IM", "AX", "FO", "GL", "SJ", "HK", "MO", "PR", "GU", "NC", "GI", "BM", "AW"}
NORTHERN_EUROPE = {"DK", "EE", "FI", "IE", "LV", "LT", "NO", "SE", "GB"}  # UN geoscheme, sovereign only


def test_sovereign_states_are_the_un_members_and_observers() -> None:
    states = sovereign_states()
    assert len(states) == 195  # 193 members + the Holy See and Palestine
    assert {"IL", "PS", "VA", "FR", "GB", "DK", "NL", "SS"} <= states
    assert not states & (TERRITORIES | {"TW", "XK"})
    grouped = {c for codes in UN_REGIONAL_GROUPS.values() for c in codes}
    assert states - grouped == {"VA"}  # the Holy See is in no regional group


@pytest.mark.parametrize("seed", range(20))
def test_iceland_gets_northern_european_states_not_jersey_or_aland(seed: int) -> None:
    chosen, source = pick_distractors("IS", random.Random(seed))
    assert source == "subregion" and set(chosen) <= NORTHERN_EUROPE and len(set(chosen)) == 3


def test_rings_for_a_few_countries() -> None:
    tiers = {t.name: set(t.codes) for t in distractor_tiers("IS")}
    assert tiers["neighbours"] == set() and tiers["subregion"] == NORTHERN_EUROPE
    for code in ("IS", "FR", "NZ", "SG", "VA", "CU"):
        for tier in distractor_tiers(code):
            assert set(tier.codes) <= sovereign_states() and code not in tier.codes
    # France: its land neighbours first (GeoNames), all sovereign
    fr, source = pick_distractors("FR", random.Random(0))
    assert source == "neighbours" and set(fr) <= {"AD", "BE", "DE", "IT", "LU", "MC", "ES", "CH"}
    # New Zealand: the sub-region holds only Australia, then culturally related WEOG states
    nz, source = pick_distractors("NZ", random.Random(0))
    assert "AU" in nz and source == "regional_group"
    assert all(regional_group(c) == "Western European and Others" for c in nz)


def test_questions_never_offer_a_territory() -> None:
    samples = [
        Sample(id=f"s{i}", labels={"country": c}) for i, c in enumerate(["Iceland", "Denmark", "UK"] * 10)
    ]
    questions, failed = build_mcq(samples, seed=1)
    assert not failed and len(questions) == 30
    for q in questions:
        offered = set(q.metadata["choice_codes"]) - {q.metadata["answer_code"]}
        assert offered <= sovereign_states() and not offered & TERRITORIES
