"""Peak memory of `geosleuth report`, `score --truth` and `eval` + report, against the same rows
inline, so that each stays flat in the number of samples.

A synthetic run of N samples (two turns, a tool call and ~1.5 KB of text per trajectory, the
answer as JSON) is written once per size; then, each in a fresh process, the peak resident
memory of:

- ``report``: summary, Markdown, CSV, plots and HTML (`write_report`);
- ``score --truth``: ``score RUN/trajectories.jsonl --truth RUN/samples.jsonl`` (`score_file`,
  predictions joined to the truth file by id);
- ``eval`` and ``eval+report``: ``geosleuth eval DATA --agent-fn report_memory_bench:replay
  --no-report`` (dataset loading, the run directory, the runner), then the report of that run in
  the same process (`write_report`, as `eval` writes it): the peak after each phase. The replay
  agent answers at once, as the run above does, over a CSV of the same N samples, all pointing
  at one small image (`eval` reads each distinct image file once). ``--eval-sizes`` (default
  10k, 100k and 1M; the eval phase at 1M takes ~8 minutes on 2 shared cores, its report longer);
- the reference beside each, measured in the same run: ``score`` of the same predictions with
  the truth inline in each row (``inline.jsonl``: the streaming engine with no join).

Printed: MiB each, each / reference, and the growth between the smallest and largest size in
bytes per sample. ``--truth-rows N`` adds `score --truth` against inline on N rows of a two-column
CSV (issue 41: 3M rows). ``--src`` runs the children against another source tree (e.g. the main
checkout's ``src``) for a before / after figure.

Usage: python bench/report_memory_bench.py [--sizes 10000,100000,1000000] [--eval-sizes 10000,100000,1000000]
    [--truth-rows 3000000] [--protocol default] [--src PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

from geosleuth.core.records import Prediction, Sample, Task, ToolCallRecord, Trajectory, Turn, Usage
from geosleuth.eval.run.config import EvalConfig, build_manifest, write_manifest

PROSE = "The signage is in German and the plates are Swiss; the lake suggests Lucerne. " * 10
RESULT = "Luzern, Lucerne, Switzerland (47.0505, 8.3064) population 82000; " * 8

BENCH = Path(__file__).resolve().parent
CHILD = {
    "report": "from geosleuth.eval.report.write import write_report; write_report(RUN, protocol=PROTOCOL)",
    "score": (
        "from geosleuth.scoring import get_protocol, score_file; "
        "score_file(RUN / 'trajectories.jsonl', get_protocol(PROTOCOL), truth_path=RUN / 'samples.jsonl', "
        "keep_rows=False)"
    ),
    "inline": (
        "from geosleuth.scoring import get_protocol, score_file; "
        "score_file(RUN / 'inline.jsonl', get_protocol(PROTOCOL), keep_rows=False)"
    ),
    "eval": (
        f"import sys; sys.path.insert(0, {str(BENCH)!r}); from geosleuth.cli.app import app; "
        "app(['eval', str(RUN / 'data'), '--out', str(RUN / 'eval'), '--agent-fn', "
        "'report_memory_bench:replay', '--protocol', PROTOCOL, '--concurrency', '64', '--no-report'], "
        "standalone_mode=False); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); "  # the eval phase's peak
        "from geosleuth.eval.report.write import write_report; write_report(RUN / 'eval')"
    ),
    "truth-csv": (
        "from geosleuth.scoring import get_protocol, score_file; "
        "score_file(RUN / 'pred.csv', get_protocol(PROTOCOL), truth_path=RUN / 'truth.csv', keep_rows=False)"
    ),
    "inline-csv": (
        "from geosleuth.scoring import get_protocol, score_file; "
        "score_file(RUN / 'inline.csv', get_protocol(PROTOCOL), keep_rows=False)"
    ),
}


def point(i: int) -> tuple[float, float, float, float]:
    """Sample i's truth and the replayed answer near it (lat, lon, pred lat, pred lon)."""
    lat, lon = -60 + (i * 0.011) % 120, -170 + (i * 0.037) % 340
    return lat, lon, lat + (i % 7) * 0.3, lon - (i % 5) * 0.2


async def replay(task: Task) -> Trajectory:
    """The eval agent: answers sample ``s<i>`` at once, where `make_run`'s trajectory answers."""
    _, _, plat, plon = point(int(task.id[1:]))
    answer = {"lat": round(plat, 5), "lon": round(plon, 5), "city": "Lucerne", "country": "Switzerland"}
    text = json.dumps(answer)
    return Trajectory(
        sample_id=task.id,
        model="bench",
        turns=[
            Turn(
                index=0,
                text=PROSE,
                tool_calls=[ToolCallRecord(name="geocode", arguments={"q": "Luzern"}, result_text=RESULT)],
                usage=Usage(prompt_tokens=900, completion_tokens=120),
            ),
            Turn(index=1, text=text, usage=Usage(prompt_tokens=1200, completion_tokens=40)),
        ],
        prediction=Prediction(**answer, raw=text, status="ok"),
        started_at=1000.0,
        finished_at=1003.0,
    )


def make_dataset(folder: Path, n: int) -> None:
    """data.csv of n samples (the run's ids and truth) beside one small image they all show."""
    folder.mkdir(parents=True)
    Image.new("RGB", (32, 32), (90, 120, 150)).save(folder / "one.jpg")
    with (folder / "data.csv").open("w") as handle:
        handle.write("id,image,lat,lon,country,city\n")
        for i in range(n):
            lat, lon, _, _ = point(i)
            handle.write(f"s{i:07d},one.jpg,{lat:.5f},{lon:.5f},Switzerland,Lucerne\n")


def make_truth_tables(folder: Path, n: int) -> None:
    """pred.csv (id, predicted point), truth.csv (id, true point) and inline.csv (both) of n rows."""
    folder.mkdir(parents=True)
    with (
        (folder / "pred.csv").open("w") as pred,
        (folder / "truth.csv").open("w") as truth,
        (folder / "inline.csv").open("w") as inline,
    ):
        pred.write("id,pred_lat,pred_lon\n")
        truth.write("id,lat,lon\n")
        inline.write("id,pred_lat,pred_lon,true_lat,true_lon\n")
        for i in range(n):
            lat, lon, plat, plon = point(i)
            p, t = f"{plat:.5f},{plon:.5f}", f"{lat:.5f},{lon:.5f}"
            pred.write(f"s{i:07d},{p}\n")
            truth.write(f"s{i:07d}.jpg,{t}\n")  # the truth table names the file, as IM2GPS3K's does
            inline.write(f"s{i:07d},{p},{t}\n")


def make_run(run_dir: Path, n: int) -> None:
    """samples.jsonl, trajectories.jsonl and run.json of n samples (templated, so it is quick)."""
    run_dir.mkdir(parents=True)
    config = EvalConfig(dataset="synthetic", out=str(run_dir))
    write_manifest(run_dir, build_manifest(config, {"source": "synthetic", "fingerprint": "bench"}))
    sample = Sample(id="ID", lat=33.3333, lon=44.4444, labels={"country": "Switzerland", "city": "Lucerne"})
    answer = {"lat": 11.1111, "lon": 22.2222, "city": "Lucerne", "country": "Switzerland"}
    trajectory = Trajectory(
        sample_id="ID",
        model="bench",
        turns=[
            Turn(
                index=0,
                text=PROSE,
                tool_calls=[ToolCallRecord(name="geocode", arguments={"q": "Luzern"}, result_text=RESULT)],
                usage=Usage(prompt_tokens=900, completion_tokens=120),
            ),
            Turn(index=1, text=json.dumps(answer), usage=Usage(prompt_tokens=1200, completion_tokens=40)),
        ],
        prediction=Prediction(**answer, raw=json.dumps(answer), status="ok"),
        started_at=1000.0,
        finished_at=1003.0,
    )
    s_template, t_template = sample.model_dump_json(), trajectory.model_dump_json()
    truth = '"ground_truth":' + s_template + ","
    with (
        (run_dir / "samples.jsonl").open("w") as samples,
        (run_dir / "trajectories.jsonl").open("w") as log,
        (run_dir / "inline.jsonl").open("w") as inline,
    ):
        for i in range(n):
            lat, lon, plat, plon = point(i)
            sid = f"s{i:07d}"
            one = s_template.replace('"ID"', f'"{sid}"')
            one = one.replace("33.3333", f"{lat:.5f}").replace("44.4444", f"{lon:.5f}")
            samples.write(one + "\n")
            record = t_template.replace('"ID"', f'"{sid}"')
            record = record.replace("11.1111", f"{plat:.5f}").replace("22.2222", f"{plon:.5f}")
            log.write(record + "\n")
            inline.write("{" + truth.replace(s_template, one) + record[1:] + "\n")


def peak_mib(kind: str, run_dir: Path, protocol: str, src: str | None) -> tuple[float, float]:
    """(peak resident MiB, seconds) of one child process doing ``kind``."""
    peaks, seconds = peaks_mib(kind, run_dir, protocol, src)
    return peaks[-1], seconds


def peaks_mib(kind: str, run_dir: Path, protocol: str, src: str | None) -> tuple[list[float], float]:
    """(peak resident MiB after each phase the child prints, seconds) of one child doing ``kind``."""
    code = (
        "import resource, sys; from pathlib import Path; "
        f"RUN = Path({str(run_dir)!r}); PROTOCOL = {protocol!r}; {CHILD[kind]}; "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{kind} failed: {out.stderr[-2000:]}")
    return [int(x) / 1024 for x in out.stdout.split() if x.isdigit()], time.perf_counter() - start


def growth(figures: dict[int, float]) -> str:
    """Bytes per sample between the smallest and largest size measured."""
    if len(figures) < 2:
        return "–"
    low, high = min(figures), max(figures)
    return f"{(figures[high] - figures[low]) * 2**20 / (high - low):.0f} B/sample"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument(
        "--eval-sizes", default="10000,100000,1000000", help="sizes that also run eval + report"
    )
    parser.add_argument("--truth-rows", type=int, default=0, help="also score --truth vs inline on N rows")
    parser.add_argument("--protocol", default="default")
    parser.add_argument("--src", default=None, help="run the children against this source tree")
    args = parser.parse_args()
    eval_sizes = {int(x) for x in args.eval_sizes.split(",") if x}
    kinds: dict[str, dict[int, float]] = {
        "report": {},
        "score --truth": {},
        "eval": {},
        "eval+report": {},
        "inline": {},
    }
    with tempfile.TemporaryDirectory(prefix="geosleuth-report-mem-") as tmp:
        src = args.src or "this checkout"
        print(f"protocol {args.protocol}; src {src}; peak resident MiB of one process each")
        header = (
            "samples",
            "inline",
            "report",
            "/inline",
            "score --truth",
            "/inline",
            "eval",
            "eval+report",
            "/inline",
        )
        widths = (9, 8, 8, 8, 13, 8, 8, 12, 8)
        print(" ".join(f"{h:>{w}}" for h, w in zip(header, widths, strict=True)), "  seconds", flush=True)
        for n in (int(x) for x in args.sizes.split(",")):
            run_dir = Path(tmp) / f"run{n}"
            make_run(run_dir, n)
            times = []
            for kind, child in (("inline", "inline"), ("score --truth", "score"), ("report", "report")):
                kinds[kind][n], seconds = peak_mib(child, run_dir, args.protocol, args.src)
                times.append(f"{kind} {seconds:.0f}")
            if n in eval_sizes:
                make_dataset(run_dir / "data", n)
                (kinds["eval"][n], kinds["eval+report"][n]), seconds = peaks_mib(
                    "eval", run_dir, args.protocol, args.src
                )
                times.append(f"eval+report {seconds:.0f}")
            ref = kinds["inline"][n]
            cells = [f"{n:>9,}", f"{ref:>8.0f}"]
            for kind, width in (("report", 8), ("score --truth", 13), ("eval", 8), ("eval+report", 12)):
                mib = kinds[kind].get(n)
                shown = [f"{mib:>{width}.0f}"] if mib else [f"{'–':>{width}}"]
                if kind != "eval":  # the eval phase alone: read beside eval+report, no ratio
                    shown.append(f"{mib / ref:>8.2f}" if mib else f"{'–':>8}")
                cells += shown
            print(" ".join(cells), "  " + ", ".join(times), flush=True)
            shutil.rmtree(run_dir)
        print("growth: " + "; ".join(f"{kind} {growth(f)}" for kind, f in kinds.items()))
        if args.truth_rows:
            folder = Path(tmp) / "tables"
            make_truth_tables(folder, args.truth_rows)
            joined, joined_s = peak_mib("truth-csv", folder, args.protocol, args.src)
            inline, inline_s = peak_mib("inline-csv", folder, args.protocol, args.src)
            print(
                f"score --truth on {args.truth_rows:,} CSV rows: {joined:.0f} MiB ({joined_s:.0f} s) against "
                f"{inline:.0f} MiB inline ({inline_s:.0f} s): {joined / inline:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
