"""CLI start-up: every `geosleuth … --help` beside the bare interpreter and `import typer`.

    python bench/startup_bench.py [--runs 15]

Each figure is the best of N runs (start-up noise only ever adds time), measured in this run
next to its references: `python -c pass` (the floor) and `python -c "import typer"` (the
framework the CLI is built on). Targets: `geosleuth --help` < 150 ms wall (issue 13); every
`--help`, subcommands included, within 1.5x of `import typer` (issue 24), in CPU and in wall time;
`import geosleuth` (the flat Python API, every name imported lazily) within 2x `python -c pass`
(issue 30). Then the start-up costs that the code's comments give as reasons (typer's rich
renderer, a pydantic adapter, pyproj, numpy.ma, an SSL context, building every command of a CLI
module), each beside its reference.
"""

from __future__ import annotations

import argparse
import math
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


def cli_command() -> list[str]:
    python = sys.executable
    script = shutil.which("geosleuth", path=str(Path(python).parent)) or shutil.which("geosleuth")
    return [script] if script else [python, "-c", "from geosleuth.cli.app import main; main()"]


def help_figures(runs: int) -> list[str]:
    """One line per `--help` screen: wall and CPU beside `import typer`, measured in this call."""
    from geosleuth.cli.app import command_paths

    python, cli = sys.executable, cli_command()
    rows = [("python -c pass (floor)", [python, "-c", "pass"])]
    rows.append(("python -c 'import typer' (reference)", [python, "-c", "import typer"]))
    rows.append(("geosleuth --help", [*cli, "--help"]))
    rows += [(f"geosleuth {' '.join(p)} --help", [*cli, *p, "--help"]) for p in command_paths()]
    results = {name: measure(argv, runs) for name, argv in rows}
    ref_wall, ref_cpu = results["python -c 'import typer' (reference)"]
    out = [f"{'command':44s} {'wall ms':>8s} {'cpu ms':>8s} {'wall/typer':>11s} {'cpu/typer':>10s}"]
    worst = 0.0
    for name, (wall, cpu) in results.items():
        ratios = f"{wall / ref_wall:10.2f}x {cpu / ref_cpu:9.2f}x"
        out.append(f"{name:44s} {wall * 1e3:8.1f} {cpu * 1e3:8.1f} {ratios}")
        if name.startswith("geosleuth"):
            worst = max(worst, wall / ref_wall, cpu / ref_cpu)
    verdict = "met" if worst <= 1.5 else "NOT met"
    out.append(f"slowest --help: {worst:.2f}x import typer (target <= 1.5x): {verdict}")
    help_wall = results["geosleuth --help"][0]
    out.append(
        f"geosleuth --help: {help_wall * 1e3:.0f} ms wall (target < 150 ms): "
        f"{'met' if help_wall < 0.150 else 'NOT met'}"
    )
    return out


def import_figure(runs: int) -> str:
    """`import geosleuth` beside `python -c pass`, measured in this call."""
    python = sys.executable
    floor_wall, floor_cpu = measure([python, "-c", "pass"], runs)
    wall, cpu = measure([python, "-c", "import geosleuth"], runs)
    worst = max(wall / floor_wall, cpu / floor_cpu)
    return (
        f"import geosleuth: {wall * 1e3:.1f} ms wall, {cpu * 1e3:.1f} ms CPU; python -c pass: "
        f"{floor_wall * 1e3:.1f} ms, {floor_cpu * 1e3:.1f} ms: {wall / floor_wall:.2f}x wall, "
        f"{cpu / floor_cpu:.2f}x CPU (target <= 2x): {'met' if worst <= 2 else 'NOT met'}"
    )


def metadata_figure(runs: int) -> str:
    """Why `__version__` is a literal: the `importlib.metadata` look-up beside `python -c pass`."""
    python = sys.executable
    floor_wall, _ = measure([python, "-c", "pass"], runs)
    code = "import importlib.metadata as m; m.version('geosleuth')"
    wall, _ = measure([python, "-c", code], runs)
    return (
        f"importlib.metadata.version('geosleuth'): +{(wall - floor_wall) * 1e3:.1f} ms wall over "
        f"python -c pass ({wall / floor_wall:.2f}x)"
    )


IMPORT_COSTS: tuple[tuple[str, str, str], ...] = (
    ("typer's rich help renderer (why help is plain)", "import typer", "import typer.rich_utils"),
    (
        "pydantic adapter for a group's --help flag (why _LightHelpGroup)",
        "import typer",
        "import typer, pydantic; pydantic.TypeAdapter(bool | None)",
    ),
    ("pyproj import (why small geodesic batches use geographiclib)", "import numpy", "import numpy, pyproj"),
    ("numpy.ma import (why median_finite, percentile_interval)", "import numpy", "import numpy.ma"),
    ("an SSL context (why http shares one)", "import ssl", "import ssl; ssl.create_default_context()"),
)
"""(what it explains, reference code, code): each measured in a fresh interpreter."""


def import_costs(runs: int) -> list[str]:
    """The start-up costs the code's comments give as reasons, each beside its reference."""
    python, out = sys.executable, []
    for label, ref, code in IMPORT_COSTS:
        ref_wall, ref_cpu = measure([python, "-c", ref], runs)
        wall, cpu = measure([python, "-c", code], runs)
        out.append(
            f"{label}: +{(wall - ref_wall) * 1e3:.1f} ms wall, +{(cpu - ref_cpu) * 1e3:.1f} ms CPU over "
            f"`{ref}` ({wall / ref_wall:.2f}x wall, {cpu / ref_cpu:.2f}x CPU)"
        )
    return out


def build_costs(runs: int) -> list[str]:
    """Building every command of a CLI module beside building only the one asked for (in-process)."""
    from geosleuth.cli.app import load_module_commands

    out = []
    for module, only in (("geosleuth.cli.eval", "eval"), ("geosleuth.cli.data", "data")):
        load_module_commands(module)  # imports out of the timing
        times = {}
        for key in (None, only):
            best = math.inf
            for _ in range(runs):
                start = time.perf_counter()
                load_module_commands(module, only=key)
                best = min(best, time.perf_counter() - start)
            times[key] = best
        whole, one = times[None], times[only]
        out.append(
            f"{module}: every command built {whole * 1e3:.1f} ms, only `{only}` {one * 1e3:.1f} ms "
            f"({whole / one:.2f}x)"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print(compile_geosleuth())
    print(f"start-up, best of {args.runs} runs ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    print("\n".join(help_figures(args.runs)))
    print(import_figure(args.runs))
    print(metadata_figure(args.runs))
    print("\n".join(import_costs(args.runs)))
    print("\n".join(build_costs(args.runs)))


if __name__ == "__main__":
    main()
