"""The scoring-protocol registry, light enough for ``score --help`` to list its names.

geosleuth's protocols are defined in ``scoring.protocols``; WhereBench, which sits above the
scoring layer, registers its own through the ``geosleuth.protocols`` entry point as any
third-party package would.
"""

from __future__ import annotations

from typing import Any

from geosleuth.registry import Registry

PROTOCOLS: Registry[Any] = Registry(  # of scoring.protocols.ScoringProtocol, which sets its validator
    "protocol",
    "geosleuth.protocols",
    builtins=dict.fromkeys(
        (
            "twm",
            "osv5m",
            "spotagent",
            "geovista",
            "geoclip",
            "g3",
            "pigeon",
            "geoestimation",
            "default",
        ),
        "geosleuth.scoring.protocols",
    )
    | {"geoguessr-map": "geosleuth.scoring.geoguessr_map_files"},
)
"""Every scoring protocol by name: ``PROTOCOLS.register("mine", ScoringProtocol(...))`` adds one."""
