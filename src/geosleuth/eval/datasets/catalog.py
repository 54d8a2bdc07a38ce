"""The dataset-format registry: one row adapter per benchmark layout, light enough for ``--help``.

A format is a row adapter, ``(row, index, resolver) -> Sample`` (see ``eval.datasets.formats``);
a user's format registers by name, through the ``geosleuth.formats`` entry point, or is named
directly as ``--format package.module:adapter``. ``auto`` and ``hf`` are not adapters: they
choose one (from the columns) or read Hugging Face files.
"""

from __future__ import annotations

from typing import Any

from geosleuth.registry import Registry

DATASET_FORMATS: Registry[Any] = Registry(  # of formats.RowAdapter, which sets its validator
    "dataset format",
    "geosleuth.formats",
    builtins=dict.fromkeys(
        (
            "generic", "im2gps3k", "yfcc4k", "osv5m", "mp16pro", "greval", "geobench", "mapbench",
            "wherecountry", "wherestreet",
        ),
        "geosleuth.eval.datasets.formats",
    ),
)  # fmt: skip

SPECIAL_FORMATS = ("auto", "hf")
"""Format names that are not row adapters."""


def format_names() -> list[str]:
    """Every name ``--format`` takes."""
    return [SPECIAL_FORMATS[0], *DATASET_FORMATS.names(), SPECIAL_FORMATS[1]]
