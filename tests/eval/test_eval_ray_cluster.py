"""Node loss inside one `eval --backend ray` run, on a real two-node Ray cluster (slow).

The nodes are started with ``ray start --head`` and ``ray start --address`` on 127.0.0.1 with
``RAY_AUTH_MODE=disabled`` on every node (the private-cluster way of docs/evaluation.md). The
run goes through the CLI and the built-in agent against the fake OpenAI server, slowed per
request so that SIGKILLing the worker node's raylet lands mid-run. Afterwards the whole run
must hold: every sample answered exactly once, no torn line, the metrics of a local run; and
Ray's dump of the dead raylet's log stays out of the driver's output (stdout is the JSON).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from eval_data import make_csv_dataset
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.testing import FakeOpenAIServer, Step, reply
from geosleuth.testing.ray_cluster import LocalRayCluster, ray_unavailable, wait_for

pytestmark = pytest.mark.slow

N = 48
PLACES = [(f"p{i:02d}", -40.0 + 1.5 * i, -120.0 + 5.0 * i, "France", "Paris") for i in range(N)]


def _answers(pace: dict[str, float]):  # type: ignore[no-untyped-def]
    """Same request, same answer (coordinates from a hash of the messages, so of the image)."""

    def script(request: dict) -> Step:
        digest = hashlib.sha1(json.dumps(request.get("messages", []), sort_keys=True).encode()).digest()
        h = int.from_bytes(digest[:8], "big")
        answer = {"lat": (h % 16000) / 100 - 80, "lon": (h // 16000 % 36000) / 100 - 180, "country": "France"}
        return replace(reply(json.dumps(answer)), delay_s=pace["delay_s"])

    return script


def _records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]  # a torn line fails here


def _metrics(run_dir: Path) -> dict:
    result = CliRunner().invoke(app, ["report", str(run_dir), "--json", "--no-html", "--no-plots"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_a_node_killed_mid_run_loses_no_sample(tmp_path: Path) -> None:
    if why := ray_unavailable():
        pytest.skip(why)
    data = make_csv_dataset(tmp_path / "bench", PLACES)
    pace = {"delay_s": 0.0}
    agent = ["--model", "fake-vlm", "-p", "direct", "--no-report", "--concurrency", "2"]
    with FakeOpenAIServer(_answers(pace)) as server:
        local = CliRunner().invoke(
            app, ["eval", str(data), "--out", str(tmp_path / "local"), "--base-url", server.base_url, *agent]
        )
        assert local.exit_code == 0, local.output
        pace["delay_s"] = 0.4  # a batch of 4 at concurrency 2 takes about 0.8 s
        with LocalRayCluster(nodes=2, cpus=1) as cluster:
            run_dir = tmp_path / "ray"
            command = [
                str(Path(sys.executable).with_name("geosleuth")),
                *["eval", str(data), "--out", str(run_dir), "--base-url", server.base_url, *agent],
                *["--backend", "ray", "--ray-address", cluster.address, "--shards", "2"],
                *["--ray-batch-size", "4", "--ray-restart-wait", "60", "--json"],
            ]
            env = {**cluster.env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
            driver = subprocess.Popen(
                command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            try:
                log = run_dir / "trajectories.jsonl"
                started = wait_for(lambda: log.exists() and len(log.read_text().splitlines()) >= 4, 90)
                assert started, "the run wrote nothing within 90 s"
                cluster.kill_raylet(1)  # its agent then pushes the raylet's last log lines to us
                out, err = driver.communicate(timeout=120)
                agent_log = cluster.root / "1" / "session_latest" / "logs" / "dashboard_agent.log"
                assert "Raylet is terminated" in agent_log.read_text()  # Ray did push its dump to us
            finally:
                if driver.poll() is None:
                    driver.kill()
                    driver.communicate()
    assert driver.returncode == 0, err
    stats = json.loads(out)  # stdout is the run's JSON alone: no Ray output mixed in
    assert stats["done"] == N and stats["failed"] == 0
    assert stats["batches_retried"] >= 1, err  # the kill landed on a batch in flight
    assert "[state-dump]" not in out + err
    assert len(set(re.findall(r"worker (\d+) lost", err))) == 1, err  # spread: one node held one shard
    records = _records(run_dir)
    assert sorted(r["sample_id"] for r in records) == [p[0] for p in PLACES]  # each exactly once
    assert {r["status"] for r in records} == {"ok"}
    ray_summary, local_summary = _metrics(run_dir), _metrics(tmp_path / "local")
    assert ray_summary["metrics"] == local_summary["metrics"]
    assert ray_summary["status_counts"] == {"ok": N}
