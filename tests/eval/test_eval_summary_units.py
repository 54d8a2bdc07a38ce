"""Summary pieces that depend on other areas: protocol coordinate levels via the scoring engine."""

from __future__ import annotations

import numpy as np
import pytest

from geosleuth.core.records import Prediction, Sample, Trajectory
from geosleuth.eval.report.scores import protocol_for, score_run
from geosleuth.eval.report.summary import coordinate_level_metrics
from geosleuth.scoring import vectorised
from geosleuth.scoring.protocols import get_protocol


def fake_reverse(lats, lons):  # type: ignore[no-untyped-def]
    """East of Greenwich is 'FR', west is 'US'; the city is the rounded latitude."""
    lons, lats = np.asarray(lons), np.asarray(lats)
    return {
        "country_code": np.where(lons > 0, "FR", "US").astype(object),
        "admin1": np.where(lons > 0, "IDF", "NY").astype(object),
        "admin2": np.full(lats.shape, "", dtype=object),
        "city": np.array([f"c{round(x)}" for x in lats], dtype=object),
    }


SAMPLES = [
    Sample(id="a", lat=48.85, lon=2.35, labels={"country": "FR", "admin1": "IDF", "city": "c49"}),
    Sample(id="b", lat=40.7, lon=-74.0, labels={"country": "US", "admin1": "NY", "city": "c41"}),
    Sample(id="c", lat=40.7, lon=-74.0, labels={"country": "US", "admin1": "NY", "city": "c41"}),
]
TRAJ = {
    "a": Trajectory(sample_id="a", model="m", prediction=Prediction(lat=48.9, lon=2.3)),
    "b": Trajectory(sample_id="b", model="m", prediction=Prediction(lat=45.0, lon=-70.0)),
}


def test_coordinate_levels_from_the_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vectorised, "default_reverse", lambda protocol: fake_reverse)
    default = get_protocol("default")
    out = coordinate_level_metrics(score_run(SAMPLES, TRAJ, default), default)
    assert out["acc_country"]["value"] == pytest.approx(2 / 3, abs=1e-6)
    assert out["acc_city"]["value"] == pytest.approx(
        1 / 3, abs=1e-6
    )  # b lands in the wrong city; c is missing
    osv = get_protocol("osv5m")
    out = coordinate_level_metrics(score_run(SAMPLES, TRAJ, osv), osv)
    assert out["acc_country"]["value"] == pytest.approx(2 / 3, abs=1e-6) and "acc_region" in out


def test_coordinate_levels_report_a_missing_geocoder(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(protocol):  # type: ignore[no-untyped-def]
        raise ImportError("no gazetteer")

    monkeypatch.setattr(vectorised, "default_reverse", missing)
    default = get_protocol("default")
    assert (
        "no gazetteer" in coordinate_level_metrics(score_run(SAMPLES, TRAJ, default), default)["unavailable"]
    )


def test_protocol_guess_and_errors() -> None:
    assert protocol_for(None, [Sample(id="x", data_source="osv5m")]).name == "osv5m"
    assert protocol_for(None, [Sample(id="x", data_source="IMAGEO_2")]).name == "twm"
    assert protocol_for("spotagent", []).distance == "cosines"
    with pytest.raises(ValueError, match="unknown protocol"):
        protocol_for("nope", [])


def test_world_map_draws_country_outlines(monkeypatch: pytest.MonkeyPatch) -> None:
    from shapely.geometry import MultiPolygon, box

    import geosleuth.gazetteer
    from geosleuth.eval.report.html import country_outline_paths, world_map_svg

    class FakeGazetteer:
        def country_shapes(self):  # type: ignore[no-untyped-def]
            return {"AA": box(0, 0, 10, 10), "BB": MultiPolygon([box(20, 20, 30, 30), box(-40, -10, -30, 0)])}

    monkeypatch.setattr(geosleuth.gazetteer, "get_gazetteer", lambda: FakeGazetteer(), raising=False)
    country_outline_paths.cache_clear()
    monkeypatch.setattr(
        "geosleuth.eval.report.html.country_outline_paths", lambda: country_outline_paths.__wrapped__()
    )
    paths = country_outline_paths.__wrapped__()
    assert len(paths) == 2 and paths[1].count("M") == 2
    rows = score_run(SAMPLES, TRAJ, get_protocol("default"))
    svg = world_map_svg(rows, {"a"})
    assert svg.count('class="land"') == 2 and 'href="samples/a.html"' in svg and svg.count("<line x1") == 2
