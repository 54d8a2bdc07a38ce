"""Parse time of 3 MB adversarial answers (issue 21): the work is capped, not only the characters.

Run: ``python bench/parse_adversarial_bench.py [--mb 3] [--repeat 1]``. For each hostile shape
it prints the CPU seconds of ``parse_answer`` in robust mode, strict ``twm`` (which reads the
whole text, as the released loop does), strict ``spotagent`` and robust with four choices,
beside the reference measured in the same run: Thinking with Map's released reading
(``api_evaluation/api_test.py``: a Python pass over every character pairing braces, then
``json.loads`` of each outermost span), the least a scorer of these answers does. The ratio
column is the slowest geosleuth mode over the reference.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from geosleuth.core.countries import resolve_country
from geosleuth.core.parsing import parse_answer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the one released-TwM transcription
from released_twm import first_answer  # noqa: E402

SHAPES: dict[str, str] = {
    "open braces": "{",
    "brace pairs": "{}",
    "nested openers": '{"a":',
    "lat/lon objects": '{"lat": 1.5, "lon": 2.5}',
    "broken objects": '{"lat": 1.5, lon: x, ',
    "loose JSON": "{a: 1, b: 2} ",
    "braces in strings": '{"a": "}{"}',
    "key lines": "Latitude: 1\n",
    "inline keys": "Country: X, ",
    "number pairs": "1.5, 2.5 ",
    "digits": "1 ",
    "DMS tokens": "12°30'N ",
    "answer blocks of digits": "<answer>1 2</answer>",
    "answer blocks of JSON": '<answer>{"a": 1}</answer>',
    "unclosed tool tags": "<answer><tool_response>",
    "lat= pairs": "lat=1.5 lon=2.5 ",
    "quotes": '"',
    "hex numbers": "0x10, 0x20 ",
    "keyed openers": '{"lat": 1, "lon": 2, "city": "x", "country": "y", "a": ',
    "nested keyed objects": '{"r": {"lat": 1, "lon": 2, "city": "x", "country": "y"}} ',
    "escaped keyed objects": '{"\\u006cat": 1, "lon": 2, "city": "x", "country": "y"} {"a": 1} ',
}
MODES: dict[str, dict[str, object]] = {
    "robust": {"mode": "robust"},
    "twm": {"mode": "strict", "protocol": "twm"},
    "spotagent": {"mode": "strict", "protocol": "spotagent"},
    "choices": {"mode": "robust", "choices": ["Italy", "France", "Spain", "Japan"]},
}


def released_twm(text: str) -> object:
    """The reference: ``extract_all_json_objects`` + ``find_coords_json`` as released (a span
    nested past the recursion limit is skipped here, where the released loop would crash)."""
    return first_answer(text, survive_recursion=True)


def _cpu(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=3.0, help="answer size in millions of characters")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    size = int(args.mb * 1_000_000)
    resolve_country("Xyzzy")  # the country-name index loads once per process: not parsing time
    parse_answer("Paris, France; Paris")
    print(f"CPU seconds per {size / 1e6:.1f} M-character answer")
    header = f"{'shape':26s}{'reference':>11s}" + "".join(f"{m:>11s}" for m in MODES) + f"{'worst/ref':>11s}"
    print(header)
    worst_all = 0.0
    for name, unit in SHAPES.items():
        text = (unit * (size // len(unit) + 1))[:size]
        ref = _cpu(lambda text=text: released_twm(text), args.repeat)  # type: ignore[misc]
        spent = [
            _cpu(lambda text=text, kw=kw: parse_answer(text, **kw), args.repeat)  # type: ignore[misc]
            for kw in MODES.values()
        ]
        worst_all = max(worst_all, *spent)
        cells = "".join(f"{v:11.3f}" for v in spent)
        print(f"{name:26s}{ref:11.3f}{cells}{max(spent) / max(ref, 1e-9):10.2f}x")
    print(f"slowest answer: {worst_all:.3f} s")


if __name__ == "__main__":
    main()
