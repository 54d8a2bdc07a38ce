"""GeoCLIP, G3 (and GeoRanker) and PIGEON as their released evaluation code counts.

Reference values are worked out by hand from the released scripts, never from the code under test:
- GeoCLIP ``geoclip/train/eval.py``: ``geopy.distance.geodesic(...).km``, hit when ``gd <= dis``
  at 2500 / 750 / 200 / 25 / 1 km.
- G3 ``IndexSearch.py``: geodesic, hit when ``geodesic < k`` at 1 / 25 / 200 / 750 / 2500 km; a
  final latitude outside [-90, 90] is set to 0, and so is such a longitude; answers are read by
  ``aggregate_llm_predictions.py`` (first two ``[-+]?\\d+\\.\\d+`` numbers, ``'0.0', '0.0'`` when
  there are fewer). GeoRanker's ``evaluate.py`` counts with the same geodesic and ``<``.
- PIGEON ``evaluation/metrics.py``: haversine with R = 6378137 m, ``distances < km``, GeoGuessr
  points ``np.round(5000·exp(−d / 1492.7))`` averaged, country correct when the truth's country
  polygon (else the nearest polygon) contains the prediction.

On the WGS-84 equator the geodesic is a·Δλ (a = 6378.137 km), and PIGEON's sphere has the same
radius, so a point k km east is Δλ = k / a for all three. Off the equator they differ: one
degree of latitude from the equator is 110.574 km along the WGS-84 meridian, 111.319 km on
PIGEON's sphere.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from geosleuth.core import metrics as M
from geosleuth.core.records import ParseStatus
from geosleuth.scoring import PROTOCOLS, get_protocol, score_file
from geosleuth.scoring.peers import g3_answer

A_KM = 6378.137
RELATIVE = 1e-7
CLASSIC = (1.0, 25.0, 200.0, 750.0, 2500.0)
PIGEON_KM = (1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 200.0, 750.0, 1000.0, 2500.0)
G3_RELEASED = re.compile(r"[-+]?\d+\.\d+")  # aggregate_llm_predictions.py, as written there


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def east(km: float) -> tuple[float, float]:
    """The point ``km`` east of (0, 10) along the equator: Δλ = km / a."""
    return 0.0, 10.0 + math.degrees(km / A_KM)


def _none(*_: Any, **__: Any) -> None:
    return None


def _row(i: int, lat: float, lon: float, truth: tuple[float, float] = (0.0, 10.0)) -> dict[str, Any]:
    return {
        "id": i,
        "response": f"Latitude: {lat!r}, Longitude: {lon!r}",
        "ground_truth": {"lat": truth[0], "lon": truth[1]},
    }


# ----------------------------------------------------------------------------- thresholds


@pytest.mark.parametrize(
    ("protocol", "km"),
    [*[("geoclip", k) for k in CLASSIC], *[("g3", k) for k in CLASSIC], *[("pigeon", k) for k in PIGEON_KM]],
)
def test_just_inside_is_a_hit_just_outside_a_miss(tmp_path: Path, protocol: str, km: float) -> None:
    rows = [_row(0, *east(km * (1 - RELATIVE))), _row(1, *east(km * (1 + RELATIVE)))]
    result = score_file(write_jsonl(tmp_path / "r.jsonl", rows), get_protocol(protocol), geocoder=_none)
    name = f"acc@{km:g}km"
    assert [r[name] for r in result.rows] == [True, False]
    assert result.rows[0]["distance_km"] == pytest.approx(km * (1 - RELATIVE), rel=1e-9)


def test_exactly_at_k_geoclip_counts_g3_and_pigeon_do_not(tmp_path: Path) -> None:
    """``gd <= dis`` (GeoCLIP) against ``geodesic < k`` (G3) and ``distances < km`` (PIGEON)."""
    path = write_jsonl(tmp_path / "r.jsonl", [_row(0, *east(123.0))])
    for name, counted in (("geoclip", True), ("g3", False), ("pigeon", False)):
        protocol = get_protocol(name)
        d = score_file(path, protocol, geocoder=_none).rows[0]["distance_km"]
        at_d = replace(protocol, thresholds=(d,), coord_levels=(), reverse=None)
        metrics = score_file(path, at_d, geocoder=_none).score.metrics
        assert metrics[M.threshold_name(d)] == (100.0 if counted else 0.0), name


def test_distances_are_the_released_ones_off_the_equator(tmp_path: Path) -> None:
    """One degree north of (0, 0): WGS-84 meridian arc 110.574 km (geopy) vs R·π/180 = 111.319 km (PIGEON)."""
    path = write_jsonl(tmp_path / "r.jsonl", [_row(0, 1.0, 0.0, truth=(0.0, 0.0))])
    expected = {"geoclip": 110.574, "g3": 110.574, "pigeon": A_KM * math.pi / 180.0}
    for name, km in expected.items():
        row = score_file(path, get_protocol(name), geocoder=_none).rows[0]
        assert row["distance_km"] == pytest.approx(km, abs=5e-4), name


def test_thresholds_and_metrics_are_the_released_ones() -> None:
    assert get_protocol("geoclip").thresholds == CLASSIC and not get_protocol("geoclip").strict_threshold
    assert get_protocol("g3").thresholds == CLASSIC and get_protocol("g3").strict_threshold
    assert get_protocol("pigeon").thresholds == PIGEON_KM and get_protocol("pigeon").strict_threshold


# ----------------------------------------------------------------------------- G3's reading and fallbacks


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Latitude: 48.8566, Longitude: 2.3522", (48.8566, 2.3522)),
        ("(-33.8688, 151.2093)", (-33.8688, 151.2093)),
        ("somewhere near 48, 2.35 and 7.5", (2.35, 7.5)),  # integers are no match for \d+\.\d+
        ("1.2.3 4.5", (1.2, 4.5)),  # findall resumes after "1.2"; "3" has no decimals
        ("+12.5 -0.25 99.9", (12.5, -0.25)),  # only the first two count
        ("91.5, 45.25", (91.5, 45.25)),  # taken as found; evaluation sets the latitude to 0
    ],
)
def test_g3_reads_the_first_two_decimal_numbers(text: str, expected: tuple[float, float]) -> None:
    prediction = g3_answer(text)
    assert prediction.status is ParseStatus.OK
    assert (prediction.lat, prediction.lon) == expected


@pytest.mark.parametrize("text", ["no idea", "48, 2", "only 12.5 here", ""])
def test_g3_without_two_decimals_fails(text: str) -> None:
    prediction = g3_answer(text)
    assert prediction.status is ParseStatus.FAILED and not prediction.has_coords


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="0123456789.-+ ,ab\n", max_size=60))
def test_g3_regex_matches_the_released_one(text: str) -> None:
    released = [float(x) for x in G3_RELEASED.findall(text)[:2]]
    prediction = g3_answer(text)
    assert ([prediction.lat, prediction.lon] if prediction.has_coords else []) == (
        released if len(released) == 2 else []
    )


def test_g3_is_linear_on_adversarial_digit_runs() -> None:
    assert g3_answer("1" * 262_144).status is ParseStatus.FAILED
    assert g3_answer(("7" * 50_000 + " ") * 5).status is ParseStatus.FAILED
    assert g3_answer("-" + "9" * 100_000 + ".5 1.5").status is ParseStatus.OK


def test_g3_zeroes_out_of_range_and_unparsed_as_released(tmp_path: Path) -> None:
    """IndexSearch.py sets a bad latitude (or longitude) to 0; aggregate_llm_predictions.py writes
    '0.0', '0.0' for an answer without two numbers. Each row below is then exactly on its truth."""
    rows = [
        {"id": 0, "response": "My guess: 91.5, 45.25", "ground_truth": {"lat": 0.0, "lon": 45.25}},
        {"id": 1, "response": "I cannot tell.", "ground_truth": {"lat": 0.0, "lon": 0.0}},
        {"id": 2, "pred_lat": 95.0, "pred_lon": 10.0, "lat": 0.0, "lon": 10.0},
        {"id": 3, "response": "12.5, 181.5", "ground_truth": {"lat": 12.5, "lon": 0.0}},
        {"id": 4, "response": "-33.8688, 151.2093", "ground_truth": {"lat": -33.8688, "lon": 151.2093}},
    ]
    path = write_jsonl(tmp_path / "g3.jsonl", rows)
    g3 = score_file(path, get_protocol("g3"), geocoder=_none).score
    assert g3.n == 5 and g3.parsed == 4  # the unparsed answer is still reported as unparsed
    assert g3.metrics["acc@1km"] == 100.0
    assert any("released point" in w for w in g3.warnings)
    geoclip = score_file(path, get_protocol("geoclip"), geocoder=_none).score
    assert geoclip.metrics["acc@1km"] == 20.0  # only row 4: the others have no usable coordinates


# ----------------------------------------------------------------------------- PIGEON


def test_pigeon_geoguessr_points_are_rounded_per_row(tmp_path: Path) -> None:
    """d = 0 scores 5000; d = 1492.7·ln(5000 / 2500.6) scores 2500.6, rounded to 2501: mean 3750.5
    (OSV-5M's unrounded formula gives 3750.3)."""
    d = 1492.7 * math.log(5000.0 / 2500.6)
    path = write_jsonl(tmp_path / "p.jsonl", [_row(0, 0.0, 10.0), _row(1, *east(d))])
    pigeon = score_file(path, get_protocol("pigeon"), geocoder=_none).score.metrics
    assert pigeon["geoguessr"] == pytest.approx(3750.5, abs=1e-6)
    osv = replace(get_protocol("pigeon"), geoguessr_round=False, coord_levels=(), reverse=None)
    assert score_file(path, osv, geocoder=_none).score.metrics["geoguessr"] == pytest.approx(3750.3, abs=1e-6)


def test_pigeon_country_is_the_truths_polygon_containing_the_prediction(tmp_path: Path) -> None:
    """Luzern → Zurich: same polygon (hit). Luzern → Milan: not (miss). Ligurian Sea off Genoa
    → Rome: the truth is in no polygon, the nearest is Italy's, which holds Rome (hit). Mid-Atlantic
    → the same point: 0 km away, but the prediction lies in no polygon (miss)."""
    pairs = [
        ((47.0505, 8.3064), (47.3769, 8.5417)),
        ((47.0505, 8.3064), (45.4642, 9.19)),
        ((44.2, 8.9), (41.9028, 12.4964)),
        ((0.0, -30.0), (0.0, -30.0)),
    ]
    rows = [_row(i, *pred, truth=truth) for i, (truth, pred) in enumerate(pairs)]
    result = score_file(write_jsonl(tmp_path / "c.jsonl", rows), get_protocol("pigeon"), geocoder=_none)
    assert [r["acc_country"] for r in result.rows] == [True, False, True, False]
    assert result.score.metrics["acc_country"] == 50.0
    assert result.rows[3]["distance_km"] == 0.0


# ----------------------------------------------------------------------------- CLI


def _cli(*args: str) -> tuple[int, str, str]:
    import typer

    from geosleuth.cli import score as score_cli

    app = typer.Typer(pretty_exceptions_enable=False)

    @app.callback()
    def main() -> None:
        """Test harness: the score command alone."""

    score_cli.register(app)
    result = CliRunner().invoke(app, ["score", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("protocol", ["geoclip", "g3", "pigeon"])
def test_cli_scores_and_handles_bad_input_as_score_does(tmp_path: Path, protocol: str) -> None:
    good = write_jsonl(tmp_path / "good.jsonl", [_row(0, 0.0, 10.0), _row(1, *east(30.0))])
    code, out, _ = _cli(str(good), "--protocol", protocol, "-f", "json")
    assert code == 0
    metrics = json.loads(out)["metrics"]
    assert metrics["acc@1km"] == 50.0 and metrics["acc@200km"] == 100.0
    broken = tmp_path / "broken.jsonl"
    broken.write_text(good.read_text() + "{not json\n", encoding="utf-8")
    code, out, err = _cli(str(broken), "--protocol", protocol, "-f", "json")
    assert code == 0 and json.loads(out)["n"] == 3 and "Traceback" not in out + err
    code, _, err = _cli(str(tmp_path / "missing.jsonl"), "--protocol", protocol)
    assert code == 1 and "no such file" in err
    (tmp_path / "empty.jsonl").write_text("")
    code, _, err = _cli(str(tmp_path / "empty.jsonl"), "--protocol", protocol)
    assert code == 1 and "no predictions" in err


def test_cli_help_lists_the_registry() -> None:
    code, out, _ = _cli("--help")
    assert code == 0
    flat = " ".join(out.replace("│", " ").split())
    for name in PROTOCOLS:
        assert name in flat, name


def test_g3_and_georanker_result_tables_score_as_released(tmp_path: Path) -> None:
    """The table IndexSearch.py / GeoRanker's evaluate.py end with: LAT, LON, LAT_pred, LON_pred.
    Row b is 0.2° east on the equator, a·0.2·π/180 = 22.264 km; row c's latitude 95 is set to 0."""
    table = tmp_path / "im2gps3k_g3_results.csv"
    table.write_text(
        "IMG_ID,LAT,LON,LAT_pred,LON_pred,geodesic\n"
        "a.jpg,48.8566,2.3522,48.8566,2.3522,0.0\n"
        "b.jpg,0.0,10.0,0.0,10.2,22.26\n"
        "c.jpg,0.0,10.0,95.0,10.0,0.0\n",
        encoding="utf-8",
    )
    result = score_file(table, get_protocol("g3"), geocoder=_none)
    assert result.rows[1]["distance_km"] == pytest.approx(A_KM * 0.2 * math.pi / 180.0, rel=1e-9)
    assert (
        result.score.metrics["acc@1km"] == pytest.approx(200 / 3)
        and result.score.metrics["acc@25km"] == 100.0
    )
    geoclip = score_file(table, get_protocol("geoclip"), geocoder=_none).score.metrics
    assert geoclip["acc@1km"] == pytest.approx(100 / 3)  # GeoCLIP has no such rule: row c is a miss


def test_g3_rules_hold_for_coordinate_arrays_too() -> None:
    """The path evaluation and harness integrations use: NaN is no answer, placed at (0, 0) as released."""
    from geosleuth.scoring.vectorised import score_coordinates

    nan = float("nan")
    score = score_coordinates([nan, 95.0], [nan, 10.0], [0.0, 0.0], [0.0, 10.0], get_protocol("g3"))
    assert score.metrics["acc@1km"] == 100.0 and score.parsed == 1
    geoclip = score_coordinates([nan, 95.0], [nan, 10.0], [0.0, 0.0], [0.0, 10.0], get_protocol("geoclip"))
    assert geoclip.metrics["acc@1km"] == 0.0


def _released_metrics(pairs: list[tuple[float, float, float, float]]) -> dict[str, dict[str, float]]:
    """Each paper's own arithmetic on the same pairs: geopy's geodesic with ``<=`` (GeoCLIP) and
    ``<`` (G3), PIGEON's ``haversine_np`` (radius 6378137 m) with ``<`` and rounded GeoGuessr points."""
    from geopy.distance import geodesic

    gd = [geodesic((tl, tn), (pl, pn)).km for pl, pn, tl, tn in pairs]
    hv = []
    for pl, pn, tl, tn in pairs:
        p1, p2 = math.radians(tl), math.radians(pl)
        a = (
            math.sin((p2 - p1) / 2) ** 2
            + math.cos(p1) * math.cos(p2) * math.sin(math.radians(pn - tn) / 2) ** 2
        )
        hv.append(6378137.0 * 2 * math.asin(math.sqrt(a)) / 1000)
    n = len(pairs)
    return {
        "geoclip": {f"acc@{k:g}km": 100 * sum(d <= k for d in gd) / n for k in CLASSIC}
        | {"mean_km": sum(gd) / n},
        "g3": {f"acc@{k:g}km": 100 * sum(d < k for d in gd) / n for k in CLASSIC},
        "pigeon": {f"acc@{k:g}km": 100 * sum(d < k for d in hv) / n for k in PIGEON_KM}
        | {"geoguessr": sum(round(5000 * math.exp(-d / 1492.7)) for d in hv) / n, "mean_km": sum(hv) / n},
    }


def test_agrees_with_each_papers_own_arithmetic_on_random_pairs(tmp_path: Path) -> None:
    """120 seeded pairs, a third placed within 0.1 % of a threshold, scored from prediction columns."""
    import random

    from geosleuth.core.geo import destination

    rng = random.Random(20)
    pairs = []
    for i in range(120):
        tlat, tlon = rng.uniform(-70, 70), rng.uniform(-180, 180)
        km = rng.choice(CLASSIC) * (1 + rng.uniform(-1e-3, 1e-3)) if i % 3 == 0 else rng.uniform(0, 5000)
        plat, plon = destination(tlat, tlon, rng.uniform(0, 360), km)
        pairs.append((plat, plon, tlat, tlon))
    rows = [
        {"id": i, "pred_lat": p[0], "pred_lon": p[1], "lat": p[2], "lon": p[3]} for i, p in enumerate(pairs)
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for name, expected in _released_metrics(pairs).items():
        protocol = replace(get_protocol(name), coord_levels=(), reverse=None)
        metrics = score_file(path, protocol, geocoder=_none).score.metrics
        for metric, value in expected.items():
            assert metrics[metric] == pytest.approx(value, rel=1e-9, abs=1e-9), (name, metric)
