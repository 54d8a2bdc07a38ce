"""GRPO with TRL on a vision-language model, a geosleuth reward and the zoom tool.

    python grpo_trl.py --model Qwen/Qwen3-VL-2B-Instruct --data train.jsonl --out runs/grpo

``--data`` is a samples JSONL (``geosleuth data sample`` / ``build-mcq`` / ``filter`` write
one). Every row becomes a conversational prompt with its image; ``lat`` / ``lon`` columns feed
the reward, which also logs Acc@k and the median distance through TRL's ``log_metric``.
TRL's tool loop needs a chat template it can parse tool calls from (Qwen3 / Qwen3-VL and
others it ships response templates for) and transformers >= 5.2.
"""

from __future__ import annotations

import argparse

from datasets import Dataset
from PIL import Image
from trl import GRPOConfig, GRPOTrainer

from geosleuth.core.records import Sample
from geosleuth.training.trl_env import make_environment_factory
from geosleuth.training.trl_reward import make_reward_func

QUESTION = (
    "Where was this photo taken? Zoom in on details if useful. Finish with "
    '<answer>{"lat": <deg>, "lon": <deg>, "city": "<city>", "country": "<country>"}</answer>.'
)


def load_rows(path: str) -> Dataset:
    with open(path, encoding="utf-8") as fh:
        samples = [Sample.model_validate_json(line) for line in fh if line.strip()]
    usable = [s for s in samples if s.image and s.lat is not None and s.lon is not None]
    prompt = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION}]}]
    return Dataset.from_dict(
        {
            "prompt": [prompt] * len(usable),
            "image": [Image.open(s.image).convert("RGB") for s in usable],
            "lat": [s.lat for s in usable],
            "lon": [s.lon for s in usable],
            "country": [s.labels.get("country") for s in usable],
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", default="runs/grpo-trl")
    parser.add_argument(
        "--reward", default="step", help="step | piecewise | spatial | hierarchical | geo_similarity"
    )
    parser.add_argument("--tool-settings", default=None, help="geosleuth tool settings file")
    args = parser.parse_args()
    config = GRPOConfig(
        output_dir=args.out,
        num_generations=8,  # GRPO group size
        per_device_train_batch_size=8,
        gradient_accumulation_steps=4,
        learning_rate=1e-6,
        beta=0.001,  # KL coefficient
        max_completion_length=4096,
        max_tool_calling_iterations=6,
        logging_steps=1,
        save_steps=100,
        bf16=True,
    )
    trainer = GRPOTrainer(
        model=args.model,
        reward_funcs=[make_reward_func(args.reward)],
        args=config,
        train_dataset=load_rows(args.data),
        environment_factory=make_environment_factory(
            ["image_zoom_in_tool"], settings_path=args.tool_settings
        ),
    )
    trainer.train()


if __name__ == "__main__":
    main()
