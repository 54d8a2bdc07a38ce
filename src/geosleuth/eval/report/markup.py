"""The HTML report's markup: Jinja2 templates shipped as package data (``templates/``),
rendered with autoescaping on, so every value a template prints is escaped unless it is
`markupsafe.Markup` built here from the report's own constants (its stylesheet, script and policy).

Templates are written one element a line for reading; the line breaks and leading indentation
are layout, not content (`_Compact`), so a page is the compact HTML it always was. Text that
needs a space keeps it on one line.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from jinja2.ext import Extension
from markupsafe import Markup

from geosleuth.core.records import cap_text

TEMPLATES = "templates"
MAX_HTML_TEXT_CHARS = 20_000
"""Longest model or tool text written into a page; the full text stays in trajectories.jsonl."""


class _Compact(Extension):
    """Drops each template line's leading indentation and its line break before parsing."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        return "".join(line.lstrip() for line in source.splitlines())


def capped(value: Any, note: bool = True) -> str:
    """Text cut to `MAX_HTML_TEXT_CHARS`, saying (``note``) where the full text is when cut."""
    text, original = cap_text("" if value is None else str(value), MAX_HTML_TEXT_CHARS)
    if original is None or not note:
        return text
    return f"{text} (shown cut: the full {original:,} characters are in trajectories.jsonl)"


def pct(value: Any) -> str:
    """A percentage cell: two decimals, or a dash when the figure is absent."""
    return "–" if value is None else f"{float(value):.2f}"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The one environment: autoescaped, strict about undefined names, ``None`` printed as nothing."""
    env = Environment(
        loader=PackageLoader("geosleuth.eval.report", TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        finalize=lambda value: "" if value is None else value,
        extensions=[_Compact],
    )
    env.filters.update(capped=capped, pct=pct, json=_json)
    env.tests["prefixed"] = lambda value, prefix: str(value).startswith(prefix)
    return env


def render(template: str, **context: Any) -> str:
    """A template of ``templates/`` rendered with ``context``."""
    return environment().get_template(template).render(**context)


def asset(name: str) -> str:
    """A text file shipped beside the templates (the stylesheet, the script)."""
    return resources.files("geosleuth.eval.report").joinpath(TEMPLATES, name).read_text(encoding="utf-8")


def trusted(text: str) -> Markup:
    """The report's own markup (its stylesheet, script, policy): printed as is."""
    return Markup(text)  # noqa: S704 - built from the package's constants, never from run data
