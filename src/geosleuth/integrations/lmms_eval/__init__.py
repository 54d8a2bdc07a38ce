"""lmms-eval (0.7) tasks: one per benchmark layout geosleuth's loader reads, in ``tasks/``.

Use the folder with ``--include_path $(geosleuth lmms-eval-tasks)``; say where the data is
with ``GEOSLEUTH_DATASET`` (or ``GEOSLEUTH_DATASET_<FORMAT>``, e.g. ``GEOSLEUTH_DATASET_IM2GPS3K``)
and, to score under another protocol than the task's, ``GEOSLEUTH_PROTOCOL``. Each task yaml
only names its format and protocol; everything else comes from ``_geosleuth_template_yaml`` and
:class:`GeolocationTask`, so adding a layout is one small yaml.

The task loads the data with geosleuth's loader (not ``datasets.load_dataset``), prompts with a
geosleuth prompt style (``lmms_eval_specific_kwargs: prompt_style``), and its metrics are those
``geosleuth score --protocol`` prints for the dataset: ``process_results`` keeps each answer with
its ground truth, and every metric's aggregation scores all answers once with the scoring engine.
"""

from __future__ import annotations

import json
import logging
import os
from functools import lru_cache, partial
from typing import Any

from datasets import Dataset as HFDataset
from datasets import DatasetDict
from lmms_eval.api.task import ConfigurableTask
from PIL import Image

from geosleuth.agent.images import load_image
from geosleuth.agent.prompting import build_prompts, load_style
from geosleuth.core.records import Sample
from geosleuth.core.records import Task as GeoTask
from geosleuth.eval.datasets import load_dataset
from geosleuth.imageio import ImageInputError
from geosleuth.integrations.harness import Answered, finite, metrics, score_answers, truth_record
from geosleuth.scoring import get_protocol

log = logging.getLogger(__name__)

LOWER_IS_BETTER = ("median_km", "mean_km", "all_median_km")
DEFAULT_PROMPT_STYLE = "direct"


def dataset_location(fmt: str) -> str:
    """Where the data is: ``GEOSLEUTH_DATASET_<FORMAT>``, else ``GEOSLEUTH_DATASET``."""
    specific = f"GEOSLEUTH_DATASET_{fmt.upper()}"
    path = os.environ.get(specific) or os.environ.get("GEOSLEUTH_DATASET")
    if not path:
        raise ValueError(
            f"set {specific} or GEOSLEUTH_DATASET to the {fmt} dataset (a table, folder or HF dataset)"
        )
    return path


class GeolocationTask(ConfigurableTask):
    """A ConfigurableTask whose documents come from geosleuth's loader and whose metric list is
    the one the chosen protocol reports for this dataset."""

    def __init__(self, *args: Any, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        config = dict(config or {})
        config.pop("class", None)
        meta = _metadata(config)
        fmt = str(meta.get("format", "auto"))
        self.protocol = os.environ.get("GEOSLEUTH_PROTOCOL") or str(meta.get("protocol", "default"))
        get_protocol(self.protocol)
        self.source = dataset_location(fmt)
        loaded = load_dataset(self.source, format=fmt, split=meta.get("split"))
        if not loaded.samples:
            raise ValueError(f"{self.source}: no usable samples ({len(loaded.problems)} bad rows)")
        self.samples = loaded.samples
        names = reported_metrics(self.samples, self.protocol, self.source)
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

    def __call__(self, items: list[tuple[str, str]]) -> float:
        return finite(_scored(tuple(items), self.protocol, self.source).get(self.name))


@lru_cache(maxsize=4)
def _scored(items: tuple[tuple[str, str], ...], protocol: str, source: str | None) -> dict[str, float | None]:
    answered = [Answered(json.loads(truth), response) for truth, response in items]
    return metrics(score_answers(answered, protocol, source))


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
    """The prompt style's system and user text (``prompt_style`` in the yaml's specific kwargs)."""
    kwargs = lmms_eval_specific_kwargs or {}
    style = load_style(str(kwargs.get("prompt_style") or DEFAULT_PROMPT_STYLE))
    task = GeoTask.model_validate_json(doc["task"])
    system, user = build_prompts(style, task, [], style.tool_calling, style.bbox_convention, (0, 0))
    return f"{kwargs.get('pre_prompt', '')}{system}\n\n{user}{kwargs.get('post_prompt', '')}"


def doc_to_target(doc: dict[str, Any]) -> str:
    return str(doc["truth"])


def process_results(
    doc: dict[str, Any], results: list[str], names: tuple[str, ...] = (), **_: Any
) -> dict[str, tuple[str, str]]:
    """Each metric keeps (truth, answer); its aggregation scores them all under the protocol."""
    answer = results[0] if results and isinstance(results[0], str) else ""
    kept = (str(doc["truth"]), answer)
    return dict.fromkeys(names, kept)
