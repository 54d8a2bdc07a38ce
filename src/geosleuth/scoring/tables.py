"""CSV / TSV result tables, streamed: one row per record, checked against the header.

A record whose field count differs from the header's is a failed row (its values would land
under the wrong names). Peers append a summary to their per-image results (GeoEstimation: a
blank line, a header such as ``street acc (1km),…`` and one row of figures); such a trailing
block is not a sample: it is left out and said so in a note.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from geosleuth.bounds.textrows import guarded
from geosleuth.scoring.rows import InputRow, ScoreInputError

SUMMARY_MAX_ROWS = 10
"""Rows (its header included) a trailing summary block may have; a longer block is read as rows."""


def _decoded_lines(handle: BinaryIO, bad: set[int]) -> Iterator[str]:
    """Each physical line decoded on its own; the numbers of lines that were not UTF-8 go to ``bad``
    (their bytes survive as lone surrogates, so the CSV reader still sees where fields end)."""
    for number, raw in enumerate(handle, start=1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            bad.add(number)
            yield raw.decode("utf-8", "surrogateescape")


def _numeric(cell: str) -> bool:
    try:
        return math.isfinite(float(cell))
    except ValueError:
        return False


def _header_like(cells: list[str]) -> bool:
    """A row of names only (no cell is a number): the header of an appended block."""
    filled = [c for c in cells if c.strip()]
    return bool(filled) and not any(_numeric(c) for c in filled)


def read_table(
    path: Path, handle: BinaryIO, delimiter: str, notes: list[str] | None = None
) -> Iterator[InputRow]:
    """Rows of a CSV table whose header is its first line; ``notes`` gets what was left out."""
    bad: set[int] = set()
    reader = csv.reader(_decoded_lines(handle, bad), delimiter=delimiter)
    try:
        header = next(reader, [])
        if len(header) < 2:
            raise ScoreInputError(f"{path}: neither JSON Lines nor a CSV file with a header row")
        if bad:
            raise ScoreInputError(f"{path}:1: the header row is not UTF-8 text")
        first = reader.line_num + 1
        blank = False
        held: list[tuple[int, int, list[str]]] = []  # a possible summary block: (first line, line, cells)
        for cells, refused in guarded(reader, lambda: reader.line_num):
            start, first = first, reader.line_num + 1
            if cells is None:  # a field past the csv limit: this record alone fails
                yield InputRow(start, None, f"{path}:{refused}")
                continue
            if not cells:
                blank = True
                continue
            if blank and not held and _header_like(cells):
                held.append((start, reader.line_num, cells))
            elif held:
                held.append((start, reader.line_num, cells))
                if len(held) > SUMMARY_MAX_ROWS:  # not a trailing block after all: its lines are rows
                    yield from (_record(path, header, bad, *item) for item in held)
                    held = []
            else:
                yield _record(path, header, bad, start, reader.line_num, cells)
            blank = False
        if held and notes is not None:
            shown = ", ".join(c.strip() for c in held[0][2][:3] if c.strip())
            notes.append(
                f"{path}:{held[0][1]}: the {len(held)}-line summary block after the rows ({shown}, …) "
                "is not a sample and was left out"
            )
    except csv.Error as exc:
        raise ScoreInputError(f"{path}:{reader.line_num}: malformed CSV ({exc})") from None


def _record(
    path: Path, header: list[str], bad: set[int], start: int, line: int, cells: list[str]
) -> InputRow:
    if bad and any(n in bad for n in range(start, line + 1)):
        return InputRow(line, None, f"{path}:{line}: not UTF-8 text")
    if len(cells) != len(header):
        return InputRow(
            line,
            None,
            f"{path}:{line}: {len(cells)} fields where the header has {len(header)} (the values would shift)",
        )
    return InputRow(line, {k: (None if v == "" else v) for k, v in zip(header, cells, strict=True)})
