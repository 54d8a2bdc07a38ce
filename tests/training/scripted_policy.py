"""A tiny random Qwen3-VL whose next token follows a script, for tests of real tool-calling rollouts.

The model runs its real forward pass inside the engine's own generation (TRL's trainer calls
``generate``); a logits processor then keeps only the script's next token, so the "policy"
calls the tools a test wants. ``plan(text)`` receives the whole decoded context of one row
(prompt, earlier turns, tool responses) and returns what the model says next.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import LogitsProcessor, LogitsProcessorList, Qwen3VLForConditionalGeneration

Plan = Callable[[str], str]


class ForceTokens(LogitsProcessor):
    """Every row emits its own token list, then keeps emitting the list's last token (EOS)."""

    def __init__(self, forced: list[list[int]], start: int) -> None:
        self.forced = forced
        self.start = start

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        pos = input_ids.shape[1] - self.start
        out = torch.full_like(scores, float("-inf"))
        for row, ids in enumerate(self.forced):
            out[row, ids[min(pos, len(ids) - 1)]] = 0.0
        return out


def scripted_model(model_dir: Path, tokenizer: Any, plan: Plan) -> Any:
    """The tiny model in ``model_dir`` whose ``generate`` follows ``plan``; ``model.turns`` records
    every (decoded context, image count) it generated from."""

    class ScriptedQwen3VL(Qwen3VLForConditionalGeneration):
        turns: list[tuple[str, int]] = []

        def generate(self, input_ids: Any = None, **kwargs: Any) -> Any:
            texts = tokenizer.batch_decode(input_ids)
            grid = kwargs.get("image_grid_thw")
            for text in texts:
                self.turns.append((text, text.count("<|vision_start|>")))
            forced = [
                tokenizer.encode(plan(text), add_special_tokens=False) + [tokenizer.eos_token_id]
                for text in texts
            ]
            assert grid is None or len(grid) == sum(n for _, n in self.turns[-len(texts) :])
            kwargs["logits_processor"] = LogitsProcessorList([ForceTokens(forced, input_ids.shape[1])])
            return super().generate(input_ids=input_ids, **kwargs)

    model = ScriptedQwen3VL.from_pretrained(model_dir)
    model.turns = []
    return model
