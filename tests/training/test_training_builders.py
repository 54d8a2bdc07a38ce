"""Difficulty filtering, stratified sampling and MCQ building: deterministic by seed, invariants hold."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from geosleuth.core.geo import destination
from geosleuth.core.records import Prediction, Sample, Trajectory, TrajectoryStatus
from geosleuth.training.data.filtering import (
    filter_trajectories,
    parse_phases,
    read_trajectory_records,
    write_filter_outputs,
)
from geosleuth.training.data.mcq import build_mcq, distractor_tiers
from geosleuth.training.data.sampling import (
    allocate_quotas,
    cell_population,
    country_facts,
    country_weights,
    read_road_csv,
    stratified_sample,
)

TRUTH = (47.3769, 8.5417)  # Zürich


def _run(sample_id: str, distances_km: list[float | None]) -> Trajectory:
    runs = []
    for d in distances_km:
        if d is None:
            pred = Prediction(status="failed")
            status = TrajectoryStatus.PARSE_FAILED
        else:
            lat, lon = destination(*TRUTH, 90.0, d)
            pred, status = Prediction(lat=lat, lon=lon, status="ok"), TrajectoryStatus.OK
        runs.append(Trajectory(sample_id=sample_id, model="m", prediction=pred, status=status))
    return Trajectory(sample_id=sample_id, model="m", samples=runs)


def _truths(ids: list[str]) -> dict[str, Sample]:
    return {i: Sample(id=i, lat=TRUTH[0], lon=TRUTH[1]) for i in ids}


def test_filter_writes_two_cumulative_phases(tmp_path: Path) -> None:
    records = [
        _run("easy", [0.1, 0.2, 0.3, 0.4]),  # all < 1 km at every threshold: dropped
        _run("hard", [5000.0, 9000.0, None, 8000.0]),  # never within 750 km: dropped
        _run("street", [0.5, 3.0, 30.0, 300.0]),  # mixed at 1 km -> phase I
        _run("city", [5.0, 5.0, 300.0, None]),  # 2/4 at 25 km -> phase I
        _run("region", [100.0, 100.0, 100.0, 500.0]),  # 3/4 at 200 km -> phase II only
        _run("country", [300.0, 300.0, 900.0, 900.0]),  # 2/4 at 750 km -> phase II only
        {"sample_id": "line 7", "reason": "invalid trajectory"},
    ]
    ids = ["easy", "hard", "street", "city", "region", "country"]
    result = filter_trajectories(records, _truths(ids))
    # SpotAgent: phase I = regimes {1, 25} km; phase II adds {200, 750} km (cumulative)
    assert [(t, ids_) for t, ids_ in result.phases] == [
        ((1.0, 25.0), ["street", "city"]),
        ((1.0, 25.0, 200.0, 750.0), ["street", "city", "region", "country"]),
    ]
    stats = {s.sample_id: s for s in result.stats}
    for regimes, kept in result.phases:
        for sid in kept:  # no pass@K = K or 0 survives at every regime of its phase
            assert any(0 < stats[sid].hits[t] < stats[sid].k for t in regimes)
    regimes = result.regime_counts()
    assert regimes["1km"] == {"all_correct": 1, "all_wrong": 4, "mixed": 1}
    assert regimes["750km"] == {"all_correct": 3, "all_wrong": 1, "mixed": 2}
    report = write_filter_outputs(result, tmp_path, _truths(ids))
    assert report["kept"] == 4 and report["dropped"] == 2 and report["failed_records"] == 1
    assert [p["count"] for p in report["phases"]] == [2, 4]
    phase1 = [json.loads(x) for x in (tmp_path / "phase1.jsonl").read_text().splitlines()]
    assert [p["id"] for p in phase1] == ["street", "city"] and phase1[0]["lat"] == TRUTH[0]
    phase2 = [json.loads(x)["id"] for x in (tmp_path / "phase2.jsonl").read_text().splitlines()]
    assert phase2 == ["street", "city", "region", "country"]
    assert len((tmp_path / "stats.jsonl").read_text().splitlines()) == 6


def test_parse_phases() -> None:
    assert parse_phases("1,25;200,750") == [(1.0, 25.0), (200.0, 750.0)]
    with pytest.raises(ValueError, match="phase"):
        parse_phases("1,25;;200")
    with pytest.raises(ValueError, match="phases"):
        parse_phases("1,x")


def test_filter_reports_missing_truth_and_reads_broken_lines(tmp_path: Path) -> None:
    path = tmp_path / "trajectories.jsonl"
    path.write_text(_run("a", [1.0, 2.0]).model_dump_json() + "\n{broken\n")
    records = read_trajectory_records(path)
    assert isinstance(records[1], dict) and "line 2" in records[1]["sample_id"]
    result = filter_trajectories(records, {})
    assert {f["reason"] for f in result.failed} >= {"no ground truth for this sample"}
    meta = Trajectory(sample_id="m", model="x", metadata={"ground_truth": {"lat": 1.0, "lon": 2.0}})
    assert filter_trajectories([meta], {}).stats[0].k == 1


def _dataset(n_per: dict[str, int], seed: int = 0) -> list[Sample]:
    centres = {
        "FR": (46.5, 2.5),
        "DE": (51.0, 10.0),
        "LU": (49.7, 6.1),
        "BR": (-10.0, -52.0),
        "IS": (64.9, -18.6),
    }
    rng = np.random.default_rng(seed)
    out = []
    for code, n in n_per.items():
        la, lo = centres[code]
        for i in range(n):
            out.append(
                Sample(
                    id=f"{code}{i}",
                    lat=la + rng.uniform(-1.5, 1.5),
                    lon=lo + rng.uniform(-1.5, 1.5),
                    labels={"country": code},
                )
            )
    return out


def test_quotas_sum_to_size_and_respect_availability() -> None:
    weights = {"A": 0.7, "B": 0.2, "C": 0.1}
    q = allocate_quotas(weights, {"A": 3, "B": 100, "C": 100}, 50)
    assert sum(q.values()) == 50 and q["A"] == 3
    assert q["B"] > q["C"]
    with pytest.raises(ValueError, match="asked for"):
        allocate_quotas(weights, {"A": 1, "B": 1, "C": 1}, 4)
    assert sum(allocate_quotas({"A": 0.0, "B": 0.0}, {"A": 5, "B": 5}, 7).values()) == 7


def test_country_weights_follow_road_population_area(tmp_path: Path) -> None:
    facts = country_facts(["FR", "LU"])
    w = country_weights(facts)
    assert w["FR"] > 0.9 and w["LU"] < 0.1
    assert facts["FR"].road_source == "proxy"
    csv_path = tmp_path / "roads.csv"
    csv_path.write_text("country,road_km\nFrance,1000000\nLuxembourg,3000\n")
    roads = read_road_csv(csv_path)
    facts_csv = country_facts(["FR", "LU", "DE"], roads)
    assert facts_csv["FR"].road_km == 1_000_000 and facts_csv["DE"].road_source == "proxy"
    bad = tmp_path / "bad.csv"
    bad.write_text("country,road_km\nFrance,lots\n")
    with pytest.raises(ValueError, match="bad.csv:2"):
        read_road_csv(bad)


def test_stratified_sample_is_reproducible_and_balanced() -> None:
    data = _dataset({"FR": 200, "DE": 200, "LU": 50, "BR": 40, "IS": 30})
    data.append(Sample(id="nocoords", labels={"country": "FR"}))
    lat = np.array([48.85, 46.0, 52.5, 49.6, -10.5])
    lon = np.array([2.35, 2.0, 13.4, 6.1, -52.5])
    cells = cell_population(lat, lon, np.array([2e6, 5e3, 3.5e6, 1e5, 10.0]))
    a = stratified_sample(data, 120, seed=7, cells=cells)
    b = stratified_sample(data, 120, seed=7, cells=cells)
    c = stratified_sample(data, 120, seed=8, cells=cells)
    assert [s.id for s in a.chosen] == [s.id for s in b.chosen]
    assert [s.id for s in a.chosen] != [s.id for s in c.chosen]
    assert len(a.chosen) == 120 == sum(a.quotas.values())
    assert len({s.id for s in a.chosen}) == 120
    counts = Counter(s.labels["country"] for s in a.chosen)
    assert counts == Counter({k: v for k, v in a.quotas.items() if v})
    assert counts["BR"] > counts["LU"]  # Brazil's area and roads outweigh Luxembourg's
    assert a.failed == [{"sample_id": "nocoords", "reason": "no coordinates"}]
    # cells with population are preferred over empty ones within a country
    fr = [s for s in stratified_sample(data, 30, seed=1, cells=cells).chosen if s.labels["country"] == "FR"]
    populated = sum(1 for s in fr if (int(np.floor(s.lat)), int(np.floor(s.lon))) in cells)
    assert populated >= len(fr) // 2


def test_mcq_distractors_never_contain_the_answer_and_are_seeded() -> None:
    samples = [
        Sample(id=f"s{i}", labels={"country": c}) for i, c in enumerate(["France", "Japan", "Iceland", "NZ"])
    ]
    samples.append(Sample(id="bad", labels={}))
    q1, failed = build_mcq(samples, seed=3)
    q2, _ = build_mcq(list(reversed(samples)), seed=3)
    q3, _ = build_mcq(samples, seed=4)
    assert failed == [{"sample_id": "bad", "reason": "country label missing or unresolvable"}]
    by_id = {q.id: q for q in q2}
    for q in q1:
        codes = q.metadata["choice_codes"]
        assert len(q.choices) == 4 == len(set(codes))
        assert codes.count(q.metadata["answer_code"]) == 1
        assert q.choices["ABCD".index(q.answer)] == q.labels["country"]
        assert q.answer_type == "choice"
        assert by_id[q.id].choices == q.choices  # independent of input order
    assert [q.choices for q in q1] != [q.choices for q in q3]
    france = next(q for q in q1 if q.metadata["answer_code"] == "FR")
    neighbours = set(distractor_tiers("FR")[0].codes)
    assert set(france.metadata["choice_codes"]) - {"FR"} <= neighbours
    assert "FR" not in {c for t in distractor_tiers("FR") for c in t.codes}
