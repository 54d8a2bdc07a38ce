"""User code named on the command line or in a config file, as ``package.module:attribute``.

One loader for every such hook (the agent function of ``eval --agent-fn``, a reward's verifier
or similarity function, a verl tool registry factory), so each gives the same clear errors.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def load_callable(dotted: str, what: str = "function") -> Callable[..., Any]:
    """``package.module:attribute`` (or ``package.module.attribute``) -> the object.

    Raises ``ValueError`` naming ``what`` was asked for when the path is malformed, does not
    import, or names something that cannot be called.
    """
    module, sep, attr = dotted.partition(":")
    if not sep:
        module, _, attr = dotted.rpartition(".")
    if not module or not attr:
        raise ValueError(f"the {what} must look like 'package.module:function', got {dotted!r}")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import {what} {dotted!r}: {exc}") from exc
    if not callable(obj):
        raise ValueError(f"{what} {dotted!r} is not callable")
    return obj  # type: ignore[no-any-return]
