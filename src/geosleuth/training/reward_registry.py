"""Every training reward as one named entry: its parameters, its paper form, its released form.

A `RewardDef` owns the parameters it accepts (with the paper's defaults), what ``released=true``
changes (parameters the authors' code sets differently, and a scorer that replays the
authors' own reading where it differs from the paper's), and where each comes from. A new
paper's reward is one new entry in `REGISTRY`; "``released=true`` works for every reward" is
checked over the registry (tests/training/test_training_reward_registry.py).

A scorer takes the resolved parameters and a `Rollouts` batch and returns a `RewardBatch`.
Per-rollout problems (no answer, an answer that cannot be geocoded, a verifier that failed)
are collected in `BatchLog` and logged once per batch (count plus an escaped example); the
detail of each rollout is at DEBUG.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from geosleuth.core import released as rel
from geosleuth.core import rewards as core
from geosleuth.core.geo import EARTH_RADIUS_KM, haversine_km
from geosleuth.core.records import Prediction
from geosleuth.training import reading as rd
from geosleuth.training.truth import GroundTruth, parse_ground_truth

log = logging.getLogger("geosleuth.training.rewards")

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
            self._preds = [rd.parse_rollout(t) for t in self.texts]
        return self._preds

    def set_preds(self, preds: Sequence[Prediction]) -> None:
        self._preds = list(preds)


Scorer = Callable[[Mapping[str, Any], Rollouts], RewardBatch]


# --- the entries ---------------------------------------------------------------------------

COMMON_PARAMS: dict[str, Any] = {"released": False, "tool_bonus": 0.0, "tool_bonus_cap": 1}
"""Accepted by every reward: ``released`` and the tool-use bonus (off by default)."""


@dataclass(frozen=True)
class RewardDef:
    """One named reward: parameters with the paper's defaults, the paper and released scorers."""

    name: str
    summary: str
    paper: str
    params: Mapping[str, Any]
    score_paper: Scorer
    released_source: str | None = None
    """The authors' released function, or None when none was released (then the paper's form)."""
    released_params: Mapping[str, Any] = field(default_factory=dict)
    score_released: Scorer | None = None
    """A replay of the released reading; None: the paper scorer with `released_params`."""
    released_note: str = ""
    aliases: tuple[str, ...] = ()
    distance: bool = False

    def accepts(self) -> frozenset[str]:
        return frozenset(self.params) | frozenset(COMMON_PARAMS)

    def resolve(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults, then the released overrides when ``released`` is set, then what was given."""
        unknown = sorted(set(given) - self.accepts())
        if unknown:
            raise ValueError(
                f"reward {self.name!r} has no parameter {', '.join(unknown)}; "
                f"it accepts {', '.join(sorted(self.accepts()))}"
            )
        out = {**COMMON_PARAMS, **self.params}
        if _truthy(given.get("released", False)):
            out.update(self.released_params)
        out.update(given)
        out["released"] = _truthy(out["released"])
        return out

    def scorer(self, params: Mapping[str, Any]) -> Scorer:
        if params["released"] and self.score_released is not None:
            return self.score_released
        return self.score_paper


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


# --- distances -------------------------------------------------------------------------------


def read_coordinates(
    batch: Rollouts, radius_km: float
) -> tuple[NDArray[np.float64], NDArray[np.bool_], list[Prediction | None]]:
    """Distances from the answers' coordinates: clean answers skip the full parser."""
    n = len(batch)
    lat = np.full(n, np.nan)
    lon = np.full(n, np.nan)
    parsed = np.zeros(n, dtype=bool)
    preds: list[Prediction | None] = []
    given = batch._preds  # parsed by the caller (`score_predictions`): read those
    for i, text in enumerate(batch.texts):
        hit = rd.fast_coordinates(text) if given is None else None
        if hit is not None:
            lat[i], lon[i] = hit
            parsed[i] = True
            preds.append(None)
            continue
        pred = given[i] if given is not None else rd.parse_rollout(text)
        parsed[i] = rd.answered(pred)
        if pred.has_coords:
            lat[i], lon[i] = pred.lat, pred.lon
        preds.append(pred)
    tl = np.array([rd.truth_latlon(t) for t in batch.raw_truths], dtype=np.float64).reshape(n, 2)
    d = np.asarray(haversine_km(lat, lon, tl[:, 0], tl[:, 1], radius_km=radius_km), dtype=np.float64)
    return d, parsed, preds


def geocode_missing(
    params: Mapping[str, Any],
    batch: Rollouts,
    d: NDArray[np.float64],
    levels: Sequence[Mapping[str, str | None]],
    radius_km: float,
) -> NDArray[np.float64]:
    """Distances for answers without coordinates, from their geocoded text (GeoAgent R_spa)."""
    if not params.get("geocode", True):
        return d
    todo = [i for i in range(len(d)) if np.isnan(d[i]) and levels[i] and any(levels[i].values())]
    if not todo:
        return d
    from geosleuth.training.geocoding import shared_geocoder

    geocoder = shared_geocoder(params.get("tool_settings"))
    hits = geocoder.geocode_many([[levels[i].get(k) for k in core.SEMANTIC_LEVELS] for i in todo])
    out = d.copy()
    for i, hit in zip(todo, hits, strict=True):
        if hit is None:
            batch.log.note(
                "could not be geocoded (R_spa = 0)", i, "; ".join(v for v in levels[i].values() if v)
            )
            continue
        tlat, tlon = rd.truth_latlon(batch.raw_truths[i])
        out[i] = float(haversine_km(hit[0], hit[1], tlat, tlon, radius_km=radius_km))
    return out


def _finish(
    batch: Rollouts,
    scores: Any,
    d: NDArray[np.float64],
    parsed: NDArray[np.bool_],
    preds: Sequence[Prediction | None],
) -> RewardBatch:
    for i in np.flatnonzero(~parsed):
        batch.log.note("gave no answer that could be read", int(i), batch.texts[i])
    return RewardBatch(np.atleast_1d(np.asarray(scores, dtype=np.float64)), d, parsed, list(preds))


def _score_step(params: Mapping[str, Any], batch: Rollouts) -> RewardBatch:
    d, parsed, preds = read_coordinates(batch, EARTH_RADIUS_KM)
    return _finish(batch, core.step_reward(d), d, parsed, preds)


def _score_step_released(params: Mapping[str, Any], batch: Rollouts) -> RewardBatch:
    """``localization.compute_distance_score`` on the whole text (see `core.released`)."""
    n = len(batch)
    scores = np.zeros(n)
    d = np.full(n, np.nan)
    parsed = np.zeros(n, dtype=bool)
    for i, (text, truth) in enumerate(zip(batch.texts, batch.raw_truths, strict=True)):
        answer = rel.twm_answer(text or "")
        tlat, tlon = rd.truth_latlon(truth)
        metres = rel.twm_distance_m(answer, tlat, tlon)
        parsed[i] = answer is not None
        scores[i] = rel.twm_step_score(metres)
        if metres != rel.TWM_MISS_M:
            d[i] = metres / 1000.0
    return _finish(batch, scores, d, parsed, [None] * n)


def _score_piecewise(params: Mapping[str, Any], batch: Rollouts) -> RewardBatch:
    d, parsed, preds = read_coordinates(batch, EARTH_RADIUS_KM)
    return _finish(batch, core.piecewise_linear_reward(d), d, parsed, preds)


def _tau(params: Mapping[str, Any], key: str = "tau_km") -> float:
    tau = float(params[key])
    if not tau > 0:
        raise ValueError(f"{key} must be positive")
    return tau


def _max_km(params: Mapping[str, Any]) -> float | None:
    return None if params.get("max_km") is None else float(params["max_km"])


def spatial_distances(params: Mapping[str, Any], batch: Rollouts) -> tuple[NDArray, NDArray, list]:
    """GeoAgent R_spa's distance (paper reading): coordinates, else the geocoded answer; R = 6371."""
    d, parsed, preds = read_coordinates(batch, rel.GEOAGENT_RADIUS_KM)
    if np.isnan(d).any():
        levels = [  # a rollout without a parse had its coordinates read by the fast path
            rd.rollout_levels(x, pr) if pr is not None else {}
            for x, pr in zip(batch.texts, preds, strict=True)
        ]
        d = geocode_missing(params, batch, d, levels, rel.GEOAGENT_RADIUS_KM)
        parsed |= np.array([bool(lv and any(lv.values())) for lv in levels], dtype=bool)
    return d, parsed, preds


def spatial_distances_released(params: Mapping[str, Any], batch: Rollouts) -> tuple[NDArray, NDArray, list]:
    """``GeoScoreAccuracy``: the first ``<answer>`` (else a JSON ``FinalAnswer``), geocoded; R = 6371."""
    n = len(batch)
    levels: list[dict[str, str | None]] = []
    for text in batch.texts:
        answer = rel.geoagent_spatial_answer(text or "")
        fields = rel.geoagent_fields(answer or "", core.MAX_NAME_CHARS)
        levels.append(dict(zip(core.SEMANTIC_LEVELS, (f or None for f in fields), strict=True)))
    d = geocode_missing(params, batch, np.full(n, np.nan), levels, rel.GEOAGENT_RADIUS_KM)
    parsed = np.array([any(lv.values()) for lv in levels], dtype=bool)
    return d, parsed, [None] * n


def _spatial(params: Mapping[str, Any], d: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(core.spatial_reward(d, tau_km=_tau(params), max_km=_max_km(params)), dtype=np.float64)


def _score_spatial(params: Mapping[str, Any], batch: Rollouts) -> RewardBatch:
    _tau(params)  # a bad τ is a config error even when no rollout has an answer
    d, parsed, preds = spatial_distances(params, batch)
    return _finish(batch, _spatial(params, d), d, parsed, preds)


def _score_spatial_released(params: Mapping[str, Any], batch: Rollouts) -> RewardBatch:
    _tau(params)
    d, parsed, preds = spatial_distances_released(params, batch)
    return _finish(batch, _spatial(params, d), d, parsed, preds)


def annealed_tau(params: Mapping[str, Any], step: int | None) -> float:
    """τ(t) = τ₀·(τ₁/τ₀)^(min(t, T)/T): from ``tau_start_km`` to ``tau_end_km`` over ``anneal_steps``."""
    t0, t1 = _tau(params, "tau_start_km"), _tau(params, "tau_end_km")
    steps = int(params["anneal_steps"])
    if steps <= 0:
        raise ValueError("anneal_steps must be positive")
    frac = min(max(step or 0, 0), steps) / steps
    return t0 * (t1 / t0) ** frac


def _score_annealed(params: Mapping[str, Any], batch: Rollouts) -> RewardBatch:
    tau = annealed_tau(params, batch.step)
    if batch.step is None:
        _warn_no_step_once()
    d, parsed, preds = spatial_distances(params, batch)
    scores = core.spatial_reward(d, tau_km=tau)
    return _finish(batch, scores, d, parsed, preds)


@functools.cache
def _warn_no_step_once() -> None:
    """Once per process: the engine passed no training step, so τ does not move."""
    log.warning(
        "reward annealed: the engine gave no training step; τ stays at tau_start_km "
        "(TRL passes trainer_state; verl: DataProto.meta_info['global_steps'])"
    )


def _similarity(params: Mapping[str, Any]) -> core.Similarity:
    from geosleuth.training.similarity import resolve_similarity

    return resolve_similarity(params.get("similarity"), params.get("similarity_model"))


def _verifier(params: Mapping[str, Any]) -> Verifier | None:
    path = params.get("verifier")
    if not path:
        return None
    if callable(path):
        return path  # type: ignore[no-any-return]
    from geosleuth.plugins import load_callable

    return load_callable(str(path), "verifier")  # type: ignore[no-any-return]


def _verdicts(verdict: Any) -> tuple[bool, bool, bool]:
    if isinstance(verdict, Mapping):
        state = verdict.get("state", verdict.get("admin1", verdict.get("province", False)))
        return bool(verdict.get("country", False)), bool(state), bool(verdict.get("city", False))
    c, s, y = verdict
    return bool(c), bool(s), bool(y)


def _hierarchical_values(params: Mapping[str, Any], ok: NDArray[np.bool_]) -> NDArray[np.float64]:
    return np.asarray(
        core.hierarchical_reward(
            ok[:, 0], ok[:, 1], ok[:, 2], beta=float(params["beta"]), normalize=bool(params["normalize"])
        ),
        dtype=np.float64,
    )


def _truth_levels(t: GroundTruth) -> dict[str, str | None]:
    return {k: t.levels.get(k) for k in ("country", "admin1", "city")}


def hierarchy_answer_text(text: str | None) -> str:
    """The text GeoVista's rule reads in paper mode: the answer block, else the final own turn."""
    content = rd.answer_content(text)
    if content is not None:
        return content
    return rd.final_own_turn(rd.own_text(text))


def _names_level(answer_norm: str, levels: Sequence[str | None], refs: Sequence[str | None], j: int) -> bool:
    """GeoVista's whole-term rule for level ``j``. A name the answer gives at another level, and
    that is right there, is taken out first: "State: Lucerne, City: Emmen" names the state
    Lucerne, not the city of the same name."""
    term = rel.geovista_normalize(refs[j])
    if not term:
        return False
    own = rel.geovista_normalize(levels[j])
    for k, value in enumerate(levels):
        other = rel.geovista_normalize(value)
        explained = rel.geovista_contains(other, rel.geovista_normalize(refs[k]))
        if k != j and other and other != own and explained and rel.geovista_contains(other, term):
            answer_norm = _remove_term(answer_norm, other)
    return rel.geovista_contains(answer_norm, term)


def _remove_term(text_norm: str, term_norm: str) -> str:
    """``text_norm`` with every whole-term occurrence of ``term_norm`` replaced by a space."""
    out, pos = [], 0
    start = text_norm.find(term_norm)
    while start != -1:
        end = start + len(term_norm)
        if (start == 0 or not text_norm[start - 1].isalnum()) and (
            end == len(text_norm) or not text_norm[end].isalnum()
        ):
            out.append(text_norm[pos:start])
            out.append(" ")
            pos = end
        start = text_norm.find(term_norm, end if pos == end else start + 1)
    out.append(text_norm[pos:])
    return "".join(out)


def _score_hierarchical(params: Mapping[str, Any], batch: Rollouts) -> RewardBatch:
    """GeoVista (paper): β² if the city is right, else β if the state is, else 1 if the country is.

    A level is right when the answer names it: its parsed field matches (multilingual,
    ``match_threshold``), or the true name occurs as a whole term in the answer (GeoVista's rule,
    which reads prose, ``City (State, Country)``, any case, abbreviated states and names such
    as "Vilanova i la Geltrú"). With ``verifier`` the model verifier judges instead.
    """
    thr = float(params["match_threshold"])
    verifier = _verifier(params)
    sim = _similarity(params)
    preds, truths = batch.preds(), batch.truths()
    ok = np.zeros((len(batch), 3), dtype=bool)
    for i, (p, t, text) in enumerate(zip(preds, truths, batch.texts, strict=True)):
        if verifier is not None:
            try:
                ok[i] = _verdicts(verifier(rd.answer_content(text) or "", dict(t.levels)))
            except Exception as exc:  # noqa: BLE001 - a failed verdict is a wrong answer, logged
                batch.log.note(f"had a failed verifier call, scored 0 ({type(exc).__name__})", i, str(exc))
            continue
        answer = rel.geovista_normalize(hierarchy_answer_text(text))
        levels = rd.hierarchy_levels(text, p)
        refs = (t.levels.get("country"), t.levels.get("admin1"), t.levels.get("city"))
        for j, (name, pv, rv) in enumerate(zip(("country", "admin1", "city"), levels, refs, strict=True)):
            named = _names_level(answer, levels, refs, j)
            ok[i, j] = named or (bool(pv and rv) and core._clamped(sim, pv, rv, name) >= thr)
        ok[i] = (ok[i].any(), ok[i, 1] or ok[i, 2], ok[i, 2])
    parsed = np.array(
        [rd.answered(p) or bool(rd.answer_content(x)) for p, x in zip(preds, batch.texts, strict=True)]
    )
    d = _pred_distances(preds, truths)
    return _finish(batch, _hierarchical_values(params, ok), d, parsed, preds)


def _score_hierarchical_released(params: Mapping[str, Any], batch: Rollouts) -> RewardBatch:
    """``compure_score_search``: the rule on the text after the last "assistant"; with ``verifier``,
    its verdict, falling back to the rule when it fails (as released)."""
    verifier = _verifier(params)
    truths = batch.truths()
    ok = np.zeros((len(batch), 3), dtype=bool)
    for i, (t, text) in enumerate(zip(truths, batch.texts, strict=True)):
        last = rel.geovista_last_turn(text or "")
        rule = rel.geovista_rule(last, _truth_levels(t))
        if verifier is not None:
            try:
                c, s, y = _verdicts(verifier(last, dict(t.levels)))
                rule = (c or s or y, s or y, y)
            except Exception as exc:  # noqa: BLE001 - released: the rule's result stands
                batch.log.note(f"had a failed verifier call, rule used ({type(exc).__name__})", i, str(exc))
        ok[i] = rule
    n = len(batch)
    parsed = np.array([bool(rel.geovista_last_turn(x or "")) for x in batch.texts], dtype=bool)
    return _finish(batch, _hierarchical_values(params, ok), np.full(n, np.nan), parsed, [None] * n)


def _pred_distances(preds: Sequence[Prediction], truths: Sequence[GroundTruth]) -> NDArray[np.float64]:
    lat = np.array([p.lat if p.has_coords else np.nan for p in preds], dtype=np.float64)
    lon = np.array([p.lon if p.has_coords else np.nan for p in preds], dtype=np.float64)
    tlat = np.array([t.lat for t in truths], dtype=np.float64)
    tlon = np.array([t.lon for t in truths], dtype=np.float64)
    return np.asarray(haversine_km(lat, lon, tlat, tlon), dtype=np.float64)


def semantic_values(params: Mapping[str, Any], batch: Rollouts) -> NDArray[np.float64]:
    """GeoAgent R_sem (paper reading): a ``Country; Region; Place`` answer by position, else the
    parsed fields with a lone place of open level scored where it scores best."""
    gating = params.get("gating") or "paper"
    sim = _similarity(params)
    out = np.zeros(len(batch), dtype=np.float64)
    for i, (p, t, x) in enumerate(zip(batch.preds(), batch.truths(), batch.texts, strict=True)):
        ga = rd.geoagent_levels(x)
        readings = [ga] if ga is not None else core.semantic_readings(p)
        out[i] = core.best_semantic_reward(readings, rd.truth_semantic(t), sim, gating=gating)
    return out


def semantic_values_released(params: Mapping[str, Any], batch: Rollouts) -> NDArray[np.float64]:
    """``TripleFieldAccuracy``: first ``<answer>`` or the whole completion, ``_split_three_fields``."""
    gating = params.get("gating") or "released"
    sim = _similarity(params)
    out = np.zeros(len(batch), dtype=np.float64)
    for i, (t, x) in enumerate(zip(batch.truths(), batch.texts, strict=True)):
        fields = rel.geoagent_fields(rel.geoagent_semantic_answer(x or ""), core.MAX_NAME_CHARS)
        if not fields[0]:
            continue
        levels = dict(zip(core.SEMANTIC_LEVELS, (f or None for f in fields), strict=True))
        out[i] = core.semantic_reward(levels, rd.truth_semantic(t), sim, gating=gating)
    return out


def _levels_parsed(batch: Rollouts) -> NDArray[np.bool_]:
    return np.array(
        [
            rd.answered(p) or rd.geoagent_levels(x) is not None
            for p, x in zip(batch.preds(), batch.texts, strict=True)
        ],
        dtype=bool,
    )


def _score_semantic(params: Mapping[str, Any], batch: Rollouts) -> RewardBatch:
    scores = semantic_values(params, batch)
    return _finish(
        batch, scores, _pred_distances(batch.preds(), batch.truths()), _levels_parsed(batch), batch.preds()
    )


def _score_semantic_released(params: Mapping[str, Any], batch: Rollouts) -> RewardBatch:
    scores = semantic_values_released(params, batch)
    n = len(batch)
    parsed = np.array(
        [
            bool(rel.geoagent_fields(rel.geoagent_semantic_answer(x or ""), core.MAX_NAME_CHARS)[0])
            for x in batch.texts
        ]
    )
    return _finish(batch, scores, np.full(n, np.nan), parsed, [None] * n)


def _consistency(batch: Rollouts) -> NDArray[np.float64]:
    if batch.consistency_fn is None:
        return np.zeros(len(batch))
    return np.asarray(
        list(batch.consistency_fn([t or "" for t in batch.texts], batch.truths())), dtype=np.float64
    )


def _score_combined(params: Mapping[str, Any], batch: Rollouts) -> RewardBatch:
    """GeoAgent R = 1.5·R_spa + 1.0·R_sem + 0.5·R_con (R_con from the consistency judge, else 0)."""
    _tau(params)
    d, parsed, _ = spatial_distances(params, batch)
    scores = core.combined_reward(
        _spatial(params, d), semantic_values(params, batch), _consistency(batch), tuple(params["weights"])
    )
    return _finish(batch, scores, d, parsed | _levels_parsed(batch), batch.preds())


def _score_combined_released(params: Mapping[str, Any], batch: Rollouts) -> RewardBatch:
    _tau(params)
    d, parsed, _ = spatial_distances_released(params, batch)
    sem = semantic_values_released(params, batch)
    scores = core.combined_reward(_spatial(params, d), sem, _consistency(batch), tuple(params["weights"]))
    return _finish(batch, scores, d, parsed, [None] * len(batch))


_SIMILARITY_PARAMS: dict[str, Any] = {"similarity": None, "similarity_model": None}
_GEOCODE_PARAMS: dict[str, Any] = {"geocode": True, "tool_settings": None}
_GEOAGENT_ORM = "HVision-NKU/GeoAgent swift/plugin/orm.py"

REGISTRY_ENTRIES: tuple[RewardDef, ...] = (
    RewardDef(
        name="step",
        summary="Thinking with Map step reward 1/0.8/0.6/0.4/0.2/0.1/0 at 0.5/2/10/25/200/750 km",
        paper="Thinking with Map (AMAP-ML), step reward",
        params={},
        score_paper=_score_step,
        released_source=(
            "AMAP-ML/Thinking-with-Map verl/verl/utils/reward_score/localization.py:compute_distance_score"
        ),
        score_released=_score_step_released,
        released_note=(
            "first top-level JSON object of the whole text with lat/lon/city/country; geopy WGS-84 geodesic"
        ),
        distance=True,
    ),
    RewardDef(
        name="piecewise",
        summary="SpotAgent piecewise-linear: 1 below 1 km, 0.75 at 25 km, towards 0.2 at 200 km, 0 beyond",
        paper="SpotAgent, distance reward",
        params={},
        score_paper=_score_piecewise,
        released_note="SpotAgent released no reward code: released=true is the paper's formula",
        aliases=("linear",),
        distance=True,
    ),
    RewardDef(
        name="spatial",
        summary="GeoAgent R_spa = exp(−d/τ), haversine R = 6371 km; text answers geocoded",
        paper="GeoAgent Eq. R_spa, Table 5 (τ = 200 km, R = 6371 km)",
        params={"tau_km": 200.0, "max_km": None, **_GEOCODE_PARAMS},
        score_paper=_score_spatial,
        released_source=f"{_GEOAGENT_ORM}:GeoScoreAccuracy",
        released_params={"max_km": core.GEOAGENT_SPATIAL_MAX_KM},
        score_released=_score_spatial_released,
        released_note="first <answer> (else JSON FinalAnswer) geocoded; exp(−10·d/2000), 0 from 2000 km",
        distance=True,
    ),
    RewardDef(
        name="annealed",
        summary="exp(−d/τ(t)) with τ shrinking from tau_start_km to tau_end_km over anneal_steps (option)",
        paper="geosleuth option against tool-use collapse (not a paper's reward)",
        params={"tau_start_km": 2000.0, "tau_end_km": 200.0, "anneal_steps": 1000, **_GEOCODE_PARAMS},
        score_paper=_score_annealed,
        released_note="not a paper's reward: released=true changes nothing",
        distance=True,
    ),
    RewardDef(
        name="hierarchical",
        summary="GeoVista: β² if the city is right, else β if the state is, else 1 if the country is",
        paper="GeoVista, hierarchical reward (β = 2)",
        params={
            "beta": 2.0,
            "normalize": False,
            "match_threshold": 0.85,
            "verifier": None,
            **_SIMILARITY_PARAMS,
        },
        score_paper=_score_hierarchical,
        released_source="ekonwang/GeoVista verl/utils/reward_score/search_agent.py:compure_score_search",
        score_released=_score_hierarchical_released,
        released_note=(
            "rule on the text after the last 'assistant' (reasoning included); verifier fallback to the rule"
        ),
    ),
    RewardDef(
        name="semantic",
        summary="GeoAgent R_sem = Σ αᵢ·sᵢ, α = 0.1/0.6/0.3, gates 0.7/0.5",
        paper="GeoAgent Eq. R_sem",
        params={"gating": None, **_SIMILARITY_PARAMS},
        score_paper=_score_semantic,
        released_source=f"{_GEOAGENT_ORM}:TripleFieldAccuracy",
        score_released=_score_semantic_released,
        released_note=(
            "released gating; first <answer> or the whole text, empty parts dropped, "
            "extra parts joined with ';'"
        ),
    ),
    RewardDef(
        name="geo_similarity",
        summary="GeoAgent R = 1.5·R_spa + 1.0·R_sem + 0.5·R_con",
        paper="GeoAgent Eq. R",
        params={
            "tau_km": 200.0,
            "max_km": None,
            "weights": core.COMBINED_WEIGHTS,
            "gating": None,
            **_GEOCODE_PARAMS,
            **_SIMILARITY_PARAMS,
        },
        score_paper=_score_combined,
        released_source=f"{_GEOAGENT_ORM}:GeoScoreAccuracy+TripleFieldAccuracy+ThinkAnswerConsistency",
        released_params={"max_km": core.GEOAGENT_SPATIAL_MAX_KM},
        score_released=_score_combined_released,
        released_note="the released R_spa and R_sem readings (R_con: the judge's own released option)",
        aliases=("combined",),
    ),
)

REGISTRY: dict[str, RewardDef] = {}
for _entry in REGISTRY_ENTRIES:
    for _name in (_entry.name, *_entry.aliases):
        REGISTRY[_name] = _entry

REWARD_NAMES: tuple[str, ...] = tuple(REGISTRY)
DISTANCE_REWARDS: tuple[str, ...] = tuple(n for n, e in REGISTRY.items() if e.distance)
LEVEL_REWARDS: tuple[str, ...] = tuple(n for n, e in REGISTRY.items() if not e.distance)


def get_reward(name: str) -> RewardDef:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown reward {name!r}; use one of {', '.join(REWARD_NAMES)}") from None


@dataclass(frozen=True)
class RewardSpec:
    """A reward chosen by name, with its parameters (``tau_km``, ``beta``, ``match_threshold``…)."""

    name: str = "step"
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        get_reward(self.name).resolve(self.params)  # unknown names and parameters fail here

    @property
    def definition(self) -> RewardDef:
        return get_reward(self.name)

    def resolved(self) -> dict[str, Any]:
        return self.definition.resolve(self.params)

    @classmethod
    def parse(cls, value: RewardSpec | str | Mapping[str, Any] | None) -> RewardSpec:
        """``"spatial"``, ``"spatial:tau_km=100"``, ``{"name": "spatial", "tau_km": 100}`` or a spec."""
        if value is None:
            return cls()
        if isinstance(value, RewardSpec):
            return value
        if isinstance(value, Mapping):
            params = {k: v for k, v in value.items() if k != "name"}
            return cls(str(value.get("name", "step")), params)
        name, _, rest = str(value).partition(":")
        parsed: dict[str, Any] = {}
        for part in filter(None, rest.split(",")):
            key, sep, raw = part.partition("=")
            if not sep:
                raise ValueError(f"reward parameter {part!r} must look like key=value")
            parsed[key.strip()] = _number(raw.strip())
        return cls(name.strip(), parsed)


def _number(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


_TOOL_CALL_TAG = re.compile(r"<tool_call>", re.I)


def tool_call_counts(batch: Rollouts) -> NDArray[np.float64]:
    """Tool calls per rollout: as the engine counted them, else ``<tool_call>`` tags in the text."""
    if batch.tool_calls is not None:
        return np.asarray(batch.tool_calls, dtype=np.float64)
    return np.array([len(_TOOL_CALL_TAG.findall(t or "")) for t in batch.texts], dtype=np.float64)


def apply_tool_bonus(params: Mapping[str, Any], batch: Rollouts, result: RewardBatch) -> RewardBatch:
    """Add ``tool_bonus``·min(calls, cap)/cap to rollouts whose reward is already positive.

    Paid only on top of a rewarded answer, so a policy cannot earn it by calling tools and
    answering badly. Off (0) by default.
    """
    bonus = float(params["tool_bonus"])
    if bonus == 0.0:
        return result
    cap = int(params["tool_bonus_cap"])
    if cap <= 0 or not math.isfinite(bonus):
        raise ValueError("tool_bonus must be finite and tool_bonus_cap positive")
    calls = np.minimum(tool_call_counts(batch), cap) / cap
    result.scores = result.scores + np.where(result.scores > 0, bonus * calls, 0.0)
    return result


def score_rollouts(spec: RewardSpec, batch: Rollouts) -> RewardBatch:
    """Score one batch with one reward; problems are logged once per batch."""
    params = spec.resolved()
    definition = spec.definition
    try:
        result = definition.scorer(params)(params, batch)
        return apply_tool_bonus(params, batch, result)
    finally:
        batch.log.flush()
