"""The tool registry: every tool a registry can offer, by name, light enough for ``--help``.

geosleuth's tools register from ``tools.builtin``; a user's tool (a `geosleuth.tools.base.Tool`,
made with the ``@tool`` decorator) registers by name or through the ``geosleuth.tools`` entry
point, and then every door that builds a tool registry (the agent, MCP, verl, TRL, ms-swift)
offers it like a built-in.
"""

from __future__ import annotations

from typing import Any

from geosleuth.registry import Registry

TOOLS: Registry[Any] = Registry(  # of tools.base.Tool, which tools.builtin validates
    "tool",
    "geosleuth.tools",
    builtins=dict.fromkeys(
        (
            "image_zoom_in_tool", "geocode", "reverse_geocode", "poi_input_tips", "poi_keyword_search",
            "poi_detail_query", "web_search", "static_map_query", "satellite_map_query", "exif_gps", "ocr",
        ),
        "geosleuth.tools.builtin",
    ),
)  # fmt: skip
