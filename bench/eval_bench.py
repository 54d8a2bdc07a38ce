"""Runner throughput and overhead: 1,000 samples at concurrency 64 against instant backends.

Three measurements, each into a fresh run directory:
  1. ``noop``:  a run function that returns at once -> pure runner cost (Task building, group-commit
     fsync of the JSONL, bookkeeping);
  2. ``http``:  the real agent (``direct`` prompt style, no tools) against the local fake
     OpenAI-compatible server answering instantly -> the agent + HTTP + runner path;
  3. ``report``: `write_report` (summary, Markdown, CSV, plots, HTML) over the finished http run;
  4. ``memory``: memory held by a report's `RecordStats` against full trajectory records,
     over synthetic 8-turn trajectories with tool calls and a few KB of text each.

Usage: python bench/eval_bench.py [--samples 1000] [--concurrency 64] [--memory-records 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import tempfile
import time
import tracemalloc
from pathlib import Path

from PIL import Image

from geosleuth.core.records import Prediction, Task, ToolCallRecord, Trajectory, Turn, Usage
from geosleuth.eval.datasets.loading import load_dataset
from geosleuth.eval.report.write import load_records, write_report
from geosleuth.eval.run.config import EvalConfig, build_manifest, write_manifest
from geosleuth.eval.run.pipeline import AgentRunner, write_samples
from geosleuth.eval.run.runner import run_samples
from geosleuth.eval.run.store import TrajectoryStore, load_run_trajectories
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


def synthetic_run(run_dir: Path, n: int) -> None:
    """n records of 8 turns: 1.5 KB of model text and one tool call with a 1 KB result per turn."""
    prose = "The signage is in German and the plates are Swiss; the lake suggests Lucerne. " * 19
    result = "Luzern, Lucerne, Switzerland (47.0505, 8.3064) population 82000; " * 16
    store = TrajectoryStore(run_dir)
    store.open()
    batch = []
    for i in range(n):
        turns = [
            Turn(
                index=k,
                text=prose,
                tool_calls=[
                    ToolCallRecord(name="geocode", arguments={"address": f"Luzern {i}"}, result_text=result)
                ],
                usage=Usage(prompt_tokens=900, completion_tokens=120),
            )
            for k in range(8)
        ]
        prediction = Prediction(lat=47.05, lon=8.31, country="CH", raw=prose)
        batch.append(Trajectory(sample_id=f"s{i:06d}", model="m", turns=turns, prediction=prediction))
        if len(batch) == 1000:
            store.append(batch)
            batch.clear()
    store.append(batch)
    store.close()


def held_mib(run_dir: Path, light: bool) -> tuple[float, float]:
    """(MiB held after loading, peak MiB while loading)."""
    tracemalloc.start()
    loaded = load_records(run_dir) if light else load_run_trajectories(run_dir)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del loaded
    return current / 2**20, peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--memory-records", type=int, default=20000)
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

        synthetic_run(root / "memory", args.memory_records)
        jsonl_mib = (root / "memory" / "trajectories.jsonl").stat().st_size / 2**20
        full_held, full_peak = held_mib(root / "memory", light=False)
        light_held, light_peak = held_mib(root / "memory", light=True)

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
    print(
        f"memory      : {args.memory_records} records, {jsonl_mib:.0f} MiB JSONL: full records hold "
        f"{full_held:.0f} MiB (peak {full_peak:.0f}), record stats for reports {light_held:.0f} MiB "
        f"(peak {light_peak:.0f})"
    )


if __name__ == "__main__":
    main()
