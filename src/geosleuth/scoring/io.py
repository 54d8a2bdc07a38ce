"""Reading prediction and ground-truth files (JSONL, JSON, CSV) into uniform rows.

A fatal problem (missing file, nothing readable) raises :class:`ScoreInputError` with the file
name; a bad row is kept, marked with a problem naming its line, and later counted as wrong.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

import orjson

import geosleuth.scoring.jsonstream as jsonstream
from geosleuth.core.geo import valid_coordinates
from geosleuth.core.ids import image_sample_id, written_id
from geosleuth.core.parsing import Geocoder, parse_answer
from geosleuth.core.records import LEVELS, ParseStatus, Prediction, Sample
from geosleuth.core.surrogates import clean_json
from geosleuth.plugins import load_callable
from geosleuth.scoring.columns import (
    PRED_PREFIXES,
    TRUTH_PREFIXES,
    merged_pairs,
    prefixed_pairs,
)
from geosleuth.scoring.jsonstream import Item, array_items, wrapped_items, wrapped_list
from geosleuth.scoring.peers import at_released_point, zero_out_of_range
from geosleuth.scoring.protocols import ScoringProtocol
from geosleuth.scoring.rows import InputRow, ScoreInputError
from geosleuth.scoring.tables import read_table

TEXT_KEYS = (
    "solution_str",
    "response",
    "output",
    "model_output",
    "completion",
    "generation",
    "prediction",
    "pred",
    "final_answer",
    "text",
)
PRED_COORD_KEYS = merged_pairs(
    (
        ("pred_lat", "pred_lon"),
        ("predicted_lat", "predicted_lon"),
        ("lat_pred", "lon_pred"),
        ("pred_latitude", "pred_longitude"),
        ("LAT_pred", "LON_pred"),  # G3's and GeoRanker's result tables
    ),
    prefixed_pairs(PRED_PREFIXES),  # GeoEstimation's predicted_lat / predicted_long, …
)
"""Predicted coordinate columns, lower case: a row's keys match them case-insensitively."""
TRUTH_COORD_KEYS = merged_pairs(
    (
        ("true_lat", "true_lon"),
        ("gt_lat", "gt_lon"),
        ("lat_true", "lon_true"),
        ("truth_lat", "truth_lon"),
        ("target_lat", "target_lon"),
        ("lat_gt", "lon_gt"),
    ),
    prefixed_pairs(TRUTH_PREFIXES),  # GeoEstimation's gt_lat / gt_long, …
)
PLAIN_COORD_KEYS = merged_pairs(
    (("lat", "lon"), ("latitude", "longitude"), ("lat", "lng")), prefixed_pairs(("",))
)
TRUTH_DICT_KEYS = ("ground_truth", "gt", "truth", "target", "reference", "label", "sample")
LABEL_KEYS: dict[str, tuple[str, ...]] = {
    "country": ("country", "country_code", "true_country", "gt_country"),
    "admin1": ("admin1", "province_or_state", "state", "province", "region", "true_region", "gt_state"),
    "admin2": ("admin2", "county", "area", "district", "true_area"),
    "city": ("city", "true_city", "gt_city"),
}


@dataclass(slots=True)
class Truth:
    """Ground truth of one sample; ``problem`` says why it is unusable."""

    lat: float | None = None
    lon: float | None = None
    labels: dict[str, str] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None
    answer: str | None = None  # correct choice letter of a multiple-choice item
    id: str | None = None  # the sample id as the truth file writes it (the index is by `sample_key`)

    @property
    def has_coords(self) -> bool:
        return self.lat is not None and self.lon is not None


MAX_LINE_CHARS = 32 * 1024 * 1024
"""A JSONL line longer than this (in bytes) is one failed row (read in bounded memory, never parsed)."""
_BOM = b"\xef\xbb\xbf"


def iter_rows(path: Path, notes: list[str] | None = None) -> Iterator[InputRow]:
    """Records of a JSONL / JSON / CSV file, one at a time (JSONL and CSV stream from disk);
    ``notes`` gets what was read differently or left out (a CSV's trailing summary block).

    A JSON array or a pretty-printed JSON object is split into its items as it streams
    (``scoring.jsonstream``), each parsed alone. Text is decoded row by row: a row with bytes
    that are not UTF-8 is one failed row, not a failed file.
    """
    if not path.exists():
        raise ScoreInputError(f"{path}: no such file")
    if path.is_dir():
        raise ScoreInputError(f"{path}: is a directory, expected a JSONL, JSON or CSV file")
    try:
        head = _head(path)
        if not head:
            return
        suffix = path.suffix.lower()
        if suffix in (".csv", ".tsv") or (
            suffix not in (".json", ".jsonl", ".ndjson") and head[0] not in "[{"
        ):
            delimiter = "\t" if suffix == ".tsv" else _csv_delimiter(head)
            with _open(path) as handle:
                yield from read_table(path, handle, delimiter, notes)
        elif head[0] == "[":
            yield from _item_rows(path, array_items(path))
        elif not _one_object(head) and (wrapped := _document(path)) is not False:
            yield from _document_rows(path, wrapped)
        else:
            yield from _read_jsonl(path, head[0])
    except OSError as exc:
        raise ScoreInputError(f"{path}: cannot read ({exc.strerror})") from None


def _open(path: Path) -> BinaryIO:
    """The file as bytes, past a UTF-8 byte-order mark."""
    handle = path.open("rb")
    if handle.read(3) != _BOM:
        handle.seek(0)
    return handle


def _head(path: Path) -> str:
    """The file from its first non-blank character to the end of that line ("" when blank);
    only for telling formats apart, so bytes that are not UTF-8 are replaced."""
    with _open(path) as handle:
        while True:
            line = handle.readline(64 * 1024)
            if not line:
                return ""
            stripped = line.decode("utf-8", "replace").lstrip()
            if stripped:
                return stripped


def _lines(handle: BinaryIO) -> Iterator[bytes | None]:
    """Lines split on ``\n`` only (U+2028 is valid inside JSON); ``None`` for an over-long line."""
    while True:
        line = handle.readline(MAX_LINE_CHARS)
        if not line:
            return
        if len(line) == MAX_LINE_CHARS and not line.endswith(b"\n"):
            while True:
                rest = handle.readline(MAX_LINE_CHARS)
                if not rest or rest.endswith(b"\n"):
                    break
            yield None
            continue
        yield line


def _jsonl_row(path: Path, number: int, raw: bytes | None) -> InputRow:
    if raw is None:
        return InputRow(number, None, f"{path}:{number}: line longer than {MAX_LINE_CHARS:,} bytes")
    return _object_row(f"{path}:{number}", number, raw)


def _object_row(where: str, number: int, raw: bytes, byte_named: bool = False) -> InputRow:
    """One JSON object's bytes as a row; a bad one is a failed row whose message starts ``where``.
    ``byte_named``: a non-UTF-8 error names the byte (as for items of a JSON document)."""
    try:
        fast = orjson.loads(raw)  # ~3x the standard reader on rows of model output
    except orjson.JSONDecodeError:
        pass  # what it refuses (NaN, lone surrogates, bad bytes, deep nesting) is read below as before
    else:
        if isinstance(fast, dict) and not _maybe_huge_integer(fast):
            return InputRow(number, fast)
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = f"byte 0x{raw[exc.start]:02x}" if byte_named else exc.reason
        return InputRow(number, None, f"{where}: not UTF-8 text ({at} at byte {exc.start})")
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return InputRow(number, None, f"{where}: not valid JSON ({exc.msg})")
    except ValueError as exc:  # an integer past Python's int-conversion limit (4,300 digits)
        return InputRow(number, None, f"{where}: not readable ({exc})")
    except RecursionError:
        return InputRow(number, None, f"{where}: not valid JSON (nested too deeply)")
    if not isinstance(obj, dict):
        return InputRow(number, None, f"{where}: expected a JSON object, got {type(obj).__name__}")
    return InputRow(number, clean_json(obj)[0])  # a "\ud800" escape (orjson refuses it) becomes U+FFFD


def _item_rows(path: Path, items: Iterator[Item]) -> Iterator[InputRow]:
    """Rows of a JSON document's list, one item at a time (each item fails alone)."""
    for item in items:
        where = f"{path}:item {item.number}"
        if type(item.value) is dict and not _maybe_huge_integer(item.value):
            yield InputRow(item.number, item.value)  # orjson's: it refuses lone surrogates, read below
        elif item.raw is None:
            yield InputRow(item.number, None, f"{where}: longer than {jsonstream.MAX_ITEM_BYTES:,} bytes")
        else:
            yield _object_row(where, item.number, item.raw, byte_named=True)


_HUGE = 2.0**63
"""orjson reads an integer beyond 64 bits as a float (the standard reader keeps the int): a row
holding a float this large is read again by the standard reader, the only difference in how
the two read (`tests/scoring/test_scoring_json_reader.py`)."""


def _maybe_huge_integer(obj: dict[str, Any]) -> bool:
    """Whether a float in ``obj`` (nested ones included) may have been written as such an integer."""
    stack: list[Any] = [obj]
    while stack:
        container = stack.pop()
        for value in container.values() if type(container) is dict else container:
            kind = type(value)
            if kind is float:
                if value >= _HUGE or value <= -_HUGE:
                    return True
            elif kind is dict or kind is list:
                stack.append(value)
    return False


def _read_jsonl(path: Path, first_char: str) -> Iterator[InputRow]:
    """Stream JSON Lines; bad lines before the first good one wait in case the file is not JSONL."""
    pending: list[InputRow] = []
    good = False
    with _open(path) as handle:
        for number, line in enumerate(_lines(handle), start=1):
            if line is not None and line.isspace():  # a blank line (``strip`` would copy every line)
                continue
            row = _jsonl_row(path, number, line)
            if not good:
                if row.data is None:
                    pending.append(row)
                    continue
                good = True
                yield from pending
                pending = []
            yield row
    if pending:
        if first_char == "{":
            yield from _read_single_object(path)
            return
        first = pending[0]
        raise ScoreInputError(
            f"{path}: not JSON Lines (line {first.line}: {(first.error or '').split(': ', 2)[-1]})"
        )


def _one_object(line: str) -> bool:
    """Whether a line is a whole JSON object (the first line of JSON Lines)."""
    try:
        return isinstance(orjson.loads(line), dict)
    except orjson.JSONDecodeError:
        return False


def _document(path: Path) -> tuple[int, int] | None | bool:
    """A file whose first line is no whole object: the list of rows it wraps when it is one JSON
    object (see ``wrapped_list``), False when it is not (JSON Lines with a bad first line)."""
    try:
        return wrapped_list(path)
    except ScoreInputError:
        return False


def _read_single_object(path: Path) -> Iterator[InputRow]:
    """A pretty-printed JSON file holding one object (or an object wrapping a list of rows)."""
    yield from _document_rows(path, wrapped_list(path))


def _document_rows(path: Path, wrapped: tuple[int, int] | None) -> Iterator[InputRow]:
    """The rows of a JSON object: those of the list it wraps, else the object itself."""
    if wrapped is not None:
        yield from _item_rows(path, wrapped_items(path, *wrapped))
        return
    if path.stat().st_size > jsonstream.MAX_ITEM_BYTES:
        yield InputRow(1, None, f"{path}:item 1: longer than {jsonstream.MAX_ITEM_BYTES:,} bytes")
        return
    with _open(path) as handle:
        yield _object_row(f"{path}:item 1", 1, handle.read(), byte_named=True)


def _csv_delimiter(header: str) -> str:
    """Comma, unless the header row only splits on ``;`` or a tab (spreadsheets in many locales)."""
    header = header.split("\n", 1)[0]
    if "," in header:
        return ","
    return next((d for d in (";", "\t", "|") if d in header), ",")


# --- field extraction -----------------------------------------------------------------------


def row_id(data: dict[str, Any]) -> str | None:
    """The sample id of a row as `eval` reads it (`geosleuth.core.ids.written_id`), else that of
    its ``image`` (the file's name without extension), else its ground-truth object's id."""
    written = written_id(data)
    if written is not None:
        return written
    image = data.get("image")
    if image is not None and str(image).strip():
        return image_sample_id(str(image))
    truth = _truth_dict(data)
    return written_id(truth) if truth is not None else None


def _number(value: Any) -> float | None:
    """A finite float or None; raises ValueError with the offending text when not numeric."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(repr(value))
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int past float's range
        raise ValueError(repr(value)[:40]) from None
    if not math.isfinite(out):
        raise ValueError(repr(value)[:40])
    return out


_SHAPES_CACHED = 4096
"""Key layouts whose field plans are kept (files have a handful; hostile ones get no more)."""
_SHAPE_KEYS = 64
"""Records with more keys than this are planned afresh each time instead of cached."""
_SHAPE_CHARS = 1024
"""Nor are layouts whose key names add up to more characters (hostile keys must not fill memory)."""
_COORD_PLANS: dict[tuple[Any, ...], tuple[str, str] | None] = {}
_LABEL_PLANS: dict[tuple[str, ...], tuple[tuple[str, str, int, bool], ...]] = {}


def _coord_keys(data: dict[str, Any], keys: tuple[tuple[str, str], ...]) -> tuple[str, str] | None:
    """The key pair `_coords` reads: the first complete pair, else the first partial one, else None.

    It depends on which keys are present only, so it is planned once per key layout: the rows
    of a file share a layout, and a plan saves a dozen membership tests per row.
    """
    small = len(data) <= _SHAPE_KEYS
    if small:
        shape = (id(keys), *data)
        plan = _COORD_PLANS.get(shape, False)
        if plan is not False:
            return plan  # type: ignore[return-value]
    partial: tuple[str, str] | None = None
    found: tuple[str, str] | None = None
    names = {k.lower(): k for k in data if isinstance(k, str)}  # "LAT", "Latitude" read as "lat"
    for lat_key, lon_key in keys:
        has_lat, has_lon = lat_key in names, lon_key in names
        if has_lat != has_lon:
            partial = partial or (names.get(lat_key, lat_key), names.get(lon_key, lon_key))
        elif has_lat:
            found = (names[lat_key], names[lon_key])
            break
    plan = found or partial
    if small and len(_COORD_PLANS) < _SHAPES_CACHED and _short_keys(data):
        _COORD_PLANS[shape] = plan
    return plan


def _short_keys(data: dict[str, Any]) -> bool:
    return sum(len(k) for k in data) <= _SHAPE_CHARS


def _coords(
    data: dict[str, Any], keys: tuple[tuple[str, str], ...], what: str
) -> tuple[float | None, float | None, str | None] | None:
    """First complete key pair -> (lat, lon, problem); else the first partial pair's problem; else None."""
    pair = _coord_keys(data, keys)
    return None if pair is None else _pair(data, *pair, what)


def _pair(
    data: dict[str, Any], lat_key: str, lon_key: str, what: str
) -> tuple[float | None, float | None, str | None]:
    lat, lon = data.get(lat_key), data.get(lon_key)
    if type(lat) is float and type(lon) is float and -90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0:
        return lat, lon, None  # the common case, as the checks below would find it (NaN fails the range)
    try:
        lat, lon = _number(lat), _number(lon)
    except ValueError as exc:
        return None, None, f"{what} coordinate {exc} is not a number"
    if lat is None or lon is None:
        return None, None, f"{what} coordinates missing ({lat_key}/{lon_key})"
    if abs(lat) > 90:
        return None, None, f"{what} latitude {lat:g} outside [-90, 90]"
    if abs(lon) > 180:
        return None, None, f"{what} longitude {lon:g} outside [-180, 180]"
    return lat, lon, None


def _truth_dict(data: dict[str, Any]) -> dict[str, Any] | None:
    for key in TRUTH_DICT_KEYS:
        value = data.get(key)
        if isinstance(value, str) and value.lstrip().startswith("{"):
            try:
                value = json.loads(value)
            except (ValueError, RecursionError):  # ValueError: not JSON, or an integer past 4,300 digits
                continue
        if isinstance(value, dict):
            return value
    reward_model = data.get("reward_model")
    if isinstance(reward_model, dict):
        nested = {"ground_truth": reward_model.get("ground_truth")}
        return _truth_dict(nested)
    metadata = data.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("location"), dict):
        # GeoVista's inference output: metadata.location (lat/lng) + multi_level_loc_dict labels
        levels = metadata.get("multi_level_loc_dict")
        return {**metadata["location"], **(levels if isinstance(levels, dict) else {})}
    return None


_LABEL_RANK: dict[str, tuple[str, int]] = {
    key: (level, rank) for level, keys in LABEL_KEYS.items() for rank, key in enumerate(keys)
}


def _label_keys(source: dict[str, Any]) -> tuple[tuple[str, str, int, bool], ...]:
    """(key, level, rank, alone) of the label keys present, in the record's order, planned per
    layout; ``alone``: no other key of that level is present, so no rank needs comparing."""
    if len(source) <= _SHAPE_KEYS:
        shape = tuple(source)
        plan = _LABEL_PLANS.get(shape)
        if plan is not None:
            return plan
    present = [(k, *_LABEL_RANK[k]) for k in source if k in _LABEL_RANK]
    levels = [level for _, level, _ in present]
    plan = tuple((k, level, rank, levels.count(level) == 1) for k, level, rank in present)
    if len(source) <= _SHAPE_KEYS and len(_LABEL_PLANS) < _SHAPES_CACHED and _short_keys(source):
        _LABEL_PLANS[shape] = plan
    return plan


def _labels(source: dict[str, Any]) -> dict[str, str]:
    """Place labels of a truth record; per level the first key of :data:`LABEL_KEYS` present wins."""
    labels: dict[str, str] = {}
    nested = source.get("labels")
    if isinstance(nested, dict):
        labels.update({k: str(v) for k, v in nested.items() if v not in (None, "")})
    best: dict[str, int] = {}
    for key, level, rank, alone in _label_keys(source):
        value = source[key]
        if value is None or isinstance(value, (dict, list)):
            continue
        if alone:
            if level in labels:
                continue  # given under "labels"
        elif level in labels and level not in best:
            continue  # given under "labels"
        elif rank < best.get(level, len(LABEL_KEYS[level])):
            best[level] = rank
        else:
            continue
        labels[level] = "" if (isinstance(value, float) and math.isnan(value)) else str(value)
    return labels


_NESTED_TRUTH_KEYS = TRUTH_COORD_KEYS + PLAIN_COORD_KEYS


class _Overlay:
    """``{**under, **over}.get`` without copying the row (it holds the whole model output)."""

    def __init__(self, over: dict[str, Any], under: dict[str, Any]) -> None:
        self.over, self.under = over, under

    def get(self, key: str) -> Any:
        return self.over[key] if key in self.over else self.under.get(key)


def _choice_answer(source: dict[str, Any] | _Overlay) -> str | None:
    """The correct option of a multiple-choice item (a letter), when the row is one."""
    answer = source.get("answer")
    if isinstance(answer, str) and answer.strip() and isinstance(source.get("choices"), list):
        return answer.strip()
    return None


def truth_from_row(data: dict[str, Any], plain_coords: bool, with_labels: bool = True) -> Truth | None:
    """Ground truth carried by the row itself; ``plain_coords`` lets bare lat/lon count as truth.

    ``with_labels=False`` (a protocol that scores coordinates only) leaves the place labels out
    where the coordinates are usable; without usable coordinates they still decide whether the
    row has any ground truth.
    """
    nested = _truth_dict(data)
    if nested is not None:
        found = _coords(nested, _NESTED_TRUTH_KEYS, "ground-truth")
        usable = found is not None and found[2] is None
        labels = _labels(nested) if with_labels or not usable else {}
        answer = _choice_answer(_Overlay(nested, data)) if "answer" in nested or "answer" in data else None
        if found is None:
            problem = None if (labels or answer) else "ground truth has no coordinates or labels"
            return Truth(None, None, labels, nested, problem, answer)
        lat, lon, problem = found
        return Truth(lat, lon, labels, nested, problem, answer)
    found = _coords(data, TRUTH_COORD_KEYS, "ground-truth")
    if found is None and plain_coords:
        found = _coords(data, PLAIN_COORD_KEYS, "ground-truth")
    if found is None:
        answer = _choice_answer(data)
        return Truth(answer=answer, fields={"choices": data["choices"]}) if answer else None
    lat, lon, problem = found
    labels = _labels(data) if with_labels or problem is not None else {}
    return Truth(lat, lon, labels, {}, problem, _choice_answer(data))


def _message_text(data: dict[str, Any]) -> str | None:
    """The last assistant message of an OpenAI-format conversation (GeoVista: ``pred_output``)."""
    messages = data.get("messages", data.get("pred_output"))
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "assistant":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return None


def prediction_from_row(
    data: dict[str, Any], protocol: ScoringProtocol, geocoder: Geocoder | None
) -> tuple[Prediction, str | None, bool]:
    """(prediction, problem, came_from_columns) for one row, with the protocol's released fallbacks."""
    prediction, problem, from_columns = _prediction_from_row(data, protocol, geocoder)
    if protocol.out_of_range == "zero":
        if from_columns and problem is not None and (raw := _raw_pair(data)) is not None:
            prediction = prediction.model_copy(
                update={"lat": raw[0], "lon": raw[1], "status": ParseStatus.OK}
            )
            problem = None
        prediction = zero_out_of_range(prediction)
    if protocol.unparsed_point is not None:
        prediction = at_released_point(prediction, protocol.unparsed_point)
    return prediction, problem, from_columns


def _raw_pair(data: dict[str, Any]) -> tuple[float, float] | None:
    """The predicted coordinate columns as numbers, in range or not (None when absent or not numbers)."""
    pair = _coord_keys(data, PRED_COORD_KEYS)
    if pair is None or not all(k in data for k in pair):
        return None
    try:
        lat, lon = _number(data.get(pair[0])), _number(data.get(pair[1]))
    except ValueError:
        return None
    return None if lat is None or lon is None else (lat, lon)


def _prediction_from_row(
    data: dict[str, Any], protocol: ScoringProtocol, geocoder: Geocoder | None
) -> tuple[Prediction, str | None, bool]:
    failed = _failed_trajectory(data)
    if failed is not None:
        return Prediction(status=ParseStatus.FAILED), failed, False
    found = _coords(data, PRED_COORD_KEYS, "predicted")
    if found is not None:
        return _column_prediction(found)
    choices = data.get("choices")
    options = [str(c) for c in choices] if isinstance(choices, list) and choices else None
    nested = data.get("prediction")
    if isinstance(nested, dict):
        raw = nested.get("raw")
        if isinstance(raw, str) and raw.strip() and protocol.parse_mode == "strict":
            return _checked(_parse(raw, protocol, geocoder, options))
        try:
            return _checked_record(Prediction.model_validate(nested))
        except ValueError:
            return (
                Prediction(status=ParseStatus.FAILED),
                "prediction record does not match the Prediction schema",
                False,
            )
    for key in TEXT_KEYS:
        value = data.get(key)
        if isinstance(value, str):
            return _checked(_parse(value, protocol, geocoder, options))
    text = _message_text(data)
    if text is not None:
        return _checked(_parse(text, protocol, geocoder, options))
    if _truth_dict(data) is not None or _coords(data, TRUTH_COORD_KEYS, "ground-truth") is not None:
        found = _coords(data, PLAIN_COORD_KEYS, "predicted")  # truth is explicit: bare lat/lon predict
        if found is not None:
            return _column_prediction(found)
    return (
        Prediction(status=ParseStatus.EMPTY),
        "no prediction field (e.g. solution_str, response, pred_lat)",
        False,
    )


def _failed_trajectory(data: dict[str, Any]) -> str | None:
    """Why a geosleuth trajectory record (``sample_id``, ``model``, ``status``) did not end well, or
    None: a failed run is a wrong answer whatever its last message says (as ``eval`` counts it)."""
    status = data.get("status")
    if status is None or status == "ok" or "sample_id" not in data or "model" not in data:
        return None
    return f"trajectory status {str(status)[:40]}"


def truth_record(sample: Sample) -> dict[str, Any]:
    """A dataset sample as a ground-truth row (JSON-safe), the shape ``truth_from_row`` reads:
    images and free metadata stay out."""
    record = sample.model_dump(mode="json", exclude={"image", "metadata"}, exclude_none=True)
    return {k: v for k, v in record.items() if v not in ([], {})}


def _column_prediction(
    found: tuple[float | None, float | None, str | None],
) -> tuple[Prediction, str | None, bool]:
    lat, lon, problem = found
    status = ParseStatus.OK if problem is None else ParseStatus.FAILED
    coords_source = "model" if problem is None else None
    return (
        Prediction(lat=lat, lon=lon, status=status, format="columns", coords_source=coords_source),
        problem,
        True,
    )


def _checked(prediction: Prediction) -> tuple[Prediction, str | None, bool]:
    """Name the problem when an answer's coordinates were out of range (it counts as wrong)."""
    if "invalid_coordinates" in prediction.recovered:
        return prediction, "predicted coordinates outside lat [-90, 90] / lon [-180, 180]", False
    return prediction, None, False


def _checked_record(prediction: Prediction) -> tuple[Prediction, str | None, bool]:
    """A stored Prediction is trusted except for impossible coordinates, which count as wrong."""
    if not prediction.has_coords or valid_coordinates(prediction.lat, prediction.lon):
        return prediction, None, False
    named = any(prediction.level(lv) for lv in LEVELS) or prediction.address
    status = ParseStatus.PARTIAL if named else ParseStatus.FAILED
    cleared = prediction.model_copy(
        update={"lat": None, "lon": None, "status": status, "coords_source": None}
    )
    return cleared, "predicted coordinates outside lat [-90, 90] / lon [-180, 180]", False


def _parse(
    text: str, protocol: ScoringProtocol, geocoder: Geocoder | None, choices: list[str] | None
) -> Prediction:
    if protocol.answer_parser is not None:  # the protocol's own released reader
        return _released_parser(protocol.answer_parser)(text)
    return parse_answer(
        text,
        mode=protocol.parse_mode,
        protocol=protocol.parse_protocol,
        geocoder=geocoder if protocol.geocode else None,
        choices=choices,
        country_codes=False,  # scoring reads country names, never the resolved code
    )


@lru_cache(maxsize=8)
def _released_parser(dotted: str) -> Callable[[str], Prediction]:
    """A protocol's own answer reader (a released regex), imported once."""
    return load_callable(dotted, "answer parser")


def field_value(data: dict[str, Any] | None, truth: Truth | None, name: str) -> str | None:
    """A grouping field from the row, its ground truth, or the dataset row (dotted paths allowed)."""
    for source in (data, truth.fields if truth else None):
        value: Any = source
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None and value != "":
            return str(value)
    return None


@dataclass(slots=True)
class IdJoin:
    """How the predictions of a file met a truth file's ids (`sample_key`)."""

    matched: int = 0
    with_id: int = 0
    first_id: str = ""

    def add(self, sample_id: str, found: bool) -> None:
        self.matched += found
        self.with_id += 1
        self.first_id = self.first_id or sample_id

    def note(self, predictions: str, truth_path: Path, a_truth_id: str) -> str | None:
        """How many matched when some did not; `ScoreInputError` when none did (every figure would be 0)."""
        if self.matched == 0:
            raise ScoreInputError(
                f"{truth_path} matches none of the {self.with_id} prediction(s) in {predictions} by id "
                f"(e.g. {self.first_id!r} there, {a_truth_id!r} here; ids match with or without an "
                "image extension): is it the ground truth of these predictions?"
            )
        return (
            f"{self.matched} of {self.with_id} prediction(s) in {predictions} matched an id in {truth_path}"
        )


def iter_problems(problems: list[str], limit: int = 10) -> Iterator[str]:
    """The first ``limit`` problems, then a count of the rest."""
    yield from problems[:limit]
    if len(problems) > limit:
        yield f"… and {len(problems) - limit} more"
