"""Answer-parsing throughput on published model outputs, and linear scaling on hostile input.

Run: ``python bench/parse_bench.py [--files DIR] [--repeat 3]``. Prints, measured in the same run:

* answers/s of ``parse_answer`` (strict ``twm``, strict ``spotagent``, robust) beside the
  released Thinking-with-Map reader (``tests/released_twm.py``: outermost brace spans, the first
  that decodes with lat, lon, city and country), as a ratio;
* CPU time per character on whitespace runs, repeated keys and deep nesting at 10x and 100x the
  smallest size, as a ratio to the smallest (about 1 means linear; the old answer-line pattern
  grew as n^4);
* ``squeeze`` on the published answers beside the same folding done by scanning every character
  against the Unicode blank class (why squeeze tests for odd blanks first), as a ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from geosleuth.core.parsing import parse_answer
from geosleuth.core.parsing.delimiters import _BLANKS, _LINE_BREAKS, _NEWLINE_RUNS, squeeze

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the one released-TwM transcription
from released_twm import first_answer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIRS = (
    ROOT.parent / "shared" / "fixtures" / "published_predictions",
    ROOT / "tests" / "data" / "published_predictions",
)


def _cpu(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def _texts(files_dir: Path | None) -> list[str]:
    dirs = [files_dir] if files_dir else [d for d in DEFAULT_DIRS if d.is_dir()]
    if not dirs:
        raise SystemExit("no published prediction files found; pass --files DIR")
    texts: list[str] = []
    for path in sorted(dirs[0].glob("*.jsonl")):
        with path.open(encoding="utf-8") as fh:
            texts.extend(json.loads(line)["solution_str"] for line in fh if line.strip())
    return texts


def throughput(texts: list[str], repeat: int) -> None:
    for t in texts[:20]:
        parse_answer(t)  # country names load lazily on first use: not parsing time
    ref = _cpu(lambda: [first_answer(t) for t in texts], repeat)
    n, chars = len(texts), sum(map(len, texts))
    print(f"{n} answers, {chars / 1e6:.1f} M characters")
    print(f"{'parser':28s} {'answers/s':>12s} {'MB/s':>8s} {'vs released twm loop':>22s}")
    print(f"{'released twm loop (ref)':28s} {n / ref:12,.0f} {chars / ref / 1e6:8.2f} {1.0:21.2f}x")
    for label, kwargs in (
        ("geosleuth strict twm", {"mode": "strict", "protocol": "twm"}),
        ("geosleuth strict spotagent", {"mode": "strict", "protocol": "spotagent"}),
        ("geosleuth robust", {"mode": "robust"}),
    ):
        spent = _cpu(lambda kw=kwargs: [parse_answer(t, **kw) for t in texts], repeat)  # type: ignore[misc]
        print(f"{label:28s} {n / spent:12,.0f} {chars / spent / 1e6:8.2f} {ref / spent:21.2f}x")


def scaling(repeat: int) -> None:
    cases: dict[str, Callable[[int], str]] = {
        "spaces + name": lambda k: " " * k + "Paris",
        "' \\n' runs + word": lambda k: " \n" * (k // 2) + "done",
        "repeated keys": lambda k: "Latitude: Longitude: " * (k // 21),
        "nested JSON": lambda k: '{"a":' * (k // 5) + "1" + "}" * (k // 5),
        "unclosed blocks": lambda k: "<answer><tool_response>" * (k // 23),
    }
    sizes = (2_000, 20_000, 200_000)
    print(
        f"\n{'CPU µs per character':22s}" + "".join(f"{s:>12,d}" for s in sizes) + f"{'ratio 100x/1x':>15s}"
    )
    for name, make in cases.items():
        per_char = []
        for size in sizes:
            text = make(size)
            spent = _cpu(lambda text=text: parse_answer(text), repeat)  # type: ignore[misc]
            per_char.append(spent / len(text) * 1e6)
        cells = "".join(f"{v:12.3f}" for v in per_char)
        print(f"{name:22s}{cells}{per_char[-1] / max(per_char[0], 1e-9):14.2f}x")


def _class_scan_squeeze(text: str) -> str:
    """``squeeze``'s result by the plain route: every character tested against the blank class."""
    text = _BLANKS.sub(" ", _LINE_BREAKS.sub("\n", text)).replace(" \n", "\n")
    return _NEWLINE_RUNS.sub("\n", text)


def squeeze_figure(texts: list[str], repeat: int) -> None:
    """Why squeeze tests for odd blanks before its pattern: the answers it has work on, both ways."""
    busy = [t for t in texts if squeeze(t) != t]
    assert all(_class_scan_squeeze(t) == squeeze(t) for t in busy)
    ref = _cpu(lambda: [_class_scan_squeeze(t) for t in busy], repeat)
    spent = _cpu(lambda: [squeeze(t) for t in busy], repeat)
    chars = sum(map(len, busy)) or 1
    print(
        f"\nsqueeze on {len(busy)} answers with blanks to fold: {spent / len(busy) * 1e6:.1f} µs an answer, "
        f"class scan (ref) {ref / len(busy) * 1e6:.1f} µs ({ref / spent:.2f}x faster, "
        f"{chars / len(busy):.0f} characters an answer)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=Path, default=None, help="folder of published *.jsonl files")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    texts = _texts(args.files)
    throughput(texts, args.repeat)
    scaling(args.repeat)
    squeeze_figure(texts, args.repeat)


if __name__ == "__main__":
    main()
