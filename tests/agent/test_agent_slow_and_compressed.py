"""A server that drips its reply or sends a gzip bomb costs bounded time and memory (issue 32
items 4 and 5): the request timeout is a total deadline, not one per read; compressed bodies are
counted as they are inflated; `locate --timeout` bounds an image as `eval --timeout` does."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest
from PIL import Image

from geosleuth.agent.client import ChatClient, ModelError, ResponseTooLarge
from geosleuth.testing import FakeOpenAIServer
from geosleuth.testing.fake_openai import Step
from geosleuth.tools.config import HttpSettings
from geosleuth.tools.errors import ProviderError
from geosleuth.tools.http import HttpClient

ANSWER = '{"lat": 47.3769, "lon": 8.5417, "city": "Zürich", "country": "Switzerland"}'


def completion_bytes(content: str) -> bytes:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}], "model": "m"}
    return json.dumps(body).encode()


def gzip_bomb(decoded_mb: int) -> bytes:
    """A gzip member of ``decoded_mb`` MB of spaces (about 1 KB of gzip per MB), built a MB at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * 2**20
    return b"".join([packer.compress(block) for _ in range(decoded_mb)] + [packer.flush()])


def dripping(seconds_apart: float) -> Step:
    return Step(kind="reply", raw=completion_bytes(ANSWER), drip_s=seconds_apart)


async def test_a_gzip_bomb_stops_at_the_cap_having_inflated_about_the_cap() -> None:
    bomb = gzip_bomb(200)  # ~200 KB of gzip for 200 MB
    step = Step(kind="reply", raw=bomb, headers={"Content-Encoding": "gzip"})
    async with (
        FakeOpenAIServer([step]) as server,
        ChatClient("m", server.base_url, max_retries=0, max_response_bytes=1_000_000) as client,
    ):
        tracemalloc.start()
        try:
            with pytest.raises(ResponseTooLarge, match=r"1,000,000 bytes \(decompressed\)"):
                await client.complete([{"role": "user", "content": "hi"}])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 8 * 2**20  # the cap and a chunk or two, not one network chunk inflated whole (~64 MB)


async def test_compressed_replies_within_the_cap_read_as_before() -> None:
    plain = completion_bytes(f"It is Zürich. {ANSWER}")
    steps = [
        Step(kind="reply", raw=gzip.compress(plain), headers={"Content-Encoding": "gzip"}),
        Step(kind="reply", raw=zlib.compress(plain), headers={"Content-Encoding": "deflate"}),
    ]
    async with FakeOpenAIServer(steps) as server, ChatClient("m", server.base_url, max_retries=0) as client:
        for _ in steps:
            resp = await client.complete([{"role": "user", "content": "hi"}])
            assert resp.first.content == f"It is Zürich. {ANSWER}"
        assert server.chat_requests[0].headers["accept-encoding"] == "gzip, deflate"


async def test_an_encoding_not_asked_for_is_refused_by_name() -> None:
    step = Step(kind="reply", raw=b"\x8b\x00\x80", headers={"Content-Encoding": "br"})
    async with FakeOpenAIServer([step]) as server, ChatClient("m", server.base_url, max_retries=0) as client:
        with pytest.raises(ModelError, match="Content-Encoding 'br'"):
            await client.complete([{"role": "user", "content": "hi"}])


async def test_a_dripping_reply_is_cut_at_the_request_deadline() -> None:
    """~100 bytes, one every 0.2 s: each read is quick, the reply takes ~20 s; the deadline is 1 s."""
    async with (
        FakeOpenAIServer([dripping(0.2)]) as server,
        ChatClient("m", server.base_url, max_retries=0, timeout_s=1.0) as client,
    ):
        start = time.monotonic()
        with pytest.raises(ModelError, match="timed out after 1 s"):
            await client.complete([{"role": "user", "content": "hi"}])
        took = time.monotonic() - start
    assert took < 10.0  # cut at 1 s; the whole drip takes ~20 s


async def test_a_tool_provider_that_drips_is_cut_at_its_deadline() -> None:
    settings = HttpSettings(timeout_s=1.0, max_retries=0, allow_private_urls=True)
    async with FakeOpenAIServer([dripping(0.2)]) as server:
        client = HttpClient("drip", settings)
        start = time.monotonic()
        with pytest.raises(ProviderError, match="timed out after 1 s"):
            await client.post_json(f"{server.base_url}/chat/completions", {"q": 1})
        took = time.monotonic() - start
    assert took < 10.0  # cut at 1 s; the whole drip takes ~20 s


@pytest.mark.slow
def test_locate_timeout_bounds_an_image_against_a_dripping_server(tmp_path: Path) -> None:
    image = tmp_path / "p.png"
    Image.new("RGB", (64, 48), (10, 120, 200)).save(image)
    geosleuth = str(Path(sys.executable).with_name("geosleuth"))
    with FakeOpenAIServer([dripping(0.5)] * 4) as server:
        start = time.monotonic()
        out = subprocess.run(
            [geosleuth, "locate", str(image), "--model", "m", "--base-url", server.base_url, "--prompt",
             "direct", "--timeout", "2", "--json"],
            capture_output=True, timeout=120, env={**os.environ, "OPENAI_API_KEY": ""},
        )  # fmt: skip
        took = time.monotonic() - start
    (row,) = json.loads(out.stdout)
    assert out.returncode == 1 and row["status"] == "timeout", out.stderr.decode()[-2000:]
    assert took < 30  # start-up and 2 s; without a deadline each request took ~50 s
    refused = subprocess.run(
        [geosleuth, "locate", str(image), "--timeout", "2"], capture_output=True, timeout=60
    )
    assert refused.returncode == 2 and b"--timeout bounds the model's turns" in refused.stderr


def test_gzip_bomb_helper_is_small() -> None:
    bomb = gzip_bomb(8)
    assert len(bomb) < 16_000 and len(gzip.decompress(bomb)) == 8 * 2**20
