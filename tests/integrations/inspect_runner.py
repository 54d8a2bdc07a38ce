"""Runs one inspect_ai eval of ``geosleuth/geolocation`` with the mockllm model; prints a JSON summary.

Executed by test_inspect_ai.py in a subprocess whose PYTHONPATH holds .inspect-deps (inspect_ai
is kept out of the shared venv). argv[1] is a JSON object: ``task_args``, ``log_dir`` and either
``answers`` (one scripted completion per sample, in order), ``agent_answers`` (the model first
asks for a zoom into the photo, then gives the next answer once it has seen the tool's image) or
``photo_answers`` (by the photo's red channel, one answer per epoch, for ``epochs`` runs).
Every mock output carries a preset ``usage``: offline, mockllm would otherwise count tokens with
a tokenizer it downloads.
"""

from __future__ import annotations

import base64
import io
import json
import sys
from collections import Counter
from typing import Any

from inspect_ai import eval as inspect_eval
from inspect_ai.model import ChatMessageTool, ContentImage, ModelOutput, ModelUsage, get_model
from PIL import Image


def _with_usage(output: ModelOutput) -> ModelOutput:
    output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
    return output


def _agent_model(answers: list[str], seen: list[dict[str, Any]]) -> Any:
    pending = list(answers)

    def respond(messages: list[Any], tools: list[Any], tool_choice: Any, config: Any) -> ModelOutput:
        tool_messages = [m for m in messages if isinstance(m, ChatMessageTool)]
        if not tool_messages:
            return _with_usage(
                ModelOutput.for_tool_call(
                    "mockllm/model", "image_zoom_in_tool", {"bbox_2d": [0, 0, 500, 500]}
                )
            )
        images = [
            part
            for m in messages[messages.index(tool_messages[-1]) :]
            if isinstance(m.content, list)
            for part in m.content
            if isinstance(part, ContentImage)
        ]
        seen.append(
            {
                "tools": sorted(t.name for t in tools),
                "tool_message": tool_messages[-1].text[:200],
                "tool_function": tool_messages[-1].function,
                "images_after_call": [p.image[:22] for p in images],
            }
        )
        return _with_usage(ModelOutput.from_content(model="mockllm/model", content=pending.pop(0)))

    return respond


def _photo_model(answers: dict[str, list[str]]) -> Any:
    """Answers by looking at the photo inspect sends: its red channel picks the scripted answers,
    and the n-th time a photo is seen gets the n-th (one per epoch, in whatever order they run)."""
    seen: Counter[str] = Counter()

    def respond(messages: list[Any], tools: list[Any], tool_choice: Any, config: Any) -> ModelOutput:
        image = next(
            p.image
            for m in messages
            if isinstance(m.content, list)
            for p in m.content
            if isinstance(p, ContentImage)
        )
        if image.startswith("data:"):
            image = io.BytesIO(base64.b64decode(image.split(",", 1)[1]))
        with Image.open(image) as im:
            red = str(im.convert("RGB").getpixel((0, 0))[0])
        answer = answers[red][seen[red]]
        seen[red] += 1
        return _with_usage(ModelOutput.from_content(model="mockllm/model", content=answer))

    return respond


def main() -> None:
    spec = json.loads(sys.argv[1])
    seen: list[dict[str, Any]] = []
    if "agent_answers" in spec:
        outputs: Any = _agent_model(spec["agent_answers"], seen)
    elif "photo_answers" in spec:
        outputs = _photo_model(spec["photo_answers"])
    else:
        outputs = [_with_usage(ModelOutput.from_content("mockllm/model", a)) for a in spec["answers"]]
    logs = inspect_eval(
        "geosleuth/geolocation",  # resolved through geosleuth's inspect_ai entry point
        task_args=spec["task_args"],
        model=get_model("mockllm/model", custom_outputs=outputs),
        log_dir=spec["log_dir"],
        display="none",
        max_samples=1,
        epochs=spec.get("epochs", 1),
    )
    log = logs[0]
    result: dict[str, Any] = {
        "status": log.status,
        "error": str(log.error) if log.error else None,
        "task": log.eval.task,
        "metrics": {
            name: metric.value
            for score in (log.results.scores if log.results else [])
            for name, metric in score.metrics.items()
        },
        "samples": [
            {
                "id": s.id,
                "error": str(s.error) if s.error else None,
                "scores": {
                    k: {"value": v.value, "explanation": v.explanation, "row": v.metadata["geosleuth"]["row"]}
                    for k, v in (s.scores or {}).items()
                },
                "state": s.metadata.get("geosleuth", {}),
            }
            for s in log.samples or []
        ],
        "seen": seen,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
