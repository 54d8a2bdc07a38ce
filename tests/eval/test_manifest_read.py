"""run.json read for a report: everything but the per-sample image hashes, which stay bytes."""

from __future__ import annotations

import json
import math
from pathlib import Path

from geosleuth.eval.run.config import MANIFEST, read_manifest

MANIFEST_DOC = {
    "geosleuth_version": "0.0.0",
    "model": "m",
    "config": {"protocol": "default", "seed": 3, "breakdowns": ["split"]},
    "dataset": {
        "source": "data.csv",
        "n_selected": 3,
        "pixels_only": True,
        "image_sha256": {"a": "0" * 64, "b": "1" * 64, 'c\u00e9"': "2" * 64},
        "image_metadata": {"b": ["gps"]},
    },
    "providers": [{"name": "openai", "base_url": "http://127.0.0.1:1/v1"}],
}


def write(run_dir: Path, text: str) -> Path:
    run_dir.mkdir()
    (run_dir / MANIFEST).write_text(text, encoding="utf-8")
    return run_dir


def test_the_report_reads_all_but_the_hash_table(tmp_path: Path) -> None:
    run_dir = write(tmp_path / "run", json.dumps(MANIFEST_DOC, indent=2, ensure_ascii=False))
    full = read_manifest(run_dir)
    assert full == MANIFEST_DOC
    light = read_manifest(run_dir, image_hashes=False)
    expected = json.loads(json.dumps(MANIFEST_DOC))
    del expected["dataset"]["image_sha256"]
    assert light == expected  # every other key and value as json.loads gives them
    assert light["dataset"]["image_metadata"] == {"b": ["gps"]}  # carried metadata included


def test_a_manifest_msgspec_refuses_is_read_as_before(tmp_path: Path) -> None:
    """json.dumps writes NaN as a bare literal, which strict JSON refuses: the whole file is read."""
    doc = {**MANIFEST_DOC, "config": {"temperature": math.nan}}
    run_dir = write(tmp_path / "run", json.dumps(doc))
    light = read_manifest(run_dir, image_hashes=False)
    assert math.isnan(light["config"]["temperature"]) and "image_sha256" in light["dataset"]
    other = write(tmp_path / "list", "[1, 2]")
    assert read_manifest(other, image_hashes=False) == [1, 2]
