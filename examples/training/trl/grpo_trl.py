"""GRPO with TRL on a vision-language model, a geosleuth reward and geosleuth's tools.

    python examples/training/trl/grpo_trl.py --model Qwen/Qwen3-VL-2B-Instruct --data train.jsonl --out runs/grpo  # GPU
    python examples/training/trl/grpo_trl.py --model ./tiny --data train.jsonl --tools image_zoom_in_tool,geocode --bf16 false --max-steps 2 --num-generations 2 --batch-size 2 --grad-accum 1 --max-completion-length 32  # CPU

(``./tiny``: the tiny random Qwen3-VL that docs/training.md builds for CPU runs.)

``--data`` is a samples JSONL (``geosleuth data sample`` / ``build-mcq`` / ``filter`` write
one; relative image paths are read from the JSONL's folder, as every ``data`` command reads
them). Every row becomes a conversational prompt with its image (``--prompt STYLE``: the
style's system and user prompts, the ones ``data synthesize`` puts in the SFT cold-start
records, with the row's hint); ``lat`` / ``lon`` (and the country label) feed the reward,
which also logs Acc@k and the median distance through TRL's
``log_metric``. Every registry tool but ``exif_gps`` (it reads the answer from the photo's GPS
tag; ``--allow-exif`` opts in) is offered unless ``--tools`` names a subset; zoom boxes are
read in the frame the processor gives the model (Qwen ``smart_resize``). Without torchvision
(which Qwen-VL's video processor needs) the processor is built image-only. Before training, the
prompt with the tool schemas is measured against the model's context: it stops with an error
when they fill it and warns when tool results would not fit. TRL's tool loop
needs a chat template it can parse tool calls from (Qwen3 / Qwen3-VL and others it ships
response templates for) and transformers >= 5.2. Without a GPU the run uses the CPU.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from datasets import Dataset
from PIL import Image
from trl import GRPOConfig, GRPOTrainer

from geosleuth.core.records import Sample
from geosleuth.plugins import load_callable
from geosleuth.training.qwen.processors import load_processor
from geosleuth.training.toolcall import DEFAULT_TIMEOUT_S, EXIF_HELP, training_tools
from geosleuth.training.trl.env import (
    ProcessorFrame,
    check_context,
    make_environment_factory,
    media_token_ids,
    trl_processor,
)
from geosleuth.training.trl.reward import make_reward_func
from geosleuth.training.verl.tools import shared_registry

QUESTION = (
    "Where was this photo taken? Use the tools if useful. Finish with "
    '<answer>{"lat": <deg>, "lon": <deg>, "city": "<city>", "country": "<country>"}</answer>.'
)


PROMPT = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION}]}]


def style_prompt(
    style: str, sample: Sample, schemas: list[dict[str, Any]], size: tuple[int, int]
) -> list[dict[str, Any]]:
    """The prompt style's system and user turns for one sample, as synthesis writes them."""
    from geosleuth.agent.prompting import build_prompts, load_style
    from geosleuth.core.records import Task

    spec = load_style(style)
    task = Task.from_sample(sample)
    system, user = build_prompts(spec, task, schemas, "native", spec.bbox_convention, size)
    user_turn = {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": user}]}
    return [{"role": "system", "content": [{"type": "text", "text": system}]}, user_turn]


def load_rows(
    path: str, style: str | None = None, schemas: list[dict[str, Any]] | None = None, processor: Any = None
) -> tuple[Dataset, list[dict[str, Any]]]:
    """One row per sample with an image and coordinates (image paths relative to the JSONL's
    folder), and the first row's prompt."""
    with open(path, encoding="utf-8") as fh:
        samples = [Sample.model_validate_json(line) for line in fh if line.strip()]
    usable = [s for s in samples if s.image and s.lat is not None and s.lon is not None]
    if not usable:
        raise SystemExit(f"error: {path} has no sample with an image and coordinates")
    base = Path(path).parent
    images = [Image.open(base / s.image).convert("RGB") for s in usable]  # type: ignore[operator]
    frame = ProcessorFrame.of(processor) if processor is not None else None
    sizes = [frame.size(img.size) if frame else img.size for img in images]
    prompts = [
        style_prompt(style, s, schemas or [], size) if style else PROMPT
        for s, size in zip(usable, sizes, strict=True)
    ]
    columns = {
        "prompt": prompts,
        "image": images,
        "lat": [s.lat for s in usable],
        "lon": [s.lon for s in usable],
        "country": [s.labels.get("country") for s in usable],
    }
    return Dataset.from_dict(columns), prompts[0]


def boolean(text: str) -> bool:
    value = text.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="GRPO with TRL and geosleuth tools and rewards.")
    parser.add_argument("--model", required=True, help="Model id or local directory.")
    parser.add_argument("--data", required=True, help="Samples JSONL with image, lat, lon.")
    parser.add_argument("--out", default="runs/grpo-trl")
    parser.add_argument(
        "--reward", default="step", help="step | piecewise | spatial | hierarchical | geo_similarity"
    )
    parser.add_argument("--tool-settings", default=None, help="geosleuth tool settings file")
    parser.add_argument(
        "--tools", default=None, help="Comma-separated subset of tools (default: all but exif_gps)."
    )
    parser.add_argument("--allow-exif", action="store_true", help=EXIF_HELP)
    parser.add_argument(
        "--tool-timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="Seconds a tool call may take; a slower one returns an error the policy reads.",
    )
    parser.add_argument(
        "--prompt",
        default=None,
        help="Prompt style (spotagent, geovista, …) whose system and user prompts each row gets; "
        "default: one question asking for a JSON answer.",
    )
    parser.add_argument("--bbox-convention", default="absolute", choices=["absolute", "relative1000"])
    parser.add_argument(
        "--processor-factory",
        default=None,
        help="module:function(model) returning the processor, when AutoProcessor cannot load it.",
    )
    parser.add_argument("--bf16", type=boolean, default=None, help="true / false (default: true on a GPU).")
    parser.add_argument(
        "--max-steps", type=int, default=-1, help="Stop after N optimiser steps (-1: epochs)."
    )
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--num-generations", type=int, default=8, help="GRPO group size.")
    parser.add_argument("--batch-size", type=int, default=8, help="Per-device train batch size.")
    parser.add_argument("--grad-accum", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=1e-6)
    parser.add_argument("--beta", type=float, default=0.001, help="KL coefficient.")
    parser.add_argument(
        "--lr-scheduler", default="linear", help="transformers scheduler type (linear, constant, cosine, …)."
    )
    parser.add_argument(
        "--num-iterations", type=int, default=1, help="Optimiser steps on each batch of rollouts (GRPO's μ)."
    )
    parser.add_argument(
        "--warmup-steps", type=float, default=0, help="Learning-rate warm-up: steps, or a fraction below 1."
    )
    parser.add_argument(
        "--scale-rewards",
        default="group",
        choices=["group", "batch", "none"],
        help="Advantage scaling (TRL): by the group's reward std, the batch's, or none.",
    )
    parser.add_argument("--temperature", type=float, default=1.0, help="Rollout sampling temperature.")
    parser.add_argument("--max-completion-length", type=int, default=4096)
    parser.add_argument("--max-tool-calls", type=int, default=6)
    parser.add_argument("--save-steps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=42)
    return parser.parse_args(argv)


def context_length(model: str) -> int:
    """The model's context in tokens (the text model's ``max_position_embeddings``)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model)
    return int(getattr(config, "text_config", config).max_position_embeddings)


def main(argv: list[str] | None = None) -> GRPOTrainer:
    import torch

    args = parse_args(argv)
    on_gpu = torch.cuda.is_available()
    bf16 = on_gpu if args.bf16 is None else args.bf16
    if bf16 and not (on_gpu and torch.cuda.is_bf16_supported()):
        raise SystemExit("error: --bf16 true needs a GPU with bfloat16; use --bf16 false on CPU")
    if args.processor_factory:
        processor = load_callable(args.processor_factory, "processor factory")(args.model)
    else:
        processor = load_processor(args.model)
    processor = trl_processor(processor)
    config = GRPOConfig(
        output_dir=args.out,
        num_generations=args.num_generations,
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        learning_rate=args.learning_rate,
        lr_scheduler_type=args.lr_scheduler,
        warmup_steps=args.warmup_steps,
        num_iterations=args.num_iterations,
        beta=args.beta,
        scale_rewards=args.scale_rewards,
        temperature=args.temperature,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=args.max_tool_calls,
        num_train_epochs=args.epochs,
        max_steps=args.max_steps,
        logging_steps=1,
        save_steps=args.save_steps,
        bf16=bf16,
        use_cpu=not on_gpu,
        report_to=[],
        seed=args.seed,
        generation_kwargs={"suppress_tokens": media_token_ids(processor)},
    )
    tools = [t.strip() for t in args.tools.split(",") if t.strip()] if args.tools else None
    try:
        environment = make_environment_factory(
            tools,
            settings_path=args.tool_settings,
            processor=processor,
            bbox_convention=args.bbox_convention,
            timeout_s=args.tool_timeout,
            allow_exif=args.allow_exif,
        )
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    registry = shared_registry(args.tool_settings)
    schemas = registry.subset(training_tools(registry.names(), tools, args.allow_exif)).schemas()
    rows, first_prompt = load_rows(args.data, args.prompt, schemas, processor)
    prompts = config.generation_batch_size // config.num_generations
    if len(rows) < prompts:  # TRL's sampler drops an incomplete batch and "trains" 0 steps
        raise SystemExit(
            f"error: {args.data} has {len(rows)} usable rows, but one optimiser step draws {prompts} "
            "distinct prompts (--batch-size × --grad-accum / --num-generations); add rows or lower those"
        )
    try:
        check_context(
            processor,
            environment,
            first_prompt,
            max_model_len=context_length(args.model),
            max_completion_length=args.max_completion_length,
            image=rows[0]["image"],
        )
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    trainer = GRPOTrainer(
        model=args.model,
        reward_funcs=[make_reward_func(args.reward)],
        args=config,
        train_dataset=rows,
        processing_class=processor,
        environment_factory=environment,
    )
    trainer.train()
    return trainer


if __name__ == "__main__":
    main()
