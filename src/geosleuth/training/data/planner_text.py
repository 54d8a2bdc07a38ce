"""The synthesis planner's text protocol, for small local models (``--planner-tool-calling text``).

Native tool calls need a server that renders tool schemas, tool results and the model's own
calls in the prompt. llama-cpp-python's ``chatml-function-calling`` (0.3.x) does not give a
small model that chance: it HTML-escapes every message (``"`` reaches the model as ``&#34;``),
leaves ``tool`` messages out of the prompt, and, when tools are offered, lets a plain reply be
only a function name or nothing, so no final answer can be written. In text mode the planner
instead reads the tools from its system prompt (``prompts/planner.yaml``, with one worked
example in exactly the parsed format), writes a JSON tool call or the JSON answer as plain
text, and gets tool output back in a user turn, inside ``<tool_response>`` tags.

``constrained`` replies also carry a JSON schema (llama.cpp's ``response_format``
``json_object`` + ``schema``) that admits only those two shapes, and only a tool call while
the trajectory still lacks the tool calls the keep filter asks for: the model still chooses
the tool, its arguments and the answer. The last step admits only the answer: the step budget's
final-answer nudge, made binding.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import Any

MAX_STRING_CHARS = 120
"""Longest string a constrained reply may write into one field (a runaway string ends there)."""


@lru_cache(maxsize=1)
def planner_prompt() -> dict[str, Any]:
    """``training/prompts/planner.yaml``: system text, the nudge after tool output, the example."""
    from geosleuth.agent.prompting import prompt_file

    keys = frozenset({"system", "nudge", "example", "answer_format"})
    return prompt_file("geosleuth.training", "planner", keys)


def _tool_line(schema: dict[str, Any]) -> str:
    fn = schema["function"]
    params = ", ".join(fn.get("parameters", {}).get("properties", {}))
    return f"- {fn['name']}({params}): {fn.get('description', '').strip()}"


def opening_messages(
    schemas: list[dict[str, Any]], size: tuple[int, int], description: str, answer: str = "coordinates"
) -> list[dict[str, Any]]:
    """System prompt with the tools, the worked example (when its tool is offered), the description."""
    from geosleuth.agent.prompting import render

    prompt = planner_prompt()
    tools = "\n".join(_tool_line(s) for s in schemas)
    system = render(
        prompt["system"],
        width=size[0],
        height=size[1],
        tools=tools,
        answer_format=prompt["answer_format"][answer],
    )
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    example = prompt["example"]
    if example["tool"] in {s["function"]["name"] for s in schemas}:
        messages += [
            {"role": "user", "content": example["observation"]},
            {"role": "assistant", "content": example["call"]},
            {"role": "user", "content": tool_results([example["result"]])},
            {"role": "assistant", "content": example["answer"][answer]},
        ]
    messages.append({"role": "user", "content": f"Observer's description of the photo:\n{description}"})
    return messages


def tool_results(texts: list[str]) -> str:
    """Tool output as the planner reads it: delimited, then the nudge to conclude."""
    blocks = "\n".join(f"<tool_response>\n{t}\n</tool_response>" for t in texts)
    return f"{blocks}\n{planner_prompt()['nudge']}"


def _bounded(parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool's parameter schema with every string argument capped."""
    out = copy.deepcopy(parameters)
    for prop in out.get("properties", {}).values():
        if prop.get("type") == "string":
            prop["maxLength"] = min(int(prop.get("maxLength", MAX_STRING_CHARS)), MAX_STRING_CHARS)
    return out


ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": MAX_STRING_CHARS},
        "country": {"type": "string", "maxLength": MAX_STRING_CHARS},
        "lat": {"type": "number"},
        "lon": {"type": "number"},
    },
    "required": ["city", "country", "lat", "lon"],
}
"""City and country first: a small model then copies the coordinates that follow that place in the
tool's output."""
PLACE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {k: ANSWER_SCHEMA["properties"][k] for k in ("city", "country")},
    "required": ["city", "country"],
}
"""The answer with ``--geocode-answers``: the place only; the offline gazetteer gives its coordinates."""


def response_format(
    schemas: list[dict[str, Any]], *, may_answer: bool, may_call: bool = True, answer: str = "coordinates"
) -> dict[str, Any]:
    """llama.cpp's ``response_format``: a call of one of ``schemas`` if ``may_call``, the answer if
    ``may_answer`` (the last step admits only the answer, like the agent loop's final-answer nudge)."""
    calls = [
        {
            "type": "object",
            "properties": {
                "name": {"const": s["function"]["name"]},
                "arguments": _bounded(s["function"]["parameters"]),
            },
            "required": ["name", "arguments"],
        }
        for s in schemas
        if may_call
    ]
    answers = [PLACE_SCHEMA if answer == "place" else ANSWER_SCHEMA] if may_answer else []
    return {"type": "json_object", "schema": {"anyOf": [*calls, *answers]}}


def reasoning_before(content: str, raw_call: str | None) -> str:
    """The reply's text before its tool call (the call itself is recorded as a call, not as thought)."""
    text = content
    if raw_call:
        cut = content.find(raw_call)
        text = content[:cut] if cut >= 0 else ""
    text = text.strip()
    for marker in ("<tool_call>", "```json", "```"):
        if text.endswith(marker):
            text = text[: -len(marker)].rstrip()
    try:
        return "" if isinstance(json.loads(text), dict) else text
    except json.JSONDecodeError:
        return text
