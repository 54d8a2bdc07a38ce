"""Secret redaction as pure functions: by value (the configured keys) and by pattern.

Values catch a key wherever it appears, also percent- or JSON-encoded; patterns catch keys
nobody registered: ``Authorization: Bearer …`` and other auth headers, ``key=`` style query
parameters, JSON fields named like secrets, and the shapes of well-known key formats.
Every pattern is a single pass with no nested quantifiers, so redaction is linear in the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

REDACTED = "***"

MIN_SECRET_CHARS = 4
"""Registered values shorter than this are ignored (redacting "abc" everywhere mangles text)."""

MIN_ENV_SECRET_CHARS = 8
"""Values of secret-named environment variables shorter than this are not treated as keys."""

_ENV_SECRET_SUFFIXES = ("KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS")
_ENV_NOT_SECRET_SUFFIXES = ("_ENV", "_FILE", "_PATH", "_URL", "MAX_TOKEN", "_TOKENS")

_HEADER = re.compile(
    r"(?i)\b(proxy-authorization|authorization|x-api-key|x-goog-api-key|api-key|x-auth-token"
    r"|x-subscription-token|x-access-token|ocp-apim-subscription-key)"
    r"""(["']?[ \t]*[:=][ \t]*["']?)(?:(?:bearer|basic|token)[ \t]+)?[^\s"'\\,;&}]+"""
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)[ \t]+[A-Za-z0-9._~+/=-]{6,}")
_QUERY = re.compile(
    r"(?i)(?<![\w-])(key|api_?key|apikey|api-key|access_token|auth_token|token|client_secret"
    r"|password|sig|signature)=[^&#\s\"'\\<>]+"
)
_JSON_FIELD = re.compile(
    r'(?i)("(?:api_?key|apikey|x-api-key|authorization|access_token|auth_token|client_secret'
    r'|password|secret|token)"[ \t]*:[ \t]*")(?:[^"\\]|\\.){1,4096}"'
)
_KEY_SHAPES = re.compile(
    r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{30,}|tvly-[A-Za-z0-9_-]{16,}"
    r"|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9-]{10,})"
)


def secret_forms(secret: str) -> set[str]:
    """The ways a key shows up in text: as is, percent-encoded (URLs), JSON-escaped (bodies)."""
    forms = {secret, quote(secret, safe=""), quote(secret, safe="/"), json.dumps(secret)[1:-1]}
    return {f for f in forms if len(f) >= MIN_SECRET_CHARS}


def env_secret_values(environ: Mapping[str, str]) -> list[str]:
    """Values of variables named like keys (``OPENAI_API_KEY``, ``GEOSLEUTH_*_API_KEY``, ``HF_TOKEN``,
    any ``*_KEY`` / ``*_SECRET`` / ``*_PASSWORD``), except names of variables and files (``*_ENV``)."""
    out = []
    for name, value in environ.items():
        upper = name.upper()
        if (
            len(value) >= MIN_ENV_SECRET_CHARS
            and upper.endswith(_ENV_SECRET_SUFFIXES)
            and not upper.endswith(_ENV_NOT_SECRET_SUFFIXES)
        ):
            out.append(value)
    return out


def redact_values(text: str, secrets: Iterable[str]) -> str:
    """Every known key (in each of its forms) replaced, the longest first."""
    forms = sorted({f for s in secrets if len(s) >= MIN_SECRET_CHARS for f in secret_forms(s)}, key=len)
    for form in reversed(forms):
        if form in text:
            text = text.replace(form, REDACTED)
    return text


_HEADER_HINTS = ("authoriz", "api-key", "-token", "subscription-key")
_QUERY_HINTS = ("key=", "token=", "secret=", "password=", "sig=", "signature=")
_SHAPE_HINTS = ("sk-", "AIza", "tvly-", "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "xox")


def redact_patterns(text: str) -> str:
    """Keys nobody registered, found by the places they sit in (headers, query strings, JSON).

    Each pattern runs only when a plain substring it needs is present (most text has none).
    """
    lower = text.lower()
    if any(h in lower for h in _HEADER_HINTS):
        text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    if "bearer" in lower or "basic" in lower:
        text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    if "=" in text and any(h in lower for h in _QUERY_HINTS):
        text = _QUERY.sub(lambda m: f"{m.group(1)}={REDACTED}", text)
    if '":' in text or '" :' in text:
        text = _JSON_FIELD.sub(_json_field, text)
    if any(h in text for h in _SHAPE_HINTS):
        text = _KEY_SHAPES.sub(REDACTED, text)
    return text


_PLACEHOLDERS = frozenset({f'{REDACTED}"', '<redacted>"', '"'})


def _json_field(match: re.Match[str]) -> str:
    """A secret-named JSON field's value replaced; placeholders other redactors wrote are kept."""
    value = match.group(0)[len(match.group(1)) :]
    return match.group(0) if value in _PLACEHOLDERS else f'{match.group(1)}{REDACTED}"'


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Text with every key gone, by value and by pattern."""
    if not text:
        return text
    return redact_patterns(redact_values(text, secrets))


def redact_value(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A JSON-like value with every string redacted (keys of mappings included)."""
    secrets = tuple(secrets)

    def walk(node: Any, depth: int) -> Any:
        if isinstance(node, str):
            return redact(node, secrets)
        if depth > 200:  # deeper than any record we write: redact its text form instead
            return redact(json.dumps(node, default=str), secrets)
        if isinstance(node, Mapping):
            return {
                walk(k, depth + 1) if isinstance(k, str) else k: walk(v, depth + 1) for k, v in node.items()
            }
        if isinstance(node, list | tuple):
            return [walk(v, depth + 1) for v in node]
        return node

    return walk(value, 0)
