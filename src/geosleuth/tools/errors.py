"""Tool errors, in a module that imports nothing from `tools`, so that `base` (tool declaration),
`config` (settings) and `http` (provider plumbing) can all use them without importing each other.
Their messages are scrubbed of keys by `geosleuth.secrets`.
"""

from __future__ import annotations


class ToolError(Exception):
    """An error whose message is shown to the model (bad arguments, provider refusal, …)."""


class ProviderError(ToolError):
    """A provider refused or failed; the message is safe to show to the model and to log."""


class MissingKeyError(ProviderError):
    """A real provider was selected but no API key is configured."""


class UnsafeUrlError(ToolError):
    """A URL outside http(s) or pointing at a private network was refused."""
