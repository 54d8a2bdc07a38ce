"""The GRPO example's policy never samples an image or video placeholder token.

A sampled ``<|video_pad|>`` ended a learning-bench run at step 48: TRL re-templates the turn and
the processor counts a video token without a video. TRL itself suppresses only the image token;
``media_token_ids`` gives both to ``GenerationConfig.suppress_tokens``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.mark.slow
def test_suppressed_placeholders_are_never_sampled_even_when_the_policy_prefers_them(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    import torch
    from test_training_smoke import _tiny_vlm
    from transformers import GenerationConfig, LogitsProcessor, Qwen3VLForConditionalGeneration

    from geosleuth.training.trl.env import media_token_ids, trl_processor

    processor = trl_processor(_tiny_vlm(tmp_path / "m"))
    tok = processor.tokenizer
    placeholders = [tok.convert_tokens_to_ids("<|image_pad|>"), tok.convert_tokens_to_ids("<|video_pad|>")]
    assert media_token_ids(processor) == placeholders

    class Prefer(LogitsProcessor):  # a drifting policy: the placeholders far above every other token
        def __call__(self, input_ids: Any, scores: torch.FloatTensor) -> torch.FloatTensor:
            scores[:, placeholders] += 30.0
            return scores

    model = Qwen3VLForConditionalGeneration.from_pretrained(tmp_path / "m")
    prompt = tok("Where was this taken?", return_tensors="pt").input_ids

    def sampled(**extra: Any) -> list[int]:
        torch.manual_seed(0)
        config = GenerationConfig(max_new_tokens=16, do_sample=True, pad_token_id=tok.pad_token_id, **extra)
        out = model.generate(prompt, generation_config=config, logits_processor=[Prefer()])
        return out[0, prompt.shape[1] :].tolist()

    assert set(placeholders) & set(sampled())  # without suppression the policy writes them
    assert not set(placeholders) & set(sampled(suppress_tokens=media_token_ids(processor)))
