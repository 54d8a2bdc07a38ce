"""Hugging Face inputs (parquet with embedded images, save_to_disk) and N > 1 sample metrics."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from geosleuth.core.records import Prediction, Sample, Trajectory, TrajectoryStatus
from geosleuth.eval.datasets.loading import load_dataset
from geosleuth.eval.report.scores import score_run
from geosleuth.eval.report.summary import multi_sample_metrics
from geosleuth.scoring.protocols import get_protocol


def _jpeg(seed: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (seed * 30 % 256, 0, 0)).save(buffer, format="JPEG")
    return buffer.getvalue()


def test_parquet_with_embedded_images(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table(
        {
            "id": ["a", "b"],
            "image": [{"bytes": _jpeg(1), "path": None}, {"bytes": _jpeg(2), "path": None}],
            "latitude": [30.389, 48.85],
            "longitude": [-87.683, 2.35],
            "city": ["Foley", "Paris"],
            "country": ["USA", "France"],
        }
    )
    pq.write_table(table, tmp_path / "test.parquet")
    ds = load_dataset(tmp_path / "test.parquet")
    assert ds.format == "hf" and [s.id for s in ds.samples] == ["a", "b"]
    assert Path(ds.samples[0].image).read_bytes()[:2] == b"\xff\xd8"
    assert ds.samples[1].labels == {"country": "France", "city": "Paris"}


def test_save_to_disk_dataset_dict(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    features = datasets.Features(
        {
            "id": datasets.Value("string"),
            "image": datasets.Image(),
            "lat": datasets.Value("float64"),
            "lon": datasets.Value("float64"),
        }
    )
    rows = {"id": ["x"], "image": [Image.new("RGB", (8, 8))], "lat": [1.5], "lon": [2.5]}
    split = datasets.Dataset.from_dict(rows, features=features)
    datasets.DatasetDict({"test": split}).save_to_disk(str(tmp_path / "saved"))
    ds = load_dataset(tmp_path / "saved", images=tmp_path / "imgs")
    (sample,) = ds.samples
    assert (sample.lat, sample.lon) == (1.5, 2.5) and Path(sample.image).parent == tmp_path / "imgs"


def _traj(sid: str, points: list[tuple[float, float] | None], final: tuple[float, float]) -> Trajectory:
    subs = [
        Trajectory(
            sample_id=sid,
            model="m",
            prediction=Prediction(lat=p[0], lon=p[1]) if p else None,
            status=TrajectoryStatus.OK if p else TrajectoryStatus.PARSE_FAILED,
        )
        for p in points
    ]
    return Trajectory(
        sample_id=sid,
        model="m",
        samples=subs,
        aggregator="verifier:v",
        prediction=Prediction(lat=final[0], lon=final[1]),
    )


def test_pass_at_k_best_of_n_and_verifier() -> None:
    samples = [Sample(id="a", lat=0.0, lon=0.0), Sample(id="b", lat=0.0, lon=0.0)]
    near, far = (0.0, 0.001), (10.0, 10.0)
    trajectories = {"a": _traj("a", [far, near, None], far), "b": _traj("b", [far, far, far], far)}
    rows = score_run(samples, trajectories, get_protocol("default"))
    multi = multi_sample_metrics(rows, get_protocol("default"))
    assert multi["n"] == 3 and multi["aggregators"] == ["verifier:v"]
    assert multi["pass@k"]["acc@1km"] == pytest.approx({"1": 1 / 6, "2": 1 / 3, "3": 0.5}, abs=1e-6)
    assert multi["best@n"]["acc@1km"] == 0.5 and multi["aggregated"]["acc@1km"] == 0.0


def test_parquet_with_relative_image_paths(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "r.jpg").write_bytes(_jpeg(3))
    pq.write_table(
        pa.table({"id": ["r"], "image": ["pics/r.jpg"], "lat": [1.0], "lon": [2.0]}), tmp_path / "t.parquet"
    )
    (sample,) = load_dataset(tmp_path / "t.parquet").samples
    assert sample.image == str(tmp_path / "pics" / "r.jpg")
