"""The one rule for sample ids: an id matches whether or not it is written with its image's file
extension, so ``1000269685_e60e9cdfb4_1125_78841376@N00.jpg`` (the IM2GPS3K truth table's
``IMG_ID``) and ``1000269685_e60e9cdfb4_1125_78841376@N00`` (the id `eval` gives the photo) are
one sample. Every door that joins predictions to ground truth (`score --truth`, the harness
tasks, `merge`, `eval`'s datasets) compares `sample_key`s.

Only image extensions are dropped: ``12.5`` or ``v1.2`` stay as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

IMAGE_EXTENSIONS = frozenset(
    {"jpg", "jpeg", "jpe", "jfif", "png", "webp", "gif", "bmp", "tif", "tiff", "heic", "heif", "avif"}
)
"""File extensions of the photos benchmarks name their samples by (compared in lower case)."""


ID_KEYS = ("id", "sample_id", "ID", "IMG_ID", "img_id", "image_id", "question_id", "uid", "panoID", "BVID")
ID_KEYS += ("index", "idx")
"""Columns that name a row's sample, the first present wins: named ids first (GeoEstimation's
``img_id``, IM2GPS / YFCC's ``IMG_ID``, WhereBench's ``panoID`` / ``BVID``), positions last."""


def written_id(row: Mapping[str, Any]) -> str | None:
    """A row's sample id as written in its first `ID_KEYS` column present (blanks trimmed)."""
    for key in ID_KEYS:
        value = row.get(key)
        if value is not None and value != "":
            text = str(value).strip()
            if text:
                return text
    return None


def sample_key(sample_id: object) -> str:
    """The id as samples are matched: surrounding blanks and an image file extension dropped."""
    text = str(sample_id).strip()
    stem, dot, extension = text.rpartition(".")
    if dot and stem and extension.lower() in IMAGE_EXTENSIONS:
        return stem
    return text


def same_sample(first: object, second: object) -> bool:
    """Whether two written ids name the same sample."""
    return sample_key(first) == sample_key(second)


def image_sample_id(reference: str) -> str:
    """The id of a sample known only by its image file (a path or file name): the file's name
    without its image extension."""
    return sample_key(PurePath(reference.strip()).name)
