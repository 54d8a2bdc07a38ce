"""Point-of-interest tools (Thinking with Map): input tips, keyword search, details by id."""

from __future__ import annotations

from typing import Any

from geosleuth.core.records import Place
from geosleuth.tools.base import ToolError, ToolResult, tool
from geosleuth.tools.builtin.results import (
    check_coords,
    format_place,
    place_view,
    places_result,
    query_text,
    remember_cached,
    screened_places,
)
from geosleuth.tools.leakguard import active_guard
from geosleuth.tools.runtime import ToolRuntime


@tool
async def poi_input_tips(runtime: ToolRuntime, query: str, city: str | None = None) -> ToolResult:
    """Suggest places and points of interest matching a partial name.

    Args:
        query: Partial or full name of a place, shop, landmark or street.
        city: Optional city to restrict the suggestions to.
    """
    query = query_text(query, "query")

    async def call(p: Any) -> ToolResult:
        places = await p.input_tips(query, city=city, limit=runtime.settings.max_results)
        return places_result(runtime, "poi_input_tips", query, places)

    result = await runtime.run("poi_input_tips", "poi", {"query": query, "city": city}, call)
    return screened_places(runtime, "poi_input_tips", query, remember_cached(runtime, result))


@tool
async def poi_keyword_search(
    runtime: ToolRuntime,
    query: str,
    city: str | None = None,
    near_lat: float | None = None,
    near_lon: float | None = None,
) -> ToolResult:
    """Search points of interest by keyword; returns ids, names, addresses, coordinates and types.

    Args:
        query: Keyword or name, e.g. "Starbucks", "train station", "Lotte Mart".
        city: Optional city to search in.
        near_lat: Optional latitude to search around (give near_lon too).
        near_lon: Optional longitude to search around (give near_lat too).
    """
    query = query_text(query, "query")
    if (near_lat is None) != (near_lon is None):
        raise ToolError("give both near_lat and near_lon, or neither")
    near = None
    if near_lat is not None and near_lon is not None:
        check_coords(near_lat, near_lon)
        near = (near_lat, near_lon)
    args = {"query": query, "city": city, "near_lat": near_lat, "near_lon": near_lon}

    async def call(p: Any) -> ToolResult:
        places = await p.keyword_search(query, city=city, near=near, limit=runtime.settings.max_results)
        return places_result(runtime, "poi_keyword_search", query, places)

    result = remember_cached(runtime, await runtime.run("poi_keyword_search", "poi", args, call))
    return screened_places(runtime, "poi_keyword_search", query, result)


@tool
async def poi_detail_query(runtime: ToolRuntime, poi_id: str) -> ToolResult:
    """Details of one point of interest by the id a POI search returned.

    Args:
        poi_id: The id field of a result from poi_keyword_search or poi_input_tips.
    """
    poi_id = query_text(poi_id, "poi_id")

    async def call(p: Any) -> ToolResult:
        place = await p.detail(poi_id)
        if place is None:
            raise ToolError(f"no POI with id {poi_id!r}; use an id from a previous POI search result")
        text = format_place(place)
        extras = {k: v for k, v in place.extra.items() if v not in (None, "", [], {})}
        if extras:
            text += "\n" + "\n".join(f"{k}: {v}" for k, v in extras.items())
        return ToolResult(
            text=runtime.output("poi_detail_query", text), data=place.model_dump(exclude_none=True)
        )

    result = await runtime.run("poi_detail_query", "poi", {"poi_id": poi_id}, call)
    guard = active_guard()
    if guard is not None and result.ok and isinstance(result.data, dict):
        place = Place.model_validate(result.data)
        if not guard.keep([place], place_view):  # answered as an unknown id: a dropped place leaves no trace
            return ToolResult.failure(
                f"no POI with id {poi_id!r}; use an id from a previous POI search result", result.provider
            )
    return result
