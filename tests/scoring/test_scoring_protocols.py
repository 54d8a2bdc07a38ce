"""Each named protocol computes what its paper's released evaluation computes.

Expected values are derived by hand from the released rules (see docs/evaluation.md):
distances along the equator are R·Δλ on a sphere and a·Δλ on the WGS-84 ellipsoid, so a
prediction a known number of km away is built without the code under test.
"""

from __future__ import annotations

import json
import math
import sys
import tracemalloc
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from geosleuth.core import metrics as M
from geosleuth.scoring import geovista as GV
from geosleuth.scoring import get_protocol, score_file

WGS84_A_KM = 6378.137
SPHERES = {"spotagent": 6371.0, "geovista": 6371.0088, "default": 6371.0088}
RELATIVE = 1e-7  # 0.1 mm at 1 km: finer than the gap between R = 6371 and 6371.0088 (1.4e-6)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def east_of(km: float, protocol: str, lat0: float = 0.0, lon0: float = 10.0) -> tuple[float, float]:
    """A point ``km`` east along the equator: Δλ = km / R (sphere) or km / a (WGS-84 equator)."""
    radius = WGS84_A_KM if protocol == "twm" else SPHERES[protocol]
    return lat0, lon0 + math.degrees(km / radius)


def twm_answer(lat: float, lon: float) -> str:
    return json.dumps({"lat": lat, "lon": lon, "city": "X", "country": "Y"})


def answer_text(protocol: str, lat: float, lon: float) -> str:
    if protocol == "twm":
        return twm_answer(lat, lon)
    return f"<answer>Country: Ecuador\nCity: X\nLatitude: {lat!r}\nLongitude: {lon!r}</answer>"


BOUNDARIES = [
    *[("twm", k) for k in M.THRESHOLD_PRESETS["map"]],
    *[("spotagent", k) for k in M.THRESHOLD_PRESETS["classic"]],
    ("geovista", 3.0),
    *[("default", k) for k in (0.5, 1.0, 3.0, 25.0, 2500.0)],
]


@pytest.mark.parametrize(("protocol", "km"), BOUNDARIES)
def test_threshold_boundary(tmp_path: Path, protocol: str, km: float) -> None:
    """Just inside k is a hit, just outside a miss; exactly k follows the paper's < or <=."""
    inside = east_of(km * (1 - RELATIVE), protocol)
    outside = east_of(km * (1 + RELATIVE), protocol)
    rows = [
        {"id": i, "ground_truth": {"lat": 0.0, "lon": 10.0}, "response": answer_text(protocol, *p)}
        for i, p in enumerate((inside, outside))
    ]
    chosen = get_protocol(protocol)
    result = score_file(write_jsonl(tmp_path / "b.jsonl", rows), chosen, reverse=_no_reverse, geocoder=_none)
    name = M.threshold_name(km)
    records = result.rows
    assert [r[name] for r in records] == [True, False]
    ill_conditioned = 5e-8 if protocol == "spotagent" else 1e-10  # arccos near 1 loses digits
    assert records[0]["distance_km"] == pytest.approx(km * (1 - RELATIVE), rel=ill_conditioned)
    # exactly at k: Thinking with Map, GeoVista and default count d < k; SpotAgent counts d <= k
    at_k = bool(M.hits_at(np.array([km]), km, chosen.strict_threshold)[0])
    assert at_k is (protocol == "spotagent")


@pytest.mark.parametrize(("protocol", "included"), [("twm", False), ("spotagent", True), ("geovista", False)])
def test_prediction_exactly_at_threshold_end_to_end(tmp_path: Path, protocol: str, included: bool) -> None:
    """A prediction whose distance equals the threshold follows the paper's < or <=.

    A quarter of the equator away is R·π/2 (a·π/2 on WGS-84) up to rounding; the last bits of a
    vectorised haversine depend on the CPU's SIMD path, so the boundary is the distance this
    machine computes for that row, and R·π/2 is only checked to within a few ULPs.
    """
    radius = WGS84_A_KM if protocol == "twm" else SPHERES[protocol]
    row = {"id": 1, "ground_truth": {"lat": 0.0, "lon": 0.0}, "response": answer_text(protocol, 0.0, 90.0)}
    path = write_jsonl(tmp_path / "q.jsonl", [row])
    measured = score_file(path, get_protocol(protocol), geocoder=_none).rows[0]["distance_km"]
    assert math.isclose(measured, radius * math.pi / 2, rel_tol=8 * sys.float_info.epsilon)
    chosen = replace(get_protocol(protocol), thresholds=(measured,))
    result = score_file(path, chosen, geocoder=_none)
    assert result.rows[0]["distance_km"] == measured  # same row, same machine, same code path
    assert result.rows[0][M.threshold_name(measured)] is included


def _no_reverse(lats: Any, lons: Any) -> dict[str, Any]:
    blank = np.full(len(lats), "", dtype=object)
    return {"country_code": blank, "admin1": blank, "admin2": blank, "city": blank}


def _none(query: str, country: str | None) -> tuple[float, float] | None:
    return None


# --- GeoVista -----------------------------------------------------------------------------


def test_geovista_normalisation_and_whole_terms() -> None:
    assert GV.normalize_text("  Zürich,  São-Paulo!! ") == "zurich sao paulo"
    assert GV.normalize_text("東京") == ""
    assert GV.contains_whole_term("new york city", "york")
    assert not GV.contains_whole_term("yorkshire dales", "york")
    assert not GV.contains_whole_term("new york", "")


def test_geovista_rule_credits_coarser_levels_from_a_finer_hit() -> None:
    truth = {"country": "Switzerland", "admin1": "Lucerne", "city": "Kriens"}
    assert GV.rule_levels("Final answer: Kriens", truth) == {"country": True, "admin1": True, "city": True}
    assert GV.rule_levels("Country: X\nProvince/State: Lucerne\nCity: Y", truth) == {
        "country": True,
        "admin1": True,
        "city": False,
    }
    assert GV.rule_levels("somewhere in the Alps", truth) == dict.fromkeys(
        ("country", "admin1", "city"), False
    )
    assert GV.rule_levels(
        "Hesse, Germany", {"country": "Germany", "admin1": "Hesse", "city": "Frankfurt"}
    ) == {
        "country": True,
        "admin1": True,
        "city": False,
    }


def test_geovista_lower_median() -> None:
    assert GV.lower_median([4.0, 1.0, 3.0, 2.0]) == 2.0  # even n: the lower middle, not 2.5
    assert GV.lower_median([5.0, 1.0, 3.0]) == 3.0
    assert math.isnan(GV.lower_median([]))


def test_geovista_final_turn_ignores_quoted_tool_output() -> None:
    text = "<tool_response>Kriens, Lucerne</tool_response>\nI think it is Bern."
    assert GV.final_turn(text) == "\nI think it is Bern."
    assert GV.final_turn("x" * 5000) == "x" * 4000


def _geovista_rows() -> list[dict[str, Any]]:
    truth = {
        "lat": 47.0,
        "lon": 8.3,
        "country": "Switzerland",
        "province_or_state": "Lucerne",
        "city": "Kriens",
    }
    return [
        {
            "uid": "a",
            "ground_truth": truth,
            "response": "Country: Switzerland\nProvince/State: Lucerne\nCity: Kriens",
        },
        {"uid": "b", "ground_truth": truth, "response": "The photo was taken in Glovelier, Switzerland."},
        {"uid": "c", "ground_truth": truth, "response": "Somewhere in Lucerne."},
        {"uid": "d", "ground_truth": truth, "response": ""},
    ]


def test_geovista_file_levels_as_published_and_every_row(tmp_path: Path) -> None:
    """By hand: a has city (→ all), b country only, c state (→ country), d has no answer (dropped)."""
    points = {"Kriens": (47.0 + 1.0 / 111.2, 8.3), "Glovelier": (47.33, 7.2), "Lucerne": (47.05, 8.3)}

    def geocode(query: str, country: str | None) -> tuple[float, float] | None:
        return next((p for name, p in points.items() if name in query), None)

    path = write_jsonl(tmp_path / "gv.jsonl", _geovista_rows())
    result = score_file(path, get_protocol("geovista"), geocoder=geocode)
    m = result.score.metrics
    assert (m["acc_country"], m["acc_state"], m["acc_city"]) == (
        100.0,
        pytest.approx(200 / 3),
        pytest.approx(100 / 3),
    )
    assert (m["all_acc_country"], m["all_acc_state"], m["all_acc_city"]) == (75.0, 50.0, 25.0)
    assert any("1 without a final answer (lines 4)" in w for w in result.score.warnings)


def test_geovista_verifier_replaces_the_rules(tmp_path: Path) -> None:
    calls: list[str] = []

    def verifier(response: str, labels: Any) -> dict[str, bool] | None:
        calls.append(response)
        if "Glovelier" in response:
            raise TimeoutError("verifier timed out")
        return {"country": False, "admin1": False, "city": "Kriens" not in response}

    path = write_jsonl(tmp_path / "gv.jsonl", _geovista_rows())
    result = score_file(path, get_protocol("geovista"), geocoder=_none, verifier=verifier)
    m = result.score.metrics
    assert len(calls) == 3  # the empty answer is never sent
    # a: verdict all False (replaces the rule's hit); c: city True -> all True; b: no verdict, dropped
    assert (m["acc_country"], m["acc_state"], m["acc_city"]) == (50.0, 50.0, 50.0)
    assert m["all_acc_city"] == 25.0
    assert any("verifier gave no verdict on 1 row" in w for w in result.score.warnings)


def test_geovista_reads_its_own_inference_output(tmp_path: Path) -> None:
    """eval/inference_agent_tool_mode.py writes uid, pred_output (messages) and metadata.location."""
    row = {
        "uid": "x1",
        "pred_output": [
            {"role": "system", "content": "..."},
            {
                "role": "assistant",
                "content": "<think>hm</think><answer>Kriens, Lucerne, Switzerland</answer>",
            },
        ],
        "metadata": {
            "location": {"lat": 47.03, "lng": 8.28},
            "multi_level_loc_dict": {
                "country": "Switzerland",
                "province_or_state": "Lucerne",
                "city": "Kriens",
            },
        },
    }
    result = score_file(write_jsonl(tmp_path / "gv.jsonl", [row]), get_protocol("geovista"), geocoder=_none)
    m = result.score.metrics
    assert (m["acc_country"], m["acc_state"], m["acc_city"]) == (100.0, 100.0, 100.0)
    assert m["all_acc@3km"] == 0.0 and math.isnan(m["acc@3km"])


def test_geovista_median_and_share_below_3km(tmp_path: Path) -> None:
    """Distances 1, 2, 4, 8 km by construction: < 3 km = 50 %, lower median = 2 km."""
    rows = []
    for i, km in enumerate((8.0, 1.0, 4.0, 2.0)):
        lat, lon = east_of(km, "geovista")
        rows.append(
            {
                "id": i,
                "ground_truth": {"lat": 0.0, "lon": 10.0},
                "response": f"<answer>Latitude: {lat!r}\nLongitude: {lon!r}</answer>",
            }
        )
    rows.append({"id": 9, "ground_truth": {"lat": 0.0, "lon": 10.0}, "response": "no idea at all"})
    result = score_file(write_jsonl(tmp_path / "m.jsonl", rows), get_protocol("geovista"), geocoder=_none)
    m = result.score.metrics
    assert m["acc@3km"] == 50.0 and m["median_km"] == pytest.approx(2.0)
    assert m["all_acc@3km"] == 40.0 and m["all_median_km"] == pytest.approx(4.0)  # (1, 2, 4, 8, max)


# --- SpotAgent ----------------------------------------------------------------------------


def test_spotagent_inline_answer_keeps_coordinates(tmp_path: Path) -> None:
    """The paper's own inline example (needs the parsing change that reads inline key: value pairs)."""
    row = {
        "id": 1,
        "true_lat": 33.8121,
        "true_lon": -117.9190,
        "response": "<answer>country: United States, city: Anaheim, "
        "Latitude: 33.8111, Longitude: -117.9220</answer>",
    }
    result = score_file(write_jsonl(tmp_path / "s.jsonl", [row]), get_protocol("spotagent"))
    record = result.rows[0]
    assert (record["pred_lat"], record["pred_lon"]) == (33.8111, -117.9220)
    # law of cosines, R = 6371: about 0.30 km
    assert record["acc@1km"] is True


# --- nuanced evaluation with the offline gazetteer ----------------------------------------


@pytest.mark.parametrize(
    ("answer", "truth", "max_km"),
    [
        ("Schöneberger Straße, 22149 Hamburg, Germany", (53.5868597, 10.1533124), 25.0),
        ("China; Hong Kong; Kowloon", (22.3167, 114.1833), 25.0),
    ],
)
def test_geovista_nuanced_geocoding_offline(
    tmp_path: Path, answer: str, truth: tuple[float, float], max_km: float
) -> None:
    row = {
        "id": 1,
        "ground_truth": {"lat": truth[0], "lon": truth[1]},
        "response": f"<answer>{answer}</answer>",
    }
    result = score_file(write_jsonl(tmp_path / "n.jsonl", [row]), get_protocol("geovista"))
    assert result.rows[0]["distance_km"] is not None and result.rows[0]["distance_km"] < max_km


# --- streaming ----------------------------------------------------------------------------


def test_deeply_nested_json_row_is_one_failed_row(tmp_path: Path) -> None:
    good = {"index": 0, "ground_truth": {"lat": 1.0, "lon": 1.0}, "solution_str": twm_answer(1.0, 1.0)}
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps(good) + "\n" + "[" * 50_000 + "]" * 50_000 + "\n" + json.dumps(good) + "\n")
    result = score_file(path, get_protocol("twm"))
    assert result.score.n == 3 and result.score.metrics["acc@0.5km"] == pytest.approx(200 / 3)
    assert any("deep.jsonl:2: not valid JSON (nested too deeply)" in w for w in result.score.warnings)


def test_overlong_line_is_one_failed_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from geosleuth.scoring import io as score_io

    monkeypatch.setattr(score_io, "MAX_LINE_CHARS", 200)
    good = {"index": 0, "ground_truth": {"lat": 1.0, "lon": 1.0}, "solution_str": twm_answer(1.0, 1.0)}
    long = dict(good, solution_str="x" * 1000)
    path = write_jsonl(tmp_path / "long.jsonl", [good, long, good])
    result = score_file(path, get_protocol("twm"))
    assert result.score.n == 3 and result.score.metrics["acc@0.5km"] == pytest.approx(200 / 3)
    assert any("long.jsonl:2: line longer than 200 bytes" in w for w in result.score.warnings)


def _column_rows(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "pred_lat": (i % 170) - 85.0,
            "pred_lon": 1.0,
            "true_lat": (i % 170) - 85.0,
            "true_lon": 1.5,
        }
        for i in range(n)
    ]


def test_memory_per_row_is_a_few_dozen_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond the chunk in flight, peak allocation grows by compact columns only (no row objects)."""
    from geosleuth.scoring import columnstore, engine

    monkeypatch.setattr(engine, "CHUNK", 1_000)
    monkeypatch.setattr(columnstore, "CHUNK", 1_000)
    monkeypatch.setattr(engine, "MISALIGNMENT_WINDOW", 1_000)
    peaks = []
    for n in (4_000, 12_000):
        path = write_jsonl(tmp_path / f"c{n}.jsonl", _column_rows(n))
        tracemalloc.start()
        result = score_file(path, get_protocol("twm"), keep_rows=False)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert result.score.n == n and result.columns is None
    per_row = (peaks[1] - peaks[0]) / 8_000
    assert per_row < 120, f"{per_row:.0f} bytes per row"


def test_rows_output_streams_from_columns(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", _column_rows(5))
    result = score_file(path, get_protocol("spotagent"))
    rows = list(result.iter_rows())
    assert [r["id"] for r in rows] == ["0", "1", "2", "3", "4"] and all(r["status"] == "ok" for r in rows)
    assert rows[0]["distance_km"] == pytest.approx(
        0.5 * math.pi / 180 * 6371.0 * math.cos(math.radians(85)), rel=1e-3
    )


@pytest.mark.parametrize(
    "answer",
    [
        "<answer>Country: Switzerland\nProvince/State: Lucerne\nCity: Horw</answer>",  # geovista prompt
        '{"country": "Switzerland", "province_or_state": "Lucerne", "city": "Horw"}',  # GeoVista's JSON
    ],
)
def test_default_reads_the_state_of_geovista_answers(tmp_path: Path, answer: str) -> None:
    """Needs the parsing change that reads Province/State lines and province_or_state keys."""
    truth = {
        "lat": 47.03,
        "lon": 8.28,
        "country": "Switzerland",
        "province_or_state": "Lucerne",
        "city": "Kriens",
    }
    row = {"id": 1, "ground_truth": truth, "response": answer}
    path = write_jsonl(tmp_path / "d.jsonl", [row])
    result = score_file(path, get_protocol("default"), geocoder=_none, reverse=_no_reverse)
    m = result.score.metrics
    assert (m["text_acc_country"], m["text_acc_admin1"], m["text_acc_city"]) == (100.0, 100.0, 0.0)
