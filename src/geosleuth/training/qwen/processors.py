"""A Qwen-VL processor for image-only training, loadable without torchvision.

transformers' ``AutoProcessor`` builds Qwen2-VL / Qwen2.5-VL / Qwen3-VL processors with their
video processor, and that needs torchvision, which often has no build that imports beside the
installed torch (CPU wheels, new torch releases). Image-only training never uses the video
processor: `load_processor` tries ``AutoProcessor`` first and, when torchvision is what is
missing, builds the same processor class from the model's tokenizer, its PIL image processor
and its chat template, with no video processor.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def image_only(cls: type) -> type:
    """``cls`` (a transformers processor class) without its video processor argument."""

    def __init__(
        self: Any, image_processor: Any = None, tokenizer: Any = None, chat_template: Any = None, **kw: Any
    ) -> None:  # noqa: E501
        cls.__init__(self, image_processor, tokenizer, None, chat_template=chat_template, **kw)

    return type(cls.__name__, (cls,), {"__init__": __init__, "__module__": cls.__module__})


def _chat_template(model: str, tokenizer: Any) -> str | None:
    """The processor's chat template (``chat_template.jinja`` / ``.json``), else the tokenizer's."""
    root = Path(model)
    if (root / "chat_template.jinja").is_file():
        return (root / "chat_template.jinja").read_text(encoding="utf-8")
    if (root / "chat_template.json").is_file():
        template = json.loads((root / "chat_template.json").read_text(encoding="utf-8")).get("chat_template")
        if isinstance(template, str):
            return template
    return getattr(tokenizer, "chat_template", None)


def image_only_processor(model: str) -> Any:
    """The model's processor class built from its tokenizer and PIL image processor, no video processor."""
    import transformers
    from transformers import AutoConfig, AutoImageProcessor, AutoTokenizer
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

    config = AutoConfig.from_pretrained(model)
    name = PROCESSOR_MAPPING_NAMES.get(config.model_type)
    if not isinstance(name, str) or not hasattr(transformers, name):
        raise ValueError(f"{model}: no processor class known for model type {config.model_type!r}")
    tokenizer = AutoTokenizer.from_pretrained(model)
    images = AutoImageProcessor.from_pretrained(model, backend="pil")
    return image_only(getattr(transformers, name))(
        images, tokenizer, chat_template=_chat_template(model, tokenizer)
    )


def load_processor(model: str) -> Any:
    """``AutoProcessor.from_pretrained(model)``, or the image-only processor when torchvision is missing."""
    from transformers import AutoProcessor

    try:
        return AutoProcessor.from_pretrained(model)
    except ImportError as exc:
        if "torchvision" not in str(exc).lower():
            raise
        log.info("%s; building the image-only processor (no video processor)", str(exc).splitlines()[0])
    return image_only_processor(model)
