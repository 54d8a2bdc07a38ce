"""Regressions found by end-to-end QA of `geosleuth data …` through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from geosleuth.core.records import Prediction, Trajectory
from geosleuth.training.data.sft import sft_record


def test_sft_image_paths_are_absolute_for_a_relative_run_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    traj = Trajectory(
        sample_id="a",
        model="m",
        messages=[
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "images/a/t0.png"}}]},
            {"role": "assistant", "content": '{"lat": 1, "lon": 2}'},
        ],
        prediction=Prediction(lat=1, lon=2, status="ok"),
    )
    record = sft_record(traj, "llamafactory", "hermes", Path("run"))
    assert record["images"] == [str(tmp_path / "run" / "images" / "a" / "t0.png")]


def test_data_sample_reads_gazetteer_places_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    import geosleuth.gazetteer
    from geosleuth.cli.data import _gazetteer_cells

    class Gazetteer:
        def all_places(self) -> dict[str, np.ndarray]:
            return {
                "lat": np.array([48.85, 48.9, 35.7]),
                "lon": np.array([2.35, 2.3, 139.7]),
                "population": np.array([2e6, 1e5, 9e6]),
                "country_code": np.array(["FR", "FR", "JP"]),
            }

    monkeypatch.setattr(geosleuth.gazetteer, "get_gazetteer", Gazetteer)
    cells = _gazetteer_cells()
    assert set(cells) == {(48, 2), (35, 139)} and cells[(35, 139)] > 0


def test_data_commands_use_the_option_names_of_locate_and_eval(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from geosleuth.cli.app import app

    missing = str(tmp_path / "none.csv")
    runs = {
        "synthesize": ["data", "synthesize", missing, "-o", str(tmp_path / "s"), "--observer-model", "o"]
        + ["--planner-model", "p", "--observer-base-url", "http://127.0.0.1:9/v1"]
        + ["--planner-base-url", "http://127.0.0.1:9/v1"],
        "export-verl": [
            "data",
            "export-verl",
            missing,
            "-o",
            str(tmp_path / "v.parquet"),
            "--prompt",
            "direct",
        ],
        "filter": ["data", "filter", str(tmp_path), "--truth", missing],
    }
    for name, args in runs.items():
        result = CliRunner().invoke(app, args)
        assert result.exit_code != 0 and "No such option" not in result.output, (name, result.output)


def _answered_run(sample_id: str, lat: float, lon: float, index: int) -> Trajectory:
    return Trajectory(
        sample_id=sample_id,
        model="m",
        messages=[
            {"role": "user", "content": "Where?"},
            {"role": "assistant", "content": f'<answer>{{"lat": {lat}, "lon": {lon}}}</answer>'},
        ],
        prediction=Prediction(lat=lat, lon=lon, status="ok"),
        metadata={"sample_index": index},
    )


def test_export_sft_max_km_judges_each_sample_not_the_aggregate(tmp_path: Path) -> None:
    """With --samples N the aggregate can be right while some samples are thousands of km off:
    those samples must not become SFT data, and the right ones keep their sample number."""
    import json

    from typer.testing import CliRunner

    from geosleuth.cli.app import app
    from geosleuth.core.records import Sample

    near = [_answered_run("a", 48.85, 2.35, 0), _answered_run("a", 48.86, 2.34, 2)]
    far = _answered_run("a", 35.68, 139.69, 1)
    record = Trajectory(
        sample_id="a",
        model="m",
        prediction=Prediction(lat=48.85, lon=2.35, status="ok"),
        samples=[near[0], far, near[1]],
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "trajectories.jsonl").write_text(record.model_dump_json() + "\n")
    (run_dir / "samples.jsonl").write_text(Sample(id="a", lat=48.85, lon=2.35).model_dump_json() + "\n")
    out = tmp_path / "sft.jsonl"
    res = CliRunner().invoke(app, ["data", "export-sft", str(run_dir), "-o", str(out), "--max-km", "5"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a#0", "a#2"]
    assert all("139.69" not in json.dumps(r) for r in rows)
    assert "1 skipped" in res.output
