"""What `score` computes on the published files and on generated rows, as one comparable snapshot.

``tests/data/score_snapshot.json.gz`` holds the snapshot the scorer produced before the speed
work of issue 24 (commit 45ad0a0), regenerated once for the intended changes of issue 21 (GeoScore
on R = 6371 km as GeoAgent's paper and code; labelled out-of-range coordinates no longer swapped;
SpotAgent's strict reader taking ``22.906847° S``), with every other row and figure unchanged;
``test_score_snapshot.py`` checks that today's scorer gives the same numbers. Regenerate only
for an intended change of behaviour, and say so in the commit:

    PYTHONPATH=src python tests/scoring/score_snapshot.py
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SNAPSHOT = DATA / "score_snapshot.json.gz"
SHARED = ROOT / ".." / "shared" / "fixtures" / "published_predictions"
PROTOCOLS = ("twm", "osv5m", "spotagent", "geovista", "default")
MODELS = ("gpt5", "o3", "qwen3vl235b", "qwen3vl30b", "grok4")


def published_files() -> dict[str, Path]:
    """The five published prediction files (gpt5 from the test data, the rest from ../shared)."""
    out = {"gpt5": DATA / "published_predictions" / "imageo2_test_gpt5.jsonl"}
    for model in MODELS[1:]:
        path = SHARED / f"imageo2_test_{model}.jsonl"
        if path.exists():
            out[model] = path
    return out


def _answer(rng: random.Random, lat: float, lon: float, style: int) -> str:
    """An answer in one of the formats the parsers read, near or far from (lat, lon)."""
    la, lo = round(lat + rng.gauss(0, 0.3), 5), round(lon + rng.gauss(0, 0.3), 5)
    city = rng.choice(["Paris", "München", "Lyon", "Kyoto", "Springfield", "Hamburg", "", "São Paulo"])
    country = rng.choice(["France", "Germany", "Japan", "USA", "Brasil", "", "Deutschland"])
    if style == 0:
        return f'Reasoning…\n{{"lat": {la}, "lon": {lo}, "city": "{city}", "country": "{country}"}}'
    if style == 1:
        return f"<answer>\ncountry: {country}\ncity: {city}\nLatitude: {la}\nLongitude: {lo}\n</answer>"
    if style == 2:
        return f'```json\n{{"latitude": "{la}", "longitude": "{lo}", "city": "{city}"}}\n```'
    if style == 3:
        return f"I think this is {city}, {country}."
    if style == 4:
        return f"{country}; {city}; centre"
    if style == 5:
        return f'{{"lat": {la + 200}, "lon": {lo}, "city": "{city}", "country": "{country}"}}'
    if style == 6:
        return f"Final answer: ({la}, {lo})"
    return rng.choice(["", "   ", "I cannot tell.", "{not json", '{"lat": "abc", "lon": 1}'])


def generated_rows(seed: int = 24) -> list[str]:
    """JSONL lines of many row shapes: every kind of prediction and truth field, and broken rows."""
    rng = random.Random(seed)
    lines: list[str] = []
    for i in range(600):
        lat, lon = rng.uniform(-60, 70), rng.uniform(-180, 180)
        if rng.random() < 0.3:  # land on populated places the gazetteer knows
            lat, lon = rng.choice([(48.8566, 2.3522), (35.0116, 135.7681), (47.05, 8.31), (40.71, -74.0)])
        kind = i % 12
        labels = {"city": rng.choice(["Paris", "Kyoto", "Luzern", "New York", ""]), "country": "France"}
        truth: dict[str, Any] = {"lat": lat, "lon": lon, **labels}
        index = i if rng.random() > 0.03 else max(0, i - 1)  # a few duplicate ids
        row: dict[str, Any] = {"index": index, "data_source": f"S{i % 3}"}
        if kind == 0:
            row |= {"pred_lat": round(lat + rng.gauss(0, 1), 4), "pred_lon": lon}
            row |= {"true_lat": lat, "true_lon": lon}
        elif kind == 1:
            row |= {"pred_lat": rng.choice(["x", 95, True, None, "12.5"]), "pred_lon": 3, "gt": truth}
        elif kind == 2:
            row |= {"prediction": {"lat": lat, "lon": lon + 400 * (rng.random() < 0.2), "city": "Paris"}}
            row |= {"ground_truth": truth}
        elif kind == 3:
            row |= {"messages": [{"role": "assistant", "content": _answer(rng, lat, lon, rng.randrange(8))}]}
            row |= {"ground_truth": json.dumps(truth)}
        elif kind == 4:
            row |= {"response": _answer(rng, lat, lon, rng.randrange(8)), "truth": {"labels": labels}}
        elif kind == 5:
            row |= {"solution_str": _answer(rng, lat, lon, 0), "reward_model": {"ground_truth": truth}}
        elif kind == 6:
            row |= {"output": _answer(rng, lat, lon, rng.randrange(8)), "latitude": lat, "longitude": lon}
        elif kind == 7:
            row |= {"lat": lat, "lon": lon, "gt_lat": lat + 0.01, "gt_lon": lon}
        elif kind == 8:
            answer = _answer(rng, lat, lon, rng.randrange(8))
            row |= {"solution_str": answer, "ground_truth": {"city": "Paris"}}
        elif kind == 9:
            row |= {"solution_str": "B", "choices": ["France", "Japan"], "answer": rng.choice(["A", "B"])}
        elif kind == 10:
            row |= {"solution_str": _answer(rng, lat, lon, rng.randrange(8)), "ground_truth": truth}
            row["ground_truth"]["lat"] = rng.choice([lat, "n/a", 91.0, None, math.inf])
        else:
            row |= {"text": _answer(rng, lat, lon, rng.randrange(8))}
        text = json.dumps(row, ensure_ascii=False, allow_nan=True)
        lines.append(rng.choice([text, text, text, text, "[1, 2]", "{broken", ""]) if i % 17 == 0 else text)
    return lines


def _round(value: Any) -> Any:
    """Floats to 9 significant digits, so the snapshot holds numbers and not float noise."""
    if isinstance(value, float):
        return value if not math.isfinite(value) else float(f"{value:.9g}")
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_round(v) for v in value]
    return value


def snapshot_of(path: Path, protocol: str, by: str | None = None) -> dict[str, Any]:
    """The summary (with warnings and groups) and every row's record of one scored file."""
    from geosleuth.scoring import get_protocol, score_file

    scored = score_file(path, get_protocol(protocol), by=by)
    here = str(path)

    def local(value: Any) -> Any:  # generated files live in a temporary folder: drop its name
        return value.replace(here, "<file>") if isinstance(value, str) else value

    rows = [_round({k: local(v) for k, v in r.items()}) for r in scored.iter_rows()]
    summary = scored.score.to_dict()
    summary["warnings"] = [local(w) for w in summary["warnings"]]
    floats = {k for r in rows for k, v in r.items() if isinstance(v, float)}
    exact = [{k: v for k, v in r.items() if k not in floats} for r in rows]
    digest = hashlib.sha256(json.dumps(exact, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    return {
        "summary": _round(summary),
        "rows_digest": digest,
        "row_floats": {k: [r.get(k) for r in rows] for k in sorted(floats)},
    }


def cases(tmp: Path) -> dict[str, tuple[Path, str | None]]:
    """Every file the snapshot covers, by name (generated ones are written under ``tmp``)."""
    out: dict[str, tuple[Path, str | None]] = {m: (p, None) for m, p in published_files().items()}
    out["osv5m_select"] = (DATA / "osv5m" / "select.csv", None)
    generated = tmp / "generated.jsonl"
    generated.write_text("\n".join(generated_rows()) + "\n", encoding="utf-8")
    out["generated"] = (generated, "data_source")
    return out


def main() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        snap = {
            f"{name}/{protocol}": snapshot_of(path, protocol, by)
            for name, (path, by) in cases(Path(tmp)).items()
            for protocol in PROTOCOLS
        }
    with gzip.open(SNAPSHOT, "wt", encoding="utf-8") as fh:
        json.dump(snap, fh, ensure_ascii=False)
    print(f"wrote {SNAPSHOT} ({SNAPSHOT.stat().st_size / 1024:.0f} KiB, {len(snap)} cases)", file=sys.stderr)


if __name__ == "__main__":
    main()
