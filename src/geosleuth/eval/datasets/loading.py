"""Benchmark loaders: every released layout becomes a list of ``Sample`` records.

Bad rows are reported up front (``DatasetProblem``) instead of surfacing mid-run; nothing is
downloaded here: data lives wherever the user says. Here: validation and loading; the raw rows
of a table are ``eval.rows``, the row formats (one adapter per benchmark) ``eval.adapters``,
image references ``eval.images``, the distributed layouts ``eval.layouts``.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from geosleuth.core.records import Sample
from geosleuth.core.surrogates import clean_json
from geosleuth.eval.datasets.catalog import DATASET_FORMATS, SPECIAL_FORMATS
from geosleuth.eval.datasets.formats import (
    CHOICE_LETTERS,
    LAT_KEYS,
    LEVEL_ALIASES,
    LON_KEYS,
    MAX_LITERAL_CHARS,
    WEIGHTS_FILE,
    RowAdapter,
    read_clue_weights,
    row_sample_id,
    where_country_row,
    where_street_row,
)
from geosleuth.eval.datasets.image_refs import IMAGE_SUFFIXES, ImageResolver
from geosleuth.eval.datasets.layouts import (
    Layout,
    LayoutError,
    expected_text,
    folder_layout,
    hub_layout,
    table_layout,
)
from geosleuth.eval.datasets.spool import SampleSpool, in_id_order
from geosleuth.eval.datasets.table_rows import DatasetError, read_rows
from geosleuth.eval.run.store import DIGEST, text_digest
from geosleuth.registry import RegistryError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DatasetProblem:
    """One bad row, reported before any sample runs."""

    row: int  # 0-based index of the data row; shown 1-based
    sample_id: str | None
    problem: str

    def __str__(self) -> str:
        where = f"row {self.row + 1}" + (f" (id {self.sample_id})" if self.sample_id else "")
        return f"{where}: {self.problem}"


@dataclass
class Dataset:
    """Loaded samples plus the rows that were rejected and a content fingerprint."""

    name: str
    source: str
    format: str
    samples: Sequence[Sample]  # a `SampleSpool` when loaded from files: on disk, not in memory
    problems: list[DatasetProblem] = field(default_factory=list)
    missing_images: list[DatasetProblem] = field(
        default_factory=list
    )  # samples kept; runs record them failed
    layout: str | None = None  # the distributed layout recognised (`datasets validate` names it)

    @property
    def fingerprint(self) -> str:
        return fingerprint_samples(self.samples)


def fingerprint_samples(samples: Iterable[Sample]) -> str:
    """SHA-256 over the samples (sorted by id) and their image file sizes, so edits are caught.

    Images count by file name and size, not folder, so a moved dataset still resumes its runs.
    """
    digest = hashlib.sha256()
    for sample in in_id_order(samples):
        name = Path(sample.image).name if sample.image else None
        digest.update(sample.model_copy(update={"image": name}).model_dump_json().encode())
        if sample.image:
            path = Path(sample.image)
            digest.update(str(path.stat().st_size if path.is_file() else -1).encode())
    return "sha256:" + digest.hexdigest()


# ----------------------------------------------------------------------------- raw rows


# ----------------------------------------------------------------------------- row adapters


# ----------------------------------------------------------------------------- validation


def image_problem(sample: Sample) -> str | None:
    """Why a sample's image cannot be read, or None when the file is there."""
    if not sample.image:
        names = "/".join(s.lstrip(".") for s in IMAGE_SUFFIXES[:4])
        return f"image not found: no {sample.id}.{{{names}}} (any case) in the image folder"
    if not Path(sample.image).is_file():
        return f"image not found: {sample.image}"
    return None


def validate_sample(sample: Sample, check_images: bool = False) -> list[str]:
    """Problems with one sample's record: coordinates out of range, inconsistent answers.

    With ``check_images`` a missing image is one of them; loaders report missing images
    separately (``Dataset.missing_images``) and keep the sample, so a run records it as failed.
    """
    problems: list[str] = []
    if check_images and (missing := image_problem(sample)):
        problems.append(missing)
    if (sample.lat is None) != (sample.lon is None):
        problems.append("only one of latitude / longitude is given")
    if sample.lat is not None and not -90.0 <= sample.lat <= 90.0:
        problems.append(f"latitude {sample.lat} outside [-90, 90]")
    if sample.lon is not None and not -180.0 <= sample.lon <= 180.0:
        problems.append(f"longitude {sample.lon} outside [-180, 180]")
    if sample.answer_type == "coordinates" and sample.lat is None and not sample.labels:
        problems.append("no ground truth: neither coordinates nor place labels")
    if sample.answer_type == "choice":
        if not sample.choices or sample.answer is None:
            problems.append("multiple choice without choices or answer")
        elif sample.answer not in CHOICE_LETTERS[: len(sample.choices)]:
            problems.append(f"answer {sample.answer!r} is not one of the choice letters")
    if sample.clue_weights and len(sample.clue_weights) != len(sample.key_clues):
        problems.append(f"{len(sample.clue_weights)} clue weights for {len(sample.key_clues)} key clues")
    return problems


def build_samples(
    rows: Iterable[dict[str, Any]],
    adapter: RowAdapter,
    images: ImageResolver,
    check_images: bool = True,
    missing_images: list[DatasetProblem] | None = None,
) -> tuple[SampleSpool, list[DatasetProblem]]:
    """Apply a row adapter, collecting bad rows and duplicate ids as problems.

    A sample whose image is missing stays in the samples (a run records it as failed);
    with ``check_images`` it is listed in ``missing_images``. The samples are spooled to disk
    and duplicates found afterwards from 16-byte id digests, so memory stays flat in the rows.
    """
    samples = SampleSpool()
    problems: list[DatasetProblem] = []
    digests = bytearray()  # every adapted row's id digest, in row order
    rows_of = array("i")  # the row of each digest
    kept_as = array("i")  # its place in `samples`, -1 when the row was rejected
    rejected_ids: dict[int, str] = {}  # digest number -> id, for rejected rows only
    for index, row in enumerate(rows):
        if "__error__" in row:
            problems.append(DatasetProblem(index, None, str(row["__error__"])))
            continue
        row, replaced = clean_json(row)  # a file's "\ud800" must not reach a writer
        try:
            sample = adapter(row, index, images)
            if replaced:
                sample.metadata["replaced_surrogates"] = replaced
                log.warning("row %d: replaced %d lone surrogate(s) by U+FFFD", index + 1, replaced)
        except (ValueError, TypeError, ValidationError) as exc:
            message = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            problems.append(DatasetProblem(index, row_sample_id(row, index), message))
            continue
        issues = validate_sample(sample)
        if check_images and missing_images is not None and (missing := image_problem(sample)):
            missing_images.append(DatasetProblem(index, sample.id, missing))
        digests += text_digest(sample.id)
        rows_of.append(index)
        if issues:
            rejected_ids[len(kept_as)] = sample.id
            kept_as.append(-1)
            problems.extend(DatasetProblem(index, sample.id, issue) for issue in issues)
            continue
        kept_as.append(len(samples))
        samples.append(sample)
    return _drop_duplicates(samples, problems, digests, rows_of, kept_as, rejected_ids)


def _drop_duplicates(
    samples: SampleSpool,
    problems: list[DatasetProblem],
    digests: bytearray,
    rows_of: array[int],
    kept_as: array[int],
    rejected_ids: dict[int, str],
) -> tuple[SampleSpool, list[DatasetProblem]]:
    """Every repeat of an id seen on an earlier row is a problem ("duplicate id") and not a sample."""
    keys = np.frombuffer(digests, dtype=DIGEST)
    order = np.argsort(keys, kind="stable")  # equal ids: the earlier row first
    ordered = keys[order]
    repeats = np.sort(order[1:][ordered[1:] == ordered[:-1]])
    if not len(repeats):
        return samples, problems
    dropped = set()
    for number in repeats.tolist():
        place = kept_as[number]
        sample_id = rejected_ids[number] if place < 0 else samples[place].id
        problems.append(DatasetProblem(rows_of[number], sample_id, "duplicate id"))
        if place >= 0:
            dropped.add(place)
    problems.sort(key=lambda p: p.row)  # stable: a row's own issues stay before its duplicate id
    kept = samples.select(i for i in range(len(samples)) if i not in dropped) if dropped else samples
    return kept, problems


# ----------------------------------------------------------------------------- entry points


def _table_in(folder: Path) -> Path:
    tables = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".csv", ".tsv", ".jsonl", ".json"))
    if len(tables) != 1:
        names = ", ".join(p.name for p in tables) or "none"
        raise DatasetError(f"{folder}: expected exactly one .csv/.tsv/.jsonl/.json table, found {names}")
    return tables[0]


def _image_root(table: Path, images: Path | None) -> Path:
    if images is not None:
        return images
    for name in ("images", "imgs", "img"):
        if (table.parent / name).is_dir():
            return table.parent / name
    return table.parent


def detect_format(path: Path) -> str:
    """Guess the adapter from a table's column names (or ``hf`` for a saved dataset)."""
    if path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()):
        return "hf"
    table = _table_in(path) if path.is_dir() else path
    if table.suffix.lower() == ".parquet":
        return "hf"
    first = next(iter(read_rows(table)), {})
    return format_of_columns(set(first), first)


def format_of_columns(columns: set[str], first: dict[str, Any]) -> str:
    """The adapter a row's column names call for (shared by table and Hugging Face loaders)."""
    if {"IMG_ID", "LAT", "LON"} <= columns and {"city", "state", "country"} <= columns:
        return "mp16pro"
    if {"IMG_ID", "LAT", "LON"} <= columns:
        return "im2gps3k"
    if {"id", "latitude", "longitude"} <= columns and (
        "sub-region" in columns or any(c.startswith("unique_") for c in columns)
    ):
        return "osv5m"
    if {"gt_lat", "gt_lon"} <= columns:
        return "greval"
    if {"id", "labels", "answer_type"} <= columns:  # geosleuth's own Sample records (any benchmark)
        return "generic"
    if "distractors" in columns or {"nation", "options"} <= columns:
        return "wherecountry"
    if "key_clues" in columns and ({"level", "hint", "answer_type", "BVID"} & columns):
        return "wherestreet"
    if "metadata" in columns and "location" in str(first.get("metadata"))[:MAX_LITERAL_CHARS]:
        return "geobench"
    return "generic"


def load_dataset(
    path: str | Path,
    format: str = "auto",
    images: str | Path | None = None,
    *,
    seed: int = 0,
    split: str | None = None,
    check_images: bool = True,
) -> Dataset:
    """Load a benchmark from a table file, a folder (table + images), a release's own files
    (``info.json``, ``info.txt``, the hub's ``test.csv``, …) or a Hugging Face dataset."""
    source = Path(path).expanduser()
    if not source.exists():
        raise DatasetError(f"dataset not found: {source}")
    if format not in SPECIAL_FORMATS:
        try:
            DATASET_FORMATS.get_entry(format)
        except RegistryError as exc:
            raise DatasetError(f"{exc} (or auto, hf)") from None
    layout = find_layout(source, split)
    if layout is not None and format not in ("auto", layout.format):
        layout = None  # an explicit format reads the files its own way
    if layout is not None and layout.parts:
        return _load_parts(source, layout, seed=seed, split=split, check_images=check_images)
    fmt = layout.format if layout is not None else detect_format(source) if format == "auto" else format
    image_root = Path(images).expanduser() if images else (layout.images if layout is not None else None)
    if fmt == "hf":
        hf_source, snapshot = (layout.table, layout.images) if layout is not None else (source, None)
        loaded = _load_hf(
            hf_source,
            Path(images).expanduser() if images else None,
            split=split,
            seed=seed,
            check_images=check_images,
            snapshot=snapshot,
            shards=layout.shards if layout is not None else (),
        )
        if layout is not None:
            loaded.name, loaded.source, loaded.layout = source.stem, str(source.resolve()), layout.name
        return loaded
    table = layout.table if layout is not None else _table_in(source) if source.is_dir() else source
    weights_file = table.parent / WEIGHTS_FILE
    weights = read_clue_weights(weights_file) if fmt == "wherestreet" and weights_file.is_file() else None
    resolver = ImageResolver(_image_root(table, image_root), table.parent, zip_parts=fmt == "osv5m")
    rows = layout.rows if layout is not None and layout.rows is not None else lambda: read_rows(table)
    missing: list[DatasetProblem] = []
    try:
        samples, problems = build_samples(
            rows(), _adapter(fmt, seed, weights), resolver, check_images, missing
        )
        if not samples:
            _no_samples(table, fmt, layout, rows, problems)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error) as exc:
        raise DatasetError(f"{table}: cannot read: {exc}") from exc
    except LayoutError as exc:
        raise DatasetError(str(exc)) from exc
    if split is not None:
        samples = samples.where(lambda s: s.split in (None, split))
        if missing:
            kept = {s.id for s in samples}
            missing = [m for m in missing if m.sample_id in kept]
    return Dataset(
        name=source.stem,
        source=str(source.resolve()),
        format=fmt,
        samples=samples,
        problems=problems,
        missing_images=missing,
        layout=layout.name
        if layout is not None
        else f"GREval-Bench ({table.name})"
        if fmt == "greval"
        else None,
    )


def find_layout(source: Path, split: str | None = None) -> Layout | None:
    """The distributed layout a file or folder is, by the names and columns its authors ship."""
    try:
        if source.is_dir():
            hub = hub_layout(
                source, split
            )  # before the save_to_disk check: the hub ships dataset_info.json too
            if hub is not None:
                return hub
            if (source / "dataset_info.json").exists() or (source / "dataset_dict.json").exists():
                return None
            found = folder_layout(source)
            if found is None and any(source.glob("*.parquet")):
                found = Layout("parquet files", "hf", source)
            return found
        if source.name in ("info.json", "info.txt"):  # the OSV-5M baseline files, named directly
            return folder_layout(source.parent)
        return table_layout(source)  # a JSON release (GREval-Bench) is known by its keys once read
    except LayoutError as exc:
        raise DatasetError(str(exc)) from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error, DatasetError):
        return None  # not a release layout; the ordinary reader reports what is wrong with it


_REQUIRED: dict[str, tuple[tuple[str, ...], ...]] = {
    "im2gps3k": (
        ("IMG_ID", "img_id", "id", "image"),
        ("LAT", "lat", "latitude"),
        ("LON", "lon", "longitude"),
    ),
    "yfcc4k": (("IMG_ID", "img_id", "id", "image"), ("LAT", "lat", "latitude"), ("LON", "lon", "longitude")),
    "osv5m": (("id",), ("latitude",), ("longitude",)),
    "mp16pro": (("IMG_ID",), ("LAT",), ("LON",)),
    "greval": (("gt_lat",), ("gt_lon",)),
    "mapbench": (LAT_KEYS, LON_KEYS),
}
"""Columns a format cannot do without (one name of each group); other formats name what is missing per row."""


def _lacks_columns(fmt: str, row: dict[str, Any]) -> bool:
    """True when a row carries none of the names a format reads its ground truth from."""
    if fmt == "generic":
        names = set(LAT_KEYS) | {k for aliases in LEVEL_ALIASES.values() for k in aliases} | {"labels"}
        return not names & set(row)
    return any(not set(group) & set(row) for group in _REQUIRED.get(fmt, ()))


def _no_samples(
    table: Path,
    fmt: str,
    layout: Layout | None,
    rows: Callable[[], Iterable[dict[str, Any]]],
    problems: list[DatasetProblem],
) -> None:
    """Raise when a layout yields no sample because it is not what it was read as.

    Rows that are there but bad (a coordinate that is no number) stay listed problems; a file
    whose rows carry none of the expected columns, or nothing at all, is an error naming the
    columns found and what each format expects.
    """
    first = next((r for r in rows() if "__error__" not in r), None)
    if problems and first is not None and not _lacks_columns(fmt, first):
        return
    name = layout.name if layout is not None else fmt
    found = ", ".join(list(first)[:40]) if first is not None else "no usable row"
    shown = "; ".join(str(p) for p in problems[:3])
    raise DatasetError(
        f"{table}: read as {name}, it yields 0 samples. Columns / keys found: {found}."
        + (f" First problems: {shown}." if shown else "")
        + f" Each format expects — {expected_text()}"
    )


def _load_parts(source: Path, layout: Layout, *, seed: int, split: str | None, check_images: bool) -> Dataset:
    """A release of several tables (EarthWhere's WhereCountry and WhereStreet) as one dataset."""
    samples = SampleSpool()
    problems: list[DatasetProblem] = []
    missing: list[DatasetProblem] = []
    for part in layout.parts:
        loaded = load_dataset(part.table, part.format, seed=seed, split=split, check_images=check_images)
        samples.extend(loaded.samples)
        problems.extend(
            DatasetProblem(p.row, p.sample_id, f"{part.table.name}: {p.problem}") for p in loaded.problems
        )
        missing.extend(loaded.missing_images)
    seen: set[str] = set()
    for index, sample in enumerate(samples):
        if sample.id in seen:
            problems.append(DatasetProblem(index, sample.id, "duplicate id across the release's tables"))
        seen.add(sample.id)
    return Dataset(
        name=source.stem,
        source=str(source.resolve()),
        format=layout.format,
        samples=samples,
        problems=problems,
        missing_images=missing,
        layout=layout.name,
    )


def _adapter(fmt: str, seed: int, weights: dict[str, list[float]] | None = None) -> RowAdapter:
    """The row adapter of a format, bound to the shuffling seed and clue weights it needs."""
    if fmt == "wherecountry":
        return lambda row, index, res: where_country_row(row, index, res, seed=seed)
    if fmt == "wherestreet":
        return lambda row, index, res: where_street_row(row, index, res, weights=weights)
    return DATASET_FORMATS.get_entry(fmt)


def _load_hf(
    source: Path,
    image_root: Path | None,
    *,
    split: str | None,
    seed: int,
    check_images: bool,
    snapshot: Path | None = None,
    shards: tuple[Path, ...] = (),
) -> Dataset:
    """Samples from a saved Hugging Face dataset or parquet file(s); in a hub ``snapshot`` folder,
    image paths in the rows are relative to it and embedded images go beside it. Each of its
    ``shards`` writes its embedded images to a folder of its own (rows without an id are named by
    their index within the shard, which repeats across shards and splits)."""
    from geosleuth.eval.datasets.hf import HFReadError, read_hf_rows

    named = snapshot or source
    folder = image_root or named.with_name(named.name + ".images")
    try:
        if shards:
            rows = [row for shard in shards for row in read_hf_rows(shard, folder / shard.stem, split)]
        else:
            rows = read_hf_rows(source, folder, split)
    except HFReadError as exc:
        raise DatasetError(str(exc)) from exc
    adapter = _adapter(format_of_columns(set(rows[0]), rows[0]), seed)
    root = image_root or (source.parent if source.is_file() else source)
    missing: list[DatasetProblem] = []
    samples, problems = build_samples(rows, adapter, ImageResolver(root, snapshot), check_images, missing)
    return Dataset(
        name=source.stem,
        source=str(source.resolve()),
        format="hf",
        samples=samples,
        problems=problems,
        missing_images=missing,
    )
