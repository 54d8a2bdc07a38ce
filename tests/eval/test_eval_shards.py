"""`eval --shard I/N` jobs and `geosleuth merge`: the merged run reports exactly like one piece."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_data import make_csv_dataset, write_plan
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.eval.run.config import parse_shard

N = 24
runner = CliRunner()


@pytest.fixture()
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    places = [(f"p{i:02d}", -60.0 + 5 * i, -170.0 + 14 * i, "", "") for i in range(N)]
    plan = {
        sid: {"raise": "boom"} if i % 7 == 0 else {"lat": lat + 0.3 * i, "lon": lon, "confidence": i / N}
        for i, (sid, lat, lon, _, _) in enumerate(places)
    }
    plan["p05"] = {"lat": 0.0, "lon": 0.0, "tools": [["zoom", True, False], ["geocode", False, True]]}
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", plan)))
    return make_csv_dataset(tmp_path / "bench", places)


def _eval(data: Path, out: Path, *extra: str) -> None:
    argv = ["eval", str(data), "--out", str(out), "--agent-fn", "eval_fake_agent:planned", *extra]
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def test_merged_shards_report_like_one_run(bench: Path, tmp_path: Path) -> None:
    whole, sharded = tmp_path / "whole", tmp_path / "sharded"
    _eval(bench, whole)
    for i in range(3):
        _eval(bench, sharded, "--shard", f"{i}/3", "--no-report")
    shard_sizes = [
        len((sharded / "shards" / f"{i}-of-3" / "samples.jsonl").read_text().splitlines()) for i in range(3)
    ]
    assert sum(shard_sizes) == N and all(0 < n < N for n in shard_sizes)
    (sharded / "shards" / "1-of-3" / "images" / "p99").mkdir(parents=True)
    (sharded / "shards" / "1-of-3" / "images" / "p99" / "crop.png").write_bytes(b"png")

    result = runner.invoke(app, ["merge", str(sharded)])
    assert result.exit_code == 0, result.output
    assert f"merged 3 shards: {N} samples, {N} records, 1 tool images linked" in result.output
    one, merged = _summary(whole), _summary(sharded)
    for key in ("metrics", "breakdowns", "calibration", "status_counts", "n_samples", "complete"):
        assert merged[key] == one[key], key
    wall_clock = ("latency_s",)  # failed samples keep their measured time, which no two runs share
    assert {k: v for k, v in merged["tools"].items() if k not in wall_clock} == {
        k: v for k, v in one["tools"].items() if k not in wall_clock
    }
    assert (sharded / "samples.jsonl").read_text() == (whole / "samples.jsonl").read_text()
    assert (sharded / "images" / "p99" / "crop.png").read_bytes() == b"png"
    manifest = json.loads((sharded / "run.json").read_text())
    assert manifest["merged"]["shards"] == 3 and manifest["config"]["shard"] is None
    assert manifest["dataset"]["n_selected"] == N and "shard" not in manifest["dataset"]

    again = runner.invoke(app, ["merge", str(sharded), "--no-report"])  # repeatable
    assert again.exit_code == 0 and f"{N} records" in again.output


def test_merge_refuses_incomplete_or_mismatched_shards(bench: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    _eval(bench, out, "--shard", "0/3", "--no-report")
    report = runner.invoke(app, ["report", str(out)])
    assert report.exit_code == 2 and "geosleuth merge" in report.output
    missing = runner.invoke(app, ["merge", str(out)])
    assert missing.exit_code == 2 and "2 of 3 shards have not run yet: 1/3, 2/3" in missing.output
    _eval(bench, out, "--shard", "1/3", "--no-report")
    _eval(bench, out, "--shard", "2/3", "--no-report", "--limit", "10")
    uneven = runner.invoke(app, ["merge", str(out)])
    assert uneven.exit_code == 2 and "exactly once" in uneven.output
    _eval(bench, out, "--shard", "0/2", "--no-report")
    mixed = runner.invoke(app, ["merge", str(out)])
    assert mixed.exit_code == 2 and "mixes shard counts [2, 3]" in mixed.output
    own = tmp_path / "own"
    _eval(bench, own, "--no-report")
    (own / "shards" / "0-of-1").mkdir(parents=True)
    refused = runner.invoke(app, ["merge", str(own)])
    assert refused.exit_code == 2 and "holds a run of its own" in refused.output


def test_a_shard_resumes_from_its_own_directory(bench: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    _eval(bench, out, "--shard", "1/2", "--no-report", "--limit", "8")
    log = out / "shards" / "1-of-2" / "trajectories.jsonl"
    done = log.read_text().splitlines()
    log.write_text("\n".join(done[:-1]) + "\n")  # as if killed before the last record
    result = runner.invoke(app, ["eval", "--resume", "--out", str(out), "--shard", "1/2", "--no-report"])
    assert result.exit_code == 0, result.output
    assert "ran 1 sample(s)" in result.output and len(log.read_text().splitlines()) == len(done)


def test_shard_specs_are_checked() -> None:
    assert parse_shard(" 3 / 8 ") == (3, 8)
    for bad in ("8/8", "1/0", "-1/4", "a/b", "2"):
        with pytest.raises(ValueError, match="shard"):
            parse_shard(bad)
    result = runner.invoke(app, ["eval", "x.csv", "--out", "o", "--shard", "4/4"])
    assert result.exit_code == 2 and "0 <= I < N" in result.output
    ray = runner.invoke(app, ["eval", "x.csv", "--out", "o", "--shard", "0/4", "--backend", "ray"])
    assert ray.exit_code == 2 and "ray backend shards by itself" in ray.output
