"""The tool suite: every tool the published agents use, wired to configured providers and the cache.

`build_registry(settings, names)` is what the agent, the CLI, the MCP server and the verl
adapter call. Providers are created on first use, so a registry with a real provider and
no key still builds; the call then returns a clear error telling the user which variable
to set.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from PIL import Image
from pydantic import Field, ValidationError

from geosleuth.core.geo import valid_coordinates
from geosleuth.core.records import Place
from geosleuth.tools.base import Tool, ToolContext, ToolError, ToolRegistry, ToolResult
from geosleuth.tools.cache import ToolCache
from geosleuth.tools.config import PROVIDER_TOOLS, ToolSettings
from geosleuth.tools.providers.base import MapImage, SearchHit
from geosleuth.tools.text import strip_html, truncate, wrap_output
from geosleuth.tools.zoom import to_original_box, zoom_image

TOOL_NAMES: tuple[str, ...] = (
    "image_zoom_in_tool",
    "geocode",
    "reverse_geocode",
    "poi_input_tips",
    "poi_keyword_search",
    "poi_detail_query",
    "web_search",
    "static_map_query",
    "satellite_map_query",
    "exif_gps",
    "ocr",
)


def make_provider(family: str, settings: ToolSettings) -> Any:
    """Instantiate the configured provider of one tool family (geocode, poi, search, maps)."""
    sel = settings.providers
    choice = {
        "geocode": sel.geocode,
        "poi": sel.poi,
        "search": sel.search,
        "static_map": sel.static_map,
        "satellite_map": sel.satellite_map,
    }[family]
    if choice == "offline":
        if family in {"geocode", "poi"}:
            from geosleuth.tools.providers.offline_geo import OfflineGeoProvider

            return OfflineGeoProvider(settings.poi_files)
        if family == "search":
            from geosleuth.tools.providers.search_offline import OfflineSearchProvider

            return OfflineSearchProvider(settings.resolved_data_dir(), settings.search_documents)
        from geosleuth.tools.providers.maps_offline import OfflineMapProvider

        return OfflineMapProvider(settings.maps.width, settings.maps.height)
    if choice == "nominatim":
        from geosleuth.tools.providers.nominatim import NominatimProvider

        return NominatimProvider(settings)
    if choice == "photon":
        from geosleuth.tools.providers.photon import PhotonProvider

        return PhotonProvider(settings)
    if choice == "google":
        from geosleuth.tools.providers.google import GoogleProvider

        return GoogleProvider(settings, family)
    if choice == "opencage":
        from geosleuth.tools.providers.opencage import OpenCageProvider

        return OpenCageProvider(settings)
    if choice == "amap":
        from geosleuth.tools.providers.amap import AMapProvider

        return AMapProvider(settings, family)
    if choice in {"osm", "esri"}:
        from geosleuth.tools.providers.tiles import TileMapProvider

        return TileMapProvider(settings, choice)
    if choice in {"tavily", "serper", "brave", "searxng"}:
        import importlib

        module = importlib.import_module(f"geosleuth.tools.providers.{choice}")
        cls = {"tavily": "TavilyProvider", "serper": "SerperProvider", "brave": "BraveProvider"}.get(
            choice, "SearxngProvider"
        )
        return getattr(module, cls)(settings)
    raise ToolError(f"unknown provider {choice!r} for {family}")


@dataclass
class ToolRuntime:
    """Settings, cache and lazily created providers shared by all tools of one registry."""

    settings: ToolSettings
    cache: ToolCache
    providers: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def provider(self, family: str) -> Any:
        with self._lock:
            if family not in self.providers:
                try:
                    self.providers[family] = make_provider(family, self.settings)
                except ValueError as exc:
                    raise ToolError(str(exc)) from None
            return self.providers[family]

    async def run(
        self,
        tool: str,
        family: str,
        arguments: dict[str, Any],
        call: Callable[[Any], Awaitable[ToolResult]],
    ) -> ToolResult:
        """Call through the cache (offline providers skip it unless configured otherwise)."""
        provider = self.provider(family)

        async def invoke() -> ToolResult:
            result = await call(provider)
            result.provider = provider.name
            return result

        try:
            if provider.name == "offline" and not self.settings.cache.cache_offline:
                return await invoke()
            result = await self.cache.get_or_call(tool, provider.identity, arguments, invoke)
        except ToolError as exc:  # keep the provider on failures, for the trajectory's records
            return ToolResult.failure(str(exc), provider=provider.name)
        result.provider = provider.name
        return result

    def output(self, tool: str, text: str) -> str:
        return wrap_output(tool, truncate(text, self.settings.max_result_chars))


# --- formatting ---------------------------------------------------------------------------------


def _coord(lat: float, lon: float) -> str:
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
    return f"{line} @ {_coord(p.lat, p.lon)} ({'; '.join(bits)})"


def _places_result(runtime: ToolRuntime, tool: str, query: str, places: list[Place]) -> ToolResult:
    if not places:
        text = f"No results for {query!r}."
    else:
        text = "\n".join(format_place(p, i + 1) for i, p in enumerate(places))
    data = [p.model_dump(exclude_none=True) for p in places]
    return ToolResult(text=runtime.output(tool, text), data=data)


def _remember_cached(runtime: ToolRuntime, result: ToolResult) -> ToolResult:
    """A search served from the cache never reached the provider; one that answers details from
    its own recent results (Photon, offline) must still learn these places."""
    recent = getattr(runtime.providers.get("poi"), "recent", None)
    if recent is not None and result.ok and result.cache_hit and isinstance(result.data, list):
        recent.remember([Place.model_validate(d) for d in result.data])
    return result


def _check_coords(lat: float, lon: float) -> None:
    if not valid_coordinates(lat, lon):
        raise ToolError(
            f"invalid coordinates ({lat}, {lon}): lat must be in [-90, 90] and lon in [-180, 180]"
        )


def _query_text(value: str, what: str) -> str:
    value = " ".join(value.split())
    if not value:
        raise ToolError(f"{what} must not be empty")
    if len(value) > 500:
        raise ToolError(f"{what} is too long ({len(value)} characters; at most 500)")
    return value


def query_image(ctx: ToolContext) -> Image.Image:
    """The query image at original resolution, opened from ``ctx.image_path`` on first use."""
    if ctx.image is None and ctx.image_path:
        from geosleuth.imageio import ImageInputError, open_image

        try:
            ctx.image = open_image(ctx.image_path, label="the query image")
        except ImageInputError as exc:
            raise ToolError(f"cannot open the query image: {exc}") from None
    if ctx.image is None:
        raise ToolError("no image is attached to this conversation")
    return ctx.image


# --- tool definitions ---------------------------------------------------------------------------


def _build_tools(runtime: ToolRuntime) -> list[Tool]:
    settings = runtime.settings

    def image_zoom_in_tool(bbox_2d: list[float], ctx: ToolContext, label: str | None = None) -> ToolResult:
        """Zoom in on a region of the image to read small text or inspect details.

        Args:
            bbox_2d: The region as [x1, y1, x2, y2], top-left then bottom-right corner, in the image coordinates you were told to use.
            label: Optional short name for what is in the region (e.g. "street sign").
        """  # noqa: E501
        image = query_image(ctx)
        box, notes = to_original_box(
            bbox_2d,
            image.size,
            ctx.bbox_convention,
            ctx.model_scale,
            settings.zoom.min_side_px,
            model_size=ctx.model_size,
        )
        out = zoom_image(image, box, settings.zoom)
        what = f" ({label})" if label else ""
        text = f"Zoomed-in view of {list(bbox_2d)}{what}: {out.width}x{out.height} pixels."
        if notes:
            text += " Note: " + "; ".join(notes) + "."
        data = {"bbox_2d": list(bbox_2d), "original_box": [box.x1, box.y1, box.x2, box.y2], "label": label}
        return ToolResult(text=text, images=[out], data=data)

    async def geocode(address: str) -> ToolResult:
        """Find the coordinates of an address or place name (any language).

        Args:
            address: Address, place or landmark name, e.g. "Bahnhofstrasse 1, Zürich" or "東京".
        """
        address = _query_text(address, "address")

        async def call(p: Any) -> ToolResult:
            return _places_result(runtime, "geocode", address, await p.geocode(address, limit=5))

        return await runtime.run("geocode", "geocode", {"address": address}, call)

    async def reverse_geocode(lat: float, lon: float) -> ToolResult:
        """Find what is at a coordinate: country, region, city and address.

        Args:
            lat: Latitude in decimal degrees (WGS-84), -90 to 90.
            lon: Longitude in decimal degrees (WGS-84), -180 to 180.
        """
        _check_coords(lat, lon)

        async def call(p: Any) -> ToolResult:
            place = await p.reverse(lat, lon)
            places = [place] if place is not None else []
            return _places_result(runtime, "reverse_geocode", _coord(lat, lon), places)

        return await runtime.run("reverse_geocode", "geocode", {"lat": lat, "lon": lon}, call)

    async def poi_input_tips(query: str, city: str | None = None) -> ToolResult:
        """Suggest places and points of interest matching a partial name.

        Args:
            query: Partial or full name of a place, shop, landmark or street.
            city: Optional city to restrict the suggestions to.
        """
        query = _query_text(query, "query")

        async def call(p: Any) -> ToolResult:
            places = await p.input_tips(query, city=city, limit=settings.max_results)
            return _places_result(runtime, "poi_input_tips", query, places)

        return _remember_cached(
            runtime, await runtime.run("poi_input_tips", "poi", {"query": query, "city": city}, call)
        )

    async def poi_keyword_search(
        query: str, city: str | None = None, near_lat: float | None = None, near_lon: float | None = None
    ) -> ToolResult:
        """Search points of interest by keyword; returns ids, names, addresses, coordinates and types.

        Args:
            query: Keyword or name, e.g. "Starbucks", "train station", "Lotte Mart".
            city: Optional city to search in.
            near_lat: Optional latitude to search around (give near_lon too).
            near_lon: Optional longitude to search around (give near_lat too).
        """
        query = _query_text(query, "query")
        if (near_lat is None) != (near_lon is None):
            raise ToolError("give both near_lat and near_lon, or neither")
        near = None
        if near_lat is not None and near_lon is not None:
            _check_coords(near_lat, near_lon)
            near = (near_lat, near_lon)
        args = {"query": query, "city": city, "near_lat": near_lat, "near_lon": near_lon}

        async def call(p: Any) -> ToolResult:
            places = await p.keyword_search(query, city=city, near=near, limit=settings.max_results)
            return _places_result(runtime, "poi_keyword_search", query, places)

        return _remember_cached(runtime, await runtime.run("poi_keyword_search", "poi", args, call))

    async def poi_detail_query(poi_id: str) -> ToolResult:
        """Details of one point of interest by the id a POI search returned.

        Args:
            poi_id: The id field of a result from poi_keyword_search or poi_input_tips.
        """
        poi_id = _query_text(poi_id, "poi_id")

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

        return await runtime.run("poi_detail_query", "poi", {"poi_id": poi_id}, call)

    async def web_search(query: str, max_results: Annotated[int, Field(ge=1, le=10)] = 5) -> ToolResult:
        """Search the web; returns up to 10 results with title, url and snippet.

        Args:
            query: Search query, e.g. a shop name with a phone number, or text read from a sign.
            max_results: Number of results, 1 to 10.
        """
        query = _query_text(query, "query")
        n = min(max_results, settings.max_results)

        async def call(p: Any) -> ToolResult:
            hits: list[SearchHit] = (await p.search(query, max_results=n))[:n]
            per_hit = max(200, settings.max_result_chars // max(len(hits), 1))
            hits = [
                SearchHit(title=truncate(h.title, 200), url=h.url, snippet=truncate(h.snippet, per_hit))
                for h in hits
            ]
            if not hits:
                text = f"No results for {query!r}."
            else:
                text = "\n\n".join(f"[{i + 1}] {h.title}\n{h.url}\n{h.snippet}" for i, h in enumerate(hits))
            return ToolResult(text=runtime.output("web_search", text), data=[h.model_dump() for h in hits])

        return await runtime.run("web_search", "search", {"query": query, "max_results": n}, call)

    async def _map(
        tool: str, family: str, lat: float, lon: float, zoom: int | None, default: int
    ) -> ToolResult:
        _check_coords(lat, lon)
        z = default if zoom is None else zoom
        if not 1 <= z <= 20:
            raise ToolError(f"zoom must be between 1 (world) and 20 (building), got {z}")
        kind: Literal["static", "satellite"] = "satellite" if family == "satellite_map" else "static"

        async def call(p: Any) -> ToolResult:
            m: MapImage = await p.render(lat, lon, z, kind)
            title = "Satellite" if kind == "satellite" else "Map"
            text = f"{title} view centred on {_coord(lat, lon)} at zoom {m.zoom}"
            text += f" (red marker = the point; {m.attribution})."
            if m.note:
                text += " " + m.note
            data = {"lat": lat, "lon": lon, "zoom": m.zoom, "attribution": m.attribution}
            return ToolResult(text=text, images=[m.image], data=data)

        return await runtime.run(tool, family, {"lat": lat, "lon": lon, "zoom": z}, call)

    async def static_map_query(lat: float, lon: float, zoom: int | None = None) -> ToolResult:
        """Show a road map around a coordinate, to compare with the photo's surroundings.

        Args:
            lat: Latitude of the map centre (WGS-84).
            lon: Longitude of the map centre (WGS-84).
            zoom: Zoom level, 1 (world) to 20 (building); default city scale.
        """
        return await _map("static_map_query", "static_map", lat, lon, zoom, settings.maps.default_zoom)

    async def satellite_map_query(lat: float, lon: float, zoom: int | None = None) -> ToolResult:
        """Show satellite imagery around a coordinate, to compare layouts, roads and terrain.

        Args:
            lat: Latitude of the image centre (WGS-84).
            lon: Longitude of the image centre (WGS-84).
            zoom: Zoom level, 1 (world) to 20 (building); default street scale.
        """
        return await _map(
            "satellite_map_query", "satellite_map", lat, lon, zoom, settings.maps.satellite_default_zoom
        )

    def exif_gps(ctx: ToolContext, image: Literal["query"] = "query") -> ToolResult:
        """Read the photo's metadata: GPS position, capture time and camera, when present.

        Args:
            image: Which image to read; "query" is the photo being located.
        """
        from geosleuth.tools.exif import read_exif

        header = ctx.image_path or ctx.image_source  # read from the header alone, never decoded
        info = read_exif(ctx.image if ctx.image is not None or header else query_image(ctx), header)
        return ToolResult(text=info.describe(), data=info.model_dump(exclude_none=True))

    def ocr(ctx: ToolContext, region: list[float] | None = None) -> ToolResult:
        """Read text in the image (signs, shop fronts, plates) with its position, language and script.

        Args:
            region: Optional [x1, y1, x2, y2] box to read, in the same coordinates as the zoom tool; default the whole image.
        """  # noqa: E501
        from geosleuth.tools.ocr import run_ocr

        image = query_image(ctx)
        languages = settings.service("tesseract").language or "eng"  # e.g. "eng+jpn+chi_sim"
        report = run_ocr(
            image,
            settings.providers.ocr,
            region,
            ctx.bbox_convention,
            ctx.model_scale,
            tesseract_languages=languages,
            model_size=ctx.model_size,
        )
        return ToolResult(
            text=runtime.output("ocr", report.describe()), data=report.model_dump(), provider=report.engine
        )

    fns: list[Callable[..., Any]] = [
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
    ]
    return [Tool(fn) for fn in fns]


def coerce_settings(settings: ToolSettings | Mapping[str, Any] | str | Path | None) -> ToolSettings:
    """Settings from an object, a mapping (e.g. a YAML section), a file path, or the environment."""
    if isinstance(settings, ToolSettings):
        return settings
    if settings is None or isinstance(settings, str | Path):
        return ToolSettings.load(settings)
    try:
        return ToolSettings.model_validate(dict(settings))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"invalid tool settings: {problems}") from None


def build_registry(
    settings: ToolSettings | Mapping[str, Any] | str | Path | None = None,
    names: Iterable[str] | None = None,
    cache: ToolCache | None = None,
) -> ToolRegistry:
    """The tool registry the agent uses; ``names`` picks a subset (in that order)."""
    settings = coerce_settings(settings)
    if cache is None:
        cache = ToolCache.from_settings(settings.cache, settings.cache_path())
    runtime = ToolRuntime(settings=settings, cache=cache)
    registry = ToolRegistry(_build_tools(runtime))
    registry.runtime = runtime
    if names is None:
        return registry
    return registry.subset(list(names))


def provider_status(settings: ToolSettings) -> list[dict[str, str]]:
    """For `geosleuth tools list`: each tool, its provider, and whether that provider is usable."""
    rows: list[dict[str, str]] = []
    for name in TOOL_NAMES:
        family = PROVIDER_TOOLS.get(name)
        if family is None:
            rows.append({"tool": name, "provider": "local", "status": "ready"})
            continue
        choice = str(getattr(settings.providers, family))
        status = "ready"
        service = {"tavily", "serper", "brave", "google", "opencage", "amap"}
        if choice in service and not settings.api_key(choice):
            status = f"missing key: set GEOSLEUTH_{choice.upper()}_API_KEY"
        elif choice == "searxng" and not settings.base_url("searxng", None):
            status = "missing URL: set GEOSLEUTH_SEARXNG_BASE_URL"
        elif choice == "tesseract":
            import shutil

            status = "ready" if shutil.which("tesseract") else "tesseract binary not found"
        rows.append({"tool": name, "provider": choice, "status": status})
    return rows
