"""The process's known secrets and the redaction every exit applies (files, stdout, logs, pages).

Keys are known by value from two places: every key a client or provider was configured with
(`register_secret`) and every environment variable named like a key (``OPENAI_API_KEY``,
``GEOSLEUTH_*_API_KEY``, ``HF_TOKEN`` …), read at each call so keys set after start-up count.
Patterns (`geosleuth.core.redact`) catch keys that were never configured here.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from geosleuth.core.redact import MIN_SECRET_CHARS, env_secret_values, redact, redact_value

_REGISTERED: set[str] = set()
_LOCK = threading.Lock()


def register_secret(secret: str | None) -> None:
    """Remember a key so that every later redaction scrubs it."""
    if secret and len(secret) >= MIN_SECRET_CHARS:
        with _LOCK:
            _REGISTERED.add(secret)


_ENV_CACHE: tuple[Any, tuple[str, ...]] = (None, ())


def _env_secrets() -> tuple[str, ...]:
    """Key-named environment values, recomputed only when the environment changed (its raw
    bytes are cheap to compare; decoding every variable on each call is not)."""
    global _ENV_CACHE
    raw = getattr(os.environ, "_data", None)  # CPython's encoded store behind os.environ
    cached_state, values = _ENV_CACHE
    if raw is None or raw != cached_state:
        values = tuple(env_secret_values(os.environ))
        _ENV_CACHE = (dict(raw) if raw is not None else None, values)
    return values


def known_secrets() -> tuple[str, ...]:
    with _LOCK:
        registered = tuple(_REGISTERED)
    return registered + _env_secrets()


def redact_text(text: str) -> str:
    """``text`` with every known key and every key-shaped credential replaced by ``***``."""
    return redact(text, known_secrets()) if text else text


def redact_json(value: Any) -> Any:
    """A JSON-like value (a record dump, a config) with every string redacted."""
    return redact_value(value, known_secrets())


class RedactingFilter(logging.Filter):
    """A log record's final message redacted (httpx logs request URLs with their query keys)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a bad format string is the handler's to report
            return True
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


_installed = False


def install_log_redaction() -> None:
    """Redact every log record this process creates, whichever logger or handler it reaches."""
    global _installed
    with _LOCK:
        if _installed:
            return
        _installed = True
    factory = logging.getLogRecordFactory()
    scrub = RedactingFilter()

    def make_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        scrub.filter(record)
        return record

    logging.setLogRecordFactory(make_record)
