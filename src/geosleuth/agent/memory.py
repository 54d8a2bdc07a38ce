"""The memory one `locate` task reserves before it starts (`geosleuth.bounds.memorygate` holds the gate).

The estimate comes from the image header: the decoded frame, a fixed overhead, what the decoder
holds beside it (a progressive JPEG's coefficients, `imageio.coefficient_bytes`), and what OCR
allocates for an image of that shape (`tools.ocr_bounds.ocr_peak_bytes`; RapidOCR's own
pre-processing once took 2.9 GB for a 2000x1 strip, whatever its pixel count said).
"""

from __future__ import annotations

from geosleuth.bounds.imageio import coefficient_bytes, header_size
from geosleuth.bounds.memorygate import BYTES_PER_PIXEL as BYTES_PER_PIXEL
from geosleuth.bounds.memorygate import TASK_OVERHEAD as TASK_OVERHEAD
from geosleuth.bounds.memorygate import MemoryGate as MemoryGate
from geosleuth.bounds.memorygate import image_bytes
from geosleuth.bounds.memorygate import memory_gate as memory_gate
from geosleuth.bounds.ocr import ocr_peak_bytes


def task_memory(image: str | None) -> int:
    """The bytes one task on ``image`` is expected to need at its peak."""
    width, height = header_size(image) if image else (0, 0)
    held = coefficient_bytes(image) if image else 0
    return image_bytes(width, height, ocr_peak_bytes(width, height) + held)
