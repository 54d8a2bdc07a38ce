"""The grounding figures of a run, and GeoComp's macro recall / F1 per level.

For each trajectory: the places, countries and coordinates its final reasoning asserts (proper
names the gazetteer knows, coordinate pairs), each checked against the texts the trajectory
received (every tool result, the OCR tool's and the observer's included) by
`geosleuth.core.grounding`. Per run: the claim-support rate, the share of answers whose place no
tool or OCR result mentions, and the unsupported claims of each sample (``summary["grounding"]``).
"""

from __future__ import annotations

import heapq
import logging
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from geosleuth.core import metrics
from geosleuth.core.countries import country_info, country_name, resolve_country
from geosleuth.core.grounding import (
    Claim,
    Evidence,
    GroundingTally,
    SampleGrounding,
    check_claims,
    mentions,
)
from geosleuth.core.parsing.coordinates import coordinate_pairs
from geosleuth.core.records import Prediction, Trajectory, cap_text
from geosleuth.core.text import normalize
from geosleuth.eval.report.scores import CHUNK_ROWS, RunScore
from geosleuth.eval.run.store import text_digest
from geosleuth.scoring.columnstore import Growing, Texts

log = logging.getLogger(__name__)

MAX_REASONING_CHARS = 50_000
MAX_EVIDENCE_CHARS = 20_000  # per tool result
MAX_EVIDENCE_ITEMS = 200
MAX_CLAIMS = 100
MAX_LISTED_SAMPLES = 1000
"""summary.json lists the unsupported claims of at most this many samples (all are counted)."""
MIN_WORD_POPULATION = 15_000
"""One word of a longer capitalised phrase counts as a place only if the place is this large."""

_CONNECTORS = (
    r"(?:de|del|della|di|da|do|dos|das|du|des|la|le|les|los|las|von|van|der|den|of|upon|am|sur|en|y)"
)
_WORD = r"[A-ZÀ-ÖØ-Þ\u0100-\u024F\u0370-\u03FF\u0400-\u04FF][\w'’-]*"
_SPAN = re.compile(rf"(?<![\w]){_WORD}(?:[ -](?:{_CONNECTORS} )?{_WORD}){{0,3}}")
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]{2,12}")
_LEADING = frozenset(
    [
        "the",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "i",
        "in",
        "on",
        "at",
        "a",
        "an",
        "and",
        "but",
        "so",
        "as",
        "if",
        "however",
        "based",
        "given",
        "looking",
        "overall",
        "there",
        "here",
        "my",
        "we",
        "our",
        "final",
        "answer",
        "country",
        "city",
        "region",
        "location",
        "coordinates",
        "latitude",
        "longitude",
        "also",
        "then",
        "while",
        "since",
        "because",
        "near",
        "north",
        "south",
        "east",
        "west",
        "northern",
        "southern",
        "eastern",
        "western",
        "central",
    ]
)


class PlaceFinder(Protocol):
    def match_names(self, text: str, min_population: int = 0, max_ngram: int = 4) -> list[Any]: ...


MAX_CACHED_NAMES = 100_000


class CachedFinder:
    """A `PlaceFinder` that looks each phrase up once per run (names repeat across trajectories)."""

    def __init__(self, finder: PlaceFinder) -> None:
        self.finder = finder
        self.cache: dict[str, list[Any]] = {}

    def match_names(self, text: str, min_population: int = 0, max_ngram: int = 4) -> list[Any]:
        key = f"{min_population}\x00{max_ngram}\x00{text}"
        found = self.cache.get(key)
        if found is None:
            if len(self.cache) >= MAX_CACHED_NAMES:
                self.cache.clear()
            found = self.cache[key] = self.finder.match_names(text, min_population, max_ngram)
        return found


def final_reasoning(trajectory: Trajectory) -> str:
    """The reasoning and text of the last model turn (observations are not the model's), capped."""
    for turn in reversed(trajectory.turns):
        if turn.note == "observation":
            continue
        text = "\n".join(t for t in (turn.reasoning, turn.text) if t)
        if text.strip():
            return cap_text(text, MAX_REASONING_CHARS)[0]
    return ""


def evidence_of(trajectory: Trajectory) -> list[Evidence]:
    """Every successful tool result's text, in order (at most `MAX_EVIDENCE_ITEMS`, each capped)."""
    items = [
        Evidence(call.name, cap_text(call.result_text, MAX_EVIDENCE_CHARS)[0])
        for turn in trajectory.turns
        for call in turn.tool_calls
        if call.ok and call.result_text
    ]
    return items[:MAX_EVIDENCE_ITEMS]


def _stripped(span: str) -> tuple[int, str]:
    """A capitalised span without its leading sentence words ("The Eiffel Tower" -> "Eiffel Tower")."""
    words = span.split(" ")
    cut = 0
    while cut < len(words) and words[cut].lower().strip(".") in _LEADING:
        cut += 1
    rest = " ".join(words[cut:])
    return len(span) - len(rest), rest


def place_claims(text: str, places: PlaceFinder) -> list[Claim]:
    """The places and countries a text names: capitalised phrases (and CJK runs) the gazetteer knows."""
    claims: list[Claim] = []
    for m in [*_SPAN.finditer(text), *_CJK_RUN.finditer(text)]:
        offset, span = _stripped(m.group().rstrip(".'’-"))
        if len(span) < 2:
            continue
        key = normalize(span)
        found = places.match_names(span)
        whole = [f for f in found if f.text == key]
        if whole:
            found = whole[:1]
        else:  # one word of a longer phrase names a place only if it is a large one
            found = [f for f in found if f.place.population >= MIN_WORD_POPULATION and len(f.text) >= 4]
        for f in found:
            place = f.place
            start = m.start() + offset
            written = span if whole else f.text  # the phrase as the reasoning wrote it, when it is the name
            if place.kind == "country" and place.country_code:
                names = (f.text, place.name, country_name(place.country_code))
                claims.append(Claim("country", written, names, start=start))
            else:
                claims.append(Claim("place", written, (f.text, place.name), start=start))
        if len(claims) >= MAX_CLAIMS:
            break
    return sorted(claims[:MAX_CLAIMS], key=lambda c: c.start)


def coordinate_claims(text: str) -> list[Claim]:
    return [
        Claim("coordinates", f"{lat:g}, {lon:g}", point=(lat, lon), start=at)
        for at, lat, lon in coordinate_pairs(text)
    ]


def answer_names(prediction: Prediction | None) -> list[str]:
    """The names of the place an answer gives: its finest of city, admin-1, country (and the
    country's English name)."""
    if prediction is None:
        return []
    for value in (prediction.city, prediction.admin1):
        if value and normalize(value):
            return [value]
    code = prediction.country_code or resolve_country(prediction.country)
    if code:
        return [n for n in (prediction.country, country_name(code)) if n]
    return []


Points = tuple[tuple[float, float], ...]
MAX_CACHED_TEXTS = 4096


def text_points(text: str) -> Points:
    """The coordinates a tool result states."""
    return tuple((lat, lon) for _, lat, lon in coordinate_pairs(text))


class CachedPoints:
    """`text_points` read once per distinct tool result in a run: results repeat across
    trajectories (the tools' own cache answers a repeated query alike). Remembered by 128-bit
    digest in a bounded table, emptied when full, so a long result is never held."""

    def __init__(self) -> None:
        self.cache: dict[bytes, Points] = {}

    def __call__(self, text: str) -> Points:
        key = text_digest(text)
        found = self.cache.get(key)
        if found is None:
            if len(self.cache) >= MAX_CACHED_TEXTS:
                self.cache.clear()
            found = self.cache[key] = text_points(text)
        return found


def sample_grounding(
    trajectory: Trajectory, places: PlaceFinder, points_of: Callable[[str], Points] = text_points
) -> SampleGrounding:
    """The checked claims of one trajectory and whether its answer's place was ever mentioned."""
    reasoning = final_reasoning(trajectory)
    evidence = evidence_of(trajectory)
    claims = sorted([*place_claims(reasoning, places), *coordinate_claims(reasoning)], key=lambda c: c.start)
    if any(c.point is not None for c in claims):  # only a coordinate claim reads the evidence's points
        points = [points_of(e.text) for e in evidence]
    else:
        points = [() for _ in evidence]
    out = SampleGrounding(
        trajectory.sample_id,
        check_claims(reasoning, claims, evidence, points),
        reasoned=bool(reasoning.strip()),
    )
    names = answer_names(trajectory.prediction)
    if names:
        out.answer_place = names[0]
        out.answer_mentioned = any(mentions(e.text, names) for e in evidence)
    return out


def grounding_block(groundings: Iterable[SampleGrounding]) -> dict[str, Any]:
    """``summary["grounding"]``: the run's figures and the unsupported claims listed per sample
    (the first `MAX_LISTED_SAMPLES` by id), one sample at a time as they stream by."""
    tally = GroundingTally()
    listed = 0

    def flagged() -> Iterator[SampleGrounding]:
        nonlocal listed
        for sample in groundings:
            tally.add(sample)
            if sample.unsupported or sample.answer_mentioned is False:
                listed += 1
                yield sample

    shown = heapq.nsmallest(MAX_LISTED_SAMPLES, flagged(), key=lambda g: g.sample_id)
    block: dict[str, Any] = dict(tally.figures())
    block["unsupported"] = {
        s.sample_id: {
            "claims": [{"kind": c.claim.kind, "text": c.claim.text, "cited": c.cited} for c in s.unsupported],
            "answer_place_unmentioned": s.answer_place if s.answer_mentioned is False else None,
        }
        for s in shown
    }
    if listed > MAX_LISTED_SAMPLES:
        block["unsupported_listed"] = f"the first {MAX_LISTED_SAMPLES} of {listed} samples"
    return block


ConsistencyFn = Callable[[Sequence[str], Sequence[Mapping[str, Any]]], Sequence[float]]
"""GeoAgent's R_con of rollouts against ground truths (the training reward's judge, handed in by the
CLI: evaluation sits below training, so it takes the scorer rather than importing it)."""
CONSISTENCY_BATCH = 256


def rollout_text(trajectory: Trajectory) -> str:
    """The final reasoning as the consistency reward reads a rollout: ``<think>`` reasoning, then text."""
    for turn in reversed(trajectory.turns):
        if turn.note == "observation" or not (turn.reasoning or turn.text).strip():
            continue
        think = f"<think>{turn.reasoning}</think>\n" if turn.reasoning else ""
        return cap_text(think + turn.text, MAX_REASONING_CHARS)[0]
    return ""


def run_grounding(
    trajectories: Iterable[Trajectory],
    consistency: tuple[str, ConsistencyFn] | None = None,
    truths: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The grounding block of a run's trajectories (each sample's latest record, one each), with
    the mean R_con when ``consistency`` (judge name, scorer) is given, scored in batches as they
    stream."""
    from geosleuth.gazetteer import get_gazetteer

    places = CachedFinder(get_gazetteer())
    points_of = CachedPoints()
    r_con = Growing(np.float64)
    batch: list[tuple[str, Mapping[str, Any]]] = []

    def flush() -> None:
        if consistency is not None and batch:
            scores = consistency[1]([b[0] for b in batch], [b[1] for b in batch])
            for x in scores:
                r_con.append(float(x))
            batch.clear()

    def groundings() -> Iterator[SampleGrounding]:
        for trajectory in trajectories:
            yield sample_grounding(trajectory, places, points_of)
            truth = (truths or {}).get(trajectory.sample_id) or {}
            has_point = truth.get("lat") is not None and truth.get("lon") is not None
            if consistency is not None and trajectory.status == "ok" and has_point:  # R_con needs the truth
                batch.append((rollout_text(trajectory), truth))
                if len(batch) >= CONSISTENCY_BATCH:
                    flush()
        flush()

    block = grounding_block(groundings())
    if consistency is not None:
        values = r_con.array()
        lo, hi = metrics.bootstrap_ci_mean(values) if values.size else (math.nan, math.nan)
        block["consistency"] = {
            "judge": consistency[0],
            "n": int(values.size),
            "r_con_mean": round(float(values.mean()), 6) if values.size else None,
            "ci95": [round(lo, 6), round(hi, 6)] if values.size else [None, None],
            "note": "GeoAgent's R_con (Eq. 8-9) of the final reasoning of each finished trajectory whose "
            "truth has coordinates, in [0, 1]",
        }
    return block


def _continent(code: str | None) -> str | None:
    info = country_info(code) if code else None
    return info.continent if info else None


NONE = "none"
"""What GeoComp writes for a level the answer does not give (a class of its own)."""


def level_codes(
    scored: RunScore, table: dict[str, int]
) -> Iterator[tuple[str, NDArray[np.int32], NDArray[np.int32]]]:
    """(level, truth codes, prediction codes) of each GeoComp level over every sample, one level
    at a time, the labels coded in ``table`` (code 0 is "": the truth lacks that level, or there
    is no answer): city names folded, countries as ISO codes, continents from the countries. A
    sample without a finished answer predicts nothing."""
    columns = scored.columns
    answered = columns.status.column.array() == columns.status.codes.get("ok", -1)
    everyone = np.ones(scored.n, dtype=bool)
    folded = lru_cache(maxsize=MAX_CACHED_NAMES)(normalize)  # one string per name, not one per row

    def texts(values: Texts, rows: NDArray[np.bool_]) -> NDArray[np.int32]:
        out = np.zeros(scored.n, dtype=np.int32)
        for start in range(0, scored.n, CHUNK_ROWS):
            for i in (start + np.flatnonzero(rows[start : start + CHUNK_ROWS])).tolist():
                out[i] = table.setdefault(folded(values[i] or ""), len(table))
        return out

    def coded(values: Iterable[str]) -> NDArray[np.int32]:
        return np.array([table.setdefault(v, len(table)) for v in values], dtype=np.int32)

    yield "city", texts(columns.truth_city, everyone), texts(columns.pred_city, answered)
    pred_country = columns.pred_country
    pred_codes = np.where(answered, pred_country.column.array(), 0)
    truth = coded(columns.country.table)[columns.country.column.array()]
    yield "country", truth, coded(pred_country.table)[pred_codes]
    continents, continent_table = columns.continents()
    predicted = coded(_continent(code or None) or "" for code in pred_country.table)[pred_codes]
    yield "continent", coded(continent_table)[continents], predicted


def geocomp_levels(scored: RunScore) -> dict[str, dict[str, Any]]:
    """GeoComp's accuracy, macro recall and macro F1 per level (percent), over samples with that
    truth; a missing prediction is the class "none" (as is a city whose folded name is "none")."""
    table: dict[str, int] = {"": 0}
    out: dict[str, dict[str, Any]] = {}
    for level, truth, predicted in level_codes(scored, table):
        has = truth != 0
        if not has.any():
            continue
        none = table.setdefault(NONE, len(table))
        t, p = truth[has], predicted[has]
        p[p == 0] = none
        used = np.unique(np.concatenate([t, p]))
        labels = list(table)
        rank = np.zeros(len(labels), dtype=np.int32)
        rank[sorted(used.tolist(), key=labels.__getitem__)] = np.arange(used.size)
        recall, f1, classes = metrics.macro_recall_f1_codes(rank[t], rank[p], int(used.size))
        accuracy = int((t == p).sum()) / int(t.size)
        out[level] = {
            "n": int(t.size),
            "classes": classes,
            "accuracy": round(100 * accuracy, 4),
            "macro_recall": round(100 * recall, 4),
            "macro_f1": round(100 * f1, 4),
        }
    return out


def add_grounding(
    summary: dict[str, Any],
    trajectories: Iterable[Trajectory],
    scored: RunScore,
    consistency: tuple[str, ConsistencyFn] | None = None,
    truths: Mapping[str, Mapping[str, Any]] | None = None,
) -> None:
    """Add ``summary["grounding"]``: the grounding figures of ``trajectories`` (one per sample),
    GeoComp's per-level figures, and
    R_con when a consistency judge is given (``truths``: the ground truth of each sample id, which
    R_con compares with)."""
    try:
        block = run_grounding(trajectories, consistency, truths)
    except (ImportError, OSError, RuntimeError) as exc:
        block = {"note": f"no grounding figures: the gazetteer is needed to find places ({exc})"}
    block["geocomp"] = geocomp_levels(scored)
    summary["grounding"] = block
