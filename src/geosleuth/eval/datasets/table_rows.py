"""Raw rows of a dataset table (JSON / JSONL / CSV / TSV) as dicts; a bad row is an error row,
not a failed file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from geosleuth.bounds.textrows import csv_records, text_lines


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
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                yield {"__error__": f"line {number} is not JSON: {exc.msg}"}
                continue
            yield row if isinstance(row, dict) else {"__error__": f"line {number} is not an object"}
    elif suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            data = data.get("data") or data.get("samples") or list(data.values())
        if not isinstance(data, list):
            raise DatasetError(f"{path}: expected a JSON list of objects")
        for row in data:
            yield row if isinstance(row, dict) else {"__error__": "entry is not an object"}
    elif suffix in (".csv", ".tsv"):
        try:
            for _, record, problem in csv_records(path, "\t" if suffix == ".tsv" else ","):
                yield record if record is not None else {"__error__": problem}
        except ValueError as exc:
            raise DatasetError(str(exc)) from None
    else:
        raise DatasetError(f"{path}: unsupported file type {suffix!r} (use .jsonl, .json, .csv or .tsv)")
