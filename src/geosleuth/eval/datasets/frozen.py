"""Frozen benchmarks: which exact image files a run saw, and the checks that keep runs comparable.

A run records each sample image's SHA-256 in ``run.json`` (``dataset.image_sha256``). A frozen
manifest (`geosleuth datasets freeze`) lists a benchmark's ids and image hashes plus one hash
of all its ground truth, and can be shared without giving the answers away; ``eval --manifest``
refuses a copy of the benchmark that differs from it. `image_conflicts` is the one check that
``compare``, ``merge`` and ``arena`` run before pairing samples of different runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from geosleuth.bounds.imageio import ImageInputError
from geosleuth.bounds.imagemeta import file_sha256, metadata_kinds
from geosleuth.core.records import Sample
from geosleuth.eval.datasets.spool import in_id_order

MANIFEST_KIND = "geosleuth-frozen-benchmark"
MANIFEST_VERSION = 1
SHOWN = 10
"""Ids named in an error; the rest are counted."""
HASH_THREADS = 4  # hashlib releases the GIL on large reads: a few threads keep a disk busy
T = TypeVar("T")


class FrozenMismatch(ValueError):
    """Two records of a benchmark's images disagree (the message names the samples)."""


def image_sha256(samples: Iterable[Sample]) -> dict[str, str]:
    """Sample id -> SHA-256 of its image file; samples without a readable file are left out."""
    return dict(image_sha256_entries(samples))


def image_sha256_entries(samples: Iterable[Sample]) -> Iterator[tuple[str, str]]:
    """`image_sha256`'s entries in sample order, streamed."""
    return ((i, h) for i, h in per_image_file(samples, _sha256_or_none) if h is not None)


def image_metadata(samples: Iterable[Sample]) -> dict[str, list[str]]:
    """Sample id -> the answer-bearing metadata kinds its file carries (only files with some)."""
    return dict(image_metadata_entries(samples))


def image_metadata_entries(samples: Iterable[Sample]) -> Iterator[tuple[str, list[str]]]:
    """`image_metadata`'s entries in sample order, streamed."""
    return ((i, kinds) for i, kinds in per_image_file(samples, _kinds_or_none) if kinds)


def _sha256_or_none(path: str) -> str | None:
    try:
        return file_sha256(path)
    except OSError:
        return None


def _kinds_or_none(path: str) -> list[str] | None:
    try:
        return metadata_kinds(path)
    except (ImageInputError, OSError):
        return None


FileKey = tuple[int, int, int, int]
"""A file as the run sees it: device, inode, size and modification time (ns)."""
CHUNK = 1024  # samples whose files are read at a time: a few pool tasks in flight, never one per sample
REMEMBERED = 1 << 16  # files whose result is kept: several questions on one image are read once


def per_image_file(
    samples: Iterable[Sample], read: Callable[[str], T | None]
) -> Iterator[tuple[str, T | None]]:
    """(id, ``read(image)``) for each sample with a regular image file, in order, reading each
    distinct file (same device, inode, size and mtime) once; HASH_THREADS read at a time."""
    known: dict[FileKey, T | None] = {}
    with ThreadPoolExecutor(HASH_THREADS) as pool:
        for chunk in _chunks(_with_files(samples)):
            todo = {key: path for _, path, key in chunk if key not in known}
            for key, result in zip(todo, pool.map(read, todo.values()), strict=True):
                if len(known) >= REMEMBERED:
                    del known[next(iter(known))]
                known[key] = result
            for sample_id, _, key in chunk:
                yield sample_id, known[key]


def _with_files(samples: Iterable[Sample]) -> Iterator[tuple[str, str, FileKey]]:
    for sample in samples:
        if not sample.image:
            continue
        try:
            info = os.stat(sample.image)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(info.st_mode):
            yield sample.id, sample.image, (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def _chunks(items: Iterable[tuple[str, str, FileKey]]) -> Iterator[list[tuple[str, str, FileKey]]]:
    chunk: list[tuple[str, str, FileKey]] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def truth_sha256(samples: Iterable[Sample]) -> str:
    """One hash of every sample's ground truth (ids sorted; image paths and free metadata left
    out), so a manifest proves the answers without containing them."""
    digest = hashlib.sha256()
    for sample in in_id_order(samples):
        digest.update(sample.model_dump_json(exclude={"image", "metadata"}).encode() + b"\n")
    return digest.hexdigest()


def freeze_manifest(name: str, fmt: str, samples: Sequence[Sample]) -> dict[str, Any]:
    """The shareable manifest of a benchmark copy; refuses samples whose image cannot be read."""
    hashes = image_sha256(samples)
    missing = [s.id for s in samples if s.id not in hashes]
    if missing:
        raise FrozenMismatch(f"{len(missing)} sample(s) have no readable image: {_named(missing)}")
    return {
        "kind": MANIFEST_KIND,
        "version": MANIFEST_VERSION,
        "dataset": name,
        "format": fmt,
        "n_samples": len(samples),
        "truth_sha256": truth_sha256(samples),
        "samples": [{"id": s.id, "sha256": hashes[s.id]} for s in samples],
    }


def read_frozen(path: Path) -> dict[str, Any]:
    """A manifest written by `freeze_manifest`, checked for shape."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FrozenMismatch(f"{path}: not a readable manifest ({exc})") from None
    if not isinstance(data, dict) or data.get("kind") != MANIFEST_KIND:
        raise FrozenMismatch(
            f"{path}: not a frozen benchmark manifest (`geosleuth datasets freeze` writes one)"
        )
    rows = data.get("samples")
    if not isinstance(rows, list) or not all(
        isinstance(r, dict) and {"id", "sha256"} <= set(r) for r in rows
    ):
        raise FrozenMismatch(f"{path}: 'samples' must list {{id, sha256}} records")
    return data


def manifest_hashes(manifest: Mapping[str, Any]) -> dict[str, str]:
    return {str(r["id"]): str(r["sha256"]) for r in manifest["samples"]}


def check_frozen(manifest: Mapping[str, Any], samples: Sequence[Sample], hashes: Mapping[str, str]) -> None:
    """Refuse a benchmark copy that is not the frozen one: other ids, other image bytes, other truth."""
    frozen = manifest_hashes(manifest)
    ids = {s.id for s in samples}
    problems = []
    if extra := sorted(ids - frozen.keys()):
        problems.append(f"{len(extra)} sample(s) not in the manifest: {_named(extra)}")
    if absent := sorted(frozen.keys() - ids):
        problems.append(f"{len(absent)} manifest sample(s) missing from the dataset: {_named(absent)}")
    if differ := image_conflicts(
        frozen, {i: h for i, h in hashes.items() if i in frozen}, missing_differs=True
    ):
        problems.append(f"{len(differ)} image(s) differ from the manifest: {_named(differ)}")
    if not problems and manifest.get("truth_sha256") != truth_sha256(samples):
        problems.append("the ground truth differs from the manifest's (edited labels or coordinates)")
    if problems:
        raise FrozenMismatch(
            f"the dataset does not match the frozen manifest of {manifest.get('dataset')!r}: "
            + "; ".join(problems)
        )


def image_conflicts(
    first: Mapping[str, str], second: Mapping[str, str], *, missing_differs: bool = False
) -> list[str]:
    """Ids present in both records whose image hashes differ, sorted. With ``missing_differs``, an
    id of ``first`` that ``second`` has no hash for counts as differing too."""
    ids = first.keys() if missing_differs else first.keys() & second.keys()
    return sorted(i for i in ids if second.get(i) != first[i])


def run_image_hashes(manifest: Mapping[str, Any]) -> dict[str, str]:
    """The image hashes a run directory's ``run.json`` recorded (empty for runs made before)."""
    return dict(manifest.get("dataset", {}).get("image_sha256") or {})


def require_same_images(
    runs: Sequence[tuple[str, Mapping[str, Any]]], ids: Iterable[str] | None = None
) -> None:
    """Refuse to pair runs that saw different image files for the same sample id.

    ``runs`` are (name, ``run.json`` content); ``ids`` limits the check to the samples to be
    paired. A sample's first recorded hash is compared with every later run's; the error names
    each differing sample and the two runs. Runs made before hashes were recorded pass unchecked.
    For ``compare``, ``merge`` and ``arena`` (`image_conflicts` compares two plain hash maps)."""
    wanted = set(ids) if ids is not None else None
    first: dict[str, tuple[str, str]] = {}  # id -> (hash, run that recorded it)
    clashes: dict[str, str] = {}
    for name, manifest in runs:
        for sample_id, digest in run_image_hashes(manifest).items():
            if wanted is not None and sample_id not in wanted:
                continue
            seen = first.setdefault(sample_id, (digest, name))
            if seen[0] != digest and sample_id not in clashes:
                clashes[sample_id] = f"{sample_id} ({seen[1]} vs {name})"
    if clashes:
        shown = [clashes[i] for i in sorted(clashes)]
        raise FrozenMismatch(
            f"the runs saw different image files for {len(shown)} sample(s): {_named(shown)}; pair only "
            "runs made on the same copy of the benchmark (`geosleuth datasets freeze` + `eval --manifest`)"
        )


def _named(ids: Sequence[str]) -> str:
    more = f" … and {len(ids) - SHOWN} more" if len(ids) > SHOWN else ""
    return ", ".join(ids[:SHOWN]) + more


def benchmark_images(manifests: Sequence[Mapping[str, Any]], hashes: Mapping[str, str]) -> list[str]:
    """Training samples whose image file is a frozen benchmark's, as ``id (= DATASET:id)``: a
    model trained on them has seen the test photos (SpotAgent keeps its test set disjoint)."""
    owners: dict[str, str] = {}
    for manifest in manifests:
        for bench_id, digest in manifest_hashes(manifest).items():
            owners.setdefault(digest, f"{manifest.get('dataset')}:{bench_id}")
    return [f"{i} (= {owners[h]})" for i, h in sorted(hashes.items()) if h in owners]
