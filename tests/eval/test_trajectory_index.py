"""The report's trajectory index: a sample's latest record, found by 64-bit id hashes and read
back from ``trajectories.jsonl``. Retries supersede earlier records; ids whose hashes collide
(forced here: every id on one hash) must still each find their own record, never none."""

from __future__ import annotations

from pathlib import Path

import pytest

from geosleuth.core.records import Prediction, Trajectory
from geosleuth.eval.report import rundata
from geosleuth.eval.report.rundata import TrajectoryIndex
from geosleuth.eval.run.store import TrajectoryStore


def _record(sample_id: str, lat: float) -> Trajectory:
    return Trajectory(sample_id=sample_id, model="m", prediction=Prediction(lat=lat, lon=0.0, status="ok"))


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """a, b and c answered; b answered again later (its retry is its latest record)."""
    store = TrajectoryStore(tmp_path)
    store.open()
    store.append([_record("a", 1.0), _record("b", 2.0), _record("c", 3.0), _record("b", 4.0)])
    store.close()
    return tmp_path


@pytest.mark.parametrize("collide", [False, True])
def test_latest_records_and_lookups(run_dir: Path, collide: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if collide:
        monkeypatch.setattr(rundata, "hash", lambda key: 7, raising=False)
    index = TrajectoryIndex(run_dir)
    assert len(index) == 3
    latest = [(t.sample_id, t.prediction.lat) for t in index.latest() if t.prediction]
    assert latest == [("a", 1.0), ("c", 3.0), ("b", 4.0)]  # file order, b's first record superseded
    found = {sid: index.get(sid) for sid in ("a", "b", "c")}
    lats = {sid: t.prediction.lat for sid, t in found.items() if t and t.prediction}
    assert lats == {"a": 1.0, "b": 4.0, "c": 3.0}
    assert index.get("absent") is None  # on a colliding hash too: the id read back is not its own


def test_an_empty_run_has_no_records(tmp_path: Path) -> None:
    TrajectoryStore(tmp_path).path.touch()
    index = TrajectoryIndex(tmp_path)
    assert len(index) == 0 and list(index.latest()) == [] and index.get("a") is None


def test_a_record_without_an_id_is_named(tmp_path: Path) -> None:
    """Only the id of each line is decoded while indexing; a line without one is an error that
    names the log, not a KeyError."""
    TrajectoryStore(tmp_path).path.write_text('{"model": "m", "turns": []}\n')
    with pytest.raises(rundata.RunDirError, match="trajectories.jsonl: a record has no sample id"):
        TrajectoryIndex(tmp_path)
