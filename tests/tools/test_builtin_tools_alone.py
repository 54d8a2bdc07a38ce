"""Each built-in tool is a top-level typed function that runs alone, bound to a runtime by hand."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from PIL import Image

from geosleuth.tools.base import ToolContext
from geosleuth.tools.builtin import BUILTIN_TOOLS, geocode, image_zoom_in_tool, web_search
from geosleuth.tools.cache import ToolCache
from geosleuth.tools.config import ToolSettings
from geosleuth.tools.registry import TOOL_NAMES, build_registry
from geosleuth.tools.runtime import ToolRuntime


def offline_runtime() -> ToolRuntime:
    settings = ToolSettings.load(None, env={})  # offline providers, no cache file
    return ToolRuntime(settings=settings, cache=ToolCache(backend=None, mode="off"))


def test_the_model_never_sees_the_runtime_and_the_registry_keeps_its_order() -> None:
    assert tuple(t.name for t in BUILTIN_TOOLS) == TOOL_NAMES
    for t in BUILTIN_TOOLS:
        assert "runtime" not in t.parameters["properties"], t.name
    assert [s["function"]["name"] for s in build_registry(ToolSettings.load(None, env={})).schemas()] == list(
        TOOL_NAMES
    )


def test_geocode_alone_answers_from_the_offline_gazetteer() -> None:
    result = asyncio.run(geocode.bind(runtime=offline_runtime())({"address": "Zürich"}))
    assert result.ok and result.provider == "offline"
    assert result.data[0]["country_code"] == "CH" and abs(result.data[0]["lat"] - 47.37) < 0.1


def test_zoom_alone_crops_the_box_it_is_given() -> None:
    image = Image.new("RGB", (400, 300), "white")
    ctx = ToolContext(image=image, bbox_convention="absolute")
    zoom = image_zoom_in_tool.bind(runtime=offline_runtime())
    result = asyncio.run(zoom({"bbox_2d": [100, 50, 300, 250], "label": "sign"}, ctx))
    assert result.ok and result.data["original_box"] == [100, 50, 300, 250] and result.images


def test_an_unbound_tool_says_so_and_a_wrong_binding_fails_at_once(tmp_path: Path) -> None:
    result = asyncio.run(web_search({"query": "Luzern"}))
    assert not result.ok and "not bound to a registry (missing runtime)" in result.error
    with pytest.raises(TypeError, match="takes no bound parameter cache"):
        web_search.bind(cache=tmp_path)
