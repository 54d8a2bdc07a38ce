"""Start-up figures time geosleuth as installed: its modules already compiled to bytecode.

``pip install`` compiles a wheel's modules, and an editable install compiles each module on its
first import, unless ``PYTHONDONTWRITEBYTECODE`` is set (as on some CI images), when every run
compiles ~100 modules again (+100-150 ms). The start-up benches compile first so that they
measure start-up, not the compiler.
"""

from __future__ import annotations

import compileall
import importlib.util
import os
from pathlib import Path


def compile_geosleuth() -> str:
    """Write geosleuth's bytecode (whatever the environment says) and say what was done."""
    spec = importlib.util.find_spec("geosleuth")
    if spec is None or spec.origin is None:
        return "geosleuth is not importable here; bytecode not compiled"
    package = Path(spec.origin).parent
    compileall.compile_dir(package, quiet=1)
    flag = " (PYTHONDONTWRITEBYTECODE is set here)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else ""
    return f"geosleuth's modules compiled to bytecode first, as an install does{flag}"
