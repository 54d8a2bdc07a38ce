"""A dry run of a verl launch on any machine: ``DRY_RUN=1 bash grpo_single_node.sh``.

A real run needs GPUs and vLLM (or SGLang) for its rollouts. Everything verl does with the
launch script's arguments before the first rollout runs on a CPU, so this module does it,
with verl's own code, and stops there: it composes the arguments against verl's Hydra config
(a wrong key fails), validates the config, builds the tokenizer and processor, loads the train
and validation parquet through the dataset class the script names (its length filter
included), reads one row, loads the tool YAML as the agent loop does and the reward manager
as the reward loop does. It prints one JSON summary; a failure exits 1 with the reason.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

from geosleuth.training.qwen.processors import load_processor


def compose(overrides: list[str]) -> Any:
    """verl's ``ppo_trainer`` config with ``overrides``, as ``verl.trainer.main_ppo`` composes it."""
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=overrides)


def _processor(model: str) -> tuple[Any, str]:
    """verl's processor for ``model``; when verl's loader gives none (it turns every error into a
    warning, torchvision missing among them), the image-only one, and why."""
    from verl.utils import hf_processor

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        processor = hf_processor(model, use_fast=True)
    if processor is not None:
        return processor, type(processor).__name__
    reason = next((str(w.message) for w in caught if "processor" in str(w.message)), "no processor")
    lines = [line.strip() for line in reason.split(":", 1)[-1].splitlines() if line.strip()]
    first = lines[0] if lines else reason
    fallback = load_processor(model)
    note = f"{type(fallback).__name__}, image-only: verl's loader failed ({first[:200]})"
    return fallback, note


def _dataset(config: Any, files: Any, tokenizer: Any, processor: Any, train: bool) -> dict[str, Any]:
    from verl.trainer.ppo.utils import create_rl_dataset

    dataset = create_rl_dataset(files, config.data, tokenizer, processor, is_train=train)
    if len(dataset) == 0:
        raise ValueError(f"{files}: no row left to train on")
    row = dataset[0]
    images = [
        part for message in row["raw_prompt"] if isinstance(message.get("content"), list)
        for part in message["content"] if isinstance(part, dict) and part.get("type") == "image"
    ]  # fmt: skip
    return {
        "class": type(dataset).__name__,
        "rows": len(dataset),
        "first_row_images": len(images),
        "first_row_tools": sorted(row.get("tools_kwargs") or {}),
    }


def check(config: Any) -> dict[str, Any]:
    """What verl builds from ``config`` before its first rollout, summarised."""
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.tool_parser import ToolParser
    from verl.tools.tool_registry import initialize_tools_from_config
    from verl.trainer.ppo.reward import load_reward_manager
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils import hf_tokenizer
    from verl.utils.config import validate_config

    validate_config(
        config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
    )
    OmegaConf.resolve(config)
    model = config.actor_rollout_ref.model.path
    tokenizer = hf_tokenizer(model)
    processor, processor_note = _processor(model)
    if config.actor_rollout_ref.model.get("custom_chat_template"):
        processor.chat_template = tokenizer.chat_template = (
            config.actor_rollout_ref.model.custom_chat_template
        )
    multi_turn = config.actor_rollout_ref.rollout.multi_turn
    tools = initialize_tools_from_config(multi_turn.tool_config_path) if multi_turn.tool_config_path else []
    parser = ToolParser.get_tool_parser(multi_turn.format, tokenizer) if multi_turn.enable else None
    manager = load_reward_manager(config, tokenizer)
    return {
        "model": model,
        "processor": processor_note,
        "train": _dataset(config, config.data.train_files, tokenizer, processor, train=True),
        "val": _dataset(config, config.data.val_files, tokenizer, processor, train=False),
        "tools": [tool.name for tool in tools],
        "tool_parser": type(parser).__name__ if parser else None,
        "reward_manager": type(manager).__name__,
        "reward": OmegaConf.to_container(config.reward.custom_reward_function.reward_kwargs),
    }


def main(argv: list[str] | None = None) -> int:
    overrides = sys.argv[1:] if argv is None else argv
    try:
        summary = check(compose(overrides))
    except Exception as exc:  # any failure is the answer of a dry run: say it and exit 1
        print(f"error: verl dry run failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(summary))
    print("dry run passed: a real run needs GPUs and vLLM for the rollouts", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
