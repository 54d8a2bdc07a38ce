"""One bad row fails alone in the dataset readers (issue 41, item 6): a row nested 100,000 deep,
an integer past Python's 4,300-digit limit or past float's range, a CSV field past the csv
module's default limit; `load_dataset(skip_invalid=True)` then keeps the good rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

import geosleuth
from geosleuth.cli.app import app
from geosleuth.eval.datasets.loading import DatasetError

DEEP = "[" * 100_000 + "]" * 100_000
GOOD_JSON = '{"id": "b", "image": "b.jpg", "lat": 48.85, "lon": 2.35}'
CASES = {
    "deep.jsonl": '{"id": "a", "image": "a.jpg", "lat": ' + DEEP + ', "lon": 2}\n' + GOOD_JSON + "\n",
    "deep.json": '[{"id": "a", "image": "a.jpg", "lat": ' + DEEP + ', "lon": 2}, ' + GOOD_JSON + "]",
    "digits.jsonl": '{"id": "a", "image": "a.jpg", "lat": ' + "1" * 5000 + ', "lon": 2}\n' + GOOD_JSON + "\n",
    "overflow.jsonl": '{"id": "a", "image": "a.jpg", "lat": '
    + "1" * 4000
    + ', "lon": 2}\n'
    + GOOD_JSON
    + "\n",
    "field.csv": "id,image,lat,lon,note\na,a.jpg,1,2," + "x" * (33 * 2**20) + "\nb,b.jpg,48.85,2.35,ok\n",
}


@pytest.fixture(autouse=True)
def csv_field_limit() -> Iterator[None]:
    """Our limit, whatever a library imported earlier in the process raised it to (it is global)."""
    import csv

    from geosleuth.bounds.textrows import CSV_FIELD_CHARS

    before = csv.field_size_limit(CSV_FIELD_CHARS)
    yield
    csv.field_size_limit(before)


def dataset(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / f"data{Path(name).suffix}").write_text(CASES[name])
    for stem in "ab":
        Image.new("RGB", (8, 8)).save(folder / f"{stem}.jpg")
    return folder


@pytest.mark.parametrize("name", list(CASES))
def test_validate_names_the_bad_row_and_reads_the_rest(tmp_path: Path, name: str) -> None:
    result = CliRunner().invoke(app, ["datasets", "validate", str(dataset(tmp_path, name))])
    assert result.exit_code == 1 and result.exception is None or isinstance(result.exception, SystemExit)
    assert "1 valid sample(s), 1 problem(s)" in result.output and "row 1" in result.output


@pytest.mark.parametrize("name", list(CASES))
def test_load_dataset_skip_invalid_keeps_the_good_rows(tmp_path: Path, name: str) -> None:
    folder = dataset(tmp_path, name)
    assert [s.id for s in geosleuth.load_dataset(folder, skip_invalid=True)] == ["b"]
    with pytest.raises(DatasetError, match="skip_invalid=True"):
        geosleuth.load_dataset(folder)


@pytest.mark.parametrize(
    ("cell", "said"),
    [
        ("9" * 5000, "latitude '" + "9" * 40 + "'… (5,000 characters) is not a finite number"),
        ("1e999", "latitude '1e999' is not a finite number"),
        ("-inf", "latitude '-inf' is not a finite number"),
    ],
)
def test_a_coordinate_float_reads_as_infinity_is_named_as_written(
    tmp_path: Path, cell: str, said: str
) -> None:
    """A CSV cell of 5,000 digits (or 1e999) is infinity to `float`: the row's problem quotes the
    cell (cut, with its length), not "latitude inf outside [-90, 90]"."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "data.csv").write_text(f"id,image,lat,lon\na,a.jpg,{cell},2\nb,b.jpg,48.85,2.35\n")
    for stem in "ab":
        Image.new("RGB", (8, 8)).save(folder / f"{stem}.jpg")
    result = CliRunner().invoke(app, ["datasets", "validate", str(folder)])
    assert result.exit_code == 1 and "1 valid sample(s), 1 problem(s)" in result.output
    assert f"row 1 (id a): {said}" in result.output.replace("\n  ", " ")
