"""Observers: the image reaches a text-only reasoner as text (``--observer offline|MODEL``).

Many reasoners cannot see: local LLMs, reasoning APIs without vision, the planner of
SpotAgent's cold-start pipeline. An observer turns pixels into a description the reasoner
reads instead of the image:

- `OfflineObserver` (``--observer offline``): the offline clue pipeline — EXIF, OCR lines
  with their positions in the frame the reasoner zooms in, scripts and languages, phone
  numbers, domains, currencies, and the candidate places those clues agree on.
- `ModelObserver` (``--observer MODEL``): a vision model describes the photo from macro
  (climate, terrain, vegetation, architecture) to micro (text, signs, plates), with the
  prompts in ``agent/prompts/observer.yaml``.

Image tools answer in text the same way: a zoomed crop (or a rendered map) is re-observed
by the same observer. Observations are recorded in the trajectory as tool-like turns
(``observe_image`` calls) so that evaluation, reports, SFT export and the web app show them.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, Protocol

from PIL import Image

from geosleuth.core.records import ToolCallRecord, Turn, Usage

OBSERVE_TOOL = "observe_image"
"""Name under which observations appear as tool calls in trajectories."""
MAX_OBSERVATION_CHARS = 8000
MAX_OCR_LINES = 60
MAX_CANDIDATES = 5

Target = Literal["photo", "region"]


@dataclass(frozen=True)
class Frame:
    """How the reasoner addresses the photo: the size it is told about and the box convention."""

    size: tuple[int, int]
    convention: str = "absolute"
    scale: float = 1.0  # frame size / original size


@dataclass
class Observation:
    """What an observer said about one image, with its cost."""

    text: str
    observer: str
    target: Target = "photo"
    latency_s: float = 0.0
    usage: Usage = field(default_factory=Usage)
    ok: bool = True
    error: str | None = None


class Observer(Protocol):
    """Describes images for a reasoner that cannot see them."""

    name: str

    async def observe(self, image: Image.Image, target: Target, *, frame: Frame | None = None,
                      path: str | None = None) -> Observation: ...  # fmt: skip

    async def aclose(self) -> None: ...


def _clip(text: str) -> str:
    if len(text) <= MAX_OBSERVATION_CHARS:
        return text
    return text[:MAX_OBSERVATION_CHARS].rstrip() + f" … [{len(text) - MAX_OBSERVATION_CHARS} characters cut]"


def observation_turn(seen: Observation, index: int) -> Turn:
    """An observation as a trajectory turn: one ``observe_image`` call holding the description.

    Its token usage stays out of the turn (the trajectory's usage is the reasoner's); the
    loop adds it up under ``metadata["observer"]``.
    """
    call = ToolCallRecord(
        id=f"observe_{index}",
        name=OBSERVE_TOOL,
        arguments={"target": seen.target, "observer": seen.observer},
        ok=seen.ok,
        error=seen.error,
        result_text=seen.text,
        latency_s=seen.latency_s,
        provider=f"observer:{seen.observer}",
    )
    return Turn(index=index, tool_calls=[call], latency_s=seen.latency_s, note="observation")


# -- offline -------------------------------------------------------------------------------


def describe_offline(
    image: Image.Image,
    target: Target = "photo",
    frame: Frame | None = None,
    path: str | None = None,
    engine: str = "rapidocr",
    metadata: bool = True,
) -> str:
    """The offline clue pipeline's findings as text (blocking: OCR and gazetteer lookups).

    For the photo, OCR boxes are given in the reasoner's frame and convention so it can zoom
    on them; for a zoomed region the lines are listed in reading order without boxes. Without
    ``metadata`` (benchmark runs) the file's EXIF is neither read nor mentioned.
    """
    from geosleuth.agent.offline import locate_offline
    from geosleuth.tools.exif import read_exif
    from geosleuth.tools.ocr import run_ocr

    out: list[str] = []
    if target == "photo" and frame is not None:
        w, h = frame.size
        unit = "pixels of that frame" if frame.convention == "absolute" else "a 0-1000 grid"
        out.append(f"Photo of {w}x{h} pixels; boxes are [x1, y1, x2, y2] in {unit}.")
    if target == "photo" and frame is not None and not metadata:
        out.append("File metadata: withheld (the photo's pixels only).")
    elif target == "photo" and frame is not None:
        try:
            out.append("EXIF: " + read_exif(image, path).describe().replace("\n", "; "))
        except Exception as exc:  # a broken EXIF block must not hide the rest
            out.append(f"EXIF: unreadable ({type(exc).__name__})")
    if target != "photo" or frame is None:
        out.append("Zoomed region (text listed in reading order).")
    try:
        if target == "photo" and frame is not None:
            report = run_ocr(image, engine, convention=frame.convention,  # type: ignore[arg-type]
                             model_scale=frame.scale, model_size=frame.size)  # fmt: skip
        else:
            report = run_ocr(image, engine)
    except Exception as exc:  # no OCR engine installed, or it failed on this image
        out.append(f"Text (OCR): unavailable ({type(exc).__name__}: {exc})")
        return _clip("\n".join(out))
    if not report.lines:
        out.append("Text (OCR): none found.")
    else:
        out.append(f"Text (OCR, {report.engine}):")
        for line in report.lines[:MAX_OCR_LINES]:
            where = f" at {[round(v) for v in line.box]}" if target == "photo" else ""
            out.append(f"- {line.text!r}{where} ({line.script or 'no letters'})")
        if len(report.lines) > MAX_OCR_LINES:
            out.append(f"- … {len(report.lines) - MAX_OCR_LINES} more lines")
    if report.scripts:
        out.append("Scripts: " + ", ".join(report.scripts))
    if report.languages:
        out.append("Languages: " + ", ".join(f"{g.name} {g.percent}%" for g in report.languages))
    if report.clues:
        out.append("Clues:")
        out += [f"- {c.kind} {c.text!r} → {'/'.join(c.countries[:4]) or '?'} {c.detail}".rstrip()
                for c in report.clues[:20]]  # fmt: skip
    if report.lines:
        result = locate_offline(
            image, path if target == "photo" else None, ocr=lambda _img: report, use_metadata=metadata
        )
        unique = list({c.label: c for c in reversed(result.candidates)}.values())[::-1]  # best of each place
        if unique:
            out.append("Candidate places (offline gazetteer, ranked by agreeing clues):")
            out += [f"- {c.label} ({c.lat:.4f}, {c.lon:.4f}): {'; '.join(c.evidence[:3])}"
                    for c in unique[:MAX_CANDIDATES]]  # fmt: skip
    return _clip("\n".join(out))


class OfflineObserver:
    """``--observer offline``: EXIF, OCR and text clues, no model and no network."""

    name = "offline"

    def __init__(self, engine: str = "rapidocr", metadata: bool = True) -> None:
        self.engine = engine
        self.metadata = metadata  # False in benchmark runs: pixels only

    async def observe(
        self, image: Image.Image, target: Target, *, frame: Frame | None = None, path: str | None = None
    ) -> Observation:
        start = time.perf_counter()
        text = await asyncio.to_thread(
            describe_offline, image, target, frame, path, self.engine, self.metadata
        )
        return Observation(text, self.name, target, time.perf_counter() - start)

    async def aclose(self) -> None:
        return None


# -- model ---------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def observer_prompts() -> dict[str, str]:
    """``agent/prompts/observer.yaml``: the macro-to-micro photo prompt and the region prompt."""
    from geosleuth.agent.prompting import prompt_file

    data = prompt_file("geosleuth.agent", "observer", frozenset({"photo", "region"}))
    return {k: str(v) for k, v in data.items()}


class ModelObserver:
    """``--observer MODEL``: a vision model describes the photo and every region zoomed into."""

    def __init__(self, client: Any, max_tokens: int = 1024, pixel_budget: int = 1_000_000) -> None:
        self.client = client
        self.max_tokens = max_tokens
        self.pixel_budget = pixel_budget

    @property
    def name(self) -> str:
        return str(self.client.model)

    def messages(self, data_url: str, target: Target, frame: Frame | None) -> list[dict[str, Any]]:
        from geosleuth.agent.prompting import render

        prompts = observer_prompts()
        if target == "photo" and frame is not None:
            note = render(prompts[f"boxes_{frame.convention}"], image_width=frame.size[0],
                          image_height=frame.size[1])  # fmt: skip
            text = render(prompts["photo"], boxes_note=note)
        else:
            text = prompts["region"]
        content = [
            {"type": "image_url", "image_url": {"url": data_url}},
            {"type": "text", "text": text.strip()},
        ]
        return [
            {"role": "system", "content": prompts["system"].strip()},
            {"role": "user", "content": content},
        ]

    async def observe(
        self, image: Image.Image, target: Target, *, frame: Frame | None = None, path: str | None = None
    ) -> Observation:
        """Describe ``image``; a failing observer is an observation with ``ok=False``, never an exception."""
        from geosleuth.agent.client import ModelError
        from geosleuth.agent.images import encode_data_url, fit_to_budget

        start = time.perf_counter()
        if frame is not None and target == "photo" and image.size != frame.size:
            image = image.resize(frame.size)  # the observer sees the frame the reasoner's boxes use
        small, _ = await asyncio.to_thread(fit_to_budget, image, self.pixel_budget)
        data_url = await asyncio.to_thread(encode_data_url, small)
        try:
            resp = await self.client.complete(
                self.messages(data_url, target, frame), temperature=0.0, max_tokens=self.max_tokens
            )
        except ModelError as exc:
            took = time.perf_counter() - start
            return Observation("", self.name, target, took, ok=False, error=f"observer {self.name}: {exc}")
        text = resp.first.content.strip()
        took = time.perf_counter() - start
        if not text:
            return Observation(
                "", self.name, target, took, resp.usage, False, f"observer {self.name} said nothing"
            )
        return Observation(_clip(text), self.name, target, took, resp.usage)

    async def aclose(self) -> None:
        await self.client.aclose()


def make_observer(config: Any) -> Observer | None:
    """The observer an `AgentConfig` asks for (None without ``observer``)."""
    spec = config.observer
    if spec is None:
        return None
    if spec.strip().lower() == "offline":
        return OfflineObserver(metadata=not getattr(config, "pixels_only", False))
    from geosleuth.agent.client import make_client

    client = make_client(config, spec, config.observer_base_url or config.base_url, agent=False)
    return ModelObserver(client, config.observer_max_tokens, config.pixel_budget or 1_000_000)
