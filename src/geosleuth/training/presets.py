"""Training presets from the papers' tables, as engine arguments.

Each preset is the settings a paper reports, named by the engine's own keys: verl Hydra
overrides for the RL recipes run on verl (GeoVista, Thinking with Map, SpotAgent), ms-swift
options for GeoAgent (its released scripts are ms-swift) and GeoVista's SFT. The launch scripts
in ``examples/training`` read them (``PRESET=geovista bash grpo_single_node.sh``;
``python -m geosleuth.training.presets NAME`` prints one argument a line), so a value lives
here once and the test compares it with the paper. Values the paper leaves open keep the
launch script's defaults.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

Engine = Literal["verl", "swift"]


@dataclass(frozen=True)
class Preset:
    """One paper's training settings for one engine."""

    name: str
    source: str  # where the numbers come from
    engine: Engine
    settings: tuple[tuple[str, str], ...]

    def arguments(self) -> list[str]:
        """Command-line arguments: ``key=value`` overrides (verl) or ``--key value`` pairs (ms-swift)."""
        if self.engine == "verl":
            return [f"{key}={value}" for key, value in self.settings]
        return [part for key, value in self.settings for part in (f"--{key}", value)]


_RL = "actor_rollout_ref.rollout"
_ACTOR = "actor_rollout_ref.actor"

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "geovista",
            "GeoVista §4 / §5.3: no KL and no entropy term, batch 64, mini-batch 32, 6 turns",
            "verl",
            (
                ("algorithm.use_kl_in_reward", "False"),
                ("algorithm.kl_ctrl.kl_coef", "0.0"),
                (f"{_ACTOR}.use_kl_loss", "False"),
                (f"{_ACTOR}.kl_loss_coef", "0.0"),
                (f"{_ACTOR}.entropy_coeff", "0.0"),
                ("data.train_batch_size", "64"),
                (f"{_ACTOR}.ppo_mini_batch_size", "32"),
                (f"{_RL}.multi_turn.max_assistant_turns", "6"),
            ),
        ),
        Preset(
            "thinking_with_map",
            "Thinking with Map Table 7: KL 0.001, batch 64, PPO mini-batch 16, response 4096, tool "
            "response 1024, group 16, top-k 60, top-p 0.95, temperature 1.0",
            "verl",
            (
                (f"{_ACTOR}.use_kl_loss", "True"),
                (f"{_ACTOR}.kl_loss_coef", "0.001"),
                ("data.train_batch_size", "64"),
                (f"{_ACTOR}.ppo_mini_batch_size", "16"),
                ("data.max_response_length", "4096"),
                (f"{_RL}.multi_turn.max_tool_response_length", "1024"),
                (f"{_RL}.n", "16"),
                (f"{_RL}.top_k", "60"),
                (f"{_RL}.top_p", "0.95"),
                (f"{_RL}.temperature", "1.0"),
            ),
        ),
        Preset(
            "spotagent",
            "SpotAgent Table 7: batch 256, mini-batch 128, prompt and response 4096, validation every "
            "10 steps, a checkpoint every 100; K = 8 samples (§3.3)",
            "verl",
            (
                ("data.train_batch_size", "256"),
                (f"{_ACTOR}.ppo_mini_batch_size", "128"),
                ("data.max_prompt_length", "4096"),
                ("data.max_response_length", "4096"),
                ("trainer.test_freq", "10"),
                ("trainer.save_freq", "100"),
                (f"{_RL}.n", "8"),
            ),
        ),
        Preset(
            "geoagent-sft",
            "GeoAgent §5.1: LoRA rank 64, alpha 128, SFT 2 epochs",
            "swift",
            (("train_type", "lora"), ("lora_rank", "64"), ("lora_alpha", "128"), ("num_train_epochs", "2")),
        ),
        Preset(
            "geoagent-grpo",
            "GeoAgent §5.1: LoRA rank 64, alpha 128, GRPO 1 epoch, temperature 0.7",
            "swift",
            (
                ("train_type", "lora"),
                ("lora_rank", "64"),
                ("lora_alpha", "128"),
                ("num_train_epochs", "1"),
                ("temperature", "0.7"),
            ),
        ),
        Preset(
            "geovista-sft",
            "GeoVista §5.3: SFT context 32768, 1 epoch, learning rate 1e-5, batch 32",
            "swift",
            (
                ("max_length", "32768"),
                ("num_train_epochs", "1"),
                ("learning_rate", "1e-5"),
                ("per_device_train_batch_size", "1"),
                ("gradient_accumulation_steps", "4"),  # x 8 GPUs = 32, as GeoVista's scripts/sft.sh
            ),
        ),
    )
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown training preset {name!r}; choose one of {', '.join(PRESETS)}") from None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(f"usage: python -m geosleuth.training.presets NAME ({' | '.join(PRESETS)})", file=sys.stderr)
        return 2
    try:
        preset = get_preset(args[0])
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(preset.arguments()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
