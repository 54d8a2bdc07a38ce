"""The Starlette app: static pages, the locate-job API with Server-Sent Events, the runs API.

Defences for a server that runs jobs on the user's machine: only loopback host names are
accepted (DNS rebinding), a cross-site ``Origin`` is refused on writes (CSRF), uploads are
size-capped before parsing, files are served only from inside their job or run folder, and
a Content-Security-Policy keeps the page from loading or sending anything elsewhere.
"""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.responses import JSONResponse as _PlainJSONResponse
from starlette.routing import Route

from geosleuth.bounds.imageio import ImageInputError, thumbnail
from geosleuth.eval.run.store import RunDirError
from geosleuth.secrets import redact_text
from geosleuth.webapp.jobs import FINISHED, PREVIEW_FILE, PREVIEW_PX, Job, JobManager, UploadError
from geosleuth.webapp.runs import RunIndex, RunNotFound
from geosleuth.webapp.settings import ServeSettings
from geosleuth.webapp.views import answer_geojson, trajectory_view

LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]
CSP = (
    "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; font-src 'none'; object-src 'none'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'self'"
)
"""The app's pages: scripts and styles only as files from /static (no inline code at all)."""
STATIC = {
    "app.js": "text/javascript",
    "app.css": "text/css",
    "vendor/leaflet/leaflet.js": "text/javascript",
    "vendor/leaflet/leaflet.css": "text/css",
}
"""Every file the page may load; the preview of a chosen upload is a ``blob:`` URL (img-src)."""
TILE_CACHE = 512
"""Rendered map tiles kept in memory (about 20 KB each)."""
KEEPALIVE_S = 15.0
RUN_DOWNLOADS = {"per_sample.csv": "text/csv", "summary.json": "application/json"}
"""A run's own files the run page offers for download (their names as `geosleuth report` writes them)."""
Handler = Callable[[Request], Awaitable[Response]]


class JSONResponse(_PlainJSONResponse):
    """Every JSON answer with known keys and key-shaped credentials redacted."""

    def render(self, content: Any) -> bytes:
        return redact_text(super().render(content).decode("utf-8")).encode("utf-8")


_DECODES = threading.BoundedSemaphore(2)
"""Dataset images decoded at once for previews (each may be up to the pixel limit)."""
_RENDERS = threading.BoundedSemaphore(2)
"""Map tiles rendered at once (a world tile costs seconds of CPU)."""


@lru_cache(maxsize=TILE_CACHE)
def _tile_png(zoom: int, x: int, y: int) -> bytes:
    """One offline map tile as PNG (raises ValueError outside the tile pyramid)."""
    from geosleuth.tools.providers.maps_offline import OfflineMapProvider

    with _RENDERS:
        image = OfflineMapProvider().tile(zoom, x, y)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def _error(message: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _static(name: str) -> bytes:
    return resources.files("geosleuth.webapp").joinpath("static", name).read_bytes()


class Api:
    """Route handlers over one job manager and one run index."""

    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self.runs = RunIndex(list(settings.runs))
        self.jobs: JobManager | None = None

    @property
    def manager(self) -> JobManager:
        if self.jobs is None:
            raise RuntimeError("the app's lifespan has not started")
        return self.jobs

    # -- pages ------------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        return Response(_static("index.html"), media_type="text/html; charset=utf-8")

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return _error("not found", 404)
        return Response(_static(name), media_type=STATIC[name] + "; charset=utf-8")

    async def tile(self, request: Request) -> Response:
        """A slippy-map tile of the offline map (Natural Earth borders, GeoNames places)."""
        p = request.path_params
        try:
            data = await asyncio.to_thread(_tile_png, p["z"], p["x"], p["y"])
        except ValueError as exc:
            return _error(str(exc), 404)
        return Response(data, media_type="image/png", headers={"cache-control": "max-age=86400"})

    async def config(self, request: Request) -> Response:
        from geosleuth.agent import available_styles
        from geosleuth.tools.providers.maps_offline import MAX_TILE_ZOOM

        return JSONResponse(
            self.settings.public()
            | {"prompt_styles": sorted(available_styles()), "map_max_zoom": MAX_TILE_ZOOM}
        )

    # -- jobs -------------------------------------------------------------------------------

    async def locate(self, request: Request) -> Response:
        """Form fields: ``image`` (file) or ``example=1``; ``prompt``, ``samples``, ``use_model``."""
        length = request.headers.get("content-length")
        if length is None or not (length.isascii() and length.isdigit()):  # "²" is a digit, not a length
            return _error("a Content-Length header is required", 411)
        if int(length) > self.settings.max_upload_bytes + 64 * 1024:
            return _error(
                f"the upload is larger than the {self.settings.public()['max_upload_mb']} MB limit", 413
            )
        try:
            async with request.form(max_files=1, max_fields=16) as form:
                upload = form.get("image")
                example = self.settings.example
                data, filename = None, example.name if example else "example"
                if isinstance(upload, UploadFile) and upload.filename:
                    data = await upload.read(self.settings.max_upload_bytes + 1)
                    filename = upload.filename
                elif not _flag(form.get("example"), False):
                    return _error("send an image file in the 'image' field, or example=1")
                samples_text = str(form.get("samples") or "1")
                use_model = _flag(form.get("use_model"), self.settings.model is not None)
                prompt = str(form.get("prompt") or "") or None
        except HTTPException as exc:
            return _error(f"cannot read the form: {exc.detail}", exc.status_code)
        if not samples_text.strip().isdecimal():  # "²" is a digit int() rejects
            return _error(f"samples must be a whole number, not {samples_text[:20]!r}")
        samples = int(samples_text)
        try:
            job = await self.manager.create(
                data, filename, prompt_style=prompt, samples=samples, use_model=use_model
            )
        except UploadError as exc:
            return _error(str(exc), exc.status)
        return JSONResponse(job.summary(), status_code=202)

    def _job(self, request: Request) -> Job | None:
        return self.manager.get(request.path_params["job_id"])

    async def list_jobs(self, request: Request) -> Response:
        return JSONResponse(
            [
                {k: v for k, v in j.summary().items() if k != "trajectory"}
                for j in reversed(self.manager.jobs.values())
            ]
        )

    async def job(self, request: Request) -> Response:
        job = self._job(request)
        if job is None:
            return _error("no such job", 404)
        return JSONResponse(job.summary() | {"events": job.events})

    async def events(self, request: Request) -> Response:
        """Server-Sent Events from ``after`` (or ``Last-Event-ID`` + 1) until the job ends."""
        job = self._job(request)
        if job is None:
            return _error("no such job", 404)
        start = request.headers.get("last-event-id") or request.query_params.get("after")
        try:
            cursor = int(start) + 1 if start is not None else 0
        except ValueError:
            return _error("'after' must be an event number")
        return StreamingResponse(
            _event_stream(job, max(cursor, 0)),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def cancel_job(self, request: Request) -> Response:
        """Stop a waiting or running job; 409 once it has ended."""
        job = self._job(request)
        if job is None:
            return _error("no such job", 404)
        if not self.manager.cancel(job):
            return _error(f"the job has already ended ({job.status})", 409)
        return JSONResponse(job.summary())

    async def job_answer(self, request: Request) -> Response:
        """The job's answer to take away: the trajectory record (json) or its points (geojson)."""
        job = self._job(request)
        if job is None:
            return _error("no such job", 404)
        if job.trajectory is None:
            return _error(f"the job has no answer yet ({job.status})", 404)
        return _download(job.trajectory, request.path_params["fmt"], f"geosleuth-{job.id}")

    async def job_image(self, request: Request) -> Response:
        job = self._job(request)
        if job is None:
            return _error("no such job", 404)
        preview = job.dir / PREVIEW_FILE
        if not preview.exists():  # a large image is decoded only when its job leaves the queue
            return _error("the preview is made when the job starts", 404)
        return FileResponse(preview, media_type="image/jpeg")

    async def job_file(self, request: Request) -> Response:
        job = self._job(request)
        if job is None:
            return _error("no such job", 404)
        path = (job.dir / request.path_params["path"]).resolve()
        if not path.is_relative_to(job.dir.resolve()) or not path.is_file() or path.suffix.lower() != ".png":
            return _error("no such file", 404)
        return FileResponse(path, media_type="image/png")

    # -- runs -------------------------------------------------------------------------------

    async def list_runs(self, request: Request) -> Response:
        return JSONResponse(await asyncio.to_thread(self.runs.listing))

    async def run(self, request: Request) -> Response:
        return await _guard(lambda: self.runs.detail(request.path_params["name"]))

    async def run_sample(self, request: Request) -> Response:
        name, sample_id = request.path_params["name"], request.query_params.get("id", "")

        def load() -> dict[str, Any]:
            sample, trajectory = self.runs.sample(name, sample_id)
            base = f"/api/runs/{name}"

            def url(ref: str) -> str | None:
                return (
                    None if ref.startswith("unsaved:") or Path(ref).is_absolute() else f"{base}/files/{ref}"
                )

            before, after = self.runs.neighbours(name, sample.id)
            answer = f"{base}/answer.{{}}?id={_quote(sample.id)}"
            return {
                "prev": before,
                "next": after,
                "downloads": {f: answer.format(f) for f in ("json", "geojson")} if trajectory else None,
                "row": self.runs.sample_row(name, sample.id),
                "sample": sample.model_dump(mode="json", exclude={"metadata"}),
                "image_url": f"{base}/image?id={_quote(sample.id)}" if sample.image else None,
                "trajectory": trajectory_view(trajectory, url) if trajectory else None,
            }

        return await _guard(load)

    async def run_answer(self, request: Request) -> Response:
        """One sample's answer in a run, as the job answers download."""
        name, sample_id = request.path_params["name"], request.query_params.get("id", "")
        try:
            _, trajectory = await asyncio.to_thread(self.runs.sample, name, sample_id)
        except RunNotFound as exc:
            return _error(str(exc), 404)
        if trajectory is None:
            return _error(f"sample {sample_id!r} has not finished in this run", 404)
        return _download(trajectory, request.path_params["fmt"], f"{name}-{sample_id}")

    async def run_download(self, request: Request) -> Response:
        """``per_sample.csv`` or ``summary.json`` of a reported run, as a download."""
        name, file = request.path_params["name"], request.path_params["file"]
        if file not in RUN_DOWNLOADS:
            return _error("only per_sample.csv and summary.json are offered", 404)
        try:
            path = self.runs.file(name, file)
        except RunNotFound:
            return _error(f"run {name!r} has no {file}: run `geosleuth report` first", 404)
        return FileResponse(path, media_type=RUN_DOWNLOADS[file], filename=f"{name}-{file}")

    async def run_image(self, request: Request) -> Response:
        """The sample's dataset image, re-encoded as a JPEG preview (the run names it, not the browser)."""
        name, sample_id = request.path_params["name"], request.query_params.get("id", "")

        def load() -> bytes:
            sample, _ = self.runs.sample(name, sample_id)
            if not sample.image:
                raise RunNotFound(f"sample {sample_id!r} has no image")
            with _DECODES:
                image = thumbnail(sample.image, PREVIEW_PX)
            buffer = io.BytesIO()
            image.save(buffer, format="JPEG", quality=88)
            return buffer.getvalue()

        try:
            data = await asyncio.to_thread(load)
        except RunNotFound as exc:
            return _error(str(exc), 404)
        except ImageInputError as exc:
            return _error(str(exc), 404)
        return Response(data, media_type="image/jpeg")

    async def run_report(self, request: Request) -> Response:
        """The run's own offline HTML report (``geosleuth report`` output), under its own CSP."""
        name, page = request.path_params["name"], request.path_params.get("path") or "index.html"
        try:
            path = self.runs.file(name, f"html/{page}")
        except RunNotFound:
            return _error(f"run {name!r} has no HTML report page {page!r}: run `geosleuth report`", 404)
        if path.suffix != ".html":
            return _error("not a report page", 404)
        from geosleuth.eval.report.html import REPORT_CSP  # its inline style and script by hash

        return FileResponse(
            path, media_type="text/html; charset=utf-8", headers={"content-security-policy": REPORT_CSP}
        )

    async def run_file(self, request: Request) -> Response:
        try:
            path = self.runs.file(request.path_params["name"], request.path_params["path"])
        except RunNotFound as exc:
            return _error(str(exc), 404)
        if path.suffix.lower() not in (".png", ".jpg", ".jpeg"):
            return _error("only images are served from run folders", 404)
        return FileResponse(path, media_type="image/png" if path.suffix.lower() == ".png" else "image/jpeg")


def _download(trajectory: Any, fmt: str, stem: str) -> Response:
    """A trajectory as an attachment: the JSONL record as JSON, or `answer_geojson`."""
    if fmt == "json":
        body, media = trajectory.model_dump(mode="json"), "application/json"
    elif fmt == "geojson":
        body, media = answer_geojson(trajectory), "application/geo+json"
    else:
        return _error("the answer downloads as .json or .geojson", 404)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)[:100]
    text = redact_text(json.dumps(body, ensure_ascii=False, indent=1))
    disposition = f'attachment; filename="{safe}.{fmt}"'
    return Response(text, media_type=media, headers={"content-disposition": disposition})


def _flag(value: object, default: bool) -> bool:
    """A form checkbox / flag: 1, true, on are true; absent means ``default``."""
    if value is None or value == "":
        return default
    return str(value).strip().lower() in ("1", "true", "on", "yes")


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


async def _guard(load: Callable[[], Any]) -> Response:
    """A blocking run-folder read off the loop; unknown names are 404, damaged runs 500."""
    try:
        return JSONResponse(await asyncio.to_thread(load))
    except RunNotFound as exc:
        return _error(str(exc), 404)
    except (RunDirError, OSError, ValueError) as exc:
        return _error(f"cannot read the run: {exc}", 500)


async def _event_stream(job: Job, cursor: int) -> AsyncIterator[str]:
    while True:
        while cursor < len(job.events):
            event = job.events[cursor]
            data = redact_text(json.dumps(event, ensure_ascii=False))
            yield f"id: {event['seq']}\nevent: {event['type']}\ndata: {data}\n\n"
            cursor += 1
        if job.status in FINISHED:
            return
        before = len(job.events)
        await job.wait(cursor, KEEPALIVE_S)
        if len(job.events) == before and job.status not in FINISHED:
            yield ": keep-alive\n\n"


class SecurityHeaders:
    """CSP and friends on every response; a cross-site ``Origin`` may not POST."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if scope["method"] not in ("GET", "HEAD") and not _same_origin(headers):
            await _error("cross-site request refused", 403)(scope, receive, send)
            return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                sent = list(message.get("headers", []))
                own_policy = any(k.lower() == b"content-security-policy" for k, _ in sent)
                extra = [] if own_policy else [(b"content-security-policy", CSP.encode())]
                extra += [
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY"),
                ]
                message["headers"] = sent + extra
            await send(message)

        await self.app(scope, receive, with_headers)


def _same_origin(headers: dict[str, str]) -> bool:
    origin = headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == headers.get("host", "")


def create_app(settings: ServeSettings, allowed_hosts: list[str] | None = None) -> Starlette:
    """The web app; ``allowed_hosts`` (default: loopback names) are the Host headers accepted."""
    api = Api(settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        own = settings.workdir is None
        workdir = Path(tempfile.mkdtemp(prefix="geosleuth-serve-")) if own else Path(settings.workdir)  # type: ignore[arg-type]
        workdir.mkdir(parents=True, exist_ok=True)
        api.jobs = JobManager(settings, workdir)
        try:
            yield
        finally:
            await api.jobs.close()
            if own:
                shutil.rmtree(workdir, ignore_errors=True)

    routes = [
        Route("/", api.index),
        Route("/static/{name:path}", api.static),
        Route("/api/tiles/{z:int}/{x:int}/{y:int}.png", api.tile),
        Route("/api/config", api.config),
        Route("/api/locate", api.locate, methods=["POST"]),
        Route("/api/jobs", api.list_jobs),
        Route("/api/jobs/{job_id}", api.job),
        Route("/api/jobs/{job_id}/events", api.events),
        Route("/api/jobs/{job_id}/cancel", api.cancel_job, methods=["POST"]),
        Route("/api/jobs/{job_id}/image", api.job_image),
        Route("/api/jobs/{job_id}/answer.{fmt}", api.job_answer),
        Route("/api/jobs/{job_id}/files/{path:path}", api.job_file),
        Route("/api/runs", api.list_runs),
        Route("/api/runs/{name}", api.run),
        Route("/api/runs/{name}/sample", api.run_sample),
        Route("/api/runs/{name}/image", api.run_image),
        Route("/api/runs/{name}/answer.{fmt}", api.run_answer),
        Route("/api/runs/{name}/download/{file}", api.run_download),
        Route("/api/runs/{name}/files/{path:path}", api.run_file),
        Route("/runs/{name}/report/", api.run_report),
        Route("/runs/{name}/report/{path:path}", api.run_report),
    ]
    middleware = [
        Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts or LOOPBACK_HOSTS),
        Middleware(SecurityHeaders),
    ]
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
