"""Rewards by name and parameters over whole batches: the one place the adapters share.

Wraps the pure math of `geosleuth.core.rewards`: a rollout's text is parsed with the robust
parser (last answer wins; answers inside tool responses are ignored), distances are computed
in one vectorised call, and the chosen reward is applied to the whole batch. Each item also
gets hit flags at the published Acc@k thresholds and its distance, which the engines log as
metrics. Clean answers (one JSON object, or ``Latitude:`` / ``Longitude:`` lines) skip the full
parser, and `score_distance_one` scores a single rollout without arrays (verl's per-rollout
reward manager); both are tested against the full path.

Names: ``step`` (Thinking-with-Map 0.5–750 km), ``piecewise`` / ``linear`` (SpotAgent),
``spatial`` (GeoAgent R_spa = exp(−d/τ); a text answer without coordinates is geocoded
through the tool layer), ``hierarchical`` (GeoVista 1/β/β², each level judged on its own, or
by a verifier), ``semantic`` (GeoAgent R_sem, gated multilingual name similarity),
``geo_similarity`` / ``combined`` (GeoAgent 1.5·R_spa + 1.0·R_sem + 0.5·R_con, R_con from a
consistency judge when one is given). ``released=true`` selects the authors' released
behaviour where it differs from the paper (see docs/training.md).

Nothing inside tool blocks (``<tool_call>``, ``<tool_response>``, ``<tool_result>``,
``<observation>``, the ``<<<TOOL OUTPUT …>>>`` fence) is ever read as the answer: the core
parser's `without_tool_output` removes them in one linear pass before any reader sees the text.
"""

from __future__ import annotations

import bisect
import json
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from geosleuth.core import rewards as core
from geosleuth.core.geo import EARTH_RADIUS_KM, haversine_km
from geosleuth.core.parsing import parse_answer, without_tool_output
from geosleuth.core.records import Prediction
from geosleuth.training.truth import GroundTruth, parse_ground_truth

log = logging.getLogger(__name__)

ACC_THRESHOLDS_KM: tuple[float, ...] = (0.5, 1.0, 2.0, 10.0, 25.0, 200.0, 750.0, 2500.0)
MISS_DISTANCE_KM = 20015.1
"""Half the Earth's circumference: the distance logged for an answer without coordinates."""

DISTANCE_REWARDS = ("step", "piecewise", "linear", "spatial")
LEVEL_REWARDS = ("hierarchical", "semantic", "geo_similarity", "combined")
REWARD_NAMES: tuple[str, ...] = DISTANCE_REWARDS + LEVEL_REWARDS

ConsistencyFn = Callable[[Sequence[str], Sequence[GroundTruth]], Sequence[float]]
"""(rollout texts, their ground truths) -> consistency scores (see `training.consistency`)."""
Verifier = Callable[[str, Mapping[str, str]], Any]
"""GeoVista's model verifier: (answer text, truth levels) -> {"country", "state", "city"} verdicts."""


def acc_key(threshold_km: float) -> str:
    """Metric name for one threshold: ``acc@1km``, ``acc@0.5km``."""
    return f"acc@{threshold_km:g}km"


_ACC_KEYS: tuple[str, ...] = tuple(acc_key(t) for t in ACC_THRESHOLDS_KM)


@dataclass(frozen=True)
class RewardSpec:
    """A reward chosen by name, with its parameters (``tau_km``, ``beta``, ``match_threshold``…)."""

    name: str = "step"
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in REWARD_NAMES:
            raise ValueError(f"unknown reward {self.name!r}; use one of {', '.join(REWARD_NAMES)}")

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
        params: dict[str, Any] = {}
        for part in filter(None, rest.split(",")):
            key, sep, raw = part.partition("=")
            if not sep:
                raise ValueError(f"reward parameter {part!r} must look like key=value")
            params[key.strip()] = _number(raw.strip())
        return cls(name.strip(), params)


def _number(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


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


_ANSWER_OPEN = re.compile(r"<answer>", re.I)
_ANSWER_CLOSE = re.compile(r"</answer>", re.I)
_GEOAGENT_SPLIT = re.compile(r"[;；]")


strip_tool_blocks = without_tool_output
"""The parser's own stripper under the name the training code imports (one implementation)."""


def answer_content(text: str | None) -> str | None:
    """Content of the last ``<answer>`` block outside tool blocks (unclosed: to the end)."""
    if not text:
        return None
    own = without_tool_output(text)
    last = None
    for match in _ANSWER_OPEN.finditer(own):
        last = match
    if last is None:
        return None
    close = _ANSWER_CLOSE.search(own, last.end())
    content = own[last.end() : close.start() if close else len(own)].strip()
    return content or None


def geoagent_levels(text: str | None) -> dict[str, str | None] | None:
    """GeoAgent's ``Country; Region; Place`` answer (``;`` or ``；``) as semantic levels, else None.

    Positions are kept: an empty part is a missing level; a fourth part and beyond belong to
    the place (the released code joins them the same way).
    """
    content = answer_content(text)
    if not content or "{" in content or not _GEOAGENT_SPLIT.search(content):
        return None
    parts = [p.strip() for p in _GEOAGENT_SPLIT.split(content)]
    if any(":" in p for p in parts[:2]):
        return None  # key: value answers that happen to contain a semicolon
    while len(parts) < 3:
        parts.append("")
    place = "; ".join(p for p in parts[2:] if p)
    return {"country": parts[0] or None, "region": parts[1] or None, "precise": place or None}


MAX_PARSE_CHARS = 65_536
"""The full parser reads at most the last 64 KiB of the model's own text (the answer is at the end)."""


def own_text(text: str | None) -> str:
    """The model's own text, tool blocks removed, capped to its last `MAX_PARSE_CHARS` characters."""
    own = without_tool_output(text or "")
    if len(own) > MAX_PARSE_CHARS:
        log.debug("reward: rollout of %d characters read from its last %d", len(own), MAX_PARSE_CHARS)
        own = own[-MAX_PARSE_CHARS:]
    return own


def parse_rollout(text: str | None) -> Prediction:
    """The model's final answer in a decoded rollout (robust mode; tool blocks removed, length capped)."""
    return parse_answer(own_text(text), mode="robust")


def rollout_levels(text: str | None, pred: Prediction | None) -> dict[str, str | None]:
    """Country / region / precise place of a rollout: GeoAgent's answer form, else the parsed fields."""
    return geoagent_levels(text) or core.semantic_levels(pred)


def _distances(preds: Sequence[Prediction], truths: Sequence[GroundTruth]) -> NDArray[np.float64]:
    lat = np.array([p.lat if p.has_coords else np.nan for p in preds], dtype=np.float64)
    lon = np.array([p.lon if p.has_coords else np.nan for p in preds], dtype=np.float64)
    tlat = np.array([t.lat for t in truths], dtype=np.float64)
    tlon = np.array([t.lon for t in truths], dtype=np.float64)
    return np.asarray(haversine_km(lat, lon, tlat, tlon), dtype=np.float64)


def _released(spec: RewardSpec) -> bool:
    return bool(spec.params.get("released", False))


def _similarity(spec: RewardSpec) -> core.Similarity:
    from geosleuth.training.similarity import resolve_similarity

    return resolve_similarity(spec.params.get("similarity"), spec.params.get("similarity_model"))


def _truth_semantic(truth: GroundTruth) -> dict[str, str | None]:
    lv = truth.levels
    precise = lv.get("poi") or lv.get("street") or lv.get("town") or lv.get("city") or lv.get("admin2")
    return {"country": lv.get("country"), "region": lv.get("admin1"), "precise": precise}


_STATE_KEYS = frozenset({"province/state", "province / state", "province", "state", "region", "admin1"})


def _state_line(text: str | None) -> str | None:
    """A ``Province/State:`` line of the answer block (GeoVista's form), read line by line."""
    content = answer_content(text)
    if not content:
        return None
    for line in content.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().strip("*-").strip().lower() in _STATE_KEYS and value.strip():
            return value.strip().strip("*").strip()
    return None


def _hierarchy_levels(text: str | None, pred: Prediction) -> tuple[str | None, str | None, str | None]:
    """(country, state, city) of an answer; a GeoAgent answer gives (country, region, place).

    A lone place of open level ("Paris" in "Paris, France", `Prediction.place`) is offered at
    both the state and the city level through `Prediction.level`: the released reward judges
    each level on its own and pays for the finest one that is right, so the place earns β² when
    it names the true city and β when it names the true state, as the same name on a ``City:``
    or ``Province/State:`` line would. It can never earn more than a full answer.
    """
    ga = geoagent_levels(text)
    if ga is not None:
        return ga["country"], ga["region"], ga["precise"]
    return pred.country, pred.admin1 or _state_line(text) or pred.level("admin1"), pred.level("city")


def _verdicts(verdict: Any) -> tuple[bool, bool, bool]:
    if isinstance(verdict, Mapping):
        state = verdict.get("state", verdict.get("admin1", verdict.get("province", False)))
        return bool(verdict.get("country", False)), bool(state), bool(verdict.get("city", False))
    c, s, y = verdict
    return bool(c), bool(s), bool(y)


def _hierarchical(
    spec: RewardSpec, preds: Sequence[Prediction], truths: Sequence[GroundTruth], texts: Sequence[str | None]
) -> NDArray:
    """GeoVista as released: β² if the city is right, else β if the state is, else 1 if the country is.

    Each level is judged on its own, by name similarity (multilingual, ``match_threshold``)
    or, when ``verifier`` names a callable, by that model verifier's verdict.
    """
    thr = float(spec.params.get("match_threshold", 0.85))
    verifier_path = spec.params.get("verifier")
    verifier: Verifier | None = None
    if verifier_path:
        from geosleuth.plugins import load_callable

        verifier = verifier_path if callable(verifier_path) else load_callable(str(verifier_path), "verifier")
    sim = _similarity(spec)
    n = len(preds)
    ok = np.zeros((n, 3), dtype=bool)
    for i, (p, t, text) in enumerate(zip(preds, truths, texts, strict=True)):
        if verifier is not None:
            try:
                ok[i] = _verdicts(verifier(answer_content(text) or "", dict(t.levels)))
            except Exception as exc:  # noqa: BLE001 - a failed verdict is a wrong answer, logged
                log.warning("hierarchical reward: verifier failed on item %d: %s; scored 0", i, exc)
            continue
        levels = _hierarchy_levels(text, p)
        refs = (t.levels.get("country"), t.levels.get("admin1"), t.levels.get("city"))
        for j, (name, pv, rv) in enumerate(zip(("country", "admin1", "city"), levels, refs, strict=True)):
            ok[i, j] = bool(pv and rv) and core._clamped(sim, pv, rv, name) >= thr
    return np.asarray(
        core.hierarchical_reward(
            ok[:, 0],
            ok[:, 1],
            ok[:, 2],
            beta=float(spec.params.get("beta", 2.0)),
            normalize=bool(spec.params.get("normalize", False)),
        ),
        dtype=np.float64,
    )


def _semantic(
    spec: RewardSpec, preds: Sequence[Prediction], truths: Sequence[GroundTruth], texts: Sequence[str | None]
) -> NDArray[np.float64]:
    """GeoAgent R_sem of each rollout.

    A GeoAgent ``Country; Region; Place`` answer is read by position. Otherwise the parsed
    fields are read, and a lone place of open level ("Paris, France") is scored at the level
    where it scores best, region or precise place (`core.semantic_readings`): with the paper's
    gate a precise place counts only after a region passed, so "Paris, France" earns the
    country term (0.1) as any answer without a region does, and "Hesse, Germany" earns
    0.1 + 0.6 when Hesse is the true region.
    """
    gating = spec.params.get("gating", "released" if _released(spec) else "paper")
    sim = _similarity(spec)
    out = np.zeros(len(preds), dtype=np.float64)
    for i, (p, t, x) in enumerate(zip(preds, truths, texts, strict=True)):
        ga = geoagent_levels(x)
        readings = [ga] if ga is not None else core.semantic_readings(p)
        out[i] = core.best_semantic_reward(readings, _truth_semantic(t), sim, gating=gating)
    return out


def _spatial_params(spec: RewardSpec) -> tuple[float, float | None]:
    max_km = spec.params.get("max_km", core.GEOAGENT_SPATIAL_MAX_KM if _released(spec) else None)
    return _tau_km(spec), None if max_km is None else float(max_km)


def _geocode_missing(
    spec: RewardSpec,
    d: NDArray[np.float64],
    levels: Sequence[Mapping[str, str | None]],
    truths: Sequence[Any],
) -> NDArray[np.float64]:
    """Distances for answers without coordinates, from their geocoded text (GeoAgent R_spa)."""
    if not spec.params.get("geocode", True):
        return d
    todo = [i for i in range(len(d)) if np.isnan(d[i]) and any(levels[i].values())]
    if not todo:
        return d
    from geosleuth.training.geocoding import shared_geocoder

    geocoder = shared_geocoder(spec.params.get("tool_settings"))
    hits = geocoder.geocode_many([[levels[i].get(k) for k in core.SEMANTIC_LEVELS] for i in todo])
    out = d.copy()
    for i, hit in zip(todo, hits, strict=True):
        if hit is not None:
            tlat, tlon = _truth_latlon(truths[i])
            out[i] = float(haversine_km(hit[0], hit[1], tlat, tlon))
    return out


def _answered(pred: Prediction) -> bool:
    """Coordinates or a named place; free text the parser kept only as an "address" does not count."""
    return pred.has_coords or any(
        (pred.country, pred.admin1, pred.city, pred.town, pred.street, pred.poi, pred.place)
    )


def score_predictions(
    spec: RewardSpec,
    preds: Sequence[Prediction],
    truths: Sequence[GroundTruth],
    consistency: Sequence[float] | None = None,
    texts: Sequence[str | None] | None = None,
) -> RewardBatch:
    """Apply one reward to parsed predictions (``texts``: the rollouts, for GeoAgent answers).

    Anything unparseable scores 0.
    """
    texts = list(texts) if texts is not None else [None] * len(preds)
    d = _distances(preds, truths)
    name, p = spec.name, dict(spec.params)
    if name in ("spatial", "geo_similarity", "combined"):
        d = _geocode_missing(
            spec, d, [rollout_levels(x, pr) for x, pr in zip(texts, preds, strict=True)], truths
        )
    if name == "step":
        scores = core.step_reward(d)
    elif name in ("piecewise", "linear"):
        scores = core.piecewise_linear_reward(d)
    elif name == "spatial":
        tau, max_km = _spatial_params(spec)
        scores = core.spatial_reward(d, tau_km=tau, max_km=max_km)
    elif name == "hierarchical":
        scores = _hierarchical(spec, preds, truths, texts)
    elif name == "semantic":
        scores = _semantic(spec, preds, truths, texts)
    else:
        con = np.zeros(len(preds)) if consistency is None else np.asarray(consistency, dtype=np.float64)
        weights = tuple(p.get("weights", core.COMBINED_WEIGHTS))
        tau, max_km = _spatial_params(spec)
        scores = core.combined_reward(
            core.spatial_reward(d, tau_km=tau, max_km=max_km),
            _semantic(spec, preds, truths, texts),
            con,
            weights,
        )
    parsed = np.array(
        [_answered(pr) or geoagent_levels(x) is not None for pr, x in zip(preds, texts, strict=True)],
        dtype=bool,
    )
    return RewardBatch(np.atleast_1d(np.asarray(scores, dtype=np.float64)), d, parsed, list(preds))


_ANSWER_TAG = re.compile(r"<(/?)answer>", re.I)
_RENAMED_KEYS = frozenset({"latitude", "longitude", "lng", "long"})
_PLAIN_KEYS = frozenset(
    {"lat", "lon", "city", "country", "region", "state", "province", "admin1", "address", "confidence"}
)
"""Keys the parser reads as they are (lower-case identifiers); others are checked one by one."""
_DECIMAL = re.compile(r"[-+]?[0-9]+(?:\.[0-9]+)?")


def _last_answer(text: str) -> str | None:
    """Content of the last non-empty ``<answer>`` block, found as the robust parser finds it.

    ``text`` is already free of tool blocks (`own_text`); each ``<answer>`` runs to the next
    ``</answer>``. Any case the replay does not cover exactly returns None: an unclosed
    answer, or a last answer holding markup.
    """
    parts = _ANSWER_TAG.split(text)  # text, "/" or "", text, …
    blocks: list[tuple[int, int]] = []  # (opening tag, closing tag) indices
    open_at = -1
    for i, slash in enumerate(parts[1::2]):
        if not slash:
            if open_at < 0:
                open_at = i
        elif open_at >= 0:
            blocks.append((open_at, i))
            open_at = -1
    if open_at >= 0:
        return None
    for a, b in reversed(blocks):
        if b != a + 1:
            return None  # a nested <answer> inside the block
        content = parts[2 * a + 2]
        if content.strip():
            return None if "<" in content else content
    return None


def _json_coordinates(content: str) -> tuple[float, float] | None:
    """A flat JSON object with numeric ``lat`` / ``lon`` and plain lower-case keys."""
    try:
        obj = json.loads(content)
    except ValueError:
        return None
    if type(obj) is not dict:
        return None
    keys = obj.keys()
    if not keys.isdisjoint(_RENAMED_KEYS) or not all(
        k.isidentifier() and k.islower() for k in keys - _PLAIN_KEYS
    ):
        return None  # other spellings of lat / lon, or keys the parser renames: it decides
    for v in obj.values():
        if type(v) is dict or type(v) is list:
            return None  # nested objects are flattened by the parser
    lat, lon = obj.get("lat"), obj.get("lon")
    if type(lat) not in (int, float) or type(lon) not in (int, float):
        return None
    return float(lat), float(lon)


_LAT_KEYS = ("lat", "latitude", "纬度")
_LON_KEYS = ("lon", "lng", "long", "longitude", "经度")
_SEPARATOR = re.compile(r"[;,|]")
_KEY_AFTER_SEPARATOR = re.compile(
    r"[ \t\r\n\f\v]*(?:country|city|region|state|province|admin1|address|place|location"
    r"|latitude|longitude|lat|lon|lng|confidence)[ \t\r\n\f\v]*[:：]",
    re.I,
)
"""Anchored at one position after a separator: the whitespace runs it crosses never overlap (linear)."""
_SPACE_DASH = re.compile(r"[\s\-]+")


def _inline_keys(content: str) -> bool:
    """Whether a ``;`` / ``,`` / ``|`` is followed by another answer key on the same text (inline answers)."""
    return any(_KEY_AFTER_SEPARATOR.match(content, m.end()) for m in _SEPARATOR.finditer(content))


def _answer_line(line: str) -> tuple[str, str] | None:
    """One ``Key: value`` line, read as the parser's answer-line rule reads it, in linear time."""
    rest = line.lstrip()
    if rest[:1] in ("-", "*", "•"):
        rest = rest[1:]
    rest = rest.lstrip().lstrip("*").lstrip()
    cut = min((i for i in (rest.find(":"), rest.find("：")) if i >= 0), default=-1)
    if cut <= 0:
        return None
    key = rest[:cut].rstrip().rstrip("*").rstrip()
    value = rest[cut + 1 :].strip().strip("*").strip()
    if not key or len(key) > 40 or not value:
        return None
    return key, value


def _line_coordinates(content: str) -> tuple[float, float] | None:
    """``Latitude: …`` / ``Longitude: …`` lines with plain decimals (one linear pass over the lines)."""
    if ("," in content or ";" in content or "|" in content) and _inline_keys(content):
        return None
    pairs: dict[str, str] = {}
    for line in content.split("\n"):
        found = _answer_line(line)
        if found is None:
            continue
        raw, value = found
        key = raw.strip().strip("*").lower()
        if not key.replace("_", "").isalnum():  # spaces or dashes: the parser's full key rule
            key = _SPACE_DASH.sub("_", key.strip())
        pairs.setdefault(key, value)
    lat = next((pairs[k] for k in _LAT_KEYS if k in pairs), None)
    lon = next((pairs[k] for k in _LON_KEYS if k in pairs), None)
    if lat is None or lon is None or not (_DECIMAL.fullmatch(lat) and _DECIMAL.fullmatch(lon)):
        return None
    return float(lat), float(lon)


def fast_coordinates(text: str | None) -> tuple[float, float] | None:
    """The common cases without the full parser: the last answer is clean JSON or answer lines.

    Returns coordinates only when the robust parser would certainly return the same ones: the
    last ``<answer>`` block lies outside any tool block and holds either one flat JSON object
    with numeric ``lat`` / ``lon``, or ``Latitude:`` / ``Longitude:`` lines with plain
    decimals, in range. Anything else returns None (full parse).
    """
    if not text or "<" not in text:
        return None
    content = _last_answer(own_text(text))
    if content is None:
        return None
    hit = _json_coordinates(content) if "{" in content else _line_coordinates(content)
    if hit is None or not (-90.0 <= hit[0] <= 90.0 and -180.0 <= hit[1] <= 180.0):
        return None
    return hit


def _truth_latlon(value: Any) -> tuple[float, float]:
    if type(value) is dict:
        lat, lon = value.get("lat"), value.get("lon")
        if (
            isinstance(lat, float)
            and isinstance(lon, float)
            and -90.0 <= lat <= 90.0
            and -180.0 <= lon <= 180.0
        ):
            return lat, lon
    gt = parse_ground_truth(value)
    return gt.lat, gt.lon


def score_distances_fast(spec: RewardSpec, texts: Sequence[str | None], truths: Sequence[Any]) -> RewardBatch:
    """Distance rewards for a batch: clean answers skip the full parser, the rest go through it."""
    n = len(texts)
    lat = np.full(n, np.nan)
    lon = np.full(n, np.nan)
    parsed = np.zeros(n, dtype=bool)
    preds: list[Prediction | None] = []
    for i, text in enumerate(texts):
        hit = fast_coordinates(text)
        if hit is None:
            pred = parse_rollout(text)
            parsed[i] = _answered(pred)
            if pred.has_coords:
                lat[i], lon[i] = pred.lat, pred.lon
            preds.append(pred)
        else:
            lat[i], lon[i] = hit
            parsed[i] = True
            preds.append(None)
    tl = np.array([_truth_latlon(t) for t in truths], dtype=np.float64).reshape(n, 2)
    d = np.asarray(haversine_km(lat, lon, tl[:, 0], tl[:, 1]), dtype=np.float64)
    if spec.name == "step":
        scores = core.step_reward(d)
    elif spec.name == "spatial":
        if np.isnan(d).any():
            levels = [
                rollout_levels(x, pr) if pr is not None else {} for x, pr in zip(texts, preds, strict=True)
            ]
            d = _geocode_missing(spec, d, levels, truths)
            parsed |= np.array([bool(lv and any(lv.values())) for lv in levels], dtype=bool)
        tau, max_km = _spatial_params(spec)
        scores = core.spatial_reward(d, tau_km=tau, max_km=max_km)
    else:
        scores = core.piecewise_linear_reward(d)
    return RewardBatch(np.atleast_1d(np.asarray(scores, dtype=np.float64)), d, parsed, preds)


_BOUNDARIES_KM: tuple[float, ...] = tuple(
    sorted({*ACC_THRESHOLDS_KM, *core.STEP_THRESHOLDS_KM, *core.PIECEWISE_KNOTS_KM})
)


def _distance_one(lat: float, lon: float, tlat: float, tlon: float) -> float:
    """Haversine with `math` (NumPy per call costs ~15 µs); NumPy decides near a threshold.

    `math` and NumPy's SIMD functions can differ in the last bit; close to a reward or Acc@k
    threshold the distance is recomputed exactly as the batch path does, so that flags and
    step rewards never depend on which path ran.
    """
    la1, la2 = math.radians(lat), math.radians(tlat)
    h = (
        math.sin((la2 - la1) / 2) ** 2
        + math.cos(la1) * math.cos(la2) * math.sin((math.radians(tlon) - math.radians(lon)) / 2) ** 2
    )
    d = 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(min(max(h, 0.0), 1.0)))
    for t in _BOUNDARIES_KM:
        if abs(d - t) <= 1e-9 * t:
            return float(haversine_km(lat, lon, tlat, tlon))
    return d


def _step_one(d: float) -> float:
    """`core.step_reward` for one finite distance (same thresholds, same strict ``<``)."""
    i = bisect.bisect_right(core.STEP_THRESHOLDS_KM, d)
    return core.STEP_VALUES[i] if i < len(core.STEP_VALUES) else 0.0


def _piecewise_one(d: float) -> float:
    """`core.piecewise_linear_reward` for one finite distance, with `np.interp`'s arithmetic."""
    xs, ys = core.PIECEWISE_KNOTS_KM, core.PIECEWISE_VALUES
    if d >= xs[-1]:
        return 0.0
    if d < xs[0]:
        return 1.0
    j = bisect.bisect_right(xs, d) - 1
    if j == len(xs) - 1 or d == xs[j]:
        return ys[j]
    slope = (ys[j + 1] - ys[j]) / (xs[j + 1] - xs[j])
    return slope * (d - xs[j]) + ys[j]


def _tau_km(spec: RewardSpec) -> float:
    tau = float(spec.params.get("tau_km", 200.0))
    if tau <= 0:
        raise ValueError("tau_km must be positive")
    return tau


def _distance_score_one(spec: RewardSpec, d: float) -> float:
    if spec.name == "step":
        return _step_one(d)
    if spec.name == "spatial":
        tau, max_km = _spatial_params(spec)
        return 0.0 if max_km is not None and d >= max_km else math.exp(-d / tau)
    return _piecewise_one(d)


def score_distance_one(spec: RewardSpec, text: str | None, truth: Any) -> dict[str, float]:
    """One rollout, one distance reward: the dict `RewardBatch.item_info` gives, without arrays.

    The single-call path of verl's naive reward manager. Same parse (fast path, then the
    robust parser), same thresholds; distances and continuous scores agree with the batch
    path to the last bit or two (see `_distance_one`).
    """
    if spec.name == "spatial":
        _tau_km(spec)  # a bad τ is a config error even when this rollout has no answer
    hit = fast_coordinates(text)
    parsed = hit is not None
    if hit is None:
        pred = parse_rollout(text)
        parsed = _answered(pred)
        if pred.has_coords:
            hit = (float(pred.lat), float(pred.lon))  # type: ignore[arg-type]
    if hit is None and spec.name == "spatial" and spec.params.get("geocode", True):
        return score_distances_fast(spec, [text], [truth]).item_info(0)  # a text answer: geocode it
    tlat, tlon = _truth_latlon(truth)
    if hit is None:
        info = {"score": 0.0, "distance_km": MISS_DISTANCE_KM, "parsed": 1.0 if parsed else 0.0}
        info.update(dict.fromkeys(_ACC_KEYS, 0.0))
        return info
    d = _distance_one(hit[0], hit[1], tlat, tlon)
    info = {"score": _distance_score_one(spec, d), "distance_km": d, "parsed": 1.0}
    for key, t in zip(_ACC_KEYS, ACC_THRESHOLDS_KM, strict=True):
        info[key] = 1.0 if d < t else 0.0
    return info


def score_texts(
    spec: RewardSpec | str,
    texts: Sequence[str | None],
    truths: Sequence[Any],
    consistency_fn: ConsistencyFn | None = None,
) -> RewardBatch:
    """Parse each rollout and score the batch; a bad ground truth raises (it is a dataset bug)."""
    spec = RewardSpec.parse(spec)
    if len(texts) != len(truths):
        raise ValueError(f"{len(texts)} completions but {len(truths)} ground truths")
    if spec.name in DISTANCE_REWARDS:
        return score_distances_fast(spec, texts, truths)
    gts = [parse_ground_truth(t) for t in truths]
    preds = [parse_rollout(t) for t in texts]
    consistency = None
    if spec.name in ("geo_similarity", "combined") and consistency_fn is not None:
        consistency = list(consistency_fn([t or "" for t in texts], gts))
    return score_predictions(spec, preds, gts, consistency, texts)
