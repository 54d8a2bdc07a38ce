"""Bounded image decoding (issue 14, item 4): header first, JPEG reduced on decode, other formats
refused above the limit with a clear error on the sample; reports and the web app survive bombs."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from PIL import Image

from geosleuth.agent import AgentConfig, run_task
from geosleuth.agent.images import load_image
from geosleuth.bounds.imageio import ImageInputError, open_image, probe_image, thumbnail
from geosleuth.core.records import Prediction, Task, Trajectory, TrajectoryStatus
from geosleuth.webapp.casestore import CaseStore


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def big_blank_png(path: Path, width: int, height: int) -> Path:
    """A real, valid RGB PNG of ``width`` × ``height`` black pixels, written row by row (never
    held in memory): 12000 × 12000 comes to about 420 KB, the issue's file."""
    compressor = zlib.compressobj(9)
    rows_per_block = 100 if height % 100 == 0 else 1
    block = b"\x00" * ((1 + 3 * width) * rows_per_block)
    # after a full flush the compressor starts afresh, so every block compresses to the same bytes;
    # only the stream header (2 bytes) comes once and the checksum covers all blocks
    first = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    blocks = height // rows_per_block
    checksum = 1
    for _ in range(blocks):
        checksum = zlib.adler32(block, checksum)
    tail = compressor.flush()[:-4] + struct.pack(">I", checksum)
    idat = first + first[2:] * (blocks - 1) + tail
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")
    )
    return path


def bomb_png(path: Path, side: int = 30000) -> Path:
    """A tiny PNG whose header claims ``side`` × ``side`` pixels (a decompression bomb)."""
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buffer, format="PNG")
    data = bytearray(buffer.getvalue())
    ihdr = bytearray(data[16:29])
    ihdr[0:8] = struct.pack(">II", side, side)
    data[16:29] = ihdr
    data[29:33] = struct.pack(">I", zlib.crc32(b"IHDR" + bytes(ihdr)))
    path.write_bytes(bytes(data))
    return path


@pytest.fixture(scope="module")
def png_12k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return big_blank_png(tmp_path_factory.mktemp("png") / "12k.png", 12000, 12000)


def test_the_issues_png_is_refused_before_decoding(png_12k: Path) -> None:
    assert png_12k.stat().st_size < 600_000  # ~420 KB on disk, 432 MB as pixels
    with pytest.raises(ImageInputError) as info:
        load_image(png_12k)
    message = str(info.value)
    assert "12000x12000 = 144,000,000 pixels" in message and "decode limit" in message
    assert "GEOSLEUTH_MAX_IMAGE_PIXELS" in message  # says how to allow it


def test_peak_memory_of_the_refusal_is_small(png_12k: Path) -> None:
    """Measured in a fresh process: the refusal costs a header read (the issue saw 2.07 GB)."""
    code = (
        "import resource, sys\n"
        "from geosleuth.agent.images import load_image, ImageInputError\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n    load_image(sys.argv[1])\nexcept ImageInputError:\n    pass\n"
        "print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(png_12k)], capture_output=True, text=True, check=True
    )
    before_kb, after_kb = map(int, out.stdout.split())
    assert after_kb - before_kb < 50_000  # < 50 MB more than the imports took


def test_the_limit_is_configurable(png_12k: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    small = big_blank_png(tmp_path / "small.png", 300, 200)
    with pytest.raises(ImageInputError, match="above the 50,000-pixel decode limit"):
        open_image(small, 50_000)
    monkeypatch.setenv("GEOSLEUTH_MAX_IMAGE_PIXELS", "50000")
    with pytest.raises(ImageInputError):
        load_image(small)
    monkeypatch.setenv("GEOSLEUTH_MAX_IMAGE_PIXELS", "60000")
    assert load_image(small).size == (300, 200)


def test_a_header_beyond_pillows_own_limit_names_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pillow refuses more than 2 × 89,478,485 pixels in ``Image.open``, before our check: the
    message is still ours (the limit and how to raise it), not Pillow's "DOS attack"."""
    path = bomb_png(tmp_path / "225mp.png", 15000)
    with pytest.raises(ImageInputError) as info:
        open_image(path)
    message = str(info.value)
    assert "image is 225,000,000 pixels, above the 64,000,000-pixel decode limit" in message
    assert "GEOSLEUTH_MAX_IMAGE_PIXELS" in message and "DOS" not in message
    monkeypatch.setenv("GEOSLEUTH_MAX_IMAGE_PIXELS", "300000000")  # ours allows it, Pillow does not
    with pytest.raises(ImageInputError, match="above the 178,956,970 pixels Pillow decodes at most"):
        open_image(path)


def test_jpeg_is_reduced_while_decoding(tmp_path: Path) -> None:
    path = tmp_path / "photo.jpg"
    Image.new("RGB", (4000, 3000), (10, 120, 200)).save(path, quality=80)
    img = open_image(path, 1_000_000)
    assert img.size[0] * img.size[1] <= 1_000_000
    assert img.size == (1000, 750)  # a 1/4 DCT scale: the decoder never held 12 M pixels
    assert img.info["decode_scale"] == 0.25 and img.info["original_size"] == (4000, 3000)
    assert open_image(path).size == (4000, 3000)  # under the default limit nothing changes


def test_probe_checks_integrity_in_bounded_memory(tmp_path: Path, png_12k: Path) -> None:
    good = big_blank_png(tmp_path / "ok.png", 640, 480)
    assert probe_image(good) == ("PNG", (640, 480))
    cut = tmp_path / "cut.png"
    cut.write_bytes(good.read_bytes()[:-20])
    with pytest.raises(ImageInputError, match="damaged or truncated"):
        probe_image(cut)
    with pytest.raises(ImageInputError, match="decompression bomb"):
        probe_image(png_12k)
    jpeg = tmp_path / "cut.jpg"
    buffer = io.BytesIO()
    Image.effect_noise((800, 600), 60).convert("RGB").save(buffer, format="JPEG")
    jpeg.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    with pytest.raises(ImageInputError, match="damaged or truncated"):
        probe_image(jpeg)


def test_thumbnail_of_a_bomb_is_an_error_not_a_crash(tmp_path: Path) -> None:
    with pytest.raises(ImageInputError, match="decompression bomb"):
        thumbnail(bomb_png(tmp_path / "bomb.png"), 256)


async def test_a_bomb_in_a_dataset_is_an_input_error_on_its_sample(tmp_path: Path) -> None:
    config = AgentConfig(model="fake", base_url="http://127.0.0.1:9")
    trajectory = await run_task(Task(id="bomb", image=str(bomb_png(tmp_path / "b.png"))), config)
    assert trajectory.status is TrajectoryStatus.INPUT_ERROR
    assert "decompression bomb" in (trajectory.error or "")


def test_report_survives_a_bomb_and_writes_summary(tmp_path: Path) -> None:
    """The issue's repro: a 30000 × 30000 bomb referenced by a dataset used to crash the report."""
    from geosleuth.eval.datasets.loading import load_dataset
    from geosleuth.eval.report.write import write_report
    from geosleuth.eval.run.config import EvalConfig, build_manifest, write_manifest
    from geosleuth.eval.run.pipeline import write_samples
    from geosleuth.eval.run.runner import run_samples

    data = tmp_path / "data"
    (data / "images").mkdir(parents=True)
    bomb_png(data / "images" / "bomb.png")
    Image.new("RGB", (64, 48), (200, 30, 30)).save(data / "images" / "ok.jpg")
    with (data / "data.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "image", "lat", "lon", "country"])
        writer.writerows(
            [["bomb", "bomb.png", 48.85, 2.35, "France"], ["ok", "ok.jpg", 52.52, 13.4, "Germany"]]
        )
    samples = load_dataset(data).samples
    run = tmp_path / "run"
    write_manifest(run, build_manifest(EvalConfig(dataset=str(data), out=str(run)), {"source": str(data)}))
    write_samples(run, samples)

    async def answer(task: Task) -> Trajectory:
        return Trajectory(sample_id=task.id, model="m", prediction=Prediction(lat=48.85, lon=2.35))

    asyncio.run(run_samples(samples, answer, run, concurrency=2))
    summary = write_report(run, plots=False)
    written = json.loads((run / "summary.json").read_text())
    assert sum(written["status_counts"].values()) == sum(summary["status_counts"].values()) == 2
    pages = {p.name: p.read_text() for p in (run / "html" / "samples").iterdir()}
    bomb_page = next(text for name, text in pages.items() if name.startswith("bomb"))
    assert "image not shown" in bomb_page and "decompression bomb" in bomb_page
    ok_page = next(text for name, text in pages.items() if name.startswith("ok"))
    assert 'src="data:image/jpeg;base64,' in ok_page


async def test_webapp_decodes_uploads_only_inside_the_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four parallel uploads of a large PNG: probed at once (bounded), decoded one job at a time."""
    import geosleuth.webapp.jobs as jobs
    from geosleuth.webapp import ServeSettings

    active = peak = decodes = 0
    real_thumbnail = jobs.thumbnail

    def counting_thumbnail(*args: object, **kwargs: object) -> Image.Image:
        nonlocal active, peak, decodes
        active += 1
        peak, decodes = max(peak, active), decodes + 1
        try:
            return real_thumbnail(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            active -= 1

    async def slow_agent(task: Task, config: AgentConfig, **kwargs: object) -> Trajectory:
        await asyncio.sleep(0.05)
        return Trajectory(sample_id=task.id, model="stub")

    monkeypatch.setattr(jobs, "thumbnail", counting_thumbnail)
    monkeypatch.setattr(jobs, "run_task", slow_agent)
    upload = big_blank_png(tmp_path / "upload.png", 2600, 2000).read_bytes()  # 5.2 M pixels: not "cheap"
    workdir = tmp_path / "jobs"
    workdir.mkdir()
    manager = jobs.JobManager(ServeSettings(workdir=workdir, concurrency=1), workdir, CaseStore(workdir))
    created = await asyncio.gather(
        *(
            manager.create(upload, f"u{i}.png", prompt_style=None, samples=1, use_model=False)
            for i in range(4)
        )
    )
    # admitted without decoding: only a job that already left the queue (one slot) has decoded
    assert decodes <= 1 and sum((job.dir / jobs.PREVIEW_FILE).exists() for job in created) <= 1
    await asyncio.gather(*list(manager.tasks))
    assert decodes == 4 and peak == 1  # then decoded within the queue limit
    assert all(job.status == "done" and (job.dir / jobs.PREVIEW_FILE).exists() for job in created)


@pytest.mark.parametrize("mode", ["P", "1", "I;16"])
def test_large_palette_one_bit_and_16_bit_grey_images_are_read(tmp_path: Path, mode: str) -> None:
    """Issue 41, item 11: `Image.reduce` refuses these modes, so a valid 39.6 MP palette PNG failed
    as "damaged or truncated". Through `geosleuth locate` (offline: the OCR work copy is box
    reduced) they are read; 16-bit grey keeps its tones (Pillow's own conversion clips to white)."""
    import numpy as np
    from typer.testing import CliRunner

    from geosleuth.bounds.imageio import open_work_copy
    from geosleuth.cli.app import app

    ramp = (np.arange(3000 * 2000, dtype=np.uint32) % 3000 * 255 // 2999).astype(np.uint8).reshape(2000, 3000)
    grey = Image.fromarray(ramp)
    image = {"P": grey.convert("P"), "1": grey.convert("1"),
             "I;16": Image.fromarray(ramp.astype(np.uint16) * 257)}[mode]  # fmt: skip
    assert image.mode == mode
    path = tmp_path / f"{mode.replace(';', '')}.png"
    image.save(path)
    work = open_work_copy(path, 1_000_000)
    assert work.mode == "RGB" and work.size[0] * work.size[1] <= 1_000_000
    if mode != "1":  # the left edge dark, the right edge light, as in the file
        assert work.getpixel((2, 300))[0] < 20 and work.getpixel((work.size[0] - 3, 300))[0] > 235
    result = CliRunner().invoke(app, ["locate", str(path), "--json", "--out", str(tmp_path / "out")])
    record = json.loads(result.stdout)[0]
    assert record["status"] != "input_error", record["error"]
