"""How to install an optional extra, said one way everywhere: no release is published yet, so a
user of a checkout needs the editable form (issue 41)."""

from __future__ import annotations


def install_line(extra: str) -> str:
    """``pip install 'geosleuth[EXTRA]'`` and, for a checkout, ``pip install -e '.[EXTRA]'``."""
    return f"pip install 'geosleuth[{extra}]' (in a checkout: pip install -e '.[{extra}]')"
