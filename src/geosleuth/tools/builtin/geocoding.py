"""Geocoding tools: an address to coordinates, and coordinates to a place."""

from __future__ import annotations

from typing import Any

from geosleuth.tools.base import ToolResult, tool
from geosleuth.tools.builtin.results import check_coords, coord_text, places_result, query_text
from geosleuth.tools.runtime import ToolRuntime


@tool
async def geocode(runtime: ToolRuntime, address: str) -> ToolResult:
    """Find the coordinates of an address or place name (any language).

    Args:
        address: Address, place or landmark name, e.g. "Bahnhofstrasse 1, Zürich" or "東京".
    """
    address = query_text(address, "address")

    async def call(p: Any) -> ToolResult:
        return places_result(runtime, "geocode", address, await p.geocode(address, limit=5))

    return await runtime.run("geocode", "geocode", {"address": address}, call)


@tool
async def reverse_geocode(runtime: ToolRuntime, lat: float, lon: float) -> ToolResult:
    """Find what is at a coordinate: country, region, city and address.

    Args:
        lat: Latitude in decimal degrees (WGS-84), -90 to 90.
        lon: Longitude in decimal degrees (WGS-84), -180 to 180.
    """
    check_coords(lat, lon)

    async def call(p: Any) -> ToolResult:
        place = await p.reverse(lat, lon)
        places = [place] if place is not None else []
        return places_result(runtime, "reverse_geocode", coord_text(lat, lon), places)

    return await runtime.run("reverse_geocode", "geocode", {"lat": lat, "lon": lon}, call)
