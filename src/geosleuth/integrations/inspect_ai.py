"""inspect_ai task ``geosleuth/geolocation``: any geosleuth dataset, a plain generate or geosleuth's
agent loop with its tools, scored under any geosleuth protocol.

Registered through inspect's ``inspect_ai`` entry point, so once geosleuth is installed::

    inspect eval geosleuth/geolocation -T dataset=path/to/im2gps3k -T protocol=twm --model ...

Metrics are those ``geosleuth score --protocol P`` prints, by the same names and units
(``acc@25km`` in percent, ``median_km``, ``geoguessr``, level accuracies): the metric scores
every sample's answer with the scoring engine itself. An answer that cannot be parsed is a
wrong answer, and the run goes on. With ``tools=True`` the solver is geosleuth's agent loop,
talking to the model inspect was given (``--model``) and calling geosleuth's tools; a model
that fails (a dead server) fails the sample as inspect's own generate does, never a wrong answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inspect_ai import Epochs, Task, task
from inspect_ai.dataset import MemoryDataset
from inspect_ai.dataset import Sample as InspectSample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    Content,
    ContentImage,
    ContentText,
    GenerateConfig,
    Model,
    ModelOutput,
    get_model,
)
from inspect_ai.scorer import (
    Metric,
    SampleScore,
    Score,
    Scorer,
    ScoreReducer,
    Target,
    mean_score,
    metric,
    score_reducer,
    scorer,
)
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import ToolCall, ToolInfo, ToolParams

from geosleuth.agent.client import ChatChoice, ChatResponse, ModelError, ProviderProfile, RawToolCall
from geosleuth.agent.config import AgentConfig
from geosleuth.agent.prompting import build_prompts, load_style
from geosleuth.bounds.imagemeta import pixels_only_data_url
from geosleuth.core.records import Task as GeoTask
from geosleuth.core.records import Trajectory, TrajectoryStatus, Usage
from geosleuth.eval.datasets.frozen import image_metadata
from geosleuth.eval.datasets.layouts import SOURCE_HOSTS
from geosleuth.eval.datasets.loading import Dataset, DatasetError, load_dataset
from geosleuth.eval.run.config import split_list
from geosleuth.eval.run.pipeline import check_images, sample_guard
from geosleuth.eval.run.styles import choose_style
from geosleuth.integrations.harness import Answered, defined, row_result, score_answers
from geosleuth.scoring import get_protocol
from geosleuth.scoring.io import truth_record
from geosleuth.tools.leakguard import GUARD_MODES, GuardSpec, guarding

META = "geosleuth"
"""Key of geosleuth's data in inspect's sample metadata, score metadata and task state."""


@task
def geolocation(
    dataset: str,
    protocol: str = "default",
    prompt: str | None = None,
    tools: bool = False,
    format: str = "auto",
    images: str | None = None,
    split: str | None = None,
    max_turns: int | None = None,
    tool_names: str | None = None,
    allow_metadata: bool = False,
    leak_guard: str = "hosts",
    leak_hosts: str | list[str] | None = None,
) -> Task:
    """Geolocate every image of ``dataset`` (any layout ``geosleuth datasets validate`` reads).

    ``prompt`` is a geosleuth prompt style (default: the protocol's own style where it has one
    and the run uses tools, else ``direct``, or ``geovista`` with tools); ``tools=True`` runs the
    agent loop with the style's tools (or ``tool_names``, comma-separated) for at most
    ``max_turns`` turns; ``protocol`` is any ``geosleuth score`` protocol. A style whose answers
    the protocol cannot read, or a dataset none of whose images exists, stops before the run.

    As in `geosleuth eval`, the model and the tools see pixels only (``allow_metadata=true`` lets
    the file's EXIF, XMP, IPTC and text through) and the agent's search and POI results pass the
    leak guard (``leak_guard`` off | hosts | strict; ``leak_hosts`` adds comma-separated hosts).
    """
    if leak_guard not in GUARD_MODES:
        raise ValueError(f"leak_guard must be one of {', '.join(GUARD_MODES)}, not {leak_guard!r}")
    try:
        style_name, loaded = _checked_inputs(dataset, protocol, prompt, tools, format, images, split)
    except (ValueError, DatasetError) as exc:  # told as inspect tells a prerequisite, not a traceback
        raise _prerequisite(f"geosleuth/geolocation: {exc}") from None
    hosts = sorted(
        {
            *SOURCE_HOSTS.get(loaded.format, ()),
            *(split_list(leak_hosts) if isinstance(leak_hosts, str) else leak_hosts or []),
        }
    )
    guards = {s.id: sample_guard(leak_guard, hosts, s) for s in loaded.samples}  # type: ignore[arg-type]
    if tools:
        config = AgentConfig(
            model="inspect",
            prompt_style=style_name,
            max_turns=max_turns,
            tools=[t.strip() for t in tool_names.split(",") if t.strip()] if tool_names else None,
            pixels_only=not allow_metadata,
        )
        chosen: Solver = agent_loop(config, None if leak_guard == "off" else guards)
    else:
        chosen = answer_once(pixels_only=not allow_metadata)
    return Task(
        dataset=inspect_dataset(loaded, style_name, image_metadata(loaded.samples)),
        solver=chosen,
        scorer=protocol_scorer(protocol, loaded.source),
        metrics=[protocol_metrics(protocol, loaded.source)],
        epochs=Epochs(1, keep_epochs()),  # `--epochs N` keeps this reducer
    )


def _checked_inputs(
    dataset: str,
    protocol: str,
    prompt: str | None,
    tools: bool,
    format: str,
    images: str | None,
    split: str | None,
) -> tuple[str, Dataset]:
    """The style and the dataset, or the reason the run cannot start (before any model call)."""
    get_protocol(protocol)  # an unknown protocol fails before the run, with the valid names
    style_name = choose_style(prompt, protocol, tools)
    loaded = load_dataset(dataset, format=format, images=images, split=split)
    if not loaded.samples:
        raise ValueError(f"{dataset}: the dataset has no usable samples ({len(loaded.problems)} bad rows)")
    check_images(loaded, loaded.samples, "-T images=FOLDER")
    return style_name, loaded


def _prerequisite(message: str) -> Exception:
    """inspect's own "cannot start" error, which its CLI prints without a traceback."""
    try:
        from inspect_ai._util.error import PrerequisiteError
    except ImportError:  # a future inspect without it: the message still leads
        return ValueError(message)
    return PrerequisiteError(message)


def inspect_dataset(
    loaded: Dataset, style_name: str, carried: Mapping[str, list[str]] | None = None
) -> MemoryDataset:
    """geosleuth samples as inspect samples: the style's system and user prompt plus the photo.

    The ground truth travels in the metadata (the solver never reads it; the scorer does), with
    the answer-bearing metadata kinds the photo's file carries (``carried``, by sample id).
    """
    style = load_style(style_name)
    samples = []
    for sample in loaded.samples:
        geo_task = GeoTask.from_sample(sample)
        system, user = build_prompts(style, geo_task, [], style.tool_calling, style.bbox_convention, (0, 0))
        has_image = bool(sample.image) and Path(sample.image or "").is_file()
        content: list[Content] = [ContentText(text=user)]
        if has_image:
            content.insert(0, ContentImage(image=str(sample.image)))
        truth = truth_record(sample)
        samples.append(
            InspectSample(
                id=sample.id,
                input=[ChatMessageSystem(content=system), ChatMessageUser(content=content)],
                target=json.dumps(truth, ensure_ascii=False),
                metadata={
                    META: {
                        "truth": truth,
                        "task": geo_task.model_dump(),
                        "has_image": has_image,
                        "file_metadata": (carried or {}).get(sample.id, []),
                    }
                },
            )
        )
    return MemoryDataset(samples, name=loaded.name, location=loaded.source)


@solver
def answer_once(pixels_only: bool = True) -> Solver:
    """One generate; a sample whose image is missing gets no model call and an empty answer.
    With ``pixels_only`` the photo goes as a copy without its file's metadata."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if not state.metadata[META]["has_image"]:
            state.output = ModelOutput.from_content(model=str(state.model), content="")
            state.metadata[META]["status"] = "input_error: image not found"
            return state
        if pixels_only:
            for message in state.messages:
                if isinstance(message.content, list):
                    message.content = [_pixels_only(part) for part in message.content]
        return await generate(state)

    return solve


def _pixels_only(part: Content) -> Content:
    """An image part (a file, or the data URL inspect made of it) becomes a data URL of its pixels alone."""
    if isinstance(part, ContentImage) and not part.image.startswith(("http://", "https://")):
        return ContentImage(image=pixels_only_data_url(part.image), detail=part.detail)
    return part


@solver
def agent_loop(config: AgentConfig, guards: Mapping[str, GuardSpec] | None = None) -> Solver:
    """geosleuth's agent loop (its prompts, tools and budgets) driving inspect's model; with
    ``guards`` (by sample id) its search and POI results pass the sample's leak guard."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        from geosleuth.agent.runner import run_task

        client = InspectChatClient(get_model())
        geo_task = GeoTask.model_validate(state.metadata[META]["task"])
        run_config = config.model_copy(update={"model": client.model})
        spec = guards.get(geo_task.id) if guards else None
        with guarding(spec.start() if spec is not None else None) as screen:
            trajectory = await run_task(geo_task, run_config, client=client)  # type: ignore[arg-type]
        if screen is not None:
            state.metadata[META]["search_results_blocked"] = screen.blocked
        if trajectory.status is TrajectoryStatus.MODEL_ERROR:  # as a plain generate fails: never a 0
            raise ModelError(f"the model failed on sample {geo_task.id}: {trajectory.error}")
        last = trajectory.turns[-1].text if trajectory.turns else ""
        state.messages.append(ChatMessageAssistant(content=last, model=client.model))
        state.output = ModelOutput.from_content(model=client.model, content=final_text(trajectory))
        state.metadata[META]["status"] = trajectory.status.value
        state.metadata[META]["turns"] = len(trajectory.turns)
        state.metadata[META]["tool_calls"] = [
            {"name": c.name, "ok": c.ok, "arguments": c.arguments} for c in trajectory.tool_calls
        ]
        return state

    return solve


def final_text(trajectory: Trajectory) -> str:
    """The answer text the protocol parses: the last model turn of a trajectory that ended well.

    A failed one (no answer, model error, timeout, budget spent) answers "" and so counts as
    wrong, as in ``geosleuth eval``, whatever its last turn happened to say.
    """
    if trajectory.status is not TrajectoryStatus.OK or not trajectory.turns:
        return ""
    return trajectory.turns[-1].text


@metric(name="geosleuth")
def protocol_metrics(protocol: str, source: str | None = None) -> Metric:
    """Every figure ``geosleuth score --protocol`` prints, over all samples' answers at once.

    With several epochs each epoch's answers are scored as one run and every figure is the mean
    over epochs (for accuracies the same as inspect's mean over each sample's epochs).
    """

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        if not scores:  # inspect asks for the shape of an empty run: there is none to report
            return {}
        epochs = [_responses(s.score) for s in scores]
        runs = [
            score_answers([Answered(truth, answers[e]) for truth, answers in epochs], protocol, source).score
            for e in range(min(len(answers) for _, answers in epochs))
        ]
        figures = [run.to_dict()["metrics"] for run in runs]
        out: dict[str, float | None] = {}
        for name in figures[0]:
            values = [v for run in figures if (v := run.get(name)) is not None]
            out[name] = sum(values) / len(values) if values else None
        return defined(out, runs[0].warnings)

    return compute


@score_reducer(name="geosleuth_epochs")
def keep_epochs() -> ScoreReducer:
    """One sample's epochs: the mean of the per-answer values, with every epoch's answer kept for
    the protocol metric (inspect's own reducers keep only the first epoch's metadata)."""
    mean = mean_score()

    def reduce(scores: list[Score]) -> Score:
        reduced = mean(scores)
        data = dict((scores[0].metadata or {})[META])
        data["responses"] = [(s.metadata or {})[META]["response"] for s in scores]
        return Score(
            value=reduced.value,
            answer=scores[0].answer,
            explanation=scores[0].explanation,
            metadata={META: data},
        )

    return reduce


@scorer(metrics=[])
def protocol_scorer(protocol: str = "default", source: str | None = None) -> Scorer:
    """Per sample: the row ``geosleuth score --rows`` writes; the metric aggregates the answers."""
    get_protocol(protocol)

    async def score(state: TaskState, target: Target) -> Score:
        truth = state.metadata[META]["truth"]
        answer = state.output.completion if state.output else ""
        row = row_result(score_answers([Answered(truth, answer)], protocol, source), truth["id"])
        hits = {  # None: the metric is not defined on this sample (no label at that level)
            k: float(bool(v))
            for k, v in row.items()
            if (k.startswith(("acc", "text_acc", "all_acc")) or k == "correct") and v is not None
        }
        distance = row.get("distance_km")
        explanation = f"status {row.get('status')}" + (
            f", {distance:.3f} km from the truth"
            if isinstance(distance, float)
            else ", no usable coordinates"
        )
        return Score(
            value=hits or {"parsed": float(row.get("status") in ("ok", "partial"))},
            answer=answer,
            explanation=explanation,
            metadata={META: {"truth": truth, "response": answer, "row": row}},
        )

    return score


def _responses(score: Score) -> tuple[dict[str, Any], list[str]]:
    """(truth, every epoch's answer) of one reduced sample score."""
    data = (score.metadata or {})[META]
    return data["truth"], list(data.get("responses") or [data["response"]])


class InspectChatClient:
    """The agent loop's chat client, answered by an inspect model (``--model``, mockllm included).

    The loop speaks OpenAI-format messages and tool schemas; they are translated to inspect's
    messages and ``ToolInfo`` and back, so usage and the transcript are inspect's own.
    """

    def __init__(self, model: Model) -> None:
        self.inspect_model = model
        self.model = str(model)
        self.profile = ProviderProfile(name="inspect")

    async def list_models(self) -> list[str]:
        return [self.model]

    async def aclose(self) -> None:
        return None

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        temperature: float | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        image_urls: dict[str, str] | None = None,
        **_: Any,
    ) -> ChatResponse:
        """One generate through inspect; a model failure is the loop's ``ModelError``."""
        config = GenerateConfig(
            temperature=temperature, top_p=top_p, top_k=top_k, max_tokens=max_tokens, seed=seed
        )
        start = time.perf_counter()
        try:
            output = await self.inspect_model.generate(
                inspect_messages(messages, image_urls or {}),
                tools=[tool_info(s) for s in tools or []],
                config=config,
            )
        except Exception as exc:  # noqa: BLE001 - a provider failure ends the trajectory as a recorded error
            raise ModelError(f"{type(exc).__name__}: {exc}") from exc
        message = output.message
        calls = [
            RawToolCall(c.id, c.function, json.dumps(c.arguments, ensure_ascii=False))
            for c in message.tool_calls or []
        ]
        usage = output.usage
        return ChatResponse(
            [ChatChoice(message.text, None, calls, output.stop_reason)],
            Usage(
                prompt_tokens=usage.input_tokens if usage else 0,
                completion_tokens=usage.output_tokens if usage else 0,
            ),
            time.perf_counter() - start,
            output.model or self.model,
        )


def tool_info(schema: dict[str, Any]) -> ToolInfo:
    """An OpenAI function schema as inspect's ``ToolInfo``."""
    fn = schema["function"]
    return ToolInfo(
        name=fn["name"],
        description=fn.get("description", ""),
        parameters=ToolParams.model_validate(fn.get("parameters") or {"type": "object", "properties": {}}),
    )


def inspect_messages(messages: list[dict[str, Any]], image_urls: dict[str, str]) -> list[ChatMessage]:
    """OpenAI chat messages (images by reference) as inspect messages (images as data URLs)."""
    names: dict[str, str] = {}
    out: list[ChatMessage] = []
    for m in messages:
        role = m.get("role")
        content = _content(m.get("content"), image_urls)
        if role == "system":
            out.append(ChatMessageSystem(content=content))
        elif role == "user":
            out.append(ChatMessageUser(content=content))
        elif role == "assistant":
            calls = [_tool_call(c) for c in m.get("tool_calls") or []]
            names.update((c.id, c.function) for c in calls)
            out.append(ChatMessageAssistant(content=content, tool_calls=calls or None))
        elif role == "tool":
            call_id = str(m.get("tool_call_id") or "")
            out.append(ChatMessageTool(content=content, tool_call_id=call_id, function=names.get(call_id)))
        else:
            raise ValueError(f"unknown message role {role!r}")
    return out


def _content(content: Any, image_urls: dict[str, str]) -> str | list[Content]:
    if content is None or isinstance(content, str):
        return content or ""
    parts: list[Content] = []
    for part in content:
        if part.get("type") == "image_url":
            ref = part["image_url"]["url"]
            parts.append(ContentImage(image=image_urls.get(ref, ref)))
        else:
            parts.append(ContentText(text=str(part.get("text", ""))))
    return parts


def _tool_call(call: dict[str, Any]) -> ToolCall:
    fn = call.get("function") or {}
    raw = fn.get("arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
    except (json.JSONDecodeError, TypeError, ValueError):
        arguments = {}
    if not isinstance(arguments, dict):
        arguments = {}
    return ToolCall(id=str(call.get("id") or ""), function=str(fn.get("name") or ""), arguments=arguments)
