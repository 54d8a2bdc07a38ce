"""verl parquet export, SFT export and the ``geosleuth data`` commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.core.records import Prediction, Sample, Trajectory, TrajectoryStatus
from geosleuth.training.data.sft import export_sft, sft_record
from geosleuth.training.verl.export import VerlExportOptions, export_verl, model_scale, smart_resize
from geosleuth.training.verl.reward import compute_score

ZOOM_SCHEMA = {
    "type": "function",
    "function": {
        "name": "image_zoom_in_tool",
        "description": "Zoom in.",
        "parameters": {
            "type": "object",
            "properties": {"bbox_2d": {"type": "array", "items": {"type": "integer"}}},
            "required": ["bbox_2d"],
        },
    },
}


@pytest.fixture()
def dataset(tmp_path: Path) -> Path:
    img_dir = tmp_path / "imgs"
    img_dir.mkdir()
    Image.new("RGB", (2000, 1500), (1, 2, 3)).save(img_dir / "a.jpg")
    Image.new("RGB", (100, 80), (9, 9, 9)).save(img_dir / "b.jpg")
    rows = [
        Sample(
            id="a",
            image=str(img_dir / "a.jpg"),
            lat=48.85,
            lon=2.35,
            labels={"country": "France", "city": "Paris"},
        ),
        Sample(id="b", image=str(img_dir / "b.jpg"), lat=35.68, lon=139.69, labels={"country": "Japan"}),
        Sample(id="c", image=str(img_dir / "missing.jpg"), lat=1.0, lon=2.0),
        Sample(id="d", image=str(img_dir / "b.jpg")),
    ]
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(s.model_dump_json() + "\n" for s in rows))
    return path


def _samples(path: Path) -> list[Sample]:
    return [Sample.model_validate_json(x) for x in path.read_text().splitlines()]


def test_export_verl_rows_round_trip(tmp_path: Path, dataset: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "train.parquet"
    options = VerlExportOptions(schemas=(ZOOM_SCHEMA,), pixel_budget=1_000_000)
    report = export_verl(_samples(dataset), out, options)
    assert report.written == 2
    assert {f["sample_id"] for f in report.failed} == {"c", "d"}
    df = pq.read_table(out).to_pandas()
    row = df.iloc[0]
    assert row["data_source"] == "geosleuth" and row["ability"] == "geolocation"
    prompt = list(row["prompt"])
    assert prompt[0]["role"] == "system" and "<answer>" in prompt[0]["content"]
    assert prompt[1]["content"].startswith("<image>")
    assert bytes(row["images"][0]["bytes"])[:2] == b"\xff\xd8"  # embedded JPEG
    gt = row["reward_model"]["ground_truth"]
    assert gt["lat"] == 48.85 and gt["levels"]["city"] == "Paris" and gt["levels"]["street"] is None
    create = row["extra_info"]["tools_kwargs"]["image_zoom_in_tool"]["create_kwargs"]
    # the Qwen processor's frame (sides snapped to 28 px), which the model's absolute boxes live in
    assert create["image"].endswith("a.jpg") and list(create["model_size"]) == [1148, 840]
    assert create["model_scale"] == pytest.approx(1148 / 2000)
    assert row["extra_info"]["need_tools_kwargs"]
    # the absolute-pixel bbox note tells the model the size it actually sees
    assert "1148" in prompt[0]["content"] and "840" in prompt[0]["content"]
    # the parquet ground truth (numpy-backed after pandas) feeds the verl reward directly
    answer = '<answer>{"lat": 48.85, "lon": 2.35}</answer>'
    assert compute_score(row["data_source"], answer, gt)["score"] == 1.0


def test_model_scale() -> None:
    assert model_scale((100, 100), 1_000_000) == 1.0
    assert model_scale((4000, 3000), 3_000_000) == pytest.approx(0.5)


def test_smart_resize_follows_the_qwen_processor_rule() -> None:
    assert smart_resize((1920, 1080), 28, 3136, 12_845_056) == (1932, 1092)  # rounded to 28
    assert smart_resize((1920, 1080), 28, 3136, 2_000_000) == (1876, 1036)  # then shrunk to the budget
    assert smart_resize((2000, 1500), 28, 3136, 1_000_000) == (1148, 840)
    assert smart_resize((20, 10), 28, 3136, 1_000_000) == (84, 56)  # grown to min_pixels
    assert smart_resize((1920, 1080), 32, 4096, 2_000_000) == (1856, 1056)  # Qwen3-VL's 32 px


def test_zoom_maps_from_the_exact_frame_the_model_saw() -> None:
    from geosleuth.tools.zoom import to_original_box

    frame = smart_resize((2000, 1500), 28, 3136, 1_000_000)
    box, _ = to_original_box([574, 420, 1148, 840], (2000, 1500), "absolute", 1148 / 2000, model_size=frame)
    assert (box.y1, box.x2, box.y2) == (750, 2000, 1500) and box.x1 in (999, 1000)  # float rounding
    scalar, _ = to_original_box([574, 420, 1148, 840], (2000, 1500), "absolute", 1148 / 2000)
    assert scalar.y1 == 731  # one scale for both axes is 19 px off vertically


def _trajectory(img: str) -> Trajectory:
    messages = [
        {"role": "system", "content": "You locate photos."},
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": img}}, {"type": "text", "text": "Where?"}],
        },
        {
            "role": "assistant",
            "content": "<think>Zoom on the sign.</think>",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "image_zoom_in_tool", "arguments": '{"bbox_2d": [0, 0, 10, 10]}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "zoomed"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "zoom1.png"}}]},
        {"role": "assistant", "content": '<answer>{"lat": 48.85, "lon": 2.35}</answer>'},
    ]
    return Trajectory(
        sample_id="a",
        model="m",
        messages=messages,
        prediction=Prediction(lat=48.85, lon=2.35, status="ok"),
        metadata={"tool_schemas": [ZOOM_SCHEMA]},
    )


def test_sft_hermes_trl(tmp_path: Path) -> None:
    rec = sft_record(_trajectory("q.jpg"), "trl", "hermes", tmp_path)
    roles = [m["role"] for m in rec["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    call_text = rec["messages"][2]["content"][0]["text"]
    assert (
        '<tool_call>\n{"name": "image_zoom_in_tool", "arguments": {"bbox_2d": [0, 0, 10, 10]}}\n</tool_call>'
        in call_text
    )
    tool_turn = rec["messages"][3]["content"]
    assert tool_turn[0] == {"type": "text", "text": "<tool_response>\nzoomed\n</tool_response>"}
    assert tool_turn[1] == {"type": "image"}
    assert rec["images"] == [str(tmp_path / "q.jpg"), str(tmp_path / "zoom1.png")]
    assert "tools" not in rec


def test_sft_openai_llamafactory_and_swift(tmp_path: Path) -> None:
    traj = _trajectory("/abs/q.jpg")
    lf = sft_record(traj, "llamafactory", "openai", None)
    assert [c["from"] for c in lf["conversations"]] == ["human", "function_call", "observation", "gpt"]
    assert json.loads(lf["conversations"][1]["value"]) == {
        "name": "image_zoom_in_tool",
        "arguments": {"bbox_2d": [0, 0, 10, 10]},
    }
    assert lf["conversations"][2]["value"] == "zoomed\n<image>"
    assert lf["system"] == "You locate photos." and lf["images"] == ["/abs/q.jpg", "zoom1.png"]
    assert json.loads(lf["tools"])[0]["name"] == "image_zoom_in_tool"
    sw = sft_record(traj, "swift", "openai", None)
    roles = [(m["role"], m.get("loss")) for m in sw["messages"]]
    assert roles == [
        ("system", None),
        ("user", False),
        ("assistant", True),
        ("tool_call", True),
        ("tool_response", False),
        ("assistant", True),
    ]
    assert sw["messages"][4]["content"] == "zoomed\n<image>"
    hermes = sft_record(traj, "swift", "hermes", None)
    assert all(m["role"] in ("system", "user", "assistant") for m in hermes["messages"])
    assert [m.get("loss") for m in hermes["messages"] if m["role"] == "assistant"] == [True, True]


def test_export_sft_skips_failures(tmp_path: Path) -> None:
    ok = _trajectory("q.jpg")
    failed = Trajectory(sample_id="f", model="m", status=TrajectoryStatus.MODEL_ERROR)
    empty = Trajectory(sample_id="e", model="m", messages=[{"role": "user", "content": "hi"}])
    multi = Trajectory(sample_id="k", model="m", samples=[ok, failed])
    out = tmp_path / "sft.jsonl"
    report = export_sft([ok, failed, empty, multi], out, "trl", "hermes")
    assert report.written == 2
    assert {s["sample_id"]: s["reason"] for s in report.skipped} == {
        "f": "status model_error",
        "e": "no assistant turn",
        "k#1": "status model_error",
    }
    ids = [json.loads(x)["id"] for x in out.read_text().splitlines()]
    assert ids == ["a", "k#0"]


runner = CliRunner()


def test_cli_export_verl(tmp_path: Path, dataset: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    res = runner.invoke(
        app, ["data", "export-verl", str(dataset), "-o", str(tmp_path / "t.parquet"), "--tools", ""]
    )
    assert res.exit_code == 0, res.output
    assert "wrote 2 rows" in res.output
    assert "tools_kwargs" not in pq.read_table(tmp_path / "t.parquet").to_pandas().iloc[0]["extra_info"]


def test_cli_export_verl_reward_style_and_chat_template(tmp_path: Path, dataset: Path) -> None:
    from geosleuth.agent.prompting import available_styles
    from geosleuth.training.qwen.chat_template import QWEN_VL_TOOL_TEMPLATE
    from geosleuth.training.verl.export import NO_REGION_STYLES, REGION_STYLES, style_for_reward

    pq = pytest.importorskip("pyarrow.parquet")
    assert set(available_styles()) == REGION_STYLES | NO_REGION_STYLES  # every style is classified
    assert style_for_reward(None, "hierarchical") == "geovista"
    assert style_for_reward(None, "semantic:gating=released") == "geoagent"
    assert style_for_reward(None, "step") == "spotagent" and style_for_reward(None, None) == "spotagent"
    with pytest.raises(ValueError, match="no region line"):
        style_for_reward("spotagent", "hierarchical")
    out = tmp_path / "v" / "t.parquet"
    res = runner.invoke(
        app, ["data", "export-verl", str(dataset), "-o", str(out), "--reward", "hierarchical"]
    )
    assert res.exit_code == 0, res.output
    assert "prompt style geovista" in res.output
    system = pq.read_table(out).to_pandas().iloc[0]["prompt"][0]["content"]
    assert "Province/State:" in system
    # tools are on (geovista's zoom + search): no --model, so the shipped tool template is written
    assert (tmp_path / "v" / "chat_template.jinja").read_text() == QWEN_VL_TOOL_TEMPLATE
    assert "custom_chat_template" in res.output
    bad = runner.invoke(
        app,
        [
            "data",
            "export-verl",
            str(dataset),
            "-o",
            str(out),
            "--prompt",
            "spotagent",
            "--reward",
            "semantic",
        ],
    )
    assert bad.exit_code != 0 and "no region line" in bad.output
    # a local model whose template fails the check: warned, the shipped one is used
    model = tmp_path / "qwen25vl"
    model.mkdir()
    (model / "chat_template.json").write_text(
        json.dumps({"chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"})
    )
    res = runner.invoke(app, ["data", "export-verl", str(dataset), "-o", str(out), "--model", str(model)])
    assert res.exit_code == 0 and "does not render the tool schemas" in res.output
    refused = runner.invoke(
        app,
        [
            "data",
            "export-verl",
            str(dataset),
            "-o",
            str(out),
            "--model",
            str(model),
            "--chat-template",
            "model",
        ],
    )
    assert refused.exit_code != 0
    (model / "chat_template.json").write_text(json.dumps({"chat_template": QWEN_VL_TOOL_TEMPLATE}))
    res = runner.invoke(app, ["data", "export-verl", str(dataset), "-o", str(out), "--model", str(model)])
    assert res.exit_code == 0 and "own (renders tools" in res.output


def test_cli_data_commands(tmp_path: Path, dataset: Path) -> None:
    res = runner.invoke(
        app, ["data", "build-mcq", str(dataset), "-o", str(tmp_path / "mcq.jsonl"), "--seed", "1"]
    )
    assert res.exit_code == 0, res.output
    questions = _samples(tmp_path / "mcq.jsonl")
    assert [q.id for q in questions] == ["a", "b"] and all(len(q.choices) == 4 for q in questions)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "trajectories.jsonl").write_text(_trajectory("q.jpg").model_dump_json() + "\n")
    (run_dir / "samples.jsonl").write_text(dataset.read_text())
    res = runner.invoke(
        app, ["data", "export-sft", str(run_dir), "-o", str(tmp_path / "s.jsonl"), "--max-km", "5"]
    )
    assert res.exit_code == 0, res.output
    assert "wrote 1 records" in res.output
    res = runner.invoke(app, ["data", "filter", str(run_dir)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["images"] == 1
    assert (run_dir / "filter" / "report.json").exists()


def test_cli_export_sft_writes_the_same_file_whatever_order_the_run_finished_in(tmp_path: Path) -> None:
    names = ("paris", "berlin", "madrid")
    trajs = [_trajectory("q.jpg").model_copy(update={"sample_id": name}) for name in names]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    outputs = []
    for order in ((0, 1, 2), (2, 0, 1)):
        lines = "".join(trajs[i].model_dump_json() + "\n" for i in order)
        (run_dir / "trajectories.jsonl").write_text(lines)
        out = tmp_path / f"sft{order[0]}.jsonl"
        res = runner.invoke(app, ["data", "export-sft", str(run_dir), "-o", str(out)])
        assert res.exit_code == 0, res.output
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1]
    assert [json.loads(line)["id"] for line in outputs[0].splitlines()] == ["berlin", "madrid", "paris"]


def test_cli_filter_reads_a_malformed_metadata_truth_as_none(tmp_path: Path) -> None:
    """Issue 41 (low): a list latitude in a run's metadata raised TypeError out of `data filter`."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    trajs = [
        _trajectory("q.jpg").model_copy(update={"sample_id": f"s{i}", "metadata": {"ground_truth": truth}})
        for i, truth in enumerate(
            [{"lat": [1, 2], "lon": 2.0}, {"lat": "1" * 400, "lon": 2}, {"lat": 47.0, "lon": 8.3}]
        )
    ]
    (run_dir / "trajectories.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in trajs))
    res = runner.invoke(app, ["data", "filter", str(run_dir)])
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    report = json.loads(res.output)
    assert report["images"] == 1  # only s2 carries a truth a distance can be taken from


def test_cli_export_sft_counts_unreadable_lines_as_skipped(tmp_path: Path) -> None:
    """Issue 41 (low): "0 skipped" was printed right after the lines it skipped."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    good = _trajectory("q.jpg").model_dump_json()
    (run_dir / "trajectories.jsonl").write_text(good + "\n" + '{"sample_id": "x", "broken": \n')
    res = runner.invoke(app, ["data", "export-sft", str(run_dir), "-o", str(tmp_path / "s.jsonl")])
    assert res.exit_code == 0, res.output
    assert "skipped" in res.stderr and "wrote 1 records" in res.stdout and "(1 skipped)" in res.stdout


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    res = runner.invoke(app, ["data", "filter", str(tmp_path)])
    assert res.exit_code == 1 and "no trajectories.jsonl" in res.output
    res = runner.invoke(app, ["data", "export-sft", str(tmp_path / "x.jsonl"), "-o", "o", "--format", "bad"])
    assert res.exit_code == 1 and "unknown --format" in res.output
    res = runner.invoke(app, ["data", "build-mcq", str(tmp_path / "nope.csv"), "-o", str(tmp_path / "o")])
    assert res.exit_code == 1 and "Traceback" not in res.output


def test_cli_sample_is_reproducible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import geosleuth.cli.data as data_cli

    monkeypatch.setattr(data_cli, "_gazetteer_cells", lambda: {(48, 2): 2e6, (35, 139): 9e6})
    rows = [
        Sample(id=f"{c}{i}", lat=lat + i * 0.01, lon=lon, labels={"country": c})
        for c, lat, lon in (("FR", 48.5, 2.2), ("JP", 35.5, 139.5), ("LU", 49.6, 6.1))
        for i in range(10)
    ]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(s.model_dump_json() + "\n" for s in rows))
    outs = []
    for name in ("a", "b"):
        res = runner.invoke(
            app, ["data", "sample", str(data), "-n", "12", "--seed", "3", "-o", str(tmp_path / name)]
        )
        assert res.exit_code == 0, res.output
        assert json.loads(res.output)["written"] == 12
        outs.append((tmp_path / name).read_text())
    assert outs[0] == outs[1]
    res = runner.invoke(app, ["data", "sample", str(data), "-n", "31", "-o", str(tmp_path / "c")])
    assert res.exit_code == 1 and "asked for 31" in res.output


def test_export_verl_row_groups_keep_every_row_and_typed_levels(
    tmp_path: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    monkeypatch.setattr("geosleuth.training.verl.export.ROW_GROUP", 1)
    samples = _samples(dataset)
    b, a = samples[1], samples[0]  # "b" has no city: the first row group alone would type it null
    out = tmp_path / "train.parquet"
    report = export_verl([b, a], out, VerlExportOptions(schemas=(ZOOM_SCHEMA,)))
    assert report.written == 2 and pq.ParquetFile(out).num_row_groups == 2
    table = pq.read_table(out).to_pylist()
    assert [r["extra_info"]["sample_id"] for r in table] == ["b", "a"]
    assert [r["extra_info"]["index"] for r in table] == [0, 1]
    assert table[1]["reward_model"]["ground_truth"]["levels"]["city"] == "Paris"
    assert table[0]["images"][0]["bytes"] == Path(str(b.image)).read_bytes()
    assert table[1]["images"][0]["bytes"] == Path(str(a.image)).read_bytes()
