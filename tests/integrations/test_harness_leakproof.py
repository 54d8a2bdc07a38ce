"""Leak-proof runs through each harness's own CLI (issue 42): `inspect eval` with inspect's
openai-api provider, plain and with geosleuth's agent and the real SearXNG adapter on 127.0.0.1,
and `lmms_eval` with its openai chat model. The photo carries its GPS position and a caption in
EXIF; every request the fake server received is read for ids, file names, paths and metadata."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness_helpers import ROOT, run_python

from geosleuth.integrations import lmms_eval_tasks_folder
from geosleuth.testing import FakeOpenAIServer, reply
from geosleuth.testing.leaky import (
    ANSWER,
    HONEST_URL,
    FakeSearxng,
    LeakyBenchmark,
    assert_clean_requests,
    leaky_benchmark,
    scripted_searcher,
)


def _inspect(bench: LeakyBenchmark, server: FakeOpenAIServer, tmp_path: Path, *task_args: str) -> None:
    args = ["-m", "inspect_ai", "eval", "geosleuth/geolocation", "-T", f"dataset={bench.folder}", *task_args]
    args += [
        "--model",
        "openai-api/local/fake-vlm",
        "--log-dir",
        str(tmp_path / "logs"),
        "--display",
        "plain",
    ]
    env = {
        "LOCAL_BASE_URL": server.base_url,
        "LOCAL_API_KEY": "unused",
        "GEOSLEUTH_TOOLS_CONFIG": str(bench.tools_config),
    }
    done = run_python(".inspect-deps", args, tmp_path, env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


@pytest.mark.skipif(
    not (ROOT / ".inspect-deps" / "inspect_ai").is_dir(), reason="inspect_ai not in .inspect-deps"
)
@pytest.mark.parametrize("tools", [False, True])
def test_inspect_cli_sends_pixels_only_and_guards_search(tmp_path: Path, tools: bool) -> None:
    with FakeSearxng() as search, FakeOpenAIServer(scripted_searcher if tools else [reply(ANSWER)]) as server:
        bench = leaky_benchmark(tmp_path / "bench", search.url)
        extra = ["-T", "tools=true", "-T", "tool_names=web_search"] if tools else []
        _inspect(bench, server, tmp_path, *extra)
        bodies = [r.body.decode() for r in server.chat_requests]
    assert_clean_requests(bodies, bench)
    if tools:
        assert search.queries == ["green bench lamp post"] and HONEST_URL in bodies[1]
        assert "encyclopedia.example.com" in bodies[1]  # hosts mode (the default) keeps it
    (log,) = (tmp_path / "logs").glob("*.eval")
    dumped = run_python(".inspect-deps", ["-m", "inspect_ai", "log", "dump", str(log)], tmp_path)
    (sample,) = json.loads(dumped.stdout)["samples"]
    meta = sample["metadata"]["geosleuth"]
    assert meta["file_metadata"] == ["caption", "comment", "gps"]
    assert meta.get("search_results_blocked") == (2 if tools else None)


@pytest.mark.skipif(not (ROOT / ".lmms-deps" / "lmms_eval").is_dir(), reason="lmms-eval not in .lmms-deps")
def test_lmms_eval_cli_sends_pixels_only(tmp_path: Path) -> None:
    with FakeOpenAIServer([reply(ANSWER)]) as server:
        bench = leaky_benchmark(tmp_path / "bench", "http://127.0.0.1:9")
        args = ["-m", "lmms_eval", "--model", "openai", "--tasks", "geosleuth_generic"]
        args += ["--include_path", str(lmms_eval_tasks_folder())]
        args += ["--model_args", f"model=fake-vlm,base_url={server.base_url},api_key=unused,max_retries=1"]
        args += ["--batch_size", "1", "--output_path", str(tmp_path / "out")]
        done = run_python(".lmms-deps", args, tmp_path, {"GEOSLEUTH_DATASET": str(bench.folder)})
        bodies = [r.body.decode() for r in server.chat_requests]
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "1 of 1 photo(s) carry location metadata" in done.stdout + done.stderr
    assert_clean_requests(bodies, bench)
