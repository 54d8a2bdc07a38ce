"""Map tools: a road map or satellite imagery around a coordinate."""

from __future__ import annotations

from typing import Any, Literal

from geosleuth.tools.base import ToolError, ToolResult, tool
from geosleuth.tools.builtin.results import check_coords, coord_text
from geosleuth.tools.providers.base import MapImage
from geosleuth.tools.runtime import ToolRuntime


async def _map_query(
    runtime: ToolRuntime, name: str, family: str, lat: float, lon: float, zoom: int | None, default: int
) -> ToolResult:
    check_coords(lat, lon)
    z = default if zoom is None else zoom
    if not 1 <= z <= 20:
        raise ToolError(f"zoom must be between 1 (world) and 20 (building), got {z}")
    kind: Literal["static", "satellite"] = "satellite" if family == "satellite_map" else "static"

    async def call(p: Any) -> ToolResult:
        m: MapImage = await p.render(lat, lon, z, kind)
        title = "Satellite" if kind == "satellite" else "Map"
        text = f"{title} view centred on {coord_text(lat, lon)} at zoom {m.zoom}"
        text += f" (red marker = the point; {m.attribution})."
        if m.note:
            text += " " + m.note
        data = {"lat": lat, "lon": lon, "zoom": m.zoom, "attribution": m.attribution}
        return ToolResult(text=text, images=[m.image], data=data)

    return await runtime.run(name, family, {"lat": lat, "lon": lon, "zoom": z}, call)


@tool
async def static_map_query(
    runtime: ToolRuntime, lat: float, lon: float, zoom: int | None = None
) -> ToolResult:
    """Show a road map around a coordinate, to compare with the photo's surroundings.

    Args:
        lat: Latitude of the map centre (WGS-84).
        lon: Longitude of the map centre (WGS-84).
        zoom: Zoom level, 1 (world) to 20 (building); default city scale.
    """
    return await _map_query(
        runtime, "static_map_query", "static_map", lat, lon, zoom, runtime.settings.maps.default_zoom
    )


@tool
async def satellite_map_query(
    runtime: ToolRuntime, lat: float, lon: float, zoom: int | None = None
) -> ToolResult:
    """Show satellite imagery around a coordinate, to compare layouts, roads and terrain.

    Args:
        lat: Latitude of the image centre (WGS-84).
        lon: Longitude of the image centre (WGS-84).
        zoom: Zoom level, 1 (world) to 20 (building); default street scale.
    """
    return await _map_query(
        runtime,
        "satellite_map_query",
        "satellite_map",
        lat,
        lon,
        zoom,
        runtime.settings.maps.satellite_default_zoom,
    )
