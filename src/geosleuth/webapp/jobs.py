"""Locate jobs: one uploaded image, one agent run, a log of events the page streams.

A job checks its image before it is queued, so a bad upload is a clear 400 answer rather
than a failed run; the check runs in bounded memory (the header and the pixel limit, PNG
chunks verified, JPEGs decoded at 1/8 scale). Full decoding waits for the job's turn in the
queue, so parallel uploads never decode more images at once than the queue runs. Events are
appended as the agent works (``status``, with the queue position while waiting; ``turn`` once
generated and again once its tools ran, offline once per finished pipeline step; then
``result``, ``error`` or ``cancelled``), each with the seconds since the job was created;
readers wait on `Job.wait` and never miss one, whenever they connect. A job can be cancelled
while it waits or runs.
"""

from __future__ import annotations

import asyncio
import logging
import math
import shutil
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geosleuth.agent import AgentConfig, run_task, write_trajectories
from geosleuth.bounds.imageio import ImageInputError, probe_image, thumbnail
from geosleuth.core.records import Task, Trajectory, Turn
from geosleuth.webapp.settings import ServeSettings
from geosleuth.webapp.views import trajectory_view, turn_view

log = logging.getLogger(__name__)

FINISHED = ("done", "failed", "cancelled")
MAP_FILE = "answer_map.png"
MAP_PX = 640
PREVIEW_FILE = "preview.jpg"  # what the page shows: any input format, at most PREVIEW_PX on a side
PREVIEW_PX = 1600
CHEAP_PREVIEW_PIXELS = 4_000_000
"""An upload whose decode (after JPEG reduction) is at most this gets its preview at once;
larger ones get it when their job leaves the queue."""
EXTENSIONS = {
    "JPEG": "jpg",
    "PNG": "png",
    "WEBP": "webp",
    "GIF": "gif",
    "BMP": "bmp",
    "TIFF": "tiff",
    "MPO": "jpg",
}


class UploadError(ValueError):
    """An upload that cannot be located; the message is safe to show to the user."""

    status = 400


class UploadTooLarge(UploadError):
    """An upload over the size limit (HTTP 413)."""

    status = 413


@dataclass
class Job:
    """One locate request and everything it produced."""

    id: str
    dir: Path
    image_name: str
    image_file: str  # name inside ``dir``
    mode: str  # "model" | "offline"
    prompt_style: str
    samples: int
    created_at: float = field(default_factory=time.time)
    status: str = "queued"  # queued | running | done | failed | cancelled
    error: str | None = None
    trajectory: Trajectory | None = None
    map_file: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    cancel_requested: threading.Event = field(default_factory=threading.Event)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def file_url(self, ref: str) -> str | None:
        """Same-origin URL of a file the agent wrote under the job folder (None if not kept)."""
        if ref.startswith("unsaved:") or Path(ref).is_absolute():
            return None
        return f"/api/jobs/{self.id}/files/{ref}"

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        """Append an event (with the seconds since the job was created) and wake every reader."""
        elapsed = round(time.time() - self.created_at, 2)
        self.events.append({"seq": len(self.events), "type": kind, "elapsed_s": elapsed, **data})
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait(self, seen: int, timeout_s: float) -> None:
        """Return once there are more than ``seen`` events, the job ended, or the timeout passed."""
        changed = self._changed
        if len(self.events) > seen or self.status in FINISHED:
            return
        try:
            await asyncio.wait_for(changed.wait(), timeout_s)
        except TimeoutError:
            return

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "status": self.status,
            "error": self.error,
            "image_name": self.image_name,
            "image_url": f"/api/jobs/{self.id}/image",
            "mode": self.mode,
            "prompt_style": self.prompt_style,
            "samples": self.samples,
            "created_at": self.created_at,
            "map_url": f"/api/jobs/{self.id}/files/{self.map_file}" if self.map_file else None,
            "events_url": f"/api/jobs/{self.id}/events",
            "outcome": self.trajectory.status.value if self.trajectory is not None else None,
        }
        if self.trajectory is not None:
            out["trajectory"] = trajectory_view(self.trajectory, self.file_url)
            out["downloads"] = {f: f"/api/jobs/{self.id}/answer.{f}" for f in ("json", "geojson")}
        return out


class JobManager:
    """Creates, runs (at most ``settings.concurrency`` at once) and forgets jobs."""

    def __init__(self, settings: ServeSettings, workdir: Path) -> None:
        self.settings = settings
        self.workdir = workdir
        self.jobs: OrderedDict[str, Job] = OrderedDict()
        self.tasks: set[asyncio.Task[None]] = set()
        self.running: dict[str, asyncio.Task[None]] = {}
        self.waiting: list[Job] = []
        self._gate: asyncio.Semaphore | None = None

    def get(self, job_id: str) -> Job | None:
        return self.jobs.get(job_id)

    async def create(
        self, data: bytes | None, filename: str, *, prompt_style: str | None, samples: int, use_model: bool
    ) -> Job:
        """Check the request and the image, store the image, queue the run; `UploadError` when bad."""
        mode = "model" if use_model and self.settings.model else "offline"
        if use_model and not self.settings.model:
            raise UploadError("no model is configured on this server: start it with --model")
        if not 1 <= samples <= self.settings.max_samples:
            raise UploadError(f"samples must be between 1 and {self.settings.max_samples}")
        if samples > 1 and mode == "offline":
            raise UploadError("several samples need a model; the offline clue pipeline is deterministic")
        style = prompt_style or self.settings.prompt_style
        if mode == "model":
            _check_style(style)
        job_id = uuid.uuid4().hex[:12]
        folder = self.workdir / job_id
        folder.mkdir(parents=True)
        try:
            image_file = await asyncio.to_thread(_store_image, folder, data, filename, self.settings)
        except UploadError:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        job = Job(
            job_id,
            folder,
            _display_name(filename),
            image_file,
            mode,
            style if mode == "model" else "offline",
            samples,
        )
        self.jobs[job_id] = job
        self._forget_old()
        self.waiting.append(job)
        _emit_queued(job, len(self.waiting) - 1)
        task = asyncio.create_task(self._run(job))
        self.tasks.add(task)
        self.running[job.id] = task
        task.add_done_callback(self.tasks.discard)
        task.add_done_callback(lambda _: self.running.pop(job.id, None))
        return job

    def cancel(self, job: Job) -> bool:
        """Stop a waiting or running job (an offline pipeline stops after its current step);
        false when it had already ended."""
        if job.status in FINISHED:
            return False
        job.cancel_requested.set()
        job.status, job.error = "cancelled", "cancelled by the user"
        job.emit("cancelled", {"status": job.status, "message": "Cancelled."})
        self._leave_queue(job)
        task = self.running.get(job.id)
        if task is not None:
            task.cancel()
        return True

    def _leave_queue(self, job: Job) -> None:
        """Take ``job`` out of the waiting line; those behind it hear their new place."""
        if job not in self.waiting:
            return
        at = self.waiting.index(job)
        self.waiting.remove(job)
        for place, other in enumerate(self.waiting[at:], start=at):
            _emit_queued(other, place)

    def _forget_old(self) -> None:
        finished = [j for j in self.jobs.values() if j.status in FINISHED]
        for job in finished[: max(0, len(finished) - self.settings.keep_jobs)]:
            del self.jobs[job.id]
            shutil.rmtree(job.dir, ignore_errors=True)

    def _config(self, job: Job) -> AgentConfig:
        options = dict(self.settings.agent_options)
        if job.mode == "offline":
            return AgentConfig(**(options | {"model": None}))
        chosen = {
            "model": self.settings.model,
            "base_url": self.settings.base_url,
            "prompt_style": job.prompt_style,
            "samples": job.samples,
            "tool_settings": self.settings.tool_settings,
            "geocode_answers": True,
        }
        return AgentConfig(**(options | chosen))

    async def _run(self, job: Job) -> None:
        try:
            await self._run_in_turn(job)
        except asyncio.CancelledError:
            if job.status != "cancelled":  # the server is shutting down
                raise

    async def _run_in_turn(self, job: Job) -> None:
        if self._gate is None:
            self._gate = asyncio.Semaphore(max(1, self.settings.concurrency))
        async with self._gate:
            self._leave_queue(job)
            job.status = "running"
            if not (job.dir / PREVIEW_FILE).exists():
                try:
                    await asyncio.to_thread(write_preview, job.dir / job.image_file, job.dir / PREVIEW_FILE)
                except ImageInputError as exc:
                    job.status, job.error = "failed", str(exc).replace(str(job.dir), "").lstrip("/")
                    job.emit("error", {"status": job.status, "message": job.error})
                    return
            message = (
                f"Asking {self.settings.public()['model']} ({job.prompt_style} prompt)…"
                if job.mode == "model"
                else "Offline clue pipeline: EXIF, text in the image (OCR), place names, phone and web clues…"
            )
            job.emit("status", {"status": "running", "message": message})

            loop = asyncio.get_running_loop()

            def on_turn(sample: int, turn: Turn) -> None:
                """Called on the loop (model turns) or from the offline pipeline's thread."""
                if job.cancel_requested.is_set():
                    raise JobCancelled(job.id)
                data = {
                    "sample": sample,
                    "samples": job.samples,
                    "mode": job.mode,
                    "turn": turn_view(turn, job.file_url),
                }
                loop.call_soon_threadsafe(job.emit, "turn", data)

            try:
                trajectory = await run_task(
                    Task(id=job.id, image=str(job.dir / job.image_file)),
                    self._config(job),
                    artifacts_dir=job.dir,
                    on_turn=on_turn,
                )
                await asyncio.to_thread(
                    write_trajectories, job.dir / "trajectories.jsonl", [trajectory], False
                )
                job.map_file = await self._answer_map_or_none(job, trajectory)
            # run_task records model and image failures in the trajectory; anything else is a bug
            # that the page must show rather than leave the job "running" forever
            except Exception as exc:
                if job.status == "cancelled":
                    return
                job.status, job.error = "failed", f"internal error: {type(exc).__name__}: {exc}"
                job.emit("error", {"status": job.status, "message": job.error})
                return
            job.trajectory, job.status = trajectory, "done"
            job.emit("result", job.summary())

    async def _answer_map_or_none(self, job: Job, trajectory: Trajectory) -> str | None:
        """The map is an illustration: when it cannot be drawn the answer is still shown, without it."""
        try:
            return await self._answer_map(job, trajectory)
        except Exception as exc:  # a broken map provider must not turn a located photo into a failed job
            log.warning("job %s: no answer map (%s: %s)", job.id, type(exc).__name__, exc)
            return None

    async def _answer_map(self, job: Job, trajectory: Trajectory) -> str | None:
        """The offline map around the answer (the ``static_map_query`` tool), or None without coordinates."""
        pred = trajectory.prediction
        if pred is None or pred.lat is None or pred.lon is None:
            return None
        from geosleuth.tools import build_registry

        registry = build_registry(self.settings.tool_settings, names=["static_map_query"])
        zoom = map_zoom(pred.lat, pred.radius_km)
        result = await registry.call("static_map_query", {"lat": pred.lat, "lon": pred.lon, "zoom": zoom})
        if not result.ok or not result.images:
            return None
        await asyncio.to_thread(result.images[0].save, job.dir / MAP_FILE, "PNG")
        return MAP_FILE

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


class JobCancelled(Exception):
    """Raised into a job's agent run (at its next turn or step) once the user cancelled it."""


def _emit_queued(job: Job, ahead: int) -> None:
    message = "Waiting for a free worker: " + (
        "next in line…" if ahead == 0 else f"{ahead} job{'s' if ahead > 1 else ''} ahead…"
    )
    job.emit("status", {"status": "queued", "message": message, "position": ahead + 1})


def map_zoom(lat: float, radius_km: float | None) -> int:
    """A web-map zoom whose 640-px view spans about four times the answer's uncertainty radius."""
    radius = radius_km if radius_km and radius_km > 0 else 10.0
    span_km = 40075.0 * max(math.cos(math.radians(lat)), 0.05) * (MAP_PX / 256)
    return int(min(13, max(2, math.floor(math.log2(span_km / (4 * radius))))))


def _check_style(style: str) -> None:
    from geosleuth.agent import load_style

    try:
        load_style(style)
    except (KeyError, ValueError, OSError) as exc:
        raise UploadError(f"unknown prompt style {style!r}: {exc}") from None


def _display_name(filename: str) -> str:
    name = Path(filename.replace("\\", "/")).name
    return "".join(c for c in name if c.isprintable())[:120] or "upload"


def _store_image(folder: Path, data: bytes | None, filename: str, settings: ServeSettings) -> str:
    """Write the upload (or copy the example), decode it with the safe loader, keep it as ``input.<ext>``."""
    if data is None:
        if settings.example is None:
            raise UploadError("this installation has no bundled example image")
        data = settings.example.read_bytes()
    if not data:
        raise UploadError("the uploaded file is empty")
    if len(data) > settings.max_upload_bytes:
        limit = settings.public()["max_upload_mb"]
        raise UploadTooLarge(f"the file is larger than the {limit} MB limit")
    raw = folder / "upload.bin"
    raw.write_bytes(data)
    try:
        fmt, (width, height) = probe_image(raw, settings.agent_options.get("max_image_pixels"))
    except ImageInputError as exc:
        raw.unlink(missing_ok=True)
        raise UploadError(str(exc).replace(str(raw), _display_name(filename))) from None
    target = folder / f"input.{EXTENSIONS.get(fmt, 'img')}"
    raw.rename(target)
    reduction = 64 if fmt in ("JPEG", "MPO") else 1  # JPEG previews decode at 1/8 scale
    if width * height / reduction <= CHEAP_PREVIEW_PIXELS:
        try:
            write_preview(target, folder / PREVIEW_FILE)
        except ImageInputError as exc:
            raise UploadError(str(exc).replace(str(target), _display_name(filename))) from None
    return target.name


def write_preview(image: Path, preview: Path) -> None:
    """The JPEG the page shows, at most PREVIEW_PX on a side, decoded within the pixel limit."""
    thumbnail(image, PREVIEW_PX).save(preview, format="JPEG", quality=88)
