"""Runner throughput and overhead: 1,000 samples at concurrency 64 against instant backends.

Three measurements, each into a fresh run directory:
  1. ``noop``:  a run function that returns at once -> pure runner cost (Task building, group-commit
     fsync of the JSONL, bookkeeping);
  2. ``http``:  the real agent (``direct`` prompt style, no tools) against the local fake
     OpenAI-compatible server answering instantly -> the agent + HTTP + runner path;
  3. ``report``: `write_report` (summary, Markdown, CSV, plots, HTML) over the finished http run.

Usage: python bench/eval_bench.py [--samples 1000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import tempfile
import time
from pathlib import Path

from PIL import Image

from geosleuth.core.records import Prediction, Task, Trajectory
from geosleuth.eval.config import EvalConfig, build_manifest, write_manifest
from geosleuth.eval.datasets import load_dataset
from geosleuth.eval.report import write_report
from geosleuth.eval.run import AgentRunner, write_samples
from geosleuth.eval.runner import run_samples
from geosleuth.testing import FakeOpenAIServer, reply


def make_dataset(folder: Path, n: int) -> Path:
    (folder / "images").mkdir(parents=True)
    with (folder / "data.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "image", "lat", "lon", "country"])
        for i in range(n):
            Image.new("RGB", (96, 64), (i % 256, (7 * i) % 256, (13 * i) % 256)).save(
                folder / "images" / f"{i}.jpg"
            )
            writer.writerow([f"s{i:05d}", f"{i}.jpg", -60 + (i * 0.11) % 120, -170 + (i * 0.37) % 340, "FR"])
    return folder


async def noop(task: Task) -> Trajectory:
    return Trajectory(sample_id=task.id, model="noop", prediction=Prediction(lat=0.0, lon=0.0))


def prepare(run_dir: Path, data: Path, samples) -> None:  # type: ignore[no-untyped-def]
    config = EvalConfig(dataset=str(data), out=str(run_dir))
    write_manifest(run_dir, build_manifest(config, {"source": str(data), "fingerprint": "bench"}))
    write_samples(run_dir, samples)


async def timed(samples, run_fn, run_dir: Path, concurrency: int) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    stats = await run_samples(samples, run_fn, run_dir, concurrency=concurrency)
    elapsed = time.perf_counter() - start
    assert stats.done == len(samples), stats
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = make_dataset(root / "data", args.samples)
        samples = load_dataset(data).samples
        n = len(samples)

        prepare(root / "noop", data, samples)
        t_noop = asyncio.run(timed(samples, noop, root / "noop", args.concurrency))

        answer = json.dumps({"lat": 48.85, "lon": 2.35, "city": "Paris", "country": "France"})
        with FakeOpenAIServer(default=reply(answer)) as server:
            runner = AgentRunner(
                {"model": "fake-vlm", "base_url": server.base_url, "prompt_style": "direct"}, root / "http"
            )
            prepare(root / "http", data, samples)
            t_http = asyncio.run(timed(samples, runner, root / "http", args.concurrency))
            requests = len(server.chat_requests)

        start = time.perf_counter()
        summary = write_report(root / "http")
        t_report = time.perf_counter() - start
        size_kb = (root / "http" / "trajectories.jsonl").stat().st_size / 1024

    print(f"samples={n} concurrency={args.concurrency}")
    print(
        f"noop runner : {t_noop:6.2f} s  {n / t_noop:8.0f} samples/s  "
        f"{1e3 * t_noop / n:6.3f} ms/sample overhead"
    )
    print(
        f"agent+http  : {t_http:6.2f} s  {n / t_http:8.0f} samples/s  ({requests} chat requests, "
        f"{size_kb:.0f} KiB JSONL, status {summary['status_counts']})"
    )
    print(f"report      : {t_report:6.2f} s  (summary, markdown, csv, plots, html with {n} sample pages)")


if __name__ == "__main__":
    main()
