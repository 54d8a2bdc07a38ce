"""verl tool-call parser ``geosleuth_hermes``: verl's hermes parser, except that a call whose
JSON does not decode reaches the policy as an error instead of vanishing.

verl 0.9.1's ``hermes`` parser logs and drops a ``<tool_call>`` it cannot decode; with no call
left the rollout ends, and the policy never learns what was wrong. Here such a call becomes a
``FunctionCall`` whose arguments are the raw text: verl's own ``_call_tool`` then answers
"Invalid JSON in arguments for '<tool>'" (or "Unknown function" when no tool name can be
read), as a tool message, and the rollout goes on. Select it with
``actor_rollout_ref.rollout.multi_turn.format=geosleuth_hermes``; it registers when the tool
YAML loads ``geosleuth.training.verl.tools``, before verl builds any agent loop.
"""

from __future__ import annotations

import json
import re
from typing import Any

from verl.experimental.agent_loop.tool_parser import FunctionCall, HermesToolParser, ToolParser

NAME = "geosleuth_hermes"
_NAME_FIELD = re.compile(r'"name"\s*:\s*"([^"\\]{1,128})"')
UNREADABLE = "unreadable_tool_call"  # the name given to a call whose tool cannot be read


def _call(body: str) -> FunctionCall:
    """The call in one ``<tool_call>`` body; undecodable JSON keeps its raw text as arguments."""
    try:
        obj = json.loads(body)
        return FunctionCall(name=obj["name"], arguments=json.dumps(obj["arguments"], ensure_ascii=False))
    except (ValueError, TypeError, KeyError) as exc:
        found = _NAME_FIELD.search(body)
        raw = body.strip() or "(empty)"
        if raw.startswith("{") and _decodes(raw):
            raw = f"not a tool call ({type(exc).__name__}: {exc}): {raw}"  # valid JSON, wrong shape
        return FunctionCall(name=found.group(1) if found else UNREADABLE, arguments=raw)


def _decodes(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@ToolParser.register(NAME)
class GeoSleuthHermesToolParser(HermesToolParser):
    """``<tool_call>{"name": …, "arguments": {…}}</tool_call>``, every block kept."""

    async def extract_tool_calls(
        self, responses_ids: list[int], tools: Any = None
    ) -> tuple[str, list[FunctionCall]]:
        text = self.tokenizer.decode(responses_ids)
        if self.tool_call_start_token not in text or self.tool_call_end_token not in text:
            return text, []
        calls = [_call(body) for body in self.tool_call_regex.findall(text)]
        return self.tool_call_regex.sub("", text), calls
