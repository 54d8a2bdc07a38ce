"""Rows of Hugging Face datasets (``save_to_disk`` folders or parquet files), imported lazily.

Embedded images (bytes or PIL) are written once to an image folder so that samples, like all
others, reference image files by path; that folder is made absolute, so a dataset given by a
relative path still finds them. A ``datasets.Image`` struct without bytes (``{"bytes": null,
"path": …}``, how ``datasets`` stores images by reference) becomes its path. ``datasets``
never decodes images here (``Image(decode=False)``): geosleuth opens them itself, bounded.
This module only reads rows; ``eval.datasets`` turns them into samples (the dependency runs
one way).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from geosleuth.bounds.extras import install_line


class HFReadError(Exception):
    """A Hugging Face dataset or parquet file cannot be read."""


_IMAGE_COLUMNS = ("image", "img", "photo")


def _rows(source: Path, split: str | None) -> Iterator[dict[str, Any]]:
    if source.suffix.lower() == ".parquet" or (source.is_dir() and any(source.glob("*.parquet"))):
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise HFReadError(f"reading parquet needs pyarrow: {install_line('hf')}") from exc
        files = [source] if source.is_file() else sorted(source.glob("*.parquet"))
        for file in files:
            yield from pq.read_table(file).to_pylist()
        return
    try:
        import datasets
    except ImportError as exc:
        raise HFReadError(
            f"loading a saved Hugging Face dataset needs `datasets`: {install_line('hf')}"
        ) from exc
    loaded = datasets.load_from_disk(str(source))
    if isinstance(loaded, datasets.DatasetDict):
        name = split or ("test" if "test" in loaded else next(iter(loaded)))
        if name not in loaded:
            raise HFReadError(f"{source}: no split {name!r}; splits are {', '.join(loaded)}")
        loaded = loaded[name]
    for column, feature in loaded.features.items():
        if isinstance(feature, datasets.Image) and feature.decode:
            loaded = loaded.cast_column(column, datasets.Image(decode=False))
    yield from loaded


def _image_bytes(value: Any) -> bytes | None:
    if isinstance(value, dict) and value.get("bytes"):
        return bytes(value["bytes"])
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if hasattr(value, "save"):  # a PIL image from `datasets.Image()`
        buffer = io.BytesIO()
        value.convert("RGB").save(buffer, format="JPEG", quality=95)
        return buffer.getvalue()
    return None


def _referenced_path(value: Any) -> str | None:
    """The path of a ``datasets.Image`` struct that carries no bytes."""
    if isinstance(value, dict) and not value.get("bytes") and isinstance(value.get("path"), str):
        return value["path"] or None
    return None


def _materialise(row: dict[str, Any], index: int, folder: Path) -> dict[str, Any]:
    """Replace an embedded image by the path of a file written under ``folder``, and an image
    struct without bytes by its path."""
    for column in _IMAGE_COLUMNS:
        referenced = _referenced_path(row.get(column))
        if referenced is not None:
            row = {**row, column: referenced}
            continue
        data = _image_bytes(row.get(column))
        if data is None:
            continue
        stem = str(row.get("id") or row.get("sample_id") or index)
        path = folder / f"{Path(stem).name}.jpg"
        if not path.exists():
            folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        row = {**row, column: str(path)}
    return row


def read_hf_rows(source: Path, image_folder: Path, split: str | None) -> list[dict[str, Any]]:
    """Every row of a saved dataset or parquet file(s), embedded images written under ``image_folder``."""
    image_folder = image_folder.resolve()  # rows reference the files wherever the dataset is read from
    rows = [_materialise(row, i, image_folder) for i, row in enumerate(_rows(source, split))]
    if not rows:
        raise HFReadError(f"{source}: no rows")
    return rows
