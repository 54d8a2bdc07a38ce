"""What keeps `geosleuth eval` flat in the number of samples: samples spooled to disk, duplicate ids
found from digests, image files read once each, ``run.json``'s per-sample tables streamed into the
file. Each must give what the in-memory version gave (bench/report_memory_bench.py measures memory)."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.core.records import Sample
from geosleuth.eval.datasets import frozen
from geosleuth.eval.datasets.loading import fingerprint_samples, load_dataset
from geosleuth.eval.datasets.spool import SampleSpool, in_id_order
from geosleuth.eval.run.config import StreamedDict, manifest_chunks
from geosleuth.eval.run.runner import pending_positions
from geosleuth.eval.run.store import DIGEST, text_digest

IDS = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


def _samples(ids: list[str]) -> list[Sample]:
    return [
        Sample(id=i, lat=float(n % 90), lon=-float(n), labels={"city": f"c{n}"}, metadata={"n": n, "k": [i]})
        for n, i in enumerate(ids)
    ]


@settings(max_examples=60, deadline=None)
@given(st.lists(IDS, max_size=20, unique=True))
def test_a_spool_reads_back_the_samples_it_was_given(ids: list[str]) -> None:
    samples = _samples(ids)
    spool = SampleSpool(samples)
    assert len(spool) == len(samples)
    assert list(spool) == samples
    assert spool == samples
    assert list(spool.ids()) == ids  # read from each line's head: quotes, escapes, any script
    assert list(in_id_order(spool)) == sorted(samples, key=lambda s: s.id)
    assert list(spool[1:-1]) == samples[1:-1]
    odd = spool.select(range(1, len(samples), 2))
    assert list(odd) == samples[1::2]
    assert list(spool.where(lambda s: s.metadata["n"] % 3 == 0)) == samples[::3]


def test_views_of_a_spool_share_its_file_and_see_later_appends() -> None:
    spool = SampleSpool(_samples(["a", "b"]))
    head = spool[:1]
    spool.append(Sample(id="c"))
    assert [s.id for s in head] == ["a"]
    assert [s.id for s in spool.select([2, 0])] == ["c", "a"]
    assert fingerprint_samples(spool) == fingerprint_samples(list(spool))


def test_duplicate_ids_found_after_loading_name_each_later_row_in_row_order(tmp_path: Path) -> None:
    table = tmp_path / "data.csv"
    table.write_text(
        "id,lat,lon\n"
        "a,1,1\n"  # row 1: kept
        "b,2,2\n"  # row 2: kept
        "a,3,3\n"  # row 3: duplicate of row 1
        "c,95,3\n"  # row 4: latitude out of range
        "c,4,4\n"  # row 5: first valid c, but row 4 had the id first: a duplicate
        "b,99,9\n"  # row 6: out of range and a duplicate
    )
    ds = load_dataset(table, check_images=False)
    assert [s.id for s in ds.samples] == ["a", "b"]
    assert [str(p) for p in ds.problems] == [
        "row 3 (id a): duplicate id",
        "row 4 (id c): latitude 95.0 outside [-90, 90]",
        "row 5 (id c): duplicate id",
        "row 6 (id b): latitude 99.0 outside [-90, 90]",
        "row 6 (id b): duplicate id",
    ]


def test_each_image_file_is_read_once_however_many_samples_show_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = tmp_path / "one.jpg", tmp_path / "two.jpg"
    one.write_bytes(b"first")
    two.write_bytes(b"second")
    read: list[str] = []
    real = frozen.file_sha256
    monkeypatch.setattr(frozen, "file_sha256", lambda path: read.append(Path(path).name) or real(path))
    samples = [Sample(id=f"q{i}", image=str(one if i % 4 else two)) for i in range(12)]
    samples.append(Sample(id="gone", image=str(tmp_path / "absent.jpg")))
    hashes = frozen.image_sha256(SampleSpool(samples))
    assert sorted(read) == ["one.jpg", "two.jpg"]
    assert list(hashes) == [f"q{i}" for i in range(12)]  # sample order; no file, no entry
    assert hashes["q1"] == real(one) and hashes["q0"] == real(two)
    one.write_bytes(b"changed, longer")  # another size: the file is read again
    os.utime(one, ns=(1, 1))
    assert frozen.image_sha256(samples[:2])["q1"] == real(one)


VALUES = st.one_of(st.text(max_size=8), st.lists(st.text(max_size=5), max_size=3))


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(IDS, VALUES, max_size=6), st.dictionaries(IDS, VALUES, max_size=3))
def test_a_streamed_manifest_is_the_text_json_dumps_writes(first: dict, second: dict) -> None:
    manifest = {"model": "m", "dataset": {"n": 1, "image_sha256": first, "more": {"x": second}}, "z": []}
    streamed = {
        **manifest,
        "dataset": {
            "n": 1,
            "image_sha256": StreamedDict(lambda: iter(first.items())),
            "more": {"x": StreamedDict(lambda: iter(second.items()))},
        },
    }
    text = b"".join(manifest_chunks(streamed)).decode()
    assert text == json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"


def test_pending_positions_are_the_samples_without_a_finished_record() -> None:
    spool = SampleSpool(Sample(id=f"s{i}") for i in range(10))
    finished = np.unique(np.frombuffer(b"".join(map(text_digest, ["s3", "s0", "s9", "other"])), dtype=DIGEST))
    assert pending_positions(spool, finished).tolist() == [1, 2, 4, 5, 6, 7, 8]


def test_a_spool_pickles_as_its_samples() -> None:
    spool = SampleSpool(_samples(["a", "b", "c"]))[1:]
    assert pickle.loads(pickle.dumps(spool)) == _samples(["a", "b", "c"])[1:]
