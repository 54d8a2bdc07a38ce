"""The distance and protocol tests pass on any CPU: rerun them on NumPy's baseline SIMD path.

NumPy dispatches sin/cos/arcsin to the widest SIMD kernels the CPU has (AVX-512 here, AVX2 or
SSE elsewhere), and their last bits differ. ``NPY_DISABLE_CPU_FEATURES`` turns every
dispatchable feature off, which is what a CPU without them computes; a test that asserted
bit-exact floats from vectorised math fails here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from numpy._core import _multiarray_umath as umath

ROOT = Path(__file__).resolve().parents[2]
FILES = ["tests/scoring/test_scoring_protocols.py", "tests/core/test_core_geo.py"]


def test_protocol_and_distance_tests_pass_on_the_baseline_simd_path() -> None:
    extra = [f for f in umath.__cpu_dispatch__ if umath.__cpu_features__.get(f)]
    if not extra:
        pytest.skip("this CPU has no SIMD features above NumPy's baseline: nothing to switch off")
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": " ".join(extra)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    probe = (
        "from numpy._core import _multiarray_umath as u; "
        "print(sum(bool(u.__cpu_features__[f]) for f in u.__cpu_dispatch__))"
    )
    off = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert off.stdout.strip() == "0", off.stderr  # the switch really took effect
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", *FILES],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
