"""Reading prediction files and scoring them under published protocols (`geosleuth score`).

Names are imported on first use, so that the light protocol registry (``scoring.catalog``) can be
read by ``--help`` without loading NumPy.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "PROTOCOLS": "geosleuth.scoring.catalog",
    "FileScore": "geosleuth.scoring.results",
    "Score": "geosleuth.scoring.results",
    "ScoreInputError": "geosleuth.scoring.io",
    "ScoringProtocol": "geosleuth.scoring.protocols",
    "get_protocol": "geosleuth.scoring.protocols",
    "score_file": "geosleuth.scoring.engine",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    from importlib import import_module

    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'geosleuth.scoring' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
