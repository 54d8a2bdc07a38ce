"""Our Qwen ``smart_resize`` gives the frame transformers' Qwen2-VL image processor gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.agent.images import smart_resize


@pytest.fixture(scope="module")
def reference():  # type: ignore[no-untyped-def]
    module = pytest.importorskip(
        "transformers.models.qwen2_vl.image_processing_pil_qwen2_vl", reason="transformers not installed"
    )
    return module.smart_resize


def test_a_thin_strip_grows_as_the_processor_grows_it(reference) -> None:  # type: ignore[no-untyped-def]
    # height 10 rounds to 0 rows of 28: the processor scales the whole image up to min_pixels
    assert reference(10, 1900, 28, 3136, 1_000_000) == (28, 784)
    assert smart_resize((1900, 10), 28, 3136, 1_000_000) == (784, 28)


@settings(max_examples=300, deadline=None)
@given(
    width=st.integers(1, 20_000),
    height=st.integers(1, 20_000),
    factor=st.sampled_from([14, 16, 28, 32]),
    min_pixels=st.sampled_from([56 * 56, 4 * 28 * 28, 256 * 28 * 28]),
    max_pixels=st.sampled_from([1_003_520, 2_000_000, 12_845_056, 16_384 * 28 * 28]),
)
def test_same_frame_as_transformers(  # type: ignore[no-untyped-def]
    reference, width: int, height: int, factor: int, min_pixels: int, max_pixels: int
) -> None:
    if max(width, height) / min(width, height) > 200:  # the processor refuses these outright
        return
    h, w = reference(height, width, factor, min_pixels, max_pixels)
    assert smart_resize((width, height), factor, min_pixels, max_pixels) == (w, h)
