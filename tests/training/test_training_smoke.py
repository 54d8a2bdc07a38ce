"""CPU smoke run: a few TRL GRPO steps on a tiny random Qwen3-VL built locally, geosleuth reward + zoom tool.

Nothing is downloaded: the tokenizer is trained here on a few strings, the chat template is
the Qwen3-VL one TRL ships, and the model is randomly initialised from a config. The
environment's zoom method is wired into TRL's tool loop; a random policy practically never
writes a well-formed ``<tool_call>``, so the zoom call itself is exercised through the
same environment in `test_trl_environment_zoom_with_the_real_tool`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from geosleuth.tools.base import ToolContext, ToolRegistry
from geosleuth.training.trl.env import make_environment_factory


def real_registry(settings_path: str | None = None) -> ToolRegistry:
    """geosleuth's own tools, with the cache off so the test writes nothing outside tmp."""
    from geosleuth.tools import build_registry
    from geosleuth.tools.config import CacheSettings, ToolSettings

    return build_registry(ToolSettings(cache=CacheSettings(backend="none")), names=["image_zoom_in_tool"])


async def test_trl_environment_zoom_with_the_real_tool() -> None:
    env_cls = make_environment_factory(
        ["image_zoom_in_tool"], registry_factory="test_training_smoke:real_registry"
    )
    env = env_cls()
    assert env.reset(image=Image.new("RGB", (400, 300), (5, 6, 7)), lat=1.0) is None
    out = await env.image_zoom_in_tool([0, 0, 200, 150])
    assert isinstance(out, list) and out[0]["type"] == "image"
    assert out[0]["image"].size[0] >= 200
    bad = await env.image_zoom_in_tool([10, 10, 5, 5])
    assert isinstance(bad, str) and bad.startswith("Error")
    assert env.calls == [("image_zoom_in_tool", True), ("image_zoom_in_tool", False)]
    with pytest.raises(ValueError, match="unknown tool"):
        make_environment_factory(["teleport"])
    assert isinstance(env.ctx, ToolContext)


def _tiny_vlm(model_dir: Path, max_positions: int = 2048, corpus: tuple[str, ...] = ()) -> Any:
    """Tokenizer, image-only Qwen3-VL processor and a random ~140k-parameter model, all local.

    ``corpus`` adds strings the tokenizer learns (fewer tokens for scripted tool calls)."""
    from geosleuth.testing.tiny_vlm import build_tiny_vlm

    return build_tiny_vlm(model_dir, max_positions, corpus, hub_files=False)


@pytest.mark.slow
def test_grpo_smoke_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("trl")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    monkeypatch.setenv("GEOSLEUTH_DATA_DIR", str(tmp_path / "data"))
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from geosleuth.training.trl.reward import make_reward_func

    model_dir = tmp_path / "tiny-vlm"
    processor = _tiny_vlm(model_dir)
    prompt = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Where was this taken?"}]}
    ]
    dataset = Dataset.from_dict(
        {
            "prompt": [prompt] * 4,
            "image": [Image.new("RGB", (64, 48), (i * 50, 90, 160)) for i in range(4)],
            "lat": [48.85, 35.68, -33.86, 40.71],
            "lon": [2.35, 139.69, 151.2, -74.0],
        }
    )
    reward = make_reward_func("step")
    seen: list[int] = []
    original = reward._score

    def recording(completions: Any, columns: dict[str, Any]) -> list[float]:
        out = original(completions, columns)
        seen.append(len(out))
        assert all(math.isfinite(r) and 0.0 <= r <= 1.0 for r in out)
        return out

    reward._score = recording  # type: ignore[method-assign]
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=12,
        max_steps=2,
        logging_steps=1,
        save_steps=2,
        report_to=[],
        use_cpu=True,
        learning_rate=1e-4,
        beta=0.04,
        max_tool_calling_iterations=2,
    )
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=[reward],
        args=args,
        train_dataset=dataset,
        processing_class=processor,
        environment_factory=make_environment_factory(
            ["image_zoom_in_tool"], registry_factory="test_training_smoke:real_registry"
        ),
    )
    result = trainer.train()
    assert seen == [2, 2]  # two steps, two completions each
    assert math.isfinite(result.training_loss)
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2 and all(math.isfinite(h["loss"]) for h in logs)
    for key in (
        "geo/acc@1km",
        "geo/acc@750km",
        "geo/median_distance_km",
        "geo/parse_rate",
        "rewards/geo_step/mean",
    ):
        assert all(key in h for h in logs), key
    assert "tools/call_frequency" in logs[0]  # the zoom tool is wired into TRL's tool loop
    ckpt = tmp_path / "out" / "checkpoint-2"
    assert ckpt.is_dir() and any(p.suffix == ".safetensors" for p in ckpt.iterdir())
    reloaded = type(trainer.model).from_pretrained(ckpt)
    assert all(torch.isfinite(p).all() for p in reloaded.parameters())
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_verl_parquet_loads_in_verls_rl_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rl_dataset = pytest.importorskip("verl.utils.dataset.rl_dataset")
    from omegaconf import OmegaConf

    from geosleuth.core.records import Sample
    from geosleuth.training.verl.export import VerlExportOptions, export_verl
    from geosleuth.training.verl.reward import compute_score

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    processor = _tiny_vlm(tmp_path / "m")
    Image.new("RGB", (640, 480), (1, 2, 3)).save(tmp_path / "a.jpg")
    sample = Sample(id="a", image=str(tmp_path / "a.jpg"), lat=48.85, lon=2.35, labels={"country": "France"})
    zoom = real_registry().get("image_zoom_in_tool")
    assert zoom is not None
    options = VerlExportOptions(schemas=(zoom.schema(),), pixel_budget=64 * 64)
    export_verl([sample], tmp_path / "t.parquet", options)
    config = OmegaConf.create(
        {
            "prompt_key": "prompt",
            "image_key": "images",
            "max_prompt_length": 4096,
            "return_raw_chat": True,
            "filter_overlong_prompts": False,
            "cache_dir": str(tmp_path / "cache"),
        }
    )
    ds = rl_dataset.RLHFDataset([str(tmp_path / "t.parquet")], processor.tokenizer, config, processor)
    item = ds[0]
    create = item["tools_kwargs"]["image_zoom_in_tool"]["create_kwargs"]
    assert create["image"] == str((tmp_path / "a.jpg").resolve())
    user = item["raw_prompt"][1]["content"]
    assert user[0]["type"] == "image" and user[0]["image"].size == (640, 480)
    truth = item["reward_model"]["ground_truth"]
    assert truth["levels"]["country"] == "France"
    assert (
        compute_score(item["data_source"], '<answer>{"lat": 48.85, "lon": 2.35}</answer>', truth)["score"]
        == 1.0
    )
