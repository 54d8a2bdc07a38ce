"""Reward throughput through the verl adapters, and consistency-judge batching on a local fake server.

Predictions are the GeoCLIP gallery's real photo coordinates moved by a random offset
(log-uniform 0.1–5000 km), written as decoded multi-turn rollouts: a tool response quoting a
decoy answer, then the model's answer. Prints pairs/s for each path (single core).

The verl section tokenises the same rollouts as verl's tool agent loop hands them to the
reward loop (Qwen-style ChatML turns, a locally trained byte-level BPE tokenizer, the tool
turn masked out) and times, per 1,000 rollouts, geosleuth's reward manager (policy tokens
only, one vectorised call) beside the plain path verl's naive manager takes (decode the whole
response, `compute_score` once per rollout), with the ratio.

    .venv/bin/python bench/reward_bench.py [--n 100000] [--verl-n 20000] [--judge-rollouts 2000]
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from geosleuth.core.geo import destination
from geosleuth.testing.fake_openai import FakeOpenAIServer, reply
from geosleuth.training.rewards.consistency import ConsistencyJudge, JudgeConfig
from geosleuth.training.verl.reward import compute_score, compute_score_batch

FIXTURE = (
    Path(__file__).resolve().parents[1] / ".." / "shared" / "fixtures" / "geoclip" / "coordinates_100K.csv"
)


def load_truths(n: int) -> np.ndarray:
    with FIXTURE.open(encoding="utf-8") as fh:
        rows = [(float(r["LAT"]), float(r["LON"])) for r in csv.DictReader(fh)]
    reps = -(-n // len(rows))
    return np.array(rows * reps)[:n]


def make_rollouts(truths: np.ndarray, seed: int, lines_share: float) -> list[str]:
    rng = np.random.default_rng(seed)
    dist = 10 ** rng.uniform(-1, np.log10(5000), len(truths))
    bearing = rng.uniform(0, 360, len(truths))
    use_lines = rng.random(len(truths)) < lines_share
    out = []
    for (lat, lon), d, b, lines in zip(truths, dist, bearing, use_lines, strict=True):
        plat, plon = destination(lat, lon, b, d)
        head = (
            "<think>Vegetation and road markings suggest this region.</think>\n"
            '<tool_call>{"name": "web_search", "arguments": {"query": "road markings"}}</tool_call>\n'
            f'<tool_response><answer>{{"lat": {lat:.4f}, "lon": {lon:.4f}}}</answer></tool_response>\n'
        )
        if lines:
            answer = f"<answer>\nCountry: Somewhere\nLatitude: {plat:.5f}\nLongitude: {plon:.5f}\n</answer>"
        else:
            answer = f'<answer>{{"lat": {plat:.5f}, "lon": {plon:.5f}, "city": "X", "country": "Y"}}</answer>'
        out.append(head + answer)
    return out


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:>10,.0f} pairs/s  ({seconds:.2f} s for {n:,})"


def bench_rewards(n: int) -> None:
    truths = load_truths(n)
    gts = [{"lat": float(a), "lon": float(b)} for a, b in truths]
    canonical = make_rollouts(truths, 0, lines_share=0.0)
    mixed = make_rollouts(truths, 1, lines_share=0.2)
    for reward in ("step", "piecewise", "spatial"):
        t = time.perf_counter()
        out = compute_score_batch(["bench"] * n, canonical, gts, reward=reward)
        print(f"verl compute_score_batch [{reward:9s}] JSON answers:      {rate(n, time.perf_counter() - t)}")
    acc = np.mean([o["acc@25km"] for o in out])
    t = time.perf_counter()
    compute_score_batch(["bench"] * n, mixed, gts, reward="step")
    print(f"verl compute_score_batch [step     ] 20% line answers:   {rate(n, time.perf_counter() - t)}")
    m = min(n, 20_000)
    lines = make_rollouts(truths[:m], 2, lines_share=1.0)
    for label, texts in (("JSON answers", canonical), ("line answers", lines)):
        for reward in ("step", "piecewise", "spatial"):
            t = time.perf_counter()
            for text, gt in zip(texts[:m], gts[:m], strict=True):
                compute_score("bench", text, gt, reward=reward)
            took = time.perf_counter() - t
            print(f"verl compute_score, one call per rollout [{reward:9s}] {label}: {rate(m, took)}")
    m = min(n, 5_000)
    compute_score_batch(["bench"] * 10, canonical[:10], gts[:10], reward="hierarchical")  # build name indexes
    t = time.perf_counter()
    compute_score_batch(["bench"] * m, canonical[:m], gts[:m], reward="hierarchical")
    print(f"verl compute_score_batch [hierarchical] (names):       {rate(m, time.perf_counter() - t)}")
    print(f"sanity: acc@25km of the synthetic offsets = {acc:.3f}")


def _chatml_tokenizer(texts: list[str]) -> object:
    """A byte-level BPE tokenizer with Qwen's ChatML special tokens, trained here (no download)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    special = [
        "<|endoftext|>",
        "<|im_start|>",
        "<|im_end|>",
        "<|vision_start|>",
        "<|vision_end|>",
        "<|image_pad|>",
    ]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=4000, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.add_tokens([AddedToken("<tool_call>", special=False), AddedToken("</tool_call>", special=False)])
    return fast


def _verl_batch(n: int) -> tuple[object, object]:
    """(tokenizer, DataProto) of n tool-using rollouts with their ground truths."""
    import torch
    from verl import DataProto

    truths = load_truths(n)
    rng = np.random.default_rng(3)
    turns = []
    for (lat, lon), d, b in zip(truths, 10 ** rng.uniform(-1, 3.7, n), rng.uniform(0, 360, n), strict=True):
        plat, plon = destination(lat, lon, b, d)
        turns.append(
            (
                "<think>Road markings.</think>\n<tool_call>\n"
                '{"name": "web_search", "arguments": {"query": "road"}}\n</tool_call><|im_end|>',
                "\n<|im_start|>tool\nResult: "
                f'<answer>{{"lat": {lat:.4f}, "lon": {lon:.4f}}}</answer><|im_end|>\n<|im_start|>assistant\n',
                "<think>Confident now.</think>\n"
                f'<answer>{{"lat": {plat:.5f}, "lon": {plon:.5f}, "country": "Y"}}'
                "</answer><|im_end|>",
            )
        )
    tok = _chatml_tokenizer([t for parts in turns[:2000] for t in parts])
    rows = [[tok(t, add_special_tokens=False)["input_ids"] for t in parts] for parts in turns]
    length = max(sum(len(x) for x in r) for r in rows)
    responses = torch.zeros((n, length), dtype=torch.long)
    mask = torch.zeros((n, length), dtype=torch.long)
    for i, (a, tool, b) in enumerate(rows):
        ids = a + tool + b
        responses[i, : len(ids)] = torch.tensor(ids)
        mask[i, : len(a)] = 1
        mask[i, len(a) + len(tool) : len(ids)] = 1
    attention = torch.cat([torch.ones((n, 4), dtype=torch.long), (responses != 0).long()], dim=1)
    prompts = torch.ones((n, 4), dtype=torch.long)
    data = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "attention_mask": attention,
            "response_mask": mask,
        },
        non_tensors={
            "data_source": np.array(["bench"] * n, dtype=object),
            "reward_model": np.array(
                [{"ground_truth": {"lat": float(a), "lon": float(b)}} for a, b in truths], dtype=object
            ),
        },
    )
    return tok, data


def bench_verl_manager(n: int) -> None:
    """geosleuth's verl reward manager vs the plain compute_score path, per 1,000 rollouts."""
    try:
        import asyncio

        from omegaconf import OmegaConf
        from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager  # noqa: F401

        from geosleuth.training.verl.manager import GeoSleuthRewardManager
    except ImportError as exc:
        print(f"verl reward manager: skipped ({exc}; install the 'verl' extra)")
        return
    tok, data = _verl_batch(n)
    config = OmegaConf.create({"reward": {"custom_reward_function": {"reward_kwargs": {"reward": "step"}}}})
    manager = GeoSleuthRewardManager(config, tok)
    responses = data.batch["responses"]
    valid = data.batch["attention_mask"][:, -responses.shape[1] :].sum(-1).tolist()
    gts = data.non_tensor_batch["reward_model"]

    t = time.perf_counter()
    plain = [
        compute_score(
            "bench",
            tok.decode(responses[i, : valid[i]].tolist(), skip_special_tokens=True),
            gts[i]["ground_truth"],
        )["score"]
        for i in range(n)
    ]
    t_plain = time.perf_counter() - t
    t = time.perf_counter()
    batch = [o["reward_score"] for o in manager.score_batch(data)]
    t_batch = time.perf_counter() - t
    m = min(n, 4000)
    items = [data[i : i + 1] for i in range(m)]  # verl's worker slices the batch before run_single

    def per_item(make: Callable[[], object]) -> float:
        async def gathered() -> float:
            mgr = make()  # built inside the running loop, as in verl's reward worker
            start = time.perf_counter()
            await asyncio.gather(*(mgr.run_single(item) for item in items))  # type: ignore[attr-defined]
            return time.perf_counter() - start

        return asyncio.run(gathered())

    t_naive = per_item(lambda: _naive_manager(tok))
    t_single = per_item(lambda: GeoSleuthRewardManager(config, tok))
    per_k, per_m = 1000.0 / n, 1000.0 / m
    rows = [
        ("whole batch, plain compute_score per rollout on the whole decoded response", t_plain * per_k, None),
        (
            "whole batch, GeoSleuthRewardManager.score_batch (policy tokens only)",
            t_batch * per_k,
            t_plain * per_k,
        ),
        (f"verl worker, {m:,} run_single: NaiveRewardManager + compute_score", t_naive * per_m, None),
        (
            f"verl worker, {m:,} run_single: GeoSleuthRewardManager (one vectorised call)",
            t_single * per_m,
            t_naive * per_m,
        ),
    ]
    print(f"verl, {n:,} tool rollouts (~{responses.shape[1]} tokens), step reward, per 1,000 rollouts:")
    for label, took, ref in rows:
        tail = "(reference)" if ref is None else f"ratio {took / ref:.2f}x the reference above"
        print(f"  {label:<78s} {took * 1e3:8.1f} ms  {tail}")
    differ = sum(1 for a, b in zip(plain, batch, strict=True) if a != b)
    print(f"  rollouts the two paths score differently: {differ:,} of {n:,}")


def _naive_manager(tok: object) -> object:
    """verl's own naive reward-loop manager with geosleuth's compute_score (the plain path)."""
    from functools import partial

    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    return NaiveRewardManager(None, tok, partial(compute_score, reward="step"))


def bench_judge(rollouts: int, concurrency: int) -> None:
    def script(payload: dict) -> object:
        return reply(json.dumps({"answer": "Y"}))

    texts = [
        f"<think>{f'Clue number {i} points somewhere. ' * 12}</think>"
        f'<answer>{{"lat": 1, "lon": 2, "country": "Y{i}", "state": "R{i}", "city": "C{i}"}}</answer>'
        for i in range(rollouts)
    ]
    with FakeOpenAIServer(script) as server:
        judge = ConsistencyJudge(
            JudgeConfig(model="judge", base_url=server.base_url, concurrency=concurrency)
        )
        t = time.perf_counter()
        judge.score_texts_sync(texts)
        cold = time.perf_counter() - t
        sent = len(server.chat_requests)
        t = time.perf_counter()
        judge.score_texts_sync(texts)
        warm = time.perf_counter() - t
        resent = len(server.chat_requests) - sent
    print(
        f"consistency judge, {rollouts} rollouts x 3 levels, concurrency {concurrency}: "
        f"{sent} requests in {cold:.2f} s ({sent / cold:,.0f} req/s, {rollouts / cold:,.0f} rollouts/s); "
        f"cached rerun {warm:.3f} s with {resent} new requests"
    )


def bench_scalar_distance(n: int = 20_000) -> None:
    """One rollout's distance: `math` (verl's per-rollout path) beside a NumPy call for one pair."""
    from geosleuth.core.geo import haversine_km
    from geosleuth.training.rewards.batch import _distance_one

    rng = np.random.default_rng(5)
    pairs = rng.uniform(-60, 60, (n, 4)).tolist()
    t = time.perf_counter()
    for lat, lon, tlat, tlon in pairs:
        _distance_one(lat, lon, tlat, tlon)
    scalar = (time.perf_counter() - t) / n
    t = time.perf_counter()
    for lat, lon, tlat, tlon in pairs:
        haversine_km(lat, lon, tlat, tlon)
    numpy_call = (time.perf_counter() - t) / n
    print(
        f"one distance: math {scalar * 1e6:.2f} us, NumPy call {numpy_call * 1e6:.2f} us "
        f"(math takes {scalar / numpy_call:.2f}x the NumPy call)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--verl-n", type=int, default=20_000)
    parser.add_argument("--judge-rollouts", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    bench_scalar_distance()
    bench_rewards(args.n)
    bench_verl_manager(args.verl_n)
    bench_judge(args.judge_rollouts, args.concurrency)


if __name__ == "__main__":
    main()
