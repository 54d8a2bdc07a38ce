"""geosleuth tools inside TRL's GRPO tool loop (``GRPOTrainer(environment_factory=…)``).

TRL creates one environment per rollout, calls ``reset(**row)`` with the dataset row (so the
image tools get that row's image) and exposes the environment's public methods as tools,
their schemas read by transformers' ``get_json_schema`` from signatures and docstrings. The
methods here are generated from the geosleuth registry itself — its tools, argument types,
defaults and descriptions — so TRL's model sees the same tools as evaluation and verl, and
every call goes through the registry (same validation, providers and cache). Image results
come back as multimodal tool messages, which TRL feeds back to the VLM.

Zoom boxes are read in the frame the model was shown: pass the processor
(``make_environment_factory(processor=…)``) and each row's image is mapped through the Qwen-VL
``smart_resize`` rule of that processor, or give the row a ``model_size`` column.

    from geosleuth.training.trl_env import make_environment_factory
    trainer = GRPOTrainer(..., environment_factory=make_environment_factory(processor=processor))
"""

from __future__ import annotations

import inspect
import logging
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image

from geosleuth.agent.images import smart_resize
from geosleuth.tools.base import Tool, ToolContext, ToolRegistry, ToolResult
from geosleuth.training.verl_tools import shared_registry

log = logging.getLogger(__name__)

ToolOutput = list[dict[str, Any]] | str


@dataclass(frozen=True)
class ProcessorFrame:
    """The resize rule of a Qwen-VL image processor: sides snapped to ``factor`` (patch ×
    merge size), pixels kept within [min_pixels, max_pixels]."""

    factor: int
    min_pixels: int
    max_pixels: int

    def size(self, original: tuple[int, int]) -> tuple[int, int]:
        return smart_resize(original, self.factor, self.min_pixels, self.max_pixels)

    @classmethod
    def of(cls, processor: Any) -> ProcessorFrame | None:
        """Read the rule from a processor (or its ``image_processor``); None when it has none."""
        images = getattr(processor, "image_processor", processor)
        patch, merge = getattr(images, "patch_size", None), getattr(images, "merge_size", None)
        size = getattr(images, "size", None)
        lo = getattr(size, "shortest_edge", None) or getattr(images, "min_pixels", None)
        hi = getattr(size, "longest_edge", None) or getattr(images, "max_pixels", None)
        if not (isinstance(patch, int) and isinstance(merge, int) and lo and hi):
            return None
        return cls(factor=patch * merge, min_pixels=int(lo), max_pixels=int(hi))


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


def _content(result: ToolResult) -> ToolOutput:
    if not result.images:
        return result.text or "(no output)"
    parts: list[dict[str, Any]] = [{"type": "image", "image": img} for img in result.images]
    if result.text:
        parts.append({"type": "text", "text": result.text})
    return parts


class GeoToolEnvironment:
    """Per-rollout state for the tools: the query image and the frame the model sees it in."""

    settings_path: str | None = None
    registry_factory: str | None = None
    frame: ProcessorFrame | None = None
    bbox_convention: str = "absolute"

    def __init__(self) -> None:
        self.ctx = ToolContext()
        self.calls: list[tuple[str, bool]] = []

    def reset(self, **row: Any) -> None:
        image = _image_of(row)
        size = row.get("model_size")  # [width, height] of the frame the model sees, when known
        if size:
            seen: tuple[int, int] | None = (int(size[0]), int(size[1]))
        elif image is not None and self.frame is not None:
            seen = self.frame.size(image.size)
        else:
            seen = None
        self.ctx = ToolContext(
            image=image,
            model_scale=seen[0] / image.size[0] if seen and image else float(row.get("model_scale") or 1.0),
            model_size=seen,
            bbox_convention=row.get("bbox_convention") or self.bbox_convention,
        )
        self.calls = []

    async def _call(self, name: str, arguments: dict[str, Any]) -> ToolOutput:
        registry = shared_registry(self.settings_path, self.registry_factory)
        result = await registry.call(name, arguments, self.ctx)
        self.calls.append((name, result.ok))
        return _content(result)


def _docstring(tool: Tool) -> str:
    """Google-style docstring carrying the registry's description and argument texts (and the
    bounds transformers' schema cannot express, so the model still reads them)."""
    lines = [tool.description, "", "Args:"]
    for name, prop in tool.parameters.get("properties", {}).items():
        text = " ".join(str(prop.get("description") or name).split())
        lines.append(f"    {name}: {text}")
    return "\n".join(lines)


def tool_method(tool: Tool) -> Any:
    """An environment method that TRL turns into ``tool``'s schema and that calls it."""
    hints = typing.get_type_hints(tool.fn)
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for pname, param in inspect.signature(tool.fn).parameters.items():
        if pname == "ctx" or hints.get(pname) is ToolContext:
            continue
        annotations[pname] = hints.get(pname, Any)
        params.append(
            param.replace(annotation=annotations[pname], kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
        )
    signature = inspect.Signature(params, return_annotation=ToolOutput)

    async def method(self: GeoToolEnvironment, *args: Any, **kwargs: Any) -> ToolOutput:
        bound = signature.bind(self, *args, **kwargs)
        arguments = {k: v for k, v in bound.arguments.items() if k != "self"}
        return await self._call(tool.name, arguments)

    method.__name__ = method.__qualname__ = tool.name
    method.__doc__ = _docstring(tool)
    method.__signature__ = signature  # type: ignore[attr-defined]
    method.__annotations__ = {**annotations, "return": ToolOutput}
    return method


def make_environment_factory(
    tools: Sequence[str] | None = None,
    settings_path: str | None = None,
    registry_factory: str | None = None,
    processor: Any = None,
    bbox_convention: str = "absolute",
) -> type[GeoToolEnvironment]:
    """An environment class exposing ``tools`` (default: every tool of the registry) with the
    registry's schemas; TRL calls the class to make each instance.

    ``processor`` (the one given to ``GRPOTrainer``) fixes the frame zoom boxes are read in.
    """
    registry: ToolRegistry = shared_registry(settings_path, registry_factory)
    names = list(tools) if tools is not None else registry.names()
    unknown = [t for t in names if t not in registry]
    if unknown:
        raise ValueError(f"no TRL tool method for {unknown}; available: {sorted(registry.names())}")
    if bbox_convention not in {"absolute", "relative1000"}:
        raise ValueError("bbox_convention must be absolute or relative1000")
    if "exif_gps" in names:
        log.warning(
            "TRL environment offers exif_gps: it reads the photo's own GPS tag, which can leak the answer "
            "in training; name the tools without it (tools=[...], --tools) unless images carry no EXIF"
        )
    attrs: dict[str, Any] = {name: tool_method(registry.get(name)) for name in names}  # type: ignore[arg-type]
    attrs.update(
        settings_path=settings_path,
        registry_factory=registry_factory,
        frame=ProcessorFrame.of(processor) if processor is not None else None,
        bbox_convention=bbox_convention,
    )
    return type("GeoToolEnvironment", (GeoToolEnvironment,), attrs)
