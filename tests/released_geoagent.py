"""GeoAgent's released answer reading for its semantic reward, transcribed by hand once for the
tests and benches: ``TripleFieldAccuracy._extract_answer_content`` (the ``<answer>`` body, or
the whole completion) then ``_split_three_fields`` (``;`` or ``；``, a fourth part and more
joined back into the third). geosleuth never imports this file: it is the reference."""

from __future__ import annotations

import re


def three_fields(completion: str) -> tuple[str, str, str]:
    """(country, city, place) as the released reward reads them from one completion."""
    m = re.search(r"<answer>\s*(.*?)\s*</answer>", completion, flags=re.S | re.I)
    text = (m.group(1) if m else completion).strip()
    if not text:
        return "", "", ""
    parts = [p.strip() for p in re.split(r"[;；]", text) if p.strip()]
    while len(parts) < 3:
        parts.append("")
    if len(parts) > 3:
        parts = parts[:2] + [";".join(parts[2:])]
    return parts[0], parts[1], parts[2]
