"""Tool errors and the process-wide set of secrets that every error message is scrubbed of.

This module imports only `geosleuth.secrets` (which imports nothing from `tools`), so that
`base` (tool declaration), `config` (settings) and `http` (provider plumbing) can all use it
without importing each other.
"""

from __future__ import annotations

from geosleuth import secrets


class ToolError(Exception):
    """An error whose message is shown to the model (bad arguments, provider refusal, …)."""


class ProviderError(ToolError):
    """A provider refused or failed; the message is safe to show to the model and to log."""


class MissingKeyError(ProviderError):
    """A real provider was selected but no API key is configured."""


class UnsafeUrlError(ToolError):
    """A URL outside http(s) or pointing at a private network was refused."""


def register_secret(secret: str | None) -> None:
    """Remember a key so that every later redaction (errors, logs, records, pages) scrubs it."""
    secrets.register_secret(secret)


def redact(text: str) -> str:
    """``text`` with every known key (registered, or in a key-named environment variable) and
    every key-shaped credential replaced by ``***``."""
    return secrets.redact_text(text)
