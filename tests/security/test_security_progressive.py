"""Progressive and multi-scan JPEGs (issue 41, item 3): libjpeg buffers every coefficient of the
full frame whatever scale it outputs, so the memory gates reserve those buffers and an image
whose buffers pass what the pixel limit allows a frame is refused by name, at every door."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
from mcp import Client
from PIL import Image
from starlette.testclient import TestClient
from typer.testing import CliRunner

from geosleuth.agent.memory import task_memory
from geosleuth.bounds.imageio import coefficient_bytes, open_image
from geosleuth.bounds.memorygate import BYTES_PER_PIXEL, TASK_OVERHEAD
from geosleuth.cli.app import app
from geosleuth.tools import build_registry
from geosleuth.tools.config import ToolSettings
from geosleuth.tools.mcp_server import ImagePolicy, build_server, read_header, reservation

LIMIT = 1_000_000  # pixels: a 3 MB RGB frame, so up to 3 MB of coefficients


def jpeg(size: tuple[int, int], **options: object) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (90, 120, 60)).save(buffer, format="JPEG", **options)
    return buffer.getvalue()


def test_coefficient_buffers_are_counted_from_the_header() -> None:
    # 2000x1500 at 4:4:4: 250 x 188 blocks (1500/8 = 187.5, whole MCUs) x 3 components x 128 bytes
    assert coefficient_bytes(jpeg((2000, 1500), progressive=True, subsampling=0)) == 250 * 188 * 3 * 128
    # 4:2:0: MCUs of 16x16 = 125 x 94; luma 4 blocks a MCU, each chroma 1: 6 blocks x 128 bytes
    assert coefficient_bytes(jpeg((2000, 1500), progressive=True, subsampling=2)) == 125 * 94 * 6 * 128
    assert coefficient_bytes(jpeg((2000, 1500))) == 0  # one interleaved scan: decoded row by row
    assert coefficient_bytes(b"not an image") == 0


def test_a_multi_scan_baseline_jpeg_is_counted_too() -> None:
    """A sequential JPEG whose components come in separate scans is buffered like a progressive one."""
    data = jpeg((400, 300), subsampling=0)
    start = data.index(b"\xff\xda")
    assert data.count(b"\xff\xda") == 1
    doubled = data[:-2] + data[start:]  # a second scan after the first (what matters is its marker)
    assert coefficient_bytes(doubled) == 50 * 38 * 3 * 128


def test_a_progressive_jpeg_over_the_limit_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEOSLEUTH_MAX_IMAGE_PIXELS", str(LIMIT))
    with pytest.raises(ValueError, match="progressive JPEG of 2000x1500.*baseline JPEG"):
        open_image(jpeg((2000, 1500), progressive=True, subsampling=0))
    assert open_image(jpeg((2000, 1500))).size == (1000, 750)  # baseline: still reduced while decoding
    assert open_image(jpeg((800, 600), progressive=True)).size == (800, 600)  # small buffers: decoded


def test_locate_cli_refuses_it_and_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad, good = tmp_path / "progressive.jpg", tmp_path / "fine.jpg"
    bad.write_bytes(jpeg((2000, 1500), progressive=True, subsampling=0))
    good.write_bytes(jpeg((640, 480)))
    assert task_memory(str(bad)) >= 2000 * 1500 * BYTES_PER_PIXEL + TASK_OVERHEAD + coefficient_bytes(bad)
    result = CliRunner().invoke(
        app, ["locate", str(bad), str(good), "--json", "--out", str(tmp_path / "out")],
        env={"GEOSLEUTH_MAX_IMAGE_PIXELS": str(LIMIT)},
    )  # fmt: skip
    records = json.loads(result.stdout)
    assert [r["status"] for r in records] == [
        "input_error",
        "no_evidence",
    ]  # the plain one is read (offline: no clue in it)
    assert "progressive JPEG" in records[0]["error"] and "Traceback" not in result.output


async def test_mcp_reserves_the_buffers_and_refuses_the_oversized_by_name() -> None:
    policy = ImagePolicy(max_input_pixels=LIMIT)
    small = jpeg((800, 600), progressive=True, subsampling=0)
    header = read_header(small, policy)
    assert reservation(header, "image_zoom_in_tool", policy) == (
        800 * 600 * BYTES_PER_PIXEL + TASK_OVERHEAD + 100 * 75 * 3 * 128
    )
    server = build_server(build_registry(ToolSettings(cache={"backend": "none"})), policy=policy)
    big = base64.b64encode(jpeg((2000, 1500), progressive=True, subsampling=0)).decode()
    async with Client(server) as client:
        result = await client.call_tool(
            "image_zoom_in_tool", {"bbox_2d": [0, 0, 500, 500], "image_base64": big}
        )
    assert result.is_error and "progressive JPEG" in result.content[0].text


def test_webapp_upload_is_refused_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from geosleuth.webapp import ServeSettings, create_app

    monkeypatch.setenv("GEOSLEUTH_MAX_IMAGE_PIXELS", str(LIMIT))
    payload = jpeg((2000, 1500), progressive=True, subsampling=0)
    settings = ServeSettings(workdir=tmp_path / "jobs", tool_settings={"cache": {"backend": "none"}})
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        response = client.post("/api/locate", files={"image": ("p.jpg", payload, "image/jpeg")})
        assert response.status_code == 400 and "progressive JPEG" in response.json()["error"]
        assert client.get("/api/jobs").json() == []
