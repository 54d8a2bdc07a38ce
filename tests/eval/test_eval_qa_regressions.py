"""Regressions found by end-to-end QA of `geosleuth datasets validate` / `eval` / `report`."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from eval_data import make_csv_dataset, make_image
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.core.records import Prediction, Sample, ToolCallRecord, Trajectory, Turn, Usage
from geosleuth.eval.datasets.loading import load_dataset
from geosleuth.eval.report.html import MAP_H, MAP_W, _turns_html, map_extent, world_map_svg
from geosleuth.eval.report.scores import ScoreRow, protocol_for, score_run
from geosleuth.eval.report.summary import tool_metrics
from geosleuth.eval.report.write import markdown
from geosleuth.eval.run.config import EvalConfig, Price, build_manifest, write_manifest
from geosleuth.eval.run.store import RunDirError
from geosleuth.testing import FakeOpenAIServer, error


def _write_csv(path: Path, rows: list[list[object]]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "image", "lat", "lon"])
        writer.writerows(rows)
    return path


def test_image_paths_relative_to_the_table_are_not_confused_by_equal_stems(tmp_path: Path) -> None:
    make_image(tmp_path / "images" / "a" / "1.jpg", 1)
    make_image(tmp_path / "images" / "b" / "1.jpg", 2)
    table = _write_csv(tmp_path / "d.csv", [["x", "images/a/1.jpg", 1, 2], ["y", "images/b/1.jpg", 3, 4]])
    ds = load_dataset(table)
    assert [Path(s.image).parent.name for s in ds.samples] == ["a", "b"]


def test_bad_rows_are_numbered_from_one_and_show_the_path_as_written(tmp_path: Path) -> None:
    make_image(tmp_path / "images" / "ok.jpg", 1)
    table = _write_csv(tmp_path / "d.csv", [["ok", "images/ok.jpg", 1, 2], ["bad", "images/nope.jpg", 1, 2]])
    (problem,) = [str(p) for p in load_dataset(table).missing_images]
    assert problem.startswith("row 2 (id bad)")
    assert "images/images" not in problem and problem.endswith(str(tmp_path / "images" / "nope.jpg"))


def test_manifest_names_the_tool_providers_of_the_builtin_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEOSLEUTH_SEARCH_PROVIDER", "tavily")
    manifest = build_manifest(EvalConfig(dataset="d.csv", out="run", model="m"), {})
    assert "search:tavily" in manifest["providers"] and "geocode:offline" in manifest["providers"]


def test_markdown_breakdown_keeps_every_metric_in_threshold_order() -> None:
    group = {"n": 2, **{f"acc@{k}km": 0.5 for k in (1, 10, 25, 50, 100, 200, 750, 2500)}, "median_km": 3.0}
    tools = {
        "per_tool": {},
        "turns_per_sample": 1,
        "prompt_tokens_per_sample": 1,
        "completion_tokens_per_sample": 1,
        "latency_s": {"p50": 1},
        "cost_usd": None,
    }
    summary = {
        "n_finished": 2,
        "n_samples": 2,
        "n_failed": 0,
        "protocol": {"name": "default"},
        "metrics": {},
        "status_counts": {"ok": 2},
        "tools": tools,
        "breakdowns": {"continent": {"Europe": group}},
    }
    header = next(line for line in markdown(summary).splitlines() if line.startswith("| continent"))
    assert header == "| continent | n | " + " | ".join(k for k in group if k != "n") + " |"


def test_sample_images_are_absolute_whatever_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_image(tmp_path / "bench" / "images" / "a.jpg", 1)
    _write_csv(tmp_path / "bench" / "d.csv", [["a", "images/a.jpg", 1, 2]])
    monkeypatch.chdir(tmp_path / "bench")
    here = load_dataset("d.csv")
    monkeypatch.chdir(tmp_path)
    there = load_dataset("bench/d.csv")
    assert Path(here.samples[0].image).is_absolute() and here.samples[0].image == there.samples[0].image
    assert here.fingerprint == there.fingerprint


def _row(truth: tuple[float, float], pred: tuple[float, float] | None) -> ScoreRow:
    return ScoreRow("x", "ok", "coordinates", *truth, *(pred or (None, None)), 1.0, None, None, None)


def test_error_map_frames_a_regional_benchmark_instead_of_the_whole_world() -> None:
    rows = [_row((47.05, 8.31), (41.39, 2.17)), _row((59.91, 10.75), None), _row((38.72, -9.14), None)]
    x, y, width, height = map_extent(rows)
    assert width < MAP_W / 3 and height == pytest.approx(width * MAP_H / MAP_W)
    for lat, lon in [(47.05, 8.31), (41.39, 2.17), (59.91, 10.75), (38.72, -9.14)]:
        px, py = (lon + 180) / 360 * MAP_W, (90 - lat) / 180 * MAP_H
        assert x < px < x + width and y < py < y + height
    svg = world_map_svg(rows, set())
    assert f'viewBox="{x:.1f} {y:.1f} {width:.1f} {height:.1f}"' in svg
    assert map_extent([]) == (0.0, 0.0, MAP_W, MAP_H)


def _worked(prompt_tokens: int) -> Trajectory:
    turn = Turn(
        index=0,
        tool_calls=[ToolCallRecord(name="geocode"), ToolCallRecord(name="web_search", ok=False)],
        usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=5),
    )
    prediction = Prediction(lat=1, lon=2, status="ok")
    return Trajectory(sample_id="a", model="m", turns=[turn], prediction=prediction)


def test_per_sample_row_counts_the_work_of_all_n_samples() -> None:
    aggregate = Trajectory(
        sample_id="a",
        model="m",
        prediction=Prediction(lat=1, lon=2, status="ok"),
        samples=[_worked(10), _worked(20), _worked(30)],
        aggregator="medoid",
    )
    sample = Sample(id="a", lat=1, lon=2)
    (row,) = score_run([sample], {"a": aggregate}, protocol_for(None, [sample]))
    assert (row.turns, row.tool_calls, row.tool_errors) == (3, 6, 3)
    assert (row.prompt_tokens, row.completion_tokens) == (60, 15)


def test_verifier_tokens_count_in_tokens_and_cost() -> None:
    aggregate = Trajectory(
        sample_id="a",
        model="m",
        samples=[_worked(1000), _worked(1000)],
        aggregator="verifier:judge",
        metadata={"verifier": {"model": "judge", "usage": {"prompt_tokens": 500, "completion_tokens": 100}}},
    )
    prices = {"m": Price(prompt=1.0, completion=2.0), "judge": Price(prompt=10.0, completion=20.0)}
    tools = tool_metrics({"a": aggregate}, prices)
    assert tools["prompt_tokens_per_sample"] == 2500 and tools["completion_tokens_per_sample"] == 110
    assert tools["cost_usd"] == pytest.approx((2000 * 1 + 10 * 2 + 500 * 10 + 100 * 20) / 1e6)


def test_eval_exits_non_zero_when_every_sample_hits_a_model_error(tmp_path: Path) -> None:
    dataset = make_csv_dataset(tmp_path / "bench")
    with FakeOpenAIServer(default=error(400, "no such model")) as server:
        result = CliRunner().invoke(
            app,
            ["eval", str(dataset), "--model", "m", "--base-url", server.base_url]
            + ["--out", str(tmp_path / "run"), "--limit", "2", "--no-report"],
        )
    assert result.exit_code == 1, result.output
    assert "failed with model errors" in result.output
    assert len((tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()) == 2


def test_moved_dataset_keeps_its_fingerprint(tmp_path: Path) -> None:
    make_image(tmp_path / "a" / "images" / "x.jpg", 1)
    _write_csv(tmp_path / "a" / "d.csv", [["x", "images/x.jpg", 1, 2]])
    before = load_dataset(tmp_path / "a" / "d.csv").fingerprint
    (tmp_path / "a").rename(tmp_path / "b")
    assert load_dataset(tmp_path / "b" / "d.csv").fingerprint == before


def test_resuming_with_another_model_is_refused(tmp_path: Path) -> None:
    info = {"fingerprint": "sha256:0"}
    write_manifest(tmp_path, build_manifest(EvalConfig(dataset="d", out="r", model="a"), info))
    write_manifest(tmp_path, build_manifest(EvalConfig(dataset="d", out="r", model="a", concurrency=4), info))
    with pytest.raises(RunDirError, match="model 'a' → 'b'"):
        write_manifest(tmp_path, build_manifest(EvalConfig(dataset="d", out="r", model="b"), info))


def test_trajectory_page_has_no_empty_text_box_for_a_tool_call_only_turn(tmp_path: Path) -> None:
    call = ToolCallRecord(name="geocode", result_text="Luzern")
    turns = [Turn(index=0, text="", tool_calls=[call]), Turn(index=1, text="done")]
    html = _turns_html(tmp_path, Trajectory(sample_id="a", model="m", turns=turns))
    assert "<pre></pre>" not in html and "<pre>done</pre>" in html


def test_eval_out_naming_a_file_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    dataset = make_csv_dataset(tmp_path / "bench")
    (tmp_path / "taken").write_text("")
    result = CliRunner().invoke(app, ["eval", str(dataset), "--out", str(tmp_path / "taken"), "--no-report"])
    assert result.exit_code == 2 and "File exists" in result.output
    assert not isinstance(result.exception, OSError)


@pytest.mark.parametrize("flags", [["--samples", "0"], ["--concurrency", "0"], ["--verifier", "v"]])
def test_invalid_run_settings_fail_before_the_run_directory_exists(tmp_path: Path, flags: list[str]) -> None:
    dataset = make_csv_dataset(tmp_path / "bench")
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["eval", str(dataset), "-m", "m", "--out", str(out), *flags])
    assert result.exit_code == 2 and "Value error" not in result.output
    assert not out.exists()
