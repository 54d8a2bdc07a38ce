"""Oversized ancillary PNG chunks are left out unread (issue 32, item 7): a 400 MB eXIf chunk in a
64x64 PNG cost 1.2 GB while Pillow opened it; the image still decodes, its small chunks stay."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from geosleuth.bounds.imageio import header_size, open_header, open_image
from geosleuth.bounds.pngchunks import MAX_ANCILLARY_CHUNK, _Spliced, dropped_chunks
from geosleuth.tools.exif import read_exif


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _gps_exif() -> bytes:
    exif = Image.Exif()
    gps = exif.get_ifd(0x8825)
    gps.update({1: "N", 2: (47.0, 3.0, 0.0), 3: "E", 4: (8.0, 18.0, 0.0)})
    return exif.tobytes()


def png_with(chunks: list[tuple[bytes, bytes]], size: tuple[int, int] = (64, 64)) -> bytes:
    """A real PNG of ``size`` with ``chunks`` inserted right after IHDR (before the pixels)."""
    buf = io.BytesIO()
    Image.new("RGB", size, (30, 90, 150)).save(buf, format="PNG")
    png = buf.getvalue()
    return png[:33] + b"".join(_chunk(kind, data) for kind, data in chunks) + png[33:]


def test_an_oversized_exif_chunk_is_left_out_and_the_image_decodes() -> None:
    big = b"MM\x00\x2a" + b"\x00" * (MAX_ANCILLARY_CHUNK + 10)
    data = png_with([(b"eXIf", big), (b"tEXt", b"Comment\x00small")])
    assert [kind for _, _, kind in dropped_chunks(io.BytesIO(data))] == [b"eXIf"]
    image = open_image(data)
    assert image.size == (64, 64) and image.getpixel((5, 5)) == (30, 90, 150)
    assert "exif" not in image.info and image.info.get("Comment") == "small"  # the small one stays
    assert not read_exif(None, data).has_exif


def test_a_small_exif_chunk_is_kept_and_read_from_the_header() -> None:
    data = png_with([(b"eXIf", _gps_exif())])
    assert dropped_chunks(io.BytesIO(data)) == []
    info = read_exif(None, data)
    assert info.lat == pytest.approx(47.05) and info.lon == pytest.approx(8.3)


def test_many_medium_private_chunks_are_capped_together(tmp_path: Path) -> None:
    chunk = b"\x01" * (MAX_ANCILLARY_CHUNK - 1)
    path = tmp_path / "many.png"
    path.write_bytes(png_with([(b"prVt", chunk)] * 12))
    assert 0 < len(dropped_chunks(path.open("rb"))) < 12  # the first 8 MiB are kept
    image = open_header(path)
    assert image.size == (64, 64) and header_size(path) == (64, 64)
    assert sum(len(c[1]) for c in image.private_chunks) <= 8 << 20  # type: ignore[attr-defined]
    image.load()
    assert image.getpixel((0, 0)) == (30, 90, 150)


@settings(max_examples=80, deadline=None)
@given(
    st.binary(min_size=1, max_size=300),
    st.lists(st.tuples(st.integers(0, 299), st.integers(1, 40)), max_size=5),
    st.lists(st.tuples(st.integers(0, 320), st.integers(0, 64)), min_size=1, max_size=8),
)
def test_the_spliced_view_reads_the_bytes_without_the_holes(
    data: bytes, holes: list[tuple[int, int]], reads: list[tuple[int, int]]
) -> None:
    kept = bytearray()
    for i, byte in enumerate(data):
        if not any(start <= i < start + length for start, length in holes):
            kept.append(byte)
    view = io.BufferedReader(_Spliced(io.BytesIO(data), holes))
    assert view.read() == bytes(kept)
    for offset, size in reads:
        view.seek(offset)
        assert view.read(size) == bytes(kept[offset : offset + size])


@pytest.mark.slow
def test_the_issues_400_mb_exif_chunk_costs_little_memory(tmp_path: Path) -> None:
    """Measured in a fresh process: the chunk is never read (Pillow alone peaked at 1.5 GB). The
    file is sparse: the chunk's 400 MB are a hole on disk."""
    path = tmp_path / "exif400.png"
    head = png_with([])
    with path.open("wb") as out:
        out.write(head[:33] + struct.pack(">I", 400_000_000) + b"eXIf")
        out.seek(400_000_000 + 4, io.SEEK_CUR)  # the data (a hole) and a CRC nobody checks
        out.write(head[33:])
    code = (
        "import resource, sys\n"
        "from geosleuth.bounds.imageio import open_image\n"
        "from geosleuth.tools.exif import read_exif\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "image = open_image(sys.argv[1]); read_exif(image, sys.argv[1])\n"
        "print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, image.size[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    before_kb, after_kb, width = map(int, out.stdout.split())
    assert width == 64 and after_kb - before_kb < 100_000  # < 100 MB above the imports


@pytest.mark.parametrize(
    ("kind", "size", "named"),
    [(b"PLTE", 769, "'PLTE' of 769 bytes, where at most 768"), (b"IHDR", 14, "'IHDR' of 14 bytes"),
     (b"ABCD", MAX_ANCILLARY_CHUNK + 1, "unknown critical PNG chunk 'ABCD'")],
)  # fmt: skip
def test_an_oversized_critical_chunk_is_refused_by_name(kind: bytes, size: int, named: str) -> None:
    """Issue 41, item 8: critical chunks cannot be left out, so past what the specification allows
    (or past the ancillary cap, for an unknown one) the image is refused before a decoder reads them."""
    data = png_with([(kind, b"\x00" * size)])
    with pytest.raises(ValueError, match=named):
        open_image(data)
    assert png_with([(b"PLTE", b"\x00" * 768)])  # a full 256-entry palette is fine


def test_a_400_mb_palette_through_locate_costs_little(tmp_path: Path) -> None:
    """`geosleuth locate` on a 64x64 PNG whose PLTE claims 400 MB (a hole on disk): refused by name
    in a fresh process without reading the chunk (1.27 GB before)."""
    import json

    path = tmp_path / "plte400.png"
    head = png_with([])
    with path.open("wb") as out:
        out.write(head[:33] + struct.pack(">I", 400_000_000) + b"PLTE")
        out.seek(400_000_000 + 4, io.SEEK_CUR)
        out.write(head[33:])
    code = (  # VmHWM: this process's own peak (ru_maxrss would start from the forking parent's)
        "import contextlib, sys\nfrom geosleuth.cli.app import main\n"
        "with contextlib.suppress(SystemExit):\n    main()\n"
        "print(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])\n"
    )
    cmd = [sys.executable, "-c", code, "locate", str(path), "--json", "--out", str(tmp_path / "out")]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    output, peak_kb = done.stdout.rsplit("\n", 2)[0], int(done.stdout.split()[-1])
    record = json.loads(output)[0]
    assert record["status"] == "input_error" and "'PLTE' of 400,000,000 bytes" in record["error"]
    assert peak_kb < 400_000  # the imports and the offline pipeline, not the chunk
