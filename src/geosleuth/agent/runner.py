"""Entry points: one task → one `Trajectory` (N samples aggregated when asked), many tasks concurrently."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from PIL import Image

from geosleuth.agent.client import ChatClient, ModelError, make_client
from geosleuth.agent.config import AgentConfig
from geosleuth.agent.images import ImageInputError, PreparedImage, load_image, prepare_image
from geosleuth.agent.loop import AgentLoop, TurnCallback
from geosleuth.agent.memory import memory_gate, task_memory
from geosleuth.agent.observer import Frame, Observation, Observer, make_observer, observation_turn
from geosleuth.agent.prompting import PromptStyle, load_style
from geosleuth.agent.scaling import majority_choice, medoid_aggregate, verify
from geosleuth.agent.trajectory import ImageStore, safe_name
from geosleuth.bounds.deadline import defer_clock
from geosleuth.core.records import Task, Trajectory, TrajectoryStatus
from geosleuth.tools.base import ToolRegistry


def input_error(task: Task, model: str, message: str) -> Trajectory:
    """The record of a task that could not start (bad image, unreachable model listing, …)."""
    now = time.time()
    return Trajectory(
        sample_id=task.id,
        model=model,
        status=TrajectoryStatus.INPUT_ERROR,
        error=message,
        started_at=now,
        finished_at=now,
    )


def build_tool_registry(config: AgentConfig, style: PromptStyle) -> ToolRegistry:
    """The configured tools (the style's by default) from the tools package."""
    names = config.tools if config.tools is not None else style.tools
    if not names:
        return ToolRegistry()
    from geosleuth.tools import build_registry

    return build_registry(config.tool_settings, names=list(names))


async def _ensure_model_name(client: ChatClient) -> None:
    if not client.model:
        models = await client.list_models()
        if not models:
            raise ModelError(f"the server at {client.base_url} lists no models")
        client.model = models[0]


async def _load(task: Task, config: AgentConfig) -> tuple[Image.Image, PreparedImage]:
    if not task.image:
        raise ImageInputError(f"task {task.id} has no image")
    img = await asyncio.to_thread(load_image, task.image, config.max_image_pixels)
    prepared = await asyncio.to_thread(
        prepare_image, img, config.pixel_budget, config.image_format, config.resize_factor
    )
    return img, prepared


async def run_task(
    task: Task,
    config: AgentConfig,
    *,
    artifacts_dir: Path | None = None,
    client: ChatClient | None = None,
    registry: ToolRegistry | None = None,
    verifier_client: ChatClient | None = None,
    on_turn: TurnCallback | None = None,
    observer: Observer | None = None,
) -> Trajectory:
    """Locate one task's image; never raises for a bad image or a failing model (see the status).

    ``client`` / ``registry`` / ``observer`` let a caller share one connection pool, one tool
    set and one observer across many tasks; ``artifacts_dir`` is where tool images are
    written (the JSONL's directory); ``on_turn(sample_index, turn)`` watches the model's
    turns live (offline: the pipeline's one turn, growing a step at a time, from its worker
    thread). With ``config.observer`` the photo is observed once and the N samples and the
    verifier all read that description.
    """
    if config.model is None:
        from geosleuth.agent.offline import run_offline

        return await run_offline(task, config, artifacts_dir=artifacts_dir, on_turn=on_turn)
    defer_clock()  # an evaluation's --timeout counts from the first model request, not start-up
    style = load_style(config.prompt_style)
    tools = registry if registry is not None else build_tool_registry(config, style)
    own_client = client is None
    chat = client or make_client(config)
    own_observer = observer is None and config.observer is not None
    seer = observer if observer is not None else make_observer(config)
    try:
        try:
            await _ensure_model_name(chat)
            img, prepared = await _load(task, config)
        except (ImageInputError, ModelError) as exc:
            return input_error(task, chat.model or str(config.model), str(exc))
        observation = None
        if seer is not None:
            observation = await _observe_photo(seer, task, config, style, img, prepared)
            if not observation.ok:
                return _observer_failed(task, chat.model, style.name, observation)
        loops = [
            AgentLoop(
                task,
                config,
                style,
                chat,
                tools,
                img,
                prepared,
                ImageStore(
                    artifacts_dir,
                    safe_name(task.id) + (f"/s{i}" if config.samples > 1 else ""),
                    config.pixel_budget,
                    config.image_format,
                ),
                sample_index=i,
                on_turn=on_turn,
                observer=seer,
                observation=observation,
            )
            for i in range(config.samples)
        ]
        trajectories = list(await asyncio.gather(*(loop.run() for loop in loops)))
        if config.samples == 1:
            return trajectories[0]
        return await _aggregate(task, config, chat, trajectories, prepared, verifier_client, observation)
    finally:
        if own_client:
            await chat.aclose()
        if own_observer and seer is not None:
            await seer.aclose()


async def _observe_photo(
    observer: Observer, task: Task, config: AgentConfig, style: PromptStyle, img: Image.Image,
    prepared: PreparedImage,
) -> Observation:  # fmt: skip
    """The observer's description of the photo, in the frame and box convention the reasoner uses."""
    frame = Frame(prepared.image.size, config.bbox_convention or style.bbox_convention, prepared.scale)
    return await observer.observe(img, "photo", frame=frame, path=task.image)


def _observer_failed(task: Task, model: str, style: str, observation: Observation) -> Trajectory:
    """The record of a task whose photo the observer could not describe (the reasoner never ran)."""
    now = time.time()
    return Trajectory(
        sample_id=task.id,
        model=model,
        prompt_style=style,
        turns=[observation_turn(observation, 0)],
        status=TrajectoryStatus.MODEL_ERROR,
        error=observation.error or "the observer failed",
        started_at=now - observation.latency_s,
        finished_at=now,
        metadata={"observer": {"name": observation.observer, "observations": 1,
                               "latency_s": observation.latency_s, "usage": observation.usage.model_dump()}},
    )  # fmt: skip


async def _aggregate(
    task: Task,
    config: AgentConfig,
    chat: ChatClient,
    trajectories: list[Trajectory],
    prepared: PreparedImage,
    verifier_client: ChatClient | None,
    observation: Observation | None = None,
) -> Trajectory:
    """One record holding the N samples and the aggregate answer."""
    metadata: dict[str, object] = {"samples": len(trajectories)}
    prediction = None
    aggregator = "medoid"
    answered = any(t.prediction and (t.prediction.has_coords or t.prediction.choice) for t in trajectories)
    if config.verifier_model and not answered:  # nothing to choose from: the verifier could only invent
        metadata["verifier"] = {"model": config.verifier_model, "skipped": "no sample produced an answer"}
    elif config.verifier_model:
        own = verifier_client is None
        vclient = verifier_client or make_client(
            config, config.verifier_model, config.verifier_base_url or config.base_url, agent=False
        )
        try:
            await _ensure_model_name(vclient)
            prediction, log = await verify(
                task, trajectories, vclient, prepared, max_tokens=config.max_tokens, observation=observation
            )
        except ModelError as exc:
            prediction, log = None, {"model": config.verifier_model, "error": str(exc)}
        finally:
            if own:
                await vclient.aclose()
        metadata["verifier"] = log
        aggregator = f"verifier:{vclient.model}" if prediction is not None else "medoid (verifier failed)"
    if prediction is None:
        prediction = medoid_aggregate(trajectories, config.cluster_radius_km)
    if prediction is None and task.choices:
        prediction = majority_choice(trajectories)
        aggregator = "majority choice" if prediction is not None else aggregator
    ok = prediction is not None
    # no answer is a failure even when every sample ended "ok" (e.g. place names without coordinates)
    failed = next(
        (t.status for t in trajectories if t.status != TrajectoryStatus.OK), TrajectoryStatus.PARSE_FAILED
    )
    return Trajectory(
        sample_id=task.id,
        model=chat.model,
        prompt_style=trajectories[0].prompt_style,
        prediction=prediction,
        status=TrajectoryStatus.OK if ok else failed,
        error=None if ok else f"none of the {len(trajectories)} samples produced coordinates or a choice",
        started_at=min(t.started_at or 0.0 for t in trajectories),
        finished_at=time.time(),
        image_scale=prepared.scale,
        samples=trajectories,
        aggregator=aggregator,
        metadata=metadata,
    )


async def run_tasks(
    tasks: Sequence[Task],
    config: AgentConfig,
    *,
    artifacts_dir: Path | None = None,
    concurrency: int = 16,
    registry: ToolRegistry | None = None,
) -> list[Trajectory]:
    """Many tasks with one shared client and tool set, in input order: at most ``concurrency`` at a
    time, and fewer when their images' decoded sizes would not fit in memory (`agent.memory`)."""
    if config.model is None:
        chat = None
        tools = registry
    else:
        chat = make_client(config)
        tools = (
            registry if registry is not None else build_tool_registry(config, load_style(config.prompt_style))
        )
    observer = make_observer(config) if config.model is not None else None
    gate = asyncio.Semaphore(max(1, concurrency))
    memory = memory_gate()  # large images lower the concurrency: each reserves what it decodes

    async def one(task: Task) -> Trajectory:
        # the slot first (the semaphore serves waiters in order), then the image's size: measured
        # before the slot, whichever header read finished first went first, so `--concurrency 1`
        # did not always start the images in the order given
        async with gate:
            need = await asyncio.to_thread(task_memory, task.image)
            async with memory.hold(need):
                return await run_task(
                    task, config, artifacts_dir=artifacts_dir, client=chat, registry=tools, observer=observer
                )

    try:
        return list(await asyncio.gather(*(one(t) for t in tasks)))
    finally:
        if chat is not None:
            await chat.aclose()
        if observer is not None:
            await observer.aclose()


def run_task_sync(task: Task, config: AgentConfig, *, artifacts_dir: Path | None = None) -> Trajectory:
    """`run_task` for synchronous callers (scripts, notebooks without a running loop)."""
    return asyncio.run(run_task(task, config, artifacts_dir=artifacts_dir))
