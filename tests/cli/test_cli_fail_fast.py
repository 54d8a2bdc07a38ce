"""`eval` and `locate` fail fast and say why: a bad dataset before the first request, and a
rejected key, an unknown model or an unreachable endpoint after the first, naming the URL and
the key variable. Finished samples stay saved; re-running after the fix resumes."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.testing import FakeOpenAIServer, error, reply

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))
from eval_data import make_csv_dataset  # noqa: E402

ANSWER = '{"lat": 48.8566, "lon": 2.3522, "city": "Paris", "country": "France"}'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _eval(data: Path, out: Path, base_url: str, *extra: str):
    args = ["eval", str(data), "--out", str(out), "--model", "fake-vlm", "--base-url", base_url]
    args += ["--prompt", "direct", "--no-report", *extra]
    return CliRunner().invoke(app, args)


def _records(run: Path) -> list[dict]:
    path = run / "trajectories.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_a_rejected_key_stops_eval_at_the_first_request_and_resume_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    data = make_csv_dataset(tmp_path / "bench")
    with FakeOpenAIServer(default=error(401, "invalid api key")) as server:
        result = _eval(data, tmp_path / "run", server.base_url, "--concurrency", "1")
        requests = len(server.chat_requests)
    assert result.exit_code == 1, result.output
    assert requests == 1  # not eight samples against a server that refuses every one
    assert server.base_url in result.stderr and "OPENAI_API_KEY" in result.stderr
    assert "--api-key-env" in result.stderr and "no key was sent: $OPENAI_API_KEY is not set" in result.stderr
    assert _records(tmp_path / "run") == []  # the aborted sample is not recorded as a failure
    with FakeOpenAIServer(default=reply(ANSWER)) as server:
        again = _eval(data, tmp_path / "run", server.base_url, "--concurrency", "1")
    assert again.exit_code == 0, again.output
    assert sorted(r["status"] for r in _records(tmp_path / "run")) == ["ok"] * 8


def test_a_named_key_variable_is_the_one_the_message_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", "sk-test-not-a-real-key-123456")
    data = make_csv_dataset(tmp_path / "bench")
    with FakeOpenAIServer(default=error(403, "forbidden")) as server:
        result = _eval(data, tmp_path / "run", server.base_url, "--api-key-env", "MY_KEY")
    assert result.exit_code == 1
    assert "the key sent is $MY_KEY's" in result.stderr and "sk-test" not in result.output


def test_an_unknown_model_stops_eval_naming_model_and_url(tmp_path: Path) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    with FakeOpenAIServer(default=error(404, "model 'fake-vlm' not found")) as server:
        result = _eval(data, tmp_path / "run", server.base_url, "--concurrency", "2")
        requests = len(server.chat_requests)
    assert result.exit_code == 1 and requests <= 2
    assert "'fake-vlm'" in result.stderr and f"{server.base_url}/chat/completions" in result.stderr


def test_an_unreachable_endpoint_stops_eval(tmp_path: Path) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    (tmp_path / "cfg.yaml").write_text("agent: {max_retries: 0}\n")
    url = f"http://127.0.0.1:{_free_port()}/v1"
    result = _eval(data, tmp_path / "run", url, "--config", str(tmp_path / "cfg.yaml"), "--concurrency", "1")
    assert result.exit_code == 1, result.output
    assert f"cannot reach {url}" in result.stderr and "is the server up" in result.stderr
    assert _records(tmp_path / "run") == []


def test_every_image_missing_is_an_error_before_any_request(tmp_path: Path) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    for image in (data / "images").iterdir():
        image.unlink()
    with FakeOpenAIServer(default=reply(ANSWER)) as server:
        result = _eval(data, tmp_path / "run", server.base_url)
        requests = len(server.chat_requests)
    assert result.exit_code == 2 and requests == 0
    assert "none of the 8 image(s)" in result.stderr and "--images" in result.stderr
    assert not (tmp_path / "run").exists()


def test_some_images_missing_is_a_warning_and_those_samples_fail(tmp_path: Path) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    (data / "images" / "paris.jpg").unlink()
    with FakeOpenAIServer(default=reply(ANSWER)) as server:
        result = _eval(data, tmp_path / "run", server.base_url)
    assert result.exit_code == 0, result.output
    assert "1 of 8 image(s) not found" in result.stderr
    statuses = {r["sample_id"]: r["status"] for r in _records(tmp_path / "run")}
    assert statuses["paris"] == "input_error" and list(statuses.values()).count("ok") == 7


@pytest.mark.parametrize("fmt", ["osv5m", "im2gps3k"])
def test_a_format_that_drops_the_ground_truth_is_an_error(tmp_path: Path, fmt: str) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    with FakeOpenAIServer(default=reply(ANSWER)) as server:
        result = _eval(data, tmp_path / "run", server.base_url, "--format", fmt)
        requests = len(server.chat_requests)
    assert result.exit_code == 2 and requests == 0, result.output
    assert f"--format {fmt} reads less ground truth" in result.stderr and "--format generic" in result.stderr


def test_eval_takes_the_sampling_flags_the_docs_name(tmp_path: Path) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    with FakeOpenAIServer(default=reply(ANSWER)) as server:
        result = _eval(
            data, tmp_path / "run", server.base_url, "--limit", "1",
            "--temperature", "0.3", "--tool-calling", "text", "--resize-factor", "28",
        )  # fmt: skip
        body = json.loads(server.chat_requests[0].body)
    assert result.exit_code == 0, result.output
    assert body["temperature"] == 0.3 and "tools" not in body
    config = json.loads((tmp_path / "run" / "run.json").read_text())["config"]
    assert config["resize_factor"] == 28 and config["tool_calling"] == "text"


def test_resuming_against_another_endpoint_is_refused(tmp_path: Path) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    with FakeOpenAIServer(default=reply(ANSWER)) as server:
        first = _eval(data, tmp_path / "run", server.base_url, "--limit", "2")
    assert first.exit_code == 0, first.output
    other = f"http://127.0.0.1:{_free_port()}/v1"
    result = _eval(data, tmp_path / "run", other, "--limit", "2")
    assert result.exit_code == 2 and "endpoint" in result.stderr and other in result.stderr


def test_locate_names_the_default_endpoint_it_fell_back_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from geosleuth.agent import client

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    url = f"http://127.0.0.1:{_free_port()}/v1"
    monkeypatch.setattr(client, "DEFAULT_BASE_URL", url)
    monkeypatch.setattr(client.ChatClient, "_wait", lambda self, state: 0.0)  # no backoff between retries
    image = make_csv_dataset(tmp_path / "bench") / "images" / "paris.jpg"
    result = CliRunner().invoke(app, ["locate", str(image), "--model", "m", "--prompt", "direct"])
    assert result.exit_code == 1
    assert url in result.output and "neither --base-url nor OPENAI_BASE_URL is set" in result.output
    assert result.stderr.startswith(f"note: no --base-url or OPENAI_BASE_URL: using {url}")


def test_locate_401_names_the_key_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    image = make_csv_dataset(tmp_path / "bench") / "images" / "paris.jpg"
    with FakeOpenAIServer(default=error(401, "bad key")) as server:
        result = CliRunner().invoke(
            app, ["locate", str(image), "--model", "m", "--base-url", server.base_url, "--json"]
        )
    assert result.exit_code == 1
    (row,) = json.loads(result.stdout)
    assert "OPENAI_API_KEY" in row["error"] and "--api-key-env" in row["error"]


def test_an_observer_with_a_rejected_key_stops_eval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    data = make_csv_dataset(tmp_path / "bench")
    with FakeOpenAIServer(default=reply(ANSWER)) as model, FakeOpenAIServer(default=error(401, "no")) as seer:
        result = _eval(
            data, tmp_path / "run", model.base_url, "--concurrency", "1",
            "--observer", "vision-model", "--observer-base-url", seer.base_url,
        )  # fmt: skip
        observed = len(seer.chat_requests)
    assert result.exit_code == 1, result.output
    assert observed == 1 and seer.base_url in result.stderr and "OPENAI_API_KEY" in result.stderr


def test_an_unknown_prompt_style_fails_before_the_run(tmp_path: Path) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    result = CliRunner().invoke(
        app, ["eval", str(data), "--out", str(tmp_path / "run"), "--model", "m", "-p", "nope"]
    )
    assert result.exit_code == 2 and "unknown prompt style 'nope'" in result.stderr
    assert "geoagent" in result.stderr and not (tmp_path / "run").exists()


async def test_sharded_runs_stop_too_and_leave_the_aborted_samples_unrecorded(tmp_path: Path) -> None:
    from geosleuth.core.records import Sample, Task, Trajectory
    from geosleuth.eval.run.backends import InProcessExecutor, run_sharded
    from geosleuth.eval.run.runner import RunAborted
    from geosleuth.eval.run.store import TrajectoryStore

    samples = [Sample(id=f"id{i}", lat=1.0, lon=2.0) for i in range(40)]
    calls: list[str] = []

    async def refused(task: Task) -> Trajectory:
        calls.append(task.id)
        raise RunAborted("HTTP 401 at http://x/v1 -- set $OPENAI_API_KEY")

    with pytest.raises(RunAborted, match="OPENAI_API_KEY"):
        executor = InProcessExecutor([refused] * 2, 1, None)
        await run_sharded(samples, executor, TrajectoryStore(tmp_path), 2, batch_size=4)
    assert len(calls) <= 8  # one batch per shard, not forty samples
    assert _records(tmp_path) == []

    async def fine(task: Task) -> Trajectory:
        return Trajectory(sample_id=task.id, model="m")

    stats = await run_sharded(samples, InProcessExecutor([fine] * 2, 1, None), TrajectoryStore(tmp_path), 2)
    assert stats.done == 40 and len(_records(tmp_path)) == 40
