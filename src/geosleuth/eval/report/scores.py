"""Per-sample score rows: one per dataset sample, joining ground truth and trajectory.

A sample with no trajectory yet is ``missing`` and a failed trajectory keeps its status; both
score as wrong (distance NaN, every level a miss), so denominators are always the dataset.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from geosleuth.core import metrics
from geosleuth.core.geo import distance_km
from geosleuth.core.records import Prediction, Sample, Trajectory, TrajectoryStatus
from geosleuth.eval.wherebench import rules as wherebench
from geosleuth.scoring.protocols import ScoringProtocol, get_protocol

MISSING = "missing"


def protocol_for(name: str | None, samples: Sequence[Sample]) -> ScoringProtocol:
    """The named scoring protocol, else one guessed from the data source (map benchmarks use TWM)."""
    if name:
        return get_protocol(name)
    sources = {s.data_source for s in samples}
    if sources and sources <= {"wherecountry", "wherestreet"}:
        return get_protocol("wherebench")
    if "osv5m" in sources:
        return get_protocol("osv5m")
    if any(src and src.upper().startswith("IMAGEO") for src in sources):
        return get_protocol("twm")
    return get_protocol("default")


@dataclass
class ScoreRow:
    """Everything the report aggregates about one sample."""

    sample_id: str
    status: str
    answer_type: str
    true_lat: float | None
    true_lon: float | None
    pred_lat: float | None
    pred_lon: float | None
    distance_km: float
    country_code: str | None
    continent: str | None
    choice_correct: bool | None
    labels: dict[str, str] = field(default_factory=dict)  # ground-truth labels by level
    level_hits: dict[str, bool] = field(default_factory=dict)
    confidence: float | None = None
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float | None = None
    sample_distances: list[float] = field(default_factory=list)  # the N trajectories when N > 1
    aggregator: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)  # breakdown keys
    choice_parsed: bool | None = None  # multiple choice: an option was read from the answer
    path_score: float | None = None  # WhereStreet text items: hierarchical path score in [0, 1]
    clue_weights: list[float] = field(default_factory=list)  # per key clue (WhereStreet Shapley)

    @property
    def failed(self) -> bool:
        return self.status != TrajectoryStatus.OK.value


def sample_distance(sample: Sample, prediction: Prediction | None, protocol: ScoringProtocol) -> float:
    """Great-circle error of one answer under the protocol's distance; NaN when either point is missing."""
    if prediction is None or not prediction.has_coords or sample.lat is None or sample.lon is None:
        return math.nan
    d = distance_km(
        sample.lat,
        sample.lon,
        prediction.lat,
        prediction.lon,
        method=protocol.distance,
        radius_km=protocol.radius_km,
    )
    return float(d)


def _truth_country(sample: Sample, reverse: Mapping[str, str | None]) -> str | None:
    from geosleuth.core.countries import resolve_country

    code = resolve_country(sample.labels["country"]) if sample.labels.get("country") else None
    return code or reverse.get(sample.id)


def _continent(code: str | None) -> str | None:
    if not code:
        return None
    from geosleuth.core.countries import country_info

    info = country_info(code)
    return info.continent if info else None


def reverse_countries(samples: Sequence[Sample]) -> dict[str, str | None]:
    """Country codes of unlabelled samples from their coordinates (gazetteer, when available)."""
    todo = [s for s in samples if not s.labels.get("country") and s.lat is not None and s.lon is not None]
    if not todo:
        return {}
    try:
        from geosleuth.gazetteer import get_gazetteer

        result = get_gazetteer().reverse_batch(
            np.array([s.lat for s in todo]), np.array([s.lon for s in todo])
        )
    except (ImportError, OSError, RuntimeError):
        return {}
    codes = result["country_code"]
    return {s.id: (str(c) if c else None) for s, c in zip(todo, codes, strict=True)}


def _path(sample: Sample, prediction: Prediction | None) -> tuple[float | None, dict[str, bool]]:
    """WhereStreet text items: path score and per-level hits along the answer hierarchy."""
    if sample.answer_type != "level" or not sample.answer_level:
        return None, {}
    score, hits, _, _ = wherebench.item_path_score(
        prediction, sample.labels, sample.answer_level, sample.hint, sample.hint_level
    )
    return score, hits


def _level_hits(sample: Sample, prediction: Prediction | None) -> dict[str, bool]:
    if sample.answer_type == "choice":  # scored by the choice letter, not by place names
        return {}
    levels = [lv for lv in metrics.PATH_LEVELS if sample.labels.get(lv)]
    if not levels:
        return {}
    predicted = {lv: [prediction.level(lv) if prediction else None] for lv in levels}
    truth = {lv: [sample.labels[lv]] for lv in levels}
    hits = metrics.level_hits_from_text(predicted, truth, levels=levels)
    return {lv: bool(hits[lv][0]) for lv in levels}


def _choice(sample: Sample, prediction: Prediction | None) -> bool | None:
    if sample.answer_type != "choice":
        return None
    predicted = prediction.choice if prediction else None
    return bool(metrics.choice_accuracy([predicted], [sample.answer]) == 1.0)


def _field_values(sample: Sample, country: str | None, continent: str | None, status: str) -> dict[str, Any]:
    values: dict[str, Any] = {
        "data_source": sample.data_source,
        "split": sample.split,
        "answer_type": sample.answer_type,
        "answer_level": sample.answer_level,
        "country": country,
        "continent": continent,
        "status": status,
    }
    for key, value in sample.metadata.items():
        if isinstance(value, str | int | float | bool) or value is None:
            values[f"metadata.{key}"] = value
            values.setdefault(key, value)
    return values


@dataclass(frozen=True, slots=True)
class CallStats:
    """One tool call as scores and summaries see it."""

    name: str
    ok: bool
    cache_hit: bool
    latency_s: float


@dataclass(frozen=True, slots=True)
class RecordStats:
    """What scores and summaries read of one trajectory record, without its texts.

    A full record holds every message, turn and tool result; a report over a 100k-sample
    run keeps these instead (about 3 KB each) and reads full records only for the
    pages that show them.
    """

    status: TrajectoryStatus
    prediction: Prediction | None
    latency_s: float | None
    turns: int  # of the record and its samples: with N > 1 the work is in the samples
    calls: tuple[CallStats, ...]
    usage: tuple[tuple[str, int, int], ...]  # (model, prompt tokens, completion tokens) per model
    samples: tuple[RecordStats, ...] = ()
    aggregator: str | None = None

    @classmethod
    def of(cls, trajectory: Trajectory | RecordStats) -> RecordStats:
        if isinstance(trajectory, RecordStats):
            return trajectory
        runs = [trajectory, *trajectory.samples]
        latency = None
        if trajectory.started_at is not None and trajectory.finished_at is not None:
            latency = trajectory.finished_at - trajectory.started_at
        prediction = trajectory.prediction
        return cls(
            status=trajectory.status,
            prediction=prediction.model_copy(update={"raw": ""}) if prediction else None,
            latency_s=latency,
            turns=sum(len(t.turns) for t in runs),
            calls=tuple(
                CallStats(c.name, c.ok, c.cache_hit, c.latency_s) for t in runs for c in t.tool_calls
            ),
            usage=tuple(model_usage(trajectory)),
            samples=tuple(cls.of(s) for s in trajectory.samples),
            aggregator=trajectory.aggregator,
        )


def model_usage(trajectory: Trajectory) -> list[tuple[str, int, int]]:
    """(model, prompt tokens, completion tokens) of every model call behind one record.

    With N > 1 that is the N samples and, when one ran, the verifier (logged in metadata).
    """
    runs = [trajectory, *trajectory.samples]
    usage = [(t.model, t.usage.prompt_tokens, t.usage.completion_tokens) for t in runs]
    verifier = trajectory.metadata.get("verifier")
    if isinstance(verifier, dict) and isinstance(verifier.get("usage"), dict):
        tokens = verifier["usage"]
        usage.append(
            (
                str(verifier.get("model")),
                int(tokens.get("prompt_tokens", 0)),
                int(tokens.get("completion_tokens", 0)),
            )
        )
    return usage


def score_sample(
    sample: Sample,
    record: Trajectory | RecordStats | None,
    protocol: ScoringProtocol,
    reverse: Mapping[str, str | None],
) -> ScoreRow:
    """Join one sample with its trajectory (or its absence)."""
    stats = RecordStats.of(record) if record is not None else None
    prediction = stats.prediction if stats and stats.status == TrajectoryStatus.OK else None
    status = stats.status.value if stats else MISSING
    country = _truth_country(sample, reverse)
    continent = _continent(country)
    calls = stats.calls if stats else ()
    usage = stats.usage if stats else ()
    path_score, path_hits = _path(sample, prediction)
    return ScoreRow(
        sample_id=sample.id,
        status=status,
        answer_type=sample.answer_type,
        true_lat=sample.lat,
        true_lon=sample.lon,
        pred_lat=prediction.lat if prediction else None,
        pred_lon=prediction.lon if prediction else None,
        distance_km=sample_distance(sample, prediction, protocol),
        country_code=country,
        continent=continent,
        choice_correct=_choice(sample, prediction),
        labels=dict(sample.labels),
        level_hits=path_hits if path_score is not None else _level_hits(sample, prediction),
        confidence=prediction.confidence if prediction else None,
        turns=stats.turns if stats else 0,
        tool_calls=len(calls),
        tool_errors=sum(not c.ok for c in calls),
        prompt_tokens=sum(u[1] for u in usage),
        completion_tokens=sum(u[2] for u in usage),
        latency_s=stats.latency_s if stats else None,
        sample_distances=[
            sample_distance(sample, t.prediction if t.status == TrajectoryStatus.OK else None, protocol)
            for t in (stats.samples if stats else ())
        ],
        aggregator=stats.aggregator if stats else None,
        fields=_field_values(sample, country, continent, status),
        choice_parsed=bool(prediction and prediction.choice) if sample.answer_type == "choice" else None,
        path_score=path_score,
        clue_weights=list(sample.clue_weights),
    )


def score_run(
    samples: Sequence[Sample],
    trajectories: Mapping[str, Trajectory] | Mapping[str, RecordStats],
    protocol: ScoringProtocol,
) -> list[ScoreRow]:
    """Score rows in dataset order; samples without a record are ``missing``."""
    reverse = reverse_countries(samples)
    return [score_sample(s, trajectories.get(s.id), protocol, reverse) for s in samples]
