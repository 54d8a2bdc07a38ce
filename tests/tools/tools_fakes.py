"""A scriptable HTTP server on 127.0.0.1 that plays a provider's documented responses."""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from PIL import Image

from geosleuth.tools.config import HttpSettings, ToolSettings


@dataclass
class Reply:
    status: int = 200
    json: Any = None
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0

    def payload(self) -> tuple[bytes, str]:
        if self.body is not None:
            return self.body, self.headers.get("Content-Type", "application/octet-stream")
        return json.dumps(self.json, ensure_ascii=False).encode("utf-8"), "application/json"


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    client_port: int = 0


def png_bytes(size: tuple[int, int] = (256, 256), color: tuple[int, int, int] = (30, 120, 60)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


class FakeServer:
    """Routes are exact paths or prefixes ending in '*'; replies play in order, the last repeats."""

    def __init__(self, keep_alive: bool = False) -> None:
        """``keep_alive``: speak HTTP/1.1 so a client can reuse one connection (pool tests)."""
        self.routes: dict[str, list[Reply]] = {}
        self.requests: list[Seen] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def log_message(self, *args: Any) -> None:
                return

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                server.requests.append(
                    Seen(
                        self.command,
                        parts.path,
                        parse_qs(parts.query),
                        dict(self.headers.items()),
                        body,
                        self.client_address[1],
                    )
                )
                reply = server._next(parts.path)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                content, ctype = reply.payload()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(content)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(content)
                except (BrokenPipeError, ConnectionResetError):
                    return

            do_GET = _serve
            do_POST = _serve

        ThreadingHTTPServer.request_queue_size = 64
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def route(self, path: str, *replies: Reply) -> None:
        self.routes[path] = list(replies)

    def _next(self, path: str) -> Reply:
        queue = self.routes.get(path)
        if queue is None:
            queue = next(
                (q for p, q in self.routes.items() if p.endswith("*") and path.startswith(p[:-1])), None
            )
        if not queue:
            return Reply(status=404, json={"error": f"no route for {path}"})
        return queue.pop(0) if len(queue) > 1 else queue[0]

    def hits(self, path: str | None = None) -> int:
        return sum(1 for r in self.requests if path is None or r.path == path)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def fake_settings(server: FakeServer, providers: dict[str, str], **extra: Any) -> ToolSettings:
    """Settings that point every service at the fake server, with fast retries and no cache."""
    services = {
        name: {"base_url": server.url, "requests_per_second": 1000.0}
        for name in ("nominatim", "photon", "google", "google_places", "opencage", "amap", "tavily", "serper",
                     "brave", "searxng", "osm", "esri")
    }  # fmt: skip
    data: dict[str, Any] = {
        "providers": providers,
        "services": services,
        "http": HttpSettings(
            allow_private_urls=True, max_retries=1, backoff_base_s=0.01, backoff_max_s=0.05, timeout_s=2.0
        ).model_dump(),
        "cache": {"backend": "none"},
    }
    data.update(extra)
    return ToolSettings.model_validate(data)


NOMINATIM = [
    {
        "place_id": 1,
        "osm_type": "node",
        "osm_id": 42,
        "lat": "47.37",
        "lon": "8.54",
        "name": "Zürich",
        "display_name": "Zürich, Schweiz",
        "category": "place",
        "type": "city",
        "address": {"country_code": "ch", "country": "Schweiz"},
    }
]
"""A one-result Nominatim /search answer (Zürich), shared by the cache tests."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
