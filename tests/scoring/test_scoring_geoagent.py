"""`--protocol geoagent` (issue 43 item 6): GeoAgent §5.1's City / Region / Country / Continent
accuracy (25 / 200 / 750 / 2500 km, haversine R = 6371 km, d < k) and GeoScore, on answers
geocoded from 'Country; Region; Place'."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from geosleuth.scoring import get_protocol, score_file

R = 6371.0
DISTANCES = (20.0, 100.0, 500.0, 2000.0, 3000.0)  # km east of (0, 0) along the equator
PLACES = {f"Place{i}": (0.0, math.degrees(d / R)) for i, d in enumerate(DISTANCES)}


def fake_geocoder(address: str, country: str | None) -> tuple[float, float] | None:
    return next((point for name, point in PLACES.items() if name in address), None)


def test_four_levels_and_geoscore_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "preds.jsonl"
    rows = [
        {
            "id": name,
            "response": f"<answer>Nowhere; Region; {name}</answer>",
            "ground_truth": {"lat": 0, "lon": 0},
        }
        for name in PLACES
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    m = score_file(path, get_protocol("geoagent"), geocoder=fake_geocoder).score.metrics
    # d = 20, 100, 500, 2000, 3000 km: under 25 km one of five, 200 two, 750 three, 2500 four
    assert (m["acc@25km"], m["acc@200km"], m["acc@750km"], m["acc@2500km"]) == pytest.approx((20, 40, 60, 80))
    # GeoScore = 5000·exp(−10·d/18050), averaged: exp(−0.01108) = 0.98898, exp(−0.05540) = 0.94611,
    # exp(−0.27701) = 0.75805, exp(−1.10803) = 0.33021, exp(−1.66205) = 0.18975; sum 3.21309 × 1000
    assert m["geoscore"] == pytest.approx(3213.09, abs=0.05)
    assert m["median_km"] == pytest.approx(500.0, rel=1e-6)  # haversine on R = 6371 km gives d back


def test_a_row_without_a_place_counts_as_wrong(tmp_path: Path) -> None:
    path = tmp_path / "preds.jsonl"
    rows = [
        {
            "id": "a",
            "response": "<answer>Nowhere; Region; Place0</answer>",
            "ground_truth": {"lat": 0, "lon": 0},
        },
        {"id": "b", "response": "I cannot tell.", "ground_truth": {"lat": 0, "lon": 0}},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    m = score_file(path, get_protocol("geoagent"), geocoder=fake_geocoder).score.metrics
    assert m["acc@25km"] == pytest.approx(50.0)  # 1 of 2: the unanswered row stays in the denominator
    assert m["geoscore"] == pytest.approx(5000 * math.exp(-10 * 20 / 18050) / 2, abs=0.05)
