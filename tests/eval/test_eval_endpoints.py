"""One reading of ``endpoints:``, ``base_url`` and ``shards`` for the local backend, job arrays and Ray.

Two fake OpenAI-compatible servers on 127.0.0.1 stand for two GPU servers; a third is the
client's default (``OPENAI_BASE_URL``), which must receive nothing when ``endpoints:`` is set
(before, every job of the documented job-array line went to the default, api.openai.com).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from eval_data import PLACES, make_csv_dataset
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.eval.run.backends import shard_of
from geosleuth.eval.run.config import ConfigError, EvalConfig
from geosleuth.eval.run.endpoints import plan_lanes
from geosleuth.testing import FakeOpenAIServer, reply

runner = CliRunner()
IDS = [sid for sid, *_ in PLACES]


def _answering(lat: float):  # type: ignore[no-untyped-def]
    """A server whose every answer is at latitude ``lat``: a trajectory's answer says who served it."""
    return lambda body: reply(json.dumps({"lat": lat, "lon": 0.0, "city": "X", "country": "France"}))


FIRST, SECOND, DEFAULT = 10.0, 20.0, -50.0


def _answered_by(run_dir: Path) -> dict[str, float]:
    """Sample id -> the latitude its answer came with, over a run and its shards."""
    out = {}
    for log in [run_dir / "trajectories.jsonl", *run_dir.glob("shards/*/trajectories.jsonl")]:
        if log.is_file():
            for line in log.read_text().splitlines():
                record = json.loads(line)
                out[record["sample_id"]] = record["prediction"]["lat"]
    return out


@pytest.fixture()
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeOpenAIServer, ...]]:
    with (
        FakeOpenAIServer(_answering(FIRST)) as first,
        FakeOpenAIServer(_answering(SECOND)) as second,
        FakeOpenAIServer(_answering(DEFAULT)) as default,
    ):
        monkeypatch.setenv("OPENAI_BASE_URL", default.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield first, second, default


def _config(tmp_path: Path, data: Path, **values: Any) -> Path:
    """The documented eval-100k.yaml's shape: a Ray config whose jobs may also run as an array."""
    config = {
        "dataset": str(data),
        "out": str(tmp_path / "run"),
        "model": "fake-vlm",
        "prompt": "thinking_with_map",
        "tools": [],
        "max_turns": 1,
        "backend": "ray",
        "ray_address": "auto",
        "concurrency": 2,
        **values,
    }
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_job_array_sends_each_shard_to_its_endpoint(tmp_path: Path, servers: tuple) -> None:
    first, second, default = servers
    data = make_csv_dataset(tmp_path / "bench")
    config = _config(tmp_path, data, endpoints=[first.base_url, second.base_url], shards=4)
    for index in range(4):
        argv = ["eval", "--config", str(config), "--backend", "local", "--shard", f"{index}/4", "--no-report"]
        result = runner.invoke(app, argv)
        assert result.exit_code == 0, result.output
    # shard i talks to endpoints[i % 2], as the Ray backend's actor i does
    expected = {sid: (FIRST, SECOND)[shard_of(sid, 4) % 2] for sid in IDS}
    assert _answered_by(tmp_path / "run") == expected
    assert len(first.chat_requests) + len(second.chat_requests) == len(IDS) and default.chat_requests == []
    manifest = json.loads((tmp_path / "run" / "shards" / "1-of-4" / "run.json").read_text())
    assert manifest["endpoint"] == second.base_url

    merged = runner.invoke(app, ["merge", str(tmp_path / "run"), "--no-report"])
    assert merged.exit_code == 0, merged.output
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    used = [
        url for url, lat in ((first.base_url, FIRST), (second.base_url, SECOND)) if lat in expected.values()
    ]
    assert sorted(manifest.get("endpoints") or [manifest["endpoint"]]) == sorted(used)


def test_local_backend_spreads_samples_over_the_endpoints(tmp_path: Path, servers: tuple) -> None:
    first, second, default = servers
    data = make_csv_dataset(tmp_path / "bench")
    config = _config(tmp_path, data, backend="local", endpoints=[first.base_url, second.base_url])
    result = runner.invoke(app, ["eval", "--config", str(config), "--no-report"])
    assert result.exit_code == 0, result.output
    assert _answered_by(tmp_path / "run") == {sid: (FIRST, SECOND)[shard_of(sid, 2)] for sid in IDS}
    assert default.chat_requests == []
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    assert manifest["endpoint"] is None and manifest["endpoints"] == [first.base_url, second.base_url]


def test_base_url_alone_is_every_shards_endpoint(tmp_path: Path, servers: tuple) -> None:
    first, second, default = servers
    data = make_csv_dataset(tmp_path / "bench")
    config = _config(tmp_path, data, backend="local", base_url=second.base_url)
    for index in range(2):
        result = runner.invoke(app, ["eval", "--config", str(config), "--shard", f"{index}/2", "--no-report"])
        assert result.exit_code == 0, result.output
    assert _answered_by(tmp_path / "run") == dict.fromkeys(IDS, SECOND)
    assert first.chat_requests == default.chat_requests == []


@pytest.mark.parametrize(
    ("values", "flags", "said"),
    [
        ({"base_url": "FIRST", "endpoints": ["SECOND"]}, [], "endpoints and base_url both"),
        ({"endpoints": ["FIRST"], "shards": 8}, ["--shard", "0/4"], "give --shard I/8"),
        ({"endpoints": ["FIRST"], "model": None}, [], "no model is named"),
        ({"endpoints": ["FIRST"], "agent_fn": "eval_fake_agent:planned"}, [], "replaces the agent"),
    ],
)
def test_a_setting_a_backend_cannot_honour_is_refused_before_any_request(
    tmp_path: Path, servers: tuple, values: dict[str, Any], flags: list[str], said: str
) -> None:
    first, second, default = servers
    named = {"FIRST": first.base_url, "SECOND": second.base_url}
    for key, value in values.items():
        if isinstance(value, list):
            values[key] = [named.get(v, v) for v in value]
        elif value in named:
            values[key] = named[value]
    data = make_csv_dataset(tmp_path / "bench")
    config = _config(tmp_path, data, backend="local", **values)
    result = runner.invoke(app, ["eval", "--config", str(config), "--no-report", *flags])
    assert result.exit_code == 2 and said in result.output
    assert first.chat_requests == second.chat_requests == default.chat_requests == []
    assert not (tmp_path / "run" / "run.json").exists()


def test_ray_and_the_job_array_read_endpoints_alike() -> None:
    """The Ray backend's actor i and job i of a job array use the same endpoint."""
    urls = ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1", "http://127.0.0.1:3/v1"]
    ray = plan_lanes(EvalConfig(dataset="d", out="o", model="m", backend="ray", endpoints=urls, shards=6))
    assert ray.endpoints == (urls[0], urls[1], urls[2], urls[0], urls[1], urls[2]) and ray.count == 6
    for index in range(6):
        job = plan_lanes(EvalConfig(dataset="d", out="o", model="m", endpoints=urls, shard=f"{index}/6"))
        assert job.endpoints == (ray.endpoints[index],) and job.count == 6
    for sid in IDS:
        assert ray.endpoint_of(sid) == urls[shard_of(sid, 6) % 3]
    with pytest.raises(ConfigError, match="endpoints and base_url"):
        plan_lanes(
            EvalConfig(dataset="d", out="o", model="m", backend="ray", endpoints=urls, base_url=urls[0])
        )


@pytest.mark.slow
def test_ray_sends_each_shard_where_the_job_array_does(
    tmp_path: Path, servers: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    ray = pytest.importorskip("ray", reason="ray not installed: pip install 'geosleuth[ray]'")
    first, second, default = servers
    data = make_csv_dataset(tmp_path / "bench")
    config = _config(tmp_path, data, endpoints=[first.base_url, second.base_url], shards=4)
    config.write_text(config.read_text().replace("ray_address: auto\n", ""))
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # Ray 2.60's ray.init() would write ~/.ray/auth_token
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        result = runner.invoke(app, ["eval", "--config", str(config), "--no-report"])
    finally:
        ray.shutdown()
    assert result.exit_code == 0, result.output
    assert _answered_by(tmp_path / "run") == {sid: (FIRST, SECOND)[shard_of(sid, 4) % 2] for sid in IDS}
    assert default.chat_requests == []
