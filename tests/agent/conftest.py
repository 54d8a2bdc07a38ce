"""Shared pieces for agent tests: a query image, small test tools, a config pointed at a fake server."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from geosleuth.tools.base import ToolContext, ToolError, ToolRegistry, tool


@tool
def image_zoom_in_tool(bbox_2d: list[float], ctx: ToolContext) -> Image.Image:
    """Crop a region of the query image.

    Args:
        bbox_2d: [x1, y1, x2, y2] in pixels of the image the model saw.
    """
    if len(bbox_2d) != 4:
        raise ToolError("bbox_2d needs 4 numbers")
    x1, y1, x2, y2 = (v / ctx.model_scale for v in bbox_2d)
    if x2 <= x1 or y2 <= y1:
        raise ToolError(f"invalid bbox {bbox_2d}: need x1 < x2 and y1 < y2")
    assert ctx.image is not None
    return ctx.image.crop((int(x1), int(y1), int(x2), int(y2)))


@tool
def geocode(address: str) -> dict[str, Any]:
    """Coordinates of an address.

    Args:
        address: free-text address or place name.
    """
    return {"address": address, "lat": 47.3769, "lon": 8.5417}


@tool
async def slow_lookup(query: str) -> str:
    """A tool that takes 0.2 s, to show calls in one turn run concurrently.

    Args:
        query: anything.
    """
    begun = time.monotonic()
    await asyncio.sleep(0.2)
    SLOW_SPANS.append((begun, time.monotonic()))
    return f"result for {query}"


SLOW_SPANS: list[tuple[float, float]] = []
"""When each ``slow_lookup`` call ran (``slow_spans``): overlapping spans show concurrency under any load."""


@pytest.fixture
def slow_spans() -> list[tuple[float, float]]:
    SLOW_SPANS.clear()
    return SLOW_SPANS


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry([image_zoom_in_tool, geocode, slow_lookup])


@pytest.fixture
def query_image(tmp_path: Path) -> Path:
    """A 3000×2000 photo-like image (6 M pixels, above the 2 M budget)."""
    img = Image.new("RGB", (3000, 2000), (120, 160, 200))
    for x in range(0, 3000, 100):
        img.paste((200, 40, 40), (x, 900, x + 50, 1100))
    path = tmp_path / "query.jpg"
    img.save(path, quality=85)
    return path
