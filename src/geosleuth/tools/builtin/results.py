"""What the built-in tools share: argument checks, the query image, and place lists as text."""

from __future__ import annotations

from PIL import Image

from geosleuth.core.geo import valid_coordinates
from geosleuth.core.records import Place
from geosleuth.tools.base import ToolContext, ToolError, ToolResult
from geosleuth.tools.runtime import ToolRuntime
from geosleuth.tools.text import strip_html


def coord_text(lat: float, lon: float) -> str:
    return f"{lat:.5f}, {lon:.5f}"


def format_place(p: Place, index: int | None = None) -> str:
    head = f"{index}. " if index is not None else ""
    where = p.address or ", ".join(x for x in (p.admin1, p.country or p.country_code) if x)
    bits = [f"id={p.id}", p.kind]
    if p.population:
        bits.append(f"population {p.population:,}")
    if "distance_km" in p.extra:
        bits.append(f"{p.extra['distance_km']} km from the reference point")
    line = f"{head}{p.name}"
    if where and where != p.name:
        line += f" — {strip_html(where)}"
    if p.country_code:
        line += f" [{p.country_code}]"
    return f"{line} @ {coord_text(p.lat, p.lon)} ({'; '.join(bits)})"


def places_result(runtime: ToolRuntime, tool: str, query: str, places: list[Place]) -> ToolResult:
    if not places:
        text = f"No results for {query!r}."
    else:
        text = "\n".join(format_place(p, i + 1) for i, p in enumerate(places))
    data = [p.model_dump(exclude_none=True) for p in places]
    return ToolResult(text=runtime.output(tool, text), data=data)


def remember_cached(runtime: ToolRuntime, result: ToolResult) -> ToolResult:
    """A search served from the cache never reached the provider; one that answers details from
    its own recent results (Photon, offline) must still learn these places."""
    recent = getattr(runtime.providers.get("poi"), "recent", None)
    if recent is not None and result.ok and result.cache_hit and isinstance(result.data, list):
        recent.remember([Place.model_validate(d) for d in result.data])
    return result


def check_coords(lat: float, lon: float) -> None:
    if not valid_coordinates(lat, lon):
        raise ToolError(
            f"invalid coordinates ({lat}, {lon}): lat must be in [-90, 90] and lon in [-180, 180]"
        )


def query_text(value: str, what: str) -> str:
    value = " ".join(value.split())
    if not value:
        raise ToolError(f"{what} must not be empty")
    if len(value) > 500:
        raise ToolError(f"{what} is too long ({len(value)} characters; at most 500)")
    return value


def query_image(ctx: ToolContext) -> Image.Image:
    """The query image at original resolution, opened from ``ctx.image_path`` on first use."""
    if ctx.image is None and ctx.image_path:
        from geosleuth.bounds.imageio import ImageInputError, open_image

        try:
            ctx.image = open_image(ctx.image_path, label="the query image")
        except ImageInputError as exc:
            raise ToolError(f"cannot open the query image: {exc}") from None
    if ctx.image is None:
        raise ToolError("no image is attached to this conversation")
    return ctx.image
