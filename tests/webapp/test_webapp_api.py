"""The web app's JSON API: offline locate end to end, bad uploads, run browsing, security."""

from __future__ import annotations

import base64
import hashlib
import io
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from starlette.testclient import TestClient
from webapp_helpers import events_of, make_run, make_settings

from geosleuth.webapp import create_app


@pytest.fixture(scope="module")
def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("webapp_api"))


@pytest.fixture
def client(tmp_path: Path, run_root: Path) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings(tmp_path, runs=[run_root])), base_url="http://127.0.0.1") as c:
        yield c


def png_bytes(size: tuple[int, int] = (40, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


def bomb_png() -> bytes:
    """A small PNG whose header claims 30000 × 30000 pixels (CRC fixed so that Pillow reads it)."""
    data = bytearray(png_bytes())
    ihdr = bytearray(data[16:29])
    ihdr[0:8] = struct.pack(">II", 30000, 30000)
    data[16:29] = ihdr
    data[29:33] = struct.pack(">I", zlib.crc32(b"IHDR" + bytes(ihdr)))
    return bytes(data)


def test_locate_example_offline_end_to_end(client: TestClient) -> None:
    response = client.post("/api/locate", data={"example": "1"})
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["mode"] == "offline" and job["image_name"] == "luzern_sign.png"
    events = events_of(client, job["id"])
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["status", "status"] and kinds[-1] == "result"
    assert [e["seq"] for e in events] == list(range(len(events)))
    # each finished pipeline step streams as it ends: the one turn grows by a step at a time
    steps = [[c["name"] for c in e["turn"]["tool_calls"]] for e in events if e["type"] == "turn"]
    assert set(kinds[2:-1]) == {"turn"} and [len(s) for s in steps] == list(range(1, len(steps) + 1))
    assert steps[0] == ["exif_gps"] and steps[1][1] == "ocr" and steps[-1][-1] == "candidates"
    elapsed = [e["elapsed_s"] for e in events]
    assert elapsed == sorted(elapsed) and elapsed[-1] > 0
    done = client.get(f"/api/jobs/{job['id']}").json()
    assert done["status"] == "done" and done["events"] == events
    trajectory = done["trajectory"]
    prediction = trajectory["prediction"]
    assert (
        trajectory["status"] == "ok" and prediction["country_code"] == "CH" and prediction["city"] == "Luzern"
    )
    assert prediction["lat"] == pytest.approx(47.05, abs=0.1) and prediction["lon"] == pytest.approx(
        8.3, abs=0.1
    )
    assert prediction["evidence"] and 0 < prediction["confidence"] <= 1
    names = [c["name"] for c in trajectory["turns"][0]["tool_calls"]]
    assert "ocr" in names and "candidates" in names
    the_map = client.get(done["map_url"])
    assert the_map.status_code == 200 and the_map.headers["content-type"] == "image/png"
    assert Image.open(io.BytesIO(the_map.content)).size == (640, 640)
    preview = client.get(done["image_url"])
    assert (
        preview.headers["content-type"] == "image/jpeg"
        and Image.open(io.BytesIO(preview.content)).format == "JPEG"
    )
    listed = client.get("/api/jobs").json()
    assert [j["id"] for j in listed] == [job["id"]] and "trajectory" not in listed[0]
    # a late reader resumes after the last event it saw and gets only what followed
    with client.stream("GET", f"/api/jobs/{job['id']}/events", headers={"Last-Event-ID": "1"}) as stream:
        assert "event: result" in "".join(stream.iter_text())


@pytest.mark.parametrize(
    ("name", "payload", "message"),
    [
        ("notes.png", b"hello, I am text", "not a supported image format"),
        ("cut.png", png_bytes((400, 300))[:200], "damaged or truncated"),
        ("bomb.png", bomb_png(), "decompression bomb"),
        ("empty.jpg", b"", "empty"),
    ],
)
def test_bad_uploads_are_clear_errors(client: TestClient, name: str, payload: bytes, message: str) -> None:
    response = client.post("/api/locate", files={"image": (name, payload, "image/png")})
    assert response.status_code == 400
    error = response.json()["error"]
    assert message in error and "Traceback" not in error and "upload.bin" not in error
    assert client.get("/api/jobs").json() == []  # nothing was queued


def test_request_errors(tmp_path: Path, client: TestClient) -> None:
    assert "send an image" in client.post("/api/locate", data={"prompt": "geovista"}).json()["error"]
    offline_samples = client.post("/api/locate", data={"example": "1", "samples": "3"})
    assert offline_samples.status_code == 400 and "need a model" in offline_samples.json()["error"]
    no_model = client.post("/api/locate", data={"example": "1", "use_model": "1"})
    assert no_model.status_code == 400 and "--model" in no_model.json()["error"]
    assert client.post("/api/locate", data={"example": "1", "samples": "many"}).status_code == 400
    superscript = client.post(
        "/api/locate", data={"example": "1", "samples": "\u00b2"}
    )  # a digit int() rejects
    assert superscript.status_code == 400 and "whole number" in superscript.json()["error"]
    odd_length = client.post("/api/locate", content=b"x", headers={"content-length": b"\xb2"})  # latin-1 "²"
    assert odd_length.status_code == 411
    assert client.get("/api/jobs/nope").status_code == 404
    small = make_settings(tmp_path / "small", max_upload_bytes=2000)
    with TestClient(create_app(small), base_url="http://127.0.0.1") as limited:
        response = limited.post(
            "/api/locate", files={"image": ("big.png", png_bytes((300, 300)) + b"\0" * 70_000)}
        )
        assert response.status_code == 413 and "limit" in response.json()["error"]


def test_run_listing_detail_and_trajectory(client: TestClient) -> None:
    (run,) = client.get("/api/runs").json()
    assert run["name"] == "demo" and run["model"] == "webapp_stub_agent:agent" and run["reported"]
    assert (run["n_samples"], run["n_finished"], run["n_failed"]) == (3, 3, 1)
    assert run["status_counts"] == {"ok": 2, "timeout": 1}
    assert run["headline"]["acc@25km"] == pytest.approx(
        100 / 3, abs=1e-3
    )  # percent: Paris right, Berlin 400 km off, Tokyo failed
    detail = client.get("/api/runs/demo").json()
    rows = {r["sample_id"]: r for r in detail["samples"]}
    assert set(rows) == {"paris", "berlin", "tokyo"} and rows["tokyo"]["status"] == "timeout"
    assert rows["paris"]["distance_km"] < 5 and rows["paris"]["tool_calls"] == 1
    sample = client.get("/api/runs/demo/sample", params={"id": "paris"}).json()
    assert sample["sample"]["labels"]["country"] == "France"
    (call,) = sample["trajectory"]["turns"][0]["tool_calls"]
    assert call["name"] == "image_zoom_in_tool" and call["result_text"].startswith("<script>")  # data, as is
    image = client.get(sample["image_url"])
    assert image.status_code == 200 and image.headers["content-type"] == "image/jpeg"
    assert client.get("/api/runs/missing").status_code == 404
    assert client.get("/api/runs/demo/sample", params={"id": "nope"}).status_code == 404
    assert client.get("/api/runs/demo/files/../../../../etc/passwd").status_code == 404
    assert client.get("/api/runs/demo/files/run.json").status_code == 404  # only images are served
    # the run's own offline HTML report (eval/html.py) is served as is, under its own strict CSP
    report = client.get(run["html_report"])
    assert report.status_code == 200 and 'id="worldmap"' in report.text
    (policy,) = report.headers.get_list("content-security-policy")
    assert "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
    for tag, directive in (("script", "script-src"), ("style", "style-src")):  # each inline block by hash
        (inline,) = re.findall(rf"<{tag}>(.*?)</{tag}>", report.text, re.S)
        digest = base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode()
        assert f"{directive} 'sha256-{digest}'" in policy
    page = report.text.split('href="samples/', 1)[1].split('"', 1)[0]
    assert "Zooming on the sign" in client.get(f"/runs/demo/report/samples/{page}").text
    assert client.get("/runs/demo/report/../summary.json").status_code == 404


def test_security_headers_hosts_origins_and_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_root: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-key")
    settings = make_settings(
        tmp_path, model="some-vlm", base_url="http://user:hunter2@127.0.0.1:9/v1?key=abc"
    )
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        page = client.get("/")
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-content-type-options"] == "nosniff"
        config = client.get("/api/config")
        assert config.json()["endpoint"] == "http://127.0.0.1:9/v1"
        for secret in ("sk-very-secret-key", "hunter2", "abc", "OPENAI_API_KEY"):
            assert secret not in config.text and secret not in page.text
        assert client.get("/", headers={"host": "attacker.example"}).status_code == 400  # DNS rebinding
        cross = client.post(
            "/api/locate", data={"example": "1"}, headers={"origin": "http://attacker.example"}
        )
        assert cross.status_code == 403
        assert client.get("/static/app.js").headers["content-type"].startswith("text/javascript")
        assert client.get("/static/../app.py").status_code == 404
        assert client.get("/static/vendor/leaflet/LICENSE").status_code == 404  # only what the page loads
        img_src = next(d for d in page.headers["content-security-policy"].split(";") if "img-src" in d)
        assert "blob:" in img_src.split()  # the preview of a chosen file is a blob: URL


def test_offline_map_tiles(client: TestClient) -> None:
    """The interactive map's tiles: 256 px PNGs of the offline map, 404 outside the pyramid."""
    tile = client.get("/api/tiles/6/33/22.png")  # Switzerland and its neighbours
    assert tile.status_code == 200 and tile.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(tile.content)).convert("RGB")
    assert image.size == (256, 256)
    assert len(image.getcolors(maxcolors=4096) or []) > 20  # land, borders, labels: not a blank square
    sea = Image.open(io.BytesIO(client.get("/api/tiles/3/0/3.png").content)).convert("RGB")
    assert sea.getpixel((128, 40)) == (170, 211, 223)  # the Pacific west of Mexico is water
    for bad in ("/api/tiles/6/64/0.png", "/api/tiles/13/0/0.png", "/api/tiles/2/-1/0.png"):
        assert client.get(bad).status_code == 404, bad
    assert client.get("/api/tiles/99/0/0.png").json() == {"error": "no tile 99/0/0: zoom must be 0–12"}
    assert client.get("/api/tiles/6/64/0.png").json()["error"].endswith("at zoom 6, x and y must be 0–63")
    assert client.get("/api/config").json()["map_max_zoom"] == 12
    assert "/static/vendor/leaflet/leaflet.js" in client.get("/").text
    assert (
        client.get("/static/vendor/leaflet/leaflet.js").headers["content-type"].startswith("text/javascript")
    )


def test_blank_image_is_no_evidence_and_old_jobs_are_forgotten(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, keep_jobs=1)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        ids = []
        for i in range(3):
            response = client.post(
                "/api/locate", files={"image": (f"blank{i}.png", png_bytes(), "image/png")}
            )
            ids.append(response.json()["id"])
            events = events_of(client, ids[-1])
            trajectory = events[-1]["trajectory"]
            assert trajectory["status"] == "no_evidence" and trajectory["prediction"] is None
            assert events[-1]["map_url"] is None  # no coordinates, no map
        assert client.get(f"/api/jobs/{ids[0]}").status_code == 404
        assert not (tmp_path / "jobs" / ids[0]).exists() and (tmp_path / "jobs" / ids[1]).exists()


def test_map_zoom_follows_the_uncertainty() -> None:
    from geosleuth.webapp.jobs import map_zoom

    assert map_zoom(47.0, 1.0) > map_zoom(47.0, 25.0) > map_zoom(47.0, 500.0)
    assert (
        map_zoom(0.0, 5000.0) >= 2
        and map_zoom(89.9, 0.01) <= 13
        and map_zoom(10.0, None) == map_zoom(10.0, 10.0)
    )


def test_a_broken_answer_map_still_shows_the_answer(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from geosleuth.webapp.jobs import JobManager

    async def broken(self: JobManager, job: object, trajectory: object) -> str | None:
        raise RuntimeError("tile provider misconfigured")

    monkeypatch.setattr(JobManager, "_answer_map", broken)
    job = client.post("/api/locate", data={"example": "1"}).json()
    events = events_of(client, job["id"])
    assert events[-1]["type"] == "result" and events[-1]["status"] == "done"
    assert events[-1]["map_url"] is None and events[-1]["trajectory"]["prediction"]["city"] == "Luzern"
