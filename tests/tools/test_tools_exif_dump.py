"""`exif_dump`: the full EXIF of an upload for its provenance record, from untrusted files."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from geosleuth.tools.exif import MAX_EXIF_VALUE_CHARS, exif_dump


def _jpeg(exif: Image.Exif) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16)).save(buffer, format="JPEG", exif=exif)
    return buffer.getvalue()


def test_every_group_by_name_and_long_values_cut() -> None:
    exif = Image.Exif()
    exif[0x010F] = "Cam"
    exif[0x927C] = b"\x01" * 5000  # a MakerNote: binary, kept as hex, cut
    exif[0x8769] = {0x9003: "2024:05:01 10:00:00"}
    exif[0x8825] = {1: "S", 2: (33.0, 51.0, 54.0)}
    dump = exif_dump(_jpeg(exif))
    assert dump["Image"]["Make"] == "Cam"
    assert dump["Exif"]["DateTimeOriginal"] == "2024:05:01 10:00:00"
    assert dump["GPS"] == {"GPSLatitudeRef": "S", "GPSLatitude": [33.0, 51.0, 54.0]}
    note = dump["Image"]["MakerNote"]
    # 5000 bytes are 10000 hex digits: cut to MAX_EXIF_VALUE_CHARS and the note of the full length
    assert note.startswith("01" * 10) and note.endswith("(10000 characters in all)")
    assert len(note) < MAX_EXIF_VALUE_CHARS + 40


def test_a_file_without_exif_gives_an_empty_dump() -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, format="PNG")
    assert exif_dump(buffer.getvalue()) == {}


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=2048))
def test_any_bytes_give_a_dict_never_an_exception(data: bytes) -> None:
    dump = exif_dump(data)
    assert isinstance(dump, dict)


_SAMPLE = Image.Exif()
_SAMPLE[0x010F] = "Cam"
_SAMPLE[0x8825] = {1: "N", 2: (47.0, 3.0, 0.0)}


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 299), st.integers(0, 255)), min_size=1, max_size=8))
def test_damaged_exif_gives_a_dict_never_an_exception(flips: list[tuple[int, int]]) -> None:
    data = bytearray(_jpeg(_SAMPLE))
    for at, value in flips:
        data[at] = value
    assert isinstance(exif_dump(bytes(data)), dict)
