"""A run scored by the scoring engine: one row per dataset sample, joining ground truth and trajectory.

Each sample becomes the row ``geosleuth score RUN/trajectories.jsonl --truth RUN/samples.jsonl``
reads (the trajectory record with the sample as its ground truth), and the rows stream through
``scoring.engine.score_stream``: the protocol's own answer reader, comparison and figures, in
one pass. Beside the engine's per-row arrays a run keeps its own compact columns (status, tool
use, tokens, confidence, breakdown fields), so the summary, the breakdowns and the pages read
per-row arrays and memory grows by tens of bytes per sample, never by a record.

A sample with no trajectory yet is ``missing`` and a failed trajectory keeps its status; both
score as wrong, so denominators are always the dataset.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from geosleuth.core import metrics
from geosleuth.core.countries import resolve_country
from geosleuth.core.geo import distance_km
from geosleuth.core.records import Prediction, Sample, Trajectory, TrajectoryStatus
from geosleuth.scoring.columnstore import Growing, Interned, Texts
from geosleuth.scoring.engine import score_stream
from geosleuth.scoring.io import InputRow, truth_record
from geosleuth.scoring.protocols import ScoringProtocol, get_protocol
from geosleuth.scoring.results import FileScore

MISSING = "missing"


def protocol_for(name: str | None, samples: Iterable[Sample]) -> ScoringProtocol:
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
    search_results_blocked: int | None = None  # by the leak guard; None: the run had none

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
            search_results_blocked=trajectory.metadata.get("search_results_blocked"),
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


FIXED_FIELDS: tuple[str, ...] = ("data_source", "split", "answer_type", "answer_level", "status")
"""Sample fields a breakdown can group by without naming them (country and continent come
from the truth's country, resolved or reverse-geocoded)."""
MAX_AUTO_GROUPS = 20
"""A dataset column with more distinct values is no automatic breakdown (an id column groups nothing)."""
WHEREBENCH_SOURCES = frozenset({"wherecountry", "wherestreet"})


class FieldColumns:
    """Breakdown fields as interned columns: those asked for always, a dataset's ``metadata.*``
    columns while they have few distinct values (a column past the cap is dropped, so an id
    column costs nothing per row)."""

    def __init__(self, wanted: Sequence[str]) -> None:
        self.wanted = set(wanted) | set(FIXED_FIELDS)
        self.columns: dict[str, Interned] = {}
        self.present: dict[str, int] = {}
        self.dropped: set[str] = set()
        self.n = 0

    def add(self, values: Mapping[str, Any]) -> None:
        for name, value in values.items():
            if value in (None, "") or name in self.columns or name in self.dropped:
                continue
            column = self.columns[name] = Interned()
            for _ in range(self.n):
                column.append(None)
        for name, column in list(self.columns.items()):
            value = values.get(name)
            text = None if value in (None, "") else str(value)
            if text is not None:
                self.present[name] = self.present.get(name, 0) + 1
            column.append(text)
            if name not in self.wanted and len(column.table) > MAX_AUTO_GROUPS + 1:
                del self.columns[name]
                self.dropped.add(name)
        self.n += 1

    def auto(self) -> list[str]:
        """``metadata.*`` columns that group samples: 2 to `MAX_AUTO_GROUPS` values, fewer than rows."""
        return [
            name.removeprefix("metadata.")
            for name, column in self.columns.items()
            if name.startswith("metadata.")
            and 2 <= len(column.table) - 1 <= MAX_AUTO_GROUPS
            and len(column.table) - 1 < self.present.get(name, 0)
        ]

    def codes(self, name: str) -> tuple[NDArray[np.int32], list[str]] | None:
        """(per-row code, table) of a field (``metadata.`` optional); code 0 is "no value"."""
        column = self.columns.get(name) or self.columns.get(f"metadata.{name}")
        if column is None:
            return None
        return column.column.array(), column.table


@dataclass
class ToolTally:
    """Tool calls per tool, summed as records stream by (success, cache hits, latency)."""

    calls: dict[str, list[float]] = field(default_factory=dict)  # name -> [calls, ok, cache hits, latency]
    usage: dict[str, list[int]] = field(default_factory=dict)  # model -> [prompt, completion]
    combinations: dict[str, int] = field(default_factory=dict)  # records per set of tools used

    def add(self, stats: RecordStats) -> None:
        key = metrics.combination_key(call.name for call in stats.calls)
        self.combinations[key] = self.combinations.get(key, 0) + 1
        for call in stats.calls:
            tally = self.calls.setdefault(call.name, [0.0, 0.0, 0.0, 0.0])
            tally[0] += 1
            tally[1] += call.ok
            tally[2] += call.cache_hit
            tally[3] += call.latency_s
        for model, prompt, completion in stats.usage:
            used = self.usage.setdefault(model, [0, 0])
            used[0] += prompt
            used[1] += completion


@dataclass
class WhereRow:
    """What WhereBench's own figures read of one WhereCountry / WhereStreet sample."""

    index: int  # row of the run's arrays (its distance)
    sample_id: str
    source: str
    answer_type: str
    split: str | None
    choice_parsed: bool
    choice_correct: bool
    path_score: float | None
    clue_weights: list[float]


class RunColumns:
    """The run's own per-row columns, filled as rows stream to the engine (row i = sample i)."""

    def __init__(self, protocol: ScoringProtocol, fields: Sequence[str]) -> None:
        self.protocol = protocol
        self.ids = Texts()
        # what GeoComp's levels and the over-prediction figure read of each answer and truth
        self.pred_city = Texts()
        self.pred_country = Interned()  # ISO code of the answer's country, resolved
        self.truth_city = Texts()
        self.search_results_blocked = 0  # by the leak guard, over records that count them
        self.status = Interned()
        self.answer_type = Interned()
        self.country = Interned()
        self.fields = FieldColumns(fields)
        self.numbers = {
            name: Growing(np.float64) for name in ("confidence", "latency_s", "true_lat", "true_lon")
        }
        self.counts = {name: Growing(np.int32) for name in ("turns", "tool_calls", "tool_errors")}
        self.tokens = {name: Growing(np.int64) for name in ("prompt_tokens", "completion_tokens")}
        self.sample_distances: list[Growing] = []
        self.aggregators: set[str] = set()
        self.tools = ToolTally()
        self.unlocated: list[int] = []  # rows whose truth country comes from its coordinates
        self.labelled: set[str] = set()
        self.where: list[WhereRow] = []
        self.path_scores: dict[int, float] = {}  # WhereStreet text items: hierarchical path score
        self.agent_answered = 0  # records whose agent loop parsed coordinates (not the protocol's reading)
        self._countries: dict[str, str] = {}
        self._continents: tuple[NDArray[np.int32], list[str]] | None = None

    def add(self, sample: Sample, record: Trajectory | RecordStats | None) -> None:
        index = len(self.ids)
        stats = RecordStats.of(record) if record is not None else None
        status = stats.status.value if stats else MISSING
        self.ids.append(sample.id)
        answer = stats.prediction if stats else None
        self.pred_city.append(answer.city if answer else None)
        code = (answer.country_code or resolve_country(answer.country)) if answer else None
        self.pred_country.append(code)
        self.truth_city.append(sample.labels.get("city"))
        if stats is not None and stats.search_results_blocked is not None:
            self.search_results_blocked += stats.search_results_blocked
        self.status.append(status)
        self.answer_type.append(sample.answer_type)
        self.country.append(self._country(index, sample))
        self.labelled.update(level for level, value in sample.labels.items() if value)
        values: dict[str, Any] = {name: getattr(sample, name, None) for name in FIXED_FIELDS[:-1]}
        values["status"] = status
        for key, value in sample.metadata.items():
            if isinstance(value, str | int | float | bool):
                values[f"metadata.{key}"] = value
                values.setdefault(key, value)
        self.fields.add(values)
        prediction = stats.prediction if stats and stats.status is TrajectoryStatus.OK else None
        self.agent_answered += bool(prediction and prediction.has_coords)
        calls = stats.calls if stats else ()
        number = {
            "confidence": prediction.confidence if prediction else None,
            "latency_s": stats.latency_s if stats else None,
            "true_lat": sample.lat,
            "true_lon": sample.lon,
        }
        for name, column in self.numbers.items():
            value = number[name]
            column.append(math.nan if value is None else float(value))
        self.counts["turns"].append(stats.turns if stats else 0)
        self.counts["tool_calls"].append(len(calls))
        self.counts["tool_errors"].append(sum(not c.ok for c in calls))
        usage = stats.usage if stats else ()
        self.tokens["prompt_tokens"].append(sum(u[1] for u in usage))
        self.tokens["completion_tokens"].append(sum(u[2] for u in usage))
        if stats is not None:
            self.tools.add(stats)
            self._samples(index, sample, stats)
        if len(self.ids) % CHUNK_ROWS == 0:
            self.flush()
        if sample.data_source in WHEREBENCH_SOURCES:
            self.where.append(_where_row(index, sample, prediction))
            if self.where[-1].path_score is not None:
                self.path_scores[index] = self.where[-1].path_score

    def _country(self, index: int, sample: Sample) -> str | None:
        label = sample.labels.get("country")
        if label:
            if label not in self._countries:
                from geosleuth.core.countries import resolve_country

                self._countries[label] = resolve_country(label) or ""
            return self._countries[label] or None
        if sample.lat is not None and sample.lon is not None:
            self.unlocated.append(index)
        return None

    def _samples(self, index: int, sample: Sample, stats: RecordStats) -> None:
        """The N trajectories' distances under the protocol (pass@k, Best@N), when N > 1."""
        if stats.aggregator:
            self.aggregators.add(stats.aggregator)
        while len(self.sample_distances) < len(stats.samples):
            column = Growing(np.float64)
            for _ in range(index):
                column.append(math.nan)
            self.sample_distances.append(column)
        for j, column in enumerate(self.sample_distances):
            one = stats.samples[j] if j < len(stats.samples) else None
            ok = one is not None and one.status is TrajectoryStatus.OK
            column.append(sample_distance(sample, one.prediction if ok and one else None, self.protocol))

    def flush(self) -> None:
        """Freeze the buffered values into NumPy chunks (a Python value costs more than its number)."""
        columns = [
            self.status,
            self.answer_type,
            self.country,
            self.pred_country,
            *self.fields.columns.values(),
        ]
        for growing in (
            *self.numbers.values(),
            *self.counts.values(),
            *self.tokens.values(),
            *self.sample_distances,
        ):
            growing.flush()
        for interned in columns:
            interned.column.flush()

    def finish(self) -> None:
        """Truth countries of unlabelled samples from their coordinates (the gazetteer, in chunks)."""
        self.flush()
        if not self.unlocated:
            return
        rows = np.array(self.unlocated, dtype=np.int64)
        codes = self.country.column.array().copy()
        lat, lon = self.numbers["true_lat"].array()[rows], self.numbers["true_lon"].array()[rows]
        try:
            from geosleuth.gazetteer import get_gazetteer

            gazetteer = get_gazetteer()
            for start in range(0, rows.size, CHUNK_ROWS):
                part = slice(start, start + CHUNK_ROWS)
                found = gazetteer.reverse_batch(lat[part], lon[part])["country_code"]
                for row, code in zip(rows[part].tolist(), found, strict=True):
                    if code:
                        codes[row] = self.country.code(str(code))
        except (ImportError, OSError, RuntimeError):
            return
        self.country.column.replace(codes)
        self.unlocated = []

    def column(self, name: str) -> NDArray[Any]:
        for kind in (self.numbers, self.counts, self.tokens):
            if name in kind:
                return kind[name].array()
        raise KeyError(name)

    def continents(self) -> tuple[NDArray[np.int32], list[str]]:
        """(per-row code, table) of the truth's continent (computed once the stream has ended)."""
        if self._continents is None:
            self._continents = self._continent_codes()
        return self._continents

    def _continent_codes(self) -> tuple[NDArray[np.int32], list[str]]:
        from geosleuth.core.countries import country_info

        table = [""]
        of_country: list[int] = []
        for code in self.country.table:
            info = country_info(code) if code else None
            name = info.continent if info and info.continent else ""
            if name and name not in table:
                table.append(name)
            of_country.append(table.index(name) if name else 0)
        return np.array(of_country, dtype=np.int32)[self.country.column.array()], table


CHUNK_ROWS = 65_536
"""Truth points reverse-geocoded per step."""


def _where_row(index: int, sample: Sample, prediction: Prediction | None) -> WhereRow:
    from geosleuth.eval.wherebench import rules as wherebench

    path_score = None
    if sample.answer_type == "level" and sample.answer_level:
        path_score = wherebench.item_path_score(
            prediction, sample.labels, sample.answer_level, sample.hint, sample.hint_level
        )[0]
    choice = prediction.choice if prediction else None
    correct = bool(choice) and str(choice).strip().upper() == str(sample.answer or "").strip().upper()
    return WhereRow(
        index,
        sample.id,
        str(sample.data_source),
        sample.answer_type,
        sample.split,
        bool(choice),
        correct,
        path_score,
        list(sample.clue_weights),
    )


@dataclass
class RunScore:
    """A run scored by the engine (row i of its arrays = sample i) beside the run's own columns."""

    protocol: ScoringProtocol
    file: FileScore
    columns: RunColumns

    @property
    def n(self) -> int:
        return len(self.columns.ids)

    @property
    def distances(self) -> NDArray[np.float64]:
        assert self.file.arrays is not None
        return self.file.arrays.distances

    @property
    def predicted(self) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
        """The protocol's reading of each answer's point (lat, lon; NaN where it read none)."""
        return self.file.arrays.predicted if self.file.arrays is not None else None

    def rows(self) -> ScoreRows:
        """A view per sample, for the pages and plots, made as each is read (none is kept)."""
        return ScoreRows(self)


class ScoreRows(Sequence["ScoreRow"]):
    """The rows of a `RunScore`, each view made when it is read: a million-sample run costs nothing
    per row until a page asks for one."""

    def __init__(self, run: RunScore) -> None:
        self.run = run

    def __len__(self) -> int:
        return self.run.n

    def __getitem__(self, i: int | slice) -> Any:
        n = self.run.n
        if isinstance(i, slice):
            return [ScoreRow(self.run, j) for j in range(*i.indices(n))]
        if not -n <= i < n:
            raise IndexError(i)
        return ScoreRow(self.run, i % n)

    def __iter__(self) -> Iterator[ScoreRow]:
        return (ScoreRow(self.run, i) for i in range(self.run.n))


class ScoreRow:
    """One sample's scored row, read from a `RunScore`'s columns on demand."""

    __slots__ = ("i", "run")

    def __init__(self, run: RunScore, i: int) -> None:
        self.run, self.i = run, i

    @property
    def sample_id(self) -> str:
        return str(self.run.columns.ids[self.i])

    @property
    def pred_city(self) -> str | None:
        """The city the answer names in text (any status), as the agent wrote it."""
        return self.run.columns.pred_city[self.i]

    @property
    def pred_country_code(self) -> str | None:
        """The answer's country as an ISO code (its code, else its country name resolved)."""
        column = self.run.columns.pred_country
        return column.table[int(column.column.array()[self.i])] or None

    @property
    def truth_city(self) -> str | None:
        return self.run.columns.truth_city[self.i]

    @property
    def status(self) -> str:
        columns = self.run.columns
        return columns.status.table[int(columns.status.column.array()[self.i])]

    @property
    def answer_type(self) -> str:
        columns = self.run.columns
        return columns.answer_type.table[int(columns.answer_type.column.array()[self.i])]

    @property
    def distance_km(self) -> float:
        return float(self.run.distances[self.i])

    def _number(self, name: str) -> float | None:
        value = float(self.run.columns.column(name)[self.i])
        return value if math.isfinite(value) else None

    @property
    def true_lat(self) -> float | None:
        return self._number("true_lat")

    @property
    def true_lon(self) -> float | None:
        return self._number("true_lon")

    def _predicted(self, k: int) -> float | None:
        arrays = self.run.file.arrays
        if arrays is None or arrays.predicted is None:
            return None
        value = float(arrays.predicted[k][self.i])
        return value if math.isfinite(value) else None

    @property
    def pred_lat(self) -> float | None:
        return self._predicted(0)

    @property
    def pred_lon(self) -> float | None:
        return self._predicted(1)

    @property
    def country_code(self) -> str | None:
        columns = self.run.columns
        return columns.country.table[int(columns.country.column.array()[self.i])] or None

    @property
    def continent(self) -> str | None:
        codes, table = self.run.columns.continents()
        return table[int(codes[self.i])] or None

    @property
    def path_score(self) -> float | None:
        return self.run.columns.path_scores.get(self.i)

    @property
    def confidence(self) -> float | None:
        return self._number("confidence")

    @property
    def latency_s(self) -> float | None:
        return self._number("latency_s")

    @property
    def turns(self) -> int:
        return int(self.run.columns.column("turns")[self.i])

    @property
    def tool_calls(self) -> int:
        return int(self.run.columns.column("tool_calls")[self.i])

    @property
    def tool_errors(self) -> int:
        return int(self.run.columns.column("tool_errors")[self.i])

    @property
    def prompt_tokens(self) -> int:
        return int(self.run.columns.column("prompt_tokens")[self.i])

    @property
    def completion_tokens(self) -> int:
        return int(self.run.columns.column("completion_tokens")[self.i])

    @property
    def level_hits(self) -> dict[str, bool]:
        """The protocol's level hits by level (``acc_country`` / ``text_acc_city`` -> country / city),
        for the levels this sample's truth has."""
        out: dict[str, bool] = {}
        for name, hit in self.hits().items():
            if hit is None or not name.startswith(("acc_", "text_acc_")) or name.endswith("_choice"):
                continue
            out.setdefault(name.removeprefix("text_").removeprefix("acc_"), hit)
        return out

    @property
    def choice_correct(self) -> bool | None:
        """The multiple-choice hit (None where the sample is not a question)."""
        return self.hits().get("acc_choice")

    def hits(self) -> dict[str, bool | None]:
        """The protocol's per-row hits (None where the figure is not defined on this sample)."""
        arrays = self.run.file.arrays
        assert arrays is not None
        return {
            name: bool(h[self.i]) if name not in arrays.scored or arrays.scored[name][self.i] else None
            for name, h in arrays.hits.items()
        }


Lookup = Callable[[str], "Trajectory | RecordStats | None"]


def run_rows(samples: Iterable[Sample], lookup: Lookup, columns: RunColumns) -> Iterator[InputRow]:
    """Each sample as the row ``score`` reads of ``trajectories.jsonl`` joined with the sample:
    the trajectory record (model, status, prediction with its answer text) and the ground truth."""
    for line, sample in enumerate(samples, start=1):
        record = lookup(sample.id)
        columns.add(sample, record)
        row: dict[str, Any] = {"sample_id": sample.id, "ground_truth": truth_record(sample)}
        if record is not None:
            row["model"] = getattr(record, "model", "") or ""
            row["status"] = record.status.value
            if record.prediction is not None:
                row["prediction"] = record.prediction.model_dump(mode="json")
        yield InputRow(line, row)


def score_samples(
    samples: Iterable[Sample],
    lookup: Lookup,
    protocol: ScoringProtocol,
    fields: Sequence[str] = (),
    name: str = "run",
) -> RunScore:
    """The run through the scoring engine, streaming: ``lookup`` gives a sample's trajectory."""
    columns = RunColumns(protocol, fields)
    scoring = protocol
    if protocol.file_scorer:  # a benchmark's own file rules read released files; a run is rows
        from dataclasses import replace

        scoring = replace(protocol, file_scorer=None)
    rows = run_rows(samples, lookup, columns)
    scored = score_stream(rows, scoring, name=name, keep_rows=False, keep_arrays=True, keep_points=True)
    columns.finish()
    return RunScore(protocol, scored, columns)


def score_run(
    samples: Sequence[Sample],
    trajectories: Mapping[str, Trajectory] | Mapping[str, RecordStats],
    protocol: ScoringProtocol,
    fields: Sequence[str] = (),
) -> RunScore:
    """Score in-memory samples and records (a full `Trajectory` keeps the answer text the
    protocol's reader re-reads; a `RecordStats` carries the agent's parse only)."""
    return score_samples(samples, trajectories.get, protocol, fields)
