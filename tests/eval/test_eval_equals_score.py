"""One engine: for every protocol, `eval`'s summary equals `geosleuth score` on the same predictions,
figure by figure, with answers just inside and just outside every threshold and unanswered samples."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from eval_data import make_image, write_plan
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.core.geo import distance_km
from geosleuth.core.records import Prediction, Sample, Trajectory
from geosleuth.eval.report.scores import score_run
from geosleuth.eval.report.summary import protocol_metrics
from geosleuth.scoring import get_protocol, score_file
from geosleuth.scoring.protocols import PROTOCOLS

SCORED = [name for name, p in PROTOCOLS.items() if p.file_scorer is None]
STEP = 1e-3
"""Answers sit at t·(1 − STEP) and t·(1 + STEP) km from the truth: just inside and just outside."""


def _north_of(lat: float, lon: float, km: float, protocol: str) -> float:
    """The latitude due north of (lat, lon) at ``km`` under the protocol's own distance (bisection)."""
    chosen = get_protocol(protocol)
    lo, hi = lat, 89.0
    for _ in range(200):
        mid = (lo + hi) / 2
        d = float(distance_km(lat, lon, mid, lon, method=chosen.distance, radius_km=chosen.radius_km))
        lo, hi = (mid, hi) if d < km else (lo, mid)
    return (lo + hi) / 2


def _run(tmp_path: Path, protocol: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict]:
    thresholds = get_protocol(protocol).thresholds
    data = tmp_path / "data"
    plan: dict[str, dict] = {}
    data.mkdir(parents=True)
    with (data / "data.csv").open("w", newline="") as h:
        writer = csv.writer(h)
        writer.writerow(["id", "image", "lat", "lon", "country", "city"])
        i = 0
        for t in thresholds:
            for side in (1 - STEP, 1 + STEP):
                sid, lat, lon = f"s{i:02d}", 45.0, 10.0 + i
                make_image(data / "images" / f"{sid}.jpg", i)
                writer.writerow([sid, f"{sid}.jpg", lat, lon, "France", "Paris"])
                plat = _north_of(lat, lon, t * side, protocol)
                answer = {"lat": plat, "lon": lon, "city": "Paris", "country": "France"}
                plan[sid] = {**answer, "raw": json.dumps(answer)}
                i += 1
        for k, step in enumerate(({"status": "parse_failed"}, None)):  # failed, and never answered
            sid = f"u{k}"
            make_image(data / "images" / f"{sid}.jpg", 50 + k)
            writer.writerow([sid, f"{sid}.jpg", 45.0, -60.0 - k, "France", "Paris"])
            plan[sid] = step or {}
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", plan)))
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["eval", str(data), "--out", str(run_dir), "--agent-fn", "eval_fake_agent:planned"]
        + ["--protocol", protocol, "--concurrency", "1", "--no-report"],
    )
    assert result.exit_code == 0, result.output
    # u1's record is taken out of the log: a sample the run never answered
    lines = (run_dir / "trajectories.jsonl").read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["sample_id"] != "u1"]
    (run_dir / "trajectories.jsonl").write_text("".join(line + "\n" for line in kept))
    result = CliRunner().invoke(app, ["report", str(run_dir), "--no-html", "--no-plots"])
    assert result.exit_code == 0, result.output
    return run_dir, json.loads((run_dir / "summary.json").read_text())


@pytest.mark.parametrize("protocol", SCORED)
def test_eval_summary_equals_score_figure_by_figure(
    protocol: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir, summary = _run(tmp_path, protocol, monkeypatch)
    scored = score_file(
        run_dir / "trajectories.jsonl", get_protocol(protocol), truth_path=run_dir / "samples.jsonl"
    ).score
    figures = {k: (v["value"] if isinstance(v, dict) else v) for k, v in summary["metrics"].items()}
    assert set(figures) == set(scored.metrics)  # exactly the protocol's figures, nothing else
    for name, value in scored.metrics.items():
        if value != value:  # NaN: a figure the data does not define is null in the summary
            assert figures[name] is None, name
        else:
            assert figures[name] == pytest.approx(value, rel=1e-6, abs=1e-6), name
    assert summary["n_parsed"] == scored.parsed and summary["n_samples"] == scored.n
    assert summary["status_counts"] == {"missing": 1, "ok": scored.n - 2, "parse_failed": 1}


@pytest.mark.parametrize("protocol", ["twm", "geoclip", "g3"])
def test_threshold_figures_by_hand(protocol: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Samples in threshold order, one just inside and one just outside each threshold t_k, then
    two unanswered: below t_k lie both answers of every smaller threshold and the inside one of
    t_k, so acc@t_k = (2k + 1) / n with n = 2·len(thresholds) + 2 (`<` and `<=` agree here;
    G3's unanswered sit at (0, 0), far from every truth). Hand count, not the code's."""
    _, summary = _run(tmp_path, protocol, monkeypatch)
    thresholds = get_protocol(protocol).thresholds
    n = 2 * len(thresholds) + 2
    from geosleuth.core.metrics import threshold_name

    for k, t in enumerate(thresholds):
        assert summary["metrics"][threshold_name(t)]["value"] == pytest.approx(
            100 * (2 * k + 1) / n, abs=1e-6
        )
    assert ("geoguessr" in summary["metrics"]) is False  # none of these defines a GeoGuessr score


def _answered(sid: str, answer: dict) -> Trajectory:
    """A trajectory whose agent parsed coordinates, with its final answer text as written."""
    parsed = Prediction(lat=answer["lat"], lon=answer["lon"], status="ok", raw=json.dumps(answer))
    return Trajectory(sample_id=sid, model="m", prediction=parsed)


def test_a_strict_protocol_reads_the_answer_text_not_the_agents_parse() -> None:
    """TWM credits only a first JSON object with lat, lon, city and country: the answer without a
    city is unparsed and wrong, whatever coordinates the agent loop read from it."""
    samples = [Sample(id="a", lat=45.0, lon=10.0), Sample(id="b", lat=45.0, lon=11.0)]
    records = {
        "a": _answered("a", {"lat": 45.0, "lon": 10.0, "city": "X", "country": "Italy"}),
        "b": _answered("b", {"lat": 45.0, "lon": 11.0, "country": "Italy"}),
    }
    run = score_run(samples, records, get_protocol("twm"))
    figures = protocol_metrics(run.file)
    assert figures["acc@0.5km"]["value"] == 50.0  # a at 0 km; b unparsed: 1 of 2
    assert run.file.score.parsed == 1 and run.columns.agent_answered == 2
    assert "geoguessr" not in figures  # Thinking with Map defines none


def test_pigeon_rounds_each_rows_geoguessr_points() -> None:
    """PIGEON rounds per row: 5000·exp(−d / 1492.7) = 4999.6 at d = −1492.7·ln(0.99992) ≈ 0.11942 km,
    rounded to 5000; the mean of two such rows is 5000 (4999.6 unrounded)."""
    d = -1492.7 * math.log(0.99992)
    step = math.degrees(d / 6378.137)  # haversine on R = 6378.137 km due north: d = R·Δφ
    samples = [Sample(id=s, lat=10.0, lon=20.0 + i) for i, s in enumerate("ab")]
    records = {
        s: _answered(s, {"lat": 10.0 + step, "lon": 20.0 + i, "city": "X", "country": "Y"})
        for i, s in enumerate("ab")
    }
    figures = protocol_metrics(score_run(samples, records, get_protocol("pigeon")).file)
    assert figures["geoguessr"] == 5000.0
