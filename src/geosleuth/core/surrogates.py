"""Lone UTF-16 surrogates out of text that enters from outside: model replies, tool output, files.

JSON may escape a lone surrogate (``"\\ud800"`` is valid JSON) and Python decodes it into a str
that no UTF-8 writer accepts: one such character in a model's answer made every writer (JSONL,
JSON, HTML, SSE, MCP) fail, and with it the whole command. Text is cleaned where it enters, each
lone surrogate replaced by U+FFFD, and the count comes back so the record can say it happened.
A valid pair (``"\\ud83d\\ude00"``) is one astral character once decoded and is left alone.
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"
_LONE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> tuple[str, int]:
    """``text`` with each lone surrogate replaced by U+FFFD, and how many there were."""
    if text.isascii():
        return text, 0
    return _LONE.subn(REPLACEMENT, text)


def clean_json(value: Any) -> tuple[Any, int]:
    """A decoded JSON value with every string (object keys too) cleaned, and the count.

    Objects and arrays are cleaned in place, walked with a stack (JSON nested as deep as the
    parser allows costs no recursion).
    """
    if isinstance(value, str):
        return clean_text(value)
    total = 0
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in list(node):
                total += _clean_slot(node, key, stack)
                if isinstance(key, str):
                    new_key, n = clean_text(key)
                    if n:
                        node[new_key] = node.pop(key)
                        total += n
        elif isinstance(node, list):
            for i in range(len(node)):
                total += _clean_slot(node, i, stack)
    return value, total


def _clean_slot(container: Any, key: Any, stack: list[Any]) -> int:
    """Clean one string member in place (queue a nested container); the count replaced."""
    item = container[key]
    if isinstance(item, str):
        cleaned, n = clean_text(item)
        if n:
            container[key] = cleaned
        return n
    if isinstance(item, dict | list):
        stack.append(item)
    return 0
