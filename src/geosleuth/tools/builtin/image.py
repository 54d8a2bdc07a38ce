"""Tools that look at the query image itself: zoom, EXIF metadata, OCR."""

from __future__ import annotations

from typing import Literal

from geosleuth.tools.base import ToolContext, ToolResult, tool
from geosleuth.tools.builtin.results import query_image
from geosleuth.tools.runtime import ToolRuntime
from geosleuth.tools.zoom import to_original_box, zoom_image


@tool
def image_zoom_in_tool(
    runtime: ToolRuntime, bbox_2d: list[float], ctx: ToolContext, label: str | None = None
) -> ToolResult:
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
        runtime.settings.zoom.min_side_px,
        model_size=ctx.model_size,
    )
    out = zoom_image(image, box, runtime.settings.zoom)
    what = f" ({label})" if label else ""
    text = f"Zoomed-in view of {list(bbox_2d)}{what}: {out.width}x{out.height} pixels."
    if notes:
        text += " Note: " + "; ".join(notes) + "."
    data = {"bbox_2d": list(bbox_2d), "original_box": [box.x1, box.y1, box.x2, box.y2], "label": label}
    return ToolResult(text=text, images=[out], data=data)


@tool
def exif_gps(ctx: ToolContext, image: Literal["query"] = "query") -> ToolResult:
    """Read the photo's metadata: GPS position, capture time and camera, when present.

    Args:
        image: Which image to read; "query" is the photo being located.
    """
    from geosleuth.tools.exif import read_exif

    header = ctx.image_path or ctx.image_source  # read from the header alone, never decoded
    info = read_exif(ctx.image if ctx.image is not None or header else query_image(ctx), header)
    return ToolResult(text=info.describe(), data=info.model_dump(exclude_none=True))


@tool
def ocr(runtime: ToolRuntime, ctx: ToolContext, region: list[float] | None = None) -> ToolResult:
    """Read text in the image (signs, shop fronts, plates) with its position, language and script.

    Args:
        region: Optional [x1, y1, x2, y2] box to read, in the same coordinates as the zoom tool; default the whole image.
    """  # noqa: E501
    from geosleuth.tools.ocr import run_ocr

    image = query_image(ctx)
    languages = runtime.settings.service("tesseract").language or "eng"  # e.g. "eng+jpn+chi_sim"
    report = run_ocr(
        image,
        runtime.settings.providers.ocr,
        region,
        ctx.bbox_convention,
        ctx.model_scale,
        tesseract_languages=languages,
        model_size=ctx.model_size,
    )
    return ToolResult(
        text=runtime.output("ocr", report.describe()), data=report.model_dump(), provider=report.engine
    )
