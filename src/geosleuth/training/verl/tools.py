"""geosleuth tools inside verl's multi-turn agent loop (``verl.tools.base_tool.BaseTool``).

One class, `GeoSleuthTool`, serves every geosleuth tool (zoom, geocode, POI, web search,
static and satellite maps); the tool-config YAML (see `training.tool_config`) names which
one each entry is through ``config.tool``. Calls go through the same registry, providers
and cache as ``geosleuth locate`` / ``eval``, so a training rollout sees exactly what an
evaluation sees, and repeated calls across rollouts hit the cache.

Per-trajectory state (the query image for zoom, the scale of the image the model saw, POI
ids seen) arrives through ``extra_info.tools_kwargs[<tool>].create_kwargs`` of each parquet
row, which `export-verl` writes. verl ≥ 0.5 calls ``create(create_kwargs={…})`` before
every call and ``release`` after it; older releases called ``create(instance_id, **kwargs)``
once per trajectory: both are accepted. A bad call returns its error as text (the model
reads it), never an exception.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import uuid4

from geosleuth.plugins import load_callable
from geosleuth.tools.base import ToolContext, ToolRegistry, ToolResult
from geosleuth.training.toolcall import DEFAULT_TIMEOUT_S, run_tool

log = logging.getLogger(__name__)

try:  # the real interface when verl is installed
    from verl.tools.base_tool import BaseTool as _VerlBaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

    HAVE_VERL = True
    try:  # registers the `geosleuth_hermes` tool-call parser when verl loads this module
        import geosleuth.training.verl.parser  # noqa: F401
    except ImportError as exc:  # an older verl without the agent loop's parser registry
        logging.getLogger(__name__).debug("geosleuth_hermes parser not registered: %s", exc)
except ImportError:  # importable without verl, for YAML generation and tests of the wiring
    from geosleuth.training.verl.compat import (  # type: ignore[assignment]
        BaseTool as _VerlBaseTool,
    )
    from geosleuth.training.verl.compat import (  # type: ignore[assignment]
        OpenAIFunctionToolSchema,
        ToolResponse,
    )

    HAVE_VERL = False

_REGISTRIES: dict[tuple[str, str], ToolRegistry] = {}
_REGISTRY_LOCK = threading.Lock()


def shared_registry(settings_path: str | None = None, factory: str | None = None) -> ToolRegistry:
    """One registry per (settings file, factory) per process, so every tool shares cache and clients."""
    key = (settings_path or "", factory or "")
    with _REGISTRY_LOCK:
        if key not in _REGISTRIES:
            if factory:
                _REGISTRIES[key] = load_callable(factory, "tool registry factory")(settings_path)
            else:
                from geosleuth.tools import build_registry
                from geosleuth.tools.config import ToolSettings

                _REGISTRIES[key] = build_registry(ToolSettings.load(settings_path))
        return _REGISTRIES[key]


@dataclass
class _Instance:
    ctx: ToolContext


def _size(value: Any) -> tuple[int, int] | None:
    """``[width, height]`` of the frame the model saw, as export-verl writes it."""
    if value is None:
        return None
    width, height = (int(v) for v in value)
    return width, height


def _context(create_kwargs: dict[str, Any], config: dict[str, Any], decode: bool = True) -> ToolContext:
    """The trajectory's ToolContext; the query image is decoded only when ``decode`` (the tool reads it).

    Decoding a camera-sized JPEG blocks for far longer than a hop to a thread: call it off the event loop.
    """
    image_path = create_kwargs.get("image") or create_kwargs.get("image_path")
    ctx = ToolContext(
        image_path=str(image_path) if image_path else None,
        model_scale=float(create_kwargs.get("model_scale", 1.0)),
        model_size=_size(create_kwargs.get("model_size")),
        bbox_convention=create_kwargs.get("bbox_convention", config.get("bbox_convention", "absolute")),
        artifacts_dir=Path(config["artifacts_dir"]) if config.get("artifacts_dir") else None,
    )
    if decode and ctx.image_path:
        from geosleuth.bounds.imageio import ImageInputError, open_image

        try:
            img = open_image(ctx.image_path)  # bounded decode: header checked first
            ctx.image = img if img.mode == "RGB" else img.convert("RGB")
        except ImageInputError as exc:
            log.warning("tool context: cannot open image %s: %s", ctx.image_path, exc)
    return ctx


def _response(result: ToolResult, max_chars: int | None) -> Any:
    text = result.text or ""
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars] + f"\n…(truncated at {max_chars} characters)"
    kwargs: dict[str, Any] = {"text": text or ("(no output)" if not result.images else None)}
    if result.images:
        kwargs["image"] = list(result.images)
    return ToolResponse(**kwargs)


class GeoSleuthTool(_VerlBaseTool):  # type: ignore[misc, valid-type]
    """A verl tool backed by one geosleuth tool.

    ``config`` keys (all optional): ``tool`` (geosleuth tool name; default the schema's
    name), ``settings`` (tool settings file: providers, keys from the environment, cache),
    ``registry_factory`` (``module:function(settings_path) -> ToolRegistry``, to plug your
    own tools), ``bbox_convention``, ``artifacts_dir``, ``max_text_chars`` (truncate here,
    with a notice, instead of relying on verl's blunt cut), ``error_reward`` (step reward of
    a failed call, default 0), ``timeout_s`` (a slower call returns an error the policy
    reads; default 60).
    """

    def __init__(self, config: dict[str, Any], tool_schema: Any = None) -> None:
        config = dict(config or {})
        self._tool_name = str(config.get("tool") or (tool_schema.function.name if tool_schema else ""))
        if not self._tool_name:
            raise ValueError("GeoSleuthTool needs config.tool or a tool_schema naming the tool")
        self._settings_path = config.get("settings")
        self._factory = config.get("registry_factory")
        if tool_schema is None:
            from geosleuth.training.verl.tool_config import verl_schema

            tool_schema = OpenAIFunctionToolSchema.model_validate(verl_schema(self._geo_tool().schema()))
        self._instances: dict[str, _Instance] = {}
        self._needs_image: bool | None = None
        super().__init__(config, tool_schema)

    def _registry(self) -> ToolRegistry:
        return shared_registry(self._settings_path, self._factory)

    def _geo_tool(self) -> Any:
        t = self._registry().get(self._tool_name)
        if t is None:
            raise ValueError(
                f"geosleuth has no tool {self._tool_name!r}; available: {self._registry().names()}"
            )
        return t

    def get_openai_tool_schema(self) -> Any:
        return self.tool_schema

    async def create(
        self, instance_id: str | None = None, create_kwargs: dict[str, Any] | None = None, **kwargs: Any
    ) -> tuple[str, Any]:
        """Open the trajectory's context (image, scale); returns the id and an empty response.

        The query image is decoded only for a tool that takes the context (zoom, OCR, EXIF, a
        user's image tool); web search, geocoding, POI and map tools never pay for it.
        """
        instance_id = instance_id or str(uuid4())
        merged = {**(create_kwargs or {}), **kwargs}
        if self._wants_image():
            ctx = await asyncio.to_thread(_context, merged, self.config)
        else:
            ctx = _context(merged, self.config, decode=False)
        self._instances[instance_id] = _Instance(ctx)
        return instance_id, ToolResponse()

    def _wants_image(self) -> bool:
        if self._needs_image is None:
            try:
                self._needs_image = bool(getattr(self._geo_tool(), "wants_context", True))
            except ValueError:
                self._needs_image = True  # an unknown tool fails at execute, with its message
        return self._needs_image

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[Any, float, dict[str, Any]]:
        """Run the geosleuth tool; text and images go back to the model, errors as text."""
        inst = self._instances.get(instance_id)
        if inst is None:  # execute without create: still answer, without an image
            inst = self._instances.setdefault(instance_id, _Instance(_context({}, self.config)))
        timeout = float(self.config.get("timeout_s") or DEFAULT_TIMEOUT_S)
        result = await run_tool(self._registry(), self._tool_name, parameters, inst.ctx, timeout)
        metrics = {
            "ok": float(result.ok),
            "cache_hit": float(result.cache_hit),
            "latency_s": float(result.latency_s),
            "n_images": float(len(result.images)),
        }
        reward = 0.0 if result.ok else float(self.config.get("error_reward", 0.0))
        max_chars = self.config.get("max_text_chars")
        return _response(result, int(max_chars) if max_chars else None), reward, metrics

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)
