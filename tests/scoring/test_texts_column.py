"""`Texts`: a string (or None) per row, read back as written on either side of the spool boundary."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.scoring import columnstore
from geosleuth.scoring.columnstore import Texts

VALUES = st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(values=VALUES, spool=st.integers(min_value=1, max_value=40))
def test_texts_reads_back_what_was_appended(values: list[str | None], spool: int) -> None:
    """A list is the model: every index (negative ones too) gives the value appended there, whether
    its bytes sit in the file, in memory or across both."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(columnstore, "SPOOL_BYTES", spool)
        texts = Texts()
        for value in values:
            texts.append(value)
        assert len(texts) == len(values)
        assert [texts[i] for i in range(len(values))] == values
        assert [texts[-k] for k in range(1, len(values) + 1)] == values[::-1]


def test_texts_spools_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past `SPOOL_BYTES` the bytes leave memory for the temporary file; lone surrogates survive."""
    monkeypatch.setattr(columnstore, "SPOOL_BYTES", 16)
    texts = Texts()
    values = [f"sample-{i:04d}.jpg" for i in range(100)] + ["\ud800 lone", None, ""]
    for value in values:
        texts.append(value)
    assert texts.file is not None and texts.spooled > 0 and len(texts.blob) < 16
    assert [texts[i] for i in range(len(values))] == values
    with pytest.raises(IndexError):
        texts[len(values)]
