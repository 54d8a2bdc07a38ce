"""Rows of JSONL and CSV files decoded one at a time, so a row that is not UTF-8 fails alone.

Decoding a whole file as UTF-8 turns one stray byte (a Latin-1 "é", a truncated write) into a
failure of every row; here each physical line is decoded on its own and a bad one is reported
with its number while the rows around it are read as usual.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

_BOM = b"\xef\xbb\xbf"
CSV_FIELD_CHARS = 32 * 2**20
"""Longest CSV field read (a long model reply); the csv module's default, 131,072, failed whole
files. A longer field is an error on its record alone (`guarded`)."""
csv.field_size_limit(max(csv.field_size_limit(), CSV_FIELD_CHARS))

R = TypeVar("R")


def guarded(reader: Iterator[R], line_num: Callable[[], int]) -> Iterator[tuple[R | None, str | None]]:
    """``(record, None)`` per CSV record, or ``(None, why)`` for a record the csv module refuses
    (a field past `CSV_FIELD_CHARS`, a NUL byte): the reader goes on at the next line."""
    while True:
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield None, f"line {line_num()}: {exc}"
            continue
        yield record, None


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def spreadsheet_safe(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: a string that starts like a formula (``=``, ``+``,
    ``-``, ``@``, tab, CR, or their full-width forms) gets a leading ``'`` (OWASP's CSV
    injection advice) unless it is a plain number; other values pass unchanged."""
    if not isinstance(value, str) or not value.startswith(_FORMULA_START):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value


def text_lines(path: Path) -> Iterator[tuple[int, str | None, str | None]]:
    """``(line number, text, None)`` per line, or ``(number, None, why)`` for a line that is not
    UTF-8 (a leading byte-order mark is skipped)."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            try:
                yield number, raw.decode("utf-8"), None
            except UnicodeDecodeError as exc:
                yield number, None, f"line {number} is not UTF-8 text ({exc.reason} at byte {exc.start})"


def csv_records(path: Path, delimiter: str = ",") -> Iterator[tuple[int, dict[str, str] | None, str | None]]:
    """``(line number, record, None)`` per CSV record, or ``(number, None, why)`` when a line of
    the record is not UTF-8 (its bytes are kept as lone surrogates while the record is split) or
    the record has more or fewer fields than the header (its values would land under the wrong names)."""
    bad: set[int] = set()

    def lines() -> Iterator[str]:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if number == 1 and raw.startswith(_BOM):
                    raw = raw[len(_BOM) :]
                try:
                    yield raw.decode("utf-8")
                except UnicodeDecodeError:
                    bad.add(number)
                    yield raw.decode("utf-8", "surrogateescape")

    reader = csv.DictReader(lines(), delimiter=delimiter)
    if reader.fieldnames is not None and bad:
        raise ValueError(f"{path}: the header row is not UTF-8 text")
    first = reader.line_num + 1
    for record, refused in guarded(reader, lambda: reader.line_num):
        if record is None:
            yield reader.line_num, None, refused
        elif bad and any(n in bad for n in range(first, reader.line_num + 1)):
            yield reader.line_num, None, f"line {reader.line_num} is not UTF-8 text"
        elif None in record or None in record.values():
            fields, width = _field_count(record), len(reader.fieldnames or ())
            yield (
                reader.line_num,
                None,
                f"line {reader.line_num} has {fields} fields where the header has {width}",
            )
        else:
            yield reader.line_num, record, None
        first = reader.line_num + 1


def _field_count(record: dict[str | None, Any]) -> int:
    """Fields the line had: the reader fills missing ones with None and files extra ones under None."""
    extra = record.get(None)
    named = sum(1 for k, v in record.items() if k is not None and v is not None)
    return named + (len(extra) if isinstance(extra, list) else 0)
