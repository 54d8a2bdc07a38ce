"""JSON documents split into their rows in bounded memory, without parsing the whole document.

A prediction file that is one JSON array (or one object wrapping a list of rows) used to be
parsed whole, at about five times its size. Here a scanner finds where each item starts and
ends (tracking only bracket depth and whether it is inside a string), so only one item's bytes
are held at a time and each item is parsed on its own: an item nested too deeply, or not
valid JSON, fails that row alone. Only a broken structure (an unclosed array, a missing comma)
stops the file, as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from geosleuth.scoring.rows import ScoreInputError

CHUNK = 1 << 20
"""Bytes read at a time."""
MAX_ITEM_BYTES = 32 * 1024 * 1024
"""An item longer than this is one failed row: scanned past, never held or parsed."""
GUESSES = 32
"""Guessed ends of an object item tried before it is scanned byte by byte."""

_OUTSIDE = re.compile(rb'["\[\]{}]')  # the bytes that change the state outside a string
_INSIDE = re.compile(rb'["\\]')  # a string ends at an unescaped quote
_SCALAR_END = re.compile(rb"[,\]}\s]")
_SPACE = re.compile(rb"[ \t\r\n]*")
_FOLLOW = re.compile(rb"[ \t\r\n]{0,64}(?:\]|,[ \t\r\n]{0,64}\{)")  # what follows an object item
_FOLLOW_BYTES = 130
_MAY_FOLLOW = frozenset((b"]", b",", b" ", b"\t", b"\r", b"\n"))
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class Item:
    """One item of the array: its bytes (None when too long to hold), number and first line;
    ``value`` is the item already parsed when finding its end parsed it."""

    number: int
    raw: bytes | None
    line: int
    value: Any = None


class _Window:
    """The file's bytes from ``base`` on; what lies before has been read and let go.

    Bytes are let go a chunk at a time (not per item: cutting the buffer copies it), and line
    numbers are counted once, by a cursor that only moves forward.
    """

    def __init__(self, handle: BinaryIO, base: int = 0, line: int = 1) -> None:
        self.handle = handle
        self.buf = b""
        self.base = base
        self.cursor, self.cursor_line = base, line

    def more(self) -> bool:
        chunk = self.handle.read(CHUNK)
        self.buf += chunk
        return bool(chunk)

    def byte(self, pos: int) -> int | None:
        """The byte at absolute ``pos`` (reading on as needed); None at the end of the file."""
        while pos - self.base >= len(self.buf):
            if not self.more():
                return None
        return self.buf[pos - self.base]

    def drop(self, pos: int) -> None:
        """Let go of the bytes before absolute ``pos`` once they are worth a copy of the rest."""
        cut = min(max(pos - self.base, 0), len(self.buf))
        if cut < CHUNK and 2 * cut < len(self.buf):
            return
        self.line(self.base + cut)
        self.buf = self.buf[cut:]
        self.base += cut

    def line(self, pos: int) -> int:
        """The 1-based line of absolute ``pos`` (at or after ``base``)."""
        in_buf, cursor_in_buf = pos - self.base, self.cursor - self.base
        if in_buf >= cursor_in_buf:
            self.cursor_line += self.buf.count(b"\n", cursor_in_buf, in_buf)
            self.cursor = pos
            return self.cursor_line
        return self.cursor_line - self.buf.count(b"\n", in_buf, cursor_in_buf)

    def space(self, pos: int) -> int:
        """The first absolute position at or after ``pos`` that is not white space."""
        in_buf = pos - self.base
        if in_buf < len(self.buf) and self.buf[in_buf] not in b" \t\r\n":
            return pos  # the common case, without a call
        while self.byte(pos) is not None:
            end = _SPACE.match(self.buf, pos - self.base).end()  # type: ignore[union-attr]
            pos = self.base + end
            if end < len(self.buf):
                break
        return pos


class _Scanner:
    """Where JSON values end, for one file."""

    def __init__(self, path: Path, window: _Window) -> None:
        self.path = path
        self.w = window
        self.end = 0  # just past the ``]`` of the last array :meth:`items` went through

    def fail(self, pos: int, what: str) -> ScoreInputError:
        return ScoreInputError(f"{self.path}:{self.w.line(pos)}: not valid JSON ({what})")

    def value_end(self, start: int) -> tuple[int, bool]:
        """(end, too long) of the value at ``start``; a too-long value's bytes are let go."""
        w = self.w
        first = w.byte(start)
        if first is None:
            raise self.fail(start, "expected a value")
        if first not in b'"[{':
            return self._scalar_end(start)
        depth, inside, pos, long = 0, False, start, False
        while True:
            in_buf = pos - w.base
            if in_buf >= len(w.buf):
                if long:
                    w.drop(pos)
                if not w.more():
                    raise self.fail(start, "a value that never ends")
                continue
            if inside:
                m = _INSIDE.search(w.buf, in_buf)
                if m is None:
                    pos = w.base + len(w.buf)
                elif m.group() == b"\\":
                    pos = w.base + m.end() + 1  # the escaped byte, whatever it is
                else:
                    inside, pos = False, w.base + m.end()
                    if depth == 0:
                        return pos, long
            else:
                m = _OUTSIDE.search(w.buf, in_buf)
                if m is None:
                    pos = w.base + len(w.buf)
                    continue
                pos = w.base + m.end()
                token = m.group()
                if token == b'"':
                    inside = True
                elif token in b"[{":
                    depth += 1
                else:
                    depth -= 1
                    if depth == 0:
                        return pos, long
            long = long or pos - start > MAX_ITEM_BYTES

    def guessed_end(self, start: int) -> tuple[int, bytes, Any] | None:
        """(end, bytes, parsed value) of the object item at ``start``, found the fast way.

        Scanning byte by byte in Python costs more than parsing. An item ends at a ``}`` followed
        by ``]`` or by ``,`` and the next item's ``{``; the first such prefix that parses is the
        item (the lexer reads a prefix as it reads the whole, so a ``}`` inside a string never
        closes a valid prefix). None when no guess parses: the item is scanned instead.
        """
        w = self.w
        buf, base, in_buf = w.buf, w.base, start - w.base
        for _ in range(GUESSES):
            close = buf.find(b"}", in_buf)
            while close < 0 or len(buf) - close < _FOLLOW_BYTES:
                if close < 0:  # no ``}`` up to here: search only what comes next
                    in_buf = len(buf)
                    if in_buf - (start - base) > MAX_ITEM_BYTES:
                        return None  # too long to hold: scanned past in bounded memory instead
                if not w.more():
                    if close < 0:
                        return None
                    break
                buf = w.buf
                close = buf.find(b"}", in_buf if close < 0 else close)
            if buf[close + 1 : close + 2] in _MAY_FOLLOW and _FOLLOW.match(buf, close + 1):
                raw = buf[start - base : close + 1]
                try:
                    return base + close + 1, raw, orjson.loads(raw)
                except orjson.JSONDecodeError:
                    pass
            in_buf = close + 1
        return None

    def _scalar_end(self, start: int) -> tuple[int, bool]:
        """(end, too long) of a number or literal: each byte searched once, a too-long one let go."""
        w = self.w
        pos, long = start, False
        while True:
            m = _SCALAR_END.search(w.buf, pos - w.base)
            if m is not None:
                return w.base + m.start(), long
            pos = w.base + len(w.buf)
            long = long or pos - start > MAX_ITEM_BYTES
            if long:
                w.drop(pos)
            if not w.more():
                return pos, long

    def items(self, open_pos: int) -> Iterator[Item]:
        """The items of the array whose ``[`` is at ``open_pos``; ends past its ``]``."""
        w = self.w
        pos = w.space(open_pos + 1)
        if w.byte(pos) == ord("]"):
            self.end = pos + 1
            return
        number = 0
        while True:
            number += 1
            guess = self.guessed_end(pos) if w.byte(pos) == ord("{") else None
            if guess is not None:
                end, raw, value = guess
                yield Item(number, raw, w.line(pos), value)
            else:
                end, long = self.value_end(pos)
                yield Item(number, None if long else w.buf[pos - w.base : end - w.base], w.line(pos))
            w.drop(end)
            pos = w.space(end)
            after = w.byte(pos)
            if after == ord("]"):
                self.end = pos + 1
                return
            if after != ord(","):
                raise self.fail(pos, f"expected ',' or ']' after item {number}")
            pos = w.space(pos + 1)


def _open(path: Path) -> BinaryIO:
    handle = path.open("rb")
    if handle.read(3) != _BOM:
        handle.seek(0)
    return handle


def _opened(path: Path, handle: BinaryIO, opening: str, what: str) -> tuple[_Scanner, int]:
    """A scanner over the file and the position of its first byte, which must be ``opening``."""
    scanner = _Scanner(path, _Window(handle, handle.tell()))
    start = scanner.w.space(scanner.w.base)
    if scanner.w.byte(start) != ord(opening):
        raise scanner.fail(start, f"expected {what}")
    return scanner, start


def array_items(path: Path) -> Iterator[Item]:
    """The items of a file that is one JSON array."""
    with _open(path) as handle:
        scanner, start = _opened(path, handle, "[", "a JSON array")
        w = scanner.w
        yield from scanner.items(start)
        extra = w.space(scanner.end)
        if w.byte(extra) is not None:
            raise scanner.fail(extra, "extra data after the array")


def wrapped_list(path: Path) -> tuple[int, int] | None:
    """(offset, line) of the ``[`` of the one member of a JSON object that is a list starting
    with an object (a file of rows under a key, e.g. ``{"model": …, "results": [{…}, …]}``; an
    item that is no object is then a failed row); None when no member or more than one is such
    a list (the object itself is then one row)."""
    found: list[tuple[int, int]] = []
    with _open(path) as handle:
        scanner, pos = _opened(path, handle, "{", "a JSON object")
        w = scanner.w
        pos = w.space(pos + 1)
        while w.byte(pos) != ord("}"):
            key_end, _ = scanner.value_end(pos)
            colon = w.space(key_end)
            if w.byte(pos) != ord('"') or w.byte(colon) != ord(":"):
                raise scanner.fail(pos, "expected a member name and ':'")
            value = w.space(colon + 1)
            if w.byte(value) == ord("["):
                line, first = w.line(value), None
                for item in scanner.items(value):
                    first = item if first is None else first
                if first is not None and (first.raw is None or first.raw[:1] == b"{"):
                    found.append((value, line))
                end = scanner.end
            else:
                end, _ = scanner.value_end(value)
            w.drop(end)
            pos = w.space(end)
            if w.byte(pos) == ord(","):
                pos = w.space(pos + 1)
            elif w.byte(pos) != ord("}"):
                raise scanner.fail(pos, "expected ',' or '}' after a member")
        extra = w.space(pos + 1)
        if w.byte(extra) is not None:
            raise scanner.fail(extra, "extra data after the object")
    return found[0] if len(found) == 1 else None


def wrapped_items(path: Path, offset: int, line: int) -> Iterator[Item]:
    """The items of the list whose ``[`` is at ``offset`` (found by :func:`wrapped_list`)."""
    with path.open("rb") as handle:
        handle.seek(offset)
        scanner = _Scanner(path, _Window(handle, offset, line))
        yield from scanner.items(offset)
