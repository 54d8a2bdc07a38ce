"""JSON documents (an array of rows, an object wrapping one) are split into rows as they stream
(issue 32): each item is parsed alone, so a bad or deeply nested item fails that row only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_scoring_cli import run

from geosleuth.scoring import jsonstream
from geosleuth.scoring.io import iter_rows

ANSWER = '{"lat": 47.0502, "lon": 8.3093, "city": "Luzern", "country": "Switzerland"}'


def row(i: int, text: str = ANSWER) -> dict:
    return {"index": i, "ground_truth": {"lat": 47.0502, "lon": 8.3093}, "solution_str": text}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
texts = st.text(alphabet=st.sampled_from('ab{}[],:" \\\n\u00e9\u2028'), max_size=40)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    items=st.lists(st.dictionaries(st.text(max_size=6), json_values | texts, max_size=4), max_size=6),
    indent=st.sampled_from([None, 0, 2]),
    wrap=st.booleans(),
    chunk=st.sampled_from([1, 3, 16, 1 << 20]),
)
def test_items_are_the_documents_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, items: list, indent: int | None, wrap: bool, chunk: int
) -> None:
    """Whatever the strings hold (braces, quotes, escapes) and wherever a read ends, each row is
    the item the standard reader finds at that place."""
    monkeypatch.setattr(jsonstream, "CHUNK", chunk)
    if wrap and indent is None:
        indent = 1  # an object on one line is one row of JSON Lines, as before
    document = {"model": "m", "rows": items} if wrap else items
    path = tmp_path / "p.json"
    path.write_text(json.dumps(document, indent=indent, ensure_ascii=False), encoding="utf-8")
    rows = list(iter_rows(path))
    if wrap and not items:  # no list of rows: the object is the one row
        assert [r.data for r in rows] == [document]
        return
    assert [r.error for r in rows] == [None] * len(items)
    assert [repr(r.data) for r in rows] == [repr(item) for item in items]
    assert [r.line for r in rows] == list(range(1, len(items) + 1))


def test_a_deeply_nested_item_fails_that_row_alone(tmp_path: Path) -> None:
    deep = '{"index": 1, "solution_str": ' + "[" * 100_000 + "]" * 100_000 + "}"
    rows = [json.dumps(row(0)), deep, json.dumps(row(2)), '"a string"', json.dumps(row(4, "no idea"))]
    for name, text in (
        ("array.json", "[\n" + ",\n".join(rows) + "\n]\n"),
        ("wrapped.json", '{"model": "m",\n "results": [\n' + ",\n".join(rows) + "\n]}\n"),
    ):
        path = tmp_path / name
        path.write_text(text)
        code, out, _ = run(str(path), "--protocol", "twm", "--json")
        payload = json.loads(out)
        assert code == 0 and payload["n"] == 5 and payload["parsed"] == 2
        assert payload["metrics"]["acc@0.5km"] == 40.0
        assert any(f"{name}:item 2: not valid JSON (nested too deeply)" in w for w in payload["warnings"])
        assert any(f"{name}:item 4: expected a JSON object, got str" in w for w in payload["warnings"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"index": 1}', r"p.json:1: not valid JSON \(expected ',' or '\]' after item 1\)"),
        ('[{"index": 1} {"index": 2}]', r"p.json:1: not valid JSON \(expected ',' or '\]' after item 1\)"),
        ('[{"index": 1}]\n[]', r"p.json:2: not valid JSON \(extra data after the array\)"),
        (
            '[\n{"index": 1,\n"solution_str": "unterminated',
            r"p.json:2: not valid JSON \(a value that never ends\)",
        ),
    ],
)
def test_a_broken_structure_stops_the_file_naming_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(text)
    code, _, err = run(str(path), "--protocol", "twm")
    assert code == 1
    assert re.search(message, err), err


def test_jsonl_whose_last_row_is_whole_is_still_read_as_one_document(tmp_path: Path) -> None:
    """A pretty-printed object whose last row sits on one line is not JSON Lines."""
    path = tmp_path / "wrapped.json"
    path.write_text(
        '{"model": "m", "results": [\n' + ",\n".join(json.dumps(row(i)) for i in range(3)) + "\n]}\n"
    )
    code, out, _ = run(str(path), "--protocol", "twm", "--json")
    assert code == 0 and json.loads(out)["n"] == 3 and json.loads(out)["metrics"]["acc@0.5km"] == 100.0


def test_an_item_over_the_cap_is_one_failed_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "MAX_ITEM_BYTES", 4096)
    monkeypatch.setattr(jsonstream, "CHUNK", 512)
    path = tmp_path / "p.json"
    path.write_text(json.dumps([row(0), row(1, "x" * 20_000 + ANSWER), row(2)]))
    rows = list(iter_rows(path))
    assert [r.data is not None for r in rows] == [True, False, True]
    assert rows[1].error == f"{path}:item 2: longer than 4,096 bytes"


@pytest.mark.parametrize("shape", ["number", "string", "object"])
def test_an_item_over_the_cap_is_skipped_in_linear_time_and_bounded_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """Issue 41: a 400 MB scalar item took 77 s and 1.28 GB (held whole, searched again from its
    start after every chunk). Four times the item must cost about four times the time, not 16,
    and hold about the cap, not the item."""
    import tracemalloc

    from geosleuth.testing import cpu_seconds

    monkeypatch.setattr(jsonstream, "MAX_ITEM_BYTES", 1 << 16)
    monkeypatch.setattr(jsonstream, "CHUNK", 1 << 12)

    def document(size: int) -> Path:
        body = {
            "number": "1" * size,
            "string": '"' + "x" * size + '"',
            "object": '{"k": "' + "x" * size + '"}',
        }
        path = tmp_path / f"{shape}{size}.json"
        path.write_text(f"[{json.dumps(row(0))}, {body[shape]}, {json.dumps(row(2))}]")
        return path

    small, large = document(1 << 21), document(1 << 23)
    rows, _ = cpu_seconds(lambda: list(iter_rows(small)))
    assert [r.data is not None for r in rows] == [True, False, True]
    times = []
    for path in (small, large):
        best = min(cpu_seconds(lambda p=path: list(iter_rows(p)))[1] for _ in range(3))
        times.append(best)
    assert times[1] < 8 * times[0] + 0.05  # linear: about 4x (quadratic: 16x)
    tracemalloc.start()
    try:
        list(iter_rows(large))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20  # the cap and a chunk, not the 8 MiB item
