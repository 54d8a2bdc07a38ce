"""Score prediction files under a named protocol: a stream of rows -> compact columns -> metrics.

Rows are read, parsed and reduced one at a time; what survives a row is a handful of numbers
in NumPy columns (coordinates, status, per-level hits), so memory grows by tens of bytes per
row and nothing holds the row's text. Distances and reverse geocoding run vectorised in
chunks at the end. Per-row output (``--rows``) keeps a few more columns (id, format, problem).

Every row that cannot be parsed, joined or read counts as wrong; nothing leaves a denominator.
Where a protocol's released code drops rows (GeoVista), both figures are reported.
Reverse geocoding and geocoding are injected (the gazetteer by default) so tests can use fakes.
"""

from __future__ import annotations

import importlib
import math
import random
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

import geosleuth.scoring.geovista as GV
from geosleuth.core import metrics as M
from geosleuth.core.geo import distance_km
from geosleuth.core.parsing import Geocoder
from geosleuth.core.records import PLACE_LEVELS, ParseStatus, Prediction
from geosleuth.core.released import GEOAGENT_RADIUS_KM
from geosleuth.scoring.checks import language_warning, misalignment_warning
from geosleuth.scoring.columns import missing_columns, renamed
from geosleuth.scoring.io import (
    InputRow,
    ScoreInputError,
    Truth,
    field_value,
    iter_rows,
    prediction_from_row,
    row_id,
    truth_from_row,
    truth_index,
)
from geosleuth.scoring.peers import polygon_country_hits, released_points
from geosleuth.scoring.protocols import ScoringProtocol

AliasFn = Callable[[str, str, str], bool]
"""``(predicted, truth, level) -> same place?`` for names in different languages."""

ReverseFn = Callable[[NDArray[np.float64], NDArray[np.float64]], Mapping[str, ArrayLike]]
"""``(lats, lons) -> {key: array}``: the gazetteer's ``reverse_batch`` / ``reverse_geocoder_batch``."""

VerifierFn = Callable[[str, Mapping[str, str]], Mapping[str, bool] | None]
"""``(final turn, truth labels) -> {country, admin1, city: bool}``; None or raising = no verdict."""

MISSING_GROUP = "(none)"
N_BOOT = 1000
CHUNK = 16_384
"""Rows buffered as Python values before they become NumPy columns and are scored."""
VECTOR_CHUNK = 65_536
"""Rows per vectorised step when scoring whole arrays (distances, reverse geocoding)."""
FILTER_BITS = 1 << 25
"""Slots of the duplicate-id filter (4 MiB): at a million ids about 3 % of lookups search the chunks."""
SHOWN = 10
"""Problems and line numbers listed in warnings before a count of the rest."""
MISALIGNMENT_WINDOW = 50_000
"""Rows (the first ones, contiguous so row shifts show) the misalignment check looks at."""
PARSE_BLOCK = 128
"""Rows are parsed a block at a time, then tallied: each stage's code and data stay in the CPU
caches across the block (~10 % less CPU per row than row by row; much larger blocks spill the
rows themselves out of the cache and lose it again)."""
LANGUAGE_SAMPLE = 2_000
"""Name pairs per level kept (reservoir sample) for the script-mismatch warning."""

_STATUSES: tuple[ParseStatus, ...] = tuple(ParseStatus)
_STATUS_CODE = {s: i for i, s in enumerate(_STATUSES)}
_LABEL_OF = {"country_code": "country", "admin1": "admin1", "admin2": "admin2", "city": "city"}


@dataclass
class Score:
    """Numbers for one file (or one group). Accuracies in percent (0–100), distances in km."""

    n: int
    parsed: int
    metrics: dict[str, float]
    ci95: dict[str, tuple[float, float]]
    warnings: list[str] = field(default_factory=list)
    groups: dict[str, Score] = field(default_factory=dict)

    def to_dict(self, include_warnings: bool = True) -> dict[str, Any]:
        """The JSON shape of ``geosleuth score --format json`` (NaN becomes null)."""
        out: dict[str, Any] = {
            "n": self.n,
            "parsed": self.parsed,
            "metrics": {k: _round(k, v) for k, v in self.metrics.items()},
            "ci95": {k: [_round(k, lo), _round(k, hi)] for k, (lo, hi) in self.ci95.items()},
        }
        if include_warnings:
            out["warnings"] = list(self.warnings)
        if self.groups:
            out["groups"] = {k: g.to_dict(include_warnings=False) for k, g in self.groups.items()}
        return out


def _round(name: str, value: float) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, 3 if name.endswith("_km") else 2)


@dataclass
class ScoreArrays:
    """Per-row arrays every summary is computed from."""

    distances: NDArray[np.float64]
    parsed: NDArray[np.bool_]
    hits: dict[str, NDArray[np.bool_]]
    scored: dict[str, NDArray[np.bool_]]  # rows a metric is defined on (truth label present, …)
    points: dict[str, NDArray[np.float64]]
    pred_levels: dict[str, NDArray[np.object_]]
    distance_metrics: bool = True  # False when no row has true coordinates (e.g. multiple choice)
    published: NDArray[np.bool_] | None = None  # rows a protocol's released code keeps for distances


@dataclass
class RowColumns:
    """What ``--rows`` prints, as columns (no per-row dicts are kept while scoring)."""

    line: NDArray[np.int32]
    status: NDArray[np.int8]
    coords: tuple[NDArray[np.float64], ...]  # pred lat, pred lon, true lat, true lon
    ids: list[str | None]
    formats: list[str | None]
    recovered: list[str]
    problems: dict[int, str]


@dataclass
class FileScore:
    """A scored file: the summary plus, when asked for, per-row columns."""

    path: str
    protocol: str
    score: Score
    arrays: ScoreArrays | None = None
    columns: RowColumns | None = None
    records: list[dict[str, Any]] | None = None  # per-row records of a benchmark's own file scorer

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        """Per-row records (``--rows``), built one at a time from the columns."""
        if self.records is not None:
            yield from self.records
            return
        if self.columns is None or self.arrays is None:
            return
        c, a = self.columns, self.arrays
        plat, plon, tlat, tlon = c.coords
        for i in range(len(c.line)):
            rec: dict[str, Any] = {
                "id": c.ids[i],
                "line": int(c.line[i]),
                "status": _STATUSES[c.status[i]].value,
                "format": c.formats[i],
                "pred_lat": _num(plat[i]),
                "pred_lon": _num(plon[i]),
                "true_lat": _num(tlat[i]),
                "true_lon": _num(tlon[i]),
                "distance_km": _num(a.distances[i]),
            }
            for name, p in a.points.items():
                rec[name] = float(p[i])
            for key, values in a.pred_levels.items():
                rec[f"pred_{key}"] = values[i]
            for name, h in a.hits.items():
                rec[name] = bool(h[i]) if name not in a.scored or a.scored[name][i] else None
            rec["recovered"] = c.recovered[i]
            rec["problem"] = c.problems.get(i)
            yield rec

    @property
    def rows(self) -> list[dict[str, Any]]:
        """All per-row records (empty unless scored with ``keep_rows``)."""
        return list(self.iter_rows())


class _Growing:
    """A column appended in Python lists and frozen into NumPy chunks (compact, amortised)."""

    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype
        self.buffer: list[Any] = []  # one list for the column's life: callers may bind its append
        self.chunks: list[NDArray[Any]] = []

    def append(self, value: Any) -> None:
        self.buffer.append(value)

    def flush(self) -> None:
        if self.buffer:
            self.chunks.append(np.array(self.buffer, dtype=self.dtype))
            self.buffer.clear()

    def array(self) -> NDArray[Any]:
        self.flush()
        if not self.chunks:
            return np.zeros(0, dtype=self.dtype)
        if len(self.chunks) > 1:
            self.chunks = [np.concatenate(self.chunks)]
        return self.chunks[0]


class _Interned:
    """Strings as int32 codes into one table (repeated labels and group names cost 4 bytes)."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {"": 0}
        self.table: list[str] = [""]
        self.column = _Growing(np.int32)

    def append(self, value: str | None) -> None:
        key = value or ""
        code = self.codes.get(key)
        if code is None:
            code = self.codes[key] = len(self.table)
            self.table.append(key)
        self.column.append(code)

    def values(self) -> NDArray[np.object_]:
        return np.array(self.table, dtype=object)[self.column.array()]


class _Capped:
    """The first few messages of a kind and how many there were."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.count = 0

    def add(self, message: str) -> None:
        self.count += 1
        if len(self.items) < SHOWN:
            self.items.append(message)


def _merged_problems(groups: Sequence[_Capped | list[str]]) -> list[str]:
    """The first ten problems across kinds, in order, then a count of the rest."""
    shown: list[str] = []
    total = 0
    for g in groups:
        items, count = (g, len(g)) if isinstance(g, list) else (g.items, g.count)
        total += count
        shown.extend(items[: max(0, SHOWN - len(shown))])
    if total > SHOWN:
        shown.append(f"… and {total - SHOWN} more")
    return shown


class _DuplicateIds:
    """Duplicate ids found in bounded memory: 64-bit hashes in sorted NumPy chunks, not a dict.

    Rows are buffered and checked a chunk at a time, vectorised: against the earlier chunks
    (a one-bit-per-slot filter, then a binary search in each sorted chunk) and within the chunk
    (a stable sort). Duplicates are reported in row order, each with the line of its first sighting.
    """

    def __init__(self, report: Callable[[str, int, int], None]) -> None:
        self.report = report
        self.sorted: list[tuple[NDArray[np.int64], NDArray[np.int32]]] = []
        self.sids: list[str] = []
        self.lines: list[int] = []
        # one bit per hash slot, set for frozen ids: most rows skip the sorted chunks altogether
        self.filter = np.zeros(FILTER_BITS // 8, dtype=np.uint8)

    def add(self, sid: str, line: int) -> None:
        self.sids.append(sid)
        self.lines.append(line)
        if len(self.sids) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        """Check the buffered rows, report their duplicates and freeze their new ids."""
        if not self.sids:
            return
        sids, self.sids = self.sids, []
        keys = np.fromiter(map(hash, sids), dtype=np.int64, count=len(sids))
        lines = np.array(self.lines, dtype=np.int32)
        self.lines = []
        first = self._frozen_lines(keys)  # 0 where the id was not seen in an earlier chunk
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        starts = np.ones(ordered.size, dtype=bool)
        starts[1:] = ordered[1:] != ordered[:-1]
        run_first = lines[order][np.maximum.accumulate(np.where(starts, np.arange(ordered.size), 0))]
        within = np.empty_like(lines)
        within[order] = np.where(starts, 0, run_first)  # a repeat inside this chunk: its run's first line
        first = np.where(first > 0, first, within)
        for i in np.flatnonzero(first > 0):
            self.report(sids[i], int(lines[i]), int(first[i]))
        new = order[starts]
        new = new[first[new] == 0]
        self._freeze(keys[new], lines[new])

    def _frozen_lines(self, keys: NDArray[np.int64]) -> NDArray[np.int32]:
        out = np.zeros(keys.size, dtype=np.int32)
        slots = keys & (FILTER_BITS - 1)
        maybe = np.flatnonzero((self.filter[slots >> 3] >> (slots & 7)) & 1)
        for frozen_keys, frozen_lines in self.sorted:
            if not maybe.size:
                break
            at = np.minimum(np.searchsorted(frozen_keys, keys[maybe]), frozen_keys.size - 1)
            hit = frozen_keys[at] == keys[maybe]
            out[maybe[hit]] = frozen_lines[at[hit]]
            maybe = maybe[~hit]
        return out

    def _freeze(self, keys: NDArray[np.int64], lines: NDArray[np.int32]) -> None:
        if not keys.size:
            return
        order = np.argsort(keys, kind="stable")
        self.sorted.append((keys[order], lines[order]))
        slots = keys & (FILTER_BITS - 1)
        np.bitwise_or.at(self.filter, slots >> 3, np.left_shift(1, slots & 7).astype(np.uint8))
        while len(self.sorted) > 1 and self.sorted[-1][0].size >= self.sorted[-2][0].size:
            (k1, l1), (k2, l2) = self.sorted[-2], self.sorted.pop()  # merge like a binary counter
            keys, lines = np.concatenate([k1, k2]), np.concatenate([l1, l2])
            order = np.argsort(keys, kind="stable")
            self.sorted[-1] = (keys[order], lines[order])

    def contains(self, sid: str) -> bool:
        return bool(self.contains_all([sid])[0])

    def contains_all(self, sids: Sequence[str]) -> NDArray[np.bool_]:
        """Which of ``sids`` were added, in one vectorised pass (a dataset of 10^6 ids included)."""
        self.flush()
        keys = np.fromiter(map(hash, sids), dtype=np.int64, count=len(sids))
        return self._frozen_lines(keys) > 0


class _Reservoir:
    """A seeded uniform sample of (predicted, truth) name pairs for the language warning.

    Li's Algorithm L: the gap to the next replacement is drawn directly, so past the first
    ``size`` pairs a pair costs a comparison, not a random draw (O(size·log(n/size)) draws).
    """

    def __init__(self, size: int = LANGUAGE_SAMPLE) -> None:
        self.size = size
        self.items: list[tuple[str, str]] = []
        self.seen = 0
        self.rng = random.Random(0)
        self.weight = 1.0
        self.next = size  # index (0-based count) of the next pair that replaces one in the sample

    def add(self, pair: tuple[str, str]) -> None:
        i = self.seen
        self.seen += 1
        if i != self.next and i >= self.size:
            return  # most pairs: no replacement until the drawn gap has passed
        if i < self.size:
            self.items.append(pair)
            if self.seen == self.size:
                self._skip()
        elif i == self.next:
            self.items[self.rng.randrange(self.size)] = pair
            self._skip()

    def _skip(self) -> None:
        rng = self.rng
        self.weight *= math.exp(math.log(1.0 - rng.random()) / self.size)
        if 0.0 < self.weight < 1.0:
            gap = math.floor(math.log(1.0 - rng.random()) / math.log1p(-self.weight))
        else:  # float edge cases: W = 1 replaces the next pair, W = 0 never replaces again
            gap = 0 if self.weight >= 1.0 else sys.maxsize
        self.next += gap + 1 if self.seen > self.size else gap


class _Accumulator:
    """Reduces each row to a few column entries as it arrives."""

    def __init__(
        self,
        name: str,
        protocol: ScoringProtocol,
        aliases: AliasFn | None,
        verifier: VerifierFn | None,
        by: str | None,
        keep_rows: bool,
        truth_prefix: str | None,
        reverse: ReverseFn | None = None,
    ) -> None:
        self.name = name
        self.reverse = reverse
        # coordinates are scored chunk by chunk and dropped, unless --rows prints them or the
        # protocol (OSV-5M) needs to see every row's labels before it can score any level
        self.stream_coords = not protocol.truth_levels_from_labels
        self.coord_chunks: list[_CoordChunk] = []
        self.window: list[list[NDArray[np.float64]]] = [[], [], [], []]
        self.window_rows = 0
        self.any_truth_coords = False
        self.protocol = protocol
        self.aliases = aliases
        self.verifier = verifier
        self.by = by
        self.keep_rows = keep_rows
        self.prefixes = (name,) if truth_prefix is None else (name, truth_prefix)
        self.n = 0
        self.any_truth = False
        self.line = _Growing(np.int32)
        self.status = _Growing(np.int8)
        self.coords = [_Growing(np.float64) for _ in range(4)]
        self.has_labels = _Growing(bool)
        keys = [k for _, k in protocol.coord_levels]
        self.truth_labels = (
            {k: _Interned() for k in keys} if keys and protocol.truth_levels_from_labels else {}
        )
        self.label_seen = dict.fromkeys(self.truth_labels, False)
        self.choice_hit = _Growing(bool)
        self.choice_scored = _Growing(bool)
        self.any_choice = False
        levels = [lv for _, lv in protocol.text_levels]
        self.text_hit = {lv: _Growing(bool) for lv in levels}
        self.text_scored = {lv: _Growing(bool) for lv in levels}
        self.text_seen = dict.fromkeys(levels, False)
        self.pairs = {lv: _Reservoir() for lv in levels}
        self._matches = lru_cache(maxsize=65_536)(self._text_matches)
        self.unfoldable = dict.fromkeys(levels, 0)
        self.has_response = _Growing(bool)
        self.no_verdict = _Capped()
        self.groups = _Interned() if by else None
        self.ids: list[str | None] = []
        self.formats: list[str | None] = []
        self.recovered: list[str] = []
        self.problem_at: dict[int, str] = {}
        self.unparsed_lines = _Capped()
        self.dropped_lines = _Capped()
        self.duplicates = _Capped()
        self.row_problems = _Capped()
        self.ids_seen = _DuplicateIds(self._duplicate)
        # every row appends to these: bound once (each column keeps one buffer list for its life)
        self._append_line, self._append_status = self.line.buffer.append, self.status.buffer.append
        self._append_plat, self._append_plon, self._append_tlat, self._append_tlon = (
            c.buffer.append for c in self.coords
        )
        self._append_has_labels = self.has_labels.buffer.append
        self._append_choice_hit = self.choice_hit.buffer.append
        self._append_choice_scored = self.choice_scored.buffer.append
        self._level_columns = [
            (lv, self.text_hit[lv].buffer.append, self.text_scored[lv].buffer.append, self.pairs[lv])
            for lv in self.text_hit
        ]

    def add(
        self,
        line: int,
        sid: str | None,
        prediction: Prediction,
        truth: Truth | None,
        data: Mapping[str, Any] | None,
        problem: str | None,
    ) -> None:
        i = self.n
        self.n += 1
        status = prediction.status
        self._append_line(line)
        self._append_status(_STATUS_CODE[status])
        if line and status is not ParseStatus.OK and status is not ParseStatus.PARTIAL:
            self.unparsed_lines.add(str(line))
        lat, lon = prediction.lat, prediction.lon
        if lat is not None and lon is not None:
            self._append_plat(lat)
            self._append_plon(lon)
        else:
            self._append_plat(math.nan)
            self._append_plon(math.nan)
        if truth is not None:
            labels = truth.labels
            if truth.lat is not None and truth.lon is not None:
                self._append_tlat(truth.lat)
                self._append_tlon(truth.lon)
                self.any_truth = True
            else:
                self._append_tlat(math.nan)
                self._append_tlon(math.nan)
            answer = truth.answer
            if labels or answer:
                self.any_truth = True
        else:
            labels, answer = {}, None
            self._append_tlat(math.nan)
            self._append_tlon(math.nan)
        self._append_has_labels(bool(labels))
        for key, column in self.truth_labels.items():
            value = labels.get(_LABEL_OF.get(key, key))
            if value is not None:
                self.label_seen[key] = True
            column.append(value)
        if answer:
            self._append_choice_scored(True)
            self.any_choice = True
            choice = prediction.choice
            right = bool(choice) and str(choice).strip().upper() == str(answer).strip().upper()
            self._append_choice_hit(right)
        else:
            self._append_choice_scored(False)
            self._append_choice_hit(False)
        if self.text_hit:
            if self.protocol.level_rule == "geovista":
                self._geovista_levels(i, prediction, labels)
            else:
                self._name_levels(prediction, labels)
        if self.groups is not None:
            self.groups.append(field_value(data, truth, self.by or "") or MISSING_GROUP)  # type: ignore[arg-type]
        if self.keep_rows:
            self.ids.append(sid)
            self.formats.append(prediction.format)
            self.recovered.append(",".join(prediction.recovered))
        if problem:
            if self.keep_rows:
                self.problem_at[i] = problem
            if line:
                self.row_problems.add(
                    problem if problem.startswith(self.prefixes) else f"{self.name}:{line}: {problem}"
                )
        if sid is not None and line:
            self.ids_seen.add(sid, line)
        if len(self.line.buffer) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        """Freeze the buffered rows into columns; score their coordinates when streaming."""
        if self.stream_coords and self.coords[0].buffer:
            arrays = [np.array(c.buffer, dtype=np.float64) for c in self.coords]
            for column, values in zip(self.coords, arrays, strict=True):
                column.buffer.clear()
                if self.keep_rows:
                    column.chunks.append(values)
            self._score_coordinates(*arrays)
        for column in self._columns():
            column.flush()
        self.ids_seen.flush()

    def _score_coordinates(self, *coords: NDArray[np.float64]) -> None:
        plat, plon, tlat, tlon = coords
        self.any_truth_coords = self.any_truth_coords or bool(np.isfinite(tlat).any())
        take = min(plat.size, MISALIGNMENT_WINDOW - self.window_rows)
        if take > 0:
            for kept, values in zip(self.window, coords, strict=True):
                kept.append(values[:take].copy())
            self.window_rows += take
        if self.protocol.coord_levels and self.reverse is None:
            self.reverse = default_reverse(self.protocol)
        chunk = _coordinate_chunk(
            plat, plon, tlat, tlon, self.protocol, self.reverse, keep_pred_levels=self.keep_rows
        )
        self.coord_chunks.append(chunk)

    def window_coords(self) -> tuple[NDArray[np.float64], ...]:
        """The first rows' coordinates, for the misalignment check."""
        if not self.stream_coords:
            return tuple(c.array()[:MISALIGNMENT_WINDOW] for c in self.coords)
        return tuple(np.concatenate(k) if k else np.zeros(0) for k in self.window)

    def _columns(self) -> Iterator[_Growing]:
        yield from (self.line, self.status, self.has_labels, self.choice_hit, self.choice_scored)
        if not self.stream_coords:
            yield from self.coords
        yield from (c.column for c in self.truth_labels.values())
        yield from (*self.text_hit.values(), *self.text_scored.values(), self.has_response)
        if self.groups is not None:
            yield self.groups.column

    def _duplicate(self, sid: str, line: int, first: int) -> None:
        self.duplicates.add(f"{self.name}:{line}: duplicate id {sid!r} (also on line {first})")

    def _name_levels(self, prediction: Prediction, labels: Mapping[str, str]) -> None:
        """Predicted names against labels (alias-aware); coarser implication applied at the end."""
        for level, hit, scored, sample in self._level_columns:
            truth = labels.get(level)
            if not truth:
                hit(False)
                scored(False)
                continue
            self.text_seen[level] = True
            predicted = getattr(prediction, level, None)  # Prediction.level, inlined: three calls a row
            if predicted is None and level in PLACE_LEVELS:
                predicted = prediction.place
            if predicted:
                sample.add((predicted, truth))
                hit(self._matches(predicted, truth, level))
            else:
                hit(False)
            scored(True)

    def _text_matches(self, predicted: str, truth: str, level: str) -> bool:
        """``text_matches`` for one name pair; memoised because labels repeat across rows."""
        return M.text_matches(predicted, truth, level, aliases=self.aliases)

    def _geovista_levels(self, i: int, prediction: Prediction, labels: Mapping[str, str]) -> None:
        """GeoVista: whole-term rule on the final turn, or the verifier's verdict in its place."""
        response = GV.final_turn(prediction.raw)
        hits = dict.fromkeys(GV.LEVELS, False)
        kept = response != ""  # the released code drops rows without a final answer
        if kept and self.verifier is None:
            hits = GV.rule_levels(response, labels)
        elif kept:
            verdict = self._verdict(response, labels)
            kept = verdict is not None
            if verdict is not None:
                hits = GV.verifier_levels(verdict)
        self.has_response.append(kept)
        for level in GV.LEVELS:
            truth = labels.get(level)
            if truth:
                self.text_seen[level] = True
                if not GV.normalize_text(truth):
                    self.unfoldable[level] += 1
            self.text_scored[level].append(kept)
            self.text_hit[level].append(hits[level])

    def _verdict(self, response: str, labels: Mapping[str, str]) -> Mapping[str, bool] | None:
        assert self.verifier is not None
        try:
            verdict = self.verifier(response, labels)
        except Exception as exc:  # noqa: BLE001 - a failed verification is a recorded, dropped row
            self.no_verdict.add(f"{type(exc).__name__}: {exc}")
            return None
        if verdict is None:
            self.no_verdict.add("no verdict")
        return verdict

    def finish_missing(self, index: Mapping[str, Truth], truth_path: Path) -> list[str]:
        """Dataset samples without a prediction: one EMPTY row each; returns the summary problem."""
        ids = list(index)
        seen = self.ids_seen.contains_all(ids)
        missing = [sid for sid, was_seen in zip(ids, seen.tolist(), strict=True) if not was_seen]
        for sid in missing:
            self.add(0, sid, Prediction(status=ParseStatus.EMPTY), index[sid], None, "no prediction")
        if not missing:
            return []
        return [
            f"{len(missing)} sample(s) of {truth_path} have no prediction in {self.name} and count as wrong "
            f"(first: {', '.join(map(repr, missing[:5]))})"
        ]


def _reverse_levels(
    reverse: ReverseFn, lats: NDArray[np.float64], lons: NDArray[np.float64], keys: Sequence[str]
) -> dict[str, NDArray[np.object_]]:
    """Reverse-geocode the finite points only, in chunks; other rows get empty labels."""
    out = {k: np.full(lats.shape, "", dtype=object) for k in keys}
    ok = np.flatnonzero(np.isfinite(lats) & np.isfinite(lons))
    for start in range(0, ok.size, VECTOR_CHUNK):
        rows = ok[start : start + VECTOR_CHUNK]
        found = reverse(lats[rows], lons[rows])
        for k in keys:
            values = np.array(found[k], dtype=object).reshape(-1)
            values[values == None] = ""  # noqa: E711 - elementwise None test
            out[k][rows] = values
    return out


@dataclass
class _CoordChunk:
    """Distances and coordinate-level hits of consecutive rows (predicted vs true coordinates)."""

    d: NDArray[np.float64]
    level_hits: dict[str, NDArray[np.bool_]]  # metric -> hit, already requiring both points
    pred_levels: dict[str, NDArray[np.object_]]
    points: dict[str, NDArray[np.float64]] = field(default_factory=dict)


def _coordinate_chunk(
    plat: NDArray[np.float64],
    plon: NDArray[np.float64],
    tlat: NDArray[np.float64],
    tlon: NDArray[np.float64],
    protocol: ScoringProtocol,
    reverse: ReverseFn | None,
    truth_levels: Mapping[str, NDArray[np.object_]] | None = None,
    has_labels: NDArray[np.bool_] | None = None,
    keep_pred_levels: bool = True,
) -> _CoordChunk:
    """One vectorised step: distances, and levels by reverse-geocoding prediction and truth."""
    d = np.asarray(
        distance_km(plat, plon, tlat, tlon, method=protocol.distance, radius_km=protocol.radius_km),
        dtype=np.float64,
    ).reshape(-1)
    level_hits: dict[str, NDArray[np.bool_]] = {}
    pred_levels: dict[str, NDArray[np.object_]] = {}
    points: dict[str, NDArray[np.float64]] = {}
    if protocol.geoguessr:
        points["geoguessr"] = M.geoguessr_points(d)
        if protocol.geoguessr_round:
            points["geoguessr"] = np.round(points["geoguessr"])
    if protocol.geoscore:  # GeoAgent measures on R = 6371 km (paper Table 5, released code)
        same = protocol.distance == "haversine" and protocol.radius_km == GEOAGENT_RADIUS_KM
        d_geo = d if same else distance_km(plat, plon, tlat, tlon, radius_km=GEOAGENT_RADIUS_KM).reshape(-1)
        points["geoscore"] = M.geoscore_points(d_geo)
    if protocol.reverse == "polygon" and d.size:  # PIGEON: reverse is the gazetteer's country_batch
        hits = polygon_country_hits(reverse, plat, plon, tlat, tlon)  # type: ignore[arg-type]
        level_hits = {metric: hits for metric, _ in protocol.coord_levels}
    elif protocol.coord_levels and d.size:
        assert reverse is not None
        keys = [k for _, k in protocol.coord_levels]
        valid = np.isfinite(plat) & np.isfinite(plon)
        has_truth = np.isfinite(tlat) & np.isfinite(tlon)
        if has_labels is not None and truth_levels is not None:
            has_truth |= has_labels
        if truth_levels is None:  # one reverse-geocoding pass over predictions and truth together
            both = _reverse_levels(reverse, np.concatenate([plat, tlat]), np.concatenate([plon, tlon]), keys)
            pred = {k: v[: plat.size] for k, v in both.items()}
            true = {k: v[plat.size :] for k, v in both.items()}
        else:
            pred = _reverse_levels(reverse, plat, plon, keys)
            true = {k: np.asarray(truth_levels[k], dtype=object) for k in keys}
        if protocol.nested_levels:
            hits = M.level_hits_from_coordinates(pred, true, keys)
        else:
            hits = {k: M.label_hits(pred[k], true[k]) for k in keys}
        for metric, key in protocol.coord_levels:
            level_hits[metric] = hits[key] & valid & has_truth
        if keep_pred_levels:
            pred_levels = pred
    return _CoordChunk(d, level_hits, pred_levels, points)


def _assemble(chunks: list[_CoordChunk], protocol: ScoringProtocol, parsed: NDArray[np.bool_]) -> ScoreArrays:
    """Chunks -> one ScoreArrays with threshold hits and points; empties ``chunks`` as it goes."""

    def take(get: Callable[[_CoordChunk], NDArray[Any]]) -> NDArray[Any]:
        return np.concatenate([get(c) for c in chunks])

    if not chunks:  # an empty file: every metric is defined on nothing, by the same chunk step
        empty = np.zeros(0)
        chunks.append(_coordinate_chunk(empty, empty, empty, empty, protocol, None))
    d = take(lambda c: c.d)
    for c in chunks:
        c.d = np.zeros(0)
    hits: dict[str, NDArray[np.bool_]] = {}
    for t in protocol.thresholds:
        hits[M.threshold_name(t)] = M.hits_at(d, t, protocol.strict_threshold)
    first = chunks[0]
    points = {name: take(lambda c, n=name: c.points[n]) for name in first.points}
    for metric, _ in protocol.coord_levels if first.level_hits else ():
        hits[metric] = take(lambda c, m=metric: c.level_hits[m])
    pred_levels = {key: take(lambda c, k=key: c.pred_levels[k]) for key in first.pred_levels}
    chunks.clear()
    return ScoreArrays(d, parsed, hits, {}, points, pred_levels)


def arrays_from_coordinates(
    plat: ArrayLike,
    plon: ArrayLike,
    tlat: ArrayLike,
    tlon: ArrayLike,
    protocol: ScoringProtocol,
    reverse: ReverseFn | None = None,
    parsed: NDArray[np.bool_] | None = None,
    truth_levels: Mapping[str, NDArray[np.object_]] | None = None,
    has_labels: NDArray[np.bool_] | None = None,
    keep_pred_levels: bool = True,
) -> ScoreArrays:
    """The vectorised core: predicted vs true coordinates (NaN = failed) -> per-row hits and points."""
    plat, plon, tlat, tlon = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (plat, plon, tlat, tlon))
    answered = np.isfinite(plat) & np.isfinite(plon)
    plat, plon = released_points(protocol, plat, plon)  # G3: out of range -> 0, no answer -> (0, 0)
    if protocol.coord_levels and plat.size:
        reverse = reverse or default_reverse(protocol)
    chunks = []
    for start in range(0, plat.size, VECTOR_CHUNK):
        s = slice(start, start + VECTOR_CHUNK)
        chunks.append(
            _coordinate_chunk(
                plat[s],
                plon[s],
                tlat[s],
                tlon[s],
                protocol,
                reverse,
                None if truth_levels is None else {k: v[s] for k, v in truth_levels.items()},
                None if has_labels is None else has_labels[s],
                keep_pred_levels,
            )
        )
    return _assemble(chunks, protocol, answered if parsed is None else parsed)


def score_coordinates(
    plat: ArrayLike,
    plon: ArrayLike,
    tlat: ArrayLike,
    tlon: ArrayLike,
    protocol: ScoringProtocol,
    reverse: ReverseFn | None = None,
) -> Score:
    """Score coordinate arrays directly (no files): the path evaluation and benchmarks use."""
    return summarize(
        arrays_from_coordinates(plat, plon, tlat, tlon, protocol, reverse, keep_pred_levels=False), protocol
    )


def summarize(arrays: ScoreArrays, protocol: ScoringProtocol, index: NDArray[np.intp] | None = None) -> Score:
    """Metrics, CIs and counts over all rows or a subset (a ``--by`` group)."""
    sel = slice(None) if index is None else index
    d = arrays.distances[sel]
    n = int(d.size)
    metrics: dict[str, float] = {}
    ci95: dict[str, tuple[float, float]] = {}
    for name, h in arrays.hits.items():
        h_sel = h[sel]
        if name in arrays.scored:
            h_sel = h_sel[arrays.scored[name][sel]]
        metrics[name] = 100.0 * M.accuracy(h_sel)
        lo, hi = M.bootstrap_ci(h_sel, n_boot=N_BOOT, seed=0)
        ci95[name] = (100.0 * lo, 100.0 * hi)
    if arrays.distance_metrics:
        if protocol.median_mean:  # = M.median_km / M.mean_km, with one charged copy
            charged = M.charged_distances(d)
            mean = float(charged.mean()) if charged.size else math.nan
            metrics["median_km"] = M.median_finite(charged, in_place=True)
            metrics["mean_km"] = mean
        if protocol.median == "lower":
            if arrays.published is not None:
                metrics["median_km"] = GV.lower_median(d[arrays.published[sel]])
                metrics["all_median_km"] = GV.lower_median(M.charged_distances(d))
            else:
                metrics["median_km"] = GV.lower_median(M.charged_distances(d))
    for name, p in arrays.points.items():
        values = p[sel]
        metrics[name] = float(values.mean()) if values.size else math.nan
    return Score(n=n, parsed=int(arrays.parsed[sel].sum()), metrics=_ordered(metrics), ci95=ci95)


def _ordered(metrics: dict[str, float]) -> dict[str, float]:
    """Distance thresholds ascending first (as published, then every row), then the rest."""

    def km(k: str) -> float:
        return float(k.split("@", 1)[1][:-2])

    dist = sorted((k for k in metrics if k.startswith("acc@")), key=km)
    every = sorted((k for k in metrics if k.startswith("all_acc@")), key=km)
    rest = {k: v for k, v in metrics.items() if k not in dist and k not in every}
    return {**{k: metrics[k] for k in dist}, **{k: metrics[k] for k in every}, **rest}


def default_reverse(protocol: ScoringProtocol) -> ReverseFn:
    """The offline gazetteer's reverse geocoder with the semantics the protocol names."""
    from geosleuth.gazetteer import get_gazetteer

    gazetteer = get_gazetteer()
    if protocol.reverse == "reverse_geocoder":
        return gazetteer.reverse_geocoder_batch  # type: ignore[no-any-return]
    if protocol.reverse == "polygon":
        return gazetteer.country_batch  # type: ignore[no-any-return]
    return gazetteer.reverse_batch  # type: ignore[no-any-return]


def gazetteer_aliases(gazetteer: Any) -> AliasFn:
    """Two names are the same place when the gazetteer's best match for each is the same place.

    Catches exonyms and other languages ("München" / "Munich", "Wien" / "Vienna").
    """

    @lru_cache(maxsize=200_000)
    def best(name: str) -> str | None:
        try:
            places = gazetteer.search(name, limit=1)
        except Exception:  # noqa: BLE001 - an unsearchable name simply has no alias
            return None
        return str(places[0].id) if places else None

    def same(predicted: str, truth: str, level: str) -> bool:
        a = best(predicted)
        return a is not None and a == best(truth)

    return same


def default_geocoder() -> Geocoder:
    """The offline gazetteer as a forward geocoder."""
    from geosleuth.gazetteer import get_gazetteer

    return get_gazetteer()  # type: ignore[no-any-return]


def score_file(
    path: Path,
    protocol: ScoringProtocol,
    truth_path: Path | None = None,
    by: str | None = None,
    geocoder: Geocoder | None = None,
    reverse: ReverseFn | None = None,
    aliases: AliasFn | None = None,
    verifier: VerifierFn | None = None,
    keep_rows: bool = True,
    judge: Any = None,
    columns: Mapping[str, str] | None = None,
) -> FileScore:
    """Score one prediction file in one streaming pass.

    Raises :class:`ScoreInputError` only for fatal input problems. ``keep_rows`` keeps the
    per-row columns ``FileScore.iter_rows`` prints; without it memory per row is a few dozen bytes.
    ``verifier`` (GeoVista) replaces the level rule with a model's verdict, as the released code does.
    ``judge`` is handed to a protocol's own file scorer (WhereBench's released LLM judge).
    ``columns`` ({file column: reader key}, see ``scoring.columns.parse_columns``) names the
    columns of a file whose names the reader does not know.
    """
    if protocol.file_scorer and columns:
        raise ScoreInputError(
            f"--columns does not apply to {protocol.name}, which reads its own released files"
        )
    if protocol.file_scorer:  # a benchmark with its own rules (WhereBench), named as a plugin path
        module, _, function = protocol.file_scorer.partition(":")
        scorer: Callable[..., FileScore] = getattr(importlib.import_module(module), function)
        return (
            scorer(path, protocol, truth_path) if judge is None else scorer(path, protocol, truth_path, judge)
        )
    if judge is not None:
        raise ScoreInputError(
            f"--judge applies to protocols with their own judge (wherebench), not {protocol.name}"
        )
    name = str(path)
    truth: dict[str, Truth] | None = None
    truth_problems: list[str] = []
    read_notes: list[str] = []
    if truth_path is not None:
        truth, truth_problems = truth_index(truth_path, keep_fields=by is not None, notes=read_notes)
    if protocol.geocode and geocoder is None:
        geocoder = default_geocoder()
    if (
        protocol.text_levels
        and protocol.level_rule == "names"
        and aliases is None
        and hasattr(geocoder, "search")
    ):
        aliases = gazetteer_aliases(geocoder)
    truth_name = str(truth_path) if truth_path is not None else None
    acc = _Accumulator(name, protocol, aliases, verifier, by, keep_rows, truth_name, reverse)
    # labels are read by level protocols only; the others need them where truth has no coordinates
    with_labels = bool(protocol.text_levels or protocol.truth_levels_from_labels)
    rows = iter_rows(path, read_notes)
    if columns:
        rows = _mapped(rows, columns, name)
    while block := list(islice(rows, PARSE_BLOCK)):
        parsed = [
            None if raw.data is None else prediction_from_row(raw.data, protocol, geocoder) for raw in block
        ]
        for raw, read in zip(block, parsed, strict=True):
            if raw.data is None or read is None:
                acc.add(raw.line, None, Prediction(status=ParseStatus.FAILED), None, None, raw.error)
                continue
            sid = row_id(raw.data)
            prediction, pred_problem, from_columns = read
            row_truth, truth_problem = _row_truth(raw.data, sid, truth, truth_path, from_columns, with_labels)
            problem = f"{pred_problem}; {truth_problem}" if pred_problem and truth_problem else None
            acc.add(raw.line, sid, prediction, row_truth, raw.data, problem or pred_problem or truth_problem)
    missing_problem = acc.finish_missing(truth, truth_path) if truth is not None and truth_path else []
    if acc.n and not acc.any_truth:
        raise ScoreInputError(
            f"{name}: no row carries ground truth (expected a ground_truth object or true_lat/true_lon "
            f"columns); pass the dataset with --truth FILE"
        )
    acc.flush()
    arrays, notes = _arrays(acc, protocol, keep_rows)
    score = summarize(arrays, protocol)
    problems = _merged_problems([truth_problems, acc.duplicates, missing_problem, acc.row_problems])
    score.warnings = _warnings(path, acc, arrays, problems, [*read_notes, *notes])
    if by and acc.groups is not None:
        score.groups = _groups(acc.groups, arrays, protocol)
        if set(score.groups) == {MISSING_GROUP}:
            score.warnings.append(f"--by {by}: no row has this field")
    columns = None
    if keep_rows:
        columns = RowColumns(
            acc.line.array(),
            acc.status.array(),
            tuple(c.array() for c in acc.coords),
            acc.ids,
            acc.formats,
            acc.recovered,
            acc.problem_at,
        )
    return FileScore(name, protocol.name, score, arrays if keep_rows else None, columns)


def _mapped(rows: Iterator[InputRow], columns: Mapping[str, str], name: str) -> Iterator[InputRow]:
    """Rows with ``--columns`` applied; a mapped column the file lacks stops at the first row."""
    checked = False
    for raw in rows:
        if raw.data is not None:
            if not checked:
                missing = missing_columns(raw.data, columns)
                if missing:
                    raise ScoreInputError(
                        f"{name}: --columns names {', '.join(map(repr, missing))}, not a column of this "
                        f"file (it has {', '.join(list(raw.data)[:30])})"
                    )
                checked = True
            raw.data = renamed(raw.data, columns)
        yield raw


def _row_truth(
    data: dict[str, Any],
    sid: str | None,
    truth: Mapping[str, Truth] | None,
    truth_path: Path | None,
    from_columns: bool,
    with_labels: bool = True,
) -> tuple[Truth | None, str | None]:
    if truth is not None:
        row_truth = truth.get(sid) if sid is not None else None
        if row_truth is not None:
            return row_truth, row_truth.problem
        if sid is None:
            return None, "row has no id to join on"
        return None, f"no ground truth for id {sid!r} in {truth_path}"
    plain_coords = (
        from_columns
        or isinstance(data.get("solution_str"), str)
        or isinstance(data.get("response"), str)
        or isinstance(data.get("output"), str)
    )
    row_truth = truth_from_row(data, plain_coords=plain_coords, with_labels=with_labels)
    return row_truth, (row_truth.problem if row_truth is not None else "row has no ground truth")


def _arrays(acc: _Accumulator, protocol: ScoringProtocol, keep_rows: bool) -> tuple[ScoreArrays, list[str]]:
    """Columns -> distances, hits and points; plus notes for the warnings."""
    status = acc.status.array()
    parsed = np.isin(status, [_STATUS_CODE[ParseStatus.OK], _STATUS_CODE[ParseStatus.PARTIAL]])
    truth_levels = None
    if acc.stream_coords:
        arrays = _assemble(acc.coord_chunks, protocol, parsed)
        any_truth_coords = acc.any_truth_coords
    else:
        plat, plon, tlat, tlon = (c.array() for c in acc.coords)
        if acc.truth_labels and all(acc.label_seen.values()):
            truth_levels = {k: col.values() for k, col in acc.truth_labels.items()}
        arrays = arrays_from_coordinates(
            plat,
            plon,
            tlat,
            tlon,
            protocol,
            acc.reverse,
            parsed=parsed,
            truth_levels=truth_levels,
            has_labels=acc.has_labels.array(),
            keep_pred_levels=keep_rows,
        )
        any_truth_coords = bool(np.isfinite(tlat).any())
    notes: list[str] = []
    if acc.n and not any_truth_coords:
        arrays.distance_metrics = False
        coord_metrics = {m for m, _ in protocol.coord_levels} if truth_levels is None else set()
        arrays.hits = {
            k: v for k, v in arrays.hits.items() if not k.startswith("acc@") and k not in coord_metrics
        }
        arrays.points = {}
    if acc.any_choice:
        has_answer = acc.choice_scored.array()
        arrays.hits["acc_choice"] = acc.choice_hit.array()
        arrays.scored["acc_choice"] = has_answer
        if not has_answer.all():
            notes.append(f"acc_choice is computed on the {int(has_answer.sum())} multiple-choice rows")
    if protocol.text_levels and acc.n:
        if protocol.level_rule == "geovista":
            notes.extend(_geovista_arrays(acc, arrays, protocol))
        else:
            notes.extend(_name_level_arrays(acc, arrays, protocol))
    return arrays, notes


def _name_level_arrays(acc: _Accumulator, arrays: ScoreArrays, protocol: ScoringProtocol) -> list[str]:
    present = [lv for _, lv in protocol.text_levels if acc.text_seen[lv]]
    raw = {lv: acc.text_hit[lv].array() for lv in present}
    implied = M.imply_coarser(raw, order=present)
    notes: list[str] = []
    choice_only = acc.any_choice and bool(acc.choice_scored.array().all())
    for metric, lv in protocol.text_levels:
        if lv not in implied:
            if not choice_only:  # multiple-choice items have no place names to compare
                notes.append(f"{metric}: no row has a label for {lv}, so the metric is not available")
            continue
        has_label = acc.text_scored[lv].array()
        arrays.hits[metric] = implied[lv]
        arrays.scored[metric] = has_label
        if not has_label.all():
            notes.append(
                f"{metric} is computed on the {int(has_label.sum())} of {acc.n} rows with a {lv} label"
            )
        sample = acc.pairs[lv].items
        warning = language_warning([p for p, _ in sample], [t for _, t in sample], lv)
        if warning:
            notes.append(warning)
    return notes


def _geovista_arrays(acc: _Accumulator, arrays: ScoreArrays, protocol: ScoringProtocol) -> list[str]:
    """Level hits as published (rows with a final answer) and over every row; same for distances."""
    has_response = acc.has_response.array()
    notes: list[str] = []
    for metric, lv in protocol.text_levels:
        finer = GV.LEVELS[GV.LEVELS.index(lv) :]  # a correct city credits state and country
        if not any(acc.text_seen[f] for f in finer):
            notes.append(_unlabelled(arrays, metric, " or ".join(finer), acc.n, f"all_{metric}"))
            continue
        hits = acc.text_hit[lv].array()
        arrays.hits[metric] = hits
        arrays.scored[metric] = has_response
        arrays.hits[f"all_{metric}"] = hits
    published = has_response & np.isfinite(arrays.distances)
    if arrays.distance_metrics:
        arrays.published = published
        for t in protocol.thresholds:
            name = M.threshold_name(t)
            arrays.hits[f"all_{name}"] = arrays.hits[name]
            arrays.scored[name] = published
    lines = acc.line.array()
    no_answer = np.flatnonzero(~has_response)
    no_point = (
        np.flatnonzero(has_response & ~np.isfinite(arrays.distances)) if arrays.distance_metrics else []
    )
    if len(no_answer) or len(no_point):
        parts = []
        if len(no_answer):
            parts.append(f"{len(no_answer)} without a final answer{_line_list(lines[no_answer])}")
        if len(no_point):
            parts.append(
                f"{len(no_point)} whose answer gave no geocodable place{_line_list(lines[no_point])}"
            )
        notes.append(
            "GeoVista's released evaluation drops rows: " + "; ".join(parts) + ". acc_* and median_km "
            "are as published over the rows it keeps; all_* count every row (a dropped row is a miss, "
            "charged half the Earth's circumference in the median)"
        )
    if acc.no_verdict.count:
        notes.append(
            f"the verifier gave no verdict on {acc.no_verdict.count} row(s), dropped as the released code "
            f"drops them ({'; '.join(acc.no_verdict.items[:3])})"
        )
    for lv, count in acc.unfoldable.items():
        if count:
            notes.append(
                f"{count} ground-truth {lv} label(s) have no ASCII letters and can never match under "
                f"GeoVista's rule (it folds text to ASCII); --protocol default matches them by alias"
            )
    return notes


def _unlabelled(arrays: ScoreArrays, metric: str, levels: str, n: int, *also: str) -> str:
    """A level metric the data has no labels for: defined on no row, so null (never 0), and why."""
    for name in (metric, *also):
        arrays.hits[name] = np.zeros(n, dtype=bool)
        arrays.scored[name] = np.zeros(n, dtype=bool)
    names = " / ".join((metric, *also))
    return f"{names}: no row has a label for {levels}, so the metric is not available (null), not 0"


def _line_list(lines: NDArray[np.int32]) -> str:
    shown = [str(int(x)) for x in lines[:SHOWN] if x]
    if not shown:
        return ""
    more = ", …" if len(lines) > SHOWN else ""
    return f" (lines {', '.join(shown)}{more})"


def _warnings(
    path: Path, acc: _Accumulator, arrays: ScoreArrays, problems: list[str], notes: list[str]
) -> list[str]:
    out: list[str] = []
    if not acc.n:
        out.append(f"{path}: file is empty; nothing to score")
        return out
    unparsed = int((~arrays.parsed).sum())
    if unparsed:
        lines = acc.unparsed_lines
        shown = ", ".join(lines.items) + (", …" if lines.count > SHOWN else "")
        where = f" (lines {shown})" if lines.items else ""
        counted = "sit at the released point" if acc.protocol.unparsed_point else "count as wrong"
        out.append(f"{unparsed} of {acc.n} predictions could not be parsed and {counted}{where}")
    no_coords = int(np.sum(arrays.parsed & ~np.isfinite(arrays.distances)))
    if no_coords and arrays.distance_metrics:
        out.append(
            f"{no_coords} parsed predictions or their ground truth lack usable coordinates (count as wrong)"
        )
    out.extend(problems)
    warning = misalignment_warning(*acc.window_coords())
    if warning:
        out.append(warning)
    out.extend(notes)
    return out


def _groups(groups: _Interned, arrays: ScoreArrays, protocol: ScoringProtocol) -> dict[str, Score]:
    codes = groups.column.array()
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    members = {groups.table[int(codes[idx[0]])]: idx for idx in np.split(order, bounds) if idx.size}
    return {key: summarize(arrays, protocol, members[key]) for key in sorted(members)}


def _num(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None
