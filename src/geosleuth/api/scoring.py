"""``geosleuth.score``: a prediction file or in-memory records under a published protocol."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from geosleuth.core.metrics import resolve_thresholds
from geosleuth.eval.datasets.truth import dataset_truth_rows
from geosleuth.scoring import ScoreInputError, get_protocol, score_file


@dataclass(frozen=True)
class Score:
    """What ``geosleuth score --json`` prints, as attributes, plus the per-row records.

    ``metrics`` and ``ci95`` hold the same keys and values as the JSON (accuracies in percent,
    distances in km, a figure the data cannot support is ``None``); ``rows`` are ``--rows``'s.
    """

    n: int
    parsed: int
    metrics: dict[str, float | None]
    ci95: dict[str, list[float | None]]
    warnings: list[str]
    rows: list[dict[str, Any]] = field(repr=False)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    protocol: str = "default"

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``geosleuth score --json``."""
        out: dict[str, Any] = {
            "n": self.n,
            "parsed": self.parsed,
            "metrics": self.metrics,
            "ci95": self.ci95,
            "warnings": self.warnings,
        }
        return {**out, "groups": self.groups} if self.groups else out


def _in_api_terms(message: str, path: Path) -> str:
    """A CLI message about the temporary file the records were written to, as the API says it."""
    return (
        message.replace(str(path), "records")
        .replace("--truth FILE", "truth=FILE")
        .replace("--truth", "truth=")
    )


def score(
    path_or_records: str | Path | Iterable[Mapping[str, Any] | Any],
    protocol: str = "default",
    truth: str | Path | None = None,
    *,
    by: str | None = None,
    thresholds: str | None = None,
) -> Score:
    """Score a prediction file (JSONL, JSON or CSV) or records (dicts or `Trajectory` objects).

    ``protocol``, ``truth``, ``by`` and ``thresholds`` are `geosleuth score`'s options. Bad input
    raises `geosleuth.scoring.ScoreInputError` with the message the CLI prints.
    """
    chosen = get_protocol(protocol)
    if thresholds:
        chosen = replace(chosen, thresholds=resolve_thresholds(thresholds))
    truth_path = Path(truth) if truth is not None else None
    rows = dataset_truth_rows(truth_path) if truth_path is not None and chosen.file_scorer is None else None
    if isinstance(path_or_records, str | Path):
        scored = score_file(Path(path_or_records), chosen, truth_path=truth_path, by=by, truth_rows=rows)
    else:
        with tempfile.TemporaryDirectory(prefix="geosleuth-score-") as folder:
            path = Path(folder) / "records.jsonl"
            _write_records(path, path_or_records)
            try:
                scored = score_file(path, chosen, truth_path=truth_path, by=by, truth_rows=rows)
            except ScoreInputError as exc:  # in the caller's terms: their records, score(truth=…)
                raise ScoreInputError(_in_api_terms(str(exc), path)) from None
            scored.score.warnings = [_in_api_terms(w, path) for w in scored.score.warnings]
    shown = scored.score.to_dict()
    return Score(
        n=shown["n"],
        parsed=shown["parsed"],
        metrics=shown["metrics"],
        ci95=shown["ci95"],
        warnings=shown["warnings"],
        rows=scored.rows,
        groups=shown.get("groups", {}),
        protocol=scored.protocol,
    )


def _write_records(path: Path, records: Iterable[Mapping[str, Any] | Any]) -> None:
    """One JSON line per record: a pydantic record (a Trajectory) as it is written to disk."""
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            dump = getattr(record, "model_dump_json", None)
            handle.write((dump() if callable(dump) else json.dumps(record, ensure_ascii=False)) + "\n")
