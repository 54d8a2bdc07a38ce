"""Fairness figures on groups whose accuracies the test sets: disparity, per-group CIs, entropy, report."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from eval_data import make_csv_dataset, write_plan
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.core.country_groups import REMOTE, country_group, settlement_classes
from geosleuth.core.fairness import disparity, headline_threshold, prediction_entropy
from geosleuth.core.records import Prediction, Sample, Trajectory, TrajectoryStatus
from geosleuth.eval.report.fairness import RowArrays, fairness_block, fairness_breakdowns, group_codes
from geosleuth.eval.report.fairness_markup import accuracy_colour, choropleth, fairness_markdown
from geosleuth.eval.report.scores import RunScore, score_run
from geosleuth.scoring.protocols import get_protocol


def _hits(n: int, k: int) -> np.ndarray:
    return np.array([True] * k + [False] * (n - k))


def test_disparity_of_groups_set_by_hand() -> None:
    groups = {"A": _hits(10, 8), "B": _hits(20, 5), "C": _hits(10, 5), "D": _hits(3, 3)}
    d = disparity(groups, "acc@25km", headline=40.0, min_n=10)
    assert d is not None
    # A 8/10 = 80 %, B 5/20 = 25 %, C 5/10 = 50 %; D (3 samples, 100 %) is below min_n and left out
    assert (d.best, d.worst, d.excluded) == ("A", "B", ("D",))
    assert d.best_value == pytest.approx(80.0) and d.worst_value == pytest.approx(25.0)
    assert d.gap == pytest.approx(55.0)  # 80 - 25 points
    assert d.ratio == pytest.approx(0.3125)  # 25 / 80
    assert d.macro_mean == pytest.approx((80 + 25 + 50) / 3)  # 51.667
    lo, hi = d.gap_ci95
    assert 20.0 < lo < 55.0 < hi <= 100.0
    assert d.as_dict()["best"] == {"group": "A", "value": 80.0}


def test_disparity_without_variation_or_groups() -> None:
    same = disparity({"x": _hits(12, 12), "y": _hits(15, 15)}, "acc", min_n=10)
    assert same is not None and same.gap == 0.0 and same.gap_ci95 == (0.0, 0.0) and same.ratio == 1.0
    assert disparity({"x": _hits(12, 6), "y": _hits(4, 1)}, "acc", min_n=10) is None  # one group left
    zero = disparity({"x": _hits(10, 0), "y": _hits(10, 0)}, "acc", min_n=10)
    assert zero is not None and zero.ratio is None  # worst / best with best 0 is undefined


def test_prediction_entropy_by_hand() -> None:
    truth = ["FR"] * 4 + ["DE"] * 4 + ["JP"] * 5 + ["IT"] * 2 + [None]
    cities = ["Paris"] * 4 + ["Berlin", "Berlin", "Munich", "Munich"] + ["a", "b", "c", "d", "e"]
    cities += ["Rome", "Rome", "Oslo"]
    out = prediction_entropy(truth, cities, min_n=4)
    # FR: one city, H = 0; DE: two cities at 1/2, H = ln 2 = 0.6931; JP: 5 at 1/5, H = ln 5 = 1.6094
    # IT has 2 answers (< 4) and the row without a truth country is skipped
    assert [e.country for e in out] == ["FR", "DE", "JP"]
    assert out[0].entropy == pytest.approx(0.0) and out[0].top_city == "Paris" and out[0].top_share == 1.0
    assert out[1].entropy == pytest.approx(math.log(2)) and out[1].top_city == "Berlin"  # tie: first name
    assert out[2].entropy == pytest.approx(math.log(5)) and out[2].distinct == 5


def test_country_groups() -> None:
    assert [country_group(g, "US") for g in ("income", "m49_region", "m49_subregion", "economy")] == [
        "High income",
        "Americas",
        "Northern America",
        "developed",  # Natural Earth: 1. Developed region: G7
    ]
    assert (
        country_group("income", "ET") == "Low income" and country_group("economy", "ET") == "least developed"
    )
    assert country_group("economy", "BR") == "emerging"  # 3. Emerging region: BRIC
    assert country_group("m49_subregion", "IN") == "Southern Asia"
    assert country_group("income", "ZZ") is None and country_group("income", None) is None
    with pytest.raises(ValueError, match="unknown country grouping"):
        country_group("religion", "US")


def test_settlement_bins() -> None:
    classes = settlement_classes([2_000_000, 150_000, 50_000, 800, 5_000_000, 10], [1, 1, 1, 1, 30, np.nan])
    assert list(classes) == [
        "metropolis (1M+)",
        "city (100k-1M)",
        "town (10k-100k)",
        "village (<10k)",
        REMOTE,
        None,
    ]


DEGREES_NORTH = 1.0  # a missed answer lies one degree of latitude north of its truth
ONE_DEGREE_KM = 6371.0088 * math.pi / 180  # 111.195 km along a meridian (the default radius)


def _small_run(thresholds: tuple[float, ...] = (1.0, 25.0, 750.0)) -> RunScore:
    """10 truths in New York (US, High income), 8 answered exactly; 10 in Addis Ababa (ET, Low
    income), 3 answered exactly; the other answers one degree north. One more sample has neither
    a country nor coordinates, and its agent failed."""
    samples, records = [], {}
    for i in range(20):
        cc, lat, lon = ("US", 40.7128, -74.006) if i < 10 else ("ET", 9.03, 38.74)
        right = i < 8 or 10 <= i < 13
        samples.append(Sample(id=f"s{i}", lat=lat, lon=lon, labels={"country": cc}))
        pred = Prediction(lat=lat if right else lat + DEGREES_NORTH, lon=lon, status="ok")
        records[f"s{i}"] = Trajectory(sample_id=f"s{i}", model="m", prediction=pred)
    samples.append(Sample(id="nowhere", labels={"city": "Atlantis"}))
    records["nowhere"] = Trajectory(sample_id="nowhere", model="m", status=TrajectoryStatus.MODEL_ERROR)
    protocol = replace(get_protocol("default"), thresholds=thresholds)
    return score_run(samples, records, protocol)


def test_breakdowns_and_disparity_on_a_small_run() -> None:
    run = _small_run()
    groupings, notes = group_codes(run)
    assert notes == []
    arrays = RowArrays.of(run)
    breakdowns = fairness_breakdowns(arrays, groupings, run.protocol)
    income = breakdowns["income"]
    assert list(income) == ["High income", "Low income"]  # the last sample has no country
    high, low = income["High income"], income["Low income"]
    assert high["n"] == 10 and high["acc@25km"] == pytest.approx(80.0)  # 8 / 10
    assert high["acc@1km"] == pytest.approx(80.0) and high["acc@750km"] == pytest.approx(100.0)  # 111 < 750
    assert low["n"] == 10 and low["acc@25km"] == pytest.approx(30.0)  # 3 / 10
    assert high["ci95"]["acc@25km"][0] < 80.0 < high["ci95"]["acc@25km"][1]
    assert high["median_km"] == pytest.approx(0.0, abs=1e-6)  # 8 of 10 at 0 km: the middle two are 0
    assert low["median_km"] == pytest.approx(ONE_DEGREE_KM, rel=1e-4)  # 7 of 10 one degree away
    assert high["mean_km"] == pytest.approx(2 * ONE_DEGREE_KM / 10, rel=1e-4)  # 22.24 km
    assert high["answered"] == 10
    assert set(breakdowns["m49_region"]) == {"Americas", "Africa"}
    # both cities have over a million people; the last sample has no point to place
    assert {g: v["n"] for g, v in breakdowns["settlement"].items()} == {"metropolis (1M+)": 20}
    block = fairness_block(run, arrays, groupings, notes=notes)
    assert block["metric"] == "acc@25km"
    income_block = block["groupings"]["income"]
    assert (income_block["n_assigned"], income_block["n_unassigned"]) == (20, 1)
    d = income_block["disparity"]
    assert d["headline"] == pytest.approx(55.0)  # 8 + 3 of the 20 samples with a truth point
    assert d["gap"] == pytest.approx(50.0) and d["ratio"] == pytest.approx(0.375)  # 80 - 30; 30 / 80
    assert d["macro_mean"] == pytest.approx(55.0)  # (80 + 30) / 2
    assert (d["best"]["group"], d["worst"]["group"]) == ("High income", "Low income")
    # settlement: one group, so no disparity
    assert block["groupings"]["settlement"]["disparity"] is None
    assert block["groupings"]["settlement"]["n_unassigned"] == 1
    assert any(n.startswith("settlement:") for n in block["notes"])
    assert block["by_country"] == {"ET": {"n": 10, "value": 30.0}, "US": {"n": 10, "value": 80.0}}
    lowest = block["over_prediction"]["lowest_entropy"]
    # US: 8 answers in one city and 2 in another: H = -(0.8 ln 0.8 + 0.2 ln 0.2) = 0.5004
    # ET: 3 and 7: H = -(0.3 ln 0.3 + 0.7 ln 0.7) = 0.6109
    assert [(e["country"], e["n"], e["distinct_cities"]) for e in lowest] == [("US", 10, 2), ("ET", 10, 2)]
    assert lowest[0]["entropy"] == pytest.approx(0.5004, abs=1e-4) and lowest[0]["top_share"] == 0.8
    assert lowest[1]["entropy"] == pytest.approx(0.6109, abs=1e-4) and lowest[1]["top_share"] == 0.7
    lines = "\n".join(fairness_markdown(block))
    assert "| income | 2 | High income 80.00 | Low income 30.00 | 50.00 [" in lines


def test_over_prediction_from_city_texts_without_coordinates() -> None:
    """Answers with a city and no coordinates count by their folded city text."""
    samples = [Sample(id=f"s{i}", lat=48.8566, lon=2.3522, labels={"country": "FR"}) for i in range(6)]
    cities = ["Paris", "PARIS", "Lyon", "Paris", " paris ", "Nice"]
    records = {
        s.id: Trajectory(sample_id=s.id, model="m", prediction=Prediction(city=c, status="ok"))
        for s, c in zip(samples, cities, strict=True)
    }
    run = score_run(samples, records, get_protocol("default"))
    groupings, notes = group_codes(run)
    block = fairness_block(run, RowArrays.of(run), groupings, notes=notes)
    (fr,) = block["over_prediction"]["lowest_entropy"]
    # paris 4, lyon 1, nice 1 of 6: H = -(4/6 ln 4/6 + 2 * 1/6 ln 1/6) = 0.8676
    assert (fr["country"], fr["n"], fr["distinct_cities"], fr["top_city"]) == ("FR", 6, 3, "paris")
    assert fr["entropy"] == pytest.approx(0.8676, abs=1e-4) and fr["top_share"] == pytest.approx(0.6667)


def test_country_accuracy_is_the_headline_without_truth_points() -> None:
    """Samples with a country label and no coordinates: the disparity compares country accuracy."""
    samples, records = [], {}
    for i in range(24):
        cc = ("US", "ET")[i % 2]
        samples.append(Sample(id=f"s{i}", labels={"country": cc}))
        said = cc if i < 16 else "FR"  # 8 of 12 US right, 8 of 12 ET right
        records[f"s{i}"] = Trajectory(sample_id=f"s{i}", model="m", prediction=Prediction(country=said))
    run = score_run(samples, records, get_protocol("default"))
    groupings, notes = group_codes(run)
    arrays = RowArrays.of(run)
    block = fairness_block(run, arrays, groupings, notes=notes)
    assert block["metric"] == "country_acc"
    assert block["by_country"] == {"ET": {"n": 12, "value": 66.6667}, "US": {"n": 12, "value": 66.6667}}
    d = block["groupings"]["income"]["disparity"]
    assert d["gap"] == pytest.approx(0.0) and d["headline"] == pytest.approx(66.6667)  # 16 / 24


def test_choropleth_colours() -> None:
    assert [accuracy_colour(v) for v in (None, 0.0, 19.99, 20.0, 99.0, 100.0)] == [
        "#e6e6e6",
        "#d7191c",
        "#d7191c",
        "#fdae61",
        "#1a9641",
        "#1a9641",
    ]
    shapes = {c["code"]: c for c in choropleth({"FR": {"n": 3, "value": 66.7}}, "acc@25km")}
    if "FR" in shapes:  # shapes come from the gazetteer
        assert shapes["FR"]["fill"] == "#a6d96a" and shapes["FR"]["title"] == "FR: 66.70 % acc@25km (n=3)"


PLAN = {
    "paris": {"lat": 48.8566, "lon": 2.3522, "country": "France", "city": "Paris"},
    "berlin": {"lat": 52.52, "lon": 13.405, "country": "Germany"},
    "tokyo": {"lat": 35.6762, "lon": 139.6503},
    "nyc": {"lat": 30.0, "lon": -90.0},
    "sydney": {"raise": "endpoint down"},
    "cairo": {"lat": 30.0444, "lon": 31.2357},
    "lima": {"lat": 0.0, "lon": 0.0},
    "delhi": {"lat": 19.07, "lon": 72.87},
}


def test_report_carries_fairness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", PLAN)))
    config = tmp_path / "eval.yaml"
    config.write_text(yaml.safe_dump({"dataset": str(data), "agent_fn": "eval_fake_agent:planned"}))
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, ["eval", "--config", str(config), "--out", str(run_dir), "--no-report"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["report", str(run_dir), "--no-plots"])
    assert result.exit_code == 0, result.output
    summary = json.loads((run_dir / "summary.json").read_text())
    # High income: paris, berlin, tokyo, nyc, sydney; 4 answers within 1 km of 5 (sydney failed)
    high = summary["breakdowns"]["income"]["High income"]
    assert high["n"] == 5 and high["acc@1km"] == pytest.approx(60.0)  # paris, berlin, tokyo: 3 / 5
    assert set(summary["breakdowns"]["m49_region"]) == {"Africa", "Americas", "Asia", "Europe", "Oceania"}
    assert summary["fairness"]["metric"] == "acc@25km"  # the city level every threshold preset has
    markdown = (run_dir / "summary.md").read_text()
    assert "## By income (accuracies in %)" in markdown and "## Fairness: disparity of acc@25km" in markdown
    page = (run_dir / "html" / "index.html").read_text()
    assert '<svg id="choropleth"' in page and 'id="by-income"' in page and "style=" not in page


def _predictions(path: Path) -> Path:
    # 10 truths in New York (US, High income), 8 answered exactly; 10 in Addis Ababa (ET, Low income),
    # 3 answered exactly; every other answer is at (0, 0), thousands of km away
    lines = []
    for i in range(20):
        lat, lon = (40.7128, -74.006) if i < 10 else (9.03, 38.74)
        right = i < 8 or 10 <= i < 13
        pred = (lat, lon) if right else (0.0, 0.0)
        row = {"id": f"s{i}", "pred_lat": pred[0], "pred_lon": pred[1], "true_lat": lat, "true_lon": lon}
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_score_by_income(tmp_path: Path) -> None:
    predictions = _predictions(tmp_path / "p.jsonl")
    result = CliRunner().invoke(
        app, ["score", str(predictions), "--protocol", "geoclip", "--by", "income", "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    groups = payload["groups"]
    assert (
        groups["High income"]["metrics"]["acc@25km"] == 80.0
        and groups["Low income"]["metrics"]["acc@25km"] == 30.0
    )
    assert groups["High income"]["n"] == 10 and groups["High income"]["ci95"]["acc@25km"][1] > 80.0
    d = payload["disparity"]
    assert (d["metric"], d["best"]["group"], d["worst"]["group"]) == ("acc@25km", "High income", "Low income")
    assert d["gap"] == pytest.approx(50.0) and d["ratio"] == pytest.approx(0.375)  # 80 - 30; 30 / 80
    assert d["headline"] == pytest.approx(55.0) and d["macro_mean"] == pytest.approx(55.0)  # 11 / 20
    table = CliRunner().invoke(
        app, ["score", str(predictions), "--protocol", "geoclip", "--by", "m49_region"]
    )
    assert table.exit_code == 0 and "Africa" in table.stdout and "Americas" in table.stdout
    assert "disparity of acc@25km over 2 groups: best Americas 80.00 %, worst Africa 30.00 %" in table.stdout


def test_headline_threshold() -> None:
    assert headline_threshold((1.0, 25.0, 200.0, 750.0, 2500.0)) == 25.0  # the city level when scored
    assert headline_threshold((10.0, 0.5, 2.0)) == 2.0  # else the middle of 0.5, 2, 10
    assert headline_threshold((3.0,)) == 3.0  # GeoVista's one threshold
    with pytest.raises(ValueError, match="no headline threshold"):
        headline_threshold(())


def test_score_by_settlement_and_economy(tmp_path: Path) -> None:
    predictions = _predictions(tmp_path / "p.jsonl")
    out = CliRunner().invoke(
        app, ["score", str(predictions), "--protocol", "geoclip", "--by", "settlement", "--json"]
    )
    payload = json.loads(out.stdout)
    # New York and Addis Ababa both have over a million people: one group, so no disparity
    assert list(payload["groups"]) == ["metropolis (1M+)"] and "disparity" not in payload
    out = CliRunner().invoke(
        app, ["score", str(predictions), "--protocol", "geoclip", "--by", "economy", "--json"]
    )
    groups = json.loads(out.stdout)["groups"]
    # Natural Earth: the US "1. Developed region: G7", Ethiopia "7. Least developed region"
    assert {g: v["metrics"]["acc@25km"] for g, v in groups.items()} == {
        "developed": 80.0,
        "least developed": 30.0,
    }
