"""`geosleuth compare`: runs side by side on the samples they share, with paired significance.

Each run is compared to the first (the baseline) on the same samples: the accuracy difference
with a paired bootstrap 95 % interval, and McNemar's exact test on the discordant pairs.
Accuracies are percentages and differences percentage points, as in every summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binomtest

from geosleuth.core import metrics
from geosleuth.eval.datasets.frozen import require_same_images
from geosleuth.eval.report.rundata import load_run
from geosleuth.eval.report.scores import RunScore, protocol_for, score_samples

N_BOOT = 2000


def hit_vectors(run: RunScore) -> dict[str, np.ndarray]:
    """Per-sample hit vectors of every protocol figure defined on every sample (the engine's hits)."""
    arrays = run.file.arrays
    assert arrays is not None
    return {
        name: hits
        for name, hits in arrays.hits.items()
        if name not in arrays.scored or bool(arrays.scored[name].all())
    }


def mcnemar_p(a: np.ndarray, b: np.ndarray) -> float:
    """Exact two-sided McNemar p-value from the discordant pairs."""
    only_a = int((a & ~b).sum())
    only_b = int((~a & b).sum())
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def paired_bootstrap(a: np.ndarray, b: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """95 % interval of mean(b) − mean(a): the bootstrap of the paired differences (chunked)."""
    return metrics.bootstrap_ci_mean(b.astype(float) - a.astype(float), n_boot=N_BOOT, seed=seed)


def compare_runs(run_dirs: Sequence[Path], protocol: str | None = None) -> dict[str, Any]:
    """Metrics per run on the common samples and paired tests against the first run."""
    runs = [load_run(Path(d)) for d in run_dirs]
    common = set.intersection(*({s.id for s in r.iter_samples()} for r in runs))
    if not common:
        raise ValueError("the runs share no sample ids")
    require_same_images([(str(r.run_dir), r.full_manifest()) for r in runs], common)
    proto = protocol_for(protocol or runs[0].config.get("protocol"), runs[0].iter_samples())
    vectors, medians = [], []
    for run in runs:
        samples = sorted((s for s in run.iter_samples() if s.id in common), key=lambda s: s.id)
        scored = score_samples(samples, run.lookup, proto, name=str(run.run_dir))
        vectors.append(hit_vectors(scored))
        medians.append(scored.file.score.metrics.get("median_km"))
    names = [m for m in vectors[0] if all(m in v for v in vectors)]
    result: dict[str, Any] = {
        "protocol": proto.name,
        "n_common": len(common),
        "runs": [
            {
                "run_dir": str(r.run_dir),
                "model": r.manifest.get("model"),
                "metrics": {m: 100.0 * float(v[m].mean()) for m in names},
                "median_km": med,
            }
            for r, v, med in zip(runs, vectors, medians, strict=True)
        ],
        "comparisons": [],
    }
    for i in range(1, len(runs)):
        tests = {}
        for m in names:
            a, b = vectors[0][m], vectors[i][m]
            lo, hi = paired_bootstrap(a, b)
            tests[m] = {
                "diff": 100.0 * float(b.mean() - a.mean()),
                "ci95": [100.0 * lo, 100.0 * hi],
                "mcnemar_p": mcnemar_p(a, b),
                "only_baseline": int((a & ~b).sum()),
                "only_other": int((~a & b).sum()),
            }
        result["comparisons"].append(
            {"baseline": str(runs[0].run_dir), "other": str(runs[i].run_dir), "tests": tests}
        )
    return result


def compare_markdown(result: dict[str, Any]) -> str:
    """Side-by-side table plus one significance table per comparison."""
    runs = result["runs"]
    names = list(runs[0]["metrics"])
    lines = [
        f"# Comparison on {result['n_common']} common samples (protocol `{result['protocol']}`)",
        "",
        "| metric | " + " | ".join(Path(r["run_dir"]).name for r in runs) + " |",
        "|---|" + "---|" * len(runs),
    ]
    for m in names:
        lines.append(f"| {m} (%) | " + " | ".join(f"{r['metrics'][m]:.2f}" for r in runs) + " |")
    if runs[0]["median_km"] is not None and all(r["median_km"] is not None for r in runs):
        lines.append("| median km | " + " | ".join(f"{r['median_km']:.1f}" for r in runs) + " |")
    for comp in result["comparisons"]:
        lines += [
            "",
            f"## {Path(comp['other']).name} vs {Path(comp['baseline']).name}",
            "",
            "| metric | Δ (pp) | 95 % CI (pp) | McNemar p | only baseline | only other |",
            "|---|---|---|---|---|---|",
        ]
        for m, t in comp["tests"].items():
            lo, hi = t["ci95"]
            lines.append(
                f"| {m} | {t['diff']:+.2f} | [{lo:+.2f}, {hi:+.2f}] | "
                f"{t['mcnemar_p']:.4g} | {t['only_baseline']} | {t['only_other']} |"
            )
    return "\n".join(lines) + "\n"
