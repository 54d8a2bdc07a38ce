"""Agreement of geosleuth's rewards with the authors' released reward functions, per case.

For each reward, rollouts are generated from case families (JSON variants, tagged key-value
lines, prose, aliased and multilingual names, abbreviations, hedged answers, tool-response
decoys, out-of-range coordinates, empty answers) and scored twice: by geosleuth's documented
entry point (`score_texts`) and by the released function, replayed here from its source as
the authors wrote it (geopy for Thinking with Map's geodesic; the released regexes verbatim).
Prints, per reward, the share of cases where ``released=true`` equals the released function,
and where the paper mode (the default) equals it, over every case and over the cases outside
the differences docs/training.md lists (each case is tagged with the difference it exercises).
Then the cost of one reward call on 3 MB hostile rollouts (the worst of eight shapes) beside
a call on a normal rollout, as a ratio.

    .venv/bin/python bench/reward_agreement.py [--n 2000] [--seed 0] [--hostile-mb 3]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import re
import sys
import time
import unicodedata
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from geopy.distance import geodesic

from geosleuth.training.rewards import geocoding
from geosleuth.training.rewards.batch import score_texts

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the released transcriptions
from released_geoagent import three_fields  # noqa: E402
from released_twm import step_score  # noqa: E402

# --- the released functions, as written by their authors -------------------------------------


def twm_released(text: str, truth: dict) -> float:
    """Thinking with Map ``localization.compute_distance_score`` (score only)."""
    return step_score(text, truth)


def _gv_norm(s: str | None) -> str:
    if not s:
        return ""
    s = unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode("ascii").lower()
    return re.sub(r"\s+", " ", re.sub(r"[^a-z0-9\s]", " ", s)).strip()


def _gv_contains(text: str, term: str) -> bool:
    return bool(term) and re.search(r"(?<!\w)" + re.escape(term) + r"(?!\w)", text) is not None


def geovista_released(predict_str: str, levels: dict) -> float:
    """GeoVista ``compure_score_search`` with ``eval_geolocation_response`` on its rule path."""
    last = predict_str.split("assistant")[-1].strip()
    text = _gv_norm(last)
    city = _gv_contains(text, _gv_norm(levels.get("city")))
    state = _gv_contains(text, _gv_norm(levels.get("admin1")))
    country = _gv_contains(text, _gv_norm(levels.get("country")))
    city_c, state_c, country_c = city, state or city, country or state or city
    return 4.0 if city_c else 2.0 if state_c else 1.0 if country_c else 0.0


def geoagent_semantic_released(
    completion: str, gt: tuple[str, str, str], sim: Callable[[str, str], float]
) -> float:
    """GeoAgent ``TripleFieldAccuracy`` for one completion (similarities from ``sim``)."""
    pred = three_fields(completion)
    if not pred[0] or not gt[0]:
        return 0.0
    s1 = sim(pred[0], gt[0])
    s2 = sim(pred[1], gt[1]) if s1 >= 0.7 and pred[1] and gt[1] else 0.0
    s3 = sim(pred[2], gt[2]) if s2 >= 0.5 and pred[2] and gt[2] else 0.0
    return 0.1 * s1 + 0.6 * s2 + 0.3 * s3


def geoagent_spatial_released(
    completion: str, truth: tuple[float, float], geocode: Callable[[str], tuple | None]
) -> float:
    """GeoAgent ``GeoScoreAccuracy`` for one completion (``geocode`` stands for OpenCage)."""
    m = re.search(r"<answer>\s*(.*?)\s*</answer>", completion, flags=re.S | re.I)
    answer = m.group(1).strip() if m else None
    if answer is None:
        try:
            jm = re.search(r"\{.*\}", completion, flags=re.S)
            if jm:
                data = json.loads(jm.group(0))
                if "FinalAnswer" in data:
                    answer = str(data["FinalAnswer"]).strip()
        except (json.JSONDecodeError, KeyError, TypeError):
            pass
    if not answer:
        return 0.0
    hit = geocode(answer)
    if hit is None:
        return 0.0
    la1, lo1, la2, lo2 = map(math.radians, (hit[0], hit[1], truth[0], truth[1]))
    a = math.sin((la2 - la1) / 2) ** 2 + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
    d = 2 * math.asin(math.sqrt(a)) * 6371
    return 0.0 if d >= 2000 else math.exp(-10 * (d / 2000))


# --- case generators -------------------------------------------------------------------------


@dataclass
class Case:
    text: str
    truth: dict
    family: str
    difference: str | None = None  # the documented paper/released difference this case exercises


def _obj(lat: object, lon: object, city: str = "X", country: str = "Y") -> str:
    return json.dumps({"lat": lat, "lon": lon, "city": city, "country": country})


def step_case(r: random.Random) -> Case:
    truth = {"lat": r.uniform(-70, 70), "lon": r.uniform(-170, 170)}
    km = 10 ** r.uniform(-1.5, 3.6)
    p = geodesic(kilometers=km).destination((truth["lat"], truth["lon"]), r.uniform(0, 360))
    lat, lon = round(p.latitude, 6), round(p.longitude, 6)
    family = r.choice(
        ["json", "json_tagged", "json_strings", "decoy", "two_answers", "nested", "brace_in_string",
         "missing_key", "lines", "prose", "lon_over_180", "lat_out_of_range", "empty", "fenced"]
    )  # fmt: skip
    think = "<think>Signs in the local script; the road markings fit.</think>\n"
    diff = None
    if family == "json":
        text = think + _obj(lat, lon)
    elif family == "json_tagged":
        text = think + f"<answer>{_obj(lat, lon)}</answer>"
    elif family == "json_strings":
        text = think + f"<answer>{_obj(str(lat), str(lon))}</answer>"
    elif family == "fenced":
        text = think + "```json\n" + _obj(lat, lon) + "\n```"
    elif family == "decoy":
        decoy = _obj(round(lat + r.uniform(-3, 3), 4), round(lon + r.uniform(-3, 3), 4))
        text = f"<tool_response>{decoy}</tool_response>\n" + think + f"<answer>{_obj(lat, lon)}</answer>"
        diff = "tool-response decoy"
    elif family == "two_answers":
        first = _obj(round(lat + 1, 4), lon)
        text = think + f"First guess {first}. Final: <answer>{_obj(lat, lon)}</answer>"
        diff = "several answers: paper the last, released the first"
    elif family == "nested":
        text = think + json.dumps({"final_answer": {"lat": lat, "lon": lon, "city": "X", "country": "Y"}})
        diff = "answer the released reader cannot read"
    elif family == "brace_in_string":
        text = think + json.dumps({"note": "a } brace", "lat": lat, "lon": lon, "city": "X", "country": "Y"})
        diff = "answer the released reader cannot read"
    elif family == "missing_key":
        text = think + json.dumps({"lat": lat, "lon": lon, "city": "X"})
        diff = "answer the released reader cannot read"
    elif family == "lines":
        text = think + f"<answer>\nLatitude: {lat}\nLongitude: {lon}\n</answer>"
        diff = "answer the released reader cannot read"
    elif family == "prose":
        text = think + f"I am fairly sure it is at {lat}, {lon}."
        diff = "answer the released reader cannot read"
    elif family == "lon_over_180":
        text = think + _obj(lat, lon + 360.0)
        diff = "out-of-range longitude (geopy wraps it)"
    elif family == "lat_out_of_range":
        text = think + _obj(lat + 180.0, lon)
    else:
        text = think + "I cannot tell."
    if diff is None and _near_bin_edge(km):
        diff = "haversine (paper) vs WGS-84 geodesic (released) within 0.6 % of a bin edge"
    return Case(text, truth, family, diff)


def _near_bin_edge(km: float) -> bool:
    return any(abs(km - t) <= 0.006 * t for t in (0.5, 2, 10, 25, 200, 750))


PLACES = [
    ("United States", "Texas", "Houston", ["TX", "texas"]),
    ("Venezuela", "Nueva Esparta", "Juan Griego", []),
    ("Spain", "Catalonia", "Vilanova i la Geltrú", ["Catalunya"]),
    ("South Africa", "Western Cape", "Cape Town", ["WE", "WC"]),
    ("Japan", "Osaka", "Sakai", []),
    ("Brazil", "Bahia", "Salvador", ["BA"]),
    ("France", "Île-de-France", "Paris", []),
    ("Germany", "Bavaria", "Munich", ["BY"]),
    ("Australia", "Victoria", "Melbourne", ["VIC"]),
    ("Canada", "Quebec", "Montreal", ["QC"]),
    ("United Kingdom", "England", "London", []),  # first-level units that are also country aliases
    ("United Kingdom", "Scotland", "Glasgow", []),
    ("United Kingdom", "Wales", "Cardiff", []),
]


def hierarchical_case(r: random.Random) -> Case:
    c, s, y, abbr = r.choice(PLACES)
    truth = {"lat": 0.0, "lon": 0.0, "levels": {"country": c, "admin1": s, "city": y}}
    other = r.choice(PLACES)
    ac = c if r.random() < 0.8 else other[0]
    as_ = s if r.random() < 0.6 else other[1]
    ay = y if r.random() < 0.5 else other[2]
    aliased = bool(abbr) and r.random() < 0.3
    if aliased:
        as_ = r.choice(abbr)
    family = r.choice(["lines", "comma", "parens", "prose", "lowercase", "upper", "hedged", "country_only",
                       "empty", "reasoning_mention", "assistant_word", "alias", "decoy"])  # fmt: skip
    diff = None
    if family == "lines":
        text = f"<answer>\nCountry: {ac}\nProvince/State: {as_}\nCity: {ay}\n</answer>"
    elif family == "comma":
        text = f"<answer>{ay}, {as_}, {ac}</answer>"
    elif family == "parens":
        text = f"<answer>{ay} ({as_}, {ac})</answer>"
    elif family == "prose":
        text = f"this is {ay} ({as_}, {ac})"
    elif family == "lowercase":
        text = f"{ay}, {as_}, {ac}".lower()
    elif family == "upper":
        text = f"<answer>{ay.upper()}, {ac.upper()}</answer>"
    elif family == "hedged":
        text = f"<answer>Either {ay} or {other[2]}, {ac}</answer>"
    elif family == "country_only":
        text = f"<answer>{ac}</answer>"
    elif family == "empty":
        text = "<answer></answer>"
    elif family == "reasoning_mention":
        text = f"<think>Could be {y}, or {other[2]}.</think><answer>{other[2]}, {other[1]}, {ac}</answer>"
        diff = "released reads the reasoning"
    elif family == "assistant_word":
        text = f"<answer>{ay}, {as_}, {ac}</answer> (the assistant is confident)"
        diff = 'released cuts at any "assistant"'
    elif family == "alias":
        text = (
            f"<answer>{ {'Germany': 'Deutschland', 'Spain': 'España', 'Japan': '日本'}.get(c, c) }</answer>"
        )
        diff = "multilingual names (paper only)"
    else:
        decoy = f"<tool_response>{y}, {s}, {c}</tool_response>\n"
        text = decoy + f"<answer>{other[2]}, {other[1]}, {other[0]}</answer>"
        diff = "released reads tool output"
    if diff is None and (s == y or (as_ and _gv_contains(_gv_norm(as_), _gv_norm(y)))):
        diff = "a state named like the true city"
    if diff is None and aliased and family not in ("country_only", "empty", "upper"):
        diff = "a state alias or abbreviation (the paper mode reads it)"
    return Case(text, truth, family, diff)


def _sim(a: str, b: str) -> float:
    """A deterministic name similarity shared by both sides (the embedding model is the same
    callable in both; only the reading around it is under test)."""
    na, nb = _gv_norm(a), _gv_norm(b)
    if not na or not nb:
        return 0.0
    if na == nb:
        return 1.0
    sa, sb = set(na.split()), set(nb.split())
    return len(sa & sb) / len(sa | sb)


def semantic_case(r: random.Random) -> Case:
    c, s, y, _ = r.choice(PLACES)
    truth = {"lat": 0.0, "lon": 0.0, "levels": {"country": c, "admin1": s, "city": y}}
    other = r.choice(PLACES)
    parts = [
        c if r.random() < 0.8 else other[0],
        s if r.random() < 0.6 else other[1],
        y if r.random() < 0.5 else other[2],
    ]
    family = r.choice(["tagged", "fullwidth", "four_parts", "empty_part", "untagged_label", "untagged_plain",
                       "two_answers", "decoy", "json_final", "no_separator", "empty"])  # fmt: skip
    diff = None
    if family == "tagged":
        text = f"<think>...</think><answer>{'; '.join(parts)}</answer>"
    elif family == "fullwidth":
        text = f"<answer>{'；'.join(parts)}</answer>"
    elif family == "four_parts":
        text = f"<answer>{'; '.join(parts)}; Old Town</answer>"
    elif family == "empty_part":
        text = f"<answer>{parts[0]};;{parts[2]}</answer>"
        diff = "an empty part: paper keeps positions, released drops it"
    elif family == "untagged_label":
        text = f"Looking at the signs.\nFinal answer: {'; '.join(parts)}"
        diff = "untagged: released splits the whole text"
    elif family == "untagged_plain":
        text = "; ".join(parts)
    elif family == "two_answers":
        first = f"<answer>{other[0]}; {other[1]}; {other[2]}</answer>"
        text = f"{first} wait, no: <answer>{'; '.join(parts)}</answer>"
        diff = "several answers: paper the last, released the first"
    elif family == "decoy":
        quoted = f"<tool_response><answer>{other[0]}; {other[1]}; {other[2]}</answer></tool_response>"
        text = f"{quoted}<answer>{'; '.join(parts)}</answer>"
        diff = "released reads tool output"
    elif family == "json_final":
        text = json.dumps({"CountryIdentification": "...", "FinalAnswer": "; ".join(parts)})
        diff = "untagged: released splits the whole text"
    elif family == "no_separator":
        text = f"<answer>{parts[2]}</answer>"
    else:
        text = "<answer></answer>"
    return Case(text, truth, family, diff)


GAZETTEER = (
    {p[2]: (10.0 + i, 20.0 + i) for i, p in enumerate(PLACES)}
    | {p[1]: (10.5 + i, 20.5 + i) for i, p in enumerate(PLACES)}
    | {p[0]: (12.0 + i, 25.0 + i) for i, p in enumerate(PLACES)}
)


def _stub_geocode_levels(levels: list[str | None]) -> tuple[float, float] | None:
    """Fine to coarse: the finest part the stub gazetteer knows (as the released retry drops parts)."""
    for name in reversed([x for x in levels if x]):
        for part in reversed([p.strip() for p in re.split(r"[;,]", name) if p.strip()]):
            if part in GAZETTEER:
                return GAZETTEER[part]
    return None


def _stub_geocode_text(address: str) -> tuple[float, float] | None:
    parts = [p.strip() for p in address.split(";")]
    while parts:
        for part in reversed([p.strip() for p in re.split(r"[;,，；]", parts[-1]) if p.strip()]):
            if part in GAZETTEER:
                return GAZETTEER[part]
        parts = parts[:-1]
    return None


class StubGeocoder:
    def geocode_many(self, answers: list[list[str | None]]) -> list[tuple[float, float] | None]:
        return [_stub_geocode_levels(a) for a in answers]


def spatial_case(r: random.Random) -> Case:
    c, s, y, _ = r.choice(PLACES)
    tlat, tlon = GAZETTEER[y]
    truth = {"lat": tlat + r.uniform(-0.5, 0.5), "lon": tlon + r.uniform(-0.5, 0.5), "levels": {"country": c}}
    other = r.choice(PLACES)
    parts = [c, s if r.random() < 0.7 else other[1], y if r.random() < 0.5 else other[2]]
    family = r.choice(["tagged", "json_final", "untagged", "coords", "empty", "unknown"])
    diff = None
    if family == "tagged":
        text = f"<answer>{'; '.join(parts)}</answer>"
    elif family == "json_final":
        text = json.dumps({"Reasoning": "...", "FinalAnswer": "; ".join(parts)})
    elif family == "untagged":
        text = "; ".join(parts)
        diff = "untagged answers: the paper mode reads them, released scores 0"
    elif family == "coords":
        text = f'<answer>{{"lat": {truth["lat"] + 0.1}, "lon": {truth["lon"]}}}</answer>'
        diff = "coordinates: paper measures them, released geocodes the text"
    elif family == "unknown":
        text = "<answer>Narnia; Cair Paravel; Lantern Waste</answer>"
    else:
        text = "<answer></answer>"
    return Case(text, truth, family, diff)


# --- measurement -----------------------------------------------------------------------------


def agreement(
    name: str,
    cases: list[Case],
    released_fn: Callable[[Case], float],
    spec_released: object,
    spec_paper: object,
    tol: float = 1e-9,
) -> tuple[str, int, float, float, float, int]:
    texts = [c.text for c in cases]
    truths = [c.truth for c in cases]
    got_rel = score_texts(spec_released, texts, truths).scores
    got_pap = score_texts(spec_paper, texts, truths).scores
    want = [released_fn(c) for c in cases]
    rel_ok = [abs(a - b) <= tol * max(1.0, abs(b)) for a, b in zip(got_rel, want, strict=True)]
    pap_ok = [abs(a - b) <= tol * max(1.0, abs(b)) for a, b in zip(got_pap, want, strict=True)]
    outside = [ok for ok, c in zip(pap_ok, cases, strict=True) if c.difference is None]
    for ok, c, g, w in zip(rel_ok, cases, got_rel, want, strict=True):
        if not ok:
            print(f"  {name} released disagrees ({c.family}): got {g}, released {w}: {c.text[:160]!r}")
    for ok, c, g, w in zip(pap_ok, cases, got_pap, want, strict=True):
        if not ok and c.difference is None:
            print(f"  {name} paper disagrees ({c.family}): got {g}, released {w}: {c.text[:160]!r}")
    return (
        name,
        len(cases),
        100.0 * sum(rel_ok) / len(cases),
        100.0 * sum(pap_ok) / len(cases),
        100.0 * sum(outside) / len(outside) if outside else math.nan,
        len(outside),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hostile-mb", type=float, default=3.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    warnings.simplefilter(
        "ignore", UserWarning
    )  # geopy's note on |lat| > 90  # the per-batch warnings are expected here
    r = random.Random(args.seed)
    geocoding._GEOCODERS[""] = StubGeocoder()  # type: ignore[assignment] # the same geocoder both sides
    rows = [
        agreement(
            "step (Thinking with Map)",
            [step_case(r) for _ in range(args.n)],
            lambda c: twm_released(c.text, c.truth),
            "step:released=true",
            "step",
        ),
        agreement(
            "hierarchical (GeoVista)",
            [hierarchical_case(r) for _ in range(args.n)],
            lambda c: geovista_released(c.text, c.truth["levels"]),
            {"name": "hierarchical", "released": True},
            {"name": "hierarchical"},
        ),
        agreement(
            "semantic R_sem (GeoAgent)",
            [semantic_case(r) for _ in range(args.n)],
            lambda c: geoagent_semantic_released(
                c.text,
                (c.truth["levels"]["country"], c.truth["levels"]["admin1"], c.truth["levels"]["city"]),
                _sim,
            ),
            {"name": "semantic", "released": True, "similarity": lambda a, b, level: _sim(a, b)},
            {"name": "semantic", "similarity": lambda a, b, level: _sim(a, b), "gating": "released"},
        ),
        agreement(
            "spatial R_spa (GeoAgent)",
            [spatial_case(r) for _ in range(args.n)],
            lambda c: geoagent_spatial_released(c.text, (c.truth["lat"], c.truth["lon"]), _stub_geocode_text),
            "spatial:released=true",
            "spatial:max_km=2000",
        ),
    ]
    print()
    print(
        "| reward | cases | released=true = released | paper = released (all) "
        "| paper = released (outside documented differences) | cases outside |"
    )
    print("|---|---|---|---|---|---|")
    for name, n, rel, pap, outside, n_out in rows:
        print(f"| {name} | {n} | {rel:.2f} % | {pap:.2f} % | {outside:.2f} % | {n_out} |")
    hostile_costs(int(args.hostile_mb * 1_000_000))


def hostile_costs(size: int) -> None:
    """Seconds per call on the worst hostile rollout of ``size`` characters, beside a normal one."""
    from geosleuth.core.countries import resolve_country

    resolve_country("Xyzzyland")  # the country index loads once per process, not per call
    truth = {
        "lat": 48.8584,
        "lon": 2.2945,
        "levels": {"country": "France", "admin1": "Île-de-France", "city": "Paris"},
    }
    answer = {"lat": 48.86, "lon": 2.29, "city": "Paris", "country": "France"}
    normal = f"<think>Signs in French.</think><answer>{json.dumps(answer)}</answer>"
    shapes = {
        "braces": "{" * size,
        "unclosed answer": "<answer>" + " " * size,
        "semicolons": "a; " * (size // 3),
        "assistant": "assistant " * (size // 10),
        "digits": "1" * size,
        "small JSON objects": '{"lat": 1, "lon": 2}' * (size // 20),
        "tool tags": "<tool_response>" * (size // 15),
        "zero-width": "\u200b" * size,
    }
    print(f"\n| reward | worst {size / 1e6:g} MB rollout (s) | shape | normal rollout | ratio |")
    print("|---|---|---|---|---|")
    specs = ("step", "step:released=true", "hierarchical", "hierarchical:released=true", "semantic")
    specs += ("semantic:released=true", "spatial:geocode=false", "spatial:released=true,geocode=false")
    for spec in specs:
        score_texts(spec, [normal], [truth])
        t0 = time.perf_counter()
        for _ in range(20):
            score_texts(spec, [normal], [truth])
        ref = (time.perf_counter() - t0) / 20
        worst, which = 0.0, ""
        for name, text in shapes.items():
            t0 = time.perf_counter()
            score_texts(spec, [text], [truth])
            dt = time.perf_counter() - t0
            worst, which = max((worst, which), (dt, name))
        print(f"| {spec} | {worst:.3f} | {which} | {ref * 1e3:.2f} ms | {worst / ref:,.0f}x |")


if __name__ == "__main__":
    main()
