"""``geosleuth score --protocol wherebench``: WhereCountry / WhereStreet prediction files, as released.

The ground truth is the released table (``--truth wherecountry_500.csv`` or ``all.csv``, with
``gt_key_clues_weight.json`` beside it). Predictions are joined by id and may be any row
file ``geosleuth score`` reads, or the released outputs: the WhereCountry CSV (``panoId``,
``predicted`` country name, ``choices``) and the WhereStreet JSON object keyed by BVID
(``predicted`` answer text, ``response``, and after their evaluation ``thinking_result``).
Every truth row is scored: a row the file lacks is unanswered (wrong every row; dropped from
the as-published WhereCountry accuracy, as the released code does).
"""

from __future__ import annotations

import ast
import csv
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geosleuth.core import metrics
from geosleuth.core.ids import sample_key
from geosleuth.core.parsing import parse_answer, wherecountry_choice
from geosleuth.core.records import Prediction, Sample
from geosleuth.eval.report.scores import sample_distance
from geosleuth.eval.wherebench import rules as wherebench
from geosleuth.scoring.io import TEXT_KEYS, ScoreInputError, iter_rows, row_id
from geosleuth.scoring.protocols import ScoringProtocol
from geosleuth.scoring.results import FileScore, Score

if TYPE_CHECKING:
    from geosleuth.eval.wherebench.judge import WhereBenchJudge

ID_KEYS = ("panoID", "panoId", "pano_id", "BVID", "bvid")
ANSWER_KEYS = ("predicted", "answer", *TEXT_KEYS)
MAX_LIST_CHARS = 20_000
MAX_TABLES = 50


def _tables(truth_path: Path) -> list[Path]:
    """The truth table, or every WhereBench table under a folder (e.g. the released repository)."""
    from geosleuth.eval.datasets.loading import DatasetError, detect_format

    if truth_path.is_file():
        return [truth_path]
    found: list[Path] = []
    for table in sorted(truth_path.rglob("*.csv"))[:MAX_TABLES]:
        try:
            if detect_format(table) in ("wherecountry", "wherestreet"):
                found.append(table)
        except (DatasetError, OSError, UnicodeDecodeError, csv.Error):
            continue
    if not found:
        raise ScoreInputError(f"{truth_path}: no WhereCountry or WhereStreet table (.csv) in this folder")
    return found


def _truth(truth_path: Path | None) -> list[Sample]:
    """Ground-truth samples of one released table, or of every table in a folder (for Overall)."""
    from geosleuth.eval.datasets.loading import DatasetError, load_dataset

    if truth_path is None:
        raise ScoreInputError(
            "--protocol wherebench needs --truth: the released wherecountry_500.csv, wherestreet all.csv, "
            "or a folder holding both (for the Overall score)"
        )
    if not truth_path.exists():
        raise ScoreInputError(f"{truth_path}: no such file or folder")
    samples: list[Sample] = []
    for table in _tables(truth_path):
        try:
            dataset = load_dataset(table, check_images=False)
        except DatasetError as exc:
            raise ScoreInputError(str(exc)) from None
        if dataset.format not in ("wherecountry", "wherestreet"):
            raise ScoreInputError(
                f"{table}: not a WhereCountry or WhereStreet table (read as {dataset.format})"
            )
        if dataset.problems:
            shown = "; ".join(str(p) for p in dataset.problems[:5])
            raise ScoreInputError(f"{table}: {len(dataset.problems)} bad truth row(s): {shown}")
        samples.extend(dataset.samples)
    return samples


def _predictions(path: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Prediction rows by `sample_key`; the released WhereStreet JSON object ``{BVID: {...}}`` is read too."""
    problems: list[str] = []
    text = path.read_text(encoding="utf-8-sig") if path.is_file() else ""
    if text.lstrip().startswith("{") and path.suffix.lower() == ".json":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScoreInputError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        except (ValueError, RecursionError) as exc:  # too deep, or an integer past 4,300 digits
            raise ScoreInputError(f"{path}: not readable ({exc or 'nested too deeply'})") from None
        if isinstance(obj, dict) and obj and all(isinstance(v, dict) for v in obj.values()):
            return {sample_key(k): v for k, v in obj.items()}, problems
    out: dict[str, dict[str, Any]] = {}
    for row in iter_rows(path):
        if row.data is None:
            problems.append(row.error or f"line {row.line}: unreadable")
            continue
        key = next((str(row.data[k]) for k in ID_KEYS if row.data.get(k) not in (None, "")), None)
        key = key or row_id(row.data)
        if key is None:
            problems.append(f"line {row.line}: no id")
        elif sample_key(key) in out:
            problems.append(f"line {row.line}: duplicate id {key} (first kept)")
        else:
            out[sample_key(key)] = row.data
    return out, problems


def _list(value: Any) -> list[Any] | None:
    if isinstance(value, list):
        return value
    if isinstance(value, str) and value.strip().startswith("[") and len(value) <= MAX_LIST_CHARS:
        try:
            parsed = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
        return list(parsed) if isinstance(parsed, list | tuple) else None
    return None


def _text(data: dict[str, Any]) -> str | None:
    for key in ANSWER_KEYS:
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _recorded(data: dict[str, Any]) -> Prediction | None:
    """The prediction a geosleuth record already holds (``trajectories.jsonl``); None when it failed."""
    nested = data.get("prediction")
    if not isinstance(nested, dict) or data.get("status", "ok") != "ok":
        return None
    try:
        return Prediction.model_validate(nested)
    except ValueError:
        return None


def _run_choices(path: Path) -> dict[str, list[str]]:
    """Option order per id when the file lies in a run directory (its ``samples.jsonl``): a run's
    letters refer to the order that run shuffled, whatever its seed."""
    samples = path.parent / "samples.jsonl"
    if not samples.is_file():
        return {}
    out: dict[str, list[str]] = {}
    with samples.open("rb") as handle:  # a line that is not UTF-8 is skipped alone
        lines = list(handle)
    for line in lines:
        try:
            sample = Sample.model_validate_json(line)
        except ValueError:
            continue
        if sample.choices:
            out[sample.id] = list(sample.choices)
    return out


def _country_item(
    sample: Sample, data: dict[str, Any] | None, run_choices: list[str] | None = None
) -> tuple[wherebench.WhereItem, dict[str, Any]]:
    """A WhereCountry row: the chosen option (a name in the row's own option order, or parsed text)."""
    nation = sample.labels["country"]
    if data is None:
        return wherebench.WhereItem(sample.id, "wherecountry"), {"status": "missing"}
    choices = [str(c) for c in (_list(data.get("choices")) or run_choices or sample.choices)]
    chosen: str | None = None
    named = data.get("predicted")
    if isinstance(named, str) and named.strip() in choices:
        chosen = named.strip()
    else:
        text = _text(data)
        recorded = _recorded(data)
        index: int | None = None
        if recorded is not None and recorded.choice:
            index = ord(recorded.choice.upper()) - ord("A")
        elif recorded is None and text:
            index = wherecountry_choice(text, choices)  # the released regex (numbers 1-4)
        chosen = choices[index] if index is not None and 0 <= index < len(choices) else None
    item = wherebench.WhereItem(
        sample.id, "wherecountry", parsed=chosen is not None, correct=chosen == nation
    )
    return item, {"status": "ok" if chosen else "unparsed", "chosen": chosen, "correct": item.correct}


def _street_item(
    sample: Sample,
    data: dict[str, Any] | None,
    protocol: ScoringProtocol,
    judge: WhereBenchJudge | None = None,
) -> tuple[wherebench.WhereItem, dict[str, Any]]:
    """A WhereStreet row: path score (text items) or distance (coordinate items), and judged clue use.

    With ``judge`` the released judge questions replace the rule-based path score, convert a
    coordinate answer without two numbers, and decide clue use when the file has no verdicts.
    """
    source = sample.split if sample.split in wherebench.SOURCES else wherebench.source_of(sample.id)
    text_item = sample.answer_type == "level"
    item = wherebench.WhereItem(
        sample.id,
        "text" if text_item else "coordinates",
        source=source,
        clue_weights=list(sample.clue_weights),
    )
    if data is None:
        return item, {"status": "missing", "source": source}
    text = _text(data)
    answer = wherebench.answer_block(text) if text else None
    recorded = _recorded(data)
    prediction = recorded or (parse_answer(answer, "robust") if answer else Prediction())
    if recorded is None and not text_item and answer:  # released reading: the answer's first two numbers
        found = wherebench.released_coordinates(answer)
        prediction = Prediction(lat=found[0], lon=found[1]) if found else Prediction()
    used = _list(data.get("thinking_result"))
    if used is not None:
        item.clues_used = [bool(u) for u in used]
    record: dict[str, Any] = {"status": "ok" if text or recorded else "unparsed", "source": source}
    if text_item and sample.answer_level:
        score, hits, given, copied = wherebench.item_path_score(
            prediction, sample.labels, sample.answer_level, sample.hint, sample.hint_level
        )
        item.path_score = score
        record |= {"path_score": score, "level_hits": hits, "hint_level": given, "copied_hint": copied}
    if judge is not None:
        prediction = _judge_item(judge, sample, data, answer, item, record, prediction)
    if not text_item and prediction.has_coords and sample.lat is not None and sample.lon is not None:
        d = sample_distance(sample, prediction, protocol)
        item.distance_km = d
        record["distance_km"] = d
    if item.clues_used is not None:
        record["thinking"] = metrics.thinking_score(item.clues_used)
    return item, record


def _judge_item(
    judge: WhereBenchJudge,
    sample: Sample,
    data: dict[str, Any],
    answer: str | None,
    item: wherebench.WhereItem,
    record: dict[str, Any],
    prediction: Prediction,
) -> Prediction:
    """Ask the released judge questions for one WhereStreet row; a failed request fails the row.

    Returns the row's prediction: the judge's coordinates for an answer without two numbers.
    """
    predicted = data.get("predicted") if isinstance(data.get("predicted"), str) else (answer or "")
    hint = sample.hint or ""
    response = data.get("response") if isinstance(data.get("response"), str) else (_text(data) or "")
    try:
        if item.task == "text":
            rule = item.path_score
            item.path_score = judge.path_score(
                predicted,
                sample.answer or "",
                str(sample.metadata.get("answer_type", sample.answer_level)),
                hint,
            )
            record |= {"path_score": item.path_score, "path_score_rule": rule, "judged": True}
        elif not prediction.has_coords and predicted.strip():
            found = judge.coordinates(predicted, hint)
            record["judged_coordinates"] = list(found) if found else None
            if found is not None:
                prediction = Prediction(lat=found[0], lon=found[1])
        if item.clues_used is None and sample.key_clues:
            item.clues_used = judge.clues_used(response, list(sample.key_clues))
            record["thinking_result"] = [int(u) for u in item.clues_used]
    except Exception as exc:  # noqa: BLE001 - one failed judge request is one failed row
        record |= {"status": "judge_failed", "judge_error": f"{type(exc).__name__}: {exc}"[:300]}
        if item.task == "text":
            item.path_score = 0.0
            record["path_score"] = 0.0
    return prediction


def _number(value: Any) -> float:
    """A figure as a metric: the figures say "undefined" with None, ``Score`` with NaN."""
    return math.nan if value is None else float(value)


def _flat(figures: dict[str, Any]) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """The nested WhereBench figures as ``geosleuth score`` metrics (percent) and their 95 % intervals,
    in one walk so that a metric and its interval cannot be named apart."""
    out: dict[str, float] = {}
    cis: dict[str, tuple[float, float]] = {}

    def put(name: str, block: dict[str, Any], key: str) -> None:
        out[name] = _number(block[key])
        if f"{key}_ci95" in block:
            lo, hi = block[f"{key}_ci95"]
            cis[name] = (_number(lo), _number(hi))

    country = figures.get("wherecountry")
    if country:
        put("acc_wherecountry_as_published", country, "accuracy_as_published")
        put("acc_wherecountry_every_row", country, "accuracy_every_row")
    for split, f in (figures.get("wherestreet") or {}).items():
        put(f"path_score_{split}", f, "path_score")
        for key in f:
            if key.startswith("acc@"):
                put(f"{key}_{split}", f, key)
        for kind in ("text", "coordinates"):
            put(f"thinking_{split}_{kind}", f[f"thinking_{kind}"], "thinking")
            put(f"thinking_shapley_{split}_{kind}", f[f"thinking_{kind}"], "thinking_shapley")
    if "answer_thinking_pearson" in figures:
        put("answer_thinking_pearson", figures, "answer_thinking_pearson")
    put("overall", figures, "overall")
    put("overall_every_row", figures, "overall_every_row")
    put("overall_eq2", figures, "overall_eq2")
    return out, cis


def score_wherebench_file(
    path: Path, protocol: ScoringProtocol, truth_path: Path | None, judge: WhereBenchJudge | None = None
) -> FileScore:
    """Score one WhereCountry or WhereStreet prediction file against the released table.

    Rule-based by default (offline); ``judge`` asks the released judge questions instead.
    """
    samples = _truth(truth_path)
    predictions, problems = _predictions(path)
    run_choices = _run_choices(path)
    items: list[wherebench.WhereItem] = []
    records: list[dict[str, Any]] = []
    for sample in samples:
        data = predictions.get(sample_key(sample.id))
        if sample.answer_type == "choice":
            item, record = _country_item(sample, data, run_choices.get(sample.id))
        else:
            item, record = _street_item(sample, data, protocol, judge)
        items.append(item)
        records.append({"id": sample.id, **record})
    known = {s.id for s in samples}
    extra = [k for k in predictions if k not in known]
    figures = wherebench.wherebench_figures(items)
    warnings = list(problems[:10])
    if extra:
        warnings.append(f"{len(extra)} prediction id(s) not in the truth table, ignored (e.g. {extra[0]})")
    missing = sum(r["status"] == "missing" for r in records)
    if missing:
        warnings.append(f"{missing} truth row(s) have no prediction; they count as unanswered")
    judge_failed = [r["id"] for r in records if r.get("status") == "judge_failed"]
    if judge_failed:
        warnings.append(
            f"{len(judge_failed)} row(s) whose judge request failed scored 0 (e.g. {judge_failed[0]})"
        )
    country = figures.get("wherecountry")
    if isinstance(country, dict) and country["unparsed_ids"]:
        ids = country["unparsed_ids"]
        warnings.append(
            f"{len(ids)} WhereCountry row(s) without a readable choice differ between the as-published "
            f"accuracy (dropped) and every row (wrong): {', '.join(ids[:10])}{' …' if len(ids) > 10 else ''}"
        )
    parsed = sum(r["status"] == "ok" for r in records)
    values, cis = _flat(figures)
    score = Score(n=len(samples), parsed=parsed, metrics=values, ci95=cis, warnings=warnings)
    return FileScore(str(path), protocol.name, score, records=records)


PROTOCOL = ScoringProtocol(
    name="wherebench",
    description="WhereBench as released: WhereCountry accuracy over parsed answers and every row; "
    "WhereStreet path score per split, Acc@1-200 km as 0 < d <= k (haversine R = 6371 km), "
    "thinking score Σ w·s, Overall (Eq. 2); needs --truth",
    radius_km=6371.0,
    thresholds=metrics.THRESHOLD_PRESETS["street"],
    strict_threshold=False,
    file_scorer=score_wherebench_file,
)
"""WhereBench's protocol: registered through geosleuth's own ``geosleuth.protocols`` entry point,
since WhereBench sits above the scoring layer (as a third-party protocol would)."""
