"""A tiny random Qwen3-VL built locally (nothing downloaded), laid out as a Hub checkpoint.

Tests and benchmarks train it on CPU: the tokenizer is a byte-level BPE trained here on a few
strings (``corpus``: text the model will read and write, so it takes few tokens), the chat
template is the Qwen3-VL one TRL ships, and the weights are random from a config. The folder
holds what a downloaded Qwen3-VL holds (``preprocessor_config.json``,
``video_preprocessor_config.json``, tokenizer, chat template), so loading it meets the same
torchvision requirement a real one does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from geosleuth.training.qwen.processors import image_only

SPECIAL = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
    "<|video_pad|>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
    "<think>", "</think>",
]  # fmt: skip
BASE_TEXT = '<answer>{"lat": 48.85, "lon": 2.35, "city": "Paris", "country": "France"}</answer> Where? user'
VIDEO_CONFIG = {
    "video_processor_type": "Qwen3VLVideoProcessor", "processor_class": "Qwen3VLProcessor",
    "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
}  # fmt: skip


def _tokenizer(corpus: Sequence[str], vocab_size: int, across_words: bool) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen3_vl_chat_template

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=not across_words)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        [BASE_TEXT] * 20 + list(corpus) * 20,
        trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=SPECIAL,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = qwen3_vl_chat_template
    return fast


def build_tiny_vlm(
    model_dir: Path,
    max_positions: int = 2048,
    corpus: Sequence[str] = (),
    vocab_size: int = 400,
    hidden_size: int = 32,
    max_pixels: int = 64 * 64,
    seed: int = 0,
    across_words: bool = False,
    hub_files: bool = True,
) -> Any:
    """Save a random Qwen3-VL (two text layers, one vision layer) and its files in ``model_dir``;
    return its image-only processor (the video processor needs torchvision).

    ``across_words``: BPE merges may span spaces and punctuation, so text seen often in
    ``corpus`` (prompts, tool output) becomes a few tokens and CPU rollouts stay short.
    ``hub_files``: also save the tokenizer, processor configs and chat template beside the weights."""
    import torch
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    from trl.chat_template_utils import qwen3_vl_chat_template

    fast = _tokenizer(corpus, vocab_size, across_words)
    images = Qwen2VLImageProcessorPil(min_pixels=32 * 32, max_pixels=max_pixels, patch_size=16, merge_size=2)
    processor = image_only(Qwen3VLProcessor)(images, fast, chat_template=qwen3_vl_chat_template)
    ids = fast.convert_tokens_to_ids
    heads = max(2, hidden_size // 8)
    config = Qwen3VLConfig(
        text_config={
            "vocab_size": len(fast), "hidden_size": hidden_size, "intermediate_size": 2 * hidden_size,
            "num_hidden_layers": 2, "num_attention_heads": heads, "num_key_value_heads": heads // 2,
            "head_dim": 8, "max_position_embeddings": max_positions,
            "rope_scaling": {"rope_type": "default", "mrope_section": [1, 1, 2], "mrope_interleaved": True},
            "tie_word_embeddings": True,
        },
        vision_config={
            "depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
            "out_hidden_size": hidden_size,
            "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
            "num_position_embeddings": 64,
            "deepstack_visual_indexes": [0],
        },
        image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"), vision_end_token_id=ids("<|vision_end|>"),
    )  # fmt: skip
    torch.manual_seed(seed)
    model_dir.mkdir(parents=True, exist_ok=True)
    Qwen3VLForConditionalGeneration(config).save_pretrained(model_dir)
    if not hub_files:
        return processor
    fast.save_pretrained(model_dir)
    images.save_pretrained(model_dir)
    (model_dir / "video_preprocessor_config.json").write_text(json.dumps(VIDEO_CONFIG), encoding="utf-8")
    (model_dir / "chat_template.jinja").write_text(qwen3_vl_chat_template, encoding="utf-8")
    return processor
