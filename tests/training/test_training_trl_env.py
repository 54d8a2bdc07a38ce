"""TRL environment: every registry tool, with the registry's schemas as transformers reads them,
and zoom boxes on the frame the processor gives the model."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from PIL import Image

from geosleuth.tools import build_registry
from geosleuth.tools.base import ToolRegistry
from geosleuth.tools.config import CacheSettings, ToolSettings
from geosleuth.training.trl.env import ProcessorFrame, make_environment_factory

transformers_utils = pytest.importorskip("transformers.utils")


def offline_registry(settings_path: str | None = None) -> ToolRegistry:
    return build_registry(ToolSettings(cache=CacheSettings(backend="none")))


FACTORY = "test_training_trl_env:offline_registry"


def _normal(prop: dict[str, Any]) -> tuple[Any, bool]:
    """(JSON type, nullable), with pydantic's ``anyOf [x, null]`` and transformers' ``nullable`` alike."""
    if "anyOf" in prop:
        kinds = [_normal(p)[0] for p in prop["anyOf"] if p.get("type") != "null"]
        return (kinds[0] if len(kinds) == 1 else kinds), any(p.get("type") == "null" for p in prop["anyOf"])
    kind = prop.get("type")
    if kind == "array":
        return ("array", _normal(prop.get("items", {}))[0]), bool(prop.get("nullable"))
    return kind, bool(prop.get("nullable"))


def test_every_registry_tool_is_a_method_with_the_registrys_schema() -> None:
    registry = offline_registry()
    env_cls = make_environment_factory(registry_factory=FACTORY, allow_exif=True)
    env = env_cls()
    methods = {
        name for name, _ in inspect.getmembers(env_cls, predicate=inspect.isfunction)
        if name not in {"reset", "get_reward"} and not name.startswith("_")
    }  # fmt: skip
    assert methods == set(registry.names())  # the way TRL lists an environment's tools
    assert {"poi_keyword_search", "reverse_geocode", "ocr", "exif_gps"} <= methods
    for name in registry.names():
        theirs = transformers_utils.get_json_schema(getattr(env, name))["function"]
        ours = registry.get(name).schema()["function"]
        assert theirs["name"] == ours["name"] and theirs["description"] == ours["description"]
        params, expected = theirs["parameters"], ours["parameters"]
        assert set(params["properties"]) == set(expected["properties"]), name
        assert set(params.get("required", [])) == set(expected.get("required", [])), name
        for arg, prop in expected["properties"].items():
            got = params["properties"][arg]
            assert got["description"] == " ".join(prop["description"].split()), (name, arg)
            if "const" in prop:
                assert got["enum"] == [prop["const"]]
            else:
                assert _normal(got) == _normal(prop), (name, arg, got, prop)


async def test_calls_go_through_the_registry_with_its_validation() -> None:
    env = make_environment_factory(registry_factory=FACTORY)()
    env.reset(image=Image.new("RGB", (400, 300), (5, 6, 7)))
    geo = await env.geocode("Zürich")
    assert isinstance(geo, str) and "Zürich" in geo or "Zurich" in geo
    rev = await env.reverse_geocode(lat=47.37, lon=8.54)
    assert isinstance(rev, str) and "CH" in rev or "Switzerland" in rev
    bad = await env.web_search(query="x", max_results=50)  # the registry's bound, 1 to 10
    assert isinstance(bad, str) and bad.startswith("Error") and "max_results" in bad
    poi = await env.poi_keyword_search("Hauptbahnhof", city="Zürich")
    assert isinstance(poi, str)
    assert [c[0] for c in env.calls] == ["geocode", "reverse_geocode", "web_search", "poi_keyword_search"]
    assert [c[1] for c in env.calls] == [True, True, False, True]


def _qwen_processor(min_pixels: int, max_pixels: int, patch: int, merge: int) -> Any:
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    return Qwen2VLImageProcessorPil(
        min_pixels=min_pixels, max_pixels=max_pixels, patch_size=patch, merge_size=merge
    )


@pytest.mark.parametrize("size", [(64, 48), (640, 480), (1000, 333), (3000, 2000), (17, 900)])
@pytest.mark.parametrize("rule", [(32 * 32, 64 * 64, 16, 2), (56 * 56, 1280 * 28 * 28, 14, 2)])
def test_frame_is_the_one_the_processor_produces(size: tuple[int, int], rule: tuple[int, ...]) -> None:
    processor = _qwen_processor(*rule)
    frame = ProcessorFrame.of(processor)
    assert frame is not None and frame.factor == rule[2] * rule[3]
    grid = processor(images=[Image.new("RGB", size)], return_tensors="pt")["image_grid_thw"][0].tolist()
    assert frame.size(size) == (grid[2] * rule[2], grid[1] * rule[2])  # grid is (t, h, w) in patches


async def test_zoom_boxes_are_read_on_the_processors_frame() -> None:
    """A 640x480 photo reaches a Qwen processor (16 px patches, merge 2, <= 64x64 px) as 64x32:
    the box [0, 0, 32, 16] is the top-left quarter of that frame, i.e. 320x240 original pixels."""
    processor = _qwen_processor(32 * 32, 64 * 64, 16, 2)
    env = make_environment_factory(["image_zoom_in_tool"], registry_factory=FACTORY, processor=processor)()
    photo = Image.new("RGB", (640, 480), (0, 0, 255))
    photo.paste((255, 0, 0), (0, 0, 320, 240))  # the top-left quarter is red
    env.reset(image=photo)
    assert env.ctx.model_size == (64, 32)
    out = await env.image_zoom_in_tool([0, 0, 32, 16])
    assert isinstance(out, list) and out[0]["type"] == "image", out
    zoomed = out[0]["image"]
    assert zoomed.width * 3 == zoomed.height * 4  # 320x240, not the 2:1 box [0, 0, 32, 16] of the original
    assert zoomed.getcolors() == [(zoomed.width * zoomed.height, (255, 0, 0))]
    explicit = make_environment_factory(["image_zoom_in_tool"], registry_factory=FACTORY)()
    explicit.reset(image=Image.new("RGB", (640, 480)), model_size=[320, 240])  # a row's own frame wins
    assert explicit.ctx.model_size == (320, 240)
    plain = make_environment_factory(["image_zoom_in_tool"], registry_factory=FACTORY)()
    plain.reset(image=Image.new("RGB", (640, 480)))
    assert plain.ctx.model_size is None and plain.ctx.model_scale == 1.0


def test_unknown_tools_and_conventions_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown tool"):
        make_environment_factory(["teleport"], registry_factory=FACTORY)
    with pytest.raises(ValueError, match="bbox_convention"):
        make_environment_factory(registry_factory=FACTORY, bbox_convention="pixels")


def _methods(env_cls: type) -> set[str]:
    return {n for n, _ in inspect.getmembers(env_cls, inspect.isfunction) if n != "reset" and n[0] != "_"}


def test_exif_gps_is_offered_only_on_opt_in(caplog: pytest.LogCaptureFixture) -> None:
    default = _methods(make_environment_factory(registry_factory=FACTORY))
    assert "exif_gps" not in default and "image_zoom_in_tool" in default
    with pytest.raises(ValueError, match="can read the answer"):
        make_environment_factory(["image_zoom_in_tool", "exif_gps"], registry_factory=FACTORY)
    with caplog.at_level("WARNING", logger="geosleuth.training.toolcall"):
        opted = make_environment_factory(["exif_gps"], registry_factory=FACTORY, allow_exif=True)
    assert _methods(opted) == {"exif_gps"}
    assert any("exif_gps" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level("WARNING", logger="geosleuth.training.toolcall"):
        make_environment_factory(["image_zoom_in_tool", "web_search"], registry_factory=FACTORY)
    assert not caplog.records
