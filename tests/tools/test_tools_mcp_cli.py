"""MCP server through the SDK's own client (in-process and a stdio subprocess), and the CLI."""

from __future__ import annotations

import base64
import io
import json
import os
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from PIL import Image
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.tools import build_registry
from geosleuth.tools.config import ToolSettings
from geosleuth.tools.mcp_server import build_server


def _png_b64(size: tuple[int, int] = (200, 100)) -> str:
    buf = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


async def test_mcp_in_process_lists_tools_and_zooms() -> None:
    server = build_server(build_registry(ToolSettings(cache={"backend": "none"})))
    async with Client(server) as client:
        listed = await client.list_tools()
        by_name = {t.name: t for t in listed.tools}
        assert {"image_zoom_in_tool", "geocode", "web_search", "static_map_query"} <= set(by_name)
        zoom_schema = by_name["image_zoom_in_tool"].input_schema
        assert zoom_schema["properties"]["bbox_2d"]["items"] == {"type": "number"}
        assert "image_base64" in zoom_schema["properties"]
        assert "image_base64" not in by_name["geocode"].input_schema["properties"]

        result = await client.call_tool(
            "image_zoom_in_tool", {"bbox_2d": [0, 0, 50, 50], "image_base64": _png_b64()}
        )
        assert not result.is_error
        image = next(c for c in result.content if c.type == "image")
        assert image.mime_type == "image/jpeg"
        assert result.structured_content["ok"] and result.structured_content["images"] == 1
        zoomed = Image.open(io.BytesIO(base64.b64decode(image.data)))
        assert zoomed.size == (200, 200)

        bad = await client.call_tool(
            "image_zoom_in_tool", {"bbox_2d": [50, 50, 0, 0], "image_base64": _png_b64()}
        )
        assert bad.is_error and "inverted" in bad.content[0].text
        garbage = await client.call_tool(
            "image_zoom_in_tool", {"bbox_2d": [0, 0, 5, 5], "image_base64": "!!"}
        )
        assert garbage.is_error and "base64" in garbage.content[0].text


async def test_mcp_stdio_subprocess_geocode_and_zoom(tmp_path: Path) -> None:
    image = tmp_path / "q.png"
    Image.new("RGB", (300, 200), (10, 200, 10)).save(image)
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-c",
            "from geosleuth.cli.app import main; main()",
            "mcp",
            "--transport",
            "stdio",
            "--image",
            str(image),
            "--tools",
            "image_zoom_in_tool,geocode",
        ],
        env={"GEOSLEUTH_TOOL_CACHE_MODE": "off"},
    )
    async with Client(params) as client:
        names = sorted(t.name for t in (await client.list_tools()).tools)
        assert names == ["geocode", "image_zoom_in_tool"]
        zoom = await client.call_tool("image_zoom_in_tool", {"bbox_2d": [0, 0, 100, 100]})
        assert not zoom.is_error, zoom.content[0].text
        assert any(c.type == "image" for c in zoom.content)
        geo = await client.call_tool("geocode", {"address": "Zürich"})
        assert not geo.is_error, geo.content[0].text
        assert "Zürich" in geo.content[0].text or "Zurich" in geo.content[0].text


runner = CliRunner()


def test_cli_tools_list_json() -> None:
    res = runner.invoke(
        app,
        ["tools", "list", "--json"],
        env={"GEOSLEUTH_SEARCH_PROVIDER": "tavily", "GEOSLEUTH_TAVILY_API_KEY": ""},
    )
    assert res.exit_code == 0, res.output
    rows = {r["tool"]: r for r in json.loads(res.output)}
    assert rows["web_search"]["provider"] == "tavily"
    assert "GEOSLEUTH_TAVILY_API_KEY" in rows["web_search"]["status"]
    assert rows["image_zoom_in_tool"]["status"] == "ready"


def test_cli_tool_zoom_writes_image(tmp_path: Path) -> None:
    image = tmp_path / "q.png"
    Image.new("RGB", (300, 200)).save(image)
    out = tmp_path / "out"
    res = runner.invoke(
        app,
        [
            "tool",
            "image_zoom_in_tool",
            "--args",
            '{"bbox_2d": [0, 0, 500, 500]}',
            "--image",
            str(image),
            "--bbox-convention",
            "relative1000",
            "--out",
            str(out),
        ],
        env={"GEOSLEUTH_TOOL_CACHE_MODE": "off"},
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["ok"] and doc["data"]["original_box"] == [0, 0, 150, 100]
    assert Path(doc["images"][0]).is_file()


def test_cli_errors_exit_non_zero_without_traceback(tmp_path: Path) -> None:
    cases = [
        (["tool", "geocode", "--args", "{bad"], 2, "not valid JSON"),
        (["tool", "geocode", "--args", "[1]"], 2, "JSON object"),
        (["tool", "nope"], 2, "unknown tool"),
        (["tool", "image_zoom_in_tool", "--image", str(tmp_path / "missing.png")], 2, "image not found"),
        (["tool", "image_zoom_in_tool", "--args", '{"bbox_2d": [1, 2]}'], 1, "no image"),
        (["tool", "geocode", "--config", str(tmp_path / "none.yaml")], 2, "not found"),
        (["mcp", "--transport", "carrier-pigeon"], 2, "stdio or http"),
        (["mcp", "--image-format", "png"], 2, "jpeg or webp"),
        (["mcp", "--image-root", str(tmp_path / "nowhere")], 2, "not a directory"),
        (["mcp", "--bbox-convention", "pixels"], 2, "absolute or relative1000"),
    ]
    for argv, code, message in cases:
        res = runner.invoke(app, argv, env={"GEOSLEUTH_TOOL_CACHE_MODE": "off"})
        assert res.exit_code == code, (argv, res.output)
        assert message in res.output, (argv, res.output)
        assert "Traceback" not in res.output


async def test_mcp_streamable_http_subprocess() -> None:
    import asyncio
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from geosleuth.cli.app import main; main()",
            "mcp",
            "--transport",
            "http",
            "--port",
            str(port),
            "--tools",
            "geocode,static_map_query",
        ],
        env={**os.environ, "GEOSLEUTH_TOOL_CACHE_MODE": "off"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(100):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                await asyncio.sleep(0.1)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            assert names == ["geocode", "static_map_query"]
            result = await client.call_tool("static_map_query", {"lat": 35.68, "lon": 139.69, "zoom": 9})
            assert not result.is_error, result.content[0].text
            assert [c.type for c in result.content] == ["text", "image"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_mcp_http_default_port_is_not_vllms() -> None:
    """Issue 41: `mcp --transport http` listened on 8000, the port the docs give vLLM."""
    import inspect

    from geosleuth.cli.tools import mcp_serve
    from geosleuth.tools.mcp_server import DEFAULT_HTTP_PORT, serve_http

    assert inspect.signature(mcp_serve).parameters["port"].default == DEFAULT_HTTP_PORT != 8000
    assert inspect.signature(serve_http).parameters["port"].default == DEFAULT_HTTP_PORT
    res = CliRunner().invoke(app, ["mcp", "--help"], env={"COLUMNS": "200"})
    assert "8808" in res.output and "8000]" not in res.output


def test_tool_writes_images_only_where_the_user_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41 (low): `geosleuth tool` wrote ./geosleuth-tool-output/ into the working directory
    (a checkout, which git does not ignore). Without --out no file is written; the note says how."""
    image = tmp_path / "photo.png"
    Image.new("RGB", (300, 200), (10, 120, 200)).save(image)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    res = CliRunner().invoke(
        app, ["tool", "image_zoom_in_tool", "--args", '{"bbox_2d": [0, 0, 100, 100]}', "--image", str(image)],
        env={"GEOSLEUTH_TOOL_CACHE_MODE": "off"},
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["images"] == [] and "pass --out DIR" in res.stderr
    assert list(work.iterdir()) == []
