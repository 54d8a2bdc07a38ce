"""Spatially-aware difficulty filtering and a strict-to-loose curriculum (SpotAgent).

An `eval` run with K samples per image says how often the policy already gets each image
right at 1 / 25 / 200 / 750 km. Images it always gets right (pass@K = K) or never (0) give
GRPO no signal at a threshold δ: every trajectory in the group earns the same reward. The
curriculum has SpotAgent's two cumulative phases: phase I trains on the images informative
at δ ∈ {1, 25} km, phase II on those plus the images informative at δ ∈ {200, 750} km.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from geosleuth.core.geo import haversine_km
from geosleuth.core.records import Sample, Trajectory, trajectory_from_json

DEFAULT_PHASES_KM: tuple[tuple[float, ...], ...] = ((1.0, 25.0), (200.0, 750.0))
"""SpotAgent's regimes per phase; each phase adds its regimes to the earlier ones."""
DEFAULT_THRESHOLDS_KM: tuple[float, ...] = tuple(t for group in DEFAULT_PHASES_KM for t in group)


@dataclass
class ImageStats:
    """Hits per threshold among the K trajectories of one image."""

    sample_id: str
    k: int
    hits: dict[float, int]
    distances_km: list[float | None]

    def informative(self, threshold: float) -> bool:
        return 0 < self.hits[threshold] < self.k


@dataclass
class FilterResult:
    """Per-image stats, the curriculum phases and what was dropped and why."""

    thresholds_km: tuple[float, ...]
    stats: list[ImageStats]
    phases: list[tuple[tuple[float, ...], list[str]]]  # (regimes so far, cumulative image ids)
    failed: list[dict[str, str]] = field(default_factory=list)

    def regime_counts(self) -> dict[str, dict[str, int]]:
        """For each threshold: images all-correct, all-wrong and mixed (kept)."""
        out: dict[str, dict[str, int]] = {}
        for t in self.thresholds_km:
            counts = {"all_correct": 0, "all_wrong": 0, "mixed": 0}
            for s in self.stats:
                h = s.hits[t]
                counts["all_correct" if h == s.k else "all_wrong" if h == 0 else "mixed"] += 1
            out[_label(t)] = counts
        return out

    def report(self) -> dict[str, Any]:
        kept = {sid for _, ids in self.phases for sid in ids}
        return {
            "images": len(self.stats),
            "kept": len(kept),
            "dropped": len(self.stats) - len(kept),
            "failed_records": len(self.failed),
            "thresholds_km": list(self.thresholds_km),
            "regimes": self.regime_counts(),
            "phases": [
                {"phase": i, "thresholds_km": list(ts), "count": len(ids), "file": f"phase{i}.jsonl"}
                for i, (ts, ids) in enumerate(self.phases, 1)
            ],
            "failed": self.failed,
        }


def _label(threshold: float) -> str:
    return f"{threshold:g}km"


def image_stats(
    trajectory: Trajectory, truth: tuple[float, float], thresholds: Sequence[float]
) -> ImageStats:
    """Count hits (distance < threshold) over the K samples; an unparsed answer is a miss."""
    runs = trajectory.samples or [trajectory]
    lats = np.array([r.prediction.lat if r.prediction and r.prediction.has_coords else np.nan for r in runs])
    lons = np.array([r.prediction.lon if r.prediction and r.prediction.has_coords else np.nan for r in runs])
    d = haversine_km(lats, lons, truth[0], truth[1])
    hits = {float(t): int(np.sum(np.nan_to_num(d, nan=np.inf) < t)) for t in thresholds}
    dist_list = [None if np.isnan(x) else float(x) for x in d]
    return ImageStats(trajectory.sample_id, len(runs), hits, dist_list)


def truth_of(trajectory: Trajectory, samples: dict[str, Sample]) -> tuple[float, float] | None:
    """Ground truth from the dataset file, else from the run's metadata (never from a prediction)."""
    sample = samples.get(trajectory.sample_id)
    if sample is not None and sample.lat is not None and sample.lon is not None:
        return float(sample.lat), float(sample.lon)
    meta = trajectory.metadata.get("ground_truth") or trajectory.metadata.get("truth") or {}
    if isinstance(meta, dict):
        lat, lon = _coordinate(meta.get("lat"), 90.0), _coordinate(meta.get("lon"), 180.0)
        if lat is not None and lon is not None:
            return lat, lon
    return None


def _coordinate(value: object, bound: float) -> float | None:
    """A finite number within ±``bound`` from a run's metadata, else None: a list, a string or a
    huge integer there is no truth (it raised ``TypeError`` out of ``data filter``)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) and abs(number) <= bound else None


def filter_trajectories(
    records: Iterable[Trajectory | dict[str, str]],
    samples: dict[str, Sample],
    phases: Sequence[Sequence[float]] = DEFAULT_PHASES_KM,
) -> FilterResult:
    """Stats per image, then cumulative phases: phase i keeps every image informative at a
    regime of phases 1..i (0 < pass@K < K at that δ), in input order."""
    groups = [tuple(sorted(float(t) for t in group)) for group in phases]
    if not groups or not all(groups):
        raise ValueError("at least one phase with at least one threshold is needed")
    ordered = tuple(sorted({t for group in groups for t in group}))
    stats: list[ImageStats] = []
    failed: list[dict[str, str]] = []
    for rec in records:
        if isinstance(rec, dict):  # a line that did not parse, recorded by the reader
            failed.append(rec)
            continue
        truth = truth_of(rec, samples)
        if truth is None:
            failed.append({"sample_id": rec.sample_id, "reason": "no ground truth for this sample"})
            continue
        stats.append(image_stats(rec, truth, ordered))
    out: list[tuple[tuple[float, ...], list[str]]] = []
    regimes: tuple[float, ...] = ()
    for group in groups:
        regimes = tuple(sorted({*regimes, *group}))
        out.append((regimes, [s.sample_id for s in stats if any(s.informative(t) for t in regimes)]))
    return FilterResult(ordered, stats, out, failed)


def parse_phases(text: str) -> list[tuple[float, ...]]:
    """``"1,25;200,750"`` -> [(1, 25), (200, 750)]; a clear error for anything else."""
    groups: list[tuple[float, ...]] = []
    for part in text.split(";"):
        try:
            group = tuple(float(x) for x in part.split(",") if x.strip())
        except ValueError:
            raise ValueError(f"phases must look like '1,25;200,750', got {text!r}") from None
        if not group or any(not t > 0 for t in group):
            raise ValueError(f"each phase needs positive km thresholds, got {part!r}")
        groups.append(group)
    return groups


class SortedTrajectories:
    """A run's trajectory records in sample-id order, one record in memory at a time.

    A concurrent run appends trajectories as its requests finish: sorted, the same run gives the
    same SFT records and filter results (so the training that reads them) every time. The first
    pass keeps each line's sample id and byte offset (a broken line becomes a failure record
    there); each record is parsed when its turn comes, so a 500 MB run costs its ids, not its
    texts.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[tuple[str, int, dict[str, str] | None]] = []
        with path.open("rb") as fh:  # bytes: a line that is not UTF-8 is one bad record
            offset = 0
            for lineno, line in enumerate(fh, 1):
                start, offset = offset, offset + len(line)
                if not line.strip():
                    continue
                try:
                    record = orjson.loads(line)
                    sample_id = record.get("sample_id") if isinstance(record, dict) else None
                    if not isinstance(sample_id, str):
                        raise ValueError("no sample_id")
                except ValueError as exc:
                    reason = f"invalid trajectory: {path}:{lineno}: not a trajectory record ({exc})"
                    self.entries.append(
                        (f"line {lineno}", -1, {"sample_id": f"line {lineno}", "reason": reason[:300]})
                    )
                    continue
                self.entries.append((sample_id, start, None))
        self.entries.sort(key=lambda entry: entry[0])  # stable: a repeated id keeps file order

    @property
    def ids(self) -> list[str]:
        """The sample ids of the readable lines, in order."""
        return [key for key, _, broken in self.entries if broken is None]

    def __iter__(self) -> Iterator[Trajectory | dict[str, str]]:
        with self.path.open("rb") as fh:
            for key, offset, broken in self.entries:
                if broken is not None:
                    yield broken
                    continue
                fh.seek(offset)
                line = fh.readline()
                try:
                    yield trajectory_from_json(line)
                except ValueError as exc:
                    yield {"sample_id": key, "reason": f"invalid trajectory: {self.path}: {exc}"[:300]}


def read_trajectory_records(path: Path) -> list[Trajectory | dict[str, str]]:
    """Every record of `SortedTrajectories`, as a list (for callers that read them more than once)."""
    return list(SortedTrajectories(path))


def read_samples(path: Path | None) -> dict[str, Sample]:
    """Samples JSONL (one `Sample` per line) indexed by id; a missing path gives none."""
    if path is None:
        return {}
    samples: dict[str, Sample] = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    s = Sample.model_validate_json(line)
                except ValueError as exc:
                    raise ValueError(f"{path}:{lineno}: invalid sample: {exc}") from None
                samples[s.id] = s
    return samples


def write_filter_outputs(result: FilterResult, out_dir: Path, samples: dict[str, Sample]) -> dict[str, Any]:
    """stats.jsonl, ``phase<i>.jsonl`` per cumulative phase (samples when known, else ids), report.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / "stats.jsonl").open("w", encoding="utf-8") as fh:
        for s in result.stats:
            row = {
                "sample_id": s.sample_id,
                "k": s.k,
                "hits": {_label(t): h for t, h in s.hits.items()},
                "distances_km": s.distances_km,
            }
            fh.write(json.dumps(row) + "\n")
    for i, (_, ids) in enumerate(result.phases, 1):
        with (out_dir / f"phase{i}.jsonl").open("w", encoding="utf-8") as fh:
            for sid in ids:
                sample = samples.get(sid)
                fh.write((sample.model_dump_json() if sample else json.dumps({"id": sid})) + "\n")
    report = result.report()
    (out_dir / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report
