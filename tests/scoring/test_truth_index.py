"""The join of predictions to a truth file by id, through the on-disk index (`scoring.truthindex`):
the one id rule, repeated ids, samples without a prediction, a truth file that matches nothing,
and hash collisions (every key forced onto one hash)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import geosleuth.scoring.truthindex as truthindex
from geosleuth.core.ids import sample_key
from geosleuth.scoring import get_protocol, score_file
from geosleuth.scoring.io import Truth
from geosleuth.scoring.rows import InputRow, ScoreInputError
from geosleuth.scoring.truthindex import TruthIndex, truth_index

FIXTURE = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "published_predictions"


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _tables(tmp_path: Path) -> tuple[Path, Path]:
    truth = tmp_path / "truth.csv"
    truth.write_text(
        "IMG_ID,LAT,LON\n"
        "a.jpg,10.0,20.0\n"  # predicted as "a": the extension is dropped
        "b,30.0,40.0\n"  # predicted as "b.JPG"
        "c.png,50.0,60.0\n"
        "a.jpg,-10.0,-20.0\n"  # a repeated id: the first row is kept
        "d,0.0,0.0\n"  # no prediction: one EMPTY row after the predictions
        "e,1.0,1.0\n"  # no prediction
    )
    preds = tmp_path / "pred.csv"
    preds.write_text("id,pred_lat,pred_lon\nc,50.0,60.0\na,10.0,20.0\nb.JPG,30.0,41.0\n")
    return preds, truth


def test_join_by_id_with_and_without_extension(tmp_path: Path) -> None:
    preds, truth = _tables(tmp_path)
    result = score_file(preds, get_protocol("default"), truth_path=truth)
    rows = result.rows
    assert [r["id"] for r in rows] == ["c", "a", "b.JPG", "d", "e"]  # missing ones follow in truth order
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "empty", "empty"]
    assert rows[1]["true_lat"] == 10.0 and rows[1]["true_lon"] == 20.0  # the first "a.jpg" row
    assert rows[0]["distance_km"] == pytest.approx(0.0, abs=1e-6)
    # b: 1 degree of longitude at latitude 30: 111.2 km * cos(30°) ≈ 96.3 km
    assert rows[2]["distance_km"] == pytest.approx(96.3, abs=0.5)
    text = "\n".join(result.score.warnings)
    assert f"{truth}:5: duplicate id 'a.jpg' (first one kept)" in text
    assert f"2 sample(s) of {truth} have no prediction" in text and "(first: 'd', 'e')" in text
    assert f"3 of 3 prediction(s) in {preds} matched an id in {truth}" in text
    # 5 rows, 2 exactly right (c, a), b 96 km off, d and e wrong: acc@1km = 2 / 5 = 40 %
    assert result.score.n == 5
    assert result.score.metrics["acc@1km"] == pytest.approx(40.0)


def test_truth_matching_no_prediction_is_an_error_naming_both(tmp_path: Path) -> None:
    truth = _jsonl(tmp_path / "truth.jsonl", [{"id": "x", "lat": 1.0, "lon": 1.0}])
    preds = _jsonl(tmp_path / "pred.jsonl", [{"id": "y", "pred_lat": 1.0, "pred_lon": 1.0}])
    with pytest.raises(ScoreInputError) as err:
        score_file(preds, get_protocol("default"), truth_path=truth)
    assert str(truth) in str(err.value) and str(preds) in str(err.value)
    assert "matches none of the 1 prediction(s)" in str(err.value)


def test_index_removes_its_spool(tmp_path: Path) -> None:
    preds, truth = _tables(tmp_path)
    index, _ = truth_index(truth)
    folder = index.folder
    assert (folder / "truth.pickle").is_file()
    with index:
        assert index["c"].lat == 50.0 and "zzz" not in index
    assert not folder.exists()


def test_collisions_join_by_the_id_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every key on one hash: lookups still compare the re-read id; repeats are still found."""
    monkeypatch.setattr(truthindex, "hash", lambda key: 7, raising=False)
    preds, truth = _tables(tmp_path)
    index, problems = truth_index(truth)
    with index:
        assert [k for k, _ in index.items()] == ["a", "b", "c", "d", "e"]
        assert (index["a"].lat, index["b"].lat, index["e"].lat) == (10.0, 30.0, 1.0)
        assert "a.jpg" not in index  # keys are sample keys; the engine looks up `sample_key(id)`
    assert problems == [f"{truth}:5: duplicate id 'a.jpg' (first one kept)"]
    monkeypatch.undo()
    plain = score_file(preds, get_protocol("default"), truth_path=truth).rows
    monkeypatch.setattr(truthindex, "hash", lambda key: 7, raising=False)
    collided = score_file(preds, get_protocol("default"), truth_path=truth).rows
    assert collided == plain


def test_dataset_rows_from_another_reader_are_spooled(tmp_path: Path) -> None:
    rows = [
        InputRow(1, {"id": "p.jpg", "lat": 1.0, "lon": 2.0, "country": "France"}),
        InputRow(2, None, "bad row"),
        InputRow(3, {"id": "q", "lat": 3.0, "lon": 4.0}),
    ]
    index, problems = truth_index(tmp_path / "folder", rows=rows)
    with index:
        assert index["p"].labels == {"country": "France"} and index["p"].id == "p.jpg"
        assert index["p"].fields["country"] == "France"
        assert len(index) == 2
    assert problems == ["bad row"]


ids = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c", "d", " e ", "1.5", "ü"]),
        st.sampled_from(["", ".jpg", ".PNG", ".txt"]),
    ).map("".join),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(ids, st.booleans())
def test_index_is_the_first_row_of_each_key_in_file_order(written: list[str], collide: bool) -> None:
    """Against a dict built the way the index was before it moved to disk."""
    expected: dict[str, Truth] = {}
    repeats: list[int] = []
    index = TruthIndex()
    original = truthindex.__dict__.get("hash")
    if collide:
        truthindex.hash = lambda key: 7  # type: ignore[attr-defined]
    try:
        for number, sid in enumerate(written):
            truth = Truth(lat=float(number), lon=0.0, id=sid)
            index.append(sample_key(sid), number + 1, number, truth)
            if sample_key(sid) in expected:
                repeats.append(number)
            else:
                expected[sample_key(sid)] = truth
        dropped = index.freeze()
        assert [r[2] for r in dropped] == repeats
        assert list(index) == list(expected)
        assert len(index) == len(expected)
        for key, truth in expected.items():
            assert index[key] == truth
        assert index.get("never") is None
    finally:
        index.close()
        if collide:
            if original is None:
                del truthindex.hash  # type: ignore[attr-defined]
            else:
                truthindex.hash = original  # type: ignore[attr-defined]


@pytest.mark.skipif(not FIXTURE.exists(), reason="needs ../shared/fixtures")
def test_joined_truth_gives_the_inline_figures_on_published_predictions(tmp_path: Path) -> None:
    """A published file scored with its truth inline, and split into predictions + a truth file
    (truth ids with the image extension, predictions shuffled): every figure is the same."""
    lines = (FIXTURE / "imageo2_test_o3.jsonl").read_text(encoding="utf-8").split("\n")[:300]
    records = [json.loads(line) for line in lines]
    inline = _jsonl(tmp_path / "inline.jsonl", records)
    truth = _jsonl(
        tmp_path / "truth.jsonl", [{"id": f"{r['index']}.jpg", **r["ground_truth"]} for r in records]
    )
    shuffled = records[1::2] + records[::2]
    preds = _jsonl(
        tmp_path / "pred.jsonl", [{"id": r["index"], "solution_str": r["solution_str"]} for r in shuffled]
    )
    protocol = get_protocol("twm")
    a = score_file(inline, protocol)
    b = score_file(preds, protocol, truth_path=truth)
    assert a.score.n == b.score.n == len(records)
    assert a.score.metrics.keys() == b.score.metrics.keys()
    for name, value in a.score.metrics.items():
        assert b.score.metrics[name] == pytest.approx(value, nan_ok=True), name
