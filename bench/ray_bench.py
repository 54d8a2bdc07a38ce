"""`eval --backend ray` on a real two-node Ray cluster (127.0.0.1) against `--backend local`.

All three runs go through the CLI with the built-in agent (``direct`` style) against the fake
OpenAI server answering each request after ``--latency`` seconds (a stand-in for generation
time), with the same number of samples in flight (local ``--concurrency`` = shards × per-actor
concurrency):

  1. ``local``: ``--backend local`` (the reference);
  2. ``ray``:   ``--backend ray --shards 2`` on the cluster, nothing killed;
  3. ``kill``:  the same, with the worker node's raylet SIGKILLed once a few batches are in:
     batches run again, and the wall time the node's death cost against run 2.

Node death is detected after ~1 s here (the cluster's health checks are shortened); Ray's
default is about 30 s, which adds to the figure of run 3 on a real cluster.

Usage: python bench/ray_bench.py [--samples 96] [--latency 0.25] [--concurrency 2] [--batch 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

from geosleuth.testing import FakeOpenAIServer, delay, reply
from geosleuth.testing.ray_cluster import LocalRayCluster, ray_unavailable, wait_for

GEOSLEUTH = str(Path(sys.executable).with_name("geosleuth"))


def make_dataset(folder: Path, n: int) -> Path:
    (folder / "images").mkdir(parents=True)
    rows = ["id,image,lat,lon,country"]
    for i in range(n):
        Image.new("RGB", (64, 48), (i % 256, (7 * i) % 256, (13 * i) % 256)).save(
            folder / "images" / f"{i}.jpg"
        )
        rows.append(f"s{i:04d},{i}.jpg,{-60 + (i * 0.7) % 120:.3f},{-170 + (i * 2.3) % 340:.3f},FR")
    (folder / "data.csv").write_text("\n".join(rows) + "\n")
    return folder


def run(command: list[str], env: dict[str, str], kill=None) -> tuple[dict, float]:  # type: ignore[no-untyped-def]
    """The run's ``--json`` stats and the command's wall time; ``kill()`` runs mid-run if given."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if kill is not None:
            kill()
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command[:3])}… failed ({proc.returncode}):\n{err[-3000:]}")
    return json.loads(out), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=96)
    parser.add_argument("--latency", type=float, default=0.25)
    parser.add_argument("--concurrency", type=int, default=2, help="per Ray actor")
    parser.add_argument("--batch", type=int, default=4)
    args = parser.parse_args()
    if why := ray_unavailable():
        raise SystemExit(why)
    shards = 2
    answer = json.dumps({"lat": 48.85, "lon": 2.35, "city": "Paris", "country": "France"})
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeOpenAIServer(default=delay(args.latency, reply(answer))) as server,
    ):
        root = Path(tmp)
        data = make_dataset(root / "data", args.samples)
        agent = [
            "--base-url",
            server.base_url,
            "--model",
            "fake-vlm",
            "-p",
            "direct",
            "--no-report",
            "--json",
        ]

        def eval_command(out: str, *extra: str) -> list[str]:
            return [GEOSLEUTH, "eval", str(data), "--out", str(root / out), *agent, *extra]

        local, local_wall = run(
            eval_command("local", "--concurrency", str(shards * args.concurrency)), dict(os.environ)
        )
        with LocalRayCluster(nodes=2, cpus=1) as cluster:
            ray_args = ["--backend", "ray", "--ray-address", cluster.address, "--shards", str(shards)]
            ray_args += ["--concurrency", str(args.concurrency), "--ray-batch-size", str(args.batch)]
            clean, clean_wall = run(eval_command("ray", *ray_args), cluster.env)
            log = root / "kill" / "trajectories.jsonl"

            def kill_worker_node() -> None:
                wait_for(lambda: log.exists() and len(log.read_text().splitlines()) >= 2 * args.batch, 300)
                cluster.kill_node(1)

            killed, kill_wall = run(eval_command("kill", *ray_args), cluster.env, kill_worker_node)
        ids = [json.loads(line)["sample_id"] for line in log.read_text().splitlines()]
        assert len(ids) == len(set(ids)) == args.samples, "a sample was lost or answered twice"
    n = args.samples
    for name, stats in (("local", local), ("ray", clean), ("kill", killed)):
        assert stats["done"] == n and stats["failed"] == 0, (name, stats)
    rate = {name: n / stats["wall_s"] for name, stats in (("local", local), ("ray", clean), ("kill", killed))}
    print(f"{n} samples, {args.latency:g} s per model request, {shards * args.concurrency} in flight")
    print(
        f"local backend:        {rate['local']:7.1f} samples/s"
        f"  (run {local['wall_s']:.1f} s, command {local_wall:.1f} s)"
    )
    print(
        f"ray, 2 nodes:         {rate['ray']:7.1f} samples/s  = {rate['ray'] / rate['local']:.2f}x local"
        f"  (run {clean['wall_s']:.1f} s, command {clean_wall:.1f} s with ray.init)"
    )
    print(
        f"ray, node killed:     {rate['kill']:7.1f} samples/s  = {rate['kill'] / rate['local']:.2f}x local,"
        f" {killed['batches_retried']} batch(es) run again, every sample once"
    )
    lost = killed["wall_s"] - clean["wall_s"]
    ratio = killed["wall_s"] / clean["wall_s"]
    print(f"wall time lost to the node's death: {lost:.1f} s = {ratio:.2f}x the clean ray run")


if __name__ == "__main__":
    main()
