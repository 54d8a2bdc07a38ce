"""Merge the shards of a run that job-array tasks ran independently (``eval --shard I/N``).

Each shard is a complete run directory under ``RUN/shards/I-of-N`` (its manifest, its samples,
its log, its tool images), so shards run, fail and resume on their own, on any machines that
see the dataset. The merge checks that the shards belong together (same dataset fingerprint,
same system under test, one N, none missing) and writes ``RUN`` as one run directory, in the
dataset's order, so its report equals the report of the same run done in one piece. It only
reads the shards and can be repeated as more shards finish.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geosleuth.eval.judges.tasks import JUDGMENTS
from geosleuth.eval.run.config import AGENT_FIELDS, MANIFEST, SAMPLES, SHARD_POSITIONS, SHARDS, read_manifest
from geosleuth.eval.run.store import (
    FAILED_ATTEMPTS,
    TRAJECTORIES,
    RunDirError,
    TrajectoryStore,
    fsync_dir,
    write_atomic,
)

_SHARD_DIR = re.compile(r"^(\d+)-of-(\d+)$")


@dataclass
class Shard:
    index: int
    path: Path
    manifest: dict[str, Any]
    positions: list[int]


@dataclass
class MergeResult:
    shards: int
    samples: int
    trajectories: int
    images: int
    unfinished: dict[int, int] = field(default_factory=dict)  # shard index -> samples without a record


def find_shards(run_dir: Path) -> list[Shard]:
    """The shard directories of a run, checked to form one whole run."""
    root = run_dir / SHARDS
    found = sorted(
        (int(m.group(1)), int(m.group(2)), p)
        for p in (root.iterdir() if root.is_dir() else [])
        if p.is_dir() and (m := _SHARD_DIR.match(p.name))
    )
    if not found:
        raise RunDirError(f"{run_dir} has no shards (expected {root}/I-of-N from `eval --shard I/N`)")
    counts = sorted({count for _, count, _ in found})
    if len(counts) > 1:
        raise RunDirError(f"{root} mixes shard counts {counts}: keep the shards of one run only")
    count = counts[0]
    missing = sorted(set(range(count)) - {index for index, _, _ in found})
    if missing:
        shown = ", ".join(f"{i}/{count}" for i in missing)
        raise RunDirError(f"{len(missing)} of {count} shards have not run yet: {shown}; run them, then merge")
    shards = [Shard(index, path, read_manifest(path), _positions(path)) for index, _, path in found]
    _check_together(shards)
    return shards


def _positions(path: Path) -> list[int]:
    try:
        positions = json.loads((path / SHARD_POSITIONS).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{path}: no readable {SHARD_POSITIONS} ({exc}); re-run this shard") from None
    if not isinstance(positions, list) or not all(isinstance(p, int) for p in positions):
        raise RunDirError(f"{path / SHARD_POSITIONS}: expected a list of sample positions")
    return positions


def _check_together(shards: list[Shard]) -> None:
    """Same dataset and system under test everywhere; positions cover the selection exactly once."""
    first = shards[0].manifest
    fingerprint = first.get("dataset", {}).get("fingerprint")
    for shard in shards[1:]:
        if shard.manifest.get("dataset", {}).get("fingerprint") != fingerprint:
            raise RunDirError(f"{shard.path} ran on another dataset than {shards[0].path}")
        before, now = first.get("config", {}), shard.manifest.get("config", {})
        changed = [k for k in AGENT_FIELDS if before.get(k) != now.get(k)]
        if changed:
            raise RunDirError(
                f"{shard.path} ran another system than {shards[0].path} ({', '.join(changed)} differ)"
            )
    n_selected = {s.manifest.get("dataset", {}).get("shard", {}).get("n_selected") for s in shards}
    positions = sorted(p for s in shards for p in s.positions)
    if len(n_selected) != 1 or positions != list(range(next(iter(n_selected)) or 0)):
        raise RunDirError(
            "the shards do not cover the selected samples exactly once (different --limit or dataset "
            "edits between shards?); re-run them with the same settings"
        )


def merge_shards(run_dir: Path) -> MergeResult:
    """Write ``run_dir`` as one run from its complete set of shards (repeatable)."""
    manifest_path = run_dir / MANIFEST
    if manifest_path.exists() and "merged" not in json.loads(manifest_path.read_text(encoding="utf-8")):
        raise RunDirError(f"{run_dir} holds a run of its own; merge writes only into a run of shards")
    shards = find_shards(run_dir)
    samples = _merge_samples(shards)
    write_atomic(run_dir / SAMPLES, "".join(samples))
    done: dict[int, set[str]] = {s.index: set() for s in shards}

    def log(shard: Shard) -> Iterator[bytes]:
        for line, sample_id in TrajectoryStore(shard.path).lines_with_ids():
            done[shard.index].add(sample_id)
            yield line

    trajectories = _concatenate(run_dir / TRAJECTORIES, (log(s) for s in shards))
    for name in (JUDGMENTS, FAILED_ATTEMPTS):
        present = [s.path / name for s in shards if (s.path / name).is_file()]
        if present:
            _concatenate(run_dir / name, (_file_lines(p) for p in present))
    images = sum(_link_tree(s.path / "images", run_dir / "images") for s in shards)
    unfinished = {
        s.index: len(s.positions) - len(done[s.index])
        for s in shards
        if len(done[s.index]) < len(s.positions)
    }
    manifest = _merged_manifest(run_dir, shards)
    write_atomic(manifest_path, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return MergeResult(len(shards), len(samples), trajectories, images, unfinished)


def _merge_samples(shards: list[Shard]) -> list[str]:
    """Sample lines of every shard, back in the dataset's order."""
    placed: list[tuple[int, str]] = []
    for shard in shards:
        text = (shard.path / SAMPLES).read_text(encoding="utf-8")
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) != len(shard.positions):
            raise RunDirError(f"{shard.path}: {SAMPLES} and {SHARD_POSITIONS} disagree; re-run this shard")
        placed += zip(shard.positions, lines, strict=True)
    return [line + "\n" for _, line in sorted(placed)]


def _file_lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        yield from handle


def _concatenate(target: Path, sources: Iterable[Iterable[bytes]]) -> int:
    """Write the lines of several sources to ``target`` atomically; returns how many."""
    tmp = target.with_name(target.name + ".tmp")
    n = 0
    with tmp.open("wb") as out:
        for lines in sources:
            for line in lines:
                out.write(line)
                n += 1
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, target)
    fsync_dir(target.parent)
    return n


def _link_tree(source: Path, target: Path) -> int:
    """Hard-link (else copy) the tool images so the records' relative paths resolve in the merged run."""
    if not source.is_dir():
        return 0
    n = 0
    for path in source.rglob("*"):
        if not path.is_file():
            continue
        dest = target / path.relative_to(source)
        if dest.exists():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, dest)
        except OSError:
            shutil.copy2(path, dest)
        n += 1
    return n


def _merged_manifest(run_dir: Path, shards: list[Shard]) -> dict[str, Any]:
    first = shards[0].manifest
    dataset = {k: v for k, v in first.get("dataset", {}).items() if k != "shard"}
    dataset["n_selected"] = first["dataset"]["shard"]["n_selected"]
    config = {**first.get("config", {}), "shard": None}
    return {
        **first,
        "created_at": min(s.manifest.get("created_at", "") for s in shards),
        "dataset": dataset,
        "config": config,
        "merged": {
            "shards": len(shards),
            "merged_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "from": [str(s.path.relative_to(run_dir)) for s in shards],
        },
    }
