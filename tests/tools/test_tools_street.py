"""Street-level refinement of the offline answer by a configured geocoder (a fake Nominatim on
127.0.0.1): the sign's address moves the answer onto its street and names the source; a geocode
that contradicts the city the sign names is not used, and the conflict is told."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from tools_fakes import FakeServer, Reply, fake_settings

from geosleuth.agent import AgentConfig
from geosleuth.agent.offline import run_offline
from geosleuth.agent.street import STREET_RADIUS_KM, street_query
from geosleuth.core.geo import haversine_km
from geosleuth.core.records import Task
from geosleuth.gazetteer.libpostal import parser_name

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "luzern_sign.png"


def _nominatim(lat: float, lon: float, name: str) -> list[dict[str, object]]:
    return [
        {
            "place_id": 7,
            "osm_type": "node",
            "osm_id": 7,
            "lat": str(lat),
            "lon": str(lon),
            "name": name,
            "display_name": name,
            "category": "building",
            "type": "house",
            "address": {"country_code": "ch", "country": "Schweiz"},
        }
    ]


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.close()


def _locate(server: FakeServer) -> object:
    config = AgentConfig(model=None, tool_settings=fake_settings(server, {"geocode": "nominatim"}))
    return asyncio.run(run_offline(Task(id="luzern", image=str(EXAMPLE)), config))


def test_the_street_address_on_the_sign_is_geocoded_by_the_provider(server: FakeServer) -> None:
    server.route("/search", Reply(json=_nominatim(47.0536, 8.3071, "Hertensteinstrasse 12, 6004 Luzern")))
    traj = _locate(server)
    pred = traj.prediction  # type: ignore[attr-defined]
    assert server.requests[-1].query["q"] == ["Hertensteinstrasse 12, 6004 Luzern, Switzerland"]
    assert float(haversine_km(pred.lat, pred.lon, 47.0536, 8.3071)) < 0.01
    assert pred.radius_km == STREET_RADIUS_KM and pred.street == "Hertensteinstrasse 12"
    assert any("street-level geocode" in e and "nominatim" in e for e in pred.evidence)
    assert traj.metadata["street_geocode"] == {  # type: ignore[attr-defined]
        "address": "Hertensteinstrasse 12, 6004 Luzern, Switzerland",
        "parser": parser_name(),
        "provider": "nominatim",
        "used": True,
    }
    assert traj.turns[0].tool_calls[-1].name == "street_geocode"  # type: ignore[attr-defined]


def test_a_street_geocode_far_from_the_named_city_is_not_used(server: FakeServer) -> None:
    server.route("/search", Reply(json=_nominatim(46.9481, 7.4474, "Hertensteinstrasse, Bern")))  # ~70 km
    traj = _locate(server)
    pred = traj.prediction  # type: ignore[attr-defined]
    assert pred.city == "Luzern" and pred.radius_km > STREET_RADIUS_KM
    assert traj.metadata["street_geocode"]["used"] is False  # type: ignore[attr-defined]
    assert any("not used" in c for c in traj.metadata["conflicts"])  # type: ignore[attr-defined]


def test_without_a_provider_nothing_is_asked(server: FakeServer) -> None:
    config = AgentConfig(model=None, tool_settings=fake_settings(server, {}))
    traj = asyncio.run(run_offline(Task(id="luzern", image=str(EXAMPLE)), config))
    assert server.requests == [] and "street_geocode" not in traj.metadata


def test_street_query_pairs_the_house_number_line_with_the_named_town() -> None:
    text = "Konditorei Frey\nHertensteinstrasse 12\n6004 Luzern\nTel. +41 41 410 23 45"
    assert street_query(text, "Luzern") == "Hertensteinstrasse 12, 6004 Luzern"
    assert street_query("Konditorei Frey\n6004 Luzern", "Luzern") is None  # no street line
    assert street_query("Marktgasse  5\n3011   Bern", "Bern") == "Marktgasse 5, 3011 Bern"
    assert street_query(text, "") is None


def test_without_the_address_extra_the_line_reading_finds_the_same_address(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from geosleuth.gazetteer import libpostal

    monkeypatch.setattr(libpostal, "_parser", lambda: None)
    monkeypatch.setattr(libpostal, "installed", lambda: False)
    server.route("/search", Reply(json=_nominatim(47.0536, 8.3071, "Hertensteinstrasse 12, 6004 Luzern")))
    traj = _locate(server)
    assert server.requests[-1].query["q"] == ["Hertensteinstrasse 12, 6004 Luzern, Switzerland"]
    assert traj.metadata["street_geocode"]["parser"] == "geosleuth's line reading"  # type: ignore[attr-defined]
    assert any("address read by geosleuth's line reading" in e for e in traj.prediction.evidence)  # type: ignore[attr-defined]
