"""JSON Lines rows read by orjson give exactly what the standard library's reader gives.

The expectation is always ``json.loads`` of the decoded line (the reader `geosleuth score` used
before orjson), compared by ``repr`` so that types (int vs float), NaN and key order count.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.scoring.io import _jsonl_row

PATH = Path("rows.jsonl")


def _standard(raw: bytes) -> Any:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _check(raw: bytes) -> None:
    row = _jsonl_row(PATH, 1, raw)
    expected = _standard(raw)
    assert repr(row.data) == repr(expected), raw[:200]
    assert (row.error is None) == (expected is not None)


numbers = st.one_of(
    st.integers(),  # any size: orjson turns those beyond 64 bits into floats
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text())
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(), values, max_size=6))
def test_any_row_reads_as_the_standard_reader_reads_it(row: dict[str, Any]) -> None:
    _check(json.dumps(row).encode())  # NaN / Infinity and lone surrogates as Python writes them
    _check(json.dumps(row, ensure_ascii=False).encode("utf-8", "surrogatepass"))


@settings(max_examples=400, deadline=None)
@given(
    st.text(alphabet="0123456789", min_size=1, max_size=26),
    st.text(alphabet="0123456789", max_size=26),
    st.one_of(st.just(""), st.integers(-340, 340).map(lambda e: f"e{e}")),
    st.booleans(),
)
def test_number_literals_read_as_the_standard_reader_reads_them(
    digits: str, fraction: str, exponent: str, negative: bool
) -> None:
    literal = ("-" if negative else "") + (digits.lstrip("0") or "0")
    literal += (f".{fraction}" if fraction else "") + exponent
    _check(b'{"id": %s, "x": [%s]}' % (literal.encode(), literal.encode()))


def test_the_cases_where_the_readers_differ_fall_back_to_the_standard_one() -> None:
    huge = b'{"id": 123456789012345678901234567890, "lat": 1.5}'
    assert type(orjson.loads(huge)["id"]) is float  # why the fallback exists
    assert _jsonl_row(PATH, 1, huge).data == {"id": 123456789012345678901234567890, "lat": 1.5}
    nan = _jsonl_row(PATH, 1, b'{"lat": NaN, "lon": Infinity}').data
    assert nan is not None and math.isnan(nan["lat"]) and nan["lon"] == math.inf
    assert _jsonl_row(PATH, 1, b'{"k": "\\ud800"}').data == {"k": "\ufffd"}  # a lone surrogate: U+FFFD
    assert _jsonl_row(PATH, 1, b'{"a": 1, "b": 2, "a": 3}').data == {"a": 3, "b": 2}
    deep = b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert _jsonl_row(PATH, 1, deep).error == "rows.jsonl:1: not valid JSON (nested too deeply)"
    bad = _jsonl_row(PATH, 7, b'{"k": "\xff"}')
    assert bad.data is None and bad.error is not None and "not UTF-8" in bad.error
    assert _jsonl_row(PATH, 2, b"[1, 2]").error == "rows.jsonl:2: expected a JSON object, got list"
