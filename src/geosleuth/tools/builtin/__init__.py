"""The built-in tools, one typed function each, declared with `geosleuth.tools.base.tool`.

Each takes the registry's `ToolRuntime` as ``runtime`` (bound by `build_registry`, never shown
to the model), so one can be tried alone: ``await geocode.bind(runtime=...)({"address": "Zürich"})``.
"""

from typing import Any

from geosleuth.tools.base import Tool
from geosleuth.tools.builtin.geocoding import geocode, reverse_geocode
from geosleuth.tools.builtin.image import exif_gps, image_zoom_in_tool, ocr
from geosleuth.tools.builtin.maps import satellite_map_query, static_map_query
from geosleuth.tools.builtin.poi import poi_detail_query, poi_input_tips, poi_keyword_search
from geosleuth.tools.builtin.search import web_search
from geosleuth.tools.catalog import TOOLS

BUILTIN_TOOLS: tuple[Tool, ...] = (
    image_zoom_in_tool,
    geocode,
    reverse_geocode,
    poi_input_tips,
    poi_keyword_search,
    poi_detail_query,
    web_search,
    static_map_query,
    satellite_map_query,
    exif_gps,
    ocr,
)
"""In the order registries list them."""


@TOOLS.validator
def _as_tool(name: str, value: Any) -> Tool:
    if not isinstance(value, Tool):
        raise TypeError(f"a tool is a geosleuth.tools.base.Tool (use @tool), got {type(value).__name__}")
    if value.name != name:
        raise ValueError(f"the tool is named {value.name!r}, registered as {name!r}")
    return value


for _tool in BUILTIN_TOOLS:
    TOOLS.register(_tool.name, _tool)

__all__ = ["BUILTIN_TOOLS", *(t.name for t in BUILTIN_TOOLS)]
