"""CLI start-up: `geosleuth --help` wall and CPU time beside the bare interpreter and typer.

    python bench/startup_bench.py [--runs 15]

Each figure is the best of N runs (start-up noise only ever adds time), measured in this run
next to its references: `python -c pass` (the floor) and `python -c "import typer"` (the
framework the CLI is built on). Target (issue 13): `geosleuth --help` < 150 ms wall.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _bytecode import compile_geosleuth


def measure(argv: list[str], runs: int) -> tuple[float, float]:
    """Best wall and best CPU (user + sys of the child) seconds over ``runs``."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    python = sys.executable
    script = shutil.which("geosleuth", path=str(Path(python).parent)) or shutil.which("geosleuth")
    cli = [script] if script else [python, "-c", "from geosleuth.cli.app import main; main()"]
    rows = [
        ("python -c pass (floor)", [python, "-c", "pass"]),
        ("python -c 'import typer' (reference)", [python, "-c", "import typer"]),
        ("geosleuth --help", [*cli, "--help"]),
        ("geosleuth tools --help", [*cli, "tools", "--help"]),
    ]
    print(compile_geosleuth())
    print(f"start-up, best of {args.runs} runs ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    results = {name: measure(argv, args.runs) for name, argv in rows}
    ref_wall, ref_cpu = results["python -c 'import typer' (reference)"]
    print(f"{'command':40s} {'wall ms':>9s} {'cpu ms':>9s} {'wall / typer':>13s}")
    for name, (wall, cpu) in results.items():
        print(f"{name:40s} {wall * 1e3:9.1f} {cpu * 1e3:9.1f} {wall / ref_wall:12.2f}x")
    help_wall = results["geosleuth --help"][0]
    print(
        f"geosleuth --help: {help_wall * 1e3:.0f} ms wall (target < 150 ms): "
        f"{'met' if help_wall < 0.150 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
