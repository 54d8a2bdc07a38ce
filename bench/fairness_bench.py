"""Time the fairness figures on 100,000 samples beside the plain headline summary of the same rows.

Rows are generated from real places: each truth is a GeoNames place of the gazetteer (drawn
with weight ∝ log(1 + population), seeded), each answer the truth moved a seeded log-normal
distance (median ~60 km), 3 % of samples failed (no answer). Each figure is printed beside its
reference, measured in the same run on the same rows, as a ratio:

- reference: ``summarize`` (the headline summary.json body: every threshold with its bootstrap
  interval, calibration, default breakdowns);
- ``group_codes``: every grouping of every row (the settlement class reverse-geocodes all truths);
- ``fairness_breakdowns``: per group of the five groupings, every accuracy with its interval and the
  median km;
- ``fairness_block``: the disparity of each grouping with its bootstrap gap interval, accuracy per
  country, and the over-prediction entropy (reverse-geocodes every answer);
- ``score --by income`` (the streaming scorer on a JSONL file of the same rows) beside plain ``score``,
  best of two runs each;
- the grounding figures (``run_grounding``) of ``--grounding-n`` trajectories whose final reasoning
  names real places, countries and a coordinate and whose one search result names some of them,
  beside reading the same trajectories from their JSON lines (the least any pass over a run does).

Run: ``.venv/bin/python bench/fairness_bench.py [--n 100000] [--grounding-n 10000] [--json]``
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from score_bench import perturb  # the same log-normal answers as the scoring bench

from geosleuth.core.countries import country_name
from geosleuth.core.records import Prediction, Sample, ToolCallRecord, Trajectory, TrajectoryStatus, Turn
from geosleuth.eval.report.fairness import RowArrays, fairness_block, fairness_breakdowns, group_codes
from geosleuth.eval.report.grounding import run_grounding
from geosleuth.eval.report.scores import RunScore, score_run
from geosleuth.eval.report.summary import summarize
from geosleuth.gazetteer import get_gazetteer
from geosleuth.scoring import get_protocol, score_file


def make_run(n: int, seed: int = 0) -> RunScore:
    """A scored run of ``n`` samples with real truth places and log-normal errors (3 % failed)."""
    rng = np.random.default_rng(seed)
    places = get_gazetteer().all_places("city")
    weight = np.log1p(places["population"].astype(np.float64))
    pick = rng.choice(weight.size, size=n, p=weight / weight.sum())
    tlat, tlon, cc = places["lat"][pick], places["lon"][pick], places["country_code"][pick]
    plat, plon = perturb(tlat, tlon, rng)
    failed = rng.random(n) < 0.03
    samples = [
        Sample(
            id=f"s{i}",
            lat=float(tlat[i]),
            lon=float(tlon[i]),
            labels={"country": str(cc[i])} if cc[i] else {},
        )
        for i in range(n)
    ]
    records = {
        f"s{i}": Trajectory(sample_id=f"s{i}", model="bench", status=TrajectoryStatus.MODEL_ERROR)
        if failed[i]
        else Trajectory(
            sample_id=f"s{i}", model="bench", prediction=Prediction(lat=float(plat[i]), lon=float(plon[i]))
        )
        for i in range(n)
    }
    return score_run(samples, records, get_protocol("default"))


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """The best wall time of ``repeat`` calls, and the last call's result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def make_trajectories(n: int, seed: int = 0) -> list[str]:
    """``n`` trajectory JSON lines: a search result naming the place, a final reasoning that names
    it, its country, another place the search never returned, and a coordinate."""
    rng = np.random.default_rng(seed)
    gazetteer = get_gazetteer()
    big = np.flatnonzero((gazetteer.kind == "city") & (gazetteer.population >= 100_000))
    pick = rng.choice(big, size=(n, 2))
    out = []
    for i in range(n):
        first, second = gazetteer.place(int(pick[i, 0])), gazetteer.place(int(pick[i, 1]))
        country = country_name(first.country_code or "")
        search = ToolCallRecord(name="web_search", result_text=f"{first.name} is a city in {country}.")
        final = (
            f"The signs point to {country}. The search confirms {first.name}, not far from {second.name}. "
            f"I estimate {first.lat:.3f}, {first.lon:.3f}."
        )
        trajectory = Trajectory(
            sample_id=f"s{i}",
            model="bench",
            turns=[Turn(index=0, text="Searching.", tool_calls=[search]), Turn(index=1, text=final)],
            prediction=Prediction(city=first.name, country=country),
        )
        out.append(trajectory.model_dump_json())
    return out


def write_jsonl(run: RunScore, path: Path) -> None:
    """The run's predictions and truths as the JSONL rows ``score`` reads."""
    assert run.file.columns is not None
    plat, plon = run.file.columns.coords[0], run.file.columns.coords[1]
    tlat, tlon = run.columns.column("true_lat"), run.columns.column("true_lon")
    with path.open("w") as fh:
        for i in range(run.n):
            pred = {} if np.isnan(plat[i]) else {"pred_lat": float(plat[i]), "pred_lon": float(plon[i])}
            fh.write(json.dumps({"id": f"s{i}", **pred, "true_lat": tlat[i], "true_lon": tlon[i]}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--grounding-n", type=int, default=10_000)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    protocol = get_protocol("default")
    run = make_run(args.n)
    get_gazetteer().reverse_batch([0.0, 1.0], [0.0, 1.0])  # load the gazetteer outside the timings
    ref, _ = timed(lambda: summarize(run))
    t_labels, (groupings, notes) = timed(lambda: group_codes(run))
    arrays = RowArrays.of(run)
    t_groups, breakdowns = timed(lambda: fairness_breakdowns(arrays, groupings, protocol))
    t_block, block = timed(lambda: fairness_block(run, arrays, groupings, notes=notes))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rows.jsonl"
        write_jsonl(run, path)
        score_protocol = get_protocol("geoclip")
        t_plain, _ = timed(lambda: score_file(path, score_protocol, keep_rows=False), repeat=2)
        t_by, by = timed(lambda: score_file(path, score_protocol, by="income", keep_rows=False), repeat=2)
    lines = make_trajectories(args.grounding_n)
    t_read, parsed = timed(lambda: [Trajectory.model_validate_json(line) for line in lines])
    t_ground, grounding = timed(lambda: run_grounding(parsed))
    figures = {
        "n": args.n,
        "reference_summarize_s": round(ref, 3),
        "group_codes_s": round(t_labels, 3),
        "fairness_breakdowns_s": round(t_groups, 3),
        "fairness_block_s": round(t_block, 3),
        "fairness_total_s": round(t_labels + t_groups + t_block, 3),
        "fairness_total_over_summarize": round((t_labels + t_groups + t_block) / ref, 3),
        "reference_score_s": round(t_plain, 3),
        "score_by_income_s": round(t_by, 3),
        "score_by_income_over_score": round(t_by / t_plain, 3),
        "grounding_n": args.grounding_n,
        "reference_read_trajectories_s": round(t_read, 3),
        "grounding_s": round(t_ground, 3),
        "grounding_over_read": round(t_ground / t_read, 3),
        "claim_support_rate": grounding["claim_support_rate"],
        "groups": {g: len(v) for g, v in breakdowns.items()},
        "income_disparity": block["groupings"]["income"]["disparity"],
        "score_by_income_disparity_gap": (by.score.disparity or {}).get("gap"),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{args.n:,} samples, one process; reference = the plain headline summary of the same rows")
    print(f"  summarize (reference)      {ref:8.2f} s")
    for name, t in (
        ("group_codes", t_labels),
        ("fairness_breakdowns", t_groups),
        ("fairness_block", t_block),
    ):
        print(f"  {name:<26} {t:8.2f} s   {t / ref:6.2f} x reference")
    total = t_labels + t_groups + t_block
    print(f"  fairness, all              {total:8.2f} s   {total / ref:6.2f} x reference")
    print(f"  score (reference)          {t_plain:8.2f} s")
    print(f"  score --by income          {t_by:8.2f} s   {t_by / t_plain:6.2f} x reference")
    print(f"{args.grounding_n:,} trajectories; reference = reading them from their JSON lines")
    print(f"  read (reference)           {t_read:8.2f} s")
    print(f"  grounding figures          {t_ground:8.2f} s   {t_ground / t_read:6.2f} x reference")
    print(f"groups per grouping: {figures['groups']}")
    print(f"income disparity: {figures['income_disparity']}")


if __name__ == "__main__":
    main()
