"""verl's ``RLHFDataset`` for geosleuth's parquet rows, without ``qwen_vl_utils`` (torchvision).

verl reads a message's images with ``qwen_vl_utils.process_vision_info``, which imports
torchvision; without it every row fails to load, and with ``data.filter_overlong_prompts=True``
verl counts each failure as an over-long prompt and goes on with an empty dataset ("filter
dataset len: 0"). This class reads the images itself (PIL images, ``{"bytes", "path"}`` parquet
cells or paths; the processor resizes them as it would anyway) and stops with an error when
the length filter leaves no row (and warns with the count when it drops some).
``grpo_single_node.sh`` names it::

    data.custom_cls.path=pkg://geosleuth.training.verl.dataset data.custom_cls.name=GeoSleuthRLHFDataset
"""

from __future__ import annotations

import asyncio
import io
import logging
from typing import Any

from PIL import Image
from verl.utils.dataset.rl_dataset import RLHFDataset

log = logging.getLogger(__name__)


def _image(value: Any) -> Image.Image:
    from geosleuth.bounds.imageio import open_image

    if isinstance(value, Image.Image):
        return value.convert("RGB")
    if isinstance(value, dict) and value.get("bytes"):
        return Image.open(io.BytesIO(value["bytes"])).convert("RGB")
    path = value.get("path") if isinstance(value, dict) else value
    if isinstance(path, str):
        return open_image(path.removeprefix("file://")).convert("RGB")
    raise ValueError(f"cannot read an image from {type(value).__name__}")


def message_images(messages: list[dict[str, Any]]) -> list[Image.Image]:
    """Every image part of ``messages``, in order."""
    return [
        _image(part.get("image"))
        for message in messages if isinstance(message.get("content"), list)
        for part in message["content"] if isinstance(part, dict) and part.get("type") == "image"
    ]  # fmt: skip


class GeoSleuthRLHFDataset(RLHFDataset):
    """``RLHFDataset`` reading images without torchvision; an emptied dataset is an error."""

    @classmethod
    def _process_multi_modal_info(cls, messages: list[dict], image_patch_size: Any, config: Any) -> Any:
        return message_images(messages) or None, None, cls._extract_audio_info(messages)

    @classmethod
    async def process_vision_info(cls, messages: list[dict], image_patch_size: Any, config: Any) -> Any:
        images = await asyncio.get_running_loop().run_in_executor(None, message_images, messages)
        return images or None, None

    def maybe_filter_out_long_prompts(self, dataframe: Any = None) -> Any:
        before = len(dataframe) if dataframe is not None else 0
        kept = super().maybe_filter_out_long_prompts(dataframe)
        if before and kept is not None and len(kept) == 0:
            raise ValueError(
                f"filter_overlong_prompts dropped all {before} rows: none fits max_prompt_length="
                f"{self.max_prompt_length} tokens, or none could be read (see the errors above)"
            )
        if before and kept is not None and len(kept) < before:
            log.warning(
                "filter_overlong_prompts dropped %d of %d rows (longer than max_prompt_length=%d tokens, "
                "or unreadable)",
                before - len(kept),
                before,
                self.max_prompt_length,
            )
        return kept
