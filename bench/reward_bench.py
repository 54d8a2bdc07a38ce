"""Reward throughput through the verl adapter, and consistency-judge batching on a local fake server.

Predictions are the GeoCLIP gallery's real photo coordinates moved by a random offset
(log-uniform 0.1–5000 km), written as decoded multi-turn rollouts: a tool response quoting a
decoy answer, then the model's answer. Prints pairs/s for each path (single core).

    .venv/bin/python bench/reward_bench.py [--n 100000] [--judge-rollouts 2000]
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np

from geosleuth.core.geo import destination
from geosleuth.testing.fake_openai import FakeOpenAIServer, reply
from geosleuth.training.consistency import ConsistencyJudge, JudgeConfig
from geosleuth.training.verl_reward import compute_score, compute_score_batch

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
    t = time.perf_counter()
    compute_score_batch(["bench"] * m, canonical[:m], gts[:m], reward="hierarchical")
    print(f"verl compute_score_batch [hierarchical] (names):       {rate(m, time.perf_counter() - t)}")
    print(f"sanity: acc@25km of the synthetic offsets = {acc:.3f}")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--judge-rollouts", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    bench_rewards(args.n)
    bench_judge(args.judge_rollouts, args.concurrency)


if __name__ == "__main__":
    main()
