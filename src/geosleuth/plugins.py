"""User code named on the command line or in a config file, as ``package.module:attribute``.

One loader for every such hook (the agent function of ``eval --agent-fn``, a reward's verifier
or similarity function, a verl tool registry factory, a registry entry named by its path), so
each gives the same clear errors.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def load_object(dotted: str, what: str = "object") -> Any:
    """``package.module:attribute`` (or ``package.module.attribute``) -> the object.

    Raises ``ValueError`` naming ``what`` was asked for when the path is malformed or does not
    import.
    """
    module, sep, attr = dotted.partition(":")
    if not sep:
        module, _, attr = dotted.rpartition(".")
    if not module or not attr:
        raise ValueError(f"the {what} must look like 'package.module:name', got {dotted!r}")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import {what} {dotted!r}: {exc}") from exc
    return obj


def load_callable(dotted: str, what: str = "function") -> Callable[..., Any]:
    """``package.module:function`` -> the function; ``ValueError`` also when it cannot be called."""
    obj = load_object(dotted, what)
    if not callable(obj):
        raise ValueError(f"{what} {dotted!r} is not callable")
    return obj  # type: ignore[no-any-return]
