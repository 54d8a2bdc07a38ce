"""Large images cost bounded memory: the offline pipeline reads a bounded copy, metadata is read
from headers only, a folder's concurrency follows memory, and bad GPS references are unusable."""

from __future__ import annotations

import asyncio
import struct
import time
import zlib
from pathlib import Path

import pytest
from PIL import Image, ImageFile
from PIL.TiffImagePlugin import IFDRational as R

import geosleuth.agent.offline as offline
import geosleuth.agent.runner as runner
from geosleuth.agent import AgentConfig, run_tasks
from geosleuth.agent.memory import BYTES_PER_PIXEL, TASK_OVERHEAD, MemoryGate, task_memory
from geosleuth.bounds.ocr import ocr_peak_bytes
from geosleuth.core.records import Task, Trajectory
from geosleuth.tools.exif import read_exif


def _gps_exif(lat_ref: str | None = "N", lon_ref: str | None = "E") -> Image.Exif:
    exif = Image.Exif()
    gps = exif.get_ifd(0x8825)
    gps.update({2: (47.0, 3.0, 0.0), 4: (8.0, 18.0, 36.0)})
    if lat_ref is not None:
        gps[1] = lat_ref
    if lon_ref is not None:
        gps[3] = lon_ref
    return exif


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def png_with_exif_after_pixels(path: Path, size: tuple[int, int]) -> Path:
    """A PNG whose eXIf chunk follows the image data (legal, and where Pillow must decode to find it)."""
    Image.new("RGB", size, (90, 120, 200)).save(path)
    data = path.read_bytes()
    end = data.rindex(b"IEND") - 4
    path.write_bytes(data[:end] + _chunk(b"eXIf", _gps_exif().tobytes()) + data[end:])
    return path


def test_exif_of_a_png_is_read_from_its_chunks_without_decoding_pixels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = png_with_exif_after_pixels(tmp_path / "gps.png", (3000, 2000))

    def no_decode(self: ImageFile.ImageFile) -> None:
        raise AssertionError("pixels decoded to read metadata")

    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decode)
    info = read_exif(None, str(path))
    assert info.lat == pytest.approx(47.05) and info.lon == pytest.approx(8.31)


@pytest.mark.parametrize(
    ("lat_ref", "lon_ref", "problem"),
    [
        ("X", "E", "latitude reference 'X' is not N or S"),
        ("N", "Q", "longitude reference 'Q' is not E or W"),
        ("E", "N", "latitude reference 'E' is not N or S"),  # letters swapped between the axes
        (None, "E", "latitude reference missing is not N or S"),
    ],
)
def test_invalid_gps_references_make_the_position_unusable(
    tmp_path: Path, lat_ref: str | None, lon_ref: str | None, problem: str
) -> None:
    path = tmp_path / "bad.jpg"
    Image.new("RGB", (32, 24), "white").save(path, exif=_gps_exif(lat_ref, lon_ref))
    info = read_exif(None, str(path))
    assert (info.lat, info.lon) == (None, None)
    assert info.gps_problem == problem
    assert f"GPS position: unusable ({problem})" in info.describe()


@pytest.mark.parametrize(
    ("lat", "lon", "problem"),
    [
        ((R(47, 0), R(3, 1), R(0, 1)), (8.0, 18.0, 36.0), "latitude degrees have a zero denominator (47/0)"),
        ((47.0, 3.0, 0.0), (R(8, 1), R(0, 0), R(0, 1)), "longitude minutes have a zero denominator (0/0)"),
        ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), "position 0, 0 (what a camera without a fix writes)"),
        ((95.0, 0.0, 0.0), (8.0, 0.0, 0.0), "position 95, 8 is outside -90..90, -180..180"),
    ],
)
def test_a_gps_value_that_is_no_position_says_why(
    tmp_path: Path, lat: tuple[object, ...], lon: tuple[object, ...], problem: str
) -> None:
    exif = _gps_exif()
    exif.get_ifd(0x8825).update({2: lat, 4: lon})
    path = tmp_path / "zero.jpg"
    Image.new("RGB", (32, 24), "white").save(path, exif=exif)
    info = read_exif(None, str(path))
    assert (info.lat, info.lon) == (None, None)
    assert info.describe().splitlines()[0] == f"GPS position: unusable ({problem})"


def test_valid_references_in_any_case_still_sign_the_position(tmp_path: Path) -> None:
    path = tmp_path / "ok.jpg"
    Image.new("RGB", (32, 24), "white").save(path, exif=_gps_exif("s", "W"))
    info = read_exif(None, str(path))
    assert info.lat == pytest.approx(-47.05) and info.lon == pytest.approx(-8.31) and info.gps_problem is None


async def test_the_offline_pipeline_reads_a_bounded_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = png_with_exif_after_pixels(tmp_path / "big.png", (4000, 3000))  # 12 MP, above the 8 MP copy
    seen: list[tuple[int, int]] = []
    real = offline.locate_offline

    def spy(image: Image.Image, *args: object, **kwargs: object) -> offline.OfflineResult:
        seen.append(image.size)
        return real(image, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(offline, "locate_offline", spy)
    traj = await offline.run_offline(Task(id="big", image=str(path)), AgentConfig())
    (size,) = seen
    assert size[0] * size[1] <= offline.OFFLINE_WORK_PIXELS and size[0] / size[1] == pytest.approx(
        4 / 3, 0.01
    )
    assert traj.prediction is not None and traj.prediction.coords_source == "exif"  # found in the file


async def test_memory_gate_runs_what_fits_and_a_too_large_task_alone() -> None:
    gate = MemoryGate(100)
    running = peak = 0

    async def task(need: int) -> None:
        nonlocal running, peak
        async with gate.hold(need):
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            running -= 1

    await asyncio.gather(*(task(30) for _ in range(7)))
    assert peak == 3
    peak = 0
    await asyncio.gather(*(task(250) for _ in range(3)))  # each alone larger than the budget
    assert peak == 1 and gate.used == 0


async def test_locate_on_a_folder_sizes_its_concurrency_by_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = []
    for i in range(6):
        paths.append(tmp_path / f"p{i}.png")
        Image.new("RGB", (2000, 1500), (i, i, i)).save(paths[-1])
    need = task_memory(str(paths[0]))
    assert need == 2000 * 1500 * BYTES_PER_PIXEL + TASK_OVERHEAD + ocr_peak_bytes(2000, 1500)
    monkeypatch.setattr(runner, "memory_gate", lambda: MemoryGate(2 * need + 1))  # room for two
    running = peak = 0

    async def fake_run_task(task: Task, config: AgentConfig, **kwargs: object) -> Trajectory:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        return Trajectory(sample_id=task.id, model="m")

    monkeypatch.setattr(runner, "run_task", fake_run_task)
    tasks = [Task(id=p.stem, image=str(p)) for p in paths]
    out = await run_tasks(tasks, AgentConfig(), concurrency=8)
    assert [t.sample_id for t in out] == [p.stem for p in paths] and peak == 2


def test_a_task_reserves_what_ocr_allocates_for_its_shape(tmp_path: Path) -> None:
    """The reservation follows OCR's real peak, not the pixel count: a 2000x1 strip is skipped by
    OCR (it once cost 2.9 GB), a long thin one is read in tiles of one band's cost."""
    needs = {}
    for size in ((2000, 1), (8000, 8), (640, 480)):
        path = tmp_path / f"{size[0]}x{size[1]}.png"
        Image.new("RGB", size, "white").save(path)
        needs[size] = task_memory(str(path)) - size[0] * size[1] * BYTES_PER_PIXEL - TASK_OVERHEAD
    assert needs[(2000, 1)] == 0
    assert needs[(640, 480)] > 0 and needs[(8000, 8)] < 200 * 2**20


async def test_one_at_a_time_starts_the_images_in_the_order_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--concurrency 1` is input order even when the first image's size takes longest to read
    (it was measured before the slot was taken, so a quicker second image could go first)."""
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"p{i}.png")
        Image.new("RGB", (64, 48), (i, i, i)).save(paths[-1])

    def slow_first(image: str) -> int:
        time.sleep(0.2 if image.endswith("p0.png") else 0.0)
        return task_memory(image)

    started: list[str] = []

    async def fake_run_task(task: Task, config: AgentConfig, **kwargs: object) -> Trajectory:
        started.append(task.id)
        await asyncio.sleep(0.01)
        return Trajectory(sample_id=task.id, model="m")

    monkeypatch.setattr(runner, "task_memory", slow_first)
    monkeypatch.setattr(runner, "run_task", fake_run_task)
    out = await run_tasks([Task(id=p.stem, image=str(p)) for p in paths], AgentConfig(), concurrency=1)
    assert started == ["p0", "p1", "p2"] and [t.sample_id for t in out] == started
