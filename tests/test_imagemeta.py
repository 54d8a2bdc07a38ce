"""Image metadata (issue 42): what `metadata_kinds` finds from headers, what stripping removes,
that JPEG and PNG keep their pixels bit for bit, and that any bytes are handled in bounded time."""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image, PngImagePlugin

from geosleuth.bounds.imageio import ImageInputError
from geosleuth.bounds.imagemeta import (
    metadata_kinds,
    pixels_only_data_url,
    strip_metadata,
    stripped_file_bytes,
)
from geosleuth.core.records import Sample, Task, Trajectory
from geosleuth.eval.run.backends import InProcessExecutor, run_sharded
from geosleuth.eval.run.store import TrajectoryStore
from geosleuth.tools.leakguard import GuardSpec, active_guard

XMP = b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:Description photoshop:City="Paris"/></x:xmpmeta>'
IPTC = b"Photoshop 3.0\x008BIM\x04\x04\x00\x00\x00\x00\x00\x0b\x1c\x02\x5a\x00\x05Paris\x00"


def _photo() -> Image.Image:
    img = Image.new("RGB", (40, 30), (10, 20, 30))
    img.putpixel((3, 4), (250, 0, 0))
    return img


def _gps_exif(img: Image.Image) -> Image.Exif:
    exif = img.getexif()
    exif.get_ifd(0x8825).update({1: "N", 2: (48.0, 51.0, 30.0), 3: "E", 4: (2.0, 17.0, 40.0)})
    return exif


def test_kinds_from_headers(tmp_path: Path) -> None:
    img = _photo()
    camera = img.getexif()
    camera[0x010F] = "Canon"  # make only: names no place
    cases = {
        "camera.jpg": ({"exif": camera}, []),
        "gps.jpg": ({"exif": _gps_exif(_photo())}, ["gps"]),
        "comment.jpg": ({"comment": b"Paris"}, ["comment"]),
        "xmp.jpg": ({"xmp": XMP}, ["xmp"]),
        "plain.jpg": ({}, []),
    }
    for name, (options, kinds) in cases.items():
        img.save(tmp_path / name, **options)
        assert metadata_kinds(tmp_path / name) == kinds, name
    info = PngImagePlugin.PngInfo()
    info.add_text("Description", "Eiffel Tower")
    info.add_itxt("XML:com.adobe.xmp", XMP.decode())
    exif = _gps_exif(_photo())
    exif[0x010F] = "Canon"  # Pillow writes no eXIf chunk for an EXIF whose first IFD is empty
    img.save(tmp_path / "text.png", pnginfo=info, exif=exif)
    assert metadata_kinds(tmp_path / "text.png") == ["gps", "text", "xmp"]
    with pytest.raises(ImageInputError):
        metadata_kinds(tmp_path / "missing.jpg")


def test_iptc_segment_is_found_and_removed(tmp_path: Path) -> None:
    buf = io.BytesIO()
    _photo().save(buf, format="JPEG")
    data = buf.getvalue()
    app13 = b"\xff\xed" + (len(IPTC) + 2).to_bytes(2, "big") + IPTC
    tagged = data[:2] + app13 + data[2:]  # APP13 right after SOI, as Photoshop writes it
    (tmp_path / "iptc.jpg").write_bytes(tagged)
    assert metadata_kinds(tmp_path / "iptc.jpg") == ["iptc"]
    clean = stripped_file_bytes(tagged)
    assert b"Paris" not in clean and clean == data  # exactly the file before the segment went in


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP"])
def test_stripping_keeps_the_pixels(tmp_path: Path, fmt: str) -> None:
    img = _photo()
    buf = io.BytesIO()
    extra = {"lossless": True} if fmt == "WEBP" else {}
    img.save(buf, format=fmt, exif=_gps_exif(_photo()), **extra)
    clean = stripped_file_bytes(buf.getvalue())
    path = tmp_path / f"clean.{fmt.lower()}"
    path.write_bytes(clean)
    assert metadata_kinds(path) == []
    with Image.open(io.BytesIO(buf.getvalue())) as before, Image.open(path) as after:
        assert after.format == fmt and after.tobytes() == before.tobytes()
    assert pixels_only_data_url(path).startswith(f"data:image/{fmt.lower()};base64,")


def test_strip_metadata_keeps_drawing_info_only() -> None:
    buf = io.BytesIO()
    _photo().save(buf, format="JPEG", exif=_gps_exif(_photo()), comment=b"Paris")
    with Image.open(buf) as img:
        img.info["decode_scale"] = 1.0
        clean = strip_metadata(img)
    assert len(clean.getexif()) == 0 and set(clean.info) == {"decode_scale"}


@given(st.binary(max_size=2000))
def test_any_bytes_are_stripped_or_refused(data: bytes) -> None:
    for prefix in (b"", b"\xff\xd8", b"\x89PNG\r\n\x1a\n"):
        try:
            out = stripped_file_bytes(prefix + data)
        except (ImageInputError, OSError, ValueError):
            continue
        assert len(out) <= len(prefix + data) + 64 or not prefix  # segment removal never grows a file


def test_guard_specs_travel_to_scale_out_workers() -> None:
    spec = GuardSpec("strict", ("flickr.com",), ("s-00001",), (1.0, 2.0))
    assert pickle.loads(pickle.dumps(spec)) == spec  # Ray pickles them to its actors


async def test_scale_out_batches_screen_each_sample_with_its_own_guard(tmp_path: Path) -> None:
    seen: dict[str, bool] = {}

    async def agent(task: Task) -> Trajectory:
        screen = active_guard()
        assert screen is not None
        seen[task.id] = screen.leaks(f"https://example.org/{task.id}", "")
        screen.keep([1, 2, 3], lambda _: ("https://flickr.com/x", ""))
        return Trajectory(sample_id=task.id, model="m")

    samples = [Sample(id=f"s-{i:05d}", image=None, lat=1.0, lon=2.0) for i in range(4)]
    guards = {s.id: GuardSpec("hosts", ("flickr.com",), (s.id,)) for s in samples}
    executor = InProcessExecutor([agent, agent], 2, None, guards)
    await run_sharded(samples, executor, TrajectoryStore(tmp_path), 2, batch_size=2)
    records = TrajectoryStore(tmp_path).load()
    assert seen == {s.id: True for s in samples}
    assert {r.metadata["search_results_blocked"] for r in records.values()} == {3}
