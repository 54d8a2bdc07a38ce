"""MCP image intake within the same bounds as `locate` (issue 32, items 3 and 8): header first,
EXIF from the header alone, a reduced JPEG decode above the pixel limit, concurrent decodes
bounded by a memory gate, and an HTTP body limit that fits the documented image size."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from PIL import Image

import geosleuth.tools.mcp_server as mcp_server
from geosleuth.bounds.memorygate import BYTES_PER_PIXEL, TASK_OVERHEAD, MemoryGate
from geosleuth.tools import build_registry
from geosleuth.tools.config import ToolSettings
from geosleuth.tools.mcp_server import ImagePolicy, build_server, image_source, read_header, reservation


def _registry():  # type: ignore[no-untyped-def]
    return build_registry(ToolSettings(cache={"backend": "none"}))


def _encoded(image: Image.Image, fmt: str = "PNG", **kwargs: Any) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format=fmt, **kwargs)
    return buf.getvalue()


def _gps_exif() -> Image.Exif:
    exif = Image.Exif()
    exif[0x8825] = {1: "N", 2: (47.0, 3.0, 0.0), 3: "E", 4: (8.0, 18.0, 0.0)}
    return exif


def test_the_reservation_is_what_each_tool_will_decode() -> None:
    policy = ImagePolicy()
    photo = read_header(_encoded(Image.new("RGB", (3000, 2000))), policy)
    frame = 3000 * 2000 * BYTES_PER_PIXEL
    assert reservation(photo, "exif_gps", policy) == TASK_OVERHEAD  # the header alone
    assert reservation(photo, "image_zoom_in_tool", policy) == frame + TASK_OVERHEAD
    assert reservation(photo, "ocr", policy) > frame + TASK_OVERHEAD  # OCR's own peak besides
    strip = read_header(_encoded(Image.new("RGB", (2000, 1))), policy)
    assert reservation(strip, "ocr", policy) == 2000 * BYTES_PER_PIXEL + TASK_OVERHEAD  # OCR skips it
    small = ImagePolicy(max_input_pixels=1_000_000)
    jpeg = read_header(_encoded(Image.new("RGB", (4000, 3000)), "JPEG"), small)  # reduced while decoding
    assert reservation(jpeg, "image_zoom_in_tool", small) <= 1_000_000 * BYTES_PER_PIXEL + TASK_OVERHEAD


async def test_the_servers_own_image_is_counted_as_each_calls_frame(tmp_path: Path) -> None:
    path = tmp_path / "query.png"
    Image.new("RGB", (300, 200)).save(path)
    policy = ImagePolicy(default_image=path)
    source = await image_source({}, policy)
    assert source is not None and source.raw is None  # decoded once by the server, kept
    assert reservation(source, "image_zoom_in_tool", policy) == 300 * 200 * BYTES_PER_PIXEL + TASK_OVERHEAD
    assert reservation(source, "exif_gps", policy) == TASK_OVERHEAD


async def test_exif_is_read_from_the_header_and_the_pixels_never_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decoded: list[int] = []
    real = mcp_server._decode
    monkeypatch.setattr(mcp_server, "_decode", lambda raw, policy: decoded.append(1) or real(raw, policy))
    data = _encoded(Image.new("RGB", (4000, 3000), (90, 90, 90)), "PNG", exif=_gps_exif())
    async with Client(build_server(_registry())) as client:
        result = await client.call_tool("exif_gps", {"image_base64": base64.b64encode(data).decode()})
        assert not result.is_error, result.content[0].text
        assert result.structured_content["data"]["lat"] == pytest.approx(47.05)
        assert decoded == []
        zoom = await client.call_tool(
            "image_zoom_in_tool",
            {"bbox_2d": [0, 0, 100, 100], "image_base64": base64.b64encode(data).decode()},
        )
        assert not zoom.is_error and decoded == [1]


async def test_a_jpeg_over_the_pixel_limit_is_reduced_and_boxes_stay_in_the_files_pixels() -> None:
    upright = _encoded(Image.new("RGB", (4000, 3000), (10, 120, 200)), "JPEG", quality=80)
    turned = Image.Exif()
    turned[0x0112] = 6  # shown a quarter turn clockwise: 3000 wide, 4000 high
    portrait = _encoded(Image.new("RGB", (4000, 3000), (10, 120, 200)), "JPEG", quality=80, exif=turned)
    server = build_server(_registry(), policy=ImagePolicy(max_input_pixels=1_000_000))
    boxes = []
    async with Client(server) as client:
        for data, lower_right in ((upright, [2000, 1500, 4000, 3000]), (portrait, [1500, 2000, 3000, 4000])):
            result = await client.call_tool(
                "image_zoom_in_tool",
                {"bbox_2d": lower_right, "image_base64": base64.b64encode(data).decode()},
            )
            assert not result.is_error, result.content[0].text
            boxes.append(result.structured_content["data"]["original_box"])  # in the decode's pixels
    assert boxes == [[500, 375, 1000, 750], [375, 500, 750, 1000]]  # a 1/4 DCT scale: the lower-right quarter


async def test_concurrent_decodes_wait_for_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """With room for one decode, four calls decode one at a time; with room for all, two decodes
    meet at a barrier (which only two decodes in flight at once can pass)."""
    running, peaks = 0, []
    lock = threading.Lock()
    meet: threading.Barrier | None = None
    real = mcp_server._decode

    def watched_decode(raw: bytes, policy: ImagePolicy) -> Image.Image:
        nonlocal running
        with lock:
            running += 1
            peaks.append(running)
        if meet is not None:
            meet.wait()
        else:
            time.sleep(0.05)
        with lock:
            running -= 1
        return real(raw, policy)

    monkeypatch.setattr(mcp_server, "_decode", watched_decode)
    image = base64.b64encode(_encoded(Image.new("RGB", (400, 300)))).decode()
    call = {"bbox_2d": [0, 0, 100, 100], "image_base64": image}
    for budget in (1, 10 * 2**30):
        peaks.clear()
        meet = None if budget == 1 else threading.Barrier(2, timeout=60)
        monkeypatch.setattr(mcp_server, "memory_gate", lambda budget=budget: MemoryGate(budget))
        async with Client(build_server(_registry())) as client:
            results = await asyncio.gather(
                *(client.call_tool("image_zoom_in_tool", call) for _ in range(2 if meet else 4))
            )
        assert not any(r.is_error for r in results), [r.content[0].text for r in results]
        assert max(peaks) == (1 if budget == 1 else 2), peaks


def _serve(*extra: str) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = ["mcp", "--transport", "http", "--port", str(port), "--tools", "exif_gps", *extra]
    proc = subprocess.Popen(
        [sys.executable, "-c", "from geosleuth.cli.app import main; main()", *argv],
        env={**os.environ, "GEOSLEUTH_TOOL_CACHE_MODE": "off"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.1)
    return proc, f"http://127.0.0.1:{port}/mcp"


@pytest.mark.slow
async def test_http_takes_an_image_past_the_sdks_4_mib_and_names_its_limit_when_refusing() -> None:
    # 3.3 MB of incompressible PNG is 4.4 MB as base64: over the SDK's default 4 MiB body limit
    noise = Image.frombytes("RGB", (1100, 1000), os.urandom(1100 * 1000 * 3))
    data = _encoded(noise, "PNG", exif=_gps_exif())
    assert len(base64.b64encode(data)) > 4 * 2**20
    proc, url = _serve("--max-input-bytes", "4000000")
    try:
        async with Client(url) as client:
            ok = await client.call_tool("exif_gps", {"image_base64": base64.b64encode(data).decode()})
        assert not ok.is_error and ok.structured_content["data"]["lat"] == pytest.approx(47.05)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "x" * 7_000_000})
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        async with httpx.AsyncClient() as http:
            refused = await http.post(url, content=body, headers=headers)
        assert refused.status_code == 413  # 4,000,000 as base64 (5,333,336) and 1 MiB of envelope
        message = refused.json()["error"]["message"]
        assert (
            "6,381,912 bytes" in message and "4,000,000 bytes" in message and "--max-input-bytes" in message
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
