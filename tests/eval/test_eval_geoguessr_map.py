"""`geosleuth eval --protocol geoguessr-map` over a GeoBench map folder: the run's GeoBench figures.

The map and answers are those of tests/scoring/test_geoguessr_map.py (the equator from (0, 0) to
(0, 90), figures derived by hand there): 20 % refusals, 60 % countries, points 4474, 1646, 4730
and 5000 (mean 3962.5, GeoBench's median 4730), km 111.195, 1111.951, 55.598, 0 (median 111.195).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from eval_data import make_image, write_plan
from typer.testing import CliRunner

from geosleuth.cli.app import app

DEG_KM = 6371.0088 * math.pi / 180
LOCATIONS = [  # id, truth country, truth lng, guess country, guess lng (None: the agent failed)
    ("1", "Gabon", 10.0, "gabonese republic", 11.0),
    ("2", "Congo (the Democratic Republic of the)", 20.0, "DRC", 30.0),
    ("3", "Kenya", 40.0, "Tanzania", 40.5),
    ("4", "Somalia", 50.0, None, None),
    ("5", "Maldives", 60.0, "Maldives", 60.0),
]


def test_eval_on_a_geoguessr_map_reports_geobench_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "equator"
    images = []
    for i, (sid, country, lng, _, _) in enumerate(LOCATIONS):
        make_image(folder / "images" / f"{sid}.jpg", i)
        images.append({"image_path": f"images/{sid}.jpg", "country": country, "lat": 0.0, "lng": lng})
    bounds = {"min": {"lat": 0.0, "lng": 0.0}, "max": {"lat": 0.0, "lng": 90.0}}
    (folder / "metadata.json").write_text(json.dumps({"bounds": bounds, "images": images}))
    plan = {
        sid: {"raise": "model refused"} if guess is None else {"lat": 0.0, "lon": glng, "country": guess}
        for sid, _, _, guess, glng in LOCATIONS
    }
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", plan)))
    out = tmp_path / "run"
    args = ["eval", str(folder), "--out", str(out), "--agent-fn", "eval_fake_agent:planned"]
    result = CliRunner().invoke(app, [*args, "--protocol", "geoguessr-map"])
    assert result.exit_code == 0, result.output
    block = json.loads((out / "summary.json").read_text())["geoguessr_map"]
    assert block["n"] == 5 and block["answered"] == 4
    assert block["refusal_rate"] == pytest.approx(20.0) and block["acc_country"] == pytest.approx(60.0)
    assert block["geoguessr_mean"] == pytest.approx(3962.5) and block["geoguessr_median"] == 4730.0
    assert block["median_km"] == pytest.approx(DEG_KM, abs=1e-3)
    assert block["mean_km"] == pytest.approx(11.5 * DEG_KM / 4, abs=1e-3)
    assert "## GeoGuessr map (GeoBench)" in (out / "summary.md").read_text()
    scored = CliRunner().invoke(
        app,
        ["score", str(out / "trajectories.jsonl"), "--protocol", "geoguessr-map"]
        + ["--map", str(folder / "metadata.json"), "--json"],
    )
    assert scored.exit_code == 0, scored.output
    metrics = json.loads(scored.output)["metrics"]  # the run's records, the truth from the map's images
    assert metrics["acc_country"] == pytest.approx(60.0) and metrics["geoguessr_median"] == 4730.0
