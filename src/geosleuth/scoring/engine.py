"""Score prediction files under a named protocol: a stream of rows -> compact columns -> metrics.

Rows are read, parsed and reduced one at a time (the accumulator here); what survives a row is a
handful of numbers in NumPy columns (``columnstore``: coordinates, status, per-level hits), so
memory grows by tens of bytes per row and nothing holds the row's text. Distances and reverse
geocoding run vectorised in chunks (``vectorised``). Per-row output (``--rows``) keeps a few
more columns (id, format, problem); ``results`` holds what a scored file gives.

Every row that cannot be parsed, joined or read counts as wrong; nothing leaves a denominator.
Where a protocol's released code drops rows (GeoVista), both figures are reported.
Reverse geocoding and geocoding are injected (the gazetteer by default) so tests can use fakes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

import geosleuth.scoring.geovista as geovista
from geosleuth.core import metrics as core_metrics
from geosleuth.core.ids import sample_key
from geosleuth.core.parsing import Geocoder
from geosleuth.core.records import PLACE_LEVELS, ParseStatus, Prediction
from geosleuth.scoring.checks import language_warning, misalignment_warning
from geosleuth.scoring.columns import missing_columns, renamed
from geosleuth.scoring.columnstore import (
    CHUNK,
    SHOWN,
    Capped,
    DuplicateIds,
    Growing,
    Interned,
    Reservoir,
    Texts,
    merged_problems,
)
from geosleuth.scoring.groupings import GROUPINGS, TruthGroups, group_disparity
from geosleuth.scoring.io import (
    IdJoin,
    InputRow,
    ScoreInputError,
    Truth,
    field_value,
    iter_rows,
    prediction_from_row,
    row_id,
    truth_from_row,
)
from geosleuth.scoring.peers import at_released_point
from geosleuth.scoring.protocols import ScoringProtocol
from geosleuth.scoring.results import STATUSES, FileScore, RowColumns, Score, ScoreArrays
from geosleuth.scoring.truthindex import TruthIndex, truth_index
from geosleuth.scoring.vectorised import (
    CoordColumns,
    ReverseFn,
    arrays_from_coordinates,
    assemble,
    coordinate_chunk,
    default_reverse,
    summarize,
)

AliasFn = Callable[[str, str, str], bool]
"""``(predicted, truth, level) -> same place?`` for names in different languages."""


VerifierFn = Callable[[str, Mapping[str, str]], Mapping[str, bool] | None]
"""``(final turn, truth labels) -> {country, admin1, city: bool}``; None or raising = no verdict."""

MISSING_GROUP = "(none)"
MISALIGNMENT_WINDOW = 50_000
"""Rows (the first ones, contiguous so row shifts show) the misalignment check looks at."""
PARSE_BLOCK = 128
"""Rows are parsed a block at a time, then tallied: each stage's code and data stay in the CPU
caches across the block (~10 % less CPU per row than row by row; much larger blocks spill the
rows themselves out of the cache and lose it again)."""

_STATUS_CODE = {s: i for i, s in enumerate(STATUSES)}
_LABEL_OF = {"country_code": "country", "admin1": "admin1", "admin2": "admin2", "city": "city"}


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
        self.coord_columns = CoordColumns()
        self.window: list[list[NDArray[np.float64]]] = [[], [], [], []]
        self.window_rows = 0
        self.any_truth_coords = False
        self.protocol = protocol
        self.aliases = aliases
        self.verifier = verifier
        self.by = by
        self.keep_rows = keep_rows
        self.keep_pred_levels = keep_rows  # the reverse-geocoded places of predictions, for --rows
        self.keep_points = keep_rows  # the predicted coordinates (a run report's map and CSV)
        self.prefixes = (name,) if truth_prefix is None else (name, truth_prefix)
        self.n = 0
        self.any_truth = False
        self.line = Growing(np.int32)
        self.status = Growing(np.int8)
        self.coords = [Growing(np.float64) for _ in range(4)]
        self.has_labels = Growing(bool)
        keys = [k for _, k in protocol.coord_levels]
        self.truth_labels = (
            {k: Interned() for k in keys} if keys and protocol.truth_levels_from_labels else {}
        )
        self.label_seen = dict.fromkeys(self.truth_labels, False)
        self.choice_hit = Growing(bool)
        self.choice_scored = Growing(bool)
        self.any_choice = False
        levels = [lv for _, lv in protocol.text_levels]
        self.text_hit = {lv: Growing(bool) for lv in levels}
        self.text_scored = {lv: Growing(bool) for lv in levels}
        self.text_seen = dict.fromkeys(levels, False)
        self.pairs = {lv: Reservoir() for lv in levels}
        self._matches = lru_cache(maxsize=65_536)(self._text_matches)
        self.unfoldable = dict.fromkeys(levels, 0)
        self.has_response = Growing(bool)
        self.no_verdict = Capped()
        self.groups = Interned() if by else None
        self.truth_groups = TruthGroups(by) if by in GROUPINGS else None  # income, m49_region, …
        self.ids = Texts()
        self.formats = Texts()
        self.recovered = Texts()
        self.problem_at: dict[int, str] = {}
        self.unparsed_lines = Capped()
        self.dropped_lines = Capped()
        self.duplicates = Capped()
        self.row_problems = Capped()
        self.ids_seen = DuplicateIds(self._duplicate)
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
        if self.truth_groups is not None:
            self.truth_groups.add(truth)
        elif self.groups is not None:
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
            self.ids_seen.add(sample_key(sid), line)
        if len(self.line.buffer) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        """Freeze the buffered rows into columns; score their coordinates when streaming."""
        if self.stream_coords and self.coords[0].buffer:
            arrays = [np.array(c.buffer, dtype=np.float64) for c in self.coords]
            for k, (column, values) in enumerate(zip(self.coords, arrays, strict=True)):
                column.buffer.clear()
                if self.keep_rows or (self.keep_points and k < 2):
                    column.extend(values)
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
        chunk = coordinate_chunk(
            plat, plon, tlat, tlon, self.protocol, self.reverse, keep_pred_levels=self.keep_pred_levels
        )
        self.coord_columns.add(chunk)

    def window_coords(self) -> tuple[NDArray[np.float64], ...]:
        """The first rows' coordinates, for the misalignment check."""
        if not self.stream_coords:
            return tuple(c.array()[:MISALIGNMENT_WINDOW] for c in self.coords)
        return tuple(np.concatenate(k) if k else np.zeros(0) for k in self.window)

    def _columns(self) -> Iterator[Growing]:
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
        return core_metrics.text_matches(predicted, truth, level, aliases=self.aliases)

    def _geovista_levels(self, i: int, prediction: Prediction, labels: Mapping[str, str]) -> None:
        """GeoVista: whole-term rule on the final turn, or the verifier's verdict in its place."""
        response = geovista.final_turn(prediction.raw)
        hits = dict.fromkeys(geovista.LEVELS, False)
        kept = response != ""  # the released code drops rows without a final answer
        if kept and self.verifier is None:
            hits = geovista.rule_levels(response, labels)
        elif kept:
            verdict = self._verdict(response, labels)
            kept = verdict is not None
            if verdict is not None:
                hits = geovista.verifier_levels(verdict)
        self.has_response.append(kept)
        for level in geovista.LEVELS:
            truth = labels.get(level)
            if truth:
                self.text_seen[level] = True
                if not geovista.normalize_text(truth):
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
        """Dataset samples without a prediction: one EMPTY row each, in the truth's order (read a
        chunk at a time, so an on-disk index stays on disk); returns the summary problem."""
        unanswered = Prediction(status=ParseStatus.EMPTY)
        if self.protocol.unparsed_point is not None:  # no answer sits where an unparsed one does (G3)
            unanswered = at_released_point(unanswered, self.protocol.unparsed_point)
        count, first = 0, []
        items = iter(index.items())
        while chunk := list(islice(items, CHUNK)):
            seen = self.ids_seen.contains_all([key for key, _ in chunk])
            for (key, truth), was_seen in zip(chunk, seen.tolist(), strict=True):
                if was_seen:
                    continue
                count += 1
                if len(first) < 5:
                    first.append(repr(truth.id or key))
                self.add(0, truth.id or key, unanswered, truth, None, "no prediction")
        if not count:
            return []
        return [
            f"{count} sample(s) of {truth_path} have no prediction in {self.name} and count as wrong "
            f"(first: {', '.join(first)})"
        ]


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
    truth_rows: Iterable[InputRow] | None = None,
) -> FileScore:
    """Score one prediction file in one streaming pass.

    Raises :class:`ScoreInputError` only for fatal input problems. ``keep_rows`` keeps the
    per-row columns ``FileScore.iter_rows`` prints; without it memory per row is a few dozen bytes.
    ``verifier`` (GeoVista) replaces the level rule with a model's verdict, as the released code does.
    ``judge`` is handed to a protocol's own file scorer (WhereBench's released LLM judge).
    ``columns`` ({file column: reader key}, see ``scoring.columns.parse_columns``) names the
    columns of a file whose names the reader does not know. ``truth_rows``: the ground truth of
    ``truth_path`` as rows when another reader read it (a dataset folder `eval` reads).
    """
    if protocol.file_scorer and columns:
        raise ScoreInputError(
            f"--columns does not apply to {protocol.name}, which reads its own released files"
        )
    if protocol.file_scorer:  # a benchmark with its own rules (WhereBench, registered from above)
        scorer: Callable[..., FileScore] = protocol.file_scorer
        return (
            scorer(path, protocol, truth_path) if judge is None else scorer(path, protocol, truth_path, judge)
        )
    if judge is not None:
        raise ScoreInputError(
            f"--judge applies to protocols with their own judge (wherebench), not {protocol.name}"
        )
    truth: TruthIndex | None = None
    truth_problems: list[str] = []
    read_notes: list[str] = []
    if truth_path is not None:
        truth, truth_problems = truth_index(truth_path, by is not None, read_notes, truth_rows)
    try:
        rows = iter_rows(path, read_notes)
        if columns:
            rows = _mapped(rows, columns, str(path))
        return score_stream(
            rows,
            protocol,
            name=str(path),
            truth=truth,
            truth_path=truth_path,
            by=by,
            geocoder=geocoder,
            reverse=reverse,
            aliases=aliases,
            verifier=verifier,
            keep_rows=keep_rows,
            notes=read_notes,
            problems=truth_problems,
        )
    finally:
        if truth is not None:
            truth.close()


def score_stream(
    rows: Iterable[InputRow],
    protocol: ScoringProtocol,
    *,
    name: str,
    truth: Mapping[str, Truth] | None = None,
    truth_path: Path | None = None,
    by: str | None = None,
    geocoder: Geocoder | None = None,
    reverse: ReverseFn | None = None,
    aliases: AliasFn | None = None,
    verifier: VerifierFn | None = None,
    keep_rows: bool = True,
    keep_arrays: bool = False,
    keep_pred_levels: bool | None = None,
    keep_points: bool = False,
    notes: list[str] | None = None,
    problems: list[str] | None = None,
) -> FileScore:
    """The one scoring function: a stream of prediction rows (with their truth inline, or joined by
    id from ``truth``) under ``protocol``, read by the protocol's own answer reader, in one pass.

    Every door that reports a protocol's figures comes here (``score``, the run summary behind
    ``eval`` / ``report`` / ``compare``, the harness tasks), so their figures agree by construction.
    ``notes`` (filled while ``rows`` is read) and ``problems`` join the warnings; ``keep_arrays``
    keeps the per-row arrays (distances, hits) without the per-row records of ``keep_rows``;
    ``keep_pred_levels=False`` leaves the predictions' reverse-geocoded places out of the records;
    ``keep_points`` keeps the predicted coordinates in ``arrays.predicted`` (with ``keep_arrays``, the
    run report: its map and CSV, without the ids, formats and truth points ``keep_rows`` keeps).
    Row ``i`` of the arrays is the ``i``-th row of ``rows``; samples of ``truth`` without a
    prediction follow, in ``truth``'s order.
    """
    read_notes = notes if notes is not None else []
    if protocol.geocode and geocoder is None:
        own = protocol.geocoder() if protocol.geocoder else None
        geocoder = own or default_geocoder()
    if (
        protocol.text_levels
        and protocol.level_rule == "names"
        and aliases is None
        and hasattr(geocoder, "search")
    ):
        aliases = gazetteer_aliases(geocoder)
    truth_name = str(truth_path) if truth_path is not None else None
    acc = _Accumulator(name, protocol, aliases, verifier, by, keep_rows, truth_name, reverse)
    if keep_pred_levels is not None:
        acc.keep_pred_levels = keep_pred_levels
    acc.keep_points = keep_rows or keep_points
    # labels are read by level protocols only; the others need them where truth has no coordinates
    with_labels = bool(protocol.text_levels or protocol.truth_levels_from_labels)
    join = IdJoin()
    stream = iter(rows)
    while block := list(islice(stream, PARSE_BLOCK)):
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
            if truth is not None and sid is not None:
                join.add(sid, row_truth is not None)
            problem = f"{pred_problem}; {truth_problem}" if pred_problem and truth_problem else None
            acc.add(raw.line, sid, prediction, row_truth, raw.data, problem or pred_problem or truth_problem)
    if truth is not None and truth_path is not None and join.with_id:
        said = join.note(name, truth_path, next(iter(truth)))
        read_notes.extend([said] if said else [])
    missing_problem = acc.finish_missing(truth, truth_path) if truth is not None and truth_path else []
    if acc.n and not acc.any_truth:
        raise ScoreInputError(
            f"{name}: no row carries ground truth (expected a ground_truth object or true_lat/true_lon "
            f"columns); pass the dataset with --truth FILE"
        )
    acc.flush()
    arrays, found = _arrays(acc, protocol, keep_rows)
    score = summarize(arrays, protocol)
    listed = merged_problems([problems or [], acc.duplicates, missing_problem, acc.row_problems])
    score.warnings = _warnings(name, acc, arrays, listed, [*read_notes, *found])
    if by and acc.groups is not None:
        groups = acc.truth_groups.interned(MISSING_GROUP) if acc.truth_groups else acc.groups
        score.groups = _groups(groups, arrays, protocol)
        if acc.truth_groups:
            score.disparity = group_disparity(groups, arrays, MISSING_GROUP)
        if set(score.groups) == {MISSING_GROUP}:
            score.warnings.append(f"--by {by}: no row has this field")
    row_columns = None
    if keep_rows:
        row_columns = RowColumns(
            acc.line.array(),
            acc.status.array(),
            tuple(c.array() for c in acc.coords),
            acc.ids,
            acc.formats,
            acc.recovered,
            acc.problem_at,
        )
    if acc.keep_points:
        arrays.predicted = (acc.coords[0].array(), acc.coords[1].array())
    kept = arrays if keep_rows or keep_arrays else None
    return FileScore(name, protocol.name, score, kept, row_columns)


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
        row_truth = truth.get(sample_key(sid)) if sid is not None else None
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
        arrays = assemble(acc.coord_columns, protocol, parsed)
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
            keep_pred_levels=acc.keep_pred_levels,
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
    implied = core_metrics.imply_coarser(raw, order=present)
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
            article = "an" if lv[0] in "aeiou" else "a"  # "an admin1 label", "a city label"
            rows = f"{int(has_label.sum())} of {acc.n} rows"
            notes.append(f"{metric} is computed on the {rows} with {article} {lv} label")
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
        finer = geovista.LEVELS[geovista.LEVELS.index(lv) :]  # a correct city credits state and country
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
            name = core_metrics.threshold_name(t)
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
    path: str, acc: _Accumulator, arrays: ScoreArrays, problems: list[str], notes: list[str]
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


def _groups(groups: Interned, arrays: ScoreArrays, protocol: ScoringProtocol) -> dict[str, Score]:
    codes = groups.column.array()
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    members = {groups.table[int(codes[idx[0]])]: idx for idx in np.split(order, bounds) if idx.size}
    return {key: summarize(arrays, protocol, members[key]) for key in sorted(members)}
