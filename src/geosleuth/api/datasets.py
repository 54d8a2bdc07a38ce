"""``geosleuth.load_dataset``: any layout `geosleuth datasets validate` reads, as samples."""

from __future__ import annotations

import logging
from pathlib import Path

from geosleuth.core.records import Sample
from geosleuth.eval.datasets.loading import load_dataset as load_benchmark
from geosleuth.eval.run.pipeline import bad_rows_error

log = logging.getLogger(__name__)


def load_dataset(
    path: str | Path,
    format: str | None = None,
    *,
    images: str | Path | None = None,
    split: str | None = None,
    seed: int = 0,
    skip_invalid: bool = False,
) -> list[Sample]:
    """The samples of a benchmark file or folder; ``format=None`` detects the layout.

    A bad row raises `geosleuth.eval.datasets.loading.DatasetError` naming each one, as `geosleuth eval`
    does, unless ``skip_invalid`` keeps the valid rows (the rest are logged). A sample whose
    image is missing is kept and logged: a run records it as failed.
    """
    dataset = load_benchmark(path, format or "auto", images, seed=seed, split=split)
    if dataset.problems and not skip_invalid:
        raise bad_rows_error(dataset, path, "pass skip_invalid=True to load the valid rows only")
    for problem in dataset.problems:
        log.warning("%s: skipped %s", path, problem)
    for missing in dataset.missing_images:
        log.warning("%s: %s", path, missing)
    return list(dataset.samples)
