"""Reading prediction files and scoring them under published protocols (`geosleuth score`).

Names are imported on first use, so that the light protocol registry (``scoring.catalog``) can be
read by ``--help`` without loading NumPy.
"""

from __future__ import annotations

from geosleuth.lazy import lazy_getattr

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


__getattr__ = lazy_getattr(__name__, _EXPORTS)
