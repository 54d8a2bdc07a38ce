"""Raw rows of a dataset table (JSON / JSONL / CSV / TSV) as dicts; a bad row is an error row,
not a failed file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from geosleuth.bounds.textrows import csv_records, text_lines
from geosleuth.scoring import jsonstream
from geosleuth.scoring.jsonstream import array_items
from geosleuth.scoring.rows import ScoreInputError


class DatasetError(Exception):
    """The dataset as a whole cannot be read (missing file, unknown format)."""


def read_rows(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a JSON / JSONL / CSV / TSV file as dicts (a JSON file holds a list of objects)."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        for number, line, problem in text_lines(path):  # a line that is not UTF-8 fails alone
            if line is None:
                yield {"__error__": problem}
                continue
            if not line.strip():
                continue
            yield _parsed(line, f"line {number}")
    elif suffix == ".json":
        yield from _json_rows(path)
    elif suffix in (".csv", ".tsv"):
        try:
            for _, record, problem in csv_records(path, "\t" if suffix == ".tsv" else ","):
                yield record if record is not None else {"__error__": problem}
        except ValueError as exc:
            raise DatasetError(str(exc)) from None
    else:
        raise DatasetError(f"{path}: unsupported file type {suffix!r} (use .jsonl, .json, .csv or .tsv)")


def _parsed(text: str | bytes, where: str) -> dict[str, Any]:
    """One row's JSON, or an error row: a row that is not JSON, nested past the decoder's depth or
    holding an integer past Python's 4,300-digit conversion limit fails alone (issue 41)."""
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        return {"__error__": f"{where} is not JSON: {exc.msg}"}
    except RecursionError:
        return {"__error__": f"{where} is not readable: nested too deeply"}
    except ValueError as exc:  # UnicodeDecodeError, or an integer past the conversion limit
        return {"__error__": f"{where} is not readable: {exc}"}
    return row if isinstance(row, dict) else {"__error__": f"{where} is not an object"}


def _json_rows(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a JSON file: an array is split into its items as it streams (each item parsed
    alone, in bounded memory); an object holds the list under ``data`` / ``samples``, or its
    values are the rows."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
        if head[:1] == b"[":
            for item in array_items(path):
                where = f"item {item.number} (line {item.line})"
                if type(item.value) is dict:
                    yield item.value
                elif item.raw is None:
                    yield {"__error__": f"{where} is longer than {jsonstream.MAX_ITEM_BYTES:,} bytes"}
                else:
                    yield _parsed(item.raw, where)
            return
        data = json.loads(path.read_text(encoding="utf-8"))
    except ScoreInputError as exc:
        raise DatasetError(str(exc)) from None
    except RecursionError:
        raise DatasetError(f"{path}: not readable: JSON nested too deeply") from None
    except ValueError as exc:
        raise DatasetError(f"{path}: not readable: {exc}") from None
    if isinstance(data, dict):
        data = data.get("data") or data.get("samples") or list(data.values())
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON list of objects")
    for row in data:
        yield row if isinstance(row, dict) else {"__error__": "entry is not an object"}
