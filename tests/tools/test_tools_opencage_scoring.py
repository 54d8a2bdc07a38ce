"""`--protocol geoagent` geocodes answers through OpenCage when a key is given, as GeoAgent did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tools_fakes import FakeServer, Reply

from geosleuth.scoring import get_protocol, score_file

ZURICH = {
    "results": [
        {"components": {"city": "Zürich", "country_code": "ch"}, "geometry": {"lat": 47.3724, "lng": 8.5423}}
    ],
    "status": {"code": 200, "message": "OK"},
}


def test_geoagent_geocodes_through_opencage_with_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = FakeServer()
    try:
        server.route("/geocode/v1/json", Reply(json=ZURICH))
        settings = tmp_path / "tools.yaml"
        settings.write_text(
            yaml.safe_dump(
                {
                    "services": {"opencage": {"base_url": server.url}},
                    "http": {"allow_private_urls": True, "max_retries": 0},
                    "cache": {"backend": "none"},
                }
            )
        )
        monkeypatch.setenv("GEOSLEUTH_TOOLS_CONFIG", str(settings))
        monkeypatch.setenv("GEOSLEUTH_OPENCAGE_API_KEY", "test-key")
        path = tmp_path / "preds.jsonl"
        row = {"id": "z", "response": "<answer>Switzerland; Zürich; Altstadt</answer>",
               "ground_truth": {"lat": 47.3769, "lon": 8.5417}}  # fmt: skip
        path.write_text(json.dumps(row) + "\n")
        m = score_file(path, get_protocol("geoagent")).score.metrics
    finally:
        server.close()
    assert server.requests and server.requests[0].query["key"] == ["test-key"]
    assert "Altstadt" in server.requests[0].query["q"][0]
    assert m["acc@25km"] == 100.0 and m["median_km"] < 1.0
