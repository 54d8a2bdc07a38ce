"""Whitespace, tool-output blocks, ``<answer>`` / ``<think>`` blocks and the bounded window."""

from __future__ import annotations

import re
from collections.abc import Iterator

MAX_PARSE_CHARS = 262_144
"""Longest text parsed (characters); longer input keeps its tail. 256 Ki characters is about
64k tokens: a whole multi-turn rollout with its tool results fits."""

_LINE_BREAKS = re.compile(r"\r\n?|[\u2028\u2029\x85\x0b\x0c\x1c-\x1e]")
_BREAK_CHARS = "\r\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e"  # what _LINE_BREAKS matches, for a C-speed test
# runs of blanks or one odd blank; a lone space is left alone (no work per word), and each branch
# starts with a single character class so the scan rejects ordinary characters fast
_BLANKS = re.compile(r" [^\S\n]+|[^\S \n][^\S\n]*")
# blanks other than the space that survive line-break folding; absent from most answers, so a few
# C-speed membership tests let squeeze use literal-prefixed patterns instead of scanning every
# character against a Unicode class (bench/parse_bench.py measures both)
_ODD_BLANKS = (
    "\t\x1f\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
)
_SPACE_RUNS = re.compile(r"  +")
_UNSQUEEZED = re.compile(r"[^\S ]|  ")  # any blank but a lone space: squeeze may have work to do
_NEWLINE_RUNS = re.compile(r"\n[ \n]+")

_TOOL_OPEN = re.compile(r"<(tool_response|tool_result|tool_call|observation)>|<<<TOOL OUTPUT\b", re.I)
_FENCE_CLOSE = "<<<END TOOL OUTPUT>>>"  # the fence of geosleuth.tools.text (core imports no adapter)
_TOOL_CLOSE: dict[str, re.Pattern[str]] = {
    tag: re.compile(rf"</{tag}>|<<<TOOL OUTPUT\b", re.I)
    for tag in ("tool_response", "tool_result", "tool_call", "observation")
}
_ANY_TOOL_CLOSE = re.compile(
    r"</(?:tool_response|tool_result|tool_call|observation)>|<<<END TOOL OUTPUT>>>|"
    r"<(?:tool_response|tool_result|tool_call|observation)>|<<<TOOL OUTPUT\b",
    re.I,
)
_ANSWER_OPEN = re.compile(r"<answer>", re.I)
_ANSWER_CLOSE = re.compile(r"</answer>", re.I)
_THINK_OPEN = re.compile(r"<think>", re.I)
_THINK_CLOSE = re.compile(r"</think>", re.I)


def _bounded(raw: str) -> tuple[str, list[str]]:
    """The text to parse: all of it, or its tail past a tool result it may start inside."""
    if len(raw) <= MAX_PARSE_CHARS:
        return raw, []
    tail, pos = raw[-MAX_PARSE_CHARS:], 0
    while (first := _ANY_TOOL_CLOSE.search(tail, pos)) is not None and _is_close(first.group(0)):
        pos = first.end()  # we start inside a tool result (or a fence in one): skip past its end
    tail = tail[pos:]
    return tail, [f"input_truncated:kept_last_{len(tail)}_of_{len(raw)}_chars"]


def _is_close(delimiter: str) -> bool:
    return delimiter.startswith(("</", _FENCE_CLOSE))


def squeeze(text: str) -> str:
    """Blank runs -> one space, line breaks of any kind -> one ``\\n`` (linear; no blank lines)."""
    if _UNSQUEEZED.search(text) is None:
        return text  # the common field value: one pattern search, nothing to rewrite
    if any(c in text for c in _BREAK_CHARS):
        text = _LINE_BREAKS.sub("\n", text)
    if not text.isascii() and any(c in text for c in _ODD_BLANKS) or "\t" in text or "\x1f" in text:
        text = _BLANKS.sub(" ", text)
    elif "  " in text:
        text = _SPACE_RUNS.sub(" ", text)
    if " \n" in text:
        text = text.replace(" \n", "\n")  # blanks are single now, so every space before a break goes
    if "\n " in text or "\n\n" in text:
        text = _NEWLINE_RUNS.sub("\n", text)
    return text


def without_tool_output(text: str) -> str:
    """The model's own text, every tool block removed: the one stripper the parser and rewards share."""
    return _without_tool_output(text)[0]


def final_own_turn(text: str) -> str:
    """The text after the last tool block (the model's final turn); empty when a tool block runs
    to the end (a rollout cut off inside a tool result has no final turn)."""
    pos = 0
    while (m := _TOOL_OPEN.search(text, pos)) is not None:
        pos = _tool_end(text, m.end(), (m.group(1) or "").lower())
    return text[pos:]


def _without_tool_output(text: str) -> tuple[str, bool]:
    """The model's own text and whether anything was removed (see the module docstring)."""
    if "<" not in text:
        return text, False  # no tag and no fence: nothing to remove, no scan
    out: list[str] = []
    pos, removed = 0, False
    while True:
        m = _TOOL_OPEN.search(text, pos)
        if m is None:
            out.append(text[pos:])
            return "".join(out), removed
        out.append(text[pos : m.start()])
        out.append(" ")
        removed = True
        pos = _tool_end(text, m.end(), (m.group(1) or "").lower())


def _tool_end(text: str, pos: int, tag: str) -> int:
    """Index just past the block opened before ``pos`` (``tag`` empty: a fence); end of text if open."""
    if not tag:
        end = text.find(_FENCE_CLOSE, pos)
        return len(text) if end < 0 else end + len(_FENCE_CLOSE)
    closer = _TOOL_CLOSE[tag]
    while True:
        m = closer.search(text, pos)
        if m is None:
            return len(text)
        if m.group(0).startswith("</"):
            return m.end()
        pos = _tool_end(text, m.end(), "")  # a fence inside the block: its end first
        if pos >= len(text):
            return pos


def _blocks(text: str, opener: re.Pattern[str], closer: re.Pattern[str]) -> Iterator[tuple[int, int, int]]:
    """``(start, content_start, content_end)`` of each block; an unclosed one runs to the end."""
    pos = 0
    while True:
        m = opener.search(text, pos)
        if m is None:
            return
        c = closer.search(text, m.end())
        end = len(text) if c is None else c.start()
        yield m.start(), m.end(), end
        if c is None:
            return
        pos = c.end()


def _answer_blocks(text: str) -> list[str]:
    return [text[a:b] for _, a, b in _blocks(text, _ANSWER_OPEN, _ANSWER_CLOSE)]


def _outside_think(text: str) -> str:
    out: list[str] = []
    pos = 0
    for start, _, end in _blocks(text, _THINK_OPEN, _THINK_CLOSE):
        out.append(text[pos:start])
        out.append(" ")
        c = _THINK_CLOSE.match(text, end)
        pos = c.end() if c else len(text)
    out.append(text[pos:])
    return "".join(out)
