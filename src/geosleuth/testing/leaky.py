"""A one-photo benchmark built to leak its answer, for testing the contamination guards.

`leaky_benchmark` writes a generic CSV whose photo is a Flickr-named JPEG with its true GPS
position and a caption in EXIF, and a tools config that points the real SearXNG adapter at
`FakeSearxng`, a SearXNG instance on 127.0.0.1 whose every answer is `LEAKY_RESULTS`: the
photo's own Flickr page, a mirror naming its file, an encyclopedia page stating coordinates
within 1 km of the truth, and one honest page. A guarded run keeps only the honest one
(``hosts`` keeps the encyclopedia page too). `scripted_searcher` is a model that searches once
and then answers, for `geosleuth.testing.FakeOpenAIServer`.
"""

from __future__ import annotations

import base64
import io
import json
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from PIL import Image

from geosleuth.testing.fake_openai import Step, reply, tool_call

SAMPLE_ID = "eiffel-0042"
FLICKR_PHOTO = "2940211474"
IMAGE_NAME = f"{FLICKR_PHOTO}_8c0f3a9e1b_o.jpg"
TRUTH = (48.8584, 2.2945)
CAPTION = "Eiffel Tower from the Champ de Mars, Paris"
HONEST_URL = "https://example.org/street-furniture"
LEAKY_RESULTS: list[dict[str, str]] = [
    {
        "title": "Eiffel Tower at dusk",
        "url": f"https://www.flickr.com/photos/jdoe/{FLICKR_PHOTO}/",
        "content": "Taken on the Champ de Mars. lat=48.8584 lon=2.2945",
    },
    {
        "title": "Photo archive",
        "url": f"https://img.example.net/view/{IMAGE_NAME}",
        "content": "A tower at dusk.",
    },
    {
        "title": "Eiffel Tower - Encyclopedia",
        "url": "https://encyclopedia.example.com/wiki/Eiffel_Tower",
        "content": "Coordinates: 48.85826, 2.29451. Wrought-iron lattice tower.",
    },
    {"title": "Street furniture of Europe", "url": HONEST_URL, "content": "Green benches are common here."},
]
ANSWER = (
    "<answer>\nCountry: France\nProvince/State: Ile-de-France\nCity: Paris\n"
    "Latitude: 48.8566\nLongitude: 2.3522\n</answer>"
)


def write_leaky_photo(path: Path) -> None:
    """A JPEG whose EXIF holds the true GPS position and a caption naming the place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.new("RGB", (64, 48), (90, 120, 160))
    exif = img.getexif()
    exif[0x010E] = CAPTION  # ImageDescription
    exif.get_ifd(0x8825).update({1: "N", 2: (48.0, 51.0, 30.24), 3: "E", 4: (2.0, 17.0, 40.2)})
    img.save(path, format="JPEG", exif=exif, comment=CAPTION.encode())


@dataclass(frozen=True)
class LeakyBenchmark:
    folder: Path
    table: Path
    image: Path
    tools_config: Path


def leaky_benchmark(folder: Path, search_url: str) -> LeakyBenchmark:
    """The benchmark folder, and a tools config sending ``web_search`` to ``search_url``."""
    image = folder / "images" / IMAGE_NAME
    write_leaky_photo(image)
    table = folder / "data.csv"
    table.write_text(
        f"id,image,lat,lon,country,city\n{SAMPLE_ID},{IMAGE_NAME},{TRUTH[0]},{TRUTH[1]},France,Paris\n"
    )
    tools = folder.parent / f"{folder.name}-tools.json"
    tools.write_text(
        json.dumps(
            {
                "providers": {"search": "searxng"},
                "services": {"searxng": {"base_url": search_url, "requests_per_second": 1000.0}},
                "http": {"allow_private_urls": True, "max_retries": 1, "timeout_s": 5.0},
                "cache": {"backend": "none"},
            }
        )
    )
    return LeakyBenchmark(folder, table, image, tools)


def leaked_strings(bench: LeakyBenchmark) -> list[str]:
    """What must never appear in a request to the model: ids, file names, paths, the caption."""
    return [SAMPLE_ID, IMAGE_NAME, FLICKR_PHOTO, str(bench.folder), CAPTION, "48.8584", "flickr.com"]


DATA_URL = re.compile(r"data:image/[a-z]+;base64,([A-Za-z0-9+/=]+)")


def assert_clean_requests(bodies: list[str], bench: LeakyBenchmark) -> None:
    """No request holds an id, a file name, a path or the caption; every image is pixels only."""
    assert bodies
    for body in bodies:
        for leaked in leaked_strings(bench):
            assert leaked not in body, leaked
        images = DATA_URL.findall(body)
        assert images
        for data in images:
            with Image.open(io.BytesIO(base64.b64decode(data))) as img:
                assert len(img.getexif()) == 0 and "comment" not in img.info


def scripted_searcher(body: dict[str, Any]) -> Step:
    """Search once for something neutral, then answer Paris's centre."""
    if any(m.get("role") == "assistant" for m in body["messages"]):
        return reply(ANSWER)
    return reply("Let me search.", tool_calls=[tool_call("web_search", {"query": "green bench lamp post"})])


class FakeSearxng:
    """A SearXNG instance on 127.0.0.1 answering every ``/search`` with `LEAKY_RESULTS`."""

    def __init__(self) -> None:
        self.queries: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                parts = urlsplit(self.path)
                outer.queries += parse_qs(parts.query).get("q", [])
                body = json.dumps({"query": "", "results": LEAKY_RESULTS}).encode()
                self.send_response(200 if parts.path == "/search" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeSearxng:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
