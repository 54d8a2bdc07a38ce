"""The case file through the real app: jobs survive a restart, cases group jobs with notes and
tags, re-runs read the stored upload, deleting a case deletes its files, one server per workdir,
and every export carries the provenance without a server path."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PIL import Image
from starlette.testclient import TestClient
from webapp_helpers import events_of, make_settings

from geosleuth.core.records import Trajectory
from geosleuth.webapp import create_app
from geosleuth.webapp.casestore import SCHEMA_VERSION, CaseStore, WorkdirInUse
from geosleuth.webapp.exports import circle_ring

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "luzern_sign.png"


def _jpeg_with_gps() -> bytes:
    exif = Image.Exif()
    exif[0x010F] = "TestCam"
    exif[0x8825] = {1: "N", 2: (47.0, 3.0, 0.0), 3: "E", 4: (8.0, 18.0, 0.0)}
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (90, 120, 150)).save(buffer, format="JPEG", exif=exif)
    return buffer.getvalue()


def _client(tmp_path: Path) -> TestClient:
    return TestClient(create_app(make_settings(tmp_path)), base_url="http://127.0.0.1")


def test_jobs_and_cases_survive_a_restart(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        job = client.post(
            "/api/locate", files={"image": ("Hertenstein sign.png", EXAMPLE.read_bytes())}
        ).json()
        before = events_of(client, job["id"])
        client.patch(f"/api/cases/{job['case_id']}", json={"notes": "seen on a forum", "tags": ["lucerne"]})
    assert (tmp_path / "jobs" / "cases.sqlite").is_file()
    with _client(tmp_path) as client:
        listed = client.get("/api/jobs").json()
        assert [j["id"] for j in listed] == [job["id"]] and listed[0]["status"] == "done"
        again = client.get(f"/api/jobs/{job['id']}").json()
        assert again["trajectory"]["prediction"]["city"] == "Luzern"
        assert events_of(client, job["id"]) == before  # the bookmark replays the same record
        case = client.get(f"/api/cases/{job['case_id']}").json()
        assert case["notes"] == "seen on a forum" and case["tags"] == ["lucerne"]
        assert [j["image_name"] for j in case["jobs"]] == ["Hertenstein sign.png"]
    assert CaseStore(tmp_path / "jobs").version == SCHEMA_VERSION == 1


def test_a_second_server_on_the_same_workdir_is_refused(tmp_path: Path) -> None:
    with _client(tmp_path), pytest.raises(WorkdirInUse, match="another geosleuth server"), _client(tmp_path):
        pass
    with _client(tmp_path) as client:  # free again once the first stopped
        assert client.get("/api/jobs").json() == []


def test_job_folders_from_before_the_store_are_imported(tmp_path: Path) -> None:
    old = tmp_path / "jobs" / "0123456789ab"
    old.mkdir(parents=True)
    (old / "input.png").write_bytes(EXAMPLE.read_bytes())
    done = tmp_path / "jobs" / "ba9876543210"
    done.mkdir()
    (done / "input.png").write_bytes(EXAMPLE.read_bytes())
    record = Trajectory(sample_id="ba9876543210", model="offline-clues", prompt_style="offline", status="ok")
    (done / "trajectories.jsonl").write_text(record.model_dump_json() + "\n")
    broken = tmp_path / "jobs" / "ffffffffffff"
    broken.mkdir()
    (broken / "input.png").write_bytes(EXAMPLE.read_bytes())
    (broken / "trajectories.jsonl").write_text("{not json\n")
    with _client(tmp_path) as client:
        listed = client.get("/api/jobs").json()
        assert sorted(j["id"] for j in listed) == ["0123456789ab", "ba9876543210", "ffffffffffff"]
        assert next(j for j in listed if j["id"] == "ffffffffffff")["status"] == "failed"
        finished = events_of(client, "ba9876543210")
        assert finished[-1]["type"] == "result" and finished[-1]["trajectory"]["status"] == "ok"
        assert finished[-1]["mode"] == "offline"
        listed = [j for j in listed if j["id"] == "0123456789ab"]
        assert listed[0]["sha256"] == hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
        assert listed[0]["status"] == "failed" and "before the case file" in listed[0]["error"]
        assert events_of(client, "0123456789ab")[-1]["type"] == "error"  # its page ends, as any job's


def test_case_with_several_files_a_rerun_and_delete(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        case = client.post("/api/cases", json={"name": "Case 7", "tags": ["swiss", "swiss", "sign"]}).json()
        assert case["tags"] == ["swiss", "sign"]
        files = [
            ("image", ("folder/a.jpg", _jpeg_with_gps(), "image/jpeg")),
            ("image", ("folder/notes.txt", b"not an image", "text/plain")),
            ("image", ("folder/sign.png", EXAMPLE.read_bytes(), "image/png")),
        ]
        made = client.post("/api/locate", files=files, data={"case": case["id"]})
        assert made.status_code == 202
        body = made.json()
        assert [j["image_name"] for j in body["jobs"]] == ["a.jpg", "sign.png"]
        assert [f["name"] for f in body["failed"]] == ["folder/notes.txt"]  # the batch went on
        first = body["jobs"][0]
        assert first["sha256"] == hashlib.sha256(_jpeg_with_gps()).hexdigest()
        for j in body["jobs"]:
            events_of(client, j["id"])
        sign = body["jobs"][1]
        rerun = client.post(f"/api/jobs/{sign['id']}/rerun", json={"use_model": False, "ocr": False})
        assert rerun.status_code == 202, rerun.text
        second = rerun.json()
        assert second["source_job"] == sign["id"] and second["sha256"] == sign["sha256"]
        assert second["settings"]["offline_use_ocr"] is False and second["case_id"] == case["id"]
        events_of(client, second["id"])
        view = client.get(f"/api/cases/{case['id']}").json()
        assert len(view["jobs"]) == 3
        answers = {j["id"]: j["answer"] for j in view["jobs"]}
        assert answers[sign["id"]]["city"] == "Luzern"  # with OCR the sign names its city
        assert answers[second["id"]] is None  # without OCR a drawn sign has no evidence
        assert client.post("/api/jobs/nope/rerun", json={}).status_code == 404
        bad = client.post(f"/api/jobs/{sign['id']}/rerun", json={"use_model": True})
        assert bad.status_code == 400 and "no model" in bad.json()["error"]
        assert client.patch(f"/api/cases/{case['id']}", json={"tags": "x"}).status_code == 400

        folders = [tmp_path / "jobs" / j["id"] for j in view["jobs"]]
        assert all(f.is_dir() for f in folders)
        assert client.delete(f"/api/cases/{case['id']}").json() == {"deleted": case["id"], "jobs": 3}
        assert not any(f.exists() for f in folders)
        assert client.get(f"/api/cases/{case['id']}").status_code == 404
        assert client.get(f"/api/jobs/{sign['id']}").status_code == 404
    with _client(tmp_path) as client:
        assert client.get("/api/jobs").json() == []


def test_every_export_carries_the_provenance_and_no_server_path(tmp_path: Path) -> None:
    data = EXAMPLE.read_bytes()
    workdir = str((tmp_path / "jobs").resolve())
    with _client(tmp_path) as client:
        job = client.post("/api/locate", files={"image": ("Hertensteinstrasse 12.png", data)}).json()
        events_of(client, job["id"])
        texts = {}
        for fmt in ("json", "geojson", "kml", "csv", "html"):
            response = client.get(f"/api/jobs/{job['id']}/answer.{fmt}")
            assert response.status_code == 200, fmt
            assert (
                f'filename="Hertensteinstrasse_12-{job["id"]}.{fmt}"'
                in response.headers["content-disposition"]
            )
            texts[fmt] = response.text
        page = client.get(f"/api/jobs/{job['id']}").text + client.get("/api/jobs").text
    digest = hashlib.sha256(data).hexdigest()
    for fmt, text in texts.items():
        assert digest in text, fmt
        assert workdir not in text and str(tmp_path) not in text, fmt
    assert workdir not in page and str(tmp_path) not in page

    record = json.loads(texts["json"])
    prov = record["provenance"]
    assert prov["image"]["original_name"] == "Hertensteinstrasse 12.png"
    assert prov["image"]["size_bytes"] == len(data) and prov["image"]["exif"] == {}
    assert prov["settings"]["mode"] == "offline" and prov["geosleuth_version"]
    names = [s["step"] for s in prov["steps"]]
    assert names[:2] == ["exif_gps", "ocr"] and all(s["finished_at_utc"].endswith("Z") for s in prov["steps"])
    assert prov["created_at_utc"] <= prov["started_at_utc"] <= prov["finished_at_utc"]
    assert "Hertensteinstrasse 12.png" in json.dumps(record["messages"])  # the image by its own name

    geo = json.loads(texts["geojson"])
    circle = next(f for f in geo["features"] if f["properties"]["role"] == "uncertainty")
    ring = circle["geometry"]["coordinates"][0]
    assert ring[0] == ring[-1] and len(ring) == 65
    answer = next(f for f in geo["features"] if f["properties"]["role"] == "answer")
    assert circle["properties"]["radius_km"] == answer["properties"]["radius_km"]
    # shoelace sum > 0: counter-clockwise, RFC 7946's exterior ring
    area2 = sum(x1 * y2 - x2 * y1 for (x1, y1), (x2, y2) in zip(ring, ring[1:], strict=False))
    assert area2 > 0

    ns = {"k": "http://www.opengis.net/kml/2.2"}
    kml = ET.fromstring(texts["kml"].encode())
    data_fields = {d.get("name"): d.find("k:value", ns).text for d in kml.iterfind(".//k:Data", ns)}
    assert data_fields["image_sha256"] == digest and data_fields["image_name"] == "Hertensteinstrasse 12.png"
    coords = kml.find(".//k:Polygon//k:coordinates", ns).text.split()
    assert len(coords) == 65 and coords[0] == coords[-1]
    point = kml.find(".//k:Point/k:coordinates", ns).text.split(",")
    lon, lat = answer["geometry"]["coordinates"]
    assert math.isclose(float(point[0]), lon) and math.isclose(float(point[1]), lat)

    rows = list(csv.DictReader(io.StringIO(texts["csv"])))
    assert rows[0]["role"] == "answer" and rows[0]["image_sha256"] == digest
    assert math.isclose(float(rows[0]["lat"]), lat)

    assert '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'' in texts["html"]
    assert "<script" not in texts["html"] and "Hertensteinstrasse 12.png" in texts["html"]


def test_exif_of_the_upload_is_in_the_record(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        job = client.post("/api/locate", files={"image": ("cam.jpg", _jpeg_with_gps())}).json()
        events_of(client, job["id"])
        prov = client.get(f"/api/jobs/{job['id']}/answer.json").json()["provenance"]
    assert prov["image"]["exif"]["Image"]["Make"] == "TestCam"
    assert prov["image"]["exif"]["GPS"]["GPSLatitude"] == [47.0, 3.0, 0.0]


def test_circle_ring_by_hand() -> None:
    # 111.195 km on a sphere of radius 6371.0088 km is 111.195 / 6371.0088 rad = 0.0174533 rad = 1.0°:
    # from (0, 0) the ring's first vertex (bearing 360°, north) is at (lat 1, lon 0), the quarter
    # vertex (bearing 270°, west) at (lat 0, lon -1)
    ring = circle_ring(0.0, 0.0, 111.195, vertices=4)
    assert math.isclose(ring[0][1], 1.0, abs_tol=1e-4) and math.isclose(ring[0][0], 0.0, abs_tol=1e-6)
    assert math.isclose(ring[1][0], -1.0, abs_tol=1e-4) and math.isclose(ring[1][1], 0.0, abs_tol=1e-4)
    assert ring[0] == ring[-1] and len(ring) == 5


def test_clues_that_disagree_are_shown_and_reported(tmp_path: Path) -> None:
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("make_sign", EXAMPLE.parent / "make_sign.py")
    assert spec is not None and spec.loader is not None
    maker = importlib.util.module_from_spec(spec)
    sys.modules["make_sign"] = maker
    spec.loader.exec_module(maker)
    sign = maker.render_sign(
        ("CAFÉ ALPENBLICK", "Hertensteinstrasse 12", "6004 Luzern", "Tel. 022 310 45 67"), tmp_path / "s.png"
    )
    with _client(tmp_path) as client:
        job = client.post("/api/locate", files={"image": ("alpenblick.png", sign.read_bytes())}).json()
        events_of(client, job["id"])
        view = client.get(f"/api/jobs/{job['id']}").json()["trajectory"]
        report = client.get(f"/api/jobs/{job['id']}/answer.html").text
    assert view["prediction"]["city"] == "Luzern"  # the named city, not the Austrian area code
    (conflict,) = view["conflicts"]
    assert "Purkersdorf" in conflict and "the name wins" in conflict
    labels = [c["label"] for c in view["candidates"]]
    assert labels[0].startswith("Luzern") and any(label.startswith("Purkersdorf") for label in labels)
    assert all(c["evidence"] and isinstance(c["score"], float) for c in view["candidates"])
    assert "Conflicting clues" in report and "Purkersdorf" in report
