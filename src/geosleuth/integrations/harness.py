"""What every harness adapter shares: samples in, model answers out, numbers from ``geosleuth score``.

A harness hands back (sample, answer text) pairs. They are written as the two files
``geosleuth score PRED --truth TRUTH --protocol P`` reads and scored by that same engine, so a
harness's figures are the CLI's figures: same parser, distance, comparison, thresholds and
level rules, and an unparseable answer counts as wrong instead of leaving the denominator.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geosleuth.core.ids import same_sample
from geosleuth.scoring import FileScore, get_protocol, score_file
from geosleuth.scoring.io import truth_record
from geosleuth.scoring.protocols import ScoringProtocol

__all__ = ["Answered", "defined", "metrics", "row_result", "score_answers", "truth_record"]

log = logging.getLogger(__name__)
_noted: set[tuple[str, ...]] = set()


@dataclass(frozen=True)
class Answered:
    """One sample's ground truth (a `geosleuth.eval.datasets.truth.truth_record`) and the model's final
    answer text."""

    truth: dict[str, Any]
    response: str


def score_answers(
    answered: Sequence[Answered], protocol: str | ScoringProtocol, source: str | Path | None = None
) -> FileScore:
    """Score answers exactly as ``geosleuth score --truth`` does (per-row records kept).

    ``source`` is the released table, needed by protocols that score whole files with their
    own rules (WhereBench); every other protocol reads the truth rows given here.
    """
    chosen = get_protocol(protocol) if isinstance(protocol, str) else protocol
    with tempfile.TemporaryDirectory(prefix="geosleuth-harness-") as tmp:
        predictions, truth = Path(tmp) / "predictions.jsonl", Path(tmp) / "truth.jsonl"
        _write_jsonl(predictions, (_prediction_row(a) for a in answered))
        _write_jsonl(truth, (a.truth for a in answered))
        if chosen.file_scorer and source is not None:
            truth = Path(source)
        return score_file(predictions, chosen, truth_path=truth, keep_rows=True)


def metrics(result: FileScore) -> dict[str, float | None]:
    """The metrics as ``geosleuth score --format json`` prints them (percent, km; NaN is None)."""
    return dict(result.score.to_dict(include_warnings=False)["metrics"])


def defined(figures: Mapping[str, float | None], warnings: Sequence[str] = ()) -> dict[str, float]:
    """The figures the data defines. One it does not (``None``: no label at that level, no row
    kept) is left out, never reported as 0, and a note saying so is logged (once a process)."""
    missing = tuple(name for name, value in figures.items() if value is None)
    if missing and missing not in _noted:
        _noted.add(missing)
        said = [w for w in warnings if any(name.split("@")[0] in w for name in missing)]
        why = "; ".join(said) or "no sample carries what they need, e.g. place-name labels at that level"
        log.warning("geosleuth: %s not reported: the data does not define them (%s)", ", ".join(missing), why)
    return {name: float(value) for name, value in figures.items() if value is not None}


def row_result(result: FileScore, sample_id: str) -> dict[str, Any]:
    """One sample's per-row record (distance, status, hits), as ``geosleuth score --rows`` writes it."""
    for record in result.iter_rows():
        if same_sample(record.get("id"), sample_id):
            return record
    raise KeyError(f"no scored row for sample {sample_id!r}")


def _prediction_row(answered: Answered) -> dict[str, Any]:
    row: dict[str, Any] = {"id": answered.truth["id"], "response": answered.response}
    if answered.truth.get("choices"):  # the parser reads a multiple-choice letter against these
        row["choices"] = answered.truth["choices"]
    return row


def _write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
