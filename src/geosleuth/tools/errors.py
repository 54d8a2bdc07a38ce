"""Tool errors and the process-wide set of secrets that every error message is scrubbed of.

This module imports nothing from the rest of the package, so that `base` (tool declaration),
`config` (settings) and `http` (provider plumbing) can all use it without importing each other.
"""

from __future__ import annotations

import threading

_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()


class ToolError(Exception):
    """An error whose message is shown to the model (bad arguments, provider refusal, …)."""


class ProviderError(ToolError):
    """A provider refused or failed; the message is safe to show to the model and to log."""


class MissingKeyError(ProviderError):
    """A real provider was selected but no API key is configured."""


class UnsafeUrlError(ToolError):
    """A URL outside http(s) or pointing at a private network was refused."""


def register_secret(secret: str | None) -> None:
    """Remember a key so that `redact` (and the httpx log filter) can scrub it."""
    if secret and len(secret) >= 4:
        with _SECRETS_LOCK:
            _SECRETS.add(secret)


def has_secrets() -> bool:
    return bool(_SECRETS)


def redact(text: str) -> str:
    """Replace every registered secret in ``text`` by ``***`` (longest first)."""
    with _SECRETS_LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for secret in secrets:
        text = text.replace(secret, "***")
    return text
