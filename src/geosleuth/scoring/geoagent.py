"""GeoAgent's evaluation (§5.1): City / Region / Country / Continent accuracy and GeoScore.

The four levels are distance thresholds on the haversine distance with R = 6371 km, the radius
GeoAgent measures with (paper Table 5, released ``_calculate_distance``), counted as d < k; GeoScore
is 5000·exp(−10·d / 18050 km) (``core.metrics.geoscore_points``). Answers are ``Country; Region;
Place`` without coordinates, so they are geocoded first: through OpenCage, as the paper does, when
``GEOSLEUTH_OPENCAGE_API_KEY`` (or an OpenCage key in the tool settings) is set, else through the
offline gazetteer, and the report says which.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

from geosleuth.core.released import GEOAGENT_RADIUS_KM

log = logging.getLogger(__name__)

GEOAGENT_LEVELS: dict[str, float] = {"city": 25.0, "region": 200.0, "country": 750.0, "continent": 2500.0}
"""GeoAgent's accuracy levels and the distance (km) each stands for."""
GEOAGENT_THRESHOLDS: tuple[float, ...] = tuple(GEOAGENT_LEVELS.values())
RADIUS_KM = GEOAGENT_RADIUS_KM


def opencage_geocoder() -> Callable[[str, str | None], tuple[float, float] | None] | None:
    """``(address, country) -> (lat, lon)`` through the OpenCage provider when a key is set, else
    None (the caller falls back to the offline gazetteer). Results are remembered per address."""
    from geosleuth.tools import build_registry
    from geosleuth.tools.config import ToolSettings

    settings = ToolSettings.load()
    if not settings.api_key("opencage"):
        return None
    settings = settings.model_copy(
        update={"providers": settings.providers.model_copy(update={"geocode": "opencage"})}
    )
    registry = build_registry(settings, names=["geocode"])
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="opencage")
    log.info("geoagent: answers geocoded through OpenCage")

    @lru_cache(maxsize=100_000)
    def geocode(address: str, country: str | None = None) -> tuple[float, float] | None:
        result = pool.submit(asyncio.run, registry.call("geocode", {"address": address})).result()
        if not result.ok or not result.data:
            log.debug("OpenCage found nothing for %r: %s", address[:80], result.error)
            return None
        first = result.data[0]
        return float(first["lat"]), float(first["lon"])

    return geocode
