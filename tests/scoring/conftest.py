"""Shared fakes for scoring tests: reverse geocoders that need no gazetteer build."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

ReverseFn = Callable[[NDArray[np.float64], NDArray[np.float64]], Mapping[str, Any]]


def rg_package_reverse(lats: NDArray[np.float64], lons: NDArray[np.float64]) -> Mapping[str, Any]:
    """The ``reverse_geocoder`` package itself: the reference OSV-5M used."""
    import reverse_geocoder as rg

    res = rg.search(list(zip(lats.tolist(), lons.tolist(), strict=True)), mode=1, verbose=False)
    return {
        "city": [r["name"] for r in res],
        "admin1": [r["admin1"] for r in res],
        "admin2": [r["admin2"] for r in res],
        "country_code": [r["cc"] for r in res],
    }


@pytest.fixture
def rg_reverse() -> ReverseFn:
    return rg_package_reverse
