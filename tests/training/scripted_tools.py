"""The tools the engine tests' scripted policies call: geosleuth's zoom and offline geocoder
(cache off), plus one that never answers in time (a unique module name: pytest imports test
folders flat, and engines load ``test_…:registry`` factories by their dotted path)."""

from __future__ import annotations

import asyncio

from geosleuth.tools.base import Tool, ToolRegistry


async def slow_lookup(query: str) -> str:
    """Look a place up in a service that never answers in time.

    Args:
        query: place name
    """
    await asyncio.sleep(30)
    return query


def registry(settings_path: str | None = None) -> ToolRegistry:
    """geosleuth's zoom and offline geocoder (cache off), plus a tool that times out."""
    from geosleuth.tools import build_registry
    from geosleuth.tools.config import CacheSettings, ToolSettings

    real = build_registry(
        ToolSettings(cache=CacheSettings(backend="none")), names=["image_zoom_in_tool", "geocode"]
    )
    real.register(Tool(slow_lookup))
    return real
