"""Peak memory of `geosleuth report` over a run, against `geosleuth score` on the same rows.

A synthetic run of N samples (two turns, a tool call and ~1.5 KB of text per trajectory, the
answer as JSON) is written once per size; then, each in a fresh process, the peak resident
memory of: ``report`` (summary, Markdown, CSV, plots and HTML: `write_report`) and, as the
reference measured in the same run, ``score RUN/trajectories.jsonl --truth RUN/samples.jsonl``
(`score_file`, the streaming engine). Printed: MiB each and report / score. ``--src`` runs the
children against another source tree (e.g. an older checkout) for a before / after figure.

Usage: python bench/report_memory_bench.py [--sizes 10000,100000] [--protocol default] [--src PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from geosleuth.core.records import Prediction, Sample, ToolCallRecord, Trajectory, Turn, Usage
from geosleuth.eval.run.config import EvalConfig, build_manifest, write_manifest

PROSE = "The signage is in German and the plates are Swiss; the lake suggests Lucerne. " * 10
RESULT = "Luzern, Lucerne, Switzerland (47.0505, 8.3064) population 82000; " * 8

CHILD = {
    "report": "from geosleuth.eval.report.write import write_report; write_report(RUN, protocol=PROTOCOL)",
    "score": (
        "from geosleuth.scoring import get_protocol, score_file; "
        "score_file(RUN / 'trajectories.jsonl', get_protocol(PROTOCOL), truth_path=RUN / 'samples.jsonl', "
        "keep_rows=False)"
    ),
}


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
    with (run_dir / "samples.jsonl").open("w") as samples, (run_dir / "trajectories.jsonl").open("w") as log:
        for i in range(n):
            lat, lon = -60 + (i * 0.011) % 120, -170 + (i * 0.037) % 340
            sid = f"s{i:07d}"
            one = s_template.replace('"ID"', f'"{sid}"')
            samples.write(one.replace("33.3333", f"{lat:.5f}").replace("44.4444", f"{lon:.5f}") + "\n")
            plat, plon = lat + (i % 7) * 0.3, lon - (i % 5) * 0.2
            one = t_template.replace('"ID"', f'"{sid}"')
            log.write(one.replace("11.1111", f"{plat:.5f}").replace("22.2222", f"{plon:.5f}") + "\n")


def peak_mib(kind: str, run_dir: Path, protocol: str, src: str | None) -> tuple[float, float]:
    """(peak resident MiB, seconds) of one child process doing ``kind``."""
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
    return int(out.stdout.split()[-1]) / 1024, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--protocol", default="default")
    parser.add_argument("--src", default=None, help="run the children against this source tree")
    args = parser.parse_args()
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >= 0
    with tempfile.TemporaryDirectory(prefix="geosleuth-report-mem-") as tmp:
        print(f"protocol {args.protocol}; peak resident memory of one process each")
        header = ("samples", "report MiB", "score MiB", "report/score", "report s", "score s")
        print(" ".join(f"{h:>{w}}" for h, w in zip(header, (9, 11, 10, 13, 9, 8), strict=True)))
        for n in (int(x) for x in args.sizes.split(",")):
            run_dir = Path(tmp) / f"run{n}"
            make_run(run_dir, n)
            score_mib, score_s = peak_mib("score", run_dir, args.protocol, args.src)
            report_mib, report_s = peak_mib("report", run_dir, args.protocol, args.src)
            print(
                f"{n:>9,} {report_mib:>11.0f} {score_mib:>10.0f} {report_mib / score_mib:>13.2f} "
                f"{report_s:>9.1f} {score_s:>8.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
