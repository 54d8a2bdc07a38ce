"""The data builders the papers describe (issue 43 item 5), as `geosleuth data` commands: GeoVista's
filters, SpotAgent's stage-1 Visual QA records and random baseline, Thinking with Map's difficulty
labels, GeoAgent's locatability score. Judges run against the fake OpenAI-compatible server."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.core.records import ParseStatus, Prediction, Sample, Trajectory
from geosleuth.testing import FakeOpenAIServer, reply
from geosleuth.training.data.sampling import uniform_sample

runner = CliRunner()


def _dataset(folder: Path, sizes: dict[str, tuple[int, int]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "data.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "image", "lat", "lon", "country", "city"])
        for i, (sid, size) in enumerate(sizes.items()):
            Image.new("RGB", size, (20 * i, 90, 160)).save(folder / f"{sid}.jpg")
            writer.writerow([sid, f"{sid}.jpg", 47.05 + i, 8.31, "Switzerland", f"Town{i}"])
    return folder


def _judge(tmp_path: Path, command: str, replies: list[object], *extra: str) -> tuple[dict, int, Path]:
    out = tmp_path / f"{command}.jsonl"
    with FakeOpenAIServer(replies) as server:
        result = runner.invoke(
            app,
            ["data", command, str(tmp_path / "ds"), "-o", str(out), "--judge-model", "judge",
             "--judge-base-url", server.base_url, "--concurrency", "1", *extra],
        )  # fmt: skip
        asked = len(server.chat_requests)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1]), asked, out


def test_geovista_filter(tmp_path: Path) -> None:
    _dataset(
        tmp_path / "ds",
        {"a": (1200, 900), "b": (800, 600), "c": (1000, 1000), "d": (1500, 1000), "e": (1100, 1000)},
    )
    replies = [
        reply('{"localizable": true, "famous_landmark": false}'),  # a: kept
        reply('{"localizable": false, "famous_landmark": false}'),  # c: exactly 1,000,000 px, asked
        reply('{"localizable": true, "famous_landmark": true}'),  # d: a landmark
        reply("looks fine to me"),  # e: no JSON, failed
    ]
    summary, asked, out = _judge(tmp_path, "geovista-filter", replies)
    # b is 800 × 600 = 480,000 px < 1 M: dropped without a request; a, c, d, e are asked
    assert asked == 4
    assert summary["kept"] == 1 and summary["failed"] == 1
    assert summary["dropped"] == {
        "under 1,000,000 pixels": 1, "not localizable": 1, "easily localizable landmark": 1
    }  # fmt: skip
    (kept,) = [Sample.model_validate_json(line) for line in out.read_text().splitlines()]
    assert kept.id == "a" and kept.metadata["pixels"] == 1_080_000
    report = [json.loads(line) for line in out.with_suffix(".report.jsonl").read_text().splitlines()]
    assert [r["sample_id"] for r in report] == ["a", "b", "c", "d", "e"] and report[4]["error"]


def test_locatability(tmp_path: Path) -> None:
    _dataset(tmp_path / "ds", {"a": (64, 48), "b": (64, 48), "c": (64, 48)})
    replies = [reply('{"score": 7}'), reply('{"score": 3}'), reply('{"score": 11}')]  # 11 is off the scale
    summary, _, out = _judge(tmp_path, "locatability", replies, "--min-score", "5")
    assert summary["kept"] == 1 and summary["dropped"] == {"locatability 3 < 5": 1} and summary["failed"] == 1
    (kept,) = [Sample.model_validate_json(line) for line in out.read_text().splitlines()]
    assert kept.id == "a" and kept.metadata["locatability"] == 7


def test_visual_qa_records_from_a_fraction(tmp_path: Path) -> None:
    _dataset(tmp_path / "ds", {f"s{i:02d}": (32, 24) for i in range(40)})
    out = tmp_path / "vqa.jsonl"
    result = runner.invoke(
        app, ["data", "visual-qa", str(tmp_path / "ds"), "-o", str(out), "--fraction", "0.05"]
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 2  # 5 % of 40 images
    first = records[0]
    i = int(first["id"][1:])
    assert first["messages"][0]["content"].startswith("<image>") and Path(first["images"][0]).is_file()
    lines = ["Country: Switzerland", f"City: Town{i}", f"Latitude: {47.05 + i:.6f}", "Longitude: 8.310000"]
    assert first["messages"][1]["content"] == "<answer>\n" + "\n".join(lines) + "\n</answer>"
    again = tmp_path / "again.jsonl"
    runner.invoke(app, ["data", "visual-qa", str(tmp_path / "ds"), "-o", str(again), "--fraction", "0.05"])
    assert again.read_text() == out.read_text()  # same seed, same records


def test_uniform_sampling_is_uniform(tmp_path: Path) -> None:
    samples = [Sample(id=str(i), lat=0.0, lon=float(i)) for i in range(10)]
    counts = dict.fromkeys(range(10), 0)
    for seed in range(2000):
        drawn = uniform_sample(samples, 3, seed)
        assert len({s.id for s in drawn}) == 3
        for s in drawn:
            counts[int(s.id)] += 1
    # each sample is drawn with probability 3/10; over 2000 draws 600 ± 4.5 σ (σ = sqrt(2000·0.3·0.7) ≈ 20.5)
    assert all(abs(c - 600) < 92 for c in counts.values()), counts
    _dataset(tmp_path / "ds", {f"s{i}": (32, 24) for i in range(6)})
    out = tmp_path / "u.jsonl"
    result = runner.invoke(
        app, ["data", "sample", str(tmp_path / "ds"), "-n", "4", "-o", str(out), "--method", "uniform"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["written"] == 4 and len(out.read_text().splitlines()) == 4


def _run_dir(path: Path, truth: list[Sample], km_east: dict[str, float | None]) -> Path:
    path.mkdir(parents=True)
    (path / "samples.jsonl").write_text("".join(s.model_dump_json() + "\n" for s in truth))
    lines = []
    for sid, km in km_east.items():
        pred = (
            Prediction(lat=0.0, lon=math.degrees(km / 6371.0088), status=ParseStatus.OK)
            if km is not None
            else Prediction(status=ParseStatus.FAILED)
        )
        lines.append(Trajectory(sample_id=sid, model=path.name, prediction=pred).model_dump_json())
    (path / "trajectories.jsonl").write_text("\n".join(lines) + "\n")
    return path


def test_difficulty_from_several_runs(tmp_path: Path) -> None:
    truth = [Sample(id=i, lat=0.0, lon=0.0) for i in ("s1", "s2", "s3")]
    runs = [
        _run_dir(tmp_path / "m1", truth, {"s1": 5.0, "s2": 5.0, "s3": 9.9}),
        _run_dir(tmp_path / "m2", truth, {"s1": 8.0, "s2": 50.0, "s3": 10.5}),
        _run_dir(tmp_path / "m3", truth, {"s1": 500.0, "s2": None, "s3": 9.0}),
    ]
    out = tmp_path / "labels.jsonl"
    result = runner.invoke(app, ["data", "difficulty", *map(str, runs), "-o", str(out)])
    assert result.exit_code == 0, result.output
    labels = {r["sample_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    # s1: 5 and 8 km within 10 -> easy; s2: only 5 km (50 km and a failed run are not) -> hard;
    # s3: 9.9 and 9.0 km within, 10.5 not -> easy
    assert {k: v["difficulty"] for k, v in labels.items()} == {"s1": "easy", "s2": "hard", "s3": "easy"}
    assert labels["s2"]["runs_within"] == 1 and labels["s1"]["runs"] == 3
    one = runner.invoke(app, ["data", "difficulty", str(runs[0]), "-o", str(out)])
    assert one.exit_code == 1 and "give more runs" in one.output


@pytest.mark.parametrize("fraction", ["0", "1.5"])
def test_visual_qa_refuses_a_bad_fraction(tmp_path: Path, fraction: str) -> None:
    _dataset(tmp_path / "ds", {"a": (32, 24)})
    result = runner.invoke(app, ["data", "visual-qa", str(tmp_path / "ds"), "-o", str(tmp_path / "v.jsonl"),
                                 "--fraction", fraction])  # fmt: skip
    assert result.exit_code != 0
