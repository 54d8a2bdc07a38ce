"""Cold-start trajectory synthesis (SpotAgent): an observer VLM and a planner LLM, real tools.

The observer looks at the photo and describes its clues from macro (climate, terrain,
vegetation, architecture) to micro (text, signs, plates); it also describes every zoomed
region the zoom tool returns. It is a VLM (a chat client, prompted as below) or any
`geosleuth.agent.observer.Observer` — ``--observer offline`` uses the offline clue pipeline
(OCR text with positions, EXIF, languages, phone numbers, domains, candidate places).
The planner never sees pixels: it reads those descriptions,
calls tools (executed for real through the geosleuth registry, providers and cache) and
concludes with coordinates. A trajectory is kept only if every tool call was valid and the
answer lies within ``delta_km`` of the truth; every rejection is recorded with its reason.

The kept trajectory is rewritten as the vision model being trained should produce it: the
image in the user turn, the observer's descriptions and the planner's reasoning as the
assistant's ``<think>``, the same tool calls and tool responses (zoomed images saved beside
the JSONL), and a JSON ``<answer>``. Output goes to ``trajectories.jsonl`` (kept) and
``rejected.jsonl``; a rerun skips every sample already in either (resumable).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from geosleuth.core.geo import haversine_km
from geosleuth.core.parsing import parse_answer
from geosleuth.core.records import Sample, Task, ToolCallRecord, Trajectory, TrajectoryStatus, Turn
from geosleuth.eval.run.store import TrajectoryStore
from geosleuth.tools.base import ToolContext, ToolRegistry
from geosleuth.training.data.planner_text import (
    opening_messages,
    reasoning_before,
    response_format,
    tool_results,
)

OBSERVE_PROMPT = (
    "Describe the clues in this photo that help tell where it was taken, from macro to micro: "
    "climate and terrain, vegetation, architecture and infrastructure, vehicles and driving side, "
    "then any text, signs, logos, licence plates or phone numbers (quote text exactly). "
    "Give notable regions as pixel boxes [x1, y1, x2, y2] when small details may need a closer look. "
    "Do not guess the location."
)
ZOOM_PROMPT = (
    "This is a zoomed region of the photo. Describe every detail in it that helps geolocate the photo; "
    "quote text exactly."
)
PLANNER_SYSTEM = (
    "You geolocate photos you cannot see. An observer describes the photo ({width}x{height} pixels) and any "
    "region you zoom into. Reason step by step, call tools to check hypotheses, and when confident reply "
    "with only the final answer as JSON: "
    '{{"lat": <deg>, "lon": <deg>, "city": "<city>", "country": "<country>"}}.'
)


KEPT, REJECTED = "trajectories.jsonl", "rejected.jsonl"
BOX_ARGUMENTS = ("bbox_2d", "region")


def in_style_frame(arguments: dict[str, Any], seen_size: tuple[int, int], convention: str) -> dict[str, Any]:
    """Tool arguments with boxes in the trained style's convention.

    The planner always works in absolute pixels of the image it was told about; a style that
    uses the 0-1000 relative frame must see its boxes written that way in the SFT data.
    """
    if convention != "relative1000":
        return arguments
    width, height = seen_size
    out = dict(arguments)
    for key in BOX_ARGUMENTS:
        box = out.get(key)
        if isinstance(box, list) and len(box) == 4 and all(isinstance(v, int | float) for v in box):
            x1, y1, x2, y2 = box
            out[key] = [round(x1 * 1000 / width), round(y1 * 1000 / height),
                        round(x2 * 1000 / width), round(y2 * 1000 / height)]  # fmt: skip
    return out


class ChatLike(Protocol):
    """What synthesis needs of a model client (`geosleuth.agent.client.ChatClient` fits)."""

    model: str

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **kw: Any
    ) -> Any: ...


class ChatObserver:
    """A chat client as the observer VLM, with the synthesis prompts above."""

    def __init__(self, client: ChatLike, max_tokens: int = 1024, pixel_budget: int = 1_000_000) -> None:
        self.client = client
        self.max_tokens = max_tokens
        self.pixel_budget = pixel_budget

    @property
    def name(self) -> str:
        return self.client.model

    async def observe(self, image: Any, target: str, *, frame: Any = None, path: str | None = None) -> Any:
        """Describe ``image``; a model failure raises `ModelError` (a retryable rejection)."""
        from geosleuth.agent.images import encode_data_url, fit_to_budget
        from geosleuth.agent.observer import Observation

        start = time.perf_counter()
        small, _ = fit_to_budget(image, self.pixel_budget)
        prompt = OBSERVE_PROMPT if target == "photo" else ZOOM_PROMPT
        content = [
            {"type": "image_url", "image_url": {"url": encode_data_url(small)}},
            {"type": "text", "text": prompt},
        ]
        resp = await self.client.complete(
            [{"role": "user", "content": content}], temperature=0.2, max_tokens=self.max_tokens
        )
        text = resp.first.content.strip()
        return Observation(text, self.name, target, time.perf_counter() - start, resp.usage, ok=bool(text),  # type: ignore[arg-type]
                           error=None if text else "the observer returned no description")  # fmt: skip


@dataclass(frozen=True)
class SynthesisConfig:
    tools: tuple[str, ...] = ("image_zoom_in_tool", "web_search", "geocode")
    max_steps: int = 6
    delta_km: float = 5.0
    concurrency: int = 4
    pixel_budget: int = 1_000_000
    style: str = "spotagent"
    temperature: float = 0.7
    max_tokens: int = 1024
    tool_calling: str = "native"  # "text": the planner writes JSON calls in its reply (`planner_text`)
    constrained: bool = False  # text mode: a JSON schema admits only a tool call or the answer
    min_tool_calls: int = 1  # a trajectory answered with fewer valid calls teaches no tool use
    geocode_answers: bool = False  # an answer naming a place without coordinates gets the gazetteer's

    @property
    def answer_kind(self) -> str:
        return "place" if self.geocode_answers else "coordinates"


@dataclass
class Outcome:
    sample_id: str
    trajectory: Trajectory | None = None
    reason: str | None = None  # rejection reason, None when kept
    detail: str = ""


@dataclass
class _Step:
    thought: str
    records: list[ToolCallRecord] = field(default_factory=list)
    image_refs: list[list[str]] = field(default_factory=list)


class Rejected(Exception):
    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class Synthesizer:
    """Runs observer + planner + tools for each sample and keeps only verified trajectories."""

    def __init__(
        self,
        config: SynthesisConfig,
        registry: ToolRegistry,
        observer: Any,
        planner: ChatLike,
        out_dir: Path,
    ) -> None:
        """``observer``: an `Observer` (``observe`` method) or a chat client used as the observer VLM."""
        self.config = config
        self.registry = registry.subset([t for t in config.tools if t in registry])
        missing = [t for t in config.tools if t not in registry]
        if missing:
            raise ValueError(f"unknown tool(s) {missing}; available: {registry.names()}")
        if not hasattr(observer, "observe"):
            observer = ChatObserver(observer, config.max_tokens, config.pixel_budget)
        self.observer = observer
        self.planner = planner
        self.out_dir = out_dir

    async def _observe(self, image: Any, target: str, frame: Any = None, path: str | None = None) -> str:
        seen = await self.observer.observe(image, target, frame=frame, path=path)
        if seen.ok:
            return str(seen.text)
        if seen.text == "" and seen.error == "the observer returned no description":
            raise Rejected("observer_empty", seen.error)
        raise Rejected("model_error", str(seen.error)[:300])  # an observer outage says nothing of the sample

    async def synthesize(self, sample: Sample) -> Outcome:
        """One sample; every failure becomes a rejection with a reason, never an exception."""
        from geosleuth.agent.client import ModelError

        try:
            return await self._synthesize(sample)
        except Rejected as rej:
            return Outcome(sample.id, reason=rej.reason, detail=rej.detail)
        except ModelError as exc:
            return Outcome(sample.id, reason="model_error", detail=str(exc)[:300])

    async def _synthesize(self, sample: Sample) -> Outcome:
        from geosleuth.agent.client import assistant_message
        from geosleuth.agent.images import ImageInputError, fit_to_budget, load_image
        from geosleuth.agent.observer import Frame
        from geosleuth.agent.trajectory import ImageStore, safe_name

        if sample.lat is None or sample.lon is None or not sample.image:
            raise Rejected("input_error", "sample needs an image and coordinates")
        try:
            image = load_image(sample.image)
        except (ImageInputError, OSError) as exc:
            raise Rejected("input_error", str(exc)) from None
        seen, scale = fit_to_budget(image, self.config.pixel_budget)
        store = ImageStore(self.out_dir, safe_name(sample.id), self.config.pixel_budget)
        ctx = ToolContext(image=image, image_path=sample.image, model_scale=scale, artifacts_dir=self.out_dir)
        description = await self._observe(image, "photo", Frame(seen.size, "absolute", scale), sample.image)
        schemas = self.registry.schemas()
        text_mode = self.config.tool_calling == "text"
        messages = self._opening(schemas, seen.size, description)
        steps: list[_Step] = []
        pending_notes = [description]
        calls_made = 0
        for n_step in range(self.config.max_steps):
            last = n_step == self.config.max_steps - 1
            may_answer = calls_made >= self.config.min_tool_calls
            choice = await self._plan(
                messages, schemas, may_answer=may_answer, may_call=not (last and may_answer)
            )
            calls = self._calls(choice)
            raw = calls[0].raw if text_mode and calls else None
            reasoning = reasoning_before(choice.content, raw) if text_mode else _reasoning(choice.content)
            thought = "\n\n".join([*pending_notes, reasoning]).strip()
            pending_notes = []
            if not calls:
                if calls_made < self.config.min_tool_calls:
                    raise Rejected(
                        "no_tool_call", f"answered after {calls_made} tool call(s): {choice.content[:160]}"
                    )
                return self._finish(sample, steps, thought, choice.content, schemas, seen.size)
            step = _Step(thought)
            if text_mode:
                messages.append({"role": "assistant", "content": choice.content})
            else:
                wire = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments_json},
                    }
                    for c in calls
                ]  # with the fields the server sent and the client does not read (thought signatures)
                messages.append(assistant_message(choice, choice.content, wire))  # "" not null: see the loop
            outputs: list[str] = []
            for n, call in enumerate(calls):
                if call.error:
                    raise Rejected("invalid_tool_call", f"{call.name}: {call.error}")
                result = await self.registry.call(call.name, call.arguments, ctx)
                if not result.ok:
                    raise Rejected("invalid_tool_call", f"{call.name}: {result.error}")
                calls_made += 1
                refs = [store.add(img, f"step{len(steps)}_{n}_{k}") for k, img in enumerate(result.images)]
                notes = [await self._observe(img, "region") for img in result.images]
                pending_notes += notes
                step.records.append(
                    ToolCallRecord(
                        id=call.id,
                        name=call.name,
                        arguments=call.arguments or {},
                        ok=True,
                        result_text=result.text,
                        result_images=refs,
                        latency_s=result.latency_s,
                        cache_hit=result.cache_hit,
                        provider=result.provider,
                    )
                )
                step.image_refs.append(refs)
                observed = "\n".join([result.text, *[f"[zoomed region] {t}" for t in notes]]).strip()
                outputs.append(observed or "(no output)")
                if not text_mode:
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": outputs[-1]})
            if text_mode:  # servers drop or mangle the tool role for plain chat: output comes as a user turn
                messages.append({"role": "user", "content": tool_results(outputs)})
            steps.append(step)
        raise Rejected("max_steps", f"no final answer after {self.config.max_steps} planner steps")

    def _opening(
        self, schemas: list[dict[str, Any]], size: tuple[int, int], description: str
    ) -> list[dict[str, Any]]:
        if self.config.tool_calling == "text":
            return opening_messages(schemas, size, description, self.config.answer_kind)
        return [
            {"role": "system", "content": PLANNER_SYSTEM.format(width=size[0], height=size[1])},
            {"role": "user", "content": f"Observer's description of the photo:\n{description}"},
        ]

    async def _plan(
        self,
        messages: list[dict[str, Any]],
        schemas: list[dict[str, Any]],
        *,
        may_answer: bool,
        may_call: bool,
    ) -> Any:
        """One planner reply: native tools offered, or (text mode) none, with the schema when constrained."""
        sampling = {"temperature": self.config.temperature, "max_tokens": self.config.max_tokens}
        if self.config.tool_calling != "text":
            return (await self.planner.complete(messages, schemas, **sampling)).first
        kind = self.config.answer_kind
        fmt = response_format(schemas, may_answer=may_answer, may_call=may_call, answer=kind)
        extra = {"response_format": fmt} if self.config.constrained else None
        return (await self.planner.complete(messages, None, extra_body=extra, **sampling)).first

    def _calls(self, choice: Any) -> list[Any]:
        from geosleuth.agent.toolcalls import parse_native, parse_text_calls

        if self.config.tool_calling != "text":
            return parse_native(choice.tool_calls)
        return parse_text_calls(choice.content, self.registry.names())

    def _finish(
        self,
        sample: Sample,
        steps: list[_Step],
        thought: str,
        final_text: str,
        schemas: list[dict[str, Any]],
        seen_size: tuple[int, int],
    ) -> Outcome:
        pred = parse_answer(final_text, mode="robust")
        if (
            self.config.geocode_answers and not pred.has_coords
        ):  # as `locate` does: the named place's coordinates
            from geosleuth.gazetteer import get_gazetteer

            pred = parse_answer(final_text, mode="robust", geocoder=get_gazetteer())
        if not pred.has_coords:
            raise Rejected("no_answer", final_text[:200])
        _check_country(pred.country, sample)
        d = float(haversine_km(pred.lat, pred.lon, sample.lat, sample.lon))  # type: ignore[arg-type]
        if d > self.config.delta_km:
            raise Rejected("too_far", f"{d:.1f} km > {self.config.delta_km:g} km: {final_text[:160]}")
        # Thinking-with-Map's answer has one place slot, "city": a lone "X, Country" place fills it
        answer = {"lat": pred.lat, "lon": pred.lon, "city": pred.level("city"), "country": pred.country}
        final = f"<think>{thought}</think>\n<answer>{json.dumps(answer, ensure_ascii=False)}</answer>"
        messages = self._vlm_messages(sample, steps, final, schemas, seen_size)
        turns = [Turn(index=i, text=s.thought, tool_calls=s.records) for i, s in enumerate(steps)]
        turns.append(Turn(index=len(steps), text=final))
        traj = Trajectory(
            sample_id=sample.id,
            model=f"synth:{self.observer.name}+{self.planner.model}",
            prompt_style=self.config.style,
            messages=messages,
            turns=turns,
            prediction=pred,
            status=TrajectoryStatus.OK,
            finished_at=time.time(),
            metadata={
                "tool_schemas": schemas,
                "synthesis": {
                    "distance_km": d,
                    "delta_km": self.config.delta_km,
                    "planner_tool_calling": self.config.tool_calling,
                    "coords_source": pred.coords_source,
                },
            },
        )
        return Outcome(sample.id, trajectory=traj)

    def _vlm_messages(
        self,
        sample: Sample,
        steps: list[_Step],
        final: str,
        schemas: list[dict[str, Any]],
        seen_size: tuple[int, int],
    ) -> list[dict[str, Any]]:
        """The conversation as the trained VLM should produce it."""
        from geosleuth.agent.prompting import build_prompts, load_style

        style = load_style(self.config.style)
        system, user = build_prompts(
            style, Task.from_sample(sample), schemas, "native", style.bbox_convention, seen_size
        )
        image_url = Path(sample.image).resolve().as_uri()  # type: ignore[arg-type]
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": image_url}},
                    {"type": "text", "text": user},
                ],
            },
        ]
        for step in steps:
            messages.append(
                {
                    "role": "assistant",
                    "content": f"<think>{step.thought}</think>",
                    "tool_calls": [
                        {
                            "id": r.id,
                            "type": "function",
                            "function": {
                                "name": r.name,
                                "arguments": json.dumps(
                                    in_style_frame(r.arguments, seen_size, style.bbox_convention),
                                    ensure_ascii=False,
                                ),
                            },
                        }
                        for r in step.records
                    ],
                }
            )
            images: list[str] = []
            for r, refs in zip(step.records, step.image_refs, strict=True):
                messages.append({"role": "tool", "tool_call_id": r.id, "content": r.result_text or "(image)"})
                images += refs
            if images:
                messages.append(
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": ref}} for ref in images],
                    }
                )
        messages.append({"role": "assistant", "content": final})
        return messages

    def _done_ids(self) -> set[str]:
        """Ids already kept or rejected; a torn last line (interrupted run) is cut so that sample reruns.

        Model errors (endpoint down, timeouts) are not verdicts on the sample: their lines are
        dropped and those samples run again, as a rerun after an outage must not skip them.
        """
        done: set[str] = set()
        for name in (KEPT, REJECTED):
            log = TrajectoryStore(self.out_dir, name)
            log.repair()
            if name == REJECTED and log.path.exists():
                _drop_retryable(log.path)
            done.update(log.statuses())
        return done

    async def run(self, samples: list[Sample]) -> dict[str, Any]:
        """Synthesise every pending sample; append results as they finish; return the report."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        done = self._done_ids()
        todo = [s for s in samples if s.id not in done]
        sem = asyncio.Semaphore(max(1, self.config.concurrency))
        kept_path, rej_path = self.out_dir / KEPT, self.out_dir / REJECTED

        async def one(sample: Sample) -> Outcome:
            async with sem:
                outcome = await self.synthesize(sample)
            if outcome.trajectory is not None:
                line = outcome.trajectory.model_dump_json()
                path = kept_path
            else:
                line = json.dumps(
                    {"sample_id": outcome.sample_id, "reason": outcome.reason, "detail": outcome.detail}
                )
                path = rej_path
            with path.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")
            return outcome

        outcomes = await asyncio.gather(*(one(s) for s in todo))
        reasons = Counter(o.reason for o in outcomes if o.reason)
        report = {
            "samples": len(samples),
            "skipped_already_done": len(samples) - len(todo),
            "attempted": len(todo),
            "kept": sum(1 for o in outcomes if o.trajectory is not None),
            "rejected": dict(sorted(reasons.items())),
        }
        (self.out_dir / "synthesis_report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
        return report


def _reasoning(content: str) -> str:
    """The planner's text as reasoning: a reply that is only the JSON answer has none (the answer
    goes to ``<answer>``, not repeated in ``<think>``)."""
    text = content.strip()
    try:
        return "" if isinstance(json.loads(text), dict) else text
    except json.JSONDecodeError:
        return text


def _check_country(named: str | None, sample: Sample) -> None:
    """The answer's country, when given, must be a country (not a region) and the sample's own:
    the kept answer is training data, and a wrong label in it is taught as right."""
    from geosleuth.core.countries import resolve_country

    if named is None:
        return
    code = resolve_country(named)
    truth = resolve_country(sample.labels.get("country"))
    if code is None or (truth is not None and code != truth):
        raise Rejected("wrong_country", f"answer names {named!r} as the country")


RETRYABLE_REASONS = frozenset({"model_error"})
"""Rejection reasons that say nothing about the sample, so a rerun tries it again."""


def _drop_retryable(path: Path) -> None:
    """Rewrite ``rejected.jsonl`` without its retryable rejections (when it has any)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if _rejection_reason(line) not in RETRYABLE_REASONS]
    if len(kept) != len(lines):
        path.write_text("".join(kept), encoding="utf-8")


def _rejection_reason(line: str) -> str | None:
    try:
        rec = json.loads(line)
    except json.JSONDecodeError:
        return None
    return rec.get("reason") if isinstance(rec, dict) else None
