"""The scorer of each training reward: resolved parameters and a `Rollouts` batch in, a `RewardBatch` out.

Each reward has its paper form and, where the authors' code reads answers differently, a
replay of that reading (``*_released``); `geosleuth.training.rewards.registry` names them.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from geosleuth.core import released, reward_math
from geosleuth.core.geo import EARTH_RADIUS_KM, haversine_km
from geosleuth.core.records import Prediction
from geosleuth.training.rewards import reading
from geosleuth.training.rewards.rollouts import RewardBatch, Rollouts, Verifier
from geosleuth.training.rewards.truth import GroundTruth

log = logging.getLogger("geosleuth.training.rewards")
"""One logger for every reward's batch warnings, whichever module notes them."""


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
        hit = reading.fast_coordinates(text) if given is None else None
        if hit is not None:
            lat[i], lon[i] = hit
            parsed[i] = True
            preds.append(None)
            continue
        pred = given[i] if given is not None else reading.parse_rollout(text)
        parsed[i] = reading.answered(pred)
        if pred.has_coords:
            lat[i], lon[i] = pred.lat, pred.lon
        preds.append(pred)
    tl = np.array([reading.truth_latlon(t) for t in batch.raw_truths], dtype=np.float64).reshape(n, 2)
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
    from geosleuth.training.rewards.geocoding import shared_geocoder

    geocoder = shared_geocoder(params.get("tool_settings"))
    hits = geocoder.geocode_many([[levels[i].get(k) for k in reward_math.SEMANTIC_LEVELS] for i in todo])
    out = d.copy()
    for i, hit in zip(todo, hits, strict=True):
        if hit is None:
            batch.log.note(
                "could not be geocoded (R_spa = 0)", i, "; ".join(v for v in levels[i].values() if v)
            )
            continue
        tlat, tlon = reading.truth_latlon(batch.raw_truths[i])
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
    return _finish(batch, reward_math.step_reward(d), d, parsed, preds)


def _score_step_released(params: Mapping[str, Any], batch: Rollouts) -> RewardBatch:
    """``localization.compute_distance_score`` on the whole text (see `core.released`)."""
    n = len(batch)
    scores = np.zeros(n)
    d = np.full(n, np.nan)
    parsed = np.zeros(n, dtype=bool)
    for i, (text, truth) in enumerate(zip(batch.texts, batch.raw_truths, strict=True)):
        answer = released.twm_answer(text or "")
        tlat, tlon = reading.truth_latlon(truth)
        metres = released.twm_distance_m(answer, tlat, tlon)
        parsed[i] = answer is not None
        scores[i] = released.twm_step_score(metres)
        if metres != released.TWM_MISS_M:
            d[i] = metres / 1000.0
    return _finish(batch, scores, d, parsed, [None] * n)


def _score_piecewise(params: Mapping[str, Any], batch: Rollouts) -> RewardBatch:
    d, parsed, preds = read_coordinates(batch, EARTH_RADIUS_KM)
    return _finish(batch, reward_math.piecewise_linear_reward(d), d, parsed, preds)


def _tau(params: Mapping[str, Any], key: str = "tau_km") -> float:
    tau = float(params[key])
    if not tau > 0:
        raise ValueError(f"{key} must be positive")
    return tau


def _max_km(params: Mapping[str, Any]) -> float | None:
    return None if params.get("max_km") is None else float(params["max_km"])


def spatial_distances(params: Mapping[str, Any], batch: Rollouts) -> tuple[NDArray, NDArray, list]:
    """GeoAgent R_spa's distance (paper reading): coordinates, else the geocoded answer; R = 6371."""
    d, parsed, preds = read_coordinates(batch, released.GEOAGENT_RADIUS_KM)
    if np.isnan(d).any():
        levels = [  # a rollout without a parse had its coordinates read by the fast path
            reading.rollout_levels(x, pr) if pr is not None else {}
            for x, pr in zip(batch.texts, preds, strict=True)
        ]
        d = geocode_missing(params, batch, d, levels, released.GEOAGENT_RADIUS_KM)
        parsed |= np.array([bool(lv and any(lv.values())) for lv in levels], dtype=bool)
    return d, parsed, preds


def spatial_distances_released(params: Mapping[str, Any], batch: Rollouts) -> tuple[NDArray, NDArray, list]:
    """``GeoScoreAccuracy``: the first ``<answer>`` (else a JSON ``FinalAnswer``), geocoded; R = 6371."""
    n = len(batch)
    levels: list[dict[str, str | None]] = []
    for text in batch.texts:
        answer = released.geoagent_spatial_answer(text or "")
        fields = released.geoagent_fields(answer or "", reward_math.MAX_NAME_CHARS)
        levels.append(dict(zip(reward_math.SEMANTIC_LEVELS, (f or None for f in fields), strict=True)))
    d = geocode_missing(params, batch, np.full(n, np.nan), levels, released.GEOAGENT_RADIUS_KM)
    parsed = np.array([any(lv.values()) for lv in levels], dtype=bool)
    return d, parsed, [None] * n


def _spatial(params: Mapping[str, Any], d: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(
        reward_math.spatial_reward(d, tau_km=_tau(params), max_km=_max_km(params)), dtype=np.float64
    )


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
    scores = reward_math.spatial_reward(d, tau_km=tau)
    return _finish(batch, scores, d, parsed, preds)


@functools.cache
def _warn_no_step_once() -> None:
    """Once per process: the engine passed no training step, so τ does not move."""
    log.warning(
        "reward annealed: the engine gave no training step; τ stays at tau_start_km "
        "(TRL passes trainer_state; verl: DataProto.meta_info['global_steps'])"
    )


def _similarity(params: Mapping[str, Any]) -> reward_math.Similarity:
    from geosleuth.training.rewards.similarity import resolve_similarity

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
        reward_math.hierarchical_reward(
            ok[:, 0], ok[:, 1], ok[:, 2], beta=float(params["beta"]), normalize=bool(params["normalize"])
        ),
        dtype=np.float64,
    )


def _truth_levels(t: GroundTruth) -> dict[str, str | None]:
    return {k: t.levels.get(k) for k in ("country", "admin1", "city")}


def hierarchy_answer_text(text: str | None) -> str:
    """The text GeoVista's rule reads in paper mode: the answer block, else the final own turn."""
    content = reading.answer_content(text)
    if content is not None:
        return content
    return reading.final_own_turn(reading.own_text(text))


def _names_level(answer_norm: str, levels: Sequence[str | None], refs: Sequence[str | None], j: int) -> bool:
    """GeoVista's whole-term rule for level ``j``. A name the answer gives at another level, and
    that is right there, is taken out first: "State: Lucerne, City: Emmen" names the state
    Lucerne, not the city of the same name."""
    term = released.geovista_normalize(refs[j])
    if not term:
        return False
    own = released.geovista_normalize(levels[j])
    for k, value in enumerate(levels):
        other = released.geovista_normalize(value)
        explained = released.geovista_contains(other, released.geovista_normalize(refs[k]))
        if k != j and other and other != own and explained and released.geovista_contains(other, term):
            answer_norm = _remove_term(answer_norm, other)
    return released.geovista_contains(answer_norm, term)


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
                ok[i] = _verdicts(verifier(reading.answer_content(text) or "", dict(t.levels)))
            except Exception as exc:  # noqa: BLE001 - a failed verdict is a wrong answer, logged
                batch.log.note(f"had a failed verifier call, scored 0 ({type(exc).__name__})", i, str(exc))
            continue
        answer = released.geovista_normalize(hierarchy_answer_text(text))
        levels = reading.hierarchy_levels(text, p)
        refs = (t.levels.get("country"), t.levels.get("admin1"), t.levels.get("city"))
        for j, (name, pv, rv) in enumerate(zip(("country", "admin1", "city"), levels, refs, strict=True)):
            named = _names_level(answer, levels, refs, j)
            ok[i, j] = named or (bool(pv and rv) and reward_math._clamped(sim, pv, rv, name) >= thr)
        ok[i] = (ok[i].any(), ok[i, 1] or ok[i, 2], ok[i, 2])
    parsed = np.array(
        [
            reading.answered(p) or bool(reading.answer_content(x))
            for p, x in zip(preds, batch.texts, strict=True)
        ]
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
        last = released.geovista_last_turn(text or "")
        rule = released.geovista_rule(last, _truth_levels(t))
        if verifier is not None:
            try:
                c, s, y = _verdicts(verifier(last, dict(t.levels)))
                rule = (c or s or y, s or y, y)
            except Exception as exc:  # noqa: BLE001 - released: the rule's result stands
                batch.log.note(f"had a failed verifier call, rule used ({type(exc).__name__})", i, str(exc))
        ok[i] = rule
    n = len(batch)
    parsed = np.array([bool(released.geovista_last_turn(x or "")) for x in batch.texts], dtype=bool)
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
        ga = reading.geoagent_levels(x)
        readings = [ga] if ga is not None else reward_math.semantic_readings(p)
        out[i] = reward_math.best_semantic_reward(readings, reading.truth_semantic(t), sim, gating=gating)
    return out


def semantic_values_released(params: Mapping[str, Any], batch: Rollouts) -> NDArray[np.float64]:
    """``TripleFieldAccuracy``: first ``<answer>`` or the whole completion, ``_split_three_fields``."""
    gating = params.get("gating") or "released"
    sim = _similarity(params)
    out = np.zeros(len(batch), dtype=np.float64)
    for i, (t, x) in enumerate(zip(batch.truths(), batch.texts, strict=True)):
        fields = released.geoagent_fields(
            released.geoagent_semantic_answer(x or ""), reward_math.MAX_NAME_CHARS
        )
        if not fields[0]:
            continue
        levels = dict(zip(reward_math.SEMANTIC_LEVELS, (f or None for f in fields), strict=True))
        out[i] = reward_math.semantic_reward(levels, reading.truth_semantic(t), sim, gating=gating)
    return out


def _levels_parsed(batch: Rollouts) -> NDArray[np.bool_]:
    return np.array(
        [
            reading.answered(p) or reading.geoagent_levels(x) is not None
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
            bool(
                released.geoagent_fields(
                    released.geoagent_semantic_answer(x or ""), reward_math.MAX_NAME_CHARS
                )[0]
            )
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
    scores = reward_math.combined_reward(
        _spatial(params, d), semantic_values(params, batch), _consistency(batch), tuple(params["weights"])
    )
    return _finish(batch, scores, d, parsed | _levels_parsed(batch), batch.preds())


def _score_combined_released(params: Mapping[str, Any], batch: Rollouts) -> RewardBatch:
    _tau(params)
    d, parsed, _ = spatial_distances_released(params, batch)
    sem = semantic_values_released(params, batch)
    scores = reward_math.combined_reward(
        _spatial(params, d), sem, _consistency(batch), tuple(params["weights"])
    )
    return _finish(batch, scores, d, parsed, [None] * len(batch))
