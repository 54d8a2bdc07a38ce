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
