"""`examples/training/trl/grpo_trl.py` runs on CPU (`--bf16 false --max-steps 2`) with a tiny
Qwen3-VL built locally (nothing downloaded) and geosleuth tools in TRL's loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "training" / "trl" / "grpo_trl.py"


@pytest.mark.slow
def test_grpo_example_runs_two_cpu_steps(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from geosleuth.testing.tiny_vlm import build_tiny_vlm

    model_dir = tmp_path / "tiny-vlm"
    build_tiny_vlm(model_dir)  # laid out as a Hub Qwen3-VL: AutoProcessor wants torchvision for it
    rows = []
    (tmp_path / "data" / "img").mkdir(parents=True)
    for i, (lat, lon, country) in enumerate([(48.85, 2.35, "FR"), (35.68, 139.69, "JP")] * 2):
        Image.new("RGB", (64, 48), (i * 50, 90, 160)).save(tmp_path / "data" / "img" / f"{i}.png")
        rows.append(  # paths relative to the JSONL, as every `data` command writes and reads them
            {"id": f"s{i}", "image": f"img/{i}.png", "lat": lat, "lon": lon, "labels": {"country": country}}
        )
    data = tmp_path / "data" / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "out"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "GEOSLEUTH_DATA_DIR": os.environ.get("GEOSLEUTH_DATA_DIR", ""),
        "GEOSLEUTH_TOOL_CACHE_MODE": "off",
    }
    if not env["GEOSLEUTH_DATA_DIR"]:
        del env["GEOSLEUTH_DATA_DIR"]
    argv = [
        sys.executable, str(EXAMPLE), "--model", str(model_dir), "--data", str(data), "--out", str(out),
        "--bf16", "false", "--max-steps", "2", "--num-generations", "2", "--batch-size", "2",
        "--grad-accum", "1", "--max-completion-length", "12", "--max-tool-calls", "2", "--save-steps", "2",
        "--learning-rate", "1e-4", "--warmup-steps", "4", "--scale-rewards", "batch",
    ]  # fmt: skip
    # every tool's schema (about 5,500 tokens here) does not fit the tiny model's 2,048-token context:
    # the run stops before training instead of TRL silently dropping every tool result
    run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 1 and "TRL would drop every tool result" in run.stderr, run.stderr[-4000:]
    assert "exif_gps" not in run.stderr.split("error:")[-1]  # never offered by default
    argv += ["--tools", "image_zoom_in_tool,geocode"]
    run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    logs = [h for h in state["log_history"] if "loss" in h]
    assert len(logs) == 2 and state["global_step"] == 2
    assert all("geo/acc@750km" in h and "rewards/geo_step/mean" in h for h in logs)
    assert "tools/call_frequency" in logs[0]  # geosleuth's tools are wired into TRL's tool loop
    # the warm-up reaches the scheduler: steps 1 and 2 of 4 warm-up steps run at 0 and 1e-4 / 4
    # (linear decay alone would give 1e-4 and 1e-4 / 2)
    assert [h["learning_rate"] for h in logs] == pytest.approx([0.0, 2.5e-5], abs=1e-9)
    import torch

    saved = torch.load(out / "checkpoint-2" / "training_args.bin", weights_only=False)
    assert saved.scale_rewards == "batch"  # the advantage scaling reaches TRL's config


def test_example_refuses_bf16_without_a_gpu_and_bad_flags(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), "--model", "x", "--data", "y", "--bf16", "maybe"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 2 and "expected true or false" in run.stderr
    import torch

    if not torch.cuda.is_available():
        run = subprocess.run(
            [sys.executable, str(EXAMPLE), "--model", "x", "--data", "y", "--bf16", "true"],
            capture_output=True, text=True, timeout=300, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        )  # fmt: skip
        assert run.returncode == 1 and "--bf16 false" in run.stderr


def test_example_offers_exif_gps_only_on_opt_in_and_says_why() -> None:
    pytest.importorskip("trl")
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), "--help"], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0
    help_text = " ".join(run.stdout.split())
    assert "--allow-exif" in help_text and "learns to read the answer" in help_text
    assert "default: all but exif_gps" in help_text
