"""Regressions found by end-to-end QA of `geosleuth data …` through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from geosleuth.core.records import Prediction, Trajectory
from geosleuth.training.export_sft import sft_record


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
