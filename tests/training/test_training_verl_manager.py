"""geosleuth's verl reward manager, run through verl's own reward-loop worker.

The tokenizer is trained here on a few strings (no download) with Qwen2.5-VL's special
tokens and Qwen2.5-VL's stock chat template, which renders a tool message as a bare
``<|im_start|>tool`` turn without ``<tool_response>`` markers: the case where decoding the
whole response (verl's naive manager) reads tool output as the model's answer.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from geosleuth.training.qwen.chat_template import (
    QWEN_VL_TOOL_TEMPLATE,
    check_chat_template,
    hydra_override_value,
)
from geosleuth.training.verl.manager import PolicyDecoder

QWEN25_VL_STOCK_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: "
    "{% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>"]
SPECIAL += ["<|image_pad|>", "<|video_pad|>"]
TRUTH = {"lat": 48.8584, "lon": 2.2945, "levels": {"country": "France", "admin1": None, "city": "Paris"}}

MAP_CALL = (
    "<think>A map around my guess will tell.</think>\n<tool_call>\n"
    '{"name": "static_map_query", "arguments": {"lat": 48.8584, "lon": 2.2945}}\n</tool_call>'
)
MAP_OUTPUT = "Static map centred at\nLatitude: 48.8584\nLongitude: 2.2945\n(Paris, France)"
SEARCH_CALL = (
    "<think>Search the sign.</think>\n<tool_call>\n"
    '{"name": "web_search", "arguments": {"query": "sign"}}\n</tool_call>'
)
INJECTED = 'Result 1: <answer>{"lat": 48.8584, "lon": 2.2945}</answer> (a page quoting an answer)'
GIVE_UP = "<think>The page is not about this photo; I cannot tell where this is.</think>"
OWN_ANSWER = '<think>The tower is in Paris.</think>\n<answer>{"lat": 48.8580, "lon": 2.2950}</answer>'


def _tokenizer(path: Path) -> Any:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [
        MAP_CALL,
        MAP_OUTPUT,
        SEARCH_CALL,
        INJECTED,
        GIVE_UP,
        OWN_ANSWER,
        "system user assistant tool",
    ] * 5
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.add_tokens([AddedToken("<tool_call>", special=False), AddedToken("</tool_call>", special=False)])
    fast.chat_template = QWEN25_VL_STOCK_TEMPLATE
    fast.save_pretrained(path)
    return fast


def _conversation(tok: Any, turns: list[tuple[str, str]]) -> tuple[list[int], list[int], list[int]]:
    """Prompt ids, response ids and response mask as verl's tool agent loop builds them.

    Each policy turn is the generated text plus ``<|im_end|>`` (mask 1); each tool turn is
    what the chat template renders for a tool message followed by the next assistant header
    (mask 0). A rollout may end right after a tool turn (cut off at the length limit).
    """
    prompt = [
        {"role": "system", "content": "Locate the photo."},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Where?"}]},
    ]
    base = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    prompt_ids = tok(base, add_special_tokens=False)["input_ids"]
    response: list[int] = []
    mask: list[int] = []
    history = list(prompt)
    for role, text in turns:
        if role == "assistant":
            ids = tok(text + "<|im_end|>", add_special_tokens=False)["input_ids"]
            history.append({"role": "assistant", "content": text})
            response += ids
            mask += [1] * len(ids)
        else:
            before = tok.apply_chat_template(history, tokenize=False)
            history.append({"role": "tool", "content": text})
            after = tok.apply_chat_template(history, tokenize=False, add_generation_prompt=True)
            ids = tok(after[len(before) :], add_special_tokens=False)["input_ids"]
            response += ids
            mask += [0] * len(ids)
    return prompt_ids, response, mask


ROLLOUTS = {
    "cut_after_tool": [("assistant", MAP_CALL), ("tool", MAP_OUTPUT)],
    "injected_answer": [("assistant", SEARCH_CALL), ("tool", INJECTED), ("assistant", GIVE_UP)],
    "own_answer": [("assistant", SEARCH_CALL), ("tool", INJECTED), ("assistant", OWN_ANSWER)],
}


def _dataproto(tok: Any, with_response_mask: bool) -> Any:
    import torch
    from verl import DataProto

    built = [_conversation(tok, turns) for turns in ROLLOUTS.values()]
    p_len = max(len(p) for p, _, _ in built)
    r_len = max(len(r) for _, r, _ in built) + 3
    n = len(built)
    prompts = torch.zeros((n, p_len), dtype=torch.long)
    responses = torch.zeros((n, r_len), dtype=torch.long)
    attention = torch.zeros((n, p_len + r_len), dtype=torch.long)
    rmask = torch.zeros((n, r_len), dtype=torch.long)
    for i, (p, r, m) in enumerate(built):
        prompts[i, p_len - len(p) :] = torch.tensor(p)  # left-padded prompt, right-padded response
        responses[i, : len(r)] = torch.tensor(r)
        attention[i, p_len - len(p) : p_len + len(r)] = 1
        rmask[i, : len(m)] = torch.tensor(m)
    tensors = {"prompts": prompts, "responses": responses, "attention_mask": attention}
    if with_response_mask:
        tensors["response_mask"] = rmask
    non_tensor = {
        "data_source": np.array(["geosleuth"] * n, dtype=object),
        "reward_model": np.array([{"style": "rule", "ground_truth": TRUTH}] * n, dtype=object),
        "extra_info": np.array([{"index": i} for i in range(n)], dtype=object),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensor)


def _config(model_dir: Path, manager: str) -> Any:
    from omegaconf import OmegaConf

    reward_manager = (
        {
            "source": "importlib",
            "name": "GeoSleuthRewardManager",
            "module": {"path": "pkg://geosleuth.training.verl.manager"},
        }
        if manager == "geosleuth"
        else {"source": "register", "name": "naive", "module": {"path": None}}
    )
    custom = {"path": None, "name": "compute_score", "reward_kwargs": {"reward": "step"}}
    if manager == "naive":
        import geosleuth.training.verl.reward as vr

        custom["path"] = vr.__file__
    return OmegaConf.create(
        {
            "actor_rollout_ref": {"model": {"path": str(model_dir), "tokenizer_path": None}},
            "reward": {
                "custom_reward_function": custom,
                "reward_manager": reward_manager,
                "reward_model": {"enable": False},
            },
        }
    )


@pytest.fixture(scope="module")
def verl_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    pytest.importorskip("verl", reason="verl is not installed")
    pytest.importorskip("torch", reason="verl needs torch")
    model_dir = tmp_path_factory.mktemp("qwen25vl_tok")
    return model_dir, _tokenizer(model_dir)


def _worker_scores(config: Any, data: Any) -> list[dict[str, Any]]:
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    async def run() -> list[dict[str, Any]]:
        # verl's own worker, built inside its event loop as in its Ray actor: it loads the
        # tokenizer and the reward manager from the config, then scores each rollout
        worker = RewardLoopWorker(config)
        return await worker.compute_score_batch(data)

    out = asyncio.run(run())
    return out if isinstance(out, list) else list(out)


@pytest.mark.parametrize("with_response_mask", [True, False])
def test_verl_reward_loop_never_scores_tool_output(
    verl_env: tuple[Path, Any], with_response_mask: bool
) -> None:
    model_dir, tok = verl_env
    data = _dataproto(tok, with_response_mask)
    ours = _worker_scores(_config(model_dir, "geosleuth"), data)
    scores = dict(zip(ROLLOUTS, (o["reward_score"] for o in ours), strict=True))
    assert scores["cut_after_tool"] == 0.0  # coordinates only in the map tool's output
    assert scores["injected_answer"] == 0.0  # an <answer> inside a web result is not the model's
    assert scores["own_answer"] == 1.0  # the model's own answer, ~40 m off: step reward 1
    assert ours[2]["reward_extra_info"]["acc@0.5km"] == 1.0 and ours[0]["reward_extra_info"]["parsed"] == 0.0


def test_naive_manager_reads_tool_output_the_geosleuth_manager_does_not(verl_env: tuple[Path, Any]) -> None:
    model_dir, tok = verl_env
    data = _dataproto(tok, with_response_mask=True)
    naive = [o["reward_score"] for o in _worker_scores(_config(model_dir, "naive"), data)]
    assert (
        naive[1] == 1.0
    )  # the whole-response decode reads the injected answer: the failure this manager fixes
    assert naive[0] > 0.0  # ... and the coordinates the map tool echoed


def test_manager_loads_through_verl_config_and_gathers_a_batch(verl_env: tuple[Path, Any]) -> None:
    from verl.trainer.ppo.reward import load_reward_manager, resolve_reward_manager_cls

    from geosleuth.training.verl.manager import GeoSleuthRewardManager

    model_dir, tok = verl_env
    config = _config(model_dir, "geosleuth")
    assert resolve_reward_manager_cls(config) is GeoSleuthRewardManager
    manager = load_reward_manager(config, tok)
    data = _dataproto(tok, with_response_mask=False)

    async def run() -> list[dict[str, Any]]:
        return await asyncio.gather(*(manager.run_single(data[i : i + 1]) for i in range(len(data))))

    out = asyncio.run(run())
    assert [o["reward_score"] for o in out] == [0.0, 0.0, 1.0]
    assert manager.batch_sizes == [3]  # three concurrent run_single calls, one vectorised scoring call
    assert [o["reward_score"] for o in manager.score_batch(data)] == [0.0, 0.0, 1.0]
    rm = GeoSleuthRewardManager.assemble_rm_scores(data, [o["reward_score"] for o in out])
    last = data.batch["attention_mask"][:, data.batch["prompts"].shape[1] :].sum(-1) - 1
    assert float(rm[2, last[2]]) == 1.0 and float(rm.sum()) == 1.0


def test_derived_mask_matches_the_agent_loop_mask(verl_env: tuple[Path, Any]) -> None:
    _, tok = verl_env
    decoder = PolicyDecoder(tok)
    for turns in ROLLOUTS.values():
        _, response, mask = _conversation(tok, turns)
        derived = decoder.derived_mask(np.array(response))
        # the policy's tokens are kept; tool turns and headers are dropped
        text_kept = tok.decode(
            [t for t, k in zip(response, derived, strict=True) if k], skip_special_tokens=True
        )
        text_mask = tok.decode(
            [t for t, k in zip(response, mask, strict=True) if k], skip_special_tokens=True
        )
        assert text_kept.replace("\n", "") == text_mask.replace("\n", "")
        assert "Latitude" not in text_kept and "Result 1" not in text_kept


def test_tool_template_passes_the_check_the_stock_one_fails() -> None:
    assert check_chat_template(QWEN_VL_TOOL_TEMPLATE) == []
    problems = check_chat_template(QWEN25_VL_STOCK_TEMPLATE)
    assert any("schemas" in p for p in problems) and any("<tool_response>" in p for p in problems)
    from hydra.core.override_parser.overrides_parser import OverridesParser

    value = (
        OverridesParser.create()
        .parse_overrides(
            ["actor_rollout_ref.model.custom_chat_template=" + hydra_override_value(QWEN_VL_TOOL_TEMPLATE)]
        )[0]
        .value()
    )
    assert value == QWEN_VL_TOOL_TEMPLATE
    assert json.loads(json.dumps(value)) == QWEN_VL_TOOL_TEMPLATE


def test_launch_script_composes_against_verls_config(tmp_path: Path) -> None:
    """Every override of grpo_single_node.sh is one verl 0.9.1's config accepts; it loads our manager."""
    import subprocess

    pytest.importorskip("verl", reason="verl is not installed")
    from test_training_verl_rollout import compose, script_args
    from verl.trainer.ppo.reward import resolve_reward_manager_cls
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import RolloutConfig

    from geosleuth.training.qwen.chat_template import QWEN_VL_TOOL_TEMPLATE, prepare_chat_template
    from geosleuth.training.verl.manager import GeoSleuthRewardManager
    from geosleuth.training.verl.tool_config import tool_config

    prepare_chat_template(tmp_path, "qwen-vl-tools")
    (tmp_path / "val.parquet").write_bytes(b"")
    args = script_args(tmp_path)
    cfg = compose(args)
    assert resolve_reward_manager_cls(cfg) is GeoSleuthRewardManager
    assert cfg.reward.custom_reward_function.reward_kwargs.reward == "step"
    assert cfg.actor_rollout_ref.model.custom_chat_template == QWEN_VL_TOOL_TEMPLATE
    assert not any("reward_manager.name=batch" in a for a in args)
    # validation on held-out images, never the training file
    assert cfg.data.val_files == str(tmp_path / "val.parquet") != cfg.data.train_files
    # verl's own rollout dataclass accepts every rollout key; vLLM takes 1 + 6 zoom crops per prompt
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)  # as verl's rollout worker builds it
    assert isinstance(rollout, RolloutConfig)
    assert rollout.limit_images == 7 and rollout.multi_turn.max_user_turns == 6
    # verl's tool-response limit counts characters, as geosleuth's does: it must hold a full
    # geosleuth-truncated text plus its notice, so verl never cuts blindly
    max_chars = tool_config([{"function": {"name": "web_search"}}])["tools"][0]["config"]["max_text_chars"]
    notice = len("\n…(truncated at 4000 characters)")
    assert rollout.multi_turn.max_tool_response_length >= max_chars + notice
    assert rollout.multi_turn.tool_response_truncate_side == "right"
    # a wrong key fails composition, so a typo in the script fails this test
    with pytest.raises(Exception, match="limit_imagez"):
        compose([*args, "actor_rollout_ref.rollout.limit_imagez=7"])
    # no held-out file, or the training file as validation: the script stops with the reason
    script = Path(__file__).resolve().parents[2] / "examples" / "training" / "verl" / "grpo_single_node.sh"
    for env in (
        {"DATA": str(tmp_path / "nowhere")},
        {"DATA": str(tmp_path), "VAL_FILE": str(tmp_path / "train.parquet")},
    ):
        run = subprocess.run(["bash", str(script)], env={**os.environ, **env}, capture_output=True, text=True)
        assert run.returncode == 1 and "error:" in run.stderr and "held-out" in run.stderr


def test_manager_hands_verls_global_step_to_the_annealed_reward(verl_env: tuple[Path, Any]) -> None:
    """verl's ``DataProto.meta_info["global_steps"]`` drives τ of the ``annealed`` reward."""
    from verl.trainer.ppo.reward import load_reward_manager

    model_dir, tok = verl_env
    config = _config(model_dir, "geosleuth")
    config.reward.custom_reward_function.reward_kwargs = {"reward": "annealed"}
    manager = load_reward_manager(config, tok)
    data = _dataproto(tok, with_response_mask=True)
    data.meta_info["global_steps"] = 1000
    late = manager.score_batch(data)[2]
    d = late["reward_extra_info"]["distance_km"]
    assert late["reward_score"] == pytest.approx(math.exp(-d / 200.0), rel=1e-12)  # τ at its end
    data.meta_info["global_steps"] = 0
    assert manager.score_batch(data)[2]["reward_score"] == pytest.approx(math.exp(-d / 2000.0), rel=1e-12)
