"""Which prompt style a scoring protocol can read: chosen and checked before the first request.

A style asks for its final answer in one format (its ``answer_example``); a protocol reads
answers its own way (TWM: the first JSON object with lat, lon, city and country; SpotAgent:
``<answer>`` lines; G3: the first two decimals; OSV-5M, GeoCLIP, PIGEON: coordinates, as they
geocode nothing). A style whose answer the protocol cannot read scores every sample 0, so
`geosleuth eval`, the inspect task and the lmms-eval tasks refuse it, naming both. A protocol
that is one paper's, with that paper's style (``twm``, ``spotagent``, ``geovista``), implies
the style when none is given.
"""

from __future__ import annotations

from functools import lru_cache

from geosleuth.agent.prompting import available_styles, load_style
from geosleuth.core.records import LEVELS
from geosleuth.scoring.io import prediction_from_row
from geosleuth.scoring.peers import RELEASED_ORIGIN
from geosleuth.scoring.protocols import PROTOCOLS, get_protocol

PLAIN_STYLE = "direct"
"""The style of a plain generate (no tools) when neither a style nor the protocol names one."""
TOOLS_STYLE = "geovista"
"""The style of the agent loop with tools when neither a style nor the protocol names one."""


class StyleMismatch(ValueError):
    """The prompt style answers in a format the scoring protocol cannot read."""


@lru_cache(maxsize=128)
def reads(protocol: str, style: str) -> bool:
    """Whether ``protocol`` finds a location in an answer written the way ``style`` asks.

    The style's example answer goes through the protocol's own reader, as ``geosleuth score``
    would read it; without geocoding, place names alone locate nothing. A protocol that scores
    whole files by its own rules (WhereBench: a choice letter, a path of levels) reads any style.
    """
    chosen = get_protocol(protocol)
    if chosen.file_scorer:
        return True
    prediction, _, _ = prediction_from_row({"response": load_style(style).answer_example}, chosen, None)
    if RELEASED_ORIGIN in prediction.recovered:  # G3 puts an unread answer at (0, 0)
        return False
    if prediction.has_coords:
        return True
    return chosen.geocode and any(prediction.level(level) for level in LEVELS)


def implied_style(protocol: str) -> str | None:
    """The style whose answer format is the protocol's own (``twm`` → ``thinking_with_map``)."""
    return next((s for s in available_styles() if load_style(s).protocol == protocol), None)


def check_style(style: str, protocol: str) -> None:
    """Refuse a style whose answers ``protocol`` cannot read, naming both and what would fit."""
    if reads(protocol, style):
        return
    fitting = [s for s in available_styles() if reads(protocol, s)]
    others = [p for p in PROTOCOLS if reads(p, style)]
    raise StyleMismatch(
        f"prompt style {style!r} answers in a format protocol {protocol!r} cannot read "
        f"(every answer would score 0): use prompt style {' or '.join(fitting)} with protocol "
        f"{protocol!r}, or score {style!r} answers with one of the protocols {', '.join(others)}"
    )


def choose_style(style: str | None, protocol: str, tools: bool) -> str:
    """The style to prompt with, checked against the protocol.

    The one given; else the protocol's own style when the run uses tools (``twm`` with tools:
    Thinking with Map and its map tools) or when the plain default cannot be read; else
    ``direct`` (a plain generate) or ``geovista`` (the agent loop with tools).
    """
    if style is None:
        fallback = TOOLS_STYLE if tools else PLAIN_STYLE
        implied = implied_style(protocol)
        style = implied if implied and (tools or not reads(protocol, fallback)) else fallback
    load_style(style)  # an unknown style fails with the available names
    check_style(style, protocol)
    return style
