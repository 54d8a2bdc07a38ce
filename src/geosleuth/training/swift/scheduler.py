"""geosleuth's tools in ms-swift's multi-turn GRPO rollouts (ms-swift 4.x ``MultiTurnScheduler``).

ms-swift builds a scheduler as ``multi_turns[name](max_turns=…, tokenizer=…, template=…)`` and
drives it turn by turn (``run_multi_turn`` in colocate mode, ``run`` with the rollout server):
after each completion it awaits ``on_turn_end``, asks ``check_finished`` unless that returned
``done``, then calls ``step`` to build the next request. Here ``on_turn_end`` runs the
completion's ``<tool_call>`` blocks through geosleuth's registry (the same validation,
providers and cache as evaluation, verl and TRL) and ``step`` appends one ``tool`` message
per call; a zoom crop comes back as an ``<image>`` in that message, its pixels appended to
the request's ``images`` (base64 PNG, as ms-swift's ``load_image`` reads them).

A completion that gives the prompt style's answer (an ``<answer>`` block, or a JSON answer with
coordinates as Thinking with Map writes it) ends the trajectory, even if it also calls a tool;
so does a completion without a tool call (the rewards score whatever it says). Bad calls
(malformed JSON, an unknown tool, a bad box, a call past its time limit) become error
messages the policy reads. After ``max_tool_calls`` calls,
further calls are refused with "give your final answer"; a policy that keeps calling after
that refusal ends the trajectory.

Per row: ``images[0]`` is the query photo (a path, as ``export-swift`` writes it, or base64);
``model_size`` / ``bbox_convention`` columns (ms-swift passes them in ``data_dict`` under a
multi-turn scheduler) give the frame zoom boxes are read in; the ``tools`` column (the schemas
the prompt offered, ``request.tools``) limits which tools may run.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from geosleuth.agent.toolcalls import parse_text_calls
from geosleuth.tools.base import ToolContext, ToolRegistry, ToolResult
from geosleuth.training.toolcall import DEFAULT_TIMEOUT_S, run_tool, training_tools
from geosleuth.training.verl.tools import shared_registry

try:
    from swift.rollout import MultiTurnScheduler
except ImportError:  # importable without ms-swift for the engine-neutral part
    MultiTurnScheduler = object  # type: ignore[assignment,misc]

log = logging.getLogger(__name__)

STATE_KEY = "_geosleuth_tools"  # per-trajectory state in the request's data_dict
MAX_IMAGE_CHARS = 64 * 1024 * 1024  # a base64 query image larger than this is refused unread


@dataclass
class Reply:
    """One tool message for the policy: text, and images it refers to as ``<image>``."""

    name: str
    text: str
    images: list[str] = field(default_factory=list)  # base64 PNG
    ok: bool = True


def _b64(img: Image.Image) -> str:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def query_image(source: Any) -> Image.Image | None:
    """The row's photo from a path or a base64 string (``data:`` URI or bare), bounded."""
    from geosleuth.bounds.imageio import ImageInputError, open_image

    if not isinstance(source, str) or not source.strip():
        return None
    text = source.strip()
    try:
        if text.startswith("data:") or not Path(text).is_file():
            if len(text) > MAX_IMAGE_CHARS:
                raise ImageInputError("base64 image too large")
            payload = text.split(",", 1)[1] if text.startswith("data:") else text
            img = open_image(io.BytesIO(base64.b64decode(payload, validate=True)), label="query image")
        else:
            img = open_image(text)
    except (ImageInputError, binascii.Error, ValueError, OSError) as exc:
        log.warning("swift scheduler: cannot open the query image: %s", exc)
        return None
    return img if img.mode == "RGB" else img.convert("RGB")


_TOOL_CALL_BLOCK = re.compile(r"<tool_call>.*?(?:</tool_call>|$)", re.S)


def gives_answer(completion: str) -> bool:
    """The completion's own text (tool calls removed) holds a final answer: an ``<answer>``
    block, or a JSON object with coordinates."""
    own = _TOOL_CALL_BLOCK.sub("", completion)
    if "<answer>" in own:
        return True
    if '"lat"' not in own:
        return False
    from geosleuth.core.parsing import parse_answer

    return bool(parse_answer(own, "robust").has_coords)


def offered_tools(column: Any) -> list[str] | None:
    """Tool names of a row's ``tools`` column (a JSON string or a list of OpenAI schemas)."""
    if column is None or column == "":
        return None
    schemas = json.loads(column) if isinstance(column, str) else column
    names = []
    for schema in schemas or []:
        fn = schema.get("function", schema) if isinstance(schema, dict) else {}
        if isinstance(fn.get("name"), str):
            names.append(fn["name"])
    return names


class ToolTurns:
    """Engine-neutral: the tool calls of one completion, run under a budget and a time limit."""

    def __init__(
        self,
        registry: ToolRegistry,
        tools: Sequence[str],
        max_tool_calls: int = 6,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.registry = registry
        self.tools = list(tools)
        self.max_tool_calls = max_tool_calls
        self.timeout_s = timeout_s

    async def run(
        self, completion: str, ctx: ToolContext, used: int, allowed: Sequence[str] | None = None
    ) -> tuple[list[Reply], int, int]:
        """Replies to every call in ``completion``, the number of calls that ran and the number
        refused because the budget was spent."""
        names = [t for t in self.tools if allowed is None or t in allowed]
        replies: list[Reply] = []
        ran = refused = 0
        for call in parse_text_calls(completion, names):
            if call.error or call.arguments is None:
                replies.append(Reply(call.name or "tool_call", f"Error: {call.error}", ok=False))
                continue
            if call.name not in names:
                text = f"Error: unknown tool {call.name!r}; available tools: {', '.join(names)}"
                replies.append(Reply(call.name, text, ok=False))
                continue
            if used + ran >= self.max_tool_calls:
                budget = self.max_tool_calls
                text = f"Error: the tool-call budget of {budget} calls is spent; give your final answer"
                replies.append(Reply(call.name, text, ok=False))
                refused += 1
                continue
            result: ToolResult = await run_tool(self.registry, call.name, call.arguments, ctx, self.timeout_s)
            ran += 1
            replies.append(Reply(call.name, result.text or "", [_b64(i) for i in result.images], result.ok))
        return replies, ran, refused


class GeoSleuthToolScheduler(MultiTurnScheduler):  # type: ignore[misc,valid-type]
    """ms-swift multi-turn scheduler running geosleuth tools (registered as ``geosleuth_tools``).

    Keyword arguments (ms-swift passes only ``max_turns``, ``tokenizer``, ``template``; a plugin
    file sets the rest with `register_scheduler`): ``tools`` (default: every registry tool but
    ``exif_gps``), ``settings_path``, ``registry_factory``, ``max_tool_calls`` (6),
    ``timeout_s``, ``bbox_convention``, ``allow_exif``.
    """

    defaults: dict[str, Any] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        options = {**self.defaults, **{k: kwargs.pop(k) for k in list(kwargs) if k in _OPTIONS}}
        super().__init__(*args, **kwargs)
        registry = shared_registry(options.get("settings_path"), options.get("registry_factory"))
        names = training_tools(registry.names(), options.get("tools"), bool(options.get("allow_exif")))
        self.turns = ToolTurns(
            registry,
            names,
            int(options.get("max_tool_calls", 6)),
            float(options.get("timeout_s", DEFAULT_TIMEOUT_S)),
        )
        self.bbox_convention = options.get("bbox_convention", "absolute")

    def _context(self, request: Any) -> ToolContext:
        data = request.data_dict or {}
        image = query_image(request.images[0]) if request.images else None
        size = data.get("model_size")
        seen = (int(size[0]), int(size[1])) if size else None
        return ToolContext(
            image=image,
            model_size=seen,
            model_scale=seen[0] / image.size[0] if seen and image else 1.0,
            bbox_convention=data.get("bbox_convention") or self.bbox_convention,
        )

    async def on_turn_end(
        self, infer_request: Any, response_choice: Any, current_turn: int
    ) -> dict[str, Any]:
        """Run the completion's tool calls; a completion without one is the answer (done)."""
        completion = str(infer_request.messages[-1].get("content") or "")
        if infer_request.data_dict is None:
            infer_request.data_dict = {}
        state = infer_request.data_dict.setdefault(STATE_KEY, {"used": 0, "errors": 0, "refused": False})
        allowed = offered_tools(infer_request.tools)
        if not parse_text_calls(completion, self.turns.tools) or gives_answer(completion):
            return {"done": True, "rollout_infos": _infos(state)}
        if state["refused"]:
            return {"done": True, "rollout_infos": _infos(state)}  # told to answer, called again
        replies, ran, refused = await self.turns.run(
            completion, self._context(infer_request), state["used"], allowed
        )
        state["used"] += ran
        state["errors"] += sum(not r.ok for r in replies)
        state["refused"] = bool(refused)
        state["pending"] = [r.__dict__ for r in replies]
        return {"rollout_infos": _infos(state)}

    def step(self, infer_request: Any, response_choice: Any, current_turn: int) -> dict[str, Any]:
        """Append the tool messages (crops as ``<image>``) for the next turn."""
        state = (infer_request.data_dict or {}).get(STATE_KEY, {})
        for reply in state.pop("pending", []):
            tags = "<image>" * len(reply["images"])
            infer_request.messages.append({"role": "tool", "content": tags + reply["text"]})
            infer_request.images.extend(reply["images"])
        return {"infer_request": infer_request, "rollout_infos": _infos(state)}


_OPTIONS = {
    "tools",
    "settings_path",
    "registry_factory",
    "max_tool_calls",
    "timeout_s",
    "bbox_convention",
    "allow_exif",
}


def _infos(state: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": int(state.get("used", 0)), "tool_errors": int(state.get("errors", 0))}


def register_scheduler(name: str = "geosleuth_tools", **options: Any) -> type[GeoSleuthToolScheduler]:
    """Register the scheduler in ms-swift's ``multi_turns`` under ``name``, with fixed options
    (``tools=[…]``, ``settings_path=…``, ``max_tool_calls=…``, …)."""
    from swift.rollout import multi_turns

    unknown = set(options) - _OPTIONS
    if unknown:
        raise ValueError(f"unknown scheduler option(s) {sorted(unknown)}; use {sorted(_OPTIONS)}")
    cls = type("GeoSleuthToolScheduler", (GeoSleuthToolScheduler,), {"defaults": dict(options)})
    multi_turns[name] = cls
    return cls
