"""Trajectories -> chat SFT records (cold start before GRPO).

A trajectory's OpenAI-format messages (images by path beside the JSONL) become one record in
the layout a trainer reads:

- ``trl``: TRL ``SFTTrainer`` conversational VLM records, ``{"messages", "images"[, "tools"]}``
  with typed content parts; train with ``assistant_only_loss=True`` so only assistant turns
  carry loss.
- ``llamafactory``: ShareGPT records (``conversations`` with human / gpt / function_call /
  observation turns, ``system``, ``tools``, ``images``); LLaMA-Factory puts loss on the
  gpt and function_call turns only.
- ``swift``: ms-swift messages with an explicit ``"loss"`` flag on every assistant turn
  (true) and user-side turn (false), ``images`` and ``tools``.

Tool calls are written in the chosen model family's format: ``hermes`` (Qwen and most open
VLMs: ``<tool_call>{…}</tool_call>`` inside the assistant text, tool output as a user turn
``<tool_response>…</tool_response>``, exactly as their chat templates render them) or
``openai`` (native ``tool_calls`` and ``tool`` messages, rendered by the trainer's template).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from geosleuth.core.records import Trajectory, TrajectoryStatus
from geosleuth.training.toolcall import ANSWER_READING

SftFormat = Literal["trl", "llamafactory", "swift"]
ToolFormat = Literal["hermes", "openai"]
IMAGE_TOKEN = "<image>"

RunFilter = Callable[[Trajectory, Trajectory], str | None]
"""``(record, run)`` -> why the run is left out, or None to keep it; ``run`` is the record
itself or one of its N samples, judged on its own answer (an aggregate can be right while
some samples are far off)."""


@dataclass
class Turn:
    """A message reduced to what every output format needs."""

    role: str  # system | user | assistant | tool
    text: str = ""
    images: list[str] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"name", "arguments": dict}


def _image_ref(url: str, base_dir: Path | None) -> str:
    if url.startswith(("data:", "http://", "https://")):
        return url
    p = Path(url.removeprefix("file://"))
    if not p.is_absolute() and base_dir is not None:
        p = (base_dir / p).absolute()  # trainers resolve relative paths against their own folders
    return str(p)


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def read_turns(messages: list[dict[str, Any]], base_dir: Path | None) -> list[Turn]:
    """OpenAI messages -> turns; image parts keep their position as ``<image>`` in the text."""
    turns: list[Turn] = []
    for msg in messages:
        turn = Turn(role=str(msg.get("role", "user")))
        content = msg.get("content")
        if isinstance(content, str):
            turn.text = content
        elif isinstance(content, list):
            pieces: list[str] = []
            for part in content:
                if part.get("type") == "image_url":
                    url = (
                        part["image_url"]["url"]
                        if isinstance(part.get("image_url"), dict)
                        else part["image_url"]
                    )
                    turn.images.append(_image_ref(str(url), base_dir))
                    pieces.append(IMAGE_TOKEN)
                elif part.get("type") == "image" and part.get("image"):
                    turn.images.append(_image_ref(str(part["image"]), base_dir))
                    pieces.append(IMAGE_TOKEN)
                elif part.get("type") == "text":
                    pieces.append(str(part.get("text", "")))
            turn.text = "\n".join(p for p in pieces if p)
        for call in msg.get("tool_calls") or []:
            fn = call.get("function") or {}
            turn.tool_calls.append({"name": fn.get("name", ""), "arguments": _arguments(fn.get("arguments"))})
        turns.append(turn)
    return turns


def _hermes_call(call: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps(call, ensure_ascii=False) + "\n</tool_call>"


def to_hermes(turns: list[Turn]) -> list[Turn]:
    """Tool calls into the assistant text; tool output (and following images) into one user turn."""
    out: list[Turn] = []
    for t in turns:
        if t.role == "assistant" and t.tool_calls:
            text = "\n".join(p for p in [t.text.strip(), *map(_hermes_call, t.tool_calls)] if p)
            out.append(Turn("assistant", text, list(t.images)))
        elif t.role == "tool":
            block = f"<tool_response>\n{t.text}\n</tool_response>"
            if out and out[-1].role == "user" and out[-1].text.endswith("</tool_response>"):
                out[-1].text += "\n" + block
                out[-1].images += t.images
            else:
                out.append(Turn("user", block, list(t.images)))
        elif t.role == "user" and out and out[-1].role == "user":
            out[-1].text += "\n" + t.text
            out[-1].images += t.images
        else:
            out.append(Turn(t.role, t.text, list(t.images)))
    return out


def _merge_user_side(turns: list[Turn]) -> list[Turn]:
    """Consecutive user-side turns (a tool result then its image) become one."""
    out: list[Turn] = []
    for t in turns:
        if out and t.role == "user" and out[-1].role in ("user", "tool"):
            out[-1].text += "\n" + t.text
            out[-1].images += t.images
        else:
            out.append(Turn(t.role, t.text, list(t.images), list(t.tool_calls)))
    return out


def _trl_content(t: Turn, images: list[str]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for i, chunk in enumerate(t.text.split(IMAGE_TOKEN)):
        if i > 0:
            parts.append({"type": "image"})
        if chunk.strip():
            parts.append({"type": "text", "text": chunk.strip()})
    images.extend(t.images)
    return parts


def to_trl(turns: list[Turn], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    images: list[str] = []
    messages: list[dict[str, Any]] = []
    for t in turns:
        msg: dict[str, Any] = {"role": t.role, "content": _trl_content(t, images)}
        if t.tool_calls:
            msg["tool_calls"] = [{"type": "function", "function": c} for c in t.tool_calls]
        messages.append(msg)
    record: dict[str, Any] = {"messages": messages, "images": images}
    if tools:
        record["tools"] = tools
    return record


def to_llamafactory(turns: list[Turn], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    system = "\n".join(t.text for t in turns if t.role == "system")
    convs: list[dict[str, str]] = []
    images: list[str] = []
    for t in _merge_user_side([t for t in turns if t.role != "system"]):
        images += t.images
        if t.role == "assistant" and t.tool_calls:
            calls = t.tool_calls[0] if len(t.tool_calls) == 1 else t.tool_calls
            convs.append({"from": "function_call", "value": json.dumps(calls, ensure_ascii=False)})
        elif t.role == "assistant":
            convs.append({"from": "gpt", "value": t.text})
        else:
            convs.append({"from": "observation" if t.role == "tool" else "human", "value": t.text})
    record: dict[str, Any] = {"conversations": convs, "images": images}
    if system:
        record["system"] = system
    if tools:
        record["tools"] = json.dumps([s.get("function", s) for s in tools], ensure_ascii=False)
    return record


def to_swift(turns: list[Turn], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    images: list[str] = []
    for t in _merge_user_side(turns):
        images += t.images
        if t.role == "assistant" and t.tool_calls:
            if t.text.strip():
                messages.append({"role": "assistant", "content": t.text, "loss": True})
            for c in t.tool_calls:
                messages.append(
                    {"role": "tool_call", "content": json.dumps(c, ensure_ascii=False), "loss": True}
                )
        elif t.role == "tool":
            messages.append({"role": "tool_response", "content": t.text, "loss": False})
        else:
            entry: dict[str, Any] = {"role": t.role, "content": t.text}
            if t.role != "system":
                entry["loss"] = t.role == "assistant"
            messages.append(entry)
    record: dict[str, Any] = {"messages": messages, "images": images}
    if tools:
        record["tools"] = json.dumps(tools, ensure_ascii=False)
    return record


def _answer_reading(tools: list[dict[str, Any]] | None, turns: list[Turn]) -> list[str]:
    """Answer-reading tools the trajectory offers or calls."""
    offered = {str(s.get("function", s).get("name")) for s in tools or []}
    called = {str(c.get("function", c).get("name")) for t in turns for c in t.tool_calls or []}
    return sorted(ANSWER_READING.intersection(offered | called))


def sft_record(
    trajectory: Trajectory,
    fmt: SftFormat,
    tool_format: ToolFormat,
    base_dir: Path | None,
    allow_exif: bool = False,
) -> dict[str, Any]:
    """One SFT record; raises ValueError when the trajectory has no assistant turn to learn from,
    or offers a tool that reads the answer (``exif_gps``) and ``allow_exif`` is off."""
    turns = read_turns(trajectory.messages, base_dir)
    if not any(t.role == "assistant" and (t.text.strip() or t.tool_calls) for t in turns):
        raise ValueError("no assistant turn")
    tools = trajectory.metadata.get("tool_schemas") or None
    leaking = _answer_reading(tools, turns)
    if leaking and not allow_exif:
        raise ValueError(
            f"offers {', '.join(leaking)}, which reads the answer (the photo's GPS tag); "
            "--allow-exif keeps it"
        )
    if tool_format == "hermes":
        turns = to_hermes(turns)
        tools_out = tools if fmt != "trl" else None  # in hermes text the tools live in the system prompt
    else:
        tools_out = tools
    if fmt == "trl":
        record = to_trl(turns, tools_out)
    elif fmt == "llamafactory":
        record = to_llamafactory(turns, tools_out)
    else:
        record = to_swift(turns, tools_out)
    record["id"] = trajectory.sample_id
    return record


@dataclass
class SftReport:
    written: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)


def export_sft(
    trajectories: Iterable[Trajectory],
    out_path: Path,
    fmt: SftFormat = "trl",
    tool_format: ToolFormat = "hermes",
    base_dir: Path | None = None,
    only_ok: bool = True,
    run_filter: RunFilter | None = None,
    allow_exif: bool = False,
) -> SftReport:
    """Write JSONL records; failed, empty or filtered-out runs are skipped with a reason."""
    report = SftReport()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with out_path.open("w", encoding="utf-8") as fh:
        for traj in trajectories:
            runs = traj.samples or [traj]
            for k, run in enumerate(runs):
                sid = traj.sample_id if len(runs) == 1 else f"{traj.sample_id}#{k}"
                if only_ok and run.status != TrajectoryStatus.OK:
                    report.skipped.append({"sample_id": sid, "reason": f"status {run.status.value}"})
                    continue
                reason = run_filter(traj, run) if run_filter is not None else None
                if reason is not None:
                    report.skipped.append({"sample_id": sid, "reason": reason})
                    continue
                try:
                    record = sft_record(run, fmt, tool_format, base_dir, allow_exif)
                except (ValueError, KeyError, TypeError) as exc:
                    report.skipped.append({"sample_id": sid, "reason": str(exc)})
                    continue
                record["id"] = sid
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
                report.written += 1
    return report
