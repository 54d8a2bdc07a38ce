"""`Growing`: values appended one by one or a chunk at a time read back in order, in any dtype."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.scoring import columnstore
from geosleuth.scoring.columnstore import Growing

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(-(2**31), 2**31 - 1)),
        st.tuples(st.just("extend"), st.lists(st.integers(-(2**31), 2**31 - 1), max_size=40)),
        st.tuples(st.just("flush"), st.none()),
        st.tuples(st.just("read"), st.none()),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(steps=STEPS, capacity=st.integers(min_value=1, max_value=16))
def test_growing_reads_back_in_order(steps: list[tuple[str, object]], capacity: int) -> None:
    """A list is the model; an array read earlier keeps what it showed while the column grows
    past its map (the old map lives while that array does)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(columnstore, "MIN_CAPACITY", capacity)
        column, model = Growing(np.int64), []
        seen: list[tuple[np.ndarray, list[int]]] = []
        for step, value in steps:
            if step == "append":
                column.append(value)
                model.append(value)
            elif step == "extend":
                column.extend(np.array(value, dtype=np.int64))
                model.extend(value)  # type: ignore[arg-type]
            elif step == "flush":
                column.flush()
            else:
                seen.append((column.array(), list(model)))
        assert column.array().tolist() == model
        for array, then in seen:
            assert array.tolist() == then


def test_growing_kinds_and_replace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columnstore, "MIN_CAPACITY", 2)
    flags, numbers = Growing(bool), Growing(np.float64)
    for i in range(5):
        flags.append(i % 2 == 0)
        numbers.append(i / 2)
    assert flags.array().dtype == np.bool_ and flags.array().tolist() == [True, False, True, False, True]
    assert numbers.array().tolist() == [0.0, 0.5, 1.0, 1.5, 2.0]
    numbers.replace(np.arange(5, dtype=np.float64))
    assert numbers.array().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="3 values for a column of 5 rows"):
        numbers.replace(np.zeros(3))
    assert Growing(np.int32).array().size == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_childs_writes_stay_in_the_child() -> None:
    """The map is private (copy-on-write), as heap memory is: a worker forked while a column
    exists cannot change the parent's figures."""
    column = Growing(np.int64)
    for i in range(10):
        column.append(i)
    values = column.array()
    pid = os.fork()
    if pid == 0:
        values[0] = 999
        os._exit(0)
    os.waitpid(pid, 0)
    assert values[0] == 0 and column.array().tolist() == list(range(10))
