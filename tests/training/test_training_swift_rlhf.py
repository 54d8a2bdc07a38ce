"""`swift rlhf` (ms-swift 4.6's own CLI) runs a GRPO step on the tiny Qwen3-VL with the
`geosleuth_tools` multi-turn scheduler and the `geo_step` reward of our plugin.

ms-swift pins trl<1 and transformers<5.20, and Qwen3-VL's processor needs a torchvision built for
its torch, so it runs from its own environment, `.swift-venv` (scripts/test.sh builds it); the
test skips with the reason where that environment is missing.

The policy is the tiny random Qwen3-VL (`geosleuth.testing.tiny_vlm`) with scripted weights, so
a random model still takes the path under test: its attention and MLP outputs are zeroed, so
each next token depends only on the last one (a bigram table in the embeddings and the output
head). From any prompt it writes a tool call; the call's first token is penalised once it is in
the context (``--repetition_penalty``), so after the tool's reply the same table writes an
answer, Paris or Lyon at even odds, and the group's rewards differ. Everything else is
ms-swift's: its argument parsing, model and template loading, its transformers rollout engine,
multi-turn loop, reward scoring and GRPO update.

The tiny model's image and video tokens sit at Qwen's own ids (151655, 151656): ms-swift's Qwen
templates expand the image placeholder by those fixed ids, not by the tokenizer's.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
from pathlib import Path

import pytest
from test_training_swift import PLUGIN, write_swift_dataset

ROOT = Path(__file__).resolve().parents[2]
SWIFT_VENV = ROOT / ".swift-venv"
SWIFT = SWIFT_VENV / "bin" / "swift"

IMAGE_PAD_ID = 151655  # ms-swift's Qwen2VLTemplate.image_token_id; the video pad follows it
THINK = "Let me look the town up."
CALL = '\n{"name": "geocode", "arguments": {"address": "Paris, France"}}\n'
ANSWER = '<answer>{"lat": 48.8566, "lon": 2.3522, "city": "Paris", "country": "France"}</answer>'
LYON = '<answer>{"lat": 45.764, "lon": 4.8357, "city": "Lyon", "country": "France"}</answer>'
MARGIN = 80.0  # logit of a scripted next token; every other token gets -MARGIN / 2
ANSWER_LOGIT = 50.0  # each answer (Paris, Lyon), second to THINK until THINK is penalised
PENALTY = 4.0  # --repetition_penalty: THINK's logit 80 -> 20 once it is in the context, below 50


def _move_media_tokens(model_dir: Path) -> int:
    """Put ``<|image_pad|>`` / ``<|video_pad|>`` at Qwen's ids in the tokenizer files (the ids
    below them filled with unused tokens); returns the new vocabulary size."""
    from transformers import PreTrainedTokenizerFast

    path = model_dir / "tokenizer.json"
    spec = json.loads(path.read_text(encoding="utf-8"))
    vocab = spec["model"]["vocab"]
    moved = {"<|image_pad|>": IMAGE_PAD_ID, "<|video_pad|>": IMAGE_PAD_ID + 1}
    vocab.update(moved)
    for entry in spec["added_tokens"]:
        entry["id"] = moved.get(entry["content"], entry["id"])
    used = set(vocab.values())
    vocab.update({f"<|unused_{i}|>": i for i in range(IMAGE_PAD_ID) if i not in used})
    path.write_text(json.dumps(spec), encoding="utf-8")
    fast = PreTrainedTokenizerFast(
        tokenizer_file=str(path), eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.save_pretrained(model_dir)
    assert fast.convert_tokens_to_ids("<|image_pad|>") == IMAGE_PAD_ID
    return len(fast)


def _one_token(tok: object, text: str) -> int:
    ids = tok.encode(text, add_special_tokens=False)  # type: ignore[attr-defined]
    assert len(ids) == 1, f"{text!r} should be one token of the tiny tokenizer, got {ids}"
    return ids[0]


def build_scripted_vlm(model_dir: Path) -> None:
    """The tiny Qwen3-VL whose continuation of any prompt is THINK, a ``geocode`` call, end of
    turn; and, once THINK is penalised, ANSWER or LYON at even odds, end of turn (sampled at
    temperature 1; every other token trails by 30 logits or more)."""
    import torch
    from transformers import AutoTokenizer, Qwen3VLConfig, Qwen3VLForConditionalGeneration

    from geosleuth.testing.tiny_vlm import build_tiny_vlm

    build_tiny_vlm(
        model_dir, max_positions=16384, corpus=[THINK, CALL, ANSWER, LYON], vocab_size=700, across_words=True
    )
    vocab_size = _move_media_tokens(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    think, call, answer, lyon = (_one_token(tok, t) for t in (THINK, CALL, ANSWER, LYON))
    opened, closed, end = tok.convert_tokens_to_ids(["<tool_call>", "</tool_call>", "<|im_end|>"])
    chain = {think: opened, opened: call, call: closed, closed: end, answer: end, lyon: end}
    config = Qwen3VLConfig.from_pretrained(model_dir)
    config.text_config.vocab_size = vocab_size
    config.image_token_id, config.video_token_id = IMAGE_PAD_ID, IMAGE_PAD_ID + 1
    config.tie_word_embeddings = config.text_config.tie_word_embeddings = False
    model = Qwen3VLForConditionalGeneration(config)
    text = model.model.language_model
    hidden = config.text_config.hidden_size
    dims = {token: i + 1 for i, token in enumerate(chain)}  # dimension 0: every other token
    scale = math.sqrt(hidden)  # RMSNorm turns a unit basis vector into sqrt(hidden) times it
    with torch.no_grad():
        for layer in text.layers:  # the residual stream keeps the last token's embedding
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        text.norm.weight.fill_(1.0)
        text.embed_tokens.weight.zero_()
        text.embed_tokens.weight[:, 0] = 1.0
        head = model.lm_head.weight
        head.fill_(-MARGIN / 2 / scale)
        for token, dim in dims.items():
            text.embed_tokens.weight[token] = 0.0
            text.embed_tokens.weight[token, dim] = 1.0
            head[chain[token], dim] = MARGIN / scale
        head[think, 0] = MARGIN / scale
        head[answer, 0] = head[lyon, 0] = ANSWER_LOGIT / scale
    assert model.lm_head.weight.data_ptr() != text.embed_tokens.weight.data_ptr()
    model.save_pretrained(model_dir)


def _swift_rlhf(model: Path, data: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """The CPU form of docs/training.md's `swift rlhf` command, one GRPO step on the tiny model."""
    args = {
        "rlhf_type": "grpo", "model": model, "model_type": "qwen3_vl", "dataset": data,
        "external_plugins": PLUGIN, "reward_funcs": "geo_step", "multi_turn_scheduler": "geosleuth_tools",
        "max_turns": 3, "num_generations": 4, "per_device_train_batch_size": 4, "max_steps": 1,
        "use_vllm": "false", "tuner_type": "full", "torch_dtype": "float32", "beta": 0,
        "max_completion_length": 8, "repetition_penalty": PENALTY, "log_completions": "true",
        "output_dir": out, "report_to": "none", "save_strategy": "no", "dataloader_num_workers": 0,
        "check_model": "false",  # else it asks the ModelScope hub whether the local model is the latest
    }  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),  # the plugin imports this checkout's geosleuth
        "GEOSLEUTH_TOOL_CACHE_MODE": "off",
        "HF_HUB_OFFLINE": "1",
        "MAX_PIXELS": str(64 * 64),
        "OMP_NUM_THREADS": "1",
    }
    cmd = [str(SWIFT), "rlhf", *(s for k, v in args.items() for s in (f"--{k}", str(v)))]
    return subprocess.run(cmd, env=env, cwd=out.parent, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_swift_rlhf_grpo_step_runs_the_policys_tool_call_and_scores_its_answer(tmp_path: Path) -> None:
    if not (SWIFT_VENV / ".installed").is_file() or not SWIFT.is_file():
        pytest.skip("the ms-swift venv (.swift-venv, built by scripts/test.sh) is missing or incomplete")
    model = tmp_path / "tiny-qwen3-vl"
    build_scripted_vlm(model)
    data = write_swift_dataset(tmp_path)  # one Paris photo, tools image_zoom_in_tool and geocode
    out = tmp_path / "out"
    run = _swift_rlhf(model, data, out)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    (run_dir,) = out.glob("v*")  # ms-swift adds a version folder
    logged = [json.loads(line) for line in (run_dir / "logging.jsonl").read_text().splitlines()]
    (step,) = [row for row in logged if "rewards/geo_step/mean" in row]
    assert step["global_step/max_steps"] == "1/1"
    assert step["num_turns"] == 2  # the tool call, then the answer after the tool's reply
    table = json.loads((run_dir / "completions.jsonl").read_text().splitlines()[0])
    assert table["step"] == ["1"] * 4
    # Thinking with Map's step reward, by hand: the truth itself (0 km) 1; Lyon, 392 km away, 0.1
    by_hand = {ANSWER: 1.0, LYON: 0.1}
    assert set(table["completion"]) == set(by_hand)  # seed 42 samples both answers
    rewards = [by_hand[c] for c in table["completion"]]
    assert table["geo_step"] == pytest.approx(rewards)
    assert step["rewards/geo_step/mean"] == pytest.approx(statistics.mean(rewards))
    # GRPO's advantage (DeepSeekMath): the reward less the group mean, over the group's std
    mean, std = statistics.mean(rewards), statistics.stdev(rewards)
    assert table["advantages"] == pytest.approx([(r - mean) / std for r in rewards], rel=1e-3)
    assert step["grad_norm"] > 0  # the update has a gradient
    for prompt in table["prompt"]:
        history = prompt.split("<|im_start|>assistant\n", 1)[1]
        assert history.startswith(f"{THINK}<tool_call>{CALL}</tool_call>")  # the policy's call
        (reply,) = re.findall(r"<tool_response>(.*?)</tool_response>", history, re.S)
        # geosleuth's offline geocoder ran it: GeoNames' Paris (id 2988507) at 48.85341, 2.34880
        assert (
            "TOOL OUTPUT geocode" in reply
            and "Paris, Ile-de-France, France [FR] @ 48.85341, 2.34880" in reply
        )
