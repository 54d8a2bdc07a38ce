"""geosleuth tools inside TRL's GRPO tool loop (``GRPOTrainer(environment_factory=…)``).

TRL creates one environment per rollout, calls ``reset(**row)`` with the dataset row (so the
zoom tool gets that row's image) and exposes the environment's public methods as tools,
their schemas read from signatures and docstrings. Each method here delegates to the
geosleuth tool of the same name (same providers and cache as evaluation); zoom returns the
zoomed image as a multimodal tool message, which TRL feeds back to the VLM.

    from geosleuth.training.trl_env import make_environment_factory
    trainer = GRPOTrainer(..., environment_factory=make_environment_factory(["image_zoom_in_tool"]))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PIL import Image

from geosleuth.tools.base import ToolContext, ToolResult
from geosleuth.training.verl_tools import shared_registry


def _image_of(row: dict[str, Any]) -> Image.Image | None:
    value = row.get("image")
    if value is None and row.get("images"):
        value = row["images"][0]
    if isinstance(value, Image.Image):
        return value.convert("RGB")
    if isinstance(value, str):
        from geosleuth.imageio import open_image

        img = open_image(value)  # bounded: header checked, JPEG reduced, bombs refused
        return img if img.mode == "RGB" else img.convert("RGB")
    return None


def _content(result: ToolResult) -> list[dict[str, Any]] | str:
    if not result.images:
        return result.text or "(no output)"
    parts: list[dict[str, Any]] = [{"type": "image", "image": img} for img in result.images]
    if result.text:
        parts.append({"type": "text", "text": result.text})
    return parts


class GeoToolEnvironment:
    """Per-rollout state for the tools: the query image and how the model sees it."""

    settings_path: str | None = None
    registry_factory: str | None = None

    def __init__(self) -> None:
        self.ctx = ToolContext()
        self.calls: list[tuple[str, bool]] = []

    def reset(self, **row: Any) -> None:
        image = _image_of(row)
        size = row.get("model_size")  # [width, height] of the frame the model sees, when known
        self.ctx = ToolContext(
            image=image,
            model_scale=float(row.get("model_scale") or 1.0),
            model_size=(int(size[0]), int(size[1])) if size else None,
            bbox_convention=row.get("bbox_convention") or "absolute",
        )
        self.calls = []

    async def _call(self, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]] | str:
        registry = shared_registry(self.settings_path, self.registry_factory)
        result = await registry.call(name, arguments, self.ctx)
        self.calls.append((name, result.ok))
        return _content(result)


# Tool methods: ``self`` stays unannotated because TRL builds each schema from the type hints.


async def image_zoom_in_tool(self, bbox_2d: list[float]) -> list[dict[str, Any]] | str:
    """Zoom in on a region of the image to read small text or inspect details.

    Args:
        bbox_2d: The region as [x1, y1, x2, y2], top-left then bottom-right corner, in image pixels.
    """
    return await self._call("image_zoom_in_tool", {"bbox_2d": bbox_2d})


async def geocode(self, address: str) -> list[dict[str, Any]] | str:
    """Find coordinates for an address or place name.

    Args:
        address: The address or place name, e.g. "Bahnhofstrasse 1, Zürich".
    """
    return await self._call("geocode", {"address": address})


async def web_search(self, query: str) -> list[dict[str, Any]] | str:
    """Search the web and return the top results.

    Args:
        query: What to search for.
    """
    return await self._call("web_search", {"query": query})


async def static_map_query(self, lat: float, lon: float) -> list[dict[str, Any]] | str:
    """Show a street map around a point.

    Args:
        lat: Latitude in decimal degrees.
        lon: Longitude in decimal degrees.
    """
    return await self._call("static_map_query", {"lat": lat, "lon": lon})


async def satellite_map_query(self, lat: float, lon: float) -> list[dict[str, Any]] | str:
    """Show satellite imagery around a point.

    Args:
        lat: Latitude in decimal degrees.
        lon: Longitude in decimal degrees.
    """
    return await self._call("satellite_map_query", {"lat": lat, "lon": lon})


TOOL_METHODS = {
    f.__name__: f for f in (image_zoom_in_tool, geocode, web_search, static_map_query, satellite_map_query)
}


def make_environment_factory(
    tools: Sequence[str] = ("image_zoom_in_tool",),
    settings_path: str | None = None,
    registry_factory: str | None = None,
) -> type[GeoToolEnvironment]:
    """An environment class exposing exactly ``tools`` (TRL calls the class to make each instance)."""
    unknown = [t for t in tools if t not in TOOL_METHODS]
    if unknown:
        raise ValueError(f"no TRL tool method for {unknown}; available: {sorted(TOOL_METHODS)}")
    attrs: dict[str, Any] = {name: TOOL_METHODS[name] for name in tools}
    attrs.update(settings_path=settings_path, registry_factory=registry_factory)
    return type("GeoToolEnvironment", (GeoToolEnvironment,), attrs)
