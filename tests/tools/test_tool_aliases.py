"""The papers' own tool names (issue 43 item 1): each style offers its paper's names for the same
tools, and every engine resolves a call made under that name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from geosleuth.agent.prompting import load_style
from geosleuth.cli.app import app
from geosleuth.tools import build_registry
from geosleuth.tools.config import ToolSettings
from geosleuth.training.toolcall import training_tools
from geosleuth.training.verl.tools import GeoSleuthTool

TWM = [  # Thinking with Map's tool list, as the issue quotes the paper
    "image_zoom_tool", "web_search_tool", "poi_input_tips", "poi_keyword_search",
    "poi_detail_query", "static_map_query", "satellite_map_query",
]  # fmt: skip
SPOTAGENT = ["image_zoom_in_tool", "search_web", "maps_geocode"]  # SpotAgent App. A.1–A.2
GEOVISTA = ["image_zoom_in_tool", "search_web"]  # GeoVista's released eval/utils_agent_tool.py


@pytest.fixture(scope="module")
def registry():  # type: ignore[no-untyped-def]
    return build_registry(ToolSettings(cache={"backend": "none"}))


@pytest.mark.parametrize(
    ("style", "names"), [("thinking_with_map", TWM), ("spotagent", SPOTAGENT), ("geovista", GEOVISTA)]
)
def test_each_style_offers_its_papers_names(registry, style: str, names: list[str]) -> None:  # type: ignore[no-untyped-def]
    offered = registry.subset(load_style(style).tools)
    assert [s["function"]["name"] for s in offered.schemas()] == names


async def test_an_alias_is_the_same_tool(registry) -> None:  # type: ignore[no-untyped-def]
    by_alias = await registry.call("maps_geocode", {"address": "Zürich"})
    by_name = await registry.call("geocode", {"address": "Zürich"})
    assert by_alias.ok and by_alias.data == by_name.data
    assert "maps_geocode" not in registry.names()  # listings show each tool once


def test_unknown_name_is_still_unknown(registry) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(KeyError, match="search_the_web"):
        registry.subset(["search_the_web"])
    with pytest.raises(ValueError, match="search_the_web"):
        training_tools(registry.names(), ["search_the_web"], aliases=registry.alias_names())
    assert training_tools(registry.names(), ["search_web"], aliases=registry.alias_names()) == ["search_web"]


def test_verl_tool_config_follows_the_style(tmp_path: Path) -> None:
    settings = tmp_path / "tools.yaml"
    settings.write_text("cache:\n  backend: none\n")
    out = tmp_path / "verl_tools.yaml"
    res = CliRunner().invoke(
        app,
        [
            "data",
            "verl-tool-config",
            "-o",
            str(out),
            "--style",
            "spotagent",
            "--tool-settings",
            str(settings),
        ],
    )
    assert res.exit_code == 0, res.output
    doc = yaml.safe_load(out.read_text())
    assert [t["config"]["tool"] for t in doc["tools"]] == SPOTAGENT
    tool = GeoSleuthTool(doc["tools"][2]["config"], None)  # verl builds the tool from its config
    assert tool.get_openai_tool_schema().function.name == "maps_geocode"
