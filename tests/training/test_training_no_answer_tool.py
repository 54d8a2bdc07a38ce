"""No training path offers a tool that reads the answer (``exif_gps``: the photo's own GPS tag)
unless the user opts in with ``--allow-exif``, whose help says why it is off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from PIL import Image
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.core.records import Trajectory
from geosleuth.training.data.sft import export_sft

runner = CliRunner()


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    Image.new("RGB", (300, 200), (1, 2, 3)).save(tmp_path / "a.jpg")
    src = tmp_path / "samples.jsonl"
    src.write_text(json.dumps({"id": "a", "image": "a.jpg", "lat": 48.85, "lon": 2.35}) + "\n")
    return src


@pytest.mark.parametrize("command", ["verl-tool-config", "export-verl", "export-swift", "export-sft"])
def test_allow_exif_help_says_why_it_is_off(command: str) -> None:
    import typer

    from geosleuth.cli.data import data_app

    group = typer.main.get_command(data_app)
    params = group.commands[command].params  # type: ignore[attr-defined]
    (option,) = [p for p in params if "--allow-exif" in p.opts]
    assert option.default is False and "learns to read the answer" in option.help


def test_tool_configs_and_exports_refuse_exif_gps_without_opt_in(tmp_path: Path, samples: Path) -> None:
    out = tmp_path / "tools.yaml"
    res = runner.invoke(app, ["data", "verl-tool-config", "-o", str(out), "--tools", "geocode,exif_gps"])
    assert res.exit_code == 1 and "can read the answer" in res.output and not out.exists()
    res = runner.invoke(
        app, ["data", "verl-tool-config", "-o", str(out), "--tools", "geocode,exif_gps", "--allow-exif"]
    )
    assert res.exit_code == 0 and "leak the answer" in res.output
    assert [t["config"]["tool"] for t in yaml.safe_load(out.read_text())["tools"]] == ["geocode", "exif_gps"]
    for command, target in (("export-verl", "t.parquet"), ("export-swift", "s.jsonl")):
        res = runner.invoke(
            app,
            [
                "data",
                command,
                str(samples),
                "-o",
                str(tmp_path / target),
                "--tools",
                "image_zoom_in_tool,exif_gps",
            ],
        )
        assert res.exit_code == 1 and "can read the answer" in res.output, command
    res = runner.invoke(
        app,
        [
            "data",
            "export-swift",
            str(samples),
            "-o",
            str(tmp_path / "s.jsonl"),
            "--tools",
            "exif_gps",
            "--allow-exif",
        ],
    )
    assert res.exit_code == 0
    (row,) = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert [t["function"]["name"] for t in json.loads(row["tools"])] == ["exif_gps"]


def test_default_tool_sets_never_include_exif_gps(tmp_path: Path) -> None:
    from geosleuth.training.toolcall import training_tools

    out = tmp_path / "tools.yaml"
    assert (
        runner.invoke(app, ["data", "verl-tool-config", "-o", str(out), "--tool-timeout", "5"]).exit_code == 0
    )
    assert {t["config"]["timeout_s"] for t in yaml.safe_load(out.read_text())["tools"]} == {5.0}
    for style in ("spotagent", "geovista", "thinking_with_map"):
        assert (
            runner.invoke(app, ["data", "verl-tool-config", "-o", str(out), "--prompt", style]).exit_code == 0
        )
        assert "exif_gps" not in out.read_text(), style
    assert "exif_gps" not in training_tools(["image_zoom_in_tool", "exif_gps", "ocr"])
    script = Path(__file__).resolve().parents[2] / "examples" / "training" / "verl" / "prepare_data.sh"
    assert "exif_gps" not in script.read_text()


def _trajectory(calls_exif: bool) -> Trajectory:
    call = {"id": "c1", "type": "function", "function": {"name": "exif_gps", "arguments": "{}"}}
    messages = [{"role": "user", "content": "Where?"}]
    if calls_exif:
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "GPS 48.85, 2.35"},
        ]
    messages.append({"role": "assistant", "content": '<answer>{"lat": 48.85, "lon": 2.35}</answer>'})
    return Trajectory(sample_id="x" if calls_exif else "y", model="m", messages=messages)


def test_sft_export_skips_trajectories_that_read_the_answer(tmp_path: Path) -> None:
    report = export_sft([_trajectory(True), _trajectory(False)], tmp_path / "sft.jsonl")
    assert report.written == 1 and report.skipped[0]["sample_id"] == "x"
    assert "exif_gps" in report.skipped[0]["reason"] and "--allow-exif" in report.skipped[0]["reason"]
    kept = export_sft([_trajectory(True)], tmp_path / "sft2.jsonl", allow_exif=True)
    assert kept.written == 1
