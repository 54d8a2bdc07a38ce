"""Exported SFT records train through TRL's own `SFTTrainer` with `assistant_only_loss=True`.

The records come from a synthesised trajectory (scripted observer and planner on 127.0.0.1,
`export-sft --to trl`, hermes tool calls); the policy is the tiny Qwen3-VL built locally.
TRL 1.16 swaps in its training variant of the Qwen3-VL template (the `{% generation %}`
markers) when the processor's template is the stock one, so the assistant mask is the
assistant turns: the tool call and the answer, never the system, user or tool-response text.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from geosleuth.core.records import Sample
from geosleuth.training.data.sft import export_sft
from geosleuth.training.data.synthesis import KEPT


def _records(tmp_path: Path) -> list[dict[str, Any]]:
    from test_training_synthesis import _planner_script, _run

    from geosleuth.core.records import Trajectory

    path = tmp_path / "q.png"
    Image.new("RGB", (64, 48), (120, 130, 140)).save(path)
    sample = Sample(id="s/1", image=str(path), lat=48.8584, lon=2.2945)
    out = tmp_path / "synth"
    report, _, _ = asyncio.run(_run(sample, _planner_script(48.8600), out))
    assert report["kept"] == 1
    trajectories = [Trajectory.model_validate_json(line) for line in (out / KEPT).read_text().splitlines()]
    assert export_sft(trajectories, tmp_path / "sft.jsonl", "trl", "hermes", base_dir=out).written == 1
    return [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_assistant_only_loss_masks_the_assistant_turns_and_the_loss_falls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("trl")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from datasets import Dataset
    from transformers import Qwen3VLForConditionalGeneration
    from trl import SFTConfig, SFTTrainer

    from geosleuth.testing.tiny_vlm import build_tiny_vlm

    records = _records(tmp_path)
    texts = [p["text"] for r in records for m in r["messages"] for p in m["content"] if p.get("text")]
    processor = build_tiny_vlm(tmp_path / "m", max_positions=4096, corpus=texts, vocab_size=600)
    rows = [
        {"messages": r["messages"], "images": [Image.open(p).convert("RGB") for p in r["images"]]}
        for r in records
    ] * 4
    config = SFTConfig(
        output_dir=str(tmp_path / "out"), max_steps=10, per_device_train_batch_size=2, learning_rate=1e-2,
        lr_scheduler_type="constant", assistant_only_loss=True, max_length=None, logging_steps=1,
        save_strategy="no", report_to=[], use_cpu=True, seed=0,
    )  # fmt: skip
    trainer = SFTTrainer(
        model=Qwen3VLForConditionalGeneration.from_pretrained(tmp_path / "m"),
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=processor,
    )
    batch = trainer.data_collator([trainer.train_dataset[0]])
    labels = batch["labels"][0]
    trained = processor.tokenizer.decode(labels[labels != -100])
    assert trained, "the assistant mask is empty: no token would be trained"
    assert '"name": "image_zoom_in_tool"' in trained and "<answer>" in trained  # the assistant turns
    assert "Where was this image taken?" not in trained  # the user turn is context only
    assert "<tool_response>" not in trained and "zoomed" not in trained  # so is the tool output
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 10 and all(math.isfinite(x) for x in losses)
    assert sum(losses[-2:]) / 2 < 0.7 * sum(losses[:2]) / 2


def test_system_with_tools_renders_as_grpo_renders_the_prompt(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from geosleuth.testing.tiny_vlm import build_tiny_vlm
    from geosleuth.training.trl.env import make_environment_factory, system_with_tools, tool_methods

    processor = build_tiny_vlm(tmp_path / "m", hub_files=False)
    environment = make_environment_factory(["geocode"])
    messages = [
        {"role": "system", "content": [{"type": "text", "text": "You geolocate photos."}]},
        {"role": "user", "content": [{"type": "text", "text": "Where?"}]},
    ]
    sft = system_with_tools(messages, environment, processor)
    grpo_text = processor.apply_chat_template(messages, tools=tool_methods(environment), tokenize=False)
    assert processor.apply_chat_template(sft, tokenize=False) == grpo_text  # SFT sees GRPO's prompt
    assert '"name": "geocode"' in sft[0]["content"][0]["text"] and messages[0]["content"][0]["text"] == (
        "You geolocate photos."
    )  # the input is left as it was
