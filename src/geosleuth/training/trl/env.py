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

    from geosleuth.training.trl.env import make_environment_factory
    trainer = GRPOTrainer(..., environment_factory=make_environment_factory(processor=processor))
"""

from __future__ import annotations

import copy
import inspect
import logging
import re
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image

from geosleuth.agent.images import smart_resize
from geosleuth.tools.base import Tool, ToolContext, ToolRegistry, ToolResult
from geosleuth.training.toolcall import DEFAULT_TIMEOUT_S, run_tool, training_tools
from geosleuth.training.verl.tools import shared_registry

log = logging.getLogger(__name__)

ToolOutput = list[dict[str, Any]] | str
INVALID_CALL = "__geosleuth_invalid_call__"  # the argument that carries a broken call's error
UNREADABLE = "unreadable_tool_call"  # the name of a call whose tool cannot be read


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
        from geosleuth.bounds.imageio import open_image

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
    timeout_s: float = DEFAULT_TIMEOUT_S

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
        result = await run_tool(registry, name, arguments, self.ctx, self.timeout_s)
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
        if pname not in tool.args_model.model_fields:  # the context and bound parameters
            continue
        annotations[pname] = hints.get(pname, Any)
        params.append(
            param.replace(annotation=annotations[pname], kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
        )
    signature = inspect.Signature(params, return_annotation=ToolOutput)

    async def method(self: GeoToolEnvironment, *args: Any, **kwargs: Any) -> ToolOutput:
        invalid = kwargs.pop(INVALID_CALL, None)  # set by trl_processor's parser for a broken call
        if invalid is not None:
            self.calls.append((tool.name, False))
            return f"Error: {invalid}"
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
    timeout_s: float = DEFAULT_TIMEOUT_S,
    allow_exif: bool = False,
) -> type[GeoToolEnvironment]:
    """An environment class exposing ``tools`` (default: every registry tool except the
    answer-reading ``exif_gps``) with the registry's schemas; TRL calls the class to make
    each instance.

    ``processor`` (the one given to ``GRPOTrainer``) fixes the frame zoom boxes are read in.
    A call running past ``timeout_s`` returns an error the policy reads; the rollout goes on.
    """
    registry: ToolRegistry = shared_registry(settings_path, registry_factory)
    names = training_tools(registry.names(), tools, allow_exif)
    if bbox_convention not in {"absolute", "relative1000"}:
        raise ValueError("bbox_convention must be absolute or relative1000")
    attrs: dict[str, Any] = {name: tool_method(registry.get(name)) for name in names}  # type: ignore[arg-type]
    attrs.update(
        settings_path=settings_path,
        registry_factory=registry_factory,
        frame=ProcessorFrame.of(processor) if processor is not None else None,
        bbox_convention=bbox_convention,
        timeout_s=float(timeout_s),
    )
    return type("GeoToolEnvironment", (GeoToolEnvironment,), attrs)


def _well_formed(parsed: Any) -> bool:
    calls = parsed.get("tool_calls") if isinstance(parsed, dict) else None
    return calls is None or all(
        isinstance(c, dict) and isinstance(c.get("function"), dict)
        and isinstance(c["function"].get("name"), str) and isinstance(c["function"].get("arguments"), dict)
        for c in calls
    )  # fmt: skip


def _calls_with_errors(text: str) -> list[dict[str, Any]]:
    """Every ``<tool_call>`` block of ``text`` as a TRL tool call; a broken one carries its error
    in the ``INVALID_CALL`` argument, so the environment answers it."""
    from geosleuth.agent.toolcalls import parse_text_calls

    calls = []
    for call in parse_text_calls(text, ()):
        if call.error or call.arguments is None:
            found = _NAME_FIELD.search(call.raw)
            name = call.name or (found.group(1) if found else UNREADABLE)
            arguments: dict[str, Any] = {INVALID_CALL: call.error or "tool call could not be read"}
        else:
            name, arguments = call.name, call.arguments
        calls.append({"type": "function", "function": {"name": name, "arguments": arguments}})
    return calls


_NAME_FIELD = re.compile(r'"name"\s*:\s*"([^"\\]{1,128})"')
_BLOCK = re.compile(r"<tool_call>.*?(?:</tool_call>|$)", re.S)


def trl_processor(processor: Any) -> Any:
    """A copy of ``processor`` adapted to TRL's tool loop.

    - Tokenised chat templates carry image fields as torch tensors. TRL's environment path
      tokenises each prompt with ``apply_chat_template(tokenize=True, return_dict=True)``, which
      gives ``pixel_values`` / ``image_grid_thw`` as NumPy arrays, and concatenates only torch
      tensors: a step whose tool turns have no image then fails in ``split_pixel_values_by_grid``
      (``'list' object has no attribute 'prod'``). Token ids stay lists, as TRL expects.
    - A ``<tool_call>`` whose JSON does not parse reaches the environment as a call that
      returns the error to the policy, instead of TRL reading the whole turn as the final answer
      (its ``parse_response`` fallback). Well-formed responses parse exactly as before.
    """
    import numpy as np
    import torch

    base = type(processor)
    if getattr(base, "_geosleuth_tensor_fields", False):
        return processor

    def apply_chat_template(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = base.apply_chat_template(self, *args, **kwargs)
        if kwargs.get("tokenize") and kwargs.get("return_dict"):
            for key, value in out.items():
                if key not in {"input_ids", "attention_mask"} and isinstance(value, np.ndarray):
                    out[key] = torch.from_numpy(value)
        return out

    clone = copy.copy(processor)
    clone.__class__ = _subclass(base, apply_chat_template=apply_chat_template, _geosleuth_tensor_fields=True)
    tokenizer = getattr(processor, "tokenizer", None)
    if tokenizer is not None and hasattr(tokenizer, "parse_response"):
        clone.tokenizer = _error_reporting_tokenizer(tokenizer)
    return clone


def media_token_ids(processor: Any) -> list[int]:
    """Ids of the processor's image and video placeholder tokens, for ``suppress_tokens``.

    TRL's transformers rollouts suppress only the image token. A policy that samples the video
    placeholder (a random or drifting policy does) ends the run: re-templating its turn, the
    processor counts a video token without a video and raises. A policy never needs to write
    either placeholder, so both are suppressed.
    """
    tokenizer = getattr(processor, "tokenizer", processor)
    ids = []
    for name in ("image_token", "video_token"):
        token = getattr(processor, name, None)
        found = tokenizer.convert_tokens_to_ids(token) if isinstance(token, str) else None
        if isinstance(found, int) and found != tokenizer.unk_token_id:
            ids.append(found)
    return ids


def _subclass(base: type, **attrs: Any) -> type:
    """``base`` with ``attrs``, under the same name and module (saved configs name the original)."""
    return type(base.__name__, (base,), {**attrs, "__module__": base.__module__})


def _error_reporting_tokenizer(tokenizer: Any) -> Any:
    base = type(tokenizer)

    def parse_response(self: Any, ids: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            parsed = base.parse_response(self, ids, *args, **kwargs)
            if _well_formed(parsed):
                return parsed
        except (ValueError, TypeError):
            pass
        text = self.decode(ids, skip_special_tokens=False)
        if "<tool_call>" not in text:
            return base.parse_response(self, ids, *args, **kwargs)  # TRL's own fallback applies
        content = _BLOCK.sub("", text)
        for special in (self.eos_token, self.pad_token):
            if special:
                content = content.replace(special, "")
        return {"role": "assistant", "content": content.strip(), "tool_calls": _calls_with_errors(text)}

    clone = copy.copy(tokenizer)
    clone.__class__ = _subclass(base, parse_response=parse_response)
    return clone


def tool_methods(environment: type[GeoToolEnvironment]) -> list[Any]:
    """The bound tool methods of one environment instance, as TRL offers them to the chat template."""
    env = environment()
    return [getattr(env, name) for name, _ in inspect.getmembers(environment, inspect.isfunction)
            if not name.startswith("_") and name != "reset"]  # fmt: skip


def system_with_tools(
    messages: list[dict[str, Any]], environment: type[GeoToolEnvironment], processor: Any
) -> list[dict[str, Any]]:
    """``messages`` with the system turn's text as GRPO will render it: with the tool block.

    TRL's GRPO passes the environment's tools to the chat template, which writes their schemas
    into the system turn; TRL's vision SFT collator passes no tools. SFT records for that
    policy need the same system text, or the cold start learns a prompt GRPO never shows
    (a tiny model then answers without calling a tool). The text is cut from the template's
    own rendering of the system turn with and without the tools.
    """
    out = copy.deepcopy(messages)
    if not out or out[0].get("role") != "system":
        out.insert(0, {"role": "system", "content": [{"type": "text", "text": ""}]})
    content = out[0]["content"]
    text = content if isinstance(content, str) else "".join(p.get("text") or "" for p in content)
    probe = [{"role": "system", "content": [{"type": "text", "text": text}]}]
    plain = processor.apply_chat_template(probe, tokenize=False)
    rendered = processor.apply_chat_template(probe, tools=tool_methods(environment), tokenize=False)
    at = plain.find(text) if text else plain.find("<|im_end|>")
    head, tail = plain[:at], plain[at + len(text) :]
    if at < 0 or not rendered.startswith(head) or not rendered.endswith(tail):
        raise ValueError("the chat template does not render the system text verbatim; cannot place the tools")
    out[0]["content"] = [{"type": "text", "text": rendered[len(head) : len(rendered) - len(tail)]}]
    return out


def check_context(
    processor: Any,
    environment: type[GeoToolEnvironment],
    prompt: list[dict[str, Any]],
    max_model_len: int,
    max_completion_length: int,
    image: Image.Image | None = None,
) -> int:
    """Tokens of ``prompt`` with the environment's tool schemas; fails when they fill the context.

    TRL drops (silently) every tool result that would push a rollout past the model's context,
    so a prompt whose tool schemas leave no room turns every tool call into nothing. This
    raises ``ValueError`` when the prompt alone reaches ``max_model_len`` and warns when the
    prompt plus ``max_completion_length`` does not fit. Returns the prompt's token count.
    """
    tools = tool_methods(environment)
    messages = copy.deepcopy(prompt)
    for message in messages:
        for part in message["content"] if isinstance(message.get("content"), list) else []:
            if part.get("type") == "image" and part.get("image") is None:
                part["image"] = image if image is not None else Image.new("RGB", (64, 64))
    tokenized = processor.apply_chat_template(
        conversation=[messages],
        tools=tools or None,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
    )
    n = len(tokenized["input_ids"][0])
    names = ", ".join(t.__name__ for t in tools)
    if n >= max_model_len:
        raise ValueError(
            f"the prompt with the schemas of {len(tools)} tools ({names}) is {n} tokens, and the model's "
            f"context is {max_model_len}: TRL would drop every tool result. Offer fewer tools (--tools) "
            "or use a model with a longer context"
        )
    if n + max_completion_length > max_model_len:
        log.warning(
            "the prompt with %d tool schemas is %d tokens; with max_completion_length=%d it passes the "
            "model's context (%d): TRL silently drops a tool result that would cross it. Offer fewer tools "
            "or lower max_completion_length to %d",
            len(tools), n, max_completion_length, max_model_len, max_model_len - n,
        )  # fmt: skip
    return n
