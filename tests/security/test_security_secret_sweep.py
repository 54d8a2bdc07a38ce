"""Keys never leave the process: `locate` and `eval` (+ report, HTML) against 127.0.0.1 fakes that
reflect the keys they receive in error AND success bodies; then every file the runs wrote, the
tool cache and stdout/stderr are swept for the planted keys (and their encoded forms)."""

from __future__ import annotations

import base64
import csv
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from PIL import Image

from geosleuth.testing import FakeOpenAIServer, Step, error, reply, tool_call

MODEL_KEY = "sk-planted-model-key-4f9a2c7e1b"
SEARCH_KEY = "tvly-planted-search-key-8d3e5f"  # only in the tool settings FILE, never in the environment
KEYS = (MODEL_KEY, SEARCH_KEY)


class EchoingVLM(FakeOpenAIServer):
    """The first conversation gets a 400 whose body reflects the Authorization header; the others
    get a reply echoing it, a web_search call, and a final answer that echoes it again."""

    def __init__(self) -> None:
        super().__init__(model="fake-vlm")
        self.first_turns = 0
        self.counter_lock = threading.Lock()

    def _next_step(self, request: Any) -> Step:
        auth = request.headers.get("authorization", "")
        messages = request.messages
        if any(m.get("role") == "tool" for m in messages):
            answer = {"lat": 48.8584, "lon": 2.2945, "city": "Paris", "country": "France"}
            return reply(f"The server said {auth}. Final answer: {json.dumps(answer)}")
        with self.counter_lock:
            self.first_turns += 1
            first = self.first_turns == 1
        if first:
            body = error(400, f"invalid request; headers were Authorization: {auth}; key={MODEL_KEY}").body
            return Step(kind="error", status=400, body=body)
        return reply(
            f"I was called with {auth}",
            tool_calls=[tool_call("web_search", {"query": "Eiffel tower"}, "c1")],
            reasoning=f"my key is {MODEL_KEY}",
        )


class EchoingSearch:
    """A Tavily-shaped search API that puts everything it received into a 200 answer."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                auth = self.headers.get("Authorization", "")
                results = [
                    {
                        "title": f"Echo {auth}",
                        "url": f"https://example.org/search?key={SEARCH_KEY}&q=1",
                        "content": f"You sent {auth} and {body}; "
                        f"encoded {quote(SEARCH_KEY)} and {json.dumps({'api_key': SEARCH_KEY})}",
                    }
                ]
                payload = json.dumps({"results": results, "echo": {"authorization": auth}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fakes() -> Iterator[tuple[EchoingVLM, EchoingSearch]]:
    vlm, search = EchoingVLM().start(), EchoingSearch()
    yield vlm, search
    vlm.stop()
    search.close()


def _forms(key: str) -> list[bytes]:
    raw = key.encode()
    return [raw, quote(key, safe="").encode(), base64.b64encode(raw), raw.hex().encode()]


def _sweep(paths: list[Path], streams: list[str]) -> list[str]:
    """Every place a planted key (in any encoding) was found."""
    found = []
    for path in paths:
        data = path.read_bytes()
        found += [f"{path}: {key}" for key in KEYS for form in _forms(key) if form in data]
    for i, text in enumerate(streams):
        found += [f"stream {i}: {key}" for key in KEYS if key in text]
    return found


def _env(tmp_path: Path, search: EchoingSearch) -> dict[str, str]:
    settings = tmp_path / "tools.yaml"
    settings.write_text(
        "providers:\n  search: tavily\n"
        f"services:\n  tavily:\n    api_key: {SEARCH_KEY}\n    base_url: {search.url}\n"
        "http:\n  allow_private_urls: true\n  max_retries: 0\n"
        f"cache:\n  backend: sqlite\n  path: {tmp_path / 'cache.sqlite'}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {
        "OPENAI_API_KEY": MODEL_KEY,
        "GEOSLEUTH_TOOLS_CONFIG": str(settings),
        "GEOSLEUTH_LOG_LEVEL": "DEBUG",
    }
    return env


def _geosleuth(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("geosleuth")
    return subprocess.run([str(exe), *args], env=env, capture_output=True, text=True, timeout=240)


def _images(folder: Path, n: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = folder / f"img{i}.jpg"
        Image.new("RGB", (64, 48), (40 * i, 90, 150)).save(path)
        paths.append(path)
    return paths


def _written(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


@pytest.mark.slow
def test_locate_and_eval_leak_no_key_anywhere(
    tmp_path: Path, fakes: tuple[EchoingVLM, EchoingSearch]
) -> None:
    vlm, search = fakes
    env = _env(tmp_path, search)
    common = ["--model", "fake-vlm", "--base-url", vlm.base_url, "--tools", "web_search"]

    images = _images(tmp_path / "photos", 2)
    locate = _geosleuth(
        ["locate", *map(str, images), *common, "--tool-calling", "native", "--concurrency", "1", "--json",
         "--out", str(tmp_path / "locate")],
        env,
    )  # fmt: skip
    assert locate.returncode == 0, locate.stderr
    located = json.loads(locate.stdout)
    assert [r["status"] for r in located] == ["model_error", "ok"]  # the fakes really were reached …

    data = tmp_path / "data"
    _images(data / "images", 3)
    with (data / "data.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "image", "lat", "lon", "country"])
        writer.writerows([[f"s{i}", f"img{i}.jpg", 48.85, 2.29, "France"] for i in range(3)])
    config = tmp_path / "eval.yaml"
    config.write_text("agent:\n  tool_calling: native\n")
    run = tmp_path / "run"
    vlm.first_turns = 0
    evaluated = _geosleuth(
        ["eval", str(data), "--out", str(run), *common, "--concurrency", "1", "--config", str(config)], env
    )
    assert evaluated.returncode == 0, evaluated.stderr
    report = _geosleuth(["report", str(run), "--json"], env)
    assert report.returncode == 0, report.stderr

    # … and their keys did reach the conversation's sources: the search results were echoed back
    records = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
    statuses = sorted(r["status"] for r in records)
    assert statuses == ["model_error", "ok", "ok"]
    echoed = [c["result_text"] for r in records for t in r["turns"] for c in t["tool_calls"]]
    assert echoed and all("You sent" in text and "***" in text for text in echoed)
    assert any("***" in (r["error"] or "") for r in records if r["status"] == "model_error")
    assert search.httpd and vlm.chat_requests[0].headers["authorization"] == f"Bearer {MODEL_KEY}"

    files = _written(tmp_path / "locate") + _written(run) + [tmp_path / "cache.sqlite"]
    assert (run / "summary.json").is_file() and (run / "html" / "index.html").is_file()
    streams = [locate.stdout, locate.stderr, evaluated.stdout, evaluated.stderr, report.stdout, report.stderr]
    assert _sweep(files, streams) == []


async def test_agent_records_keep_no_key(
    tmp_path: Path, fakes: tuple[EchoingVLM, EchoingSearch], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast in-process version: two trajectories (an echoed error, an echoed success with a
    reflecting search provider) written to JSONL; the records, the cache and the logs hold no key."""
    from geosleuth.agent import AgentConfig, run_task, write_trajectories
    from geosleuth.core.records import Task

    vlm, search = fakes
    env = _env(tmp_path, search)
    monkeypatch.setenv("OPENAI_API_KEY", MODEL_KEY)
    config = AgentConfig(
        model="fake-vlm",
        base_url=vlm.base_url,
        tools=["web_search"],
        tool_calling="native",
        tool_settings=env["GEOSLEUTH_TOOLS_CONFIG"],
        max_retries=0,
    )
    images = _images(tmp_path / "photos", 2)
    out = tmp_path / "out"
    trajectories = [await run_task(Task(id=p.stem, image=str(p)), config, artifacts_dir=out) for p in images]
    assert [t.status.value for t in trajectories] == ["model_error", "ok"]
    write_trajectories(out / "trajectories.jsonl", trajectories)
    assert "***" in (trajectories[0].error or "")
    call = trajectories[1].turns[0].tool_calls[0]
    assert call.ok and "You sent" in call.result_text and "***" in call.result_text
    in_memory = json.dumps([t.model_dump(mode="json") for t in trajectories])
    assert not [k for k in KEYS if k in in_memory]  # redacted at the source, not only on the way out
    assert _sweep(_written(out) + [tmp_path / "cache.sqlite"], []) == []
