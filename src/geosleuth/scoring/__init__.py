"""Reading prediction files and scoring them under published protocols (`geosleuth score`)."""

from geosleuth.scoring.engine import score_file
from geosleuth.scoring.io import ScoreInputError
from geosleuth.scoring.protocols import PROTOCOLS, ScoringProtocol, get_protocol
from geosleuth.scoring.results import FileScore, Score

__all__ = [
    "PROTOCOLS",
    "FileScore",
    "Score",
    "ScoreInputError",
    "ScoringProtocol",
    "get_protocol",
    "score_file",
]
