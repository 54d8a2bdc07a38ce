"""The one loader of user hooks (agent functions, verifiers, similarity functions, tool factories)."""

from __future__ import annotations

import pytest

from geosleuth.plugins import load_callable


def test_both_spellings_load_and_every_failure_names_what_was_asked_for() -> None:
    import os.path

    assert load_callable("os.path:join") is os.path.join
    assert load_callable("os.path.join") is os.path.join
    with pytest.raises(ValueError, match="verifier must look like 'package.module:name'"):
        load_callable("nodots", "verifier")
    with pytest.raises(ValueError, match="cannot import agent function 'no_such_mod:fn'"):
        load_callable("no_such_mod:fn", "agent function")
    with pytest.raises(ValueError, match="cannot import similarity function 'os.path:nothing'"):
        load_callable("os.path:nothing", "similarity function")
    with pytest.raises(ValueError, match="'os:sep' is not callable"):
        load_callable("os:sep")
