"""Multiple choice: a JSON ``"choice"``, a lone letter or number, "Answer: X", or the one option named."""

from __future__ import annotations

import re
from collections.abc import Sequence

from geosleuth.core.parsing.base import ParseMode
from geosleuth.core.parsing.delimiters import _answer_blocks, _without_tool_output, squeeze

_CHOICE = re.compile(
    r"(?i:answer|choice|option|答案)(?i: is| would be| =|:|：)? ?"
    r"(?:\((?P<a>[A-Ha-h1-8])\)|\[(?P<b>[A-Ha-h1-8])\]|(?P<c>[A-H]|[1-8])(?!\w|[.,]\d))"
)
_JSON_CHOICE = re.compile(r"""["']?(?i:choice|answer|option)["']? ?[:=] ?["']?(?P<v>[^"'\n,}]{1,60})""")


def _parse_choice(work: str, choices: Sequence[str], mode: ParseMode) -> str | None:
    """The chosen option's letter (see the module docstring)."""
    letters = [chr(ord("A") + i) for i in range(min(len(choices), 8))]
    own = squeeze(_without_tool_output(work)[0])
    blocks = _answer_blocks(own)
    region = (blocks[0] if mode == "strict" else blocks[-1]) if blocks else own
    explicit = _explicit_choices(region, choices, letters)
    if explicit:
        return explicit[0] if mode == "strict" else explicit[-1]
    if mode == "strict":
        return None
    from geosleuth.core.text import normalize

    text = f" {normalize(region)} "
    named = [
        letters[i]
        for i, c in enumerate(choices[: len(letters)])
        if normalize(c) and f" {normalize(c)} " in text
    ]
    return named[0] if len(named) == 1 else None


def _as_letter(value: str, choices: Sequence[str], letters: list[str]) -> str | None:
    """``"B"``, ``"(b)"``, ``"2"`` or an option's own name -> its letter."""
    v = value.strip().strip("()[]*.\"' ")
    if len(v) == 1 and v.upper() in letters:
        return v.upper()
    if v.isdecimal() and 1 <= int(v) <= len(letters):  # not isdigit(): int("²") raises
        return letters[int(v) - 1]
    from geosleuth.core.text import normalize

    key = normalize(v)
    hits = [letters[i] for i, c in enumerate(choices[: len(letters)]) if key and normalize(c) == key]
    return hits[0] if len(hits) == 1 else None


def _explicit_choices(region: str, choices: Sequence[str], letters: list[str]) -> list[str]:
    """Explicit choices in text order: JSON ``"choice"``, a lone letter/number, "Answer: X"."""
    body = region.strip()
    if len(body) <= 40:
        lone = _as_letter(body, choices, letters)  # "B", "(b)", "4", or an option's exact name
        if lone is not None:
            return [lone]
    hits: list[tuple[int, str]] = []
    for m in _JSON_CHOICE.finditer(region):
        letter = _as_letter(m.group("v"), choices, letters)
        if letter is not None:
            hits.append((m.start(), letter))
    seen = {pos for pos, _ in hits}
    for m in _CHOICE.finditer(region):
        value = m.group("a") or m.group("b") or m.group("c")
        letter = _as_letter(value, choices, letters)
        if letter is not None and not any(abs(m.start() - p) <= 2 for p in seen):
            hits.append((m.start(), letter))
    return [letter for _, letter in sorted(hits)]


# --- WhereBench's released WhereCountry reading ------------------------------------------------

_WHERECOUNTRY_OPEN = "<answer>"
_WHERECOUNTRY_CLOSE = "</answer>"
_WHERECOUNTRY_DIGIT = re.compile(r"\b([1-4])\b")


def released_wherecountry_choice(text: str, n_options: int) -> int | None:
    """The 0-based option WhereBench's released ``wherecountry/eval_gemini_25_flash.py`` reads.

    Released: ``re.search(r'<answer>.*?(\\b[1-4]\\b).*?</answer>', text, re.DOTALL)``, else the
    first ``\\b([1-4])\\b`` anywhere; the number picks option ``n - 1`` of the shown order, and a
    number past the options (``4`` of three) is no answer, with no second try. So
    ``<answer>1 (not 2)</answer>`` is 1 and digits in the reasoning before ``<answer>`` are
    ignored when the block closes. Computed in linear time: the pattern matches iff the first
    such digit after the first ``<answer>`` ends before the start of the last ``</answer>``
    (a later ``<answer>`` or digit can only be worse), which avoids its quadratic backtracking.
    """
    hit = None
    opened = text.find(_WHERECOUNTRY_OPEN)
    if opened >= 0:
        digit = _WHERECOUNTRY_DIGIT.search(text, opened + len(_WHERECOUNTRY_OPEN))
        if digit is not None and text.rfind(_WHERECOUNTRY_CLOSE) >= digit.end():
            hit = digit
    if hit is None:
        hit = _WHERECOUNTRY_DIGIT.search(text)
    if hit is None:
        return None
    index = int(hit.group(1)) - 1
    return index if 0 <= index < n_options else None


def wherecountry_choice(text: str, choices: Sequence[str]) -> int | None:
    """The 0-based option of a WhereCountry reply: the released reading of the model's own text.

    Only a reply with no number 1-4 at all (geosleuth's own prompt asks for a letter, e.g.
    ``{"choice": "B"}``) falls back to :func:`_parse_choice`; the released code leaves it unparsed.
    """
    own = _without_tool_output(text)[0]
    if _WHERECOUNTRY_DIGIT.search(own) is not None:
        return released_wherecountry_choice(own, len(choices))
    letter = _parse_choice(own, choices, "robust")
    return None if letter is None else ord(letter) - ord("A")
