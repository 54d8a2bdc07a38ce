"""``--protocol geoguessr-map``: GeoBench's files read as its tool writes them, scored on one map.

* the map: GeoBench's dataset file ``metadata.json`` (``{"bounds": {"min": {lat, lng}, "max":
  {lat, lng}}, "images": [{image_path, country, lat, lng}, …]}``) or four numbers;
* ``detailed.csv`` as ``GeoGuessrBenchmark.save_results`` writes it (pandas ``to_csv``:
  ``location_id, country_true, lat_true, lng_true, refused, error_message`` and, for answered rows,
  ``country_guess, lat_guess, lng_guess, distance_km, score, country_correct``): distances,
  points and country matches are recomputed from the coordinates and names, and a ``score`` that
  differs from the file's is reported (a different map);
* geosleuth prediction files (a ``response`` read with GeoBench's regex, or coordinates), their
  truth from the rows, ``--truth`` or the map's ``images`` joined by id (the image's file stem,
  GeoBench's ``Location.id``).

A row without an answer (refused, unparsed, failed) is a refusal, as in GeoBench.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from geosleuth.bounds.textrows import csv_records
from geosleuth.scoring.catalog import PROTOCOLS
from geosleuth.scoring.geoguessr_map import MapBounds, haversine_km, map_figures, points, same_country
from geosleuth.scoring.io import (
    ScoreInputError,
    iter_rows,
    prediction_from_row,
    row_id,
    truth_from_row,
)
from geosleuth.scoring.protocols import ScoringProtocol
from geosleuth.scoring.results import FileScore, Score
from geosleuth.scoring.truthindex import truth_index

MAX_METADATA_BYTES = 256 * 1024 * 1024
DETAILED_COLUMNS = ("location_id", "country_true", "lat_true", "lng_true", "refused")
SHOWN_PROBLEMS = 10


@dataclass
class MapRow:
    """One location: the truth, the guess (None: refused) and where the row came from."""

    sample_id: str
    true_country: str | None
    true_lat: float
    true_lng: float
    guess_country: str | None = None
    guess_lat: float | None = None
    guess_lng: float | None = None
    file_score: float | None = None  # detailed.csv's own ``score``

    @property
    def refused(self) -> bool:
        return self.guess_lat is None or self.guess_lng is None


# ----------------------------------------------------------------------------- the map


def _corner(bounds: Any, key: str, path: Path) -> tuple[float, float]:
    corner = bounds.get(key) if isinstance(bounds, dict) else None
    try:
        return float(corner["lat"]), float(corner["lng"])  # type: ignore[index]
    except (TypeError, KeyError, ValueError):
        raise ScoreInputError(f"{path}: bounds.{key} is not an object with lat and lng") from None


def read_metadata(path: Path) -> dict[str, Any]:
    """GeoBench's ``metadata.json`` as an object with ``bounds`` and ``images``."""
    try:
        if path.stat().st_size > MAX_METADATA_BYTES:
            raise ScoreInputError(f"{path}: larger than {MAX_METADATA_BYTES // 2**20} MiB")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ScoreInputError(f"{path}: cannot read GeoBench metadata.json: {exc}") from exc
    if not isinstance(data, dict) or "bounds" not in data or not isinstance(data.get("images"), list):
        raise ScoreInputError(f"{path}: expected GeoBench's metadata.json, an object with bounds and images")
    return data


def map_bounds(path: Path) -> MapBounds:
    """The map of a ``metadata.json`` (``bounds.min`` / ``bounds.max``)."""
    data = read_metadata(path)
    (min_lat, min_lng), (max_lat, max_lng) = (_corner(data["bounds"], k, path) for k in ("min", "max"))
    try:
        return MapBounds(min_lat, min_lng, max_lat, max_lng)
    except ValueError as exc:
        raise ScoreInputError(f"{path}: {exc}") from None


def image_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``images`` entries as rows ``{id, image_path, country, lat, lng}`` (id: the file stem)."""
    rows = []
    for item in data["images"]:
        if isinstance(item, dict):
            image = str(item.get("image_path") or "")
            rows.append({"id": Path(image).stem or None, **item})
        else:
            rows.append({"__error__": f"an images entry is {type(item).__name__}, not an object"})
    return rows


def _map_truth(path: Path) -> dict[str, MapRow]:
    out: dict[str, MapRow] = {}
    for row in image_rows(read_metadata(path)):
        lat, lng = _number(row.get("lat")), _number(row.get("lng"))
        if row.get("id") and lat is not None and lng is not None:
            out[str(row["id"])] = MapRow(str(row["id"]), _text(row.get("country")), lat, lng)
    return out


# ----------------------------------------------------------------------------- rows


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _text(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def is_detailed_csv(path: Path) -> bool:
    """Whether ``path`` is a GeoBench ``detailed.csv`` (its first columns)."""
    if path.suffix.lower() != ".csv":
        return False
    try:
        with path.open(encoding="utf-8-sig") as handle:
            header = handle.readline(4096).strip().split(",")
    except (OSError, UnicodeDecodeError):
        return False
    return set(DETAILED_COLUMNS) <= set(header)


def detailed_rows(path: Path, problems: list[str]) -> list[MapRow]:
    """The rows of a ``detailed.csv``; a row without usable truth is a problem, left out and named."""
    rows = []
    for line, record, why in csv_records(path):
        if record is None:
            problems.append(f"line {line}: {why}")
            continue
        lat, lng = _number(record.get("lat_true")), _number(record.get("lng_true"))
        if lat is None or lng is None:
            problems.append(f"line {line}: no lat_true / lng_true")
            continue
        row = MapRow(str(record.get("location_id") or line), _text(record.get("country_true")), lat, lng)
        if str(record.get("refused", "")).strip().lower() != "true":
            row.guess_lat, row.guess_lng = _number(record.get("lat_guess")), _number(record.get("lng_guess"))
            row.guess_country = _text(record.get("country_guess"))
            row.file_score = _number(record.get("score"))
            if row.refused:
                problems.append(f"line {line}: not refused but without lat_guess / lng_guess: a refusal")
        rows.append(row)
    return rows


def prediction_rows(
    path: Path, protocol: ScoringProtocol, truth_path: Path | None, problems: list[str]
) -> list[MapRow]:
    """geosleuth prediction rows with truth from the row, ``--truth`` or the map's images."""
    truth: dict[str, MapRow] = {}
    if truth_path is not None and truth_path.suffix.lower() == ".json" and _is_metadata(truth_path):
        truth = _map_truth(truth_path)
    elif truth_path is not None:
        index, truth_problems = truth_index(truth_path, keep_fields=False)
        problems.extend(truth_problems)
        with index:
            truth = {
                k: MapRow(k, t.labels.get("country"), t.lat, t.lon)
                for k, t in index.items()
                if t.lat is not None and t.lon is not None
            }
    rows = []
    for raw in iter_rows(path):
        if raw.data is None:
            problems.append(f"line {raw.line}: {raw.error}")
            continue
        sid = row_id(raw.data) or str(raw.line)
        own = truth_from_row(raw.data, plain_coords=False)
        if own is not None and own.has_coords:
            row = MapRow(sid, own.labels.get("country"), float(own.lat), float(own.lon))  # type: ignore[arg-type]
        elif sid in truth:
            known = truth[sid]
            row = MapRow(sid, known.true_country, known.true_lat, known.true_lng)
        else:
            problems.append(
                f"line {raw.line}: no ground truth for {sid!r} (give --truth or --map metadata.json)"
            )
            continue
        prediction, problem, _ = prediction_from_row(raw.data, protocol, None)
        if problem:
            problems.append(f"line {raw.line}: {problem}")
        if prediction.has_coords:
            row.guess_lat, row.guess_lng, row.guess_country = (
                prediction.lat,
                prediction.lon,
                prediction.country,
            )
        rows.append(row)
    return rows


def _is_metadata(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as handle:
            head = handle.read(4096)
    except (OSError, UnicodeDecodeError):
        return False
    return '"bounds"' in head or '"images"' in head


# ----------------------------------------------------------------------------- scoring


def score_geoguessr_map_file(
    path: Path, protocol: ScoringProtocol, truth_path: Path | None, judge: object = None
) -> FileScore:
    """Score a ``detailed.csv`` or a prediction file on the protocol's map (``map_bounds``), else on
    the map of a ``metadata.json`` (or the map folder holding it) given as the truth."""
    if judge is not None:
        raise ScoreInputError(f"--judge does not apply to --protocol {protocol.name}: GeoBench has no judge")
    if truth_path is not None and truth_path.is_dir() and _is_metadata(truth_path / "metadata.json"):
        truth_path = truth_path / "metadata.json"  # a map folder (the harnesses pass the dataset's)
    if protocol.map_bounds is not None:
        bounds = MapBounds(*protocol.map_bounds)
    elif truth_path is not None and truth_path.suffix.lower() == ".json" and _is_metadata(truth_path):
        bounds = map_bounds(truth_path)  # the truth is the map's own metadata.json
    else:
        raise ScoreInputError(
            f"--protocol {protocol.name} scores on a map: give --map metadata.json (GeoBench's dataset file) "
            "or --map-bounds MIN_LAT,MIN_LNG,MAX_LAT,MAX_LNG"
        )
    problems: list[str] = []
    if is_detailed_csv(path):
        rows = detailed_rows(path, problems)
    else:
        rows = prediction_rows(path, protocol, truth_path, problems)
    if not rows:
        shown = "; ".join(problems[:3]) or "the file has no rows"
        raise ScoreInputError(f"{path}: no row to score ({shown})")
    refused = np.array([r.refused for r in rows])
    distance = haversine_km(
        [r.true_lat for r in rows],
        [r.true_lng for r in rows],
        [math.nan if r.refused else r.guess_lat for r in rows],
        [math.nan if r.refused else r.guess_lng for r in rows],
    )
    correct = np.array([not r.refused and same_country(r.true_country, r.guess_country) for r in rows])
    figures = map_figures(refused, distance, correct, bounds)
    score_of = points(distance, bounds.scale)
    warnings = [*problems[:SHOWN_PROBLEMS], *figures.notes]
    if len(problems) > SHOWN_PROBLEMS:
        warnings.append(f"… and {len(problems) - SHOWN_PROBLEMS} more")
    differ = [r.sample_id for r, s in zip(rows, score_of, strict=True) if r.file_score not in (None, s)]
    if differ:
        warnings.append(
            f"{len(differ)} row(s) score differently from the file's score column on this map "
            f"(e.g. {differ[0]}): was the run made on another map?"
        )
    records = [
        {
            "id": r.sample_id,
            "refused": r.refused,
            "country_true": r.true_country,
            "country_guess": r.guess_country,
            "lat_guess": r.guess_lat,
            "lng_guess": r.guess_lng,
            "distance_km": None if r.refused else float(d),
            "score": None if r.refused else int(s),
            "country_correct": bool(c),
        }
        for r, d, s, c in zip(rows, distance, score_of, correct, strict=True)
    ]
    score = Score(
        n=figures.n, parsed=figures.answered, metrics=figures.values, ci95=figures.ci95, warnings=warnings
    )
    return FileScore(str(path), protocol.name, score, records=records)


PROTOCOL = ScoringProtocol(
    name="geoguessr-map",
    description="ccmdi's GeoBench (geobench.py) on one GeoGuessr map: 5000 points within 25 m, "
    "else round(5000 · 0.99866017^(metres / (D / 7.458421))), D the haversine diagonal of the "
    "map's bounds; refusal_rate and acc_country (GeoBench's country alias groups) over all rows, "
    "in percent; geoguessr_mean, geoguessr_median, mean_km, median_km over answered rows (median "
    "sorted(x)[n // 2]); answers read with GeoBench's parse_response; reads its detailed.csv; "
    "needs --map metadata.json or --map-bounds",
    parse_mode="strict",
    parse_protocol="geoguessr-map",
    file_scorer=score_geoguessr_map_file,
)
"""GeoBench's GeoGuessr-map protocol; the map's bounds come with ``--map`` / ``--map-bounds``."""

PROTOCOLS.register(PROTOCOL.name, PROTOCOL)
