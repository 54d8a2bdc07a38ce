"""Ground truth of a benchmark as the scoring engine reads it: a dataset folder (or release file)
in any layout `eval` reads becomes the truth rows `geosleuth score --truth` joins predictions to,
so ``--truth`` takes whatever ``eval`` takes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from geosleuth.core.records import Sample
from geosleuth.eval.datasets.loading import DatasetError, load_dataset
from geosleuth.scoring.io import truth_record
from geosleuth.scoring.rows import InputRow, ScoreInputError

TABLE_SUFFIXES = (".csv", ".tsv", ".json", ".jsonl", ".ndjson")
"""Truth files the scoring reader reads itself (row by row, streaming, each row's problems named)."""


def dataset_truth_rows(path: Path) -> list[InputRow] | None:
    """The truth rows of a dataset folder or release file `eval` reads (its bad rows as failed
    rows, which `score` lists); ``None`` for a table the scoring reader reads itself.
    `ScoreInputError` when ``eval`` cannot read it either."""
    if path.is_file() and path.suffix.lower() in TABLE_SUFFIXES:
        return None
    if not path.exists():
        raise ScoreInputError(f"{path}: no such file or folder")
    try:
        dataset = load_dataset(path, check_images=False)
    except DatasetError as exc:
        raise ScoreInputError(f"--truth {path}: {exc}") from None
    bad = [InputRow(p.row + 1, None, f"{path}: {p}") for p in dataset.problems]
    return bad + list(_rows(dataset.samples))


def _rows(samples: list[Sample]) -> Iterator[InputRow]:
    for number, sample in enumerate(samples, start=1):
        yield InputRow(number, truth_record(sample))
