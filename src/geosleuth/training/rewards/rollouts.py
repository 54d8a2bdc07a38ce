"""A batch of rollouts as scorers read it, and the scores they give back.

`Rollouts` holds the texts, the raw ground truths and what the engine knows of the run (the
training step, tool-call counts); `RewardBatch` the scores, distances and parse flags in
input order, with the per-item dicts and batch metrics the engines log. Per-rollout
problems are collected in `BatchLog` and logged once per batch (count plus an escaped example).
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from geosleuth.core.records import Prediction
from geosleuth.training.rewards import reading
from geosleuth.training.rewards.truth import GroundTruth, parse_ground_truth

log = logging.getLogger("geosleuth.training.rewards")
"""One logger for every reward's batch warnings, whichever module notes them."""

ACC_THRESHOLDS_KM: tuple[float, ...] = (0.5, 1.0, 2.0, 10.0, 25.0, 200.0, 750.0, 2500.0)
MISS_DISTANCE_KM = 20015.1
"""Half the Earth's circumference: the distance logged for an answer without coordinates."""

ConsistencyFn = Callable[[Sequence[str], Sequence[GroundTruth]], Sequence[float]]
"""(rollout texts, their ground truths) -> consistency scores (see `training.consistency`)."""
Verifier = Callable[[str, Mapping[str, str]], Any]
"""GeoVista's model verifier: (answer text, truth levels) -> {"country", "state", "city"} verdicts."""


def acc_key(threshold_km: float) -> str:
    """Metric name for one threshold: ``acc@1km``, ``acc@0.5km``."""
    return f"acc@{threshold_km:g}km"


@dataclass
class RewardBatch:
    """Scores and metrics for a batch of rollouts, in input order."""

    scores: NDArray[np.float64]
    distances_km: NDArray[np.float64]  # NaN where the answer had no coordinates
    parsed: NDArray[np.bool_]
    predictions: list[Prediction | None]  # None where the fast path read the coordinates directly

    def hits(self, threshold_km: float) -> NDArray[np.bool_]:
        return self.distances_km < threshold_km  # NaN compares False: a missing answer is a miss

    def item_info(self, i: int) -> dict[str, Any]:
        """verl's per-item dict: ``score`` plus numeric extras (all items share the keys)."""
        return self.item_infos()[i]

    def item_infos(self) -> list[dict[str, float]]:
        """All per-item dicts, built column-wise."""
        d = np.where(np.isnan(self.distances_km), MISS_DISTANCE_KM, self.distances_km)
        columns: dict[str, list[float]] = {
            "score": self.scores.tolist(),
            "distance_km": d.tolist(),
            "parsed": self.parsed.astype(np.float64).tolist(),
        }
        for t in ACC_THRESHOLDS_KM:
            columns[acc_key(t)] = self.hits(t).astype(np.float64).tolist()
        keys = list(columns)
        return [dict(zip(keys, row, strict=True)) for row in zip(*columns.values(), strict=True)]

    def metrics(self) -> dict[str, float]:
        """Batch means: Acc@k, parse rate, median distance over answers with coordinates."""
        out = {acc_key(t): float(self.hits(t).mean()) if len(self.scores) else 0.0 for t in ACC_THRESHOLDS_KM}
        finite = self.distances_km[np.isfinite(self.distances_km)]
        out["parse_rate"] = float(self.parsed.mean()) if len(self.scores) else 0.0
        out["median_distance_km"] = float(np.median(finite)) if finite.size else MISS_DISTANCE_KM
        return out


# --- per-batch logging ---------------------------------------------------------------------

EXAMPLE_CHARS = 160
"""Characters of the example rollout text quoted in a batch warning."""


def escape_example(text: str | None, limit: int = EXAMPLE_CHARS) -> str:
    """A quoted, single-line, bounded example: control, format (zero-width) and separator
    characters escaped as ``\\uXXXX``, the rest truncated with the count left out."""
    raw = text or ""
    head = raw[:limit]
    out = []
    for ch in head:
        if ch in '\\"':
            out.append("\\" + ch)
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    more = f"…(+{len(raw) - limit} chars)" if len(raw) > limit else ""
    return '"' + "".join(out) + '"' + more


@dataclass
class BatchLog:
    """Problems of one batch by kind: how many rollouts, and the first one's index and text."""

    reward: str
    size: int
    kinds: dict[str, tuple[int, int, str | None]] = field(default_factory=dict)

    def note(self, kind: str, index: int, text: str | None) -> None:
        count, first, example = self.kinds.get(kind, (0, index, text))
        self.kinds[kind] = (count + 1, first, example)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("reward %s: rollout %d %s: %s", self.reward, index, kind, escape_example(text, 2000))

    def flush(self) -> None:
        """One WARNING line per kind of problem; nothing when the batch had none."""
        for kind, (count, first, example) in self.kinds.items():
            log.warning(
                "reward %s: %d of %d rollouts %s (first: rollout %d, %s)",
                self.reward,
                count,
                self.size,
                kind,
                first,
                escape_example(example),
            )
        self.kinds.clear()


# --- a batch of rollouts -------------------------------------------------------------------


@dataclass
class Rollouts:
    """What a scorer reads: texts, raw ground truths and what the engine knows of the run."""

    texts: list[str | None]
    raw_truths: list[Any]
    reward: str = ""
    consistency_fn: ConsistencyFn | None = None
    step: int | None = None
    tool_calls: list[int] | None = None
    log: BatchLog = field(init=False)
    _truths: list[GroundTruth] | None = field(default=None, init=False, repr=False)
    _preds: list[Prediction] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.texts) != len(self.raw_truths):
            raise ValueError(f"{len(self.texts)} completions but {len(self.raw_truths)} ground truths")
        self.log = BatchLog(self.reward, len(self.texts))

    def __len__(self) -> int:
        return len(self.texts)

    def truths(self) -> list[GroundTruth]:
        """Parsed ground truths; a bad one raises (it is a dataset bug, not a rollout's)."""
        if self._truths is None:
            self._truths = [parse_ground_truth(t) for t in self.raw_truths]
        return self._truths

    def preds(self) -> list[Prediction]:
        """The robust parse of every rollout (once per batch)."""
        if self._preds is None:
            self._preds = [reading.parse_rollout(t) for t in self.texts]
        return self._preds

    def set_preds(self, preds: Sequence[Prediction]) -> None:
        self._preds = list(preds)


Scorer = Callable[[Mapping[str, Any], Rollouts], RewardBatch]
