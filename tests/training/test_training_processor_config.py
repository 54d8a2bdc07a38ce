"""export-verl and export-swift state the frame the model's processor produces (Qwen
``smart_resize``), read from a local model folder's ``preprocessor_config.json`` or given as options.

Expected sizes are derived by hand from transformers' ``smart_resize`` (qwen2_vl
image_processing): sides rounded to the factor; above max_pixels,
beta = sqrt(h·w / max_pixels), sides = floor(side / beta / factor) · factor.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.training.qwen.processor_config import ImageFrameSettings, resolve_frame, settings_from_config

QWEN3_VL = {"size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16, "merge_size": 2}
QWEN25_VL = {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "merge_size": 2}


def test_settings_from_hub_configs() -> None:
    assert settings_from_config(QWEN3_VL) == ImageFrameSettings(32, 65536, 16777216)
    assert settings_from_config(QWEN25_VL) == ImageFrameSettings(28, 3136, 12845056)
    # top-level min/max_pixels override size, as Qwen2VLImageProcessor.__init__ does
    both = {**QWEN3_VL, "max_pixels": 1_000_000}
    assert settings_from_config(both).max_pixels == 1_000_000
    assert settings_from_config({"patch_size": 16}) == ImageFrameSettings(None, None, None)


def test_resolve_prefers_options_then_model_then_defaults(tmp_path: Path) -> None:
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"patch_size": 16, "merge_size": 2}))
    frame, source = resolve_frame(
        ImageFrameSettings(max_pixels=500_000), tmp_path, ImageFrameSettings(28, 3136, 2_000_000)
    )
    assert frame == ImageFrameSettings(32, 3136, 500_000)
    assert source == {"resize_factor": "model", "min_pixels": "default", "max_pixels": "option"}
    (tmp_path / "preprocessor_config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a JSON object"):
        resolve_frame(ImageFrameSettings(), tmp_path, ImageFrameSettings())


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    Image.new("RGB", (1288, 868), "gray").save(tmp_path / "a.png")
    row = {"id": "a", "image": "a.png", "lat": 48.85, "lon": 2.35}
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return path


def _exported(tmp_path: Path, samples: Path, *extra: str) -> tuple[str, list[int]]:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "v" / "t.parquet"
    args = ["data", "export-verl", str(samples), "-o", str(out), "--tools", "image_zoom_in_tool", *extra]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    row = pq.read_table(out).to_pylist()[0]
    create = row["extra_info"]["tools_kwargs"]["image_zoom_in_tool"]["create_kwargs"]
    return row["prompt"][0]["content"], list(create["model_size"])


def test_export_verl_reads_the_model_folder(tmp_path: Path, samples: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    config = {**QWEN3_VL, "size": {"longest_edge": 500_000, "shortest_edge": 65536}}
    (model / "preprocessor_config.json").write_text(json.dumps(config))
    # 1288×868, factor 32, max 500000: beta = sqrt(1117984 / 500000) = 1.4953;
    # width floor(1288 / 1.4953 / 32) = 26 → 832, height floor(868 / 1.4953 / 32) = 18 → 576
    system, size = _exported(tmp_path, samples, "--model", str(model))
    assert size == [832, 576] and "(832×576 pixels)" in system
    # options win over the folder: factor 28, 2000000 pixels: 1288 = 46·28, 868 = 31·28, under budget
    system, size = _exported(
        tmp_path, samples, "--model", str(model), "--max-pixels", "2000000", "--resize-factor", "28"
    )
    assert size == [1288, 868] and "(1288×868 pixels)" in system


def test_export_verl_options_without_model(tmp_path: Path, samples: Path) -> None:
    # factor 32, under the budget: round(1288 / 32) = 40 → 1280, round(868 / 32) = 27 → 864
    system, size = _exported(tmp_path, samples, "--resize-factor", "32")
    assert size == [1280, 864] and "(1280×864 pixels)" in system


def test_prepare_data_script_uses_model_dir(tmp_path: Path, samples: Path) -> None:
    import os
    import subprocess
    import sys

    pq = pytest.importorskip("pyarrow.parquet")
    script = Path(__file__).resolve().parents[2] / "examples" / "training" / "verl" / "prepare_data.sh"
    model = tmp_path / "model"
    model.mkdir()
    config = {**QWEN3_VL, "size": {"longest_edge": 500_000, "shortest_edge": 65536}}
    (model / "preprocessor_config.json").write_text(json.dumps(config))
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        "DATASET": str(samples), "OUT": str(tmp_path / "out"), "MODEL_DIR": str(model),
        "TOOLS": "image_zoom_in_tool", "GEOSLEUTH_TOOL_CACHE_MODE": "off",
    }  # fmt: skip
    run = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    system = pq.read_table(tmp_path / "out" / "train.parquet").to_pylist()[0]["prompt"][0]["content"]
    assert "(832×576 pixels)" in system  # the same hand-derived frame as above


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen3-VL folder (patch 16 × merge 2, at most 200000 pixels), nothing downloaded."""
    pytest.importorskip("transformers")
    from geosleuth.testing.tiny_vlm import build_tiny_vlm

    model = tmp_path_factory.mktemp("tiny") / "model"
    build_tiny_vlm(model, max_pixels=200_000)
    return model


def _processor_frame(processor: object, image: Path) -> list[int]:
    """[width, height] the processor itself gives the image: its patch grid × patch size."""
    from PIL import Image

    with Image.open(image) as img:
        _, rows, cols = processor(images=[img.convert("RGB")])["image_grid_thw"][0].tolist()  # type: ignore[operator]
    patch = processor.patch_size  # type: ignore[attr-defined]
    return [cols * patch, rows * patch]


def _swift(tmp_path: Path, samples: Path, *extra: str) -> tuple[dict, dict]:
    """The first row and the --json report; spotagent's zoom note states the frame in pixels."""
    out = tmp_path / "s" / "swift.jsonl"
    args = ["data", "export-swift", str(samples), "-o", str(out), "--json", "--prompt", "spotagent",
            "--tools", "image_zoom_in_tool", *extra]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    return json.loads(out.read_text().splitlines()[0]), json.loads(res.stdout.strip().splitlines()[-1])


def test_export_swift_states_the_model_processors_frame(
    tmp_path: Path, samples: Path, tiny_model: Path
) -> None:
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    # the frame transformers' processor, loaded from the folder, gives the 1288×868 photo
    expected = _processor_frame(Qwen2VLImageProcessorPil.from_pretrained(tiny_model), tmp_path / "a.png")
    row, report = _swift(tmp_path, samples, "--model", str(tiny_model))
    assert (
        row["model_size"] == expected
        and f"({expected[0]}×{expected[1]} pixels)" in row["messages"][0]["content"]
    )
    assert report["image_frame"] == {
        "max_pixels": 200_000, "min_pixels": 1024, "resize_factor": 32,
        "source": {"max_pixels": "model", "min_pixels": "model", "resize_factor": "model"},
    }  # fmt: skip
    plain = CliRunner().invoke(
        app,
        ["data", "export-swift", str(samples), "-o", str(tmp_path / "p.jsonl"), "--model", str(tiny_model)],
    )
    assert (
        "image frame: max_pixels 200000 (model), min_pixels 1024 (model), resize factor 32 (model)"
        in plain.stdout
    )


def test_export_swift_options_override_the_model_folder(
    tmp_path: Path, samples: Path, tiny_model: Path
) -> None:
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    # a Qwen2.5-VL-like processor (patch 14 × merge 2) with the options' pixel limits
    processor = Qwen2VLImageProcessorPil(min_pixels=50_000, max_pixels=500_000, patch_size=14, merge_size=2)
    expected = _processor_frame(processor, tmp_path / "a.png")
    row, report = _swift(
        tmp_path, samples, "--model", str(tiny_model),
        "--pixel-budget", "500000", "--min-pixels", "50000", "--resize-factor", "28",
    )  # fmt: skip
    assert (
        row["model_size"] == expected
        and f"({expected[0]}×{expected[1]} pixels)" in row["messages"][0]["content"]
    )
    assert set(report["image_frame"]["source"].values()) == {"option"}
    # one option given: the others still come from the folder
    _, report = _swift(tmp_path, samples, "--model", str(tiny_model), "--max-pixels", "500000")
    assert report["image_frame"]["source"] == {
        "max_pixels": "option", "min_pixels": "model", "resize_factor": "model"
    }  # fmt: skip


def test_export_swift_without_model_keeps_its_defaults(tmp_path: Path, samples: Path) -> None:
    # factor 28, 2000000 pixels: 1288 = 46·28, 868 = 31·28, under the budget
    row, report = _swift(tmp_path, samples)
    assert row["model_size"] == [1288, 868]
    assert set(report["image_frame"]["source"].values()) == {"default"}


@pytest.mark.parametrize("command", ["export-swift", "export-verl"])
def test_export_refuses_a_model_path_that_is_no_folder(tmp_path: Path, samples: Path, command: str) -> None:
    missing = tmp_path / "no-such-model"
    res = CliRunner().invoke(app, ["data", command, str(samples), "-o", str(tmp_path / "o"), "--tools", "",
                                   "--model", str(missing)])  # fmt: skip
    assert res.exit_code == 1 and f"{missing}: not a local model directory" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "o").exists()
