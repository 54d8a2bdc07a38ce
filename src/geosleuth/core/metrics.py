"""Evaluation metrics as small pure functions over NumPy arrays.

Conventions: distances in km, one entry per sample; a failed parse is ``NaN`` and always counts
as a miss (it is never dropped from a denominator). Accuracies are fractions in [0, 1] here;
every summary, report and CLI shows them as percentages (0–100). Empty input gives ``NaN``
accuracies (there is nothing to average).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from geosleuth.core.geo import EARTH_RADIUS_KM

THRESHOLD_PRESETS: dict[str, tuple[float, ...]] = {
    "classic": (1.0, 25.0, 200.0, 750.0, 2500.0),
    "map": (0.5, 2.0, 10.0, 25.0, 200.0, 750.0),
    "street": (1.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0),
}
"""Named threshold sets: IM2GPS-style continent…street, Thinking-with-Map, street-level."""

MAX_DISTANCE_KM = math.pi * EARTH_RADIUS_KM
"""Half the Earth's circumference: the distance a failed answer is charged in means/medians."""

GEOGUESSR_SCALE_KM = 1492.7
GEOSCORE_SCALE_KM = 18050.0

PATH_LEVELS: tuple[str, ...] = ("country", "admin1", "city", "admin2", "town", "street")
"""WhereBench's path order: country → province → city → county → town → street."""

TEXT_LEVELS: tuple[str, ...] = ("country", "admin1", "city")


def _f64(values: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(values, dtype=np.float64).reshape(-1)


def resolve_thresholds(spec: str | Iterable[float]) -> tuple[float, ...]:
    """A preset name, a comma-separated list, or numbers -> sorted unique thresholds in km."""
    if isinstance(spec, str):
        if spec in THRESHOLD_PRESETS:
            return THRESHOLD_PRESETS[spec]
        try:
            values = [float(x) for x in spec.replace(";", ",").split(",") if x.strip()]
        except ValueError as exc:
            raise ValueError(
                f"thresholds must be a preset {sorted(THRESHOLD_PRESETS)} or numbers, got {spec!r}"
            ) from exc
    else:
        values = [float(x) for x in spec]
    if not values or any(not math.isfinite(v) or v <= 0 for v in values):
        raise ValueError(f"thresholds must be positive numbers, got {spec!r}")
    return tuple(sorted(set(values)))


def threshold_name(km: float) -> str:
    """``acc@0.5km``, ``acc@25km``, ``acc@2500km``: the shortest decimal that round-trips."""
    return f"acc@{np.format_float_positional(float(km), trim='-')}km"


def hits_at(distances_km: ArrayLike, threshold_km: float, strict: bool = True) -> NDArray[np.bool_]:
    """Per-sample hit at one threshold; NaN is a miss. ``strict`` means ``d < t``, else ``d <= t``."""
    d = _f64(distances_km)
    with np.errstate(invalid="ignore"):
        return (d < threshold_km) if strict else (d <= threshold_km)


def acc_at_k(
    distances_km: ArrayLike, thresholds: str | Iterable[float] = "classic", strict: bool = True
) -> dict[float, float]:
    """Share of samples within each threshold (NaN counts as a miss)."""
    d = _f64(distances_km)
    out: dict[float, float] = {}
    for t in resolve_thresholds(thresholds):
        out[t] = float(hits_at(d, t, strict).mean()) if d.size else math.nan
    return out


def charged_distances(distances_km: ArrayLike) -> NDArray[np.float64]:
    """Distances with every failed answer charged the maximum possible error."""
    d = _f64(distances_km)
    return np.where(np.isfinite(d), d, MAX_DISTANCE_KM)


def median_km(distances_km: ArrayLike) -> float:
    """Median error; failures count at :data:`MAX_DISTANCE_KM` so they are not dropped."""
    return median_finite(charged_distances(distances_km), in_place=True)


def median_finite(values: NDArray[np.float64], in_place: bool = False) -> float:
    """``np.median`` of NaN-free values, bit for bit, by one partition; NaN when empty.

    ``np.median`` checks for NaN through ``numpy.ma``, whose import is a visible share of a 10-row
    ``score``; charged distances never hold NaN. ``in_place`` reorders ``values`` instead of copying.
    """
    n = values.size
    if n == 0:
        return math.nan
    k = n // 2
    part = values if in_place else values.copy()
    part.partition([k - 1, k] if n % 2 == 0 else k)
    return float(part[k]) if n % 2 else float((part[k - 1] + part[k]) / 2)


def mean_km(distances_km: ArrayLike) -> float:
    """Mean error; failures count at :data:`MAX_DISTANCE_KM`."""
    d = charged_distances(distances_km)
    return float(d.mean()) if d.size else math.nan


def share_below(distances_km: ArrayLike, km: float = 3.0) -> float:
    """GeoVista's "< 3 km" share (strict)."""
    d = _f64(distances_km)
    return float(hits_at(d, km).mean()) if d.size else math.nan


def geoguessr_points(distances_km: ArrayLike, scale_km: float = GEOGUESSR_SCALE_KM) -> NDArray[np.float64]:
    """Per-sample GeoGuessr points 5000·exp(−d/1492.7); failures score 0."""
    d = _f64(distances_km)
    return np.where(np.isfinite(d), 5000.0 * np.exp(-np.where(np.isfinite(d), d, 0.0) / scale_km), 0.0)


def geoguessr_score(distances_km: ArrayLike) -> float:
    """Mean GeoGuessr score (OSV-5M)."""
    p = geoguessr_points(distances_km)
    return float(p.mean()) if p.size else math.nan


def geoscore_points(distances_km: ArrayLike) -> NDArray[np.float64]:
    """GeoAgent's GeoScore 5000·exp(−10·d/18050) per sample; failures score 0."""
    return geoguessr_points(distances_km, GEOSCORE_SCALE_KM / 10.0)


def geoscore(distances_km: ArrayLike) -> float:
    """Mean GeoScore."""
    p = geoscore_points(distances_km)
    return float(p.mean()) if p.size else math.nan


# --- level-wise accuracy ------------------------------------------------------------------


def _as_text_array(values: ArrayLike) -> NDArray[np.object_]:
    """Labels as an object array with ``None`` / NaN turned into ``""`` (vectorised)."""
    arr = np.array(values, dtype=object).reshape(-1)
    if arr.size:
        missing = (arr == None) | (arr != arr)  # noqa: E711 - elementwise None test; NaN != NaN
        arr[missing] = ""
    return arr


def label_hits(
    predicted: ArrayLike,
    truth: ArrayLike,
    missing_is_miss: bool = False,
) -> NDArray[np.bool_]:
    """Exact label equality per sample, as OSV-5M compares reverse-geocoded names.

    With ``missing_is_miss`` an empty prediction never matches (used for text answers);
    OSV-5M itself counts an empty predicted area equal to an empty true area.
    """
    p, t = _as_text_array(predicted), _as_text_array(truth)
    hits = p == t
    if missing_is_miss:
        hits &= p != ""
    return hits.astype(bool)


def level_hits_from_coordinates(
    predicted_places: Mapping[str, ArrayLike],
    true_places: Mapping[str, ArrayLike],
    levels: Sequence[str] = ("country", "admin1", "city"),
) -> dict[str, NDArray[np.bool_]]:
    """Hits per level from reverse-geocoded predictions vs ground-truth places (same keys).

    A level counts only if every coarser level listed also matches, so "Springfield" in the
    wrong state is not a city hit.
    """
    out: dict[str, NDArray[np.bool_]] = {}
    running: NDArray[np.bool_] | None = None
    for level in levels:
        h = label_hits(predicted_places[level], true_places[level])
        running = h if running is None else running & h
        out[level] = running.copy()
    return out


def imply_coarser(
    hits: Mapping[str, NDArray[np.bool_]], order: Sequence[str] = PATH_LEVELS
) -> dict[str, NDArray[np.bool_]]:
    """A correct finer level implies every coarser one."""
    present = [lv for lv in order if lv in hits]
    out = {lv: np.asarray(hits[lv], dtype=bool).copy() for lv in present}
    for i, lv in enumerate(present):
        for finer in present[i + 1 :]:
            out[lv] |= out[finer]
    for lv in hits:
        out.setdefault(lv, np.asarray(hits[lv], dtype=bool))
    return out


def text_matches(
    predicted: str | None,
    truth: str | None,
    level: str,
    normalize: Callable[[str], str] | None = None,
    resolve_country: Callable[[str], str | None] | None = None,
    aliases: Callable[[str, str, str], bool] | None = None,
) -> bool:
    """Does a predicted name name the true place? Normalised, alias-aware for countries.

    Cities and regions match on normalised equality, on one name starting with the other as whole
    words ("New York City" / "New York", "Frankfurt am Main" / "Frankfurt"), or via an optional
    ``aliases(pred, true, level)`` callback (e.g. a gazetteer's alternate names across languages).
    A name merely ending in the other is a different place ("West Virginia" / "Virginia",
    "New York" / "York").
    """
    if not predicted or not truth:
        return False
    from geosleuth.core.text import strip_generic

    if normalize is None:
        from geosleuth.core.text import normalize as normalize_
    else:
        normalize_ = normalize
    if predicted == truth and strip_generic(normalize_(predicted)):
        return True  # identical text resolves identically: no country index needed to say so
    if level == "country":
        if resolve_country is None:
            from geosleuth.core.countries import resolve_country as resolve
        else:
            resolve = resolve_country
        a, b = resolve(predicted), resolve(truth)
        if a is not None and b is not None:
            return a == b
    p, t = strip_generic(normalize_(predicted)), strip_generic(normalize_(truth))
    if p and p == t:
        return True
    if p and t and level != "country" and (f"{p} ".startswith(f"{t} ") or f"{t} ".startswith(f"{p} ")):
        return True
    return bool(aliases is not None and aliases(predicted, truth, level))


def level_hits_from_text(
    predicted: Mapping[str, Sequence[str | None]],
    truth: Mapping[str, Sequence[str | None]],
    levels: Sequence[str] = TEXT_LEVELS,
    normalize: Callable[[str], str] | None = None,
    resolve_country: Callable[[str], str | None] | None = None,
    aliases: Callable[[str, str, str], bool] | None = None,
) -> dict[str, NDArray[np.bool_]]:
    """Per-level hits from predicted names; a correct finer level implies the coarser ones.

    Only levels that the ground truth provides are scored.
    """
    hits: dict[str, NDArray[np.bool_]] = {}
    for level in levels:
        if level not in truth:
            continue
        preds = predicted.get(level, [None] * len(truth[level]))
        hits[level] = np.array(
            [
                text_matches(p, t, level, normalize, resolve_country, aliases)
                for p, t in zip(preds, truth[level], strict=True)
            ],
            dtype=bool,
        )
    return imply_coarser(hits, order=levels)


def accuracy(hits: ArrayLike) -> float:
    """Mean of a boolean hit vector; NaN when empty."""
    h = np.asarray(hits, dtype=bool).reshape(-1)
    return float(h.mean()) if h.size else math.nan


# --- WhereBench ---------------------------------------------------------------------------


def path_score(
    level_correct: Mapping[str, bool],
    answer_level: str,
    hint_level: str | None = None,
    copied_hint: bool = False,
    order: Sequence[str] = PATH_LEVELS,
) -> float:
    """Hierarchical path score: longest correct prefix, from one level below the hint.

    The path runs from the level after ``hint_level`` (or the coarsest) down to
    ``answer_level``; the score is the share of that path correct before the first miss.
    Restating the hint scores 0.
    """
    if copied_hint or answer_level not in order:
        return 0.0
    start = order.index(hint_level) + 1 if hint_level in order else 0
    end = order.index(answer_level)
    path = list(order[start : end + 1])
    if not path:
        return 0.0
    prefix = 0
    for level in path:
        if not level_correct.get(level, False):
            break
        prefix += 1
    return prefix / len(path)


def choice_hits(predicted: Sequence[str | None], correct: Sequence[str | None]) -> NDArray[np.bool_]:
    """Per-sample multiple-choice hits on letters (case- and space-insensitive); a missing choice is wrong."""
    if len(predicted) != len(correct):
        raise ValueError(f"{len(predicted)} predictions for {len(correct)} answers")
    return np.array(
        [
            bool(p) and bool(c) and str(p).strip().upper() == str(c).strip().upper()
            for p, c in zip(predicted, correct, strict=True)
        ],
        dtype=bool,
    )


def choice_accuracy(predicted: Sequence[str | None], correct: Sequence[str | None]) -> float:
    """Multiple-choice accuracy on letters (case-insensitive); a missing choice is wrong."""
    return accuracy(choice_hits(predicted, correct))


def thinking_score(used: ArrayLike, weights: ArrayLike | None = None) -> float:
    """Thinking score of one item: the share of key clues used, or Σ wᵢ·sᵢ with per-clue weights.

    With weights this is WhereBench Eq. 5 exactly: no division by Σw, since the released
    Shapley weight vectors need not sum to 1 (53 of 310 do not).
    """
    u = np.asarray(used, dtype=bool).reshape(-1)
    if u.size == 0:
        return math.nan
    if weights is None:
        return float(u.mean())
    w = _f64(weights)
    if w.shape != u.shape:
        raise ValueError(f"{w.size} weights for {u.size} clues")
    return float((w * u).sum())


def shapley_values(value: Callable[[frozenset[int]], float], n_players: int) -> NDArray[np.float64]:
    """Exact Shapley values of ``n_players`` clues from a value function over clue subsets.

    Each subset's value is computed once (2^n calls), so keep n ≲ 20.
    """
    if n_players < 0:
        raise ValueError("n_players must be >= 0")
    if n_players > 20:
        raise ValueError(f"exact Shapley over {n_players} players needs 2^{n_players} evaluations; use ≤ 20")
    cache: dict[frozenset[int], float] = {}

    def v(s: frozenset[int]) -> float:
        if s not in cache:
            cache[s] = float(value(s))
        return cache[s]

    fact = [math.factorial(k) for k in range(n_players + 1)]
    phi = np.zeros(n_players)
    players = range(n_players)
    for size in range(n_players):
        weight = fact[size] * fact[n_players - size - 1] / fact[n_players]
        for subset in itertools.combinations(players, size):
            s = frozenset(subset)
            base = v(s)
            for i in players:
                if i not in s:
                    phi[i] += weight * (v(s | {i}) - base)
    return phi


# --- several predictions per sample -------------------------------------------------------


def pass_at_k(correct: ArrayLike, k: int) -> float:
    """Unbiased pass@K over a (samples × N) hit matrix: 1 − C(N−c, K)/C(N, K), averaged."""
    c = np.asarray(correct, dtype=bool)
    if c.ndim != 2:
        raise ValueError("pass_at_k expects a (samples, N) matrix")
    n_samples, n = c.shape
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be between 1 and N={n}")
    if n_samples == 0:
        return math.nan
    from scipy.special import gammaln

    misses = n - c.sum(axis=1)
    fail = np.zeros(n_samples)
    ok = misses >= k  # with fewer misses than k, every draw of k contains a hit
    m = misses[ok]
    log_comb_n_k = gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
    fail[ok] = np.exp(gammaln(m + 1) - gammaln(k + 1) - gammaln(m - k + 1) - log_comb_n_k)
    return float((1.0 - fail).mean())


def best_of_n(distances_km: ArrayLike) -> NDArray[np.float64]:
    """Oracle Best@N: each sample's closest prediction (NaN only if all N failed)."""
    d = np.asarray(distances_km, dtype=np.float64)
    if d.ndim != 2:
        raise ValueError("best_of_n expects a (samples, N) matrix")
    if d.shape[1] == 0:
        return np.full(d.shape[0], np.nan)
    filled = np.where(np.isfinite(d), d, np.inf)
    best = filled.min(axis=1)
    return np.where(np.isfinite(best), best, np.nan)


def worst_of_n(distances_km: ArrayLike) -> NDArray[np.float64]:
    """Each sample's farthest prediction; a failed prediction is the farthest (NaN: a miss)."""
    d = np.asarray(distances_km, dtype=np.float64)
    if d.ndim != 2:
        raise ValueError("worst_of_n expects a (samples, N) matrix")
    if d.shape[1] == 0:
        return np.full(d.shape[0], np.nan)
    worst = np.where(np.isfinite(d), d, np.inf).max(axis=1)
    return np.where(np.isfinite(worst), worst, np.nan)


def range_at_n(distances_km: ArrayLike, threshold_km: float, strict: bool = True) -> float:
    """Range@N: Best@N minus Worst@N accuracy at one threshold, the spread a selector among the N
    samples works within (Thinking with Map §5.3 watches it shrink as the samples agree)."""
    best = hits_at(best_of_n(distances_km), threshold_km, strict)
    worst = hits_at(worst_of_n(distances_km), threshold_km, strict)
    return accuracy(best) - accuracy(worst)


# --- agreement and correlation ------------------------------------------------------------


def pearson(x: ArrayLike, y: ArrayLike) -> float:
    """Pearson's r over the pairs where both values are finite; NaN with fewer than 3 pairs or a
    constant side (no correlation is defined)."""
    a, b = _f64(x), _f64(y)
    if a.shape != b.shape:
        raise ValueError("pearson needs two sequences of the same length")
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    from scipy.stats import pearsonr

    return float(pearsonr(a, b).statistic)


def cohen_kappa(rater_a: Sequence[object], rater_b: Sequence[object]) -> float:
    """Cohen's κ = (p_o − p_e) / (1 − p_e) of two raters' labels on the same items; NaN without
    items, 1.0 when both always give the same single label (complete agreement)."""
    if len(rater_a) != len(rater_b):
        raise ValueError("cohen_kappa needs the two raters' labels for the same items")
    n = len(rater_a)
    if n == 0:
        return math.nan
    observed = sum(a == b for a, b in zip(rater_a, rater_b, strict=True)) / n
    labels = set(rater_a) | set(rater_b)
    expected = sum((list(rater_a).count(c) / n) * (list(rater_b).count(c) / n) for c in labels)
    if expected == 1.0:
        return 1.0
    return (observed - expected) / (1.0 - expected)


def combination_key(names: Iterable[str]) -> str:
    """One trajectory's set of tools: names sorted and joined by "+", "none" for no tool."""
    return "+".join(sorted(set(names))) or "none"


def combination_shares(counts: Mapping[str, int]) -> dict[str, float]:
    """Counts per tool combination -> shares, largest first (ties by name)."""
    total = sum(counts.values())
    if not total:
        return {}
    return {k: v / total for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))}


def tool_combinations(used: Iterable[Iterable[str]]) -> dict[str, float]:
    """SpotAgent Fig. 6a: the share of trajectories per set of tools they used (`combination_key`),
    largest share first."""
    counts: dict[str, int] = {}
    for names in used:
        key = combination_key(names)
        counts[key] = counts.get(key, 0) + 1
    return combination_shares(counts)


# --- confidence intervals -----------------------------------------------------------------


def percentile_interval(values: NDArray[np.float64], confidence: float) -> tuple[float, float]:
    """The central ``confidence`` interval of ``values``: ``np.quantile``'s default (linear, Hyndman
    and Fan type 7) bit for bit, by one sort. ``np.quantile`` itself imports ``numpy.ma`` (a
    visible share of a 10-row ``score``)."""
    ordered = np.sort(values)
    alpha = (1.0 - confidence) / 2.0
    return (_linear_quantile(ordered, alpha), _linear_quantile(ordered, 1.0 - alpha))


def _linear_quantile(ordered: NDArray[np.float64], q: float) -> float:
    position = (ordered.size - 1) * q
    below = math.floor(position)
    t = position - below
    a, b = float(ordered[below]), float(ordered[min(below + 1, ordered.size - 1)])
    return a + (b - a) * t if t < 0.5 else b - (b - a) * (1 - t)  # NumPy's _lerp, both halves


def bootstrap_ci(
    hits: ArrayLike, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of an accuracy (seeded, reproducible).

    Resampling n Bernoulli outcomes with replacement gives a Binomial(n, p̂) count, so the
    bootstrap distribution is drawn exactly without materialising n × n_boot indices.
    """
    h = np.asarray(hits, dtype=bool).reshape(-1)
    if h.size == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = rng.binomial(h.size, float(h.mean()), size=n_boot) / h.size
    return percentile_interval(means, confidence)


BOOTSTRAP_BLOCK = 1 << 21
"""Resample indices drawn at a time by `bootstrap_ci_mean` (16 MiB of int64, whatever the n)."""


def bootstrap_ci_mean(
    values: ArrayLike,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    block: int = BOOTSTRAP_BLOCK,
) -> tuple[float, float]:
    """Percentile bootstrap CI of a mean of real values (e.g. GeoGuessr points).

    The resample indices are one seeded stream drawn ``block`` at a time: whole resamples
    together while they fit, else each resample in pieces (its mean then sums the pieces). The
    generator yields the same indices however the stream is cut, so the draws do not depend on
    ``block``; only a resample cut in pieces sums in another order (the last bits of its mean).
    """
    x = _f64(values)
    if x.size == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    per_block = block // x.size
    if per_block >= 1:
        for start in range(0, n_boot, per_block):
            stop = min(start + per_block, n_boot)
            idx = rng.integers(0, x.size, size=(stop - start, x.size))
            means[start:stop] = x[idx].mean(axis=1)
        return percentile_interval(means, confidence)
    for b in range(n_boot):
        total = 0.0
        for start in range(0, x.size, block):
            total += float(x[rng.integers(0, x.size, size=min(block, x.size - start))].sum())
        means[b] = total / x.size
    return percentile_interval(means, confidence)


def calibration_bin_index(confidence: ArrayLike, n_bins: int) -> NDArray[np.intp]:
    """Equal-width bin of each confidence in [0, 1] (values outside are clipped; 1.0 is in the last bin)."""
    conf = np.clip(_f64(confidence), 0.0, 1.0)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    return np.clip(np.digitize(conf, edges[1:-1]), 0, n_bins - 1)


def expected_calibration_error(confidence: ArrayLike, hits: ArrayLike, n_bins: int = 10) -> float:
    """ECE: the sample-weighted mean gap between mean confidence and hit rate per confidence bin."""
    conf = np.clip(_f64(confidence), 0.0, 1.0)
    h = np.asarray(hits, dtype=np.float64).reshape(-1)
    if conf.size != h.size:
        raise ValueError(f"{conf.size} confidences but {h.size} hits")
    if conf.size == 0:
        return math.nan
    index = calibration_bin_index(conf, n_bins)
    count = np.bincount(index, minlength=n_bins)
    used = count > 0
    mean_conf = np.bincount(index, weights=conf, minlength=n_bins)[used] / count[used]
    hit_rate = np.bincount(index, weights=h, minlength=n_bins)[used] / count[used]
    return float(np.sum(np.abs(mean_conf - hit_rate) * count[used]) / conf.size)


def macro_recall_f1(truth: Sequence[str], predicted: Sequence[str]) -> tuple[float, float, int]:
    """Macro recall and macro F1 over classes as GeoComp reports them per level (its
    ``calc_index.py``: scikit-learn's ``recall_score`` / ``f1_score`` with ``average='macro'``,
    ``zero_division=0``): the classes are every label in truth or prediction, a class never true
    (or never predicted) scores 0 where its ratio is undefined, F1 = 2TP / (2TP + FP + FN).
    Returns (macro recall, macro F1, number of classes); NaN and 0 when there are no rows."""
    if len(truth) != len(predicted):
        raise ValueError(f"{len(truth)} truths but {len(predicted)} predictions")
    labels = sorted(set(truth) | set(predicted))
    if not labels:
        return math.nan, math.nan, 0
    index = {label: i for i, label in enumerate(labels)}
    t = np.array([index[x] for x in truth], dtype=np.int64)
    p = np.array([index[x] for x in predicted], dtype=np.int64)
    return macro_recall_f1_codes(t, p, len(labels))


def macro_recall_f1_codes(t: ArrayLike, p: ArrayLike, k: int) -> tuple[float, float, int]:
    """`macro_recall_f1` of class codes 0..k-1, each a class that occurs in truth or prediction
    (numbered in sorted label order, as `macro_recall_f1` numbers them): a report codes a
    million labels without a string per row."""
    t, p = np.asarray(t), np.asarray(p)  # bincount reads any integer codes, int32 included
    if not k:
        return math.nan, math.nan, 0
    tp = np.bincount(t[t == p], minlength=k).astype(np.float64)
    true_count = np.bincount(t, minlength=k).astype(np.float64)
    pred_count = np.bincount(p, minlength=k).astype(np.float64)
    recall = np.divide(tp, true_count, out=np.zeros(k), where=true_count > 0)
    denom = true_count + pred_count  # 2TP + FP + FN
    f1 = np.divide(2 * tp, denom, out=np.zeros(k), where=denom > 0)
    return float(recall.mean()), float(f1.mean()), k
