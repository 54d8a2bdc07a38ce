"""MCP server hygiene through the SDK's own client: image paths only under the server's roots
(opened without blocking, refusals that do not reveal existence), bounded images in and out,
annotations and output schemas."""

from __future__ import annotations

import asyncio
import base64
import io
import os
from pathlib import Path

import numpy as np
import pytest
from mcp import Client
from PIL import Image

from geosleuth.tools import build_registry
from geosleuth.tools.config import ToolSettings
from geosleuth.tools.mcp_server import OPAQUE_PATH_ERROR, ImagePolicy, build_server, encode_image


def _registry():  # type: ignore[no-untyped-def]
    return build_registry(ToolSettings(cache={"backend": "none"}))


def _noise(size: tuple[int, int], seed: int = 0) -> Image.Image:
    """Incompressible pixels: the worst case for an encoded size cap."""
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


def _b64(im: Image.Image, fmt: str = "PNG") -> str:
    buf = io.BytesIO()
    im.save(buf, format=fmt)
    return base64.b64encode(buf.getvalue()).decode()


REL = "relative1000"
ZOOM_ALL = {"bbox_2d": [0, 0, 1000, 1000]}  # the whole frame in 0-1000 coordinates


async def test_image_path_is_refused_without_roots_and_the_refusal_reveals_nothing(tmp_path: Path) -> None:
    real = tmp_path / "q.png"
    _noise((64, 48)).save(real)
    server = build_server(_registry(), bbox_convention=REL)  # started with no image roots
    async with Client(server) as client:
        texts = set()
        for path in (str(real), str(tmp_path / "missing.png"), "/etc/passwd", str(tmp_path)):
            result = await client.call_tool("image_zoom_in_tool", {**ZOOM_ALL, "image_path": path})
            assert result.is_error
            texts.add(result.content[0].text)
        assert texts == {f"Error: {OPAQUE_PATH_ERROR}"}


async def test_image_path_under_a_root_works_and_everything_else_reads_the_same(tmp_path: Path) -> None:
    root = tmp_path / "images"
    root.mkdir()
    _noise((80, 60)).save(root / "q.png")
    outside = tmp_path / "outside.png"
    _noise((80, 60)).save(outside)
    (root / "link.png").symlink_to(outside)  # a symlink out of the root is outside
    (root / "notes.txt").write_text("not an image")
    os.mkfifo(root / "pipe.png")
    server = build_server(_registry(), bbox_convention=REL, policy=ImagePolicy(roots=(root,)))
    async with Client(server) as client:
        ok = await client.call_tool("image_zoom_in_tool", {**ZOOM_ALL, "image_path": str(root / "q.png")})
        assert not ok.is_error, ok.content[0].text
        refusals = set()
        for name in ("link.png", "pipe.png", "missing.png", "../outside.png", "."):
            r = await client.call_tool("image_zoom_in_tool", {**ZOOM_ALL, "image_path": str(root / name)})
            assert r.is_error, name
            refusals.add(r.content[0].text)
        assert refusals == {f"Error: {OPAQUE_PATH_ERROR}"}
        notes = await client.call_tool(
            "image_zoom_in_tool", {**ZOOM_ALL, "image_path": str(root / "notes.txt")}
        )
        assert notes.is_error and "could not be decoded" in notes.content[0].text


async def test_fifo_never_blocks_a_worker(tmp_path: Path) -> None:
    """Before: each FIFO call parked a worker thread forever; after 9 the server stopped answering."""
    os.mkfifo(tmp_path / "pipe.png")
    server = build_server(
        _registry(), bbox_convention=REL, policy=ImagePolicy(roots=(tmp_path,), open_timeout_s=1.0)
    )
    async with Client(server) as client:
        calls = [
            client.call_tool("image_zoom_in_tool", {**ZOOM_ALL, "image_path": str(tmp_path / "pipe.png")})
            for _ in range(12)
        ]
        results = await asyncio.wait_for(asyncio.gather(*calls), timeout=20)
        assert all(r.is_error for r in results)
        geo = await asyncio.wait_for(client.call_tool("geocode", {"address": "Zürich"}), timeout=20)
        assert not geo.is_error


async def test_full_frame_zoom_stays_within_the_image_cap() -> None:
    cap = 200_000
    big = _b64(_noise((1600, 1200)))
    for fmt in ("jpeg", "webp"):
        server = build_server(
            _registry(), bbox_convention=REL, policy=ImagePolicy(output_format=fmt, max_output_bytes=cap)
        )
        async with Client(server) as client:
            result = await client.call_tool("image_zoom_in_tool", {**ZOOM_ALL, "image_base64": big})
            assert not result.is_error, result.content[0].text
            image = next(c for c in result.content if c.type == "image")
            assert image.mime_type == f"image/{fmt}"
            assert len(image.data) <= cap
            decoded = Image.open(io.BytesIO(base64.b64decode(image.data)))
            assert decoded.format == fmt.upper()


def test_encoder_lowers_quality_before_size_and_keeps_small_images_whole() -> None:
    small = _noise((100, 80))
    out = Image.open(io.BytesIO(base64.b64decode(encode_image(small, "jpeg", 1_000_000))))
    assert out.size == (100, 80)
    capped = Image.open(io.BytesIO(base64.b64decode(encode_image(_noise((1200, 900)), "jpeg", 60_000))))
    assert capped.width < 1200 and capped.width / capped.height == pytest.approx(1200 / 900, rel=0.02)


async def test_input_pixel_and_size_caps() -> None:
    server = build_server(
        _registry(), bbox_convention=REL, policy=ImagePolicy(max_input_pixels=10_000, max_input_bytes=50_000)
    )
    async with Client(server) as client:
        wide = await client.call_tool(
            "image_zoom_in_tool", {**ZOOM_ALL, "image_base64": _b64(Image.new("RGB", (200, 100)))}
        )
        assert wide.is_error and "at most 10,000" in wide.content[0].text
        huge = await client.call_tool("image_zoom_in_tool", {**ZOOM_ALL, "image_base64": "A" * 100_000})
        assert huge.is_error and "larger than" in huge.content[0].text


async def test_annotations_and_output_schema() -> None:
    settings = ToolSettings(cache={"backend": "none"}, providers={"search": "tavily"})
    server = build_server(build_registry(settings))
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for tool in tools.values():
            assert tool.annotations.read_only_hint and not tool.annotations.destructive_hint
            assert tool.output_schema["required"][0] == "ok"
        assert tools["web_search"].annotations.open_world_hint  # tavily is a network provider
        assert not tools["geocode"].annotations.open_world_hint  # offline gazetteer
        assert not tools["image_zoom_in_tool"].annotations.open_world_hint
        geo = await client.call_tool("geocode", {"address": "Zürich"})  # the client validates it
        assert geo.structured_content["ok"] and geo.structured_content["provider"] == "offline"
        assert isinstance(geo.structured_content["data"], list) and geo.structured_content["data"]
        failed = await client.call_tool("web_search", {"query": "x"})
        assert failed.is_error and failed.structured_content["ok"] is False
        assert "GEOSLEUTH_TAVILY_API_KEY" in failed.structured_content["error"]


async def test_a_bomb_beyond_pillows_limit_is_refused_by_size_not_as_undecodable() -> None:
    import struct
    import zlib

    buffer = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buffer, format="PNG")
    data = bytearray(buffer.getvalue())
    data[16:24] = struct.pack(">II", 15000, 15000)  # the header claims 225 M pixels
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    server = build_server(_registry(), bbox_convention=REL, policy=ImagePolicy(max_input_pixels=10_000))
    async with Client(server) as client:
        bomb = base64.b64encode(bytes(data)).decode()
        out = await client.call_tool("image_zoom_in_tool", {**ZOOM_ALL, "image_base64": bomb})
    assert out.is_error
    assert "225,000,000 pixels; this server accepts at most 10,000" in out.content[0].text
    assert "could not be decoded" not in out.content[0].text
