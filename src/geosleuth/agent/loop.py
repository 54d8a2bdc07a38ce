"""The think–act–observe loop as a small explicit state machine.

``GENERATE`` asks the model for the next message and decides what it is: tool calls go to
``ACT``; a parsable final answer, or a second turn with neither, goes to ``DONE``. ``ACT``
runs the turn's calls concurrently, appends the observations (wrapped in
``<tool_response>`` as configured) and returns to ``GENERATE``. Budgets (turns, tool calls
per tool and in total, tokens, wall clock) end the loop with an explicit status; a
final-answer nudge goes out when a budget is nearly spent. Nothing the model writes can
crash the loop: bad calls become error observations the model reads.

With an observer (``--observer``) the model never receives pixels: the photo arrives as the
observer's description (recorded as turn 0, an ``observe_image`` call, which budgets do not
count), and images returned by tools are re-observed and answered in text.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from PIL import Image

from geosleuth.agent.client import (
    REASONING_FIELDS,
    ChatChoice,
    ChatClient,
    ModelError,
    RawToolCall,
    assistant_message,
    looks_like_image_rejection,
)
from geosleuth.agent.config import AgentConfig
from geosleuth.agent.images import PreparedImage
from geosleuth.agent.observer import OBSERVE_TOOL, Observation, Observer, observation_turn
from geosleuth.agent.prompting import PromptStyle, build_prompts, common, render
from geosleuth.agent.toolcalls import ParsedCall, parse_native, parse_text_calls
from geosleuth.agent.trajectory import ImageStore
from geosleuth.agent.workers import ParseTimeout, bounded, parse_pool
from geosleuth.core.parsing import parse_answer
from geosleuth.core.records import (
    ParseStatus,
    Prediction,
    Task,
    ToolCallRecord,
    Trajectory,
    TrajectoryStatus,
    Turn,
    cap_text,
)
from geosleuth.core.surrogates import clean_text
from geosleuth.tools.base import ToolContext, ToolRegistry, ToolResult
from geosleuth.tools.text import wrap_output

_ANSWERED = (ParseStatus.OK, ParseStatus.PARTIAL)

TurnCallback = Callable[[int, Turn], None]
"""``on_turn(sample_index, turn)``: called when a turn is generated and again once its tools ran."""


class State(StrEnum):
    GENERATE = "generate"
    ACT = "act"
    DONE = "done"


class AgentLoop:
    """One trajectory for one task; `run` returns the recorded `Trajectory`."""

    def __init__(
        self,
        task: Task,
        config: AgentConfig,
        style: PromptStyle,
        client: ChatClient,
        registry: ToolRegistry,
        image: Image.Image,
        prepared: PreparedImage,
        store: ImageStore,
        *,
        sample_index: int = 0,
        on_turn: TurnCallback | None = None,
        observer: Observer | None = None,
        observation: Observation | None = None,
    ) -> None:
        if (observer is None) != (observation is None):
            raise ValueError("an observer and its observation of the photo come together")
        self.observer = observer
        self.task = task
        self.sample_index = sample_index
        self.on_turn = on_turn
        self.config = config
        self.client = client
        self.registry = registry
        self.store = store
        self.tool_calling = config.tool_calling or style.tool_calling
        self.max_turns = config.max_turns or style.max_turns
        self.max_tool_calls = (
            config.max_tool_calls if config.max_tool_calls is not None else style.max_tool_calls
        )
        bbox = config.bbox_convention or style.bbox_convention
        self.schemas = registry.schemas()
        self.seed = None if config.seed is None else config.seed + sample_index
        system, user = build_prompts(
            style, task, self.schemas, self.tool_calling, bbox, prepared.image.size,
            observer=observer.name if observer is not None else None,
        )  # fmt: skip
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        if observation is not None:
            seen = render(common()["observation"], observation=_observed_text(observation)).strip()
            self.messages.append({"role": "user", "content": f"{user}\n\n{seen}"})
        else:
            query_ref = store.add_encoded(
                clean_text(str(Path(task.image).resolve()))[0] if task.image else "query", prepared.data_url
            )  # the path as recorded: a file name that is not UTF-8 keeps U+FFFD for its bad bytes
            self.messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": query_ref}},
                        {"type": "text", "text": user},
                    ],
                }
            )
        self.ctx = ToolContext(
            image=image,
            image_path=None if config.pixels_only else task.image,  # a path lets a tool read the file
            model_scale=prepared.scale,
            model_size=prepared.image.size,  # the exact frame sent, which the prompt states
            bbox_convention=bbox,
            artifacts_dir=store.artifacts_dir,
            settings=config.tool_settings,
        )
        self.traj = Trajectory(
            sample_id=task.id,
            model=client.model,
            prompt_style=style.name,
            image_scale=prepared.scale,
            metadata={
                "tool_schemas": self.schemas,
                "tool_calling": self.tool_calling,
                "bbox_convention": bbox,
                "answer_protocol": style.protocol,
                "sample_index": sample_index,
                "image_size_sent": list(prepared.image.size),
                "image_size_original": list(prepared.original_size),
            },
        )
        self.observed_turns = 0  # observation turns, which no budget counts
        if observation is not None:
            self.traj.turns.append(observation_turn(observation, 0))
            self.observed_turns = 1
            self.traj.metadata["observer"] = {"name": observation.observer, "observations": 1,
                                              "latency_s": observation.latency_s,
                                              "usage": observation.usage.model_dump()}  # fmt: skip
        self.calls_per_tool: Counter[str] = Counter()
        self.total_calls = 0
        self.reminded = False
        self.pending: list[ParsedCall] = []
        self.pending_native = False
        self.pending_choice: ChatChoice | None = None
        self.parse_problem: str | None = None
        parse_pool().start()  # workers load the parsers while the model thinks

    @property
    def model_turns(self) -> int:
        """Turns the model generated (observations are not turns of the budget)."""
        return len(self.traj.turns) - self.observed_turns

    # -- driver ----------------------------------------------------------------------------

    async def run(self) -> Trajectory:
        observed = self.traj.turns[0] if self.observed_turns else None
        # the photo's observation is part of the trajectory's wall time
        self.traj.started_at = time.time() - (observed.latency_s if observed else 0.0)
        if observed is not None:
            self._notify(observed)
        state = State.GENERATE
        try:
            async with asyncio.timeout(self.config.timeout_s):
                while state is not State.DONE:
                    state = await (self._generate() if state is State.GENERATE else self._act())
        except TimeoutError:
            self._finish(TrajectoryStatus.TIMEOUT, f"trajectory exceeded {self.config.timeout_s:g} s")
        self.traj.messages = self.messages
        self.traj.finished_at = time.time()
        return self.traj

    def _finish(
        self, status: TrajectoryStatus, error: str | None = None, prediction: Prediction | None = None
    ) -> State:
        self.traj.status = status
        self.traj.error = error
        if prediction is not None:
            self.traj.prediction = prediction
        return State.DONE

    # -- states ----------------------------------------------------------------------------

    async def _generate(self) -> State:
        native_tools = self.schemas if self.tool_calling == "native" and self.schemas else None
        try:
            resp = await self.client.complete(
                self.messages,
                native_tools,
                temperature=self.config.temperature,
                top_p=self.config.top_p,
                top_k=self.config.top_k,
                max_tokens=self.config.max_tokens,
                seed=self.seed,
                reasoning_effort=self.config.reasoning_effort,
                extra_body=self.config.extra_body or None,
                image_urls=self.store.data_urls,
            )
        except ModelError as exc:
            return self._finish(TrajectoryStatus.MODEL_ERROR, self._model_error(exc))
        _count_replaced(self.traj, "model", resp.replaced_surrogates)
        choice, truncated = _capped_choice(resp.first, self.config.max_turn_text_chars)
        cap = self.config.max_calls_per_turn
        dropped = max(0, len(choice.tool_calls) - cap) + choice.dropped_tool_calls
        if dropped:  # a flood of native calls: only the first `cap` are kept, replayed or recorded
            choice = replace(choice, tool_calls=choice.tool_calls[:cap])
        self.pending_choice = choice
        turn = Turn(
            index=len(self.traj.turns),
            text=choice.content,
            reasoning=choice.reasoning,
            latency_s=resp.latency_s,
            usage=resp.usage,
            truncated=truncated,
        )
        self.traj.turns.append(turn)
        calls = await self._calls(choice, turn)
        turn.dropped_calls = dropped + max(0, len(calls) - cap)
        calls = calls[:cap]
        self._notify(turn)
        if calls:
            self.pending, self.pending_native = calls, bool(choice.tool_calls)
            spent = self._budget_spent()
            if spent:
                self._append_assistant(choice, calls, self.pending_native)
                turn.tool_calls = [_not_run(c, f"{spent}; the call was not run") for c in calls]
                answer = await self._parse(choice.content)
                return self._finish(
                    TrajectoryStatus.BUDGET_EXHAUSTED,
                    f"still calling tools when the budget ran out ({spent})",
                    answer if _is_answer(answer) else None,
                )
            return State.ACT
        return await self._on_text(turn, choice)

    def _model_error(self, exc: ModelError) -> str:
        """The error text, naming ``--observer`` when the server refused the images it was sent."""
        if self.observer is None and self.store.data_urls and looks_like_image_rejection(exc):
            return (
                f"{exc} -- the server refused the image input (a text-only model reads an image as "
                "text, or rejects it): run with --observer offline (the offline clue pipeline "
                "describes the image) or --observer VISION_MODEL (a VLM describes it)"
            )
        return str(exc)

    def _notify(self, turn: Turn) -> None:
        """Let a watcher (the web app) see the turn as it happens; a no-op without one."""
        if self.on_turn is not None:
            self.on_turn(self.sample_index, turn)

    def _budget_spent(self) -> str | None:
        """Why no further turn may start (turns or tokens used up), or None."""
        if self.model_turns >= self.max_turns:
            return f"turn budget of {self.max_turns} spent"
        budget = self.config.max_total_tokens
        if budget and self.traj.usage.total_tokens >= budget:
            return f"token budget of {budget} spent"
        return None

    async def _calls(self, choice: ChatChoice, turn: Turn) -> list[ParsedCall]:
        if choice.tool_calls:
            return parse_native(choice.tool_calls)
        if not self.schemas:
            return []
        try:
            return await bounded(
                self.config.parse_timeout_s, parse_text_calls, choice.content, self.registry.names()
            )
        except ParseTimeout as exc:
            turn.note = f"tool calls not read: {exc}"
            return []

    async def _parse(self, text: str) -> Prediction:
        """The answer, parsed off the event loop with a deadline: a pathological text costs its
        own trajectory a parse failure, never another trajectory its time."""
        try:
            return await bounded(
                self.config.parse_timeout_s, parse_answer, text, "robust", choices=self.task.choices or None
            )
        except ParseTimeout as exc:
            self.parse_problem = str(exc)
            return Prediction(raw=text[:2000], status=ParseStatus.FAILED)

    async def _on_text(self, turn: Turn, choice: ChatChoice) -> State:
        """A turn without tool calls: the final answer, a reminder, or a parse failure."""
        text = choice.content
        echo = self.client.profile.echo_reasoning
        self.messages.append(assistant_message(choice, text, echo_reasoning=echo))
        prediction = await self._parse(text)
        if self.config.geocode_answers and _is_answer(prediction) and not prediction.has_coords:
            prediction = await asyncio.to_thread(_geocoded, text, self.task.choices or None)
        if _is_answer(prediction):
            return self._finish(TrajectoryStatus.OK, prediction=prediction)
        if not self.reminded and self.model_turns < self.max_turns:
            self.reminded = True
            turn.note = "reminder sent"
            self.messages.append({"role": "user", "content": common()["reminder"]})
            return State.GENERATE
        why = f" ({self.parse_problem})" if self.parse_problem else ""
        return self._finish(
            TrajectoryStatus.PARSE_FAILED, f"no final answer could be parsed{why}", prediction
        )

    async def _act(self) -> State:
        calls, native = self.pending, self.pending_native
        turn = self.traj.turns[-1]
        results = await asyncio.gather(*(self._run_call(c) for c in calls))
        records = []
        observed = await asyncio.gather(*(self._observe_images(r) for r in results))
        for j, (call, result, (seen, seen_error)) in enumerate(zip(calls, results, observed, strict=True)):
            _count_replaced(self.traj, "tools", result.replaced_surrogates)
            refs = []
            for k, img in enumerate(result.images):  # PNG + JPEG encoding off the event loop
                refs.append(await asyncio.to_thread(self.store.add, img, f"t{turn.index}_c{j}_{k}"))
            records.append(
                ToolCallRecord(
                    id=call.id,
                    name=call.name,
                    arguments=call.arguments if call.arguments is not None else {"_raw": call.raw},
                    ok=result.ok and seen_error is None,
                    error=result.error or seen_error,
                    result_text="\n".join(t for t in (result.text, seen) if t),
                    result_images=refs,
                    latency_s=result.latency_s,
                    cache_hit=result.cache_hit,
                    provider=result.provider,
                )
            )
        turn.tool_calls = records
        self._notify(turn)
        self._append_assistant(self.pending_choice, calls, native)
        nudge = self._nudge_reason()
        if nudge:
            turn.note = "final-answer nudge"
        self._append_observations(records, native, nudge, turn.dropped_calls)
        return State.GENERATE

    async def _observe_images(self, result: ToolResult) -> tuple[str, str | None]:
        """With an observer, the text that stands in for a tool's images, and an error if it failed."""
        if self.observer is None or not result.images:
            return "", None
        parts, errors = [], []
        for img in result.images:
            seen = await self.observer.observe(img, "region")
            self._count_observation(seen)
            if seen.ok:
                parts.append(_observed_text(seen))
            else:
                errors.append(seen.error or "the observer failed")
        error = f"the observer could not describe the image: {'; '.join(errors)}" if errors else None
        return "\n".join(parts), error

    def _count_observation(self, seen: Observation) -> None:
        info = self.traj.metadata.setdefault(
            "observer", {"name": seen.observer, "observations": 0, "latency_s": 0.0, "usage": {}}
        )
        info["observations"] += 1
        info["latency_s"] += seen.latency_s
        for key, value in seen.usage.model_dump().items():
            info["usage"][key] = info["usage"].get(key, 0) + value

    async def _run_call(self, call: ParsedCall) -> ToolResult:
        """Budget checks, then the registry (which turns every tool failure into a result)."""
        if call.error:
            return ToolResult.failure(f'{call.error}. Call format: {{"name": <tool>, "arguments": {{…}}}}')
        if call.name in self.registry:
            limit = self.config.tool_call_limits.get(call.name)
            if limit is not None and self.calls_per_tool[call.name] >= limit:
                return ToolResult.failure(
                    f"{call.name} may be called at most {limit} times; answer with what you have"
                )
            if self.max_tool_calls is not None and self.total_calls >= self.max_tool_calls:
                return ToolResult.failure(
                    f"tool-call budget of {self.max_tool_calls} calls is spent; give your final answer"
                )
            self.calls_per_tool[call.name] += 1
            self.total_calls += 1
        return await self.registry.call(call.name, call.arguments, self.ctx)

    # -- messages --------------------------------------------------------------------------

    def _nudge_reason(self) -> str | None:
        turns_left = self.max_turns - self.model_turns
        if turns_left <= self.config.nudge_turns_left:
            return f"{turns_left} turn(s) left"
        if self.max_tool_calls is not None and self.total_calls >= self.max_tool_calls:
            return f"all {self.max_tool_calls} tool calls used"
        budget = self.config.max_total_tokens
        used = self.traj.usage.total_tokens
        if (
            budget and used + self.traj.turns[-1].usage.total_tokens >= budget
        ):  # the next turn costs at least as much
            return f"{used} of {budget} tokens used"
        return None

    def _append_assistant(self, choice: ChatChoice | None, calls: list[ParsedCall], native: bool) -> None:
        """The assistant turn as the server must see it again, with every field it sent that the
        client does not read (thought signatures, reasoning details)."""
        choice = choice or ChatChoice("")
        echo = self.client.profile.echo_reasoning
        if not native:
            self.messages.append(assistant_message(choice, choice.content, echo_reasoning=echo))
            return
        wire = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json}}
            for c in calls
        ]
        # "" rather than null: servers that validate strictly (llama-cpp-python) reject a null content
        self.messages.append(assistant_message(choice, choice.content, wire, echo_reasoning=echo))

    def _append_observations(
        self, records: list[ToolCallRecord], native: bool, nudge: str | None, dropped: int = 0
    ) -> None:
        """Tool results into the conversation in the configured style, then what the model must
        know: calls dropped past the per-turn cap, and the final-answer nudge."""
        notes = [_dropped_note(dropped, self.config.max_calls_per_turn)] if dropped else []
        notes += [render(common()["nudge"], reason=nudge)] if nudge else []
        nudge_text = "\n\n".join(notes) or None
        blind = self.observer is not None  # images were answered in text by the observer
        if not native:
            parts: list[dict[str, Any]] = []
            for r in records:
                parts.append({"type": "text", "text": f"<tool_response>\n{_result_text(r)}"})
                if not blind:
                    parts.extend({"type": "image_url", "image_url": {"url": ref}} for ref in r.result_images)
                parts.append({"type": "text", "text": "\n</tool_response>"})
            if nudge_text:
                parts.append({"type": "text", "text": nudge_text})
            self.messages.append({"role": "user", "content": parts})
            return
        in_tool_role = self.config.tool_result_role == "tool"
        wrapped: list[dict[str, Any]] = []
        for r in records:
            refs = [] if blind else r.result_images
            images = [{"type": "image_url", "image_url": {"url": ref}} for ref in refs]
            content: Any = _result_text(r)
            if images and in_tool_role:
                content = [{"type": "text", "text": content}, *images]
            elif images:
                wrapped.append({"type": "text", "text": f"<tool_response>\n[{r.name} result {r.id}]"})
                wrapped.extend(images)
                wrapped.append({"type": "text", "text": "\n</tool_response>"})
            self.messages.append({"role": "tool", "tool_call_id": r.id, "content": content})
        if nudge_text:
            wrapped.append({"type": "text", "text": nudge_text})
        if wrapped:
            self.messages.append({"role": "user", "content": wrapped})


def _count_replaced(traj: Trajectory, source: str, replaced: int) -> None:
    """Keep, under ``metadata["replaced_surrogates"]``, how many lone surrogates each source's text
    carried (replaced by U+FFFD where it entered: `geosleuth.core.surrogates`)."""
    if replaced:
        counts = traj.metadata.setdefault("replaced_surrogates", {})
        counts[source] = counts.get(source, 0) + replaced


def _capped_choice(choice: ChatChoice, max_chars: int) -> tuple[ChatChoice, dict[str, int]]:
    """The reply as the turn stores and the conversation replays it: content and reasoning cut
    to ``max_chars`` (head and tail), the fields the client echoes unread kept within
    ``max_chars`` of JSON, with the original lengths of what was cut."""
    content, content_len = cap_text(choice.content, max_chars)
    reasoning, reasoning_len = cap_text(choice.reasoning, max_chars) if choice.reasoning else (None, None)
    extra, calls, extra_len = _capped_extras(choice, max_chars)
    cut = {
        k: n
        for k, n in (("text", content_len), ("reasoning", reasoning_len), ("extra", extra_len))
        if n is not None
    }
    if not cut:
        return choice, {}
    capped = replace(choice, content=content, reasoning=reasoning or choice.reasoning)
    return replace(capped, extra=extra, tool_calls=calls), cut


def _capped_extras(
    choice: ChatChoice, max_chars: int
) -> tuple[dict[str, Any], list[RawToolCall], int | None]:
    """The fields a server sent that the client does not read (thought signatures, reasoning
    details), of the message and of each call, kept in order while their JSON fits in
    ``max_chars`` together; the rest are dropped. They go back with every later turn, so a
    reply's megabytes of them would be re-sent and stored each turn (issue 41). The reasoning
    text (DeepSeek's, echoed) is cut as the turn's reasoning is. Returns the kept fields, the
    calls and, when something was dropped, the JSON length of them all."""
    budget, total, dropped = max_chars, 0, False
    extra: dict[str, Any] = {}
    for key, value in choice.extra.items():
        if key in REASONING_FIELDS and isinstance(value, str):
            extra[key] = cap_text(value, max_chars)[0]
            continue
        size = _json_chars(value)
        total += size
        if size <= budget:
            extra[key], budget = value, budget - size
        else:
            dropped = True
    calls = []
    for call in choice.tool_calls:
        size = _json_chars(call.extra) if call.extra else 0
        total += size
        if size <= budget:
            calls.append(call)
            budget -= size
        else:
            calls.append(replace(call, extra={}))
            dropped = True
    return extra, calls, total if dropped else None


def _json_chars(value: Any) -> int:
    """Length of ``value`` as JSON; a value that cannot be written counts as too long to keep."""
    try:
        return len(json.dumps(value, ensure_ascii=False, default=str))
    except (RecursionError, ValueError):
        return 2**62


def _dropped_note(dropped: int, cap: int) -> str:
    """What the model reads about calls past the per-turn cap: counted, never stored or run."""
    return (
        f"{dropped:,} more tool call(s) in your last reply were dropped, not run: at most {cap} tool "
        "calls run per turn; call fewer tools at once"
    )


def _is_answer(prediction: Prediction) -> bool:
    """A final answer names coordinates, a choice or a place level; robust parsing alone
    reads any prose as an "address", which is thinking out loud, not an answer."""
    if prediction.status not in _ANSWERED:
        return False
    return prediction.has_coords or bool(
        prediction.choice or prediction.country or prediction.city or prediction.admin1
    )


def _geocoded(text: str, choices: list[str] | None) -> Prediction:
    """Parse again with the offline gazetteer as geocoder (coords_source becomes "geocoded")."""
    from geosleuth.gazetteer import get_gazetteer

    return parse_answer(text, "robust", geocoder=get_gazetteer(), choices=choices)


def _result_text(record: ToolCallRecord) -> str:
    if record.result_text:
        return record.result_text
    if record.result_images:
        return f"({len(record.result_images)} image(s))"
    return "(no output)" if record.ok else f"Error: {record.error}"


def _observed_text(seen: Observation) -> str:
    """An observation as the reasoner reads it: fenced, since OCR text is data, not instructions."""
    body = seen.text if seen.ok else f"(no description: {seen.error})"
    return wrap_output(f"{OBSERVE_TOOL} {seen.target} by {seen.observer}", body)


def _not_run(call: ParsedCall, reason: str) -> ToolCallRecord:
    return ToolCallRecord(
        id=call.id,
        name=call.name,
        arguments=call.arguments if call.arguments is not None else {"_raw": call.raw},
        ok=False,
        error=reason,
    )
