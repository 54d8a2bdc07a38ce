"""lmms-eval (0.7) tasks: one per benchmark layout geosleuth's loader reads, in ``tasks/``.

Use the folder with ``--include_path $(geosleuth lmms-eval-tasks)``; say where the data is
with ``GEOSLEUTH_DATASET`` (or ``GEOSLEUTH_DATASET_<FORMAT>``, e.g. ``GEOSLEUTH_DATASET_IM2GPS3K``)
and, to score under another protocol than the task's, ``GEOSLEUTH_PROTOCOL``. Each task yaml
only names its format and protocol; everything else comes from ``_geosleuth_template_yaml`` and
:class:`GeolocationTask`, so adding a layout is one small yaml.

The task loads the data with geosleuth's loader (not ``datasets.load_dataset``), prompts with a
geosleuth prompt style (``GEOSLEUTH_PROMPT``, else ``lmms_eval_specific_kwargs: prompt_style``,
else the protocol's own style or ``direct``; one the protocol cannot read is refused), and its
metrics are those ``geosleuth score --protocol`` prints for the dataset: ``process_results``
keeps each answer with its ground truth, and every metric's aggregation scores all answers once
with the scoring engine. A figure the data does not define is reported as null (N/A), with a
logged note. It runs with lmms-eval's simple models (the photo and the prompt text) and its chat
models (``openai``, ``vllm``, ``sglang``, the Qwen-VL classes: ``doc_to_messages``, one user
turn with the photo and the same text; servers such as llama.cpp's refuse a system turn in the
list form lmms-eval sends).

lmms-eval's CLI logs an exception raised while it evaluates and exits 0; a task that cannot run
(no dataset, no image, a style the protocol cannot read) or a run whose every request failed
therefore stops with :class:`TaskStopped`, a ``SystemExit``, so the exit status says so.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from functools import lru_cache, partial
from typing import Any

from datasets import Dataset as HFDataset
from datasets import DatasetDict
from lmms_eval.api.task import ConfigurableMessagesTask, ConfigurableTask
from PIL import Image

from geosleuth.agent.images import load_image
from geosleuth.agent.prompting import build_prompts, load_style
from geosleuth.bounds.imageio import ImageInputError
from geosleuth.core.records import Sample
from geosleuth.core.records import Task as GeoTask
from geosleuth.eval.datasets.loading import DatasetError, load_dataset
from geosleuth.eval.run.pipeline import check_images
from geosleuth.eval.run.styles import choose_style
from geosleuth.integrations.harness import Answered, defined, metrics, score_answers, truth_record
from geosleuth.scoring import get_protocol

log = logging.getLogger(__name__)

LOWER_IS_BETTER = ("median_km", "mean_km", "all_median_km")
FAILED_REQUEST = "[LMMS_EVAL_REQUEST_FAILED"
"""How lmms-eval's API models answer a request that failed every retry."""


class TaskStopped(SystemExit):
    """The geosleuth task cannot give a scorable result; a ``SystemExit`` so that lmms-eval's CLI,
    which logs exceptions and exits 0, exits non-zero with this message."""


def dataset_location(fmt: str) -> str:
    """Where the data is: ``GEOSLEUTH_DATASET_<FORMAT>``, else ``GEOSLEUTH_DATASET``."""
    specific = f"GEOSLEUTH_DATASET_{fmt.upper()}"
    path = os.environ.get(specific) or os.environ.get("GEOSLEUTH_DATASET")
    if not path:
        raise ValueError(
            f"set {specific} or GEOSLEUTH_DATASET to the {fmt} dataset (a table, folder or HF dataset)"
        )
    return path


def _for_chat_model() -> bool:
    """Whether lmms-eval is building this task for a chat model.

    lmms-eval 0.7 builds a yaml task as ``ConfigurableMessagesTask`` for chat models (their
    requests carry ``doc_to_messages``) and as ``ConfigurableTask`` for simple ones, but builds a
    ``class:`` task without saying which: the choice is the ``task_type`` argument of the
    TaskManager call that is building it, up the stack.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_load_individual_task_or_group":
            return frame.f_locals.get("task_type") == "chat"
        frame = frame.f_back
    return False


class GeolocationTask(ConfigurableTask):
    """A ConfigurableTask whose documents come from geosleuth's loader and whose metric list is
    the one the chosen protocol reports for this dataset. Built for a chat model, it is a
    :class:`ChatGeolocationTask`."""

    def __new__(cls, *args: Any, **kwargs: Any) -> GeolocationTask:
        chosen = ChatGeolocationTask if cls is GeolocationTask and _for_chat_model() else cls
        return super().__new__(chosen)

    def __init__(self, *args: Any, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        config.pop("class", None)
        try:
            names = self._load(config)
        except (DatasetError, OSError, ValueError) as exc:
            raise TaskStopped(f"geosleuth task {config.get('task')}: {exc}") from exc
        config["process_results"] = partial(process_results, names=tuple(names))
        config["metric_list"] = [
            {
                "metric": name,
                "aggregation": _Aggregate(name, self.protocol, self.source),
                "higher_is_better": name not in LOWER_IS_BETTER,
            }
            for name in names
        ]
        super().__init__(*args, config=config, **kwargs)

    def _load(self, config: dict[str, Any]) -> list[str]:
        """Protocol, style and samples, checked before any request; the metrics to report."""
        meta = _metadata(config)
        fmt = str(meta.get("format", "auto"))
        self.protocol = os.environ.get("GEOSLEUTH_PROTOCOL") or str(meta.get("protocol", "default"))
        get_protocol(self.protocol)
        config["lmms_eval_specific_kwargs"] = _with_style(
            config.get("lmms_eval_specific_kwargs"), self.protocol
        )
        self.source = dataset_location(fmt)
        loaded = load_dataset(self.source, format=fmt, split=meta.get("split"))
        if not loaded.samples:
            raise DatasetError(f"{self.source}: no usable samples ({len(loaded.problems)} bad rows)")
        check_images(loaded, loaded.samples, "GEOSLEUTH_DATASET (or the table's image paths)")
        self.samples = loaded.samples
        return reported_metrics(self.samples, self.protocol, self.source)

    def download(self, dataset_kwargs: dict[str, Any] | None = None) -> None:
        """The loaded samples as documents: image path, truth (JSON) and the task the model sees."""
        rows = [
            {
                "id": s.id,
                "image": s.image or "",
                "task": GeoTask.from_sample(s).model_dump_json(),
                "truth": json.dumps(truth_record(s), ensure_ascii=False),
            }
            for s in self.samples
        ]
        split = self.config.test_split or "test"
        self.dataset = DatasetDict({split: HFDataset.from_list(rows)})
        self.dataset_no_image = self.dataset


class ChatGeolocationTask(GeolocationTask, ConfigurableMessagesTask):
    """The task for lmms-eval's chat models: requests carry ``doc_to_messages`` (the yaml's)."""


def _with_style(specific: Any, protocol: str) -> dict[str, Any]:
    """The yaml's specific kwargs with the prompt style to use in each: ``GEOSLEUTH_PROMPT``, else
    the yaml's ``prompt_style``, else the protocol's own or ``direct``; checked against the protocol."""
    blocks = dict(specific or {"default": {}})
    return {
        model: {
            **(kwargs or {}),
            "prompt_style": choose_style(
                os.environ.get("GEOSLEUTH_PROMPT") or (kwargs or {}).get("prompt_style"),
                protocol,
                tools=False,
            ),
        }
        for model, kwargs in blocks.items()
    }


def _metadata(config: dict[str, Any]) -> dict[str, Any]:
    meta = config.get("metadata") or {}
    if isinstance(meta, list):  # lmms-eval yamls also write metadata as a list of one-key maps
        merged: dict[str, Any] = {}
        for item in meta:
            merged.update(item if isinstance(item, dict) else {})
        return merged
    return dict(meta)


def reported_metrics(samples: list[Sample], protocol: str, source: str | None = None) -> list[str]:
    """The metrics the protocol reports on these samples: what scoring unanswered samples yields."""
    dry = [Answered(truth_record(s), "") for s in samples]
    return list(metrics(score_answers(dry, protocol, source)))


class _Aggregate:
    """One metric's aggregation: score every (truth, answer) once per run, read one figure."""

    def __init__(self, name: str, protocol: str, source: str | None) -> None:
        self.name, self.protocol, self.source = name, protocol, source
        self.__name__ = f"geosleuth_{protocol}_{name}"

    def __call__(self, items: list[tuple[str, str]]) -> float | None:
        """The figure, or None (N/A in lmms-eval's table, null in its results) where the data
        does not define it."""
        return _scored(tuple(items), self.protocol, self.source).get(self.name)


@lru_cache(maxsize=4)
def _scored(items: tuple[tuple[str, str], ...], protocol: str, source: str | None) -> dict[str, float]:
    failed = sum(response.startswith(FAILED_REQUEST) for _, response in items)
    if items and failed == len(items):
        raise TaskStopped(
            f"geosleuth: all {failed} model request(s) failed (is the server up?); first: {items[0][1][:300]}"
        )
    answered = [Answered(json.loads(truth), response) for truth, response in items]
    result = score_answers(answered, protocol, source)
    return defined(metrics(result), result.score.warnings)


def doc_to_visual(doc: dict[str, Any]) -> list[Image.Image]:
    """The photo, decoded within geosleuth's pixel limit (EXIF orientation applied); none when it
    is missing or unreadable: the model answers blind and is scored on what it answers."""
    path = doc.get("image")
    if not path:
        return []
    try:
        return [load_image(path).convert("RGB")]
    except ImageInputError as exc:
        log.warning("sample %s: %s", doc.get("id"), exc)
        return []


def doc_to_text(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> str:
    """The prompt style's system and user text as one prompt."""
    kwargs = lmms_eval_specific_kwargs or {}
    style = load_style(str(kwargs.get("prompt_style") or "direct"))
    task = GeoTask.model_validate_json(doc["task"])
    system, user = build_prompts(style, task, [], style.tool_calling, style.bbox_convention, (0, 0))
    return f"{kwargs.get('pre_prompt', '')}{system}\n\n{user}{kwargs.get('post_prompt', '')}"


def doc_to_messages(
    doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """For chat models: one user turn, the photo (when it could be read) and the simple models'
    prompt, in lmms-eval's message format."""
    content: list[dict[str, Any]] = [{"type": "image", "url": image} for image in doc_to_visual(doc)]
    content.append({"type": "text", "text": doc_to_text(doc, lmms_eval_specific_kwargs)})
    return [{"role": "user", "content": content}]


def doc_to_target(doc: dict[str, Any]) -> str:
    return str(doc["truth"])


def process_results(
    doc: dict[str, Any], results: list[str], names: tuple[str, ...] = (), **_: Any
) -> dict[str, tuple[str, str]]:
    """Each metric keeps (truth, answer); its aggregation scores them all under the protocol."""
    answer = results[0] if results and isinstance(results[0], str) else ""
    kept = (str(doc["truth"]), answer)
    return dict.fromkeys(names, kept)
