"""Issue 41's hostile inputs, each beside a normal input in the same run (``bounds_bench.py
--only-issue-41``; helpers here run as children of that script so each figure is a fresh process):

- a 2 MB progressive 16000x11000 JPEG through ``locate`` (1.14 GB before), MCP with 4 parallel
  zooms (4.8 GB) and the web app, 3 uploads (3.35 GB), against a 2 MP photo the same way;
- 5 replies of ``--flood`` tool calls each (170k: 7.06 GB and a 574 MB trajectory at first)
  against one plain answer, through ``locate --model`` (``--only-flood``). The scripted server
  runs in its own process (``python -m geosleuth.testing.fake_openai``): RSS and CPU are the
  client's alone, the wall includes the server writing 5 x 14.5 MiB. ``--src`` runs the client
  from another checkout. Before msgspec split the reply (``--src`` main, same run, load ~5):
  209 MiB, 6.0 s CPU (1.93x the plain answer's); after: 116 MiB, 4.4 s CPU (1.30x); a reply
  msgspec refuses (a bare NaN) is decoded whole as before: 209 MiB, 6.1 s CPU (1.82x). The same
  bytes in a field the client echoes unread (``reasoning_details``): before 550 MiB, a 38 MiB
  trajectory, 9.6 s CPU (3.08x); after 171 MiB, 0.01 MiB, 7.7 s CPU (2.29x: each reply's field
  is still decoded, cleaned of lone surrogates and measured before it is dropped);
- a 64x64 PNG whose PLTE claims 400 MB (1.27 GB before) against the same PNG without it;
- JSON arrays read by the hand-written scanner (`geosleuth.scoring.jsonstream`, each item
  parsed alone) and by ijson's C backend (``ijson.items``, yajl2_c), side by side: clean rows,
  the same with one bad item, one item nested 100k deep, one scalar item of ``--scalar-mib``
  (400 MB took 77 s and 1.28 GB before); each child under a 2 GiB address-space limit.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from PIL import Image

ADDRESS_LIMIT = 2 * 2**30
ANSWER = '{"lat": 47.0502, "lon": 8.3093, "city": "Luzern", "country": "Switzerland"}'
ROW = b'{"id": "r%d", "lat": 48.85, "lon": 2.35, "true_lat": 48.85, "true_lon": 2.35, "text": "%s"}'


ROOT = Path(__file__).resolve().parents[1]


def child_env(src: Path = ROOT / "src") -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(ROOT / "bench")])}


def run_measured(args: list[str], src: Path = ROOT / "src") -> tuple[float, float, str, float]:
    """(wall s, peak RSS MiB, last stdout line, CPU s) of one Python child, from ``wait4``."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *args],
        env=child_env(src),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    out = proc.stdout.read() if proc.stdout else ""
    _, _, usage = os.wait4(proc.pid, 0)
    cpu = usage.ru_utime + usage.ru_stime
    return time.perf_counter() - start, usage.ru_maxrss / 1024, _outcome(out), cpu


def _outcome(out: str) -> str:
    """A locate child's status (and error), or the last line another child printed."""
    try:
        record = json.loads(out)[0]
        return f"{record['status']}: {record.get('error') or ''}".strip(": ")
    except (ValueError, IndexError, KeyError, TypeError):
        lines = out.strip().splitlines()
        return lines[-1] if lines else "no output"


Measured = tuple[float, float, str] | tuple[float, float, str, float]


def line(name: str, ours: Measured, ref_name: str, ref: Measured) -> str:
    return (
        f"  {name:<22} {ours[1]:6.0f} MiB {ours[0]:6.1f} s ({ours[2][:60]}) | {ref_name:<16} "
        f"{ref[1]:5.0f} MiB {ref[0]:5.1f} s | {ours[1] / ref[1]:5.2f}x RSS"
    )


# --- inputs -------------------------------------------------------------------------------------


def progressive_jpeg(path: Path) -> Path:
    Image.new("RGB", (16000, 11000), (90, 120, 60)).save(path, progressive=True, subsampling=0, quality=50)
    return path


def plte_png(path: Path, size: int = 400_000_000) -> Path:
    """A 64x64 RGB PNG whose PLTE chunk claims ``size`` bytes (a hole on disk)."""
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (30, 90, 150)).save(buf, format="PNG")
    png = buf.getvalue()
    with path.open("wb") as out:
        out.write(png[:33] + struct.pack(">I", size) + b"PLTE")
        out.seek(size + 4, io.SEEK_CUR)
        out.write(png[33:])
    return path


def json_documents(folder: Path, rows_mib: int, scalar_mib: int) -> dict[str, Path]:
    """Arrays of prediction rows: clean, one bad item, one deep item, one huge scalar item."""
    text = b"x" * 400
    count = rows_mib * 2**20 // (len(ROW % (0, text)) + 2)
    rows = [ROW % (i, text) for i in range(count)]
    middle = count // 2
    docs = {
        "clean": rows,
        "bad item": rows[:middle] + [b'{"id": "bad", "lat": tru}'] + rows[middle:],
        "deep item": rows[:middle] + [b"[" * 100_000 + b"]" * 100_000] + rows[middle:],
    }
    out = {name: folder / file for name, file in document_names(scalar_mib).items()}
    for name, items in docs.items():
        out[name].write_bytes(b"[" + b",\n".join(items) + b"]")
    scalar = folder / "scalar.json"
    with scalar.open("wb") as handle:
        handle.write(b"[" + rows[0] + b', "')
        block = b"x" * 2**20
        for _ in range(scalar_mib):
            handle.write(block)
        handle.write(b'", ' + rows[1] + b"]")
    return out


def document_names(scalar_mib: int) -> dict[str, str]:
    names = {name: f"{name.replace(' ', '_')}.json" for name in ("clean", "bad item", "deep item")}
    return {**names, f"{scalar_mib} MiB scalar": "scalar.json"}


def make(kind: str, path: Path) -> None:
    """The inputs, made in a helper process (``bounds_bench.py --make i41-…``)."""
    if kind == "i41-prog16k":
        progressive_jpeg(path)
    elif kind == "i41-plte400":
        plte_png(path)
    elif kind.startswith("i41-flood:"):
        _, calls, replies, variant = kind.split(":")
        flood_script(path, int(calls), int(replies), variant)
    else:
        _, rows_mib, scalar_mib = kind.split(":")
        json_documents(path, int(rows_mib), int(scalar_mib))


# --- children -------------------------------------------------------------------------------------


def read_child(reader: str, path: str) -> None:
    """Read every item of the JSON array at ``path`` with ``reader``; print rows, bad, outcome."""
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_LIMIT, ADDRESS_LIMIT))
    rows = bad = 0
    outcome = "read"
    try:
        if reader == "scanner":
            import orjson

            from geosleuth.scoring.jsonstream import array_items

            for item in array_items(Path(path)):
                if item.value is not None:
                    rows += 1
                    continue
                try:
                    orjson.loads(item.raw) if item.raw is not None else None
                    rows += item.raw is not None
                    bad += item.raw is None
                except orjson.JSONDecodeError:
                    bad += 1
        else:
            import ijson

            with open(path, "rb") as handle:
                for _ in ijson.items(handle, "item", use_float=True):
                    rows += 1
    except MemoryError:
        outcome = "MemoryError (2 GiB limit)"
    except Exception as exc:  # noqa: BLE001 - the reader's failure is the figure
        outcome = f"stopped: {type(exc).__name__}"
    print(f"{rows} rows, {bad} bad, {outcome}", flush=True)


def flood_script(path: Path, calls: int, replies: int, variant: str) -> Path:
    """A ``fake_openai --script`` file: ``replies`` replies of ``calls`` calls each, then the answer.

    ``nan``: each flood's first call has the id ``NaN`` (a bare NaN in the reply's JSON), a body
    msgspec refuses, which the client reads with the standard decoder instead. ``fields``: one
    call a reply, the flood's bytes in a message field the client echoes unread
    (``reasoning_details``).
    """
    flood = [{"name": "geocode", "arguments": {}, "id": str(i)} for i in range(calls)]  # 170k: 14.5 MiB
    if variant == "nan" and flood:
        flood[0]["id"] = float("nan")
    step: dict[str, object] = {"content": "", "tool_calls": flood}
    if variant == "fields":
        step = {"content": "", "tool_calls": flood[:1], "fields": {"reasoning_details": flood}}
    steps: list[object] = [step for _ in range(replies)]
    path.write_text(json.dumps([*steps, ANSWER]), encoding="utf-8")
    return path


@contextlib.contextmanager
def served(script: Path) -> Iterator[str]:
    """The scripted server from the command line, in its own process; yields its base URL."""
    server = subprocess.Popen(
        [sys.executable, "-m", "geosleuth.testing.fake_openai", "--script", str(script)],
        env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        yield server.stdout.readline().strip()
    finally:
        server.terminate()
        server.wait()


def flood_section(work: Path, flood: int, photo: Path, src: Path) -> None:
    """``locate --model`` against 5 flooding replies, and the same client against one answer."""
    from bounds_bench import made  # inputs are made in helper processes

    client = "this checkout" if src == ROOT / "src" else f"the client from {src}"
    print(
        f" tool-call flood through locate --model ({client}): 5 replies of {flood:,} calls against one "
        "plain answer; the server in its own process:"
    )
    locate = [
        "-c",
        "from geosleuth.cli.app import main; main()",
        "locate",
        str(photo),
        "--json",
        "--model",
        "m",
    ]
    args = ["--prompt", "thinking_with_map", "--max-turns", "6"]
    runs = {}
    for name, calls, replies, variant in (
        ("plain answer", 0, 0, "calls"), ("5 x flood", flood, 5, "calls"),
        ("5 x flood, NaN id", flood, 5, "nan"), ("5 x unread fields", flood, 5, "fields"),
    ):  # fmt: skip
        made(f"i41-flood:{calls}:{replies}:{variant}", work / f"flood_{calls}_{variant}.json")
        out = work / f"o_flood_{calls}_{variant}"
        with served(work / f"flood_{calls}_{variant}.json") as url:
            runs[name] = run_measured([*locate, "--base-url", url, *args, "--out", str(out)], src)
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        wall, rss, outcome, cpu = runs[name]
        ref_wall, ref_rss, _, ref_cpu = runs["plain answer"]
        print(
            f"  {name:<18} {rss:5.0f} MiB {wall:5.1f} s wall {cpu:5.1f} s CPU, trajectory "
            f"{size / 2**20:.2f} MiB ({outcome[:40]}) | vs plain answer: {rss / ref_rss:4.2f}x RSS "
            f"{wall / ref_wall:4.2f}x wall {cpu / ref_cpu:4.2f}x CPU"
        )


def webapp_child(image: str, uploads: int, workdir: str) -> None:
    """``uploads`` uploads of ``image`` to the web app (offline), each job run to its end."""
    from starlette.testclient import TestClient

    from geosleuth.webapp import ServeSettings, create_app

    settings = ServeSettings(workdir=Path(workdir), tool_settings={"cache": {"backend": "none"}})
    data = Path(image).read_bytes()
    outcomes = []
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        ids = []
        for i in range(uploads):
            response = client.post("/api/locate", files={"image": (f"u{i}.jpg", data, "image/jpeg")})
            if response.status_code == 202:
                ids.append(response.json()["id"])
            else:
                outcomes.append("refused")
        for job_id in ids:
            with client.stream("GET", f"/api/jobs/{job_id}/events") as stream:
                "".join(stream.iter_text())
            outcomes.append(client.get(f"/api/jobs/{job_id}").json()["status"])
    print(", ".join(outcomes), flush=True)


# --- the section ----------------------------------------------------------------------------------


def section(work: Path, bench: str, flood: int, scalar_mib: int, rows_mib: int) -> None:
    from bounds_bench import made  # inputs are made in helper processes: a child's peak starts from ours

    photo = made("photo", work / "i41_photo.jpg")
    prog = made("i41-prog16k", work / "prog16k.jpg")
    print("issue 41 (each a fresh process; peak RSS):")
    print(f" progressive JPEG 16000x11000 ({prog.stat().st_size / 2**20:.1f} MB) against a 640x480 photo:")
    locate = ["-c", "from geosleuth.cli.app import main; main()", "locate", "--json"]
    ours = run_measured([*locate, str(prog), "--out", str(work / "o_prog")])
    ref = run_measured([*locate, str(photo), "--out", str(work / "o_photo")])
    print(line("locate", ours, "locate photo", ref))
    ours = run_measured([bench, "--mcp", "image_zoom_in_tool", str(prog), "4"])
    ref = run_measured([bench, "--mcp", "image_zoom_in_tool", str(photo), "4"])
    print(line("MCP, 4 parallel zooms", ours, "4 zooms photo", ref))
    ours = run_measured([bench, "--i41", "webapp", str(prog), "3", str(work / "w1")])
    ref = run_measured([bench, "--i41", "webapp", str(photo), "3", str(work / "w2")])
    print(line("web app, 3 uploads", ours, "3 uploads photo", ref))
    flood_section(work, flood, photo, ROOT / "src")
    png = made("i41-plte400", work / "plte400.png")
    plain = made("64px", work / "i41_64px.png")
    ours = run_measured([*locate, str(png), "--out", str(work / "o_plte")])
    ref = run_measured([*locate, str(plain), "--out", str(work / "o_64")])
    print(line("PNG + 400 MB PLTE", ours, "same w/o it", ref))
    made(f"i41-docs:{rows_mib}:{scalar_mib}", work)
    docs = {name: work / file for name, file in document_names(scalar_mib).items()}
    export_section(work, rows_mib)
    print(f" JSON arrays of {rows_mib} MiB of rows: scanner (jsonstream) | ijson {_ijson_backend()}")
    for name, path in docs.items():
        scan = run_measured([bench, "--i41", "read", "scanner", str(path)])
        if "scalar" in name and scalar_mib > 100:
            ij = (0.0, 0.0, "not run: 100 MiB took ijson 53 s, growing faster than linear")
        else:
            ij = run_measured([bench, "--i41", "read", "ijson", str(path)])
        print(
            f"  {name:<16} scanner {scan[1]:5.0f} MiB {scan[0]:6.1f} s ({scan[2]}) | ijson {ij[1]:5.0f} MiB "
            f"{ij[0]:6.1f} s ({ij[2]}) | ijson/scanner time {f'{ij[0] / scan[0]:5.2f}x' if ij[0] else '–'}"
        )


def run_log(path: Path, mib: int) -> Path:
    """A trajectory log of about ``mib`` MiB, written out of id order (as a concurrent run ends)."""
    from geosleuth.core.records import Prediction, Trajectory, Turn

    text = "reasoning " * 1000  # ~10 KB a record
    n = max(1, mib * 2**20 // 10_300)
    with path.open("w", encoding="utf-8") as fh:
        for i in reversed(range(n)):
            messages = [
                {"role": "user", "content": "Where was this photo taken?"},
                {"role": "assistant", "content": f"{text}{ANSWER}"},
            ]
            record = Trajectory(
                sample_id=f"s{i:07d}", model="m", messages=messages, turns=[Turn(index=0, text=text)],
                prediction=Prediction(lat=47.05, lon=8.31, raw=ANSWER),
            )  # fmt: skip
            fh.write(record.model_dump_json() + "\n")
    return path


def load_all_child(path: str) -> None:
    """The reference: every record of the log held at once (what filter / export-sft cost before)."""
    from geosleuth.agent.trajectory import read_trajectories

    records = sorted(read_trajectories(Path(path)), key=lambda t: t.sample_id)
    print(f"{len(records)} records held")


def export_section(work: Path, mib: int) -> None:
    """`data export-sft` and `data filter` on a large run against holding its records at once."""
    log = work / f"run{mib}" / "trajectories.jsonl"
    if not log.exists():
        log.parent.mkdir(parents=True, exist_ok=True)
        run_log(log, mib)
    cli = ["-c", "from geosleuth.cli.app import main; main()", "data"]
    ref = run_measured([str(Path(__file__).with_name("bounds_bench.py")), "--i41", "load-all", str(log)])
    print(f" a {log.stat().st_size / 2**20:.0f} MiB trajectory log, sorted by sample id:")
    ours = run_measured([*cli, "export-sft", str(log.parent), "-o", str(work / "sft.jsonl")])
    print(line("data export-sft", ours, "all records held", ref))


def _ijson_backend() -> str:
    try:
        import ijson
    except ImportError:
        return "(not installed)"
    return f"({ijson.backend})"


def dispatch(args: list[str]) -> None:
    """The ``--i41 KIND ...`` child modes of bounds_bench.py."""
    kind, rest = args[0], args[1:]
    if kind == "read":
        read_child(rest[0], rest[1])
    elif kind == "webapp":
        webapp_child(rest[0], int(rest[1]), rest[2])
    elif kind == "load-all":
        load_all_child(rest[0])
    else:
        raise SystemExit(f"unknown --i41 mode {kind!r}: {json.dumps(args)}")
