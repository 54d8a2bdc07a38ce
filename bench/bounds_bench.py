"""Hostile sizes against normal ones (issue 22): peak RSS and output size of ``geosleuth locate``.

Each figure is one ``geosleuth locate`` child process (peak RSS from ``wait4``, output = the
bytes it wrote under ``--out``), printed beside the same figures for a normal input, as ratios:

- model replies from a scripted OpenAI-compatible server on 127.0.0.1: a normal answer, a
  12 MB answer (under the 16 MB response cap: stored cut to the per-turn text cap) and a
  100 MB answer (over the response cap: the turn fails naming the cap, reading stops there);
- the offline pipeline (no model) on a 2 MP photo and on a 62 MP PNG (a few hundred KB on
  disk, just under the 64 M-pixel decode limit);
- issue 32's shapes through the offline pipeline, against the 2 MP photo: a 2000x1 PNG (81 bytes,
  2.86 GB before: RapidOCR padded it to 60000x15000 at full size) and an 8000x8 PNG (930 MB
  before), and a 64x64 PNG carrying a 400 MB eXIf chunk (1.2 GB before; a sparse file here)
  against the same PNG without it;
- issue 32's MCP cases, one in-process server and client per figure (``--mcp``), against the
  same calls on the 2 MP photo: ``exif_gps`` on the 62 MP PNG as ``image_base64`` (~550 MB
  before: decoded in full), six parallel zooms on it (2.53 GB before; now each decode reserves
  its frame from a memory gate over half the available memory, so on a large host all six may
  still run at once, each without the former second copy), and ``ocr`` on the 2000x1 PNG
  (3.0 GB before).
- ``geosleuth score`` (issue 32) on a 100 MB JSON array of prediction rows and on an object
  wrapping the same list, against the same rows as JSON Lines (streamed line by line), and a
  depth-100k item among them that must fail that row alone.

A child's peak includes its own children: the 2 MP "photo" is noise, where RapidOCR finds
unsure lines, so Tesseract re-reads it with every installed script's data (with the 24 that
scripts/test.sh installs: about 1 GB and two minutes of the figure; 249 MiB without Tesseract
on PATH). Measured on the 2-core dev host: 62 MP PNG 625 MiB before the banded OCR reader and
the box-reduced decode, 358 MiB after (the decode's own peak).

The scripted server and the test images are made in helper processes: a child's peak RSS
starts from its parent's, so the measuring process stays small.

- issue 41's inputs (``--only-issue-41``, or ``--issue-41`` with the rest; see ``hostile41.py``):
  a progressive 16000x11000 JPEG through locate, MCP and the web app, a tool-call flood, a 400 MB
  PLTE chunk, and JSON arrays read by the hand-written scanner beside ijson's C backend.

Run: ``PYTHONPATH=src .venv/bin/python bench/bounds_bench.py [--skip-62mp] [--skip-issue-32] [--only-score]
[--issue-41 | --only-issue-41 | --only-flood [--src OTHER/src]] [--flood 170000] [--scalar-mib 400]
[--rows-mib 100]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from geosleuth.testing import FakeOpenAIServer, reply

ROOT = Path(__file__).resolve().parents[1]
ANSWER = '{"lat": 47.0502, "lon": 8.3093, "city": "Luzern", "country": "Switzerland"}'


def locate(image: Path, out: Path, *extra: str) -> tuple[float, float, int, str]:
    """(wall s, peak RSS MiB, bytes written under ``out``, status) of one locate child."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-c", "from geosleuth.cli.app import main; main()", "locate", str(image)]
    cmd += ["--out", str(out), "--json", *extra]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    stdout = proc.stdout.read() if proc.stdout else ""
    _, _, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    try:
        status = json.loads(stdout)[0]["status"]
    except (ValueError, IndexError, KeyError):
        status = "no output"
    return wall, usage.ru_maxrss / 1024, size, status


def score(path: Path) -> tuple[float, float, int, str]:
    """(wall s, peak RSS MiB, rows scored, what became of the deep row) of one ``score`` child."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-c", "from geosleuth.cli.app import main; main()", "score", str(path)]
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*cmd, "--protocol", "twm", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    stdout = proc.stdout.read() if proc.stdout else ""
    _, _, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    try:
        payload = json.loads(stdout)
        n = payload["n"]
        deep = "failed alone" if any("nested too deeply" in w for w in payload["warnings"]) else ""
    except (ValueError, KeyError):
        n, deep = 0, "the whole file failed"
    return wall, usage.ru_maxrss / 1024, n, deep


def score_documents(work: Path) -> None:
    """100 MB of rows as one JSON array, as an object wrapping them, and as JSON Lines."""
    made("score-docs", work)
    size = (work / "rows.json").stat().st_size / 2**20
    count = sum(1 for _ in (work / "rows.jsonl").open())
    print(f"score --protocol twm ({count:,} rows, {size:.0f} MiB; one row nested 100k deep):")
    lines = score(work / "rows.jsonl")
    for name in ("rows.json", "wrapped.json"):
        ours = score(work / name)
        print(
            f"  {name:<14} {ours[1]:5.0f} MiB peak, {ours[0]:5.1f} s, {ours[2]:,} rows, deep row: "
            f"{ours[3] or 'NOT reported'} | JSON Lines {lines[1]:5.0f} MiB, "
            f"{lines[0]:5.1f} s | {ours[1] / lines[1]:5.2f}x RSS, {ours[0] / lines[0]:5.2f}x time"
        )


def make_score_documents(work: Path) -> None:
    row_text = json.dumps(
        {"index": 0, "ground_truth": {"lat": 47.05, "lon": 8.31}, "solution_str": "x" * 900 + ANSWER}
    )
    count = 100_000_000 // (len(row_text) + 2)
    deep = '{"index": -1, "solution_str": ' + "[" * 100_000 + "]" * 100_000 + "}"
    rows = [row_text.replace('"index": 0', f'"index": {i}', 1) for i in range(count)]
    rows[count // 2] = deep
    (work / "rows.jsonl").write_text("\n".join(rows) + "\n")
    (work / "rows.json").write_text("[\n" + ",\n".join(rows) + "\n]\n")
    (work / "wrapped.json").write_text('{"model": "m", "results": [\n' + ",\n".join(rows) + "\n]}\n")


def row(
    name: str, ours: tuple[float, float, int, str], ref_name: str, ref: tuple[float, float, int, str]
) -> str:
    return (
        f"  {name:<14} {ours[1]:5.0f} MiB peak, {ours[2] / 1024:8.1f} KiB out, "
        f"{ours[0]:5.1f} s ({ours[3]}) | "
        f"{ref_name:<12} {ref[1]:5.0f} MiB, {ref[2] / 1024:6.1f} KiB | "
        f"{ours[1] / ref[1]:5.2f}x RSS, {ours[2] / max(ref[2], 1):7.1f}x output"
    )


def helper(*args: str) -> subprocess.Popen[str]:
    """This script in a helper mode (``--serve`` or ``--make``), in its own process."""
    return subprocess.Popen(
        [sys.executable, __file__, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def serve(size: int) -> None:
    """Serve replies of ``size`` filler characters plus the answer until stdin closes."""
    with FakeOpenAIServer(default=reply("x" * size + ANSWER)) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


def make(kind: str, path: Path) -> None:
    rng = np.random.default_rng(0)
    if kind == "score-docs":
        make_score_documents(path)
    elif kind.startswith("i41-"):
        import hostile41  # this folder is on the path of a script

        hostile41.make(kind, path)
    elif kind in STRIPS:
        Image.new("RGB", STRIPS[kind], (200, 200, 200)).save(path)
    elif kind == "64px":
        Image.new("RGB", (64, 64), (30, 90, 150)).save(path)
    elif kind == "exif400":
        from adversarial_bench import exif_chunk_png  # this folder is on the path of a script

        exif_chunk_png(path)
    elif kind == "photo":
        Image.fromarray(rng.integers(0, 255, (480, 640, 3), dtype=np.uint8)).save(path, quality=85)
    elif kind == "2mp":
        Image.fromarray(rng.integers(0, 255, (1200, 1700, 3), dtype=np.uint8)).save(path, quality=90)
    else:
        canvas = Image.new("RGB", (9100, 6820), (200, 210, 220))  # 62.06 M pixels
        canvas.paste((40, 60, 90), (0, 5000, 9100, 6820))
        canvas.save(path)


def made(kind: str, path: Path) -> Path:
    proc = helper("--make", kind, str(path))
    proc.communicate()
    return path


def model_replies(work: Path) -> None:
    image = made("photo", work / "photo.jpg")
    print("model replies (thinking_with_map, scripted server on 127.0.0.1):")
    runs = {}
    for name, size in (("normal reply", 0), ("12 MB reply", 12_000_000), ("100 MB reply", 100_000_000)):
        server = helper("--serve", str(size))
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        try:
            model = ["--model", "m", "--base-url", base_url, "--prompt", "thinking_with_map", "--tools", ""]
            runs[name] = locate(image, work / name.replace(" ", "_"), *model)
        finally:
            server.communicate("")
    for name in ("12 MB reply", "100 MB reply"):
        print(row(name, runs[name], "normal reply", runs["normal reply"]))


def big_images(work: Path, skip_62mp: bool) -> None:
    print("offline pipeline (no model):")
    normal = locate(made("2mp", work / "photo_2mp.jpg"), work / "out_2mp")
    if skip_62mp:
        print("  62 MP PNG skipped (--skip-62mp)")
        return
    big = made("62mp", work / "big_62mp.png")
    print(f"  (62 MP PNG: {big.stat().st_size / 1024:.0f} KB on disk)")
    print(row("62 MP PNG", locate(big, work / "out_62mp"), "2 MP photo", normal))


STRIPS = {"2000x1": (2000, 1), "8000x8": (8000, 8)}


def issue_32_locate(work: Path) -> None:
    print("issue 32, offline pipeline (no model):")
    normal = locate(made("2mp", work / "ref_2mp.jpg"), work / "ref_out_2mp")
    for name in STRIPS:
        run = locate(made(name, work / f"{name}.png"), work / f"out_{name}")
        print(row(f"{name} PNG", run, "2 MP photo", normal))
    plain = locate(made("64px", work / "64px.png"), work / "out_64px")
    exif = locate(made("exif400", work / "exif400.png"), work / "out_exif400")
    print(row("400 MB eXIf", exif, "same w/o it", plain))


def mcp_child(tool: str, image: Path, parallel: int) -> None:
    """One MCP server and client in this process: ``parallel`` calls of ``tool`` on ``image``."""
    import asyncio
    import base64

    from mcp import Client

    from geosleuth.tools import build_registry
    from geosleuth.tools.config import ToolSettings
    from geosleuth.tools.mcp_server import build_server

    arguments = {"image_base64": base64.b64encode(image.read_bytes()).decode()}
    if tool == "image_zoom_in_tool":
        arguments["bbox_2d"] = [0, 0, 100, 100]

    async def calls() -> None:
        server = build_server(build_registry(ToolSettings(cache={"backend": "none"})))
        async with Client(server) as client:
            results = await asyncio.gather(
                *(client.call_tool(tool, dict(arguments)) for _ in range(parallel))
            )
        print("error" if any(r.is_error for r in results) else "ok", flush=True)

    asyncio.run(calls())


def mcp(tool: str, image: Path, parallel: int = 1) -> tuple[float, float, int, str]:
    """(wall s, peak RSS MiB, 0, status) of one ``--mcp`` child."""
    start = time.perf_counter()
    proc = helper("--mcp", tool, str(image), str(parallel))
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    stdout = proc.stdout.read()
    _, _, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, 0, stdout.strip() or "no output"


def issue_32_mcp(work: Path, skip_62mp: bool) -> None:
    print("issue 32, MCP (image_base64, in-process server and client):")
    photo = made("2mp", work / "mcp_2mp.jpg")
    strip = made("2000x1", work / "mcp_2000x1.png")
    print(row("ocr 2000x1", mcp("ocr", strip), "ocr 2 MP", mcp("ocr", photo)))
    if skip_62mp:
        print("  62 MP PNG skipped (--skip-62mp)")
        return
    big = made("62mp", work / "mcp_62mp.png")
    print(row("exif_gps 62MP", mcp("exif_gps", big), "exif 2 MP", mcp("exif_gps", photo)))
    print(
        row(
            "6 zooms 62MP",
            mcp("image_zoom_in_tool", big, 6),
            "6 zooms 2MP",
            mcp("image_zoom_in_tool", photo, 6),
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-62mp", action="store_true")
    parser.add_argument("--only-score", action="store_true", help="Only the score figures.")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--skip-issue-32", action="store_true")
    parser.add_argument("--make", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--mcp", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--i41", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--issue-41", action="store_true", help="Add issue 41's figures.")
    parser.add_argument("--only-issue-41", action="store_true", help="Only issue 41's figures.")
    parser.add_argument("--flood", type=int, default=170_000, help="Tool calls in each flooding reply.")
    parser.add_argument("--only-flood", action="store_true", help="Only issue 41's tool-call flood figures.")
    parser.add_argument(
        "--src", type=Path, default=Path(__file__).resolve().parents[1] / "src",
        help="The source folder the flood figures run (main's for a before figure).",
    )  # fmt: skip
    parser.add_argument("--scalar-mib", type=int, default=400, help="Size of the oversized JSON item.")
    parser.add_argument("--rows-mib", type=int, default=100, help="Size of the JSON arrays of rows.")
    args = parser.parse_args()
    import hostile41  # this folder is on the path of a script

    if args.i41:
        hostile41.dispatch(args.i41)
        return 0
    if args.mcp:
        mcp_child(args.mcp[0], Path(args.mcp[1]), int(args.mcp[2]))
        return 0
    if args.serve is not None:
        serve(args.serve)
        return 0
    if args.make:
        make(args.make[0], Path(args.make[1]))
        return 0
    with tempfile.TemporaryDirectory(prefix="bounds_bench_") as tmp:
        work = Path(tmp)
        if args.only_flood:
            hostile41.flood_section(work, args.flood, made("photo", work / "photo.jpg"), args.src.resolve())
            return 0
        if args.issue_41 or args.only_issue_41:
            hostile41.section(work, __file__, args.flood, args.scalar_mib, args.rows_mib)
        if args.only_issue_41:
            return 0
        if not args.only_score:
            model_replies(work)
            big_images(work, args.skip_62mp)
            if not args.skip_issue_32:
                issue_32_locate(work)
                issue_32_mcp(work, args.skip_62mp)
        score_documents(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
