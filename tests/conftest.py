"""Settings for the whole suite.

Hypothesis gets no per-example deadline: its default 200 ms turns one example slowed by a busy
CI runner into a FlakyFailure. Tests that guard running time measure the call's own CPU time
(`geosleuth.testing.cpu_seconds`) against a bound that only a super-linear regression can pass.
"""

from hypothesis import settings

settings.register_profile("geosleuth", deadline=None)
settings.load_profile("geosleuth")
