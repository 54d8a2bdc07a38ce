"""Crop-and-zoom: both box conventions, the minimum side, the upscale cap, every invalid box."""

from __future__ import annotations

import pytest
from PIL import Image

from geosleuth.tools import build_registry
from geosleuth.tools.base import ToolContext, ToolError
from geosleuth.tools.config import ToolSettings, ZoomSettings
from geosleuth.tools.zoom import PixelBox, to_original_box, zoom_image


def _gradient(width: int = 1000, height: int = 800) -> Image.Image:
    """Each pixel encodes its own coordinates, so a crop's origin can be read back."""
    im = Image.new("RGB", (width, height))
    im.putdata([(x % 256, y % 256, (x // 256) * 16 + y // 256) for y in range(height) for x in range(width)])
    return im


def test_absolute_box_maps_back_through_model_scale() -> None:
    box, notes = to_original_box([100, 50, 200, 150], (1000, 800), "absolute", model_scale=0.5)
    assert box == PixelBox(200, 100, 400, 300)
    assert notes == []


def test_relative_1000_box() -> None:
    box, _ = to_original_box([250, 500, 750, 1000], (1000, 800), "relative1000")
    assert box == PixelBox(250, 400, 750, 800)


def test_small_box_is_widened_to_min_side_inside_the_image() -> None:
    box, notes = to_original_box([0, 0, 5, 5], (1000, 800), "absolute", min_side=28)
    assert (box.width, box.height) == (28, 28)
    assert box.x1 == 0 and box.y1 == 0
    assert notes and "widened" in notes[0]


@pytest.mark.parametrize(
    ("bbox", "message"),
    [
        ([10, 10, 5, 50], "inverted"),
        ([10, 10, 10, 50], "zero area"),
        ([0, 0, 2000, 100], "outside the image"),
        ([-50, 0, 100, 100], "outside the image"),
        ([1, 2, 3], "4 numbers"),
        ([1, 2, 3, 4, 5], "4 numbers"),
        ([0, 0, float("nan"), 10], "non-finite"),
    ],
)
def test_invalid_boxes_say_what_is_wrong(bbox: list[float], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        to_original_box(bbox, (1000, 800), "absolute", 1.0)


def test_relative_frame_rejects_values_above_1000() -> None:
    with pytest.raises(ToolError, match="0, 0, 1000, 1000"):
        to_original_box([0, 0, 1200, 500], (4000, 3000), "relative1000")


def test_upscale_cap_and_pixel_budget() -> None:
    im = _gradient()
    small = zoom_image(im, PixelBox(0, 0, 50, 40), ZoomSettings(max_upscale=4.0, target_long_side=1024))
    assert small.size == (200, 160)  # capped at 4x, not 1024 px
    big = zoom_image(
        im, PixelBox(0, 0, 1000, 800), ZoomSettings(target_long_side=1024, max_output_pixels=400_000)
    )
    assert big.width * big.height <= 400_000 * 1.01
    same = zoom_image(im, PixelBox(0, 0, 1000, 800), ZoomSettings(target_long_side=800))
    assert same.size == (1000, 800)  # never shrinks below the crop


async def test_zoom_tool_through_registry() -> None:
    reg = build_registry(ToolSettings(cache={"backend": "none"}), names=["image_zoom_in_tool"])
    im = _gradient()
    ctx = ToolContext(image=im, model_scale=0.5, bbox_convention="absolute")
    result = await reg.call("image_zoom_in_tool", {"bbox_2d": [100, 50, 200, 150], "label": "sign"}, ctx)
    assert result.ok, result.error
    assert result.data["original_box"] == [200, 100, 400, 300]
    assert "sign" in result.text
    out = result.images[0]
    assert out.size == (800, 800)  # 200 px crop, 4x cap
    r, g, _ = out.resize((200, 200), Image.Resampling.NEAREST).getpixel((0, 0))
    assert (r, g) == (200, 100)  # the crop starts at the mapped origin

    rel = ToolContext(image=im, bbox_convention="relative1000")
    result = await reg.call("image_zoom_in_tool", {"bbox_2d": [0, 0, 500, 500]}, rel)
    assert result.data["original_box"] == [0, 0, 500, 400]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"bbox_2d": [100, 100, 50, 50]}, "inverted"),
        ({"bbox_2d": ["a", 1, 2, 3]}, "valid number"),
        ({"bbox_2d": [1, 2, 3]}, "4 numbers"),
        ({}, "bbox_2d: Field required"),
        ({"bbox_2d": [0, 0, 10, 10], "zoom": 3}, "Extra inputs"),
    ],
)
async def test_zoom_tool_errors_are_results(args: dict, message: str) -> None:
    reg = build_registry(ToolSettings(cache={"backend": "none"}), names=["image_zoom_in_tool"])
    result = await reg.call("image_zoom_in_tool", args, ToolContext(image=_gradient(200, 200)))
    assert not result.ok
    assert message in result.error


async def test_zoom_without_image_and_lazy_open(tmp_path) -> None:  # type: ignore[no-untyped-def]
    reg = build_registry(ToolSettings(cache={"backend": "none"}), names=["image_zoom_in_tool"])
    missing = await reg.call("image_zoom_in_tool", {"bbox_2d": [0, 0, 50, 50]}, ToolContext())
    assert not missing.ok and "no image" in missing.error
    path = tmp_path / "q.png"
    _gradient(300, 200).save(path)
    lazy = await reg.call(
        "image_zoom_in_tool", {"bbox_2d": [0, 0, 50, 50]}, ToolContext(image_path=str(path))
    )
    assert lazy.ok and lazy.data["original_box"] == [0, 0, 50, 50]
