"""Adversarial inputs against a whole run (issue 14): starvation and decode memory.

1. Starvation: the eval runner with the real agent (``direct`` style) against the local fake
   OpenAI server, 64 healthy samples (answers after ``--delay`` s) and, in two of three runs,
   one adversarial sample whose answer is the issue's repro (``" \\n" * 60 + "done"``). With
   ``--parser slow`` (default) parsing that answer also holds the GIL for ``--burn`` s inside
   one C call (exponential regex backtracking), so the figures hold for any parser, fixed or not;
   ``--parser real`` uses the library's parser as it is. Printed: healthy samples that timed out
   (must be 0) for
     - clean: no adversarial sample (the reference),
     - workers: the adversarial sample, parsing in worker processes (what the agent does),
     - thread: the adversarial sample, parsing in a thread (the pre-fix behaviour).
2. Memory: peak RSS of a fresh process opening the issue's 12000 × 12000 PNG (420 KB), a
   12000 × 9000 JPEG and issue 32's 64 × 64 PNG with a 400 MB eXIf chunk (a sparse file), the
   pre-fix way (full decode, EXIF copy, resize) and through `load_image` (PNG refused before
   decoding, JPEG reduced while decoding, the oversized chunk left out unread); ratio after / before.

3. A hostile model server (issue 32): replies whose JSON carries lone surrogates (``\\ud800`` in the
   content, reasoning, tool arguments, city, country) must all be recorded and written as UTF-8
   (the reference: all of them); a reply dripped a byte every ``--drip`` s is held no longer than
   the request deadline (held/deadline ~1); a 200 KB gzip of ``--bomb-mib`` MiB costs the client
   about what a plain reply at the 16 MiB cap costs, beside httpx inflating each network chunk
   whole (the pre-fix reading), as peak traced MiB.
4. A provider's gzip bomb (issue 41): ``--provider-bomb-mib`` MiB (4,000: ~4 MB of gzip, the issue's) through
   ``tools.http.HttpClient``, the path of every provider, beside a plain reply at its 16 MiB cap.

Usage: python bench/adversarial_bench.py [--healthy 64] [--parser slow|real] [--burn 8] [--skip-memory]
       [--skip-starvation] [--skip-server] [--deadline 2] [--drip 0.1] [--bomb-mib 200]
       [--provider-bomb-mib 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import dataclasses
import io
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

from PIL import Image

ADVERSARIAL = " \n" * 60 + "done"
HEALTHY = json.dumps({"lat": 48.8566, "lon": 2.3522, "city": "Paris", "country": "France"})
BACKTRACK = r"(a|aa)+c"
BURN_ENV = "GEOSLEUTH_BENCH_BURN_LENGTH"  # read by worker processes too


def slow_parse(text: str, *args: Any, **kwargs: Any) -> Any:
    """The library's parser, but a whitespace-run answer first holds the GIL for a while (one C
    call, like a backtracking regex): a stand-in for any slow parser."""
    from geosleuth.core.parsing import parse_answer

    if "\n \n \n" in text:
        re.fullmatch(BACKTRACK, "a" * int(os.environ.get(BURN_ENV, "30")))
    return parse_answer(text, *args, **kwargs)


def burn_length(seconds: float) -> int:
    """Characters of ``a`` that make `BACKTRACK` run about ``seconds`` (Fibonacci growth)."""
    n, took = 22, 0.0
    while took < 0.2:
        n += 2
        start = time.perf_counter()
        re.fullmatch(BACKTRACK, "a" * n)
        took = time.perf_counter() - start
    return n + max(0, round(math.log(seconds / took) / math.log((1 + 5**0.5) / 2)))


def make_dataset(folder: Path, healthy: int, adversarial: bool) -> Path:
    (folder / "images").mkdir(parents=True)
    with (folder / "data.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "image", "lat", "lon", "country"])
        for i in range(healthy):
            Image.new("RGB", (96, 64), (i % 256, 90, 150)).save(folder / "images" / f"h{i}.jpg")
            writer.writerow([f"healthy{i:03d}", f"h{i}.jpg", 48.85, 2.35, "France"])
        if adversarial:
            Image.new("RGB", (96, 64), (250, 250, 10)).save(folder / "images" / "adv.jpg")
            writer.writerow(["adversarial", "adv.jpg", 48.85, 2.35, "France"])
    return folder


def adversarial_marker() -> str:
    """A piece of the adversarial image's data URL, as the agent will send it."""
    from geosleuth.agent.images import prepare_image

    image = Image.new("RGB", (96, 64), (250, 250, 10))
    return prepare_image(image).data_url[-200:]


async def run_eval(root: Path, healthy: int, adversarial: bool, args: argparse.Namespace) -> dict[str, Any]:
    from geosleuth.eval.datasets.loading import load_dataset
    from geosleuth.eval.run.config import EvalConfig, build_manifest, write_manifest
    from geosleuth.eval.run.pipeline import AgentRunner, write_samples
    from geosleuth.eval.run.runner import run_samples
    from geosleuth.testing import FakeOpenAIServer, reply

    data = make_dataset(root / "data", healthy, adversarial)
    samples = load_dataset(data).samples
    marker = adversarial_marker()

    def script(request: dict[str, Any]) -> Any:
        if marker in json.dumps(request.get("messages", [])):
            return reply(ADVERSARIAL)
        return dataclasses.replace(reply(HEALTHY), delay_s=args.delay)

    run_dir = root / "run"
    with FakeOpenAIServer(script) as server:
        settings = {
            "model": "fake-vlm",
            "base_url": server.base_url,
            "prompt_style": "direct",
            "timeout_s": args.timeout,
            "parse_timeout_s": args.parse_deadline,
            "max_retries": 0,
        }
        write_manifest(
            run_dir, build_manifest(EvalConfig(dataset=str(data), out=str(run_dir)), {"source": "bench"})
        )
        write_samples(run_dir, samples)
        start = time.perf_counter()
        await run_samples(samples, AgentRunner(settings, run_dir), run_dir, concurrency=len(samples))
        wall = time.perf_counter() - start
    records = [json.loads(line) for line in (run_dir / "trajectories.jsonl").read_text().splitlines()]
    healthy_status = [r["status"] for r in records if r["sample_id"].startswith("healthy")]
    odd = [r["status"] for r in records if r["sample_id"] == "adversarial"]
    return {
        "timeouts": healthy_status.count("timeout"),
        "ok": healthy_status.count("ok"),
        "healthy": len(healthy_status),
        "adversarial": odd[0] if odd else "-",
        "wall": wall,
    }


def starvation(args: argparse.Namespace) -> None:
    import adversarial_bench as this  # by module name, so the worker processes can import it

    from geosleuth.agent import loop
    from geosleuth.agent.workers import ParsePool, use_parse_pool

    if args.parser == "slow":
        os.environ[BURN_ENV] = str(burn_length(args.burn))  # before the worker processes start
        loop.parse_answer = this.slow_parse  # type: ignore[attr-defined]
        print(f"slow parser: the adversarial answer holds the GIL for about {args.burn:g} s per parse")
    from geosleuth.agent.workers import bounded
    from geosleuth.core.parsing import parse_answer

    asyncio.run(bounded(120.0, parse_answer, HEALTHY, "robust"))  # start the workers outside the timings
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(("clean (reference)", asyncio.run(run_eval(Path(tmp) / "a", args.healthy, False, args))))
        rows.append(("workers (now)", asyncio.run(run_eval(Path(tmp) / "b", args.healthy, True, args))))
        previous = use_parse_pool(ParsePool(0))
        try:
            rows.append(("thread (before)", asyncio.run(run_eval(Path(tmp) / "c", args.healthy, True, args))))
        finally:
            use_parse_pool(previous)
    print(
        f"starvation: {args.healthy} healthy samples (+1 adversarial), all in flight, healthy answers after "
        f"{args.delay:g} s, trajectory timeout {args.timeout:g} s, parse deadline {args.parse_deadline:g} s"
    )
    print(f"{'run':20} {'healthy timeouts':>17} {'healthy ok':>11} {'adversarial':>15} {'wall s':>8}")
    for name, r in rows:
        print(
            f"{name:20} {r['timeouts']:>10}/{r['healthy']:<6} {r['ok']:>6}/{r['healthy']:<4} "
            f"{r['adversarial']:>15} {r['wall']:>8.1f}"
        )
    reference = rows[0][1]["timeouts"]
    print(f"healthy timeouts with the adversarial sample: {rows[1][1]['timeouts']} (reference {reference})")


# --- memory -------------------------------------------------------------------------------------

BEFORE = """
import resource, sys
from PIL import Image, ImageOps
from geosleuth.agent.images import prepare_image
Image.MAX_IMAGE_PIXELS = 150_000_000
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
img = Image.open(sys.argv[1]); img.load(); img = ImageOps.exif_transpose(img)
prepare_image(img)
print(base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "decoded")
"""
AFTER = """
import resource, sys
from geosleuth.agent.images import ImageInputError, load_image, prepare_image
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    prepare_image(load_image(sys.argv[1])); outcome = "decoded"
except ImageInputError:
    outcome = "refused"
print(base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, outcome)
"""


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def blank_png(path: Path, width: int, height: int) -> Path:
    """A valid black RGB PNG written without holding its pixels (identical compressed blocks)."""
    block = b"\x00" * ((1 + 3 * width) * 100)
    compressor = zlib.compressobj(9)
    first = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    checksum = 1
    for _ in range(height // 100):
        checksum = zlib.adler32(block, checksum)
    idat = first + first[2:] * (height // 100 - 1) + compressor.flush()[:-4] + struct.pack(">I", checksum)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")
    )
    return path


def exif_chunk_png(path: Path, size: int = 400_000_000) -> Path:
    """A valid 64 × 64 PNG with an eXIf chunk of ``size`` bytes before its pixels (a TIFF header,
    then zeros: a hole on disk)."""
    pixels = zlib.compress(b"".join(b"\x00" + b"\x1e\x5a\x96" * 64 for _ in range(64)))
    head = b"MM\x00\x2a\x00\x00\x00\x08"
    crc, zeros, left = zlib.crc32(b"eXIf" + head), bytes(1 << 20), size - len(head)
    while left:
        crc = zlib.crc32(zeros[: min(left, len(zeros))], crc)
        left -= min(left, len(zeros))
    with path.open("wb") as out:
        out.write(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", 64, 64, 8, 2, 0, 0, 0)))
        out.write(struct.pack(">I", size) + b"eXIf" + head)
        out.seek(size - len(head), io.SEEK_CUR)
        out.write(struct.pack(">I", crc) + _chunk(b"IDAT", pixels) + _chunk(b"IEND", b""))
    return path


def peak_mib(code: str, path: Path) -> tuple[float, str]:
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    base, peak, outcome = out.stdout.split()
    return (int(peak) - int(base)) / 1024, outcome


def memory() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        png = blank_png(Path(tmp) / "12k.png", 12000, 12000)
        jpeg = Path(tmp) / "12k.jpg"
        make = f"from PIL import Image; Image.new('RGB', (12000, 9000), (90, 120, 60)).save({str(jpeg)!r})"
        subprocess.run([sys.executable, "-c", make], check=True)
        print("memory: peak RSS above the imports, fresh process per figure")
        print(f"{'image':32} {'before MiB':>11} {'after MiB':>10} {'after/before':>13}  outcome after")
        exif = exif_chunk_png(Path(tmp) / "exif400.png")
        for name, path in ((f"PNG 12000x12000 ({png.stat().st_size // 1024} KB)", png),
                           (f"JPEG 12000x9000 ({jpeg.stat().st_size // 1024} KB)", jpeg),
                           ("PNG 64x64 + 400 MB eXIf", exif)):  # fmt: skip
            before, _ = peak_mib(BEFORE, path)
            after, outcome = peak_mib(AFTER, path)
            print(f"{name:32} {before:>11.0f} {after:>10.0f} {after / before:>13.3f}  {outcome}")


# --- a hostile model server (issue 32): lone surrogates, a dripping reply, a gzip bomb --------

SURROGATE_MARK = "LONEMARK"


def _surrogate_script() -> list[Any]:
    from geosleuth.testing.fake_openai import escaped_reply, reply, tool_call

    def hostile(step: Any) -> Any:
        return escaped_reply(step, SURROGATE_MARK, "\\ud800")

    mark = SURROGATE_MARK
    answer = json.dumps({"lat": 48.8566, "lon": 2.3522, "city": "Paris", "country": "France"})
    return [
        hostile(reply(f"Zinc roofs {mark}. {answer}")),
        hostile(reply(answer, reasoning=f"facades {mark}")),
        hostile(reply(None, tool_calls=[tool_call("poi_keyword_search", {"query": f"cafe {mark}"})])),
        reply(answer),
        hostile(reply(answer.replace("Paris", f"Par{mark}is"))),
        hostile(reply(answer.replace("France", f"Fra{mark}nce"))),
    ]


async def _surrogate_runs(folder: Path, script: list[Any]) -> tuple[int, int]:
    """Images recorded ``ok`` and written as UTF-8 JSON, of those run (one model, in order)."""
    from geosleuth.agent import AgentConfig, run_tasks
    from geosleuth.core.records import Task
    from geosleuth.testing import FakeOpenAIServer

    n = sum(1 for step in script if "tool_calls" not in step.body)
    tasks = []
    for i in range(n):
        Image.new("RGB", (64, 48), (30 * i, 90, 150)).save(folder / f"s{i}.png")
        tasks.append(Task(id=f"s{i}", image=str(folder / f"s{i}.png")))
    with FakeOpenAIServer(script) as server:
        config = AgentConfig(model="fake-vlm", base_url=server.base_url, prompt_style="thinking_with_map",
                             tools=["poi_keyword_search"], geocode_answers=False)  # fmt: skip
        trajectories = await run_tasks(tasks, config, concurrency=1)
    written = 0
    for t in trajectories:
        try:
            t.model_dump_json().encode("utf-8")
            written += t.status == "ok"
        except ValueError:
            pass
    return written, len(tasks)


async def _held_s(deadline_s: float, drip_s: float) -> tuple[float, float]:
    """Seconds a dripping reply holds a request under ``deadline_s``, and the drip's full length."""
    from geosleuth.agent.client import ChatClient, ModelError
    from geosleuth.testing import FakeOpenAIServer
    from geosleuth.testing.fake_openai import Step

    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": HEALTHY}}]}).encode()
    with FakeOpenAIServer([Step(kind="reply", raw=body, drip_s=drip_s)]) as server:
        async with ChatClient("m", server.base_url, max_retries=0, timeout_s=deadline_s) as client:
            start = time.perf_counter()
            with contextlib.suppress(ModelError):
                await client.complete([{"role": "user", "content": "hi"}])
            return time.perf_counter() - start, len(body) * drip_s


def _gzip_bomb(decoded_mib: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * 2**20
    return b"".join([packer.compress(block) for _ in range(decoded_mib)] + [packer.flush()])


async def _peak_read_mib(raw: bytes, encoding: str | None, httpx_decoding: bool) -> float:
    """Peak traced allocations reading one reply under the default cap: through the client, or
    (``httpx_decoding``) the pre-fix way, httpx inflating each network chunk whole."""
    import tracemalloc

    import httpx

    from geosleuth.agent.client import ChatClient, ModelError
    from geosleuth.agent.config import MAX_RESPONSE_BYTES
    from geosleuth.testing import FakeOpenAIServer
    from geosleuth.testing.fake_openai import Step

    headers = {"Content-Encoding": encoding} if encoding else {}
    with FakeOpenAIServer([Step(kind="reply", raw=raw, headers=headers)]) as server:
        tracemalloc.start()
        try:
            if httpx_decoding:
                async with httpx.AsyncClient() as http:
                    request = {"json": {"messages": []}}
                    async with http.stream("POST", f"{server.base_url}/chat/completions", **request) as resp:
                        size = 0
                        async for chunk in resp.aiter_bytes():
                            size += len(chunk)
                            if size > MAX_RESPONSE_BYTES:
                                break
            else:
                async with ChatClient("m", server.base_url, max_retries=0) as client:
                    with contextlib.suppress(ModelError):
                        await client.complete([{"role": "user", "content": "hi"}])
            return tracemalloc.get_traced_memory()[1] / 2**20
        finally:
            tracemalloc.stop()


async def _provider_read(raw: bytes, encoding: str | None) -> tuple[float, float, str]:
    """(peak traced MiB, wall s, outcome) of one provider request (``tools.http.HttpClient``, the
    path of search, geocoding, POI and map providers) answered with ``raw``."""
    import tracemalloc

    from geosleuth.testing import FakeOpenAIServer
    from geosleuth.testing.fake_openai import Step
    from geosleuth.tools.config import HttpSettings
    from geosleuth.tools.http import HttpClient, ProviderError

    headers = {"Content-Encoding": encoding} if encoding else {}
    settings = HttpSettings(allow_private_urls=True, max_retries=0, timeout_s=60.0)
    with FakeOpenAIServer([Step(kind="reply", raw=raw, headers=headers)]) as server:
        client = HttpClient("search", settings)
        tracemalloc.start()
        start = time.perf_counter()
        try:
            await client.request("POST", f"{server.base_url}/chat/completions", json_body={})
            outcome = "read"
        except ProviderError as exc:
            outcome = "refused: " + str(exc).split(": ", 2)[-1][:90]
        finally:
            wall = time.perf_counter() - start
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
    return peak, wall, outcome


def provider_bomb(args: argparse.Namespace) -> None:
    """Issue 41: a 4 MB gzip from a search provider cost 12.4 GB and 74 s (httpx read it whole)."""
    from geosleuth.bounds.httpbody import DEFAULT_MAX_BODY_BYTES

    bomb = _gzip_bomb(args.provider_bomb_mib)
    plain = b" " * (DEFAULT_MAX_BODY_BYTES - 1024)
    ref = asyncio.run(_provider_read(plain, None))
    ours = asyncio.run(_provider_read(bomb, "gzip"))
    print(
        f"provider gzip bomb ({len(bomb) / 2**20:.1f} MB for {args.provider_bomb_mib} MiB), HttpClient: "
        f"{ours[0]:.1f} MiB traced, {ours[1]:.2f} s ({ours[2]}); a plain reply at the cap {ref[0]:.1f} MiB, "
        f"{ref[1]:.2f} s; bomb/plain {ours[0] / ref[0]:.2f}x memory, {ours[1] / ref[1]:.2f}x time"
    )


def hostile_server(args: argparse.Namespace) -> None:
    import logging

    logging.getLogger("geosleuth").setLevel(logging.ERROR)  # each replaced surrogate logs a warning
    with tempfile.TemporaryDirectory() as tmp:
        ok, n = asyncio.run(_surrogate_runs(Path(tmp), _surrogate_script()))
    print(f"lone surrogates (content, reasoning, tool arguments, city, country): {ok}/{n} images recorded "
          f"and written as UTF-8; reference {n}/{n}; ratio {ok / n:.2f}")  # fmt: skip
    held, full = asyncio.run(_held_s(args.deadline, args.drip))
    print(
        f"dripping reply ({args.drip:g} s a byte, {full:.0f} s in all): held {held:.2f} s under a "
        f"{args.deadline:g} s deadline; held/deadline {held / args.deadline:.2f}"
    )
    bomb = _gzip_bomb(args.bomb_mib)
    from geosleuth.agent.config import MAX_RESPONSE_BYTES

    plain = json.dumps({"choices": [{"message": {"content": "x" * (MAX_RESPONSE_BYTES - 200)}}]}).encode()
    reference = asyncio.run(_peak_read_mib(plain, None, False))
    before = asyncio.run(_peak_read_mib(bomb, "gzip", True))
    after = asyncio.run(_peak_read_mib(bomb, "gzip", False))
    print(
        f"gzip bomb ({len(bomb) // 1024} KB for {args.bomb_mib} MiB), peak traced MiB: httpx decoding "
        f"{before:.1f}, the client {after:.1f}; a plain reply at the cap {reference:.1f}; "
        f"client/plain {after / reference:.2f}, before/plain {before / reference:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--healthy", type=int, default=64)
    parser.add_argument("--parser", choices=["slow", "real"], default="slow")
    parser.add_argument("--burn", type=float, default=8.0, help="seconds the slow parse holds the GIL")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds before a healthy answer")
    parser.add_argument("--timeout", type=float, default=6.0, help="trajectory timeout, seconds")
    parser.add_argument("--parse-deadline", type=float, default=3.0)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--skip-starvation", action="store_true")
    parser.add_argument("--deadline", type=float, default=2.0, help="request deadline against the drip, s")
    parser.add_argument("--drip", type=float, default=0.1, help="seconds between the dripped bytes")
    parser.add_argument("--bomb-mib", type=int, default=200, help="decoded size of the gzip bomb")
    parser.add_argument("--skip-server", action="store_true")
    parser.add_argument("--provider-bomb-mib", type=int, default=4_000, help="decoded size of the provider's")
    args = parser.parse_args()
    if not args.skip_starvation:
        starvation(args)
    if not args.skip_memory:
        memory()
    if not args.skip_server:
        hostile_server(args)
        provider_bomb(args)


if __name__ == "__main__":
    main()
